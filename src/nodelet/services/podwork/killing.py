"""Stopping a whole pod, the kubelet's killPodWithSyncResult: every container still running,
in parallel (`containers.ContainerRunner.stop`: preStop, SIGTERM, SIGKILL after the grace
period), a sidecar only after the containers it must outlive have stopped
(`podactions.termination_prerequisites`), then every sandbox of the pod — a NOTREADY one
too: containerd keeps a dead sandbox's network namespace and IP until it is stopped.

Used for a pod's termination, a sandbox being replaced, a pod completed but for its sidecars,
and a pod in a terminal phase.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableSet

from nodelet.adapters.cri import client as cri
from nodelet.model.core import events as ev
from nodelet.model.core import generation, podactions, pods, runtime
from nodelet.services.podwork import containers
from nodelet.services.status import recording


class PodKiller:
    def __init__(
        self,
        *,
        client: cri.RuntimeClient,
        recorder: recording.EventRecorder,
        runner: containers.ContainerRunner,
        host_ip: str,
        host_ips: tuple[str, ...],
    ) -> None:
        """`host_ip`, `host_ips`: the node's addresses (a hostNetwork pod's IPs, which its
        preStop hooks are sent to)."""
        self._client = client
        self._recorder = recorder
        self._runner = runner
        self._host_ip = host_ip
        self._host_ips = host_ips

    async def kill(self, pod: pods.Pod, state: runtime.PodRuntime, *, grace: float,
                   stopped: MutableSet[runtime.SandboxID]) -> None:
        """Stop what runs of `pod` in `state` within `grace` seconds; `stopped`: the sandboxes
        stopped already (not asked again), to which this adds the ones it stops. The first
        container that fails to stop raises, after every other one was given its stop."""
        running = [c for c in state.containers if c.state is not runtime.ContainerState.EXITED]
        specs_by_name = {c.name: c for c in (*pod.spec.init_containers, *pod.spec.containers,
                                             *pod.spec.ephemeral_containers)}
        ips = generation.pod_ips(pod, state.sandboxes, self._host_ip, self._host_ips)
        order = _TerminationOrder(pod, running)
        for container in running:
            self._recorder.record(pod, "Normal", ev.KILLING, f"Stopping container {container.name}",
                                  container=container.name)
        results = await asyncio.gather(*(
            order.stopped_after(c.name, self._runner.stop(
                pod, specs_by_name.get(c.name), c, grace=grace, pod_ip=ips[0] if ips else "",
                turn=order.turn(c.name)))
            for c in running
        ), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise failed[0]
        for sandbox in state.sandboxes:
            if sandbox.id not in stopped:
                await self._client.stop_pod_sandbox(sandbox.id)
                stopped.add(sandbox.id)


class _TerminationOrder:
    """One pod stop's ordering (`podactions.termination_prerequisites`): an event per running
    container, set once it has stopped; a sidecar's turn waits for its prerequisites' events,
    at most for the grace it has left."""

    def __init__(self, pod: pods.Pod, running: list[runtime.ContainerInfo]) -> None:
        names = {c.name for c in running}
        self._waits = podactions.termination_prerequisites(pod, names)
        self._stopped = {name: asyncio.Event() for name in names}

    def turn(self, name: str) -> Callable[[float], Awaitable[None]] | None:
        prerequisites = [self._stopped[n] for n in self._waits.get(name, ())]
        if not prerequisites:
            return None

        async def wait(within: float) -> None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within):
                    for event in prerequisites:
                        await event.wait()
        return wait

    async def stopped_after(self, name: str, stop: Awaitable[None]) -> None:
        try:
            await stop
        finally:
            self._stopped[name].set()
