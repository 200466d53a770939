"""What a pod worker does next (pure): the kubelet's computePodActions, as values.

The worker reads the runtime (`runtime.PodRuntime`), asks these functions what to do and only
executes the answer. Two questions, because the second one needs the sandbox the first one may
create:

- `pod_action`: stop the pod, wait for the network, create a sandbox, or sync containers;
- `container_actions`: for each container of the sandbox in use, in the kubelet's order (init
  containers one at a time, sidecars kept running, then the app containers): keep it running,
  kill it (its liveness or startup probe gave up), start it (with its attempt number), wait out
  its CrashLoopBackOff, or leave it exited.

Times are POSIX seconds from the worker's injected clock (`now`); back-off state comes in as
`RestartState` (counted from the exited instance's end) and the worker steps it when a
`Start` says `restart=True`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Literal

from nodelet.model.core import pods, restarts, runtime, sandboxes, specs

# How long a container must run before its restart back-off starts over (kubelet: 10 min).
BACKOFF_RESET_AFTER = 600.0
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"

ContainerKind = Literal["init", "regular", "ephemeral"]

# -- the pod ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopPod:
    """Stop what still runs and create nothing: the pod is terminal, or its sandbox is gone
    and must not be re-created (`restartPolicy: Never` after its containers ran)."""


@dataclass(frozen=True)
class WaitForNetwork:
    """The runtime's pod network is not ready: as the kubelet, no sandbox is attempted."""

    problem: str


@dataclass(frozen=True)
class CreateSandbox:
    """Kill what is left of the old sandbox (if any) and run a new one (`change.attempt`)."""

    change: sandboxes.SandboxChange


@dataclass(frozen=True)
class SyncContainers:
    """The sandbox in use is fine: bring the containers to the spec."""


PodAction = StopPod | WaitForNetwork | CreateSandbox | SyncContainers


def pod_action(
    pod: pods.Pod, state: runtime.PodRuntime, *, terminal: bool, network_problem: str | None
) -> PodAction:
    """The pod-level decision, in the kubelet's order: a terminal pod keeps nothing running;
    a pod network that cannot be set up blocks every non-hostNetwork pod; then the sandbox
    decision (`sandboxes.sandbox_change`)."""
    if terminal:
        return StopPod()
    if network_problem and not pod.spec.host_network:
        return WaitForNetwork(network_problem)
    change = sandboxes.sandbox_change(pod, state.sandboxes)
    if not change.needed:
        return SyncContainers()
    if not sandboxes.should_create_sandbox(pod, change,
                                           has_container_history=bool(state.containers)):
        return StopPod()
    return CreateSandbox(change)


def something_runs(state: runtime.PodRuntime, *, stopped: Set[runtime.SandboxID]) -> bool:
    """Whether a stopped pod still has a container not exited, or a sandbox not yet stopped
    (`stopped`: those this worker stopped; a NOTREADY sandbox keeps its network until then)."""
    return any(c.state is not runtime.ContainerState.EXITED for c in state.containers) or any(
        s.id not in stopped for s in state.sandboxes)


def grace_period(pod: pods.Pod) -> float:
    """Seconds a stopping container gets: the deletion's grace period, else the spec's."""
    if pod.deletion_grace_period_seconds is not None:
        return float(pod.deletion_grace_period_seconds)
    return float(pod.spec.termination_grace_period_seconds)


def termination_prerequisites(
    pod: pods.Pod, running: Set[str]
) -> dict[str, tuple[str, ...]]:
    """Who waits for whom while a pod with sidecars stops (the kubelet's terminationOrdering):
    a sidecar's SIGTERM waits, within its grace period, until every running app container and
    the sidecar declared right after it (if that one runs) have exited — sidecars stop after
    the app, in reverse order. Containers without an entry wait for nothing; so does every
    container of a pod without sidecars."""
    sidecars = [c.name for c in pod.spec.init_containers if c.restart_policy == "Always"]
    if not sidecars:
        return {}
    apps = tuple(c.name for c in pod.spec.containers if c.name in running)
    order: dict[str, tuple[str, ...]] = {}
    following: str | None = None  # the sidecar declared next; one not running is no wait
    for name in reversed(sidecars):
        if name in running:
            order[name] = (*apps, *((following,) if following in running else ()))
        following = name
    return order


