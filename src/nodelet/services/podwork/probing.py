"""The probe manager: startup, liveness and readiness probes of running containers.

As the kubelet's prober workers (`pkg/kubelet/prober/worker.go`), each probe of each container
instance runs as its own loop — here a named task in the agent's `TaskGroup`
(`probe:<kind>:<namespace>/<pod>:<container>`). A loop waits for the startup probe to succeed
(liveness and readiness only), then for `initialDelaySeconds` after the container started, then
makes one attempt every `periodSeconds`, each bounded by `timeoutSeconds`. Results go through
the pure threshold machine in `model.core.probes`:

- readiness toggles after `successThreshold` / `failureThreshold` equal attempts in a row;
- startup reports success once and stops; liveness and startup report a failure after
  `failureThreshold` failures and then stop: the container must be restarted;
- every failed attempt records a Warning `Unhealthy` event (`Liveness probe failed: <output>`;
  the recorder aggregates repeats); every change of a reported result calls `on_change(uid)`,
  so the pod worker syncs and publishes the new status.

The pod worker reads the results (`readiness`, `started`, `liveness_failed`) when it generates
the status and decides which containers to kill. A new container ID given to `ensure` replaces
the old instance's loops and results; `forget_*` cancel the loops (without waiting; `stop`
waits for all of them).

Exceptions: none escape. Probes were validated when the manifest was read; attempts that cannot
be made (unknown port name, exec in a container that is gone) are "errored" — they record an
`Unhealthy` event and, as in the kubelet, do not count towards a threshold.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from nodelet.adapters import probes_net
from nodelet.adapters.cri import client as cri
from nodelet.helpers import tasks
from nodelet.model.core import events as ev
from nodelet.model.core import handlers, pods, probes, runtime
from nodelet.services.status import recording

log = logging.getLogger(__name__)

# The runtime kills an exec probe itself at timeoutSeconds (and network probes stop there); this
# outer bound only guards against a runtime or a peer that never answers.
ATTEMPT_SLACK = 2.0
# The kubelet keeps at most 10 KiB of a probe's output.
MAX_OUTPUT = 10 * 1024


class ExecRunner(Protocol):
    """What probes need of the CRI client (`cri.RuntimeClient` is one)."""

    async def exec_sync(
        self, container_id: runtime.ContainerID, cmd: list[str] | tuple[str, ...], timeout_s: int
    ) -> runtime.ExecResult: ...


@dataclass
class _Instance:
    """The probes of one container instance (one container ID)."""

    pod: pods.Pod
    container: pods.Container
    container_id: runtime.ContainerID
    pod_ip: str
    started_at: float  # wall-clock seconds since the epoch
    parsed: probes.ContainerProbes
    states: dict[probes.ProbeKind, probes.ProbeState] = field(default_factory=dict)
    # Set once the startup probe succeeded (at once without one): the other probes wait on it.
    started: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()


class ProbeManager:
    """Probe loops for every probed container; one instance for the agent."""

    def __init__(
        self,
        *,
        client: ExecRunner,
        group: tasks.TaskGroup,
        recorder: recording.EventRecorder,
        on_change: Callable[[pods.PodUID], None],
        clock: Callable[[], float] = time.time,
        on_attempt: Callable[[pods.Pod, str, probes.ProbeKind, str], None] | None = None,
    ) -> None:
        """`on_attempt(pod, container, kind, outcome)` is told of every attempt (metrics)."""
        self._client = client
        self._group = group
        self._recorder = recorder
        self._on_change = on_change
        self._on_attempt = on_attempt
        self._clock = clock
        self._pods: dict[pods.PodUID, dict[str, _Instance]] = {}

    # -- the pod worker's side ----------------------------------------------------------------

    def ensure(
        self,
        pod: pods.Pod,
        container: pods.Container,
        container_id: runtime.ContainerID,
        *,
        pod_ip: str,
        started_at: float,
    ) -> None:
        """Probe this container instance (no-op if it is probed already).

        `started_at` is when the container started (wall-clock seconds since the epoch, as
        CRI's `started_at / 1e9`); initialDelaySeconds count from there. A container without
        probes is not tracked.
        """
        current = self._pods.get(pod.uid, {}).get(container.name)
        if current is not None and current.container_id == container_id:
            return
        parsed = probes.container_probes(container)
        self.forget_container(pod.uid, container.name)
        if not parsed.kinds:
            return
        instance = _Instance(pod, container, container_id, pod_ip, started_at, parsed)
        instance.states = {kind: probes.initial_state(kind) for kind in parsed.kinds}
        if parsed.startup is None:
            instance.started.set()
        self._pods.setdefault(pod.uid, {})[container.name] = instance
        for kind in parsed.kinds:
            name = f"probe:{kind}:{pod.full_name}:{container.name}"
            instance.tasks.append(self._group.spawn(name, self._loop(instance, kind)))
        log.info("probing container %s of pod %s (%s): %s", container.name, pod.full_name,
                 container_id[:13], ", ".join(parsed.kinds),
                 extra={"pod": pod.full_name, "pod_uid": str(pod.uid)})

    def forget_container(self, uid: pods.PodUID, name: str) -> None:
        """Stop probing the container (its loops are cancelled) and drop its results."""
        instances = self._pods.get(uid, {})
        instance = instances.pop(name, None)
        if instance is not None:
            instance.cancel()
        if not instances:
            self._pods.pop(uid, None)

    def forget_pod(self, uid: pods.PodUID) -> None:
        """Stop probing every container of the pod and drop their results."""
        for instance in self._pods.pop(uid, {}).values():
            instance.cancel()

    async def stop(self) -> None:
        """Cancel every probe loop and wait until all of them have ended."""
        running = [t for i in self._instances() for t in i.tasks]
        for uid in list(self._pods):
            self.forget_pod(uid)
        await asyncio.gather(*running, return_exceptions=True)

    def readiness(self, uid: pods.PodUID) -> dict[str, bool]:
        """Readiness by container name, for containers with a readiness probe (False until
        it succeeded)."""
        return {name: i.states["readiness"].result == "success"
                for name, i in self._pods.get(uid, {}).items() if "readiness" in i.states}

    def started(self, uid: pods.PodUID) -> dict[str, bool]:
        """Start-up by container name, for containers with a startup probe (True once it
        succeeded)."""
        return {name: i.states["startup"].result == "success"
                for name, i in self._pods.get(uid, {}).items() if "startup" in i.states}

    def liveness_failed(self, uid: pods.PodUID) -> dict[str, probes.ProbeKind]:
        """Containers whose liveness or startup probe failed, with the one that failed: they
        must be restarted (within that probe's terminationGracePeriodSeconds)."""
        failed: dict[str, probes.ProbeKind] = {}
        for name, instance in self._pods.get(uid, {}).items():
            kind = next((k for k in ("startup", "liveness")
                         if k in instance.states and instance.states[k].on_hold), None)
            if kind is not None:
                failed[name] = kind
        return failed

    def _instances(self) -> list[_Instance]:
        return [i for instances in self._pods.values() for i in instances.values()]

    # -- the loops ------------------------------------------------------------------------

    async def _loop(self, instance: _Instance, kind: probes.ProbeKind) -> None:
        probe = instance.parsed.of(kind)
        assert probe is not None
        if kind != "startup":
            await instance.started.wait()
        delay = instance.started_at + probe.initial_delay_seconds - self._clock()
        await asyncio.sleep(max(delay, 0.0))
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            attempt = await self._attempt(instance, probe)
            if self._apply(instance, kind, probe, attempt):
                return
            await asyncio.sleep(max(began + probe.period_seconds - loop.time(), 0.0))

    def _apply(
        self,
        instance: _Instance,
        kind: probes.ProbeKind,
        probe: handlers.Probe,
        attempt: probes.Attempt,
    ) -> bool:
        """Count one attempt; True when this loop is done (started, or failed for good)."""
        if self._on_attempt is not None:
            self._on_attempt(instance.pod, instance.container.name, kind, attempt.outcome)
        if attempt.outcome == "warning":
            self._recorder.record(instance.pod, "Warning", ev.PROBE_WARNING,
                                  probes.warning_message(kind, attempt.output),
                                  container=instance.container.name)
        elif attempt.outcome != "success":
            message = probes.failure_message(
                kind, attempt.output, errored=attempt.outcome == "error"
            )
            self._recorder.record(instance.pod, "Warning", ev.UNHEALTHY, message,
                                  container=instance.container.name)
        before = instance.states[kind]
        after = probes.observe(before, attempt.outcome, kind=kind, probe=probe)
        instance.states[kind] = after
        if (after.result, after.on_hold) != (before.result, before.on_hold):
            self._changed(instance, kind, after)
        return after.on_hold or (kind == "startup" and after.result == "success")

    def _changed(
        self, instance: _Instance, kind: probes.ProbeKind, state: probes.ProbeState
    ) -> None:
        pod = instance.pod
        log.info("%s probe of container %s in pod %s: %s", kind, instance.container.name,
                 pod.full_name, state.result,
                 extra={"pod": pod.full_name, "pod_uid": str(pod.uid), "probe": kind})
        if kind == "startup" and state.result == "success":
            instance.started.set()
        try:
            self._on_change(pod.uid)
        except Exception:
            log.exception("probe change callback failed for pod %s", pod.full_name)

    # -- one attempt ----------------------------------------------------------------------

    async def _attempt(self, instance: _Instance, probe: handlers.Probe) -> probes.Attempt:
        timeout_s = probe.timeout_seconds
        try:
            async with asyncio.timeout(timeout_s + ATTEMPT_SLACK):
                return await self._run_handler(instance, probe.handler, timeout_s)
        except TimeoutError:
            return probes.Attempt("failure", f"probe did not answer within {timeout_s}s")
        except probes.ProbeError as exc:
            return probes.Attempt("error", exc.message)

    async def _run_handler(
        self, instance: _Instance, handler: handlers.Handler, timeout_s: int
    ) -> probes.Attempt:
        if isinstance(handler, handlers.ExecAction):
            return await self._exec(instance.container_id, handler.command, timeout_s)
        if isinstance(handler, handlers.HTTPGetAction):
            port = probes.resolve_port(handler.port, instance.container)
            url = probes.http_url(handler, pod_ip=instance.pod_ip, port=port)
            return await probes_net.http_get(url, headers=handler.headers, timeout_s=timeout_s)
        if isinstance(handler, handlers.TCPSocketAction):
            port = probes.resolve_port(handler.port, instance.container)
            host = handler.host or instance.pod_ip
            return await probes_net.tcp_socket(host, port, timeout_s=timeout_s)
        return await probes_net.grpc_health(
            instance.pod_ip, handler.port, handler.service, timeout_s=timeout_s
        )

    async def _exec(
        self, container_id: runtime.ContainerID, command: tuple[str, ...], timeout_s: int
    ) -> probes.Attempt:
        try:
            result = await self._client.exec_sync(container_id, command, timeout_s)
        except cri.DeadlineExceeded:
            # The runtime killed the command at timeoutSeconds (kubelet: ExecProbeTimeout).
            return probes.Attempt("failure", f'command "{" ".join(command)}" timed out')
        except cri.CriError as exc:
            return probes.Attempt("error", exc.detail)
        output = (result.stdout + result.stderr)[:MAX_OUTPUT].decode(errors="replace")
        return probes.Attempt("success" if result.exit_code == 0 else "failure", output)
