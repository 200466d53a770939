"""Restarting all of a pod's containers in place (pure): the `RestartAllContainers` action of
container restartPolicyRules (RestartAllContainersOnContainerExits, beta and on by default from
Kubernetes 1.36).

As the kubelet 1.37 does it (pkg/kubelet/container/helpers.go ShouldAllContainersRestart,
kuberuntime_manager.go's reset, status/generate.go, kubelet_pods.go):

1. **Trigger**: the newest instance of an init or regular container (sidecars included,
   ephemeral containers never) exited with a code whose first matching rule says
   `RestartAllContainers` — whatever the pod's or the container's restartPolicy — or the pod's
   last status already has `AllContainersRestarting` True (the marker that makes the reset
   survive a sync, or an agent restart). Never for a terminal or deleted pod.
2. **Reset** (`reset_order`): the condition turns True first; then every instance of every
   init and regular container — running or exited, older ones too — is stopped (no preStop,
   the minimum grace period) and removed from the runtime, the sources last. The sandbox, its
   IP and the volumes stay.
3. **Cleaned up**: once the runtime holds no instance of them, the condition turns False and
   every container that had started shows waiting `RestartingAllContainers`, with a last state
   terminated the same way (exit code 137) and one more restart (`reset_statuses`); then the
   pod starts again from its first init container, with no back-off.

Restart counts and last states are carried from the previous status afterwards (the runtime
no longer has the instances they were read from); new instances take their attempt numbers
after the highest one that left a log file, as the kubelet's do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from nodelet.model.core import pods, restarts, runtime, status

ACTION = "RestartAllContainers"
CONDITION = status.ALL_CONTAINERS_RESTARTING
REASON_STARTED = "RestartAllContainersStarted"
MESSAGE_STARTED = "container exited with restart policy rule"
# The waiting reason and the last state of containers removed by a reset.
REASON_RESTARTING = "RestartingAllContainers"
MESSAGE_REMOVED = "The container is removed because RestartAllContainers in place"
REMOVED_EXIT_CODE = 137
# The kubelet kills with a grace period override of 0, raised to its minimum of 2 s.
KILL_GRACE_SECONDS = 2.0
# The kubelet says `killing` on an event whose fieldPath names the container; nodelet's events
# have no fieldPath, so the message names it, as its other Killing events do.
KILL_MESSAGE = "Stopping container {name}: all of the pod's containers restart"


def _containers(pod: pods.Pod) -> Iterable[pods.Container]:
    return (*pod.spec.init_containers, *pod.spec.containers)


def could_restart_all(pod: pods.Pod) -> bool:
    """Some init or regular container has a `RestartAllContainers` rule: the pod then carries
    the condition (the kubelet's AllContainersCouldRestart)."""
    return any(rule.action == ACTION for c in _containers(pod) for rule in c.restart_rules)


def restarts_all(container: pods.Container, exit_code: int) -> bool:
    """Whether this exit code's first matching rule is `RestartAllContainers`."""
    rule = restarts.matching_rule(container, exit_code)
    return rule is not None and rule.action == ACTION


def _newest(containers: Sequence[runtime.ContainerInfo]) -> dict[str, runtime.ContainerInfo]:
    newest: dict[str, runtime.ContainerInfo] = {}
    for info in sorted(containers, key=lambda c: (c.created_at, c.attempt), reverse=True):
        newest.setdefault(info.name, info)
    return newest


def is_source(container: pods.Container, info: runtime.ContainerInfo) -> bool:
    return info.state is runtime.ContainerState.EXITED and restarts_all(container, info.exit_code)


def triggered(pod: pods.Pod, containers: Sequence[runtime.ContainerInfo],
              old: status.PodStatus | None) -> bool:
    """A reset is under way or due (see the module docstring, 1)."""
    if not could_restart_all(pod):
        return False
    if old is not None and _condition_true(old):
        return True
    newest = _newest(containers)
    return any(c.name in newest and is_source(c, newest[c.name]) for c in _containers(pod))


def _condition_true(old: status.PodStatus) -> bool:
    found = old.condition(CONDITION)
    return found is not None and found.status == "True"


def cleaned_up(pod: pods.Pod, containers: Sequence[runtime.ContainerInfo]) -> bool:
    """The runtime holds no instance of any init or regular container of the pod."""
    names = {c.name for c in _containers(pod)}
    return not any(info.name in names for info in containers)


def just_cleaned(pod: pods.Pod, containers: Sequence[runtime.ContainerInfo],
                 old: status.PodStatus) -> bool:
    """The previous status said a reset was removing the containers and none is left: the
    sync that shows them removed (and the condition False again)."""
    return _condition_true(old) and cleaned_up(pod, containers)


def resetting(pod: pods.Pod, containers: Sequence[runtime.ContainerInfo],
              old: status.PodStatus | None) -> bool:
    """Instances are to be removed now (triggered, not yet cleaned up)."""
    return triggered(pod, containers, old) and not cleaned_up(pod, containers)


def condition(pod: pods.Pod, containers: Sequence[runtime.ContainerInfo],
              old: status.PodStatus | None, phase: status.PodPhase) -> status.PodCondition | None:
    """`AllContainersRestarting`, on a pod that could restart all its containers (None on
    others): False with PodCompleted / PodFailed once terminal, True while a reset removes the
    containers, False otherwise."""
    if not could_restart_all(pod):
        return None
    if phase == "Succeeded":
        return status.PodCondition(CONDITION, "False", status.REASON_POD_COMPLETED)
    if phase == "Failed":
        return status.PodCondition(CONDITION, "False", status.REASON_POD_FAILED)
    if resetting(pod, containers, old):
        return status.PodCondition(CONDITION, "True", REASON_STARTED, MESSAGE_STARTED)
    return status.PodCondition(CONDITION, "False")


@dataclasses.dataclass(frozen=True)
class Removal:
    """One instance to remove; `stop` first when it is not exited."""

    info: runtime.ContainerInfo
    stop: bool


def reset_order(pod: pods.Pod, containers: Sequence[runtime.ContainerInfo]) -> tuple[Removal, ...]:
    """Every instance of the pod's init and regular containers, in the kubelet's order
    (getContainersToReset): regular containers that are not sources, then init containers
    (sidecars included) that are not, then the regular sources, then the init sources; spec
    order within each group."""
    specs = {c.name: c for c in _containers(pod)}
    regular = {c.name for c in pod.spec.containers}
    order = {name: i for i, name in enumerate(specs)}
    groups: dict[tuple[bool, bool], list[runtime.ContainerInfo]] = {}
    for info in containers:
        spec = specs.get(info.name)
        if spec is not None:
            groups.setdefault((is_source(spec, info), info.name not in regular), []).append(info)
    out: list[Removal] = []
    for key in ((False, False), (False, True), (True, False), (True, True)):
        for info in sorted(groups.get(key, ()), key=lambda i: order[i.name]):
            out.append(Removal(info, stop=info.state is not runtime.ContainerState.EXITED))
    return tuple(out)


# -- statuses ---------------------------------------------------------------------------------

Statuses = tuple[status.ContainerStatus, ...]

_REMOVED = status.ContainerStateTerminated(
    exit_code=REMOVED_EXIT_CODE, reason=REASON_RESTARTING, message=MESSAGE_REMOVED)


def reset_statuses(statuses: Statuses, old: Sequence[status.ContainerStatus], *,
                   just_cleaned: bool) -> Statuses:
    """The container statuses of a pod that could restart all its containers, against the
    previous ones (`old`). A container the runtime no longer has: in the sync that finds the
    reset `just_cleaned`, one that was not waiting shows waiting `RestartingAllContainers`,
    last state the same (137), one more restart; otherwise it keeps its previous restart
    count and last state (and a terminated state, as for any pod). A container the runtime
    has counts at least its previous restarts and, without an older instance, keeps its
    previous last state."""
    before = {s.name: s for s in old}
    return tuple(_carried(s, before.get(s.name), just_cleaned) for s in statuses)


def _carried(new: status.ContainerStatus, old: status.ContainerStatus | None,
             just_cleaned: bool) -> status.ContainerStatus:
    if old is None:
        return new
    if not new.container_id:  # the runtime has no instance of it
        if just_cleaned and not isinstance(old.state, status.ContainerStateWaiting):
            waiting = status.ContainerStateWaiting(REASON_RESTARTING, MESSAGE_REMOVED)
            return dataclasses.replace(new, state=waiting, last_state=_REMOVED,
                                       restart_count=old.restart_count + 1, ready=False,
                                       started=False)
        if isinstance(old.state, status.ContainerStateTerminated):
            return old
        return dataclasses.replace(new, restart_count=old.restart_count,
                                   last_state=old.last_state)
    return dataclasses.replace(
        new, restart_count=max(new.restart_count, old.restart_count),
        last_state=new.last_state if new.last_state is not None else _previous_last(new, old))


def _previous_last(new: status.ContainerStatus,
                   old: status.ContainerStatus) -> status.ContainerStateValue | None:
    """Without an older instance in the runtime: the previous status's terminated state when
    that was another instance, else its last state (convertToAPIContainerStatuses)."""
    if isinstance(old.state, status.ContainerStateTerminated) and \
            old.container_id != new.container_id:
        return old.state
    return old.last_state


def removed_by_reset(s: status.ContainerStatus) -> bool:
    """Waiting or terminated after a reset removed it: it will run again (getPhase)."""
    for state in (s.state, s.last_state):
        if isinstance(state, status.ContainerStateTerminated):
            return state.reason == REASON_RESTARTING
    return False


def next_attempt_floor(logged: Iterable[int]) -> int:
    """The attempt a new instance takes at least, from the attempts that left a log file."""
    return max(logged, default=-1) + 1