def deadline_left(pod: pods.Pod, start_time: float | None, now: float) -> float | None:
    """Seconds left of `activeDeadlineSeconds` counted from the pod's start (None: no
    deadline or no start yet); 0 or less once it has passed."""
    deadline = pod.spec.active_deadline_seconds
    if deadline is None or start_time is None:
        return None
    return deadline - (now - start_time)


# -- containers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestartState:
    """A container's restart back-off: `delay` is the back-off its last restart chose; the
    next restart waits that long after the instance's exit (the kubelet's doBackOff counts
    from the container's FinishedAt, not from its start)."""

    delay: float = 0.0


@dataclass(frozen=True)
class KeepRunning:
    """Running and alive: keep it probed; `reset_backoff` once it ran long enough."""

    container: pods.Container
    kind: ContainerKind
    latest: runtime.ContainerInfo
    reset_backoff: bool


@dataclass(frozen=True)
class KillUnhealthy:
    """Its liveness (or startup: `probe`) probe gave up: stop it within `grace` seconds, then
    start it again (`after_probe_kill`) if `restart` — by the restart policies alone, no rule:
    the kubelet's computePodActions decides before the container has an exit code."""

    container: pods.Container
    kind: ContainerKind
    latest: runtime.ContainerInfo
    grace: float
    probe: str = "liveness"
    restart: bool = True


@dataclass(frozen=True)
class Replace:
    """Running, but created from another definition (a pod update changed its image): stop
    it within `grace` seconds and start the new definition at once (the kubelet's
    computePodActions: "definition changed, will be restarted")."""

    container: pods.Container
    kind: ContainerKind
    latest: runtime.ContainerInfo
    grace: float


@dataclass(frozen=True)
class Start:
    """Create and start a new instance with `attempt`; `restart`: it replaces an exited one,
    so the back-off is stepped and older instances are removed."""

    container: pods.Container
    kind: ContainerKind
    attempt: int
    restart: bool


@dataclass(frozen=True)
class BackOff:
    """Exited and due a restart, but not before `wait` seconds (CrashLoopBackOff)."""

    container: pods.Container
    kind: ContainerKind
    wait: float
    message: str


@dataclass(frozen=True)
class LeaveExited:
    """Exited and not to be restarted (its restart policy says so)."""

    container: pods.Container
    kind: ContainerKind


ContainerAction = KeepRunning | KillUnhealthy | Replace | Start | BackOff | LeaveExited


@dataclass(frozen=True)
class ContainerFacts:
    """What the container decisions read besides the pod and its runtime state."""

    sandbox_id: runtime.SandboxID
    now: float
    # Containers whose liveness or startup probe failed, with the probe that did.
    liveness_failed: Mapping[str, str] = field(default_factory=dict)
    restarts: Mapping[str, RestartState] | None = None
    # Startup probe results by container name (containers with a startup probe only).
    started: Mapping[str, bool] = field(default_factory=dict)
    # The attempt a new instance takes at least, by container name: after the highest that
    # left a log file, when a reset removed every instance (`restartall`).
    attempt_floor: Mapping[str, int] = field(default_factory=dict)


def container_actions(
    pod: pods.Pod, state: runtime.PodRuntime, facts: ContainerFacts
) -> tuple[ContainerAction, ...]:
    """One action per container to act on, in order. Init containers run one at a time: the
    first one not yet succeeded is the last init action and no app container is touched
    before it succeeds; sidecars (init containers with `restartPolicy: Always`) are kept
    running alongside — and until the pod has initialized, what follows a sidecar waits for
    it to run and to pass its startup probe (the kubelet's computeInitContainerActions).
    Ephemeral containers come first: they start even while initialization is stuck."""
    actions: list[ContainerAction] = list(ephemeral_actions(pod, state))
    initialized = _initialized(pod, state, facts.sandbox_id)
    for container in pod.spec.init_containers:
        latest = latest_instance(state, facts.sandbox_id, container.name)
        if container.restart_policy == "Always":
            actions.append(container_action(pod, container, "init", latest, state, facts))
            if not initialized and not _sidecar_started(container, latest, facts):
                return tuple(actions)
        elif not _succeeded(latest):
            actions.append(container_action(pod, container, "init", latest, state, facts))
            return tuple(actions)
    for container in pod.spec.containers:
        latest = latest_instance(state, facts.sandbox_id, container.name)
        actions.append(container_action(pod, container, "regular", latest, state, facts))
    return tuple(actions)


