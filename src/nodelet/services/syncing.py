"""The runtime manager: one sync (or termination) of one pod against the CRI runtime.

`PodSyncer.sync` follows the kubelet's SyncPod: publish the status as the runtime shows it;
decide (purely, `model.sandboxes`) whether a new sandbox is needed; if so kill what is left
of the old one and run a new one; publish again at once, so PodReadyToStartContainers turns
True before any image is pulled or container started; then bring init and app containers to
what the spec asks. Only the pod's worker calls it, so calls for one pod never overlap.

Failures that should be retried raise `SyncError`; the worker retries with jittered back-off.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from nodelet import settings as settings_mod
from nodelet.adapters.cri import client as cri
from nodelet.helpers import backoff
from nodelet.model import events as ev
from nodelet.model import generation, pods, runtime, sandboxes, specs
from nodelet.services import probing, recording, relisting, statuses, volumes

logger = logging.getLogger(__name__)

# How long a container must run before its restart back-off starts over (kubelet: 10 min).
BACKOFF_RESET_AFTER = 600.0


Mounts = Mapping[str, tuple[runtime.Mount, ...]]


class SyncError(Exception):
    """A sync step failed; the pod is retried after the sync back-off."""


@dataclass
class _Restart:
    backoff: backoff.Backoff
    not_before: float = 0.0  # monotonic time before which the container must not restart


@dataclass
class PodWork:
    """What a pod worker remembers between syncs (none of it is in the runtime)."""

    last_sandbox_error: str | None = None
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)
    restarts: dict[str, _Restart] = field(default_factory=dict)
    # Monotonic time of the last RunPodSandbox return (for the detection-latency measure).
    sandbox_returned_at: float | None = None


@dataclass(frozen=True)
class NodeFacts:
    host_ip: str
    host_dns: runtime.DNSConfig
    logs_root: Path


class PodSyncer:
    def __init__(
        self,
        *,
        client: cri.RuntimeClient,
        relister: relisting.Relister,
        statuses: statuses.StatusManager,
        volumes: volumes.VolumeManager,
        probes: probing.ProbeManager,
        recorder: recording.EventRecorder,
        settings: settings_mod.Settings,
        node: NodeFacts,
        clock: Callable[[], datetime],
        observer: SyncObserver | None = None,
    ) -> None:
        self._client = client
        self._relister = relister
        self._statuses = statuses
        self._volumes = volumes
        self._probes = probes
        self._recorder = recorder
        self._settings = settings
        self._node = node
        self._clock = clock
        self._observer = observer or SyncObserver()

    # -- status ---------------------------------------------------------------------------

    def publish(self, pod: pods.Pod, state: relisting.PodRuntime, work: PodWork) -> None:
        """Generate the pod's status from the runtime's view and hand it to the status manager."""
        status = generation.generate_status(
            pod,
            sandboxes=state.sandboxes,
            containers=state.containers,
            old=self._statuses.get(pod.uid),
            last_sandbox_error=work.last_sandbox_error,
            waiting=work.waiting,
            host_ip=self._node.host_ip,
            now=self._clock(),
            gates=self._settings.gates,
            ready=self._probes.readiness(pod.uid),
            started=self._probes.started(pod.uid),
        )
        self._statuses.set_status(pod, status)

    # -- sync -----------------------------------------------------------------------------

    async def sync(self, pod: pods.Pod, work: PodWork) -> float | None:
        """One sync; returns seconds until the pod wants another one (None: only on events)."""
        state = await self._relister.refresh_pod(pod.uid)
        self.publish(pod, state, work)
        change = sandboxes.sandbox_change(pod, state.sandboxes)
        if change.needed and not sandboxes.should_create_sandbox(
            pod, change, has_container_history=bool(state.containers)
        ):
            return None
        # Volumes come first, as in the kubelet: a missing ConfigMap keeps the sandbox from
        # being created, so PodReadyToStartContainers stays False and says why.
        mounts = await self._prepare_volumes(pod, state, work)
        if change.needed:
            state = await self._replace_sandbox(pod, state, change, work)
            # Downward API files may carry the pod IP, which only the new sandbox knows.
            mounts = await self._prepare_volumes(pod, state, work)
        sandbox = state.sandboxes[0]
        wake_in = await self._sync_containers(pod, sandbox, state, work, mounts)
        state = await self._relister.refresh_pod(pod.uid)
        self.publish(pod, state, work)
        return wake_in

    async def _prepare_volumes(
        self, pod: pods.Pod, state: relisting.PodRuntime, work: PodWork
    ) -> Mounts:
        ips = generation.pod_ips(pod, state.sandboxes, self._node.host_ip)
        try:
            mounts = await self._volumes.prepare(
                pod, pod_ip=ips[0] if ips else "", host_ip=self._node.host_ip
            )
        except volumes.VolumeError as exc:
            self._observer.volume_failed(pod, exc)
            work.last_sandbox_error = exc.event_message
            self._recorder.record(pod, "Warning", ev.FAILED_MOUNT, exc.event_message)
            self.publish(pod, state, work)
            raise SyncError(f"volumes of {pod.full_name}: {exc}") from exc
        if work.last_sandbox_error and work.last_sandbox_error.startswith("MountVolume"):
            work.last_sandbox_error = None
        return mounts

    async def _replace_sandbox(
        self,
        pod: pods.Pod,
        state: relisting.PodRuntime,
        change: sandboxes.SandboxChange,
        work: PodWork,
    ) -> relisting.PodRuntime:
        if change.sandbox_to_kill is not None:
            self._recorder.record(
                pod, "Normal", ev.SANDBOX_CHANGED,
                "Pod sandbox changed, it will be killed and re-created.",
            )
        if state.sandboxes:
            await self._kill(pod, state, grace=self._grace(pod))
            work.restarts.clear()
        sandbox_id = await self._run_sandbox(pod, change.attempt, work)
        try:
            await self._client.pod_sandbox_status(sandbox_id)
        except cri.CriError as exc:
            self._recorder.record(
                pod, "Warning", ev.FAILED_POD_SANDBOX_STATUS,
                f"Unable to get pod sandbox status: {exc}",
            )
            raise SyncError(f"pod sandbox status of {pod.full_name}: {exc}") from exc
        state = await self._relister.refresh_pod(pod.uid)
        # The kubelet's OnPodSandboxReady: the condition turns True now, before pulls and
        # container starts, not at the end of this sync.
        self.publish(pod, state, work)
        self._observer.sandbox_ready(pod, work)
        await self._remove_old_sandboxes(state)
        return state

    async def _run_sandbox(self, pod: pods.Pod, attempt: int, work: PodWork) -> runtime.SandboxID:
        config = self._sandbox_config(pod, attempt)
        await asyncio.to_thread(Path(config.log_directory).mkdir, parents=True, exist_ok=True)
        started = time.monotonic()
        self._observer.sandbox_starting(pod)
        try:
            sandbox_id = await self._client.run_pod_sandbox(
                config, runtime_handler=pod.spec.runtime_class_name
            )
        except cri.CriError as exc:
            self._observer.sandbox_failed(pod, exc, time.monotonic() - started)
            work.last_sandbox_error = f"failed to create pod sandbox: {exc.detail}"
            self._recorder.record(
                pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                f"Failed to create pod sandbox: {exc.detail}",
            )
            state = await self._relister.refresh_pod(pod.uid)
            self.publish(pod, state, work)
            raise SyncError(f"create pod sandbox for {pod.full_name}: {exc.detail}") from exc
        work.sandbox_returned_at = time.monotonic()
        self._observer.sandbox_created(pod, work.sandbox_returned_at - started)
        work.last_sandbox_error = None
        logger.info("created sandbox %s for pod %s (attempt %d)", sandbox_id, pod.full_name,
                    attempt)
        return sandbox_id

    def _sandbox_config(self, pod: pods.Pod, attempt: int) -> runtime.SandboxConfig:
        return specs.sandbox_config(
            pod, attempt=attempt, logs_root=self._node.logs_root, host_dns=self._node.host_dns
        )

    async def _remove_old_sandboxes(self, state: relisting.PodRuntime) -> None:
        """Keep the newest sandbox and one predecessor (its attempt number carries on)."""
        for old in state.sandboxes[2:]:
            if old.state is runtime.SandboxState.NOTREADY:
                await self._client.remove_pod_sandbox(old.id)

    # -- containers -----------------------------------------------------------------------

    async def _sync_containers(
        self,
        pod: pods.Pod,
        sandbox: runtime.SandboxInfo,
        state: relisting.PodRuntime,
        work: PodWork,
        mounts: Mounts,
    ) -> float | None:
        wake_in: list[float] = []
        for container in pod.spec.init_containers:
            latest = _latest(state, sandbox.id, container.name)
            if container.restart_policy == "Always":  # a sidecar: started, then kept running
                delay = await self._keep_running(pod, sandbox, container, latest, state, work,
                                                 mounts, kind="init")
                wake_in += [delay] if delay is not None else []
                continue
            if latest is not None and latest.state is runtime.ContainerState.EXITED \
                    and latest.exit_code == 0:
                continue
            delay = await self._keep_running(pod, sandbox, container, latest, state, work,
                                             mounts, kind="init")
            return delay  # init containers run one at a time, in order
        for container in pod.spec.containers:
            latest = _latest(state, sandbox.id, container.name)
            delay = await self._keep_running(pod, sandbox, container, latest, state, work,
                                             mounts, kind="regular")
            wake_in += [delay] if delay is not None else []
        return min(wake_in) if wake_in else None

    async def _keep_running(
        self,
        pod: pods.Pod,
        sandbox: runtime.SandboxInfo,
        container: pods.Container,
        latest: runtime.ContainerInfo | None,
        state: relisting.PodRuntime,
        work: PodWork,
        mounts: Mounts,
        *,
        kind: str,
    ) -> float | None:
        """Start the container if it is missing or exited and should restart; keep it probed."""
        if latest is not None and latest.state is runtime.ContainerState.RUNNING:
            if container.name not in self._probes.liveness_failed(pod.uid):
                self._maybe_reset_backoff(container.name, latest, work)
                self._probes.ensure(pod, container, latest.id, pod_ip=sandbox.ip or
                                    self._node.host_ip, started_at=latest.started_at / 1e9)
                return None
            latest = await self._kill_unhealthy(pod, container, latest)
        if latest is not None and latest.state is runtime.ContainerState.EXITED:
            if not _should_restart(pod, container, latest, kind):
                self._probes.forget_container(pod.uid, container.name)
                return None
            wait = self._restart_wait(pod, container.name, work)
            if wait > 0:
                return wait
        attempt = _next_attempt(state, container.name)
        await self._start_container(pod, sandbox, container, attempt, work,
                                    mounts.get(container.name, ()), kind=kind)
        return None

    async def _kill_unhealthy(
        self, pod: pods.Pod, container: pods.Container, latest: runtime.ContainerInfo
    ) -> runtime.ContainerInfo:
        """A liveness (or startup) probe gave up on the container: stop it, to be restarted."""
        probe = container.liveness_probe or container.startup_probe or {}
        grace = probe.get("terminationGracePeriodSeconds")
        self._recorder.record(
            pod, "Normal", ev.KILLING,
            f"Container {container.name} failed liveness probe, will be restarted",
        )
        self._probes.forget_container(pod.uid, container.name)
        await self._client.stop_container(
            latest.id, int(grace) if isinstance(grace, int) else int(self._grace(pod))
        )
        return await self._client.container_status(latest.id)

    def _restart_wait(self, pod: pods.Pod, name: str, work: PodWork) -> float:
        """Seconds left in the container's back-off (CrashLoopBackOff), or 0 to restart now."""
        sync = self._settings.sync
        restart = work.restarts.setdefault(
            name, _Restart(backoff.Backoff(sync.restart_backoff, sync.restart_backoff_max))
        )
        left = restart.not_before - time.monotonic()
        if left > 0:
            work.waiting[name] = (
                "CrashLoopBackOff",
                f"back-off {restart.backoff.current:.0f}s restarting failed "
                f"container={name} pod={pod.name}_{pod.namespace}({pod.uid})",
            )
            return left
        restart.not_before = time.monotonic() + restart.backoff.next_delay()
        return 0.0

    def _maybe_reset_backoff(
        self, name: str, latest: runtime.ContainerInfo, work: PodWork
    ) -> None:
        restart = work.restarts.get(name)
        running_for = time.time() - latest.started_at / 1e9
        if restart is not None and running_for > BACKOFF_RESET_AFTER:
            restart.backoff.reset()
            restart.not_before = 0.0

    async def _start_container(
        self,
        pod: pods.Pod,
        sandbox: runtime.SandboxInfo,
        container: pods.Container,
        attempt: int,
        work: PodWork,
        mounts: tuple[runtime.Mount, ...],
        *,
        kind: str,
    ) -> None:
        if not await self._ensure_image(pod, container, work):
            return
        config = specs.container_config(pod, container, attempt=attempt, kind=kind,
                                        mounts=mounts)
        sandbox_config = self._sandbox_config(pod, sandbox.attempt)
        try:
            container_id = await self._client.create_container(sandbox.id, config, sandbox_config)
        except cri.CriError as exc:
            work.waiting[container.name] = ("CreateContainerError", exc.detail)
            self._recorder.record(pod, "Warning", ev.FAILED, f"Error: {exc.detail}")
            raise SyncError(f"create container {container.name}: {exc.detail}") from exc
        self._recorder.record(pod, "Normal", ev.CREATED, f"Created container {container.name}")
        try:
            await self._client.start_container(container_id)
        except cri.CriError as exc:
            work.waiting[container.name] = ("RunContainerError", exc.detail)
            self._recorder.record(pod, "Warning", ev.FAILED, f"Error: {exc.detail}")
            raise SyncError(f"start container {container.name}: {exc.detail}") from exc
        work.waiting.pop(container.name, None)
        self._recorder.record(pod, "Normal", ev.STARTED, f"Started container {container.name}")
        await self._remove_old_instances(pod.uid, container.name, keep=container_id)

    async def _ensure_image(
        self, pod: pods.Pod, container: pods.Container, work: PodWork
    ) -> bool:
        """The image is present (pulling it if the policy says so); False: waiting, try later."""
        present = await self._client.image_status(container.image) is not None
        policy = container.image_pull_policy
        if present and policy != "Always":
            return True
        if policy == "Never":
            message = (f'Container image "{container.image}" is not present with pull policy '
                       "of Never")
            work.waiting[container.name] = ("ErrImageNeverPull", message)
            self._recorder.record(pod, "Warning", "ErrImageNeverPull", message)
            return False
        self._recorder.record(pod, "Normal", ev.PULLING, f'Pulling image "{container.image}"')
        started = time.monotonic()
        try:
            await self._client.pull_image(container.image)
        except cri.CriError as exc:
            work.waiting[container.name] = ("ErrImagePull", exc.detail)
            self._recorder.record(
                pod, "Warning", ev.FAILED,
                f'Failed to pull image "{container.image}": {exc.detail}',
            )
            raise SyncError(f"pull {container.image}: {exc.detail}") from exc
        took = time.monotonic() - started
        self._recorder.record(
            pod, "Normal", ev.PULLED,
            f'Successfully pulled image "{container.image}" in {took:.3f}s',
        )
        return True

    async def _remove_old_instances(
        self, uid: pods.PodUID, name: str, *, keep: runtime.ContainerID
    ) -> None:
        """Keep the new instance and the one before it (its state is the pod's lastState)."""
        state = await self._relister.refresh_pod(uid)
        same = [c for c in state.containers if c.name == name and c.id != keep]
        for old in same[1:]:
            if old.state is runtime.ContainerState.EXITED:
                await self._client.remove_container(old.id)

    # -- termination ----------------------------------------------------------------------

    def _grace(self, pod: pods.Pod) -> float:
        if pod.deletion_grace_period_seconds is not None:
            return float(pod.deletion_grace_period_seconds)
        return float(pod.spec.termination_grace_period_seconds)

    async def terminate(self, pod: pods.Pod, work: PodWork) -> None:
        """Stop containers (grace period), stop and remove the sandbox; publish the last status."""
        # No liveness kill or Unhealthy event while the pod shuts down.
        self._probes.forget_pod(pod.uid)
        state = await self._relister.refresh_pod(pod.uid)
        try:
            await self._kill(pod, state, grace=self._grace(pod))
            state = await self._relister.refresh_pod(pod.uid)
            self.publish(pod, state, work)
            for container in state.containers:
                await self._client.remove_container(container.id)
            for sandbox in state.sandboxes:
                await self._client.remove_pod_sandbox(sandbox.id)
            await self._volumes.cleanup(pod.uid)
        except (cri.CriError, volumes.VolumeError) as exc:
            self._recorder.record(pod, "Warning", ev.FAILED_KILL_POD, f"error killing pod: {exc}")
            raise SyncError(f"kill pod {pod.full_name}: {exc}") from exc
        self.publish(pod, await self._relister.refresh_pod(pod.uid), work)

    async def _kill(self, pod: pods.Pod, state: relisting.PodRuntime, *, grace: float) -> None:
        running = [c for c in state.containers if c.state is not runtime.ContainerState.EXITED]
        for container in running:
            self._recorder.record(pod, "Normal", ev.KILLING, f"Stopping container {container.name}")
        # Containers stop in parallel, each with the pod's grace period (SIGTERM, then SIGKILL).
        await asyncio.gather(
            *(self._client.stop_container(c.id, int(grace)) for c in running)
        )
        for sandbox in state.sandboxes:
            if sandbox.state is runtime.SandboxState.READY:
                await self._client.stop_pod_sandbox(sandbox.id)


