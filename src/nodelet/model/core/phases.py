"""Container statuses and the pod phase, from what the runtime reports.

`container_statuses` is the kubelet's convertToAPIContainerStatuses and `pod_phase` its getPhase
(`pkg/kubelet/kubelet_pods.go`), both pure: probe results and the reasons of failed starts
(CrashLoopBackOff, ImagePullBackOff...) are passed in by the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from nodelet.model.core import pods, restartall, restarts, runtime, status, volumes

# Waiting reasons of containers the runtime does not have yet (kubelet_pods.go).
CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"

_TERMINAL: frozenset[status.PodPhase] = frozenset({"Succeeded", "Failed"})
Statuses = Sequence[status.ContainerStatus]
# Whether a container exited with the given code is restarted.
_Restarts = Callable[[int], bool]


# --- the phase -------------------------------------------------------------------------------


@dataclass
class _Counts:
    pending_init: int = 0
    pending_sidecars: int = 0
    failed_init: int = 0
    # Failed init containers and stopped app containers that will not be restarted.
    failed_init_final: int = 0
    unknown: int = 0
    running: int = 0
    waiting: int = 0
    stopped: int = 0
    stopped_final: int = 0
    succeeded: int = 0


def _exited_before(s: status.ContainerStatus) -> bool:
    return isinstance(s.last_state, status.ContainerStateTerminated)


def _exit_code(s: status.ContainerStatus) -> int | None:
    """The exit code of a container terminated now, or waiting after it terminated."""
    for state in (s.state, s.last_state):
        if isinstance(state, status.ContainerStateTerminated):
            return state.exit_code
        if not isinstance(state, status.ContainerStateWaiting):
            return None
    return None


def _count_init(c: _Counts, s: status.ContainerStatus | None, restart: _Restarts) -> None:
    """A regular (run-to-completion) init container."""
    code = None if s is None or isinstance(s.state, status.ContainerStateRunning) else (
        _exit_code(s))
    if code is None:
        c.pending_init += 1
    elif code != 0:
        c.failed_init += 1
        c.failed_init_final += int(not (restart(code) or (
            s is not None and restartall.removed_by_reset(s))))


def _count_sidecar(c: _Counts, s: status.ContainerStatus | None) -> None:
    """A restartable init container: terminated ones are ignored, it will be restarted."""
    if s is None:
        c.unknown += 1
    elif isinstance(s.state, status.ContainerStateRunning):
        c.running += 1
        c.pending_sidecars += int(not s.started)
    elif isinstance(s.state, status.ContainerStateWaiting) and not _exited_before(s):
        c.pending_sidecars += 1
        c.waiting += 1


def _count_regular(c: _Counts, s: status.ContainerStatus | None, restart: _Restarts) -> None:
    if s is None:
        c.unknown += 1
    elif isinstance(s.state, status.ContainerStateRunning):
        c.running += 1
    elif (code := _exit_code(s)) is None:
        c.waiting += 1
    else:
        c.stopped += 1
        c.stopped_final += int(not (restart(code) or restartall.removed_by_reset(s)))
        c.succeeded += int(isinstance(s.state, status.ContainerStateTerminated) and code == 0)


def _count(pod: pods.Pod, init_statuses: Statuses, container_statuses: Statuses) -> _Counts:
    counts = _Counts()
    inits = {s.name: s for s in init_statuses}
    for container in pod.spec.init_containers:
        if container.restart_policy == "Always":
            _count_sidecar(counts, inits.get(container.name))
        else:
            _count_init(counts, inits.get(container.name), _restarts(pod, container))
    regular = {s.name: s for s in container_statuses}
    for container in pod.spec.containers:
        _count_regular(counts, regular.get(container.name), _restarts(pod, container))
    return counts


def _restarts(pod: pods.Pod, container: pods.Container) -> _Restarts:
    """A container restarts by its policies, or with all the pod's containers when its exit
    code's rule says so (which counts as restartable in the kubelet's getPhase)."""
    return lambda code: (restarts.should_restart(pod.spec.restart_policy, container, code)
                         or restartall.restarts_all(container, code))


def _all_stopped_phase(pod: pods.Pod, c: _Counts, *, terminal: bool) -> status.PodPhase:
    # A terminating pod's containers are never restarted, whatever its restart policy
    # (kubelet 1.27+ getPhase with podIsTerminal; static pods excepted, as there).
    if terminal and not pod.is_static:
        return "Succeeded" if c.stopped == c.succeeded else "Failed"
    if c.stopped != c.stopped_final:
        return "Running"  # some are being restarted (ContainerRestartRules' getPhase)
    return "Succeeded" if c.stopped == c.succeeded else "Failed"


def pod_phase(
    pod: pods.Pod,
    init_statuses: Statuses,
    container_statuses: Statuses,
    *,
    old_phase: status.PodPhase | None = None,
    terminal: bool = False,
) -> status.PodPhase:
    """The pod phase, as the kubelet's getPhase; a terminal `old_phase` is kept for good.
    `terminal`: the pod is being terminated and its containers were stopped (podIsTerminal)."""
    if old_phase in _TERMINAL:
        return old_phase
    c = _count(pod, init_statuses, container_statuses)
    if c.failed_init_final:
        return "Failed"
    started = any(
        isinstance(s.state, status.ContainerStateRunning | status.ContainerStateTerminated)
        for s in container_statuses
        if s.name in {x.name for x in pod.spec.containers}
    )
    # After a node reboot every container is exited and a new sandbox is coming: sidecars that
    # have not started do not make the pod Pending once regular containers have run.
    if c.pending_init or (c.pending_sidecars and not started) or c.waiting:
        return "Pending"
    if c.running and not c.unknown:
        return "Running"
    if not c.running and c.stopped and not c.unknown:
        return _all_stopped_phase(pod, c, terminal=terminal)
    return "Pending"


# --- container statuses ----------------------------------------------------------------------


def _time(ns: int) -> datetime | None:
    """CRI nanoseconds since the epoch → an aware UTC datetime; 0 means "not set"."""
    if ns <= 0:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC)


def _run_time(ns: int) -> datetime:
    """A time of a container that has run (or tried to): as the kubelet converts CRI's
    nanoseconds (time.Unix(0, ns)), 0 is the epoch, which its status shows as
    1970-01-01T00:00:00Z — the start of a container whose start failed (StartError)."""
    return datetime.fromtimestamp(max(ns, 0) / 1e9, UTC)


def _container_id(info: runtime.ContainerInfo, runtime_name: str) -> str:
    return f"{runtime_name}://{info.id}"


def _terminated(info: runtime.ContainerInfo, runtime_name: str) -> status.ContainerStateTerminated:
    # containerd reports "Completed", "Error" or "OOMKilled"; fill in when a runtime does not.
    reason = info.reason or ("Completed" if info.exit_code == 0 else "Error")
    return status.ContainerStateTerminated(
        exit_code=info.exit_code,
        reason=reason,
        message=info.message,
        started_at=_run_time(info.started_at),
        finished_at=_run_time(info.finished_at),
        container_id=_container_id(info, runtime_name),
    )


def _state(info: runtime.ContainerInfo, runtime_name: str) -> status.ContainerStateValue:
    if info.state is runtime.ContainerState.RUNNING:
        return status.ContainerStateRunning(started_at=_time(info.started_at))
    if info.state is runtime.ContainerState.EXITED:
        return _terminated(info, runtime_name)
    if info.state is runtime.ContainerState.CREATED:
        return status.ContainerStateWaiting(reason=CONTAINER_CREATING)
    # UNKNOWN reads as waiting without a reason, as in the kubelet.
    return status.ContainerStateWaiting()


@dataclass(frozen=True)
class _Inputs:
    restart_policy: pods.RestartPolicy
    runtime_name: str
    ready: Mapping[str, bool]
    started: Mapping[str, bool]
    waiting: Mapping[str, tuple[str, str]]
    default_reason: str
    # Whether the pod's runtime handler makes mounts recursively read-only.
    rro_supported: bool = False
    # The pod is being deleted (deletionTimestamp set).
    deleting: bool = False


def _one_status(
    container: pods.Container,
    attempts: Sequence[runtime.ContainerInfo],
    inputs: _Inputs,
    *,
    is_init: bool,
) -> status.ContainerStatus:
    override = inputs.waiting.get(container.name)
    waiting = status.ContainerStateWaiting(*override) if override else None
    mounts = volume_mount_statuses(container, rro_supported=inputs.rro_supported)
    if not attempts:
        return status.ContainerStatus(
            name=container.name,
            image=container.image,
            state=waiting or status.ContainerStateWaiting(reason=inputs.default_reason),
            started=False,
            volume_mounts=mounts,
        )
    newest = attempts[0]
    state = _state(newest, inputs.runtime_name)
    last: status.ContainerStateValue | None = None
    if len(attempts) > 1 and attempts[1].state is runtime.ContainerState.EXITED:
        last = _terminated(attempts[1], inputs.runtime_name)
    if waiting is not None and not isinstance(state, status.ContainerStateRunning) \
            and _to_restart(container, newest, inputs.restart_policy, is_init=is_init,
                            deleting=inputs.deleting):
        # A failed start (back-off, pull error): the exited attempt becomes the last state.
        if isinstance(state, status.ContainerStateTerminated):
            last = state
        state = waiting
    running = isinstance(state, status.ContainerStateRunning)
    started = running and inputs.started.get(container.name, container.startup_probe is None)
    if is_init and container.restart_policy != "Always":
        ready = isinstance(state, status.ContainerStateTerminated) and state.exit_code == 0
    else:
        ready = started and inputs.ready.get(container.name, container.readiness_probe is None)
    return status.ContainerStatus(
        name=container.name,
        image=container.image,
        state=state,
        ready=ready,
        started=started,
        restart_count=max(newest.attempt, len(attempts) - 1),
        image_id=newest.image_ref,
        container_id=_container_id(newest, inputs.runtime_name),
        last_state=last,
        user=newest.user,
        stop_signal=newest.stop_signal,
        volume_mounts=mounts,
    )


def volume_mount_statuses(container: pods.Container, *,
                          rro_supported: bool) -> tuple[status.VolumeMountStatus, ...]:
    """The container's volume mounts as the kubelet's status lists them (RecursiveReadOnly
    Mounts, GA): every mount in spec order; a read-only one says whether it is recursively
    read-only, as the kubelet's resolveRecursiveReadOnly decides for the runtime handler (a
    request it cannot grant reads as Disabled)."""
    return tuple(
        status.VolumeMountStatus(
            name=m.name, mount_path=m.mount_path, read_only=m.read_only,
            recursive_read_only=("Enabled" if volumes.recursive_granted(
                m.recursive_read_only, m.read_only, rro_supported, m.mount_propagation)
                else "Disabled") if m.read_only else "")
        for m in container.volume_mounts)


def _to_restart(container: pods.Container, newest: runtime.ContainerInfo,
                policy: pods.RestartPolicy, *, is_init: bool, deleting: bool = False) -> bool:
    """Whether a container is to run again, so that why its last start failed shows as its
    waiting state (the kubelet's convertToAPIContainerStatuses, ShouldContainerBeRestarted):
    one that exited for good — a start error under `restartPolicy: Never`, an init container
    that succeeded — stays terminated with the runtime's reason (StartError, exit code 128);
    nothing of a pod being deleted runs again."""
    if deleting:
        return False
    if newest.state is not runtime.ContainerState.EXITED:
        return True
    if is_init and newest.exit_code == 0:  # sidecars too: done is done
        return False
    if is_init and container.restart_policy == "Always":
        return True
    return restarts.should_restart(policy, container, newest.exit_code)


def container_statuses(
    pod: pods.Pod,
    containers: Sequence[runtime.ContainerInfo],
    *,
    ready: Mapping[str, bool] | None = None,
    waiting: Mapping[str, tuple[str, str]] | None = None,
    started: Mapping[str, bool] | None = None,
    runtime_name: str = "containerd",
    rro_supported: bool = False,
) -> tuple[tuple[status.ContainerStatus, ...], tuple[status.ContainerStatus, ...]]:
    """(init container statuses, regular container statuses), each in spec order.

    `containers` are all runtime containers of the pod, several attempts per name: the newest
    is the current state, the one before it the last state. `ready` / `started`: probe results
    by container name; without one, a running container is started unless it has a startup
    probe and ready unless it has a readiness probe. `waiting`: (reason, message) of containers
    that failed to start, e.g. ("CrashLoopBackOff", "back-off 10s restarting failed ...");
    containers the runtime lacks are otherwise waiting with ContainerCreating (PodInitializing
    in pods with init containers). `rro_supported`: the pod's runtime handler makes mounts
    recursively read-only (their `volumeMounts` statuses say so).
    """
    by_name: dict[str, list[runtime.ContainerInfo]] = {}
    for info in sorted(containers, key=lambda c: (c.created_at, c.attempt), reverse=True):
        by_name.setdefault(info.name, []).append(info)
    inputs = _Inputs(
        restart_policy=pod.spec.restart_policy,
        runtime_name=runtime_name,
        ready=ready or {},
        started=started or {},
        waiting=waiting or {},
        default_reason=POD_INITIALIZING if pod.spec.init_containers else CONTAINER_CREATING,
        rro_supported=rro_supported,
        deleting=pod.deletion_timestamp is not None,
    )
    inits = tuple(
        _one_status(c, by_name.get(c.name, ()), inputs, is_init=True)
        for c in pod.spec.init_containers
    )
    regular = tuple(
        _one_status(c, by_name.get(c.name, ()), inputs, is_init=False) for c in pod.spec.containers
    )
    return inits, regular


def ephemeral_container_statuses(
    pod: pods.Pod,
    containers: Sequence[runtime.ContainerInfo],
    *,
    waiting: Mapping[str, tuple[str, str]] | None = None,
    runtime_name: str = "containerd",
    rro_supported: bool = False,
) -> tuple[status.ContainerStatus, ...]:
    """The ephemeral containers' statuses, in spec order, as `container_statuses` builds the
    others; never ready and without `started`: no prober looks at them (the kubelet's
    UpdatePodStatus sets both for init and regular containers only)."""
    by_name: dict[str, list[runtime.ContainerInfo]] = {}
    for info in sorted(containers, key=lambda c: (c.created_at, c.attempt), reverse=True):
        by_name.setdefault(info.name, []).append(info)
    # The pod's policy, as the kubelet's status reads it for ephemeral containers too.
    inputs = _Inputs(restart_policy=pod.spec.restart_policy, runtime_name=runtime_name,
                     ready={}, started={}, waiting=waiting or {},
                     default_reason=POD_INITIALIZING if pod.spec.init_containers
                     else CONTAINER_CREATING, rro_supported=rro_supported,
                     deleting=pod.deletion_timestamp is not None)
    return tuple(
        dataclasses.replace(_one_status(c, by_name.get(c.name, ()), inputs, is_init=False),
                            ready=False, started=None)
        for c in pod.spec.ephemeral_containers)