def completed_with_sidecars(actions: Sequence[ContainerAction]) -> bool:
    """Every regular container exited for good (none kept running, started or backing off)
    while a sidecar still runs: the pod's containers are to be stopped, sidecars not
    restarted — a sidecar does not keep a completed pod alive (the kubelet's
    computePodActions: nothing to keep and nothing to start is KillPod, its restartable init
    containers left out)."""
    regular = [a for a in actions if a.kind == "regular"]
    return bool(regular) and all(isinstance(a, LeaveExited) for a in regular) and any(
        a.kind == "init" and isinstance(a, KeepRunning | KillUnhealthy | Replace)
        for a in actions)


def ephemeral_actions(pod: pods.Pod, state: runtime.PodRuntime) -> tuple[Start, ...]:
    """An ephemeral container starts once: only while the runtime has no instance of it in
    any sandbox, running or exited (the kubelet's computePodActions); it is never restarted."""
    have = {c.name for c in state.containers}
    return tuple(Start(c, "ephemeral", 0, restart=False)
                 for c in pod.spec.ephemeral_containers if c.name not in have)


def target_namespaces(options: runtime.NamespaceOptions, container: pods.Container,
                      state: runtime.PodRuntime) -> runtime.NamespaceOptions:
    """An ephemeral container with a targetContainerName joins the PID namespace of that
    container's newest instance (CRI TARGET), where the pod would give it its own (the
    kubelet's generateLinuxContainerConfig); raises LookupError when the target has none."""
    if not container.target_container_name or options.pid is not runtime.NamespaceMode.CONTAINER:
        return options
    target = next((c for c in state.containers if c.name == container.target_container_name),
                  None)  # newest first
    if target is None:
        raise LookupError(f"unable to find target container {container.target_container_name}")
    return dataclasses.replace(options, pid=runtime.NamespaceMode.TARGET, target_id=target.id)


def container_action(
    pod: pods.Pod, container: pods.Container, kind: ContainerKind,
    latest: runtime.ContainerInfo | None, state: runtime.PodRuntime, facts: ContainerFacts,
) -> ContainerAction:
    """The action for one container whose newest instance in the sandbox is `latest`."""
    restart = (facts.restarts or {}).get(container.name)
    if latest is not None and latest.state is runtime.ContainerState.RUNNING:
        failed = facts.liveness_failed.get(container.name)
        if failed is not None:
            return KillUnhealthy(
                container, kind, latest, unhealthy_grace(pod, container, failed), failed,
                restart=(container.restart_policy == "Always" if kind == "init" else
                         restarts.restarted_after_probe_kill(pod.spec.restart_policy, container)))
        if definition_changed(container, latest):
            return Replace(container, kind, latest, grace_period(pod))
        ran_for = facts.now - latest.started_at / 1e9
        return KeepRunning(container, kind, latest,
                           reset_backoff=restart is not None and ran_for > BACKOFF_RESET_AFTER)
    attempt = next_attempt(state, container.name, facts.attempt_floor.get(container.name, 0))
    if latest is None or latest.state is not runtime.ContainerState.EXITED:
        return Start(container, kind, attempt, restart=False)
    if not should_restart(pod, container, latest, kind):
        return LeaveExited(container, kind)
    return _restart(pod, container, kind, attempt, restart, facts.now,
                    exited_at=latest.finished_at / 1e9)


def after_probe_kill(
    pod: pods.Pod, action: KillUnhealthy, state: runtime.PodRuntime, facts: ContainerFacts
) -> ContainerAction:
    """What follows the kill of `action`: a new instance (or its back-off) if it restarts,
    whatever the exit code the kill left (the kubelet starts it in the same sync)."""
    if not action.restart:
        return LeaveExited(action.container, action.kind)
    restart = (facts.restarts or {}).get(action.container.name)
    name = action.container.name
    return _restart(pod, action.container, action.kind,
                    next_attempt(state, name, facts.attempt_floor.get(name, 0)), restart, facts.now)


def definition_changed(container: pods.Container, instance: runtime.ContainerInfo) -> bool:
    """The instance was created from another definition of the container (one created
    without the annotation counts as current)."""
    made_from = instance.annotations.get(specs.ANNOTATION_CONTAINER_HASH, "")
    return bool(made_from) and made_from != specs.definition_hash(container)