class SyncObserver:
    """Hooks for measurements (metrics, benchmarks); the default observes nothing."""

    def sandbox_starting(self, pod: pods.Pod) -> None:
        return None

    def sandbox_created(self, pod: pods.Pod, seconds: float) -> None:
        return None

    def sandbox_failed(self, pod: pods.Pod, error: cri.CriError, seconds: float) -> None:
        return None

    def sandbox_ready(self, pod: pods.Pod, work: PodWork) -> None:
        return None

    def volume_failed(self, pod: pods.Pod, error: volumes.VolumeError) -> None:
        return None


def _latest(
    state: relisting.PodRuntime, sandbox_id: runtime.SandboxID, name: str
) -> runtime.ContainerInfo | None:
    return next(
        (c for c in state.containers if c.sandbox_id == sandbox_id and c.name == name), None
    )


def _next_attempt(state: relisting.PodRuntime, name: str) -> int:
    attempts = [c.attempt for c in state.containers if c.name == name]
    return max(attempts) + 1 if attempts else 0


def _should_restart(
    pod: pods.Pod, container: pods.Container, latest: runtime.ContainerInfo, kind: str
) -> bool:
    if container.restart_policy == "Always":
        return True
    policy = pod.spec.restart_policy
    if kind == "init":
        # Init containers are retried unless the pod never restarts anything.
        return policy != "Never" and latest.exit_code != 0
    if policy == "Always":
        return True
    return policy == "OnFailure" and latest.exit_code != 0