def after_replace(
    pod: pods.Pod, action: Replace, state: runtime.PodRuntime, facts: ContainerFacts
) -> Start:
    """The new definition's instance, started at once: no back-off (the kubelet keys its
    back-off by the container's definition, so a new one starts afresh)."""
    name = action.container.name
    return Start(action.container, action.kind,
                 next_attempt(state, name, facts.attempt_floor.get(name, 0)), restart=False)


def _restart(pod: pods.Pod, container: pods.Container, kind: ContainerKind, attempt: int,
             restart: RestartState | None, now: float, *, exited_at: float = 0.0
             ) -> ContainerAction:
    """Start it again, or back off until `restart.delay` after its exit (`exited_at`, POSIX
    seconds; 0: long ago)."""
    if restart is not None and exited_at + restart.delay > now:
        return BackOff(container, kind, exited_at + restart.delay - now,
                       crash_loop_message(pod, container.name, restart.delay))
    return Start(container, kind, attempt, restart=True)


def crash_loop_message(pod: pods.Pod, name: str, delay: float) -> str:
    """The kubelet's CrashLoopBackOff waiting message."""
    return (f"back-off {delay:.0f}s restarting failed container={name} "
            f"pod={pod.name}_{pod.namespace}({pod.uid})")


def unhealthy_grace(pod: pods.Pod, container: pods.Container, failed: str = "liveness") -> float:
    """The failed probe's own terminationGracePeriodSeconds (the kubelet's
    setTerminationGracePeriod), else the pod's grace period."""
    probe = container.startup_probe if failed == "startup" else container.liveness_probe
    grace = probe.termination_grace_period_seconds if probe is not None else None
    return float(grace) if grace is not None else grace_period(pod)


def latest_instance(
    state: runtime.PodRuntime, sandbox_id: runtime.SandboxID, name: str
) -> runtime.ContainerInfo | None:
    """The newest instance of container `name` in the sandbox (containers are newest first)."""
    return next(
        (c for c in state.containers if c.sandbox_id == sandbox_id and c.name == name), None
    )


def next_attempt(state: runtime.PodRuntime, name: str, floor: int = 0) -> int:
    """One more than the highest attempt of any instance of `name` (0 for the first), and
    at least `floor`."""
    attempts = [c.attempt for c in state.containers if c.name == name]
    return max(max(attempts) + 1 if attempts else 0, floor)


def should_restart(
    pod: pods.Pod, container: pods.Container, latest: runtime.ContainerInfo,
    kind: ContainerKind,
) -> bool:
    """Whether an exited instance is replaced: sidecars always; init containers until they
    succeed, app containers by their restart policies and rules (`restarts.should_restart`:
    the container's own over the pod's)."""
    if kind == "init" and container.restart_policy == "Always":
        return True
    if kind == "init" and latest.exit_code == 0:
        return False
    return restarts.should_restart(pod.spec.restart_policy, container, latest.exit_code)


def newly_exited(
    before: Sequence[runtime.ContainerInfo], after: Sequence[runtime.ContainerInfo]
) -> bool:
    """Whether a container exited between two reads of the pod's runtime state."""
    exited = {c.id for c in before if c.state is runtime.ContainerState.EXITED}
    return any(c.state is runtime.ContainerState.EXITED and c.id not in exited for c in after)


def _initialized(pod: pods.Pod, state: runtime.PodRuntime, sandbox_id: runtime.SandboxID) -> bool:
    """An app container of the sandbox has started (the kubelet's
    HasAnyActiveRegularContainerStarted): sidecars no longer gate anything."""
    names = {c.name for c in pod.spec.containers}
    return any(c.name in names and c.sandbox_id == sandbox_id and c.started_at > 0
               for c in state.containers)


def _sidecar_started(container: pods.Container, latest: runtime.ContainerInfo | None,
                     facts: ContainerFacts) -> bool:
    if latest is None or latest.state is not runtime.ContainerState.RUNNING:
        return False
    return container.startup_probe is None or facts.started.get(container.name, False)


def _succeeded(latest: runtime.ContainerInfo | None) -> bool:
    return (latest is not None and latest.state is runtime.ContainerState.EXITED
            and latest.exit_code == 0)
