"""Restarting all of a pod's containers in place (`restartall`), table-driven against the
kubelet 1.37's ShouldAllContainersRestart, GenerateAllContainersRestartingCondition,
getContainersToReset and the statuses of removed containers: values only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodelet.model.core import pods, restartall, runtime
from nodelet.model.core import status as st

RUNNING = runtime.ContainerState.RUNNING
EXITED = runtime.ContainerState.EXITED
ALL_ON_42 = (pods.RestartRule(restartall.ACTION, "In", (42,)),)
RESTART_ON_42 = (pods.RestartRule("Restart", "In", (42,)),)


def container(name: str, rules: tuple[pods.RestartRule, ...] = (), policy: str = ""
              ) -> pods.Container:
    return pods.Container(name=name, image="busybox", restart_rules=rules,
                          restart_policy=policy)  # type: ignore[arg-type]


POD = pods.Pod(
    uid=pods.PodUID("u"), name="p", namespace="default",
    spec=pods.PodSpec(
        init_containers=(container("init"), container("side", policy="Always")),
        containers=(container("src", ALL_ON_42, "Never"), container("app")),
        restart_policy="Never"))
PLAIN = pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default", spec=pods.PodSpec(
    containers=(container("src", RESTART_ON_42, "Never"),)))


def ctr(name: str, state: runtime.ContainerState = RUNNING, *, exit_code: int = 0,
        attempt: int = 0) -> runtime.ContainerInfo:
    return runtime.ContainerInfo(
        id=runtime.ContainerID(f"{name}-{attempt}"), sandbox_id=runtime.SandboxID("sb"),
        name=name, attempt=attempt, image="busybox", image_ref="busybox", state=state,
        created_at=attempt + 1, exit_code=exit_code)


def old(condition: str | None) -> st.PodStatus:
    conditions = () if condition is None else (
        st.PodCondition(restartall.CONDITION, condition),)  # type: ignore[arg-type]
    return st.PodStatus(conditions=conditions)


SOURCE_EXITED = (ctr("init", EXITED), ctr("side"), ctr("src", EXITED, exit_code=42), ctr("app"))


@pytest.mark.parametrize(("pod", "containers", "previous", "expected"), [
    (POD, SOURCE_EXITED, None, True),
    (POD, (ctr("src", EXITED, exit_code=1), ctr("app")), None, False),  # no rule matches 1
    (POD, (), old("True"), True),  # the marker: a reset under way
    (POD, (ctr("src"), ctr("app")), old("False"), False),
    # only the newest instance counts: exited 42, then started again
    (POD, (ctr("src", EXITED, exit_code=42), ctr("src", attempt=1)), None, False),
    (PLAIN, (ctr("src", EXITED, exit_code=42),), None, False),  # Restart, not RestartAll
], ids=["source-exited", "other-code", "condition-true", "condition-false",
        "newest-running", "restart-rule"])
def test_triggered(pod: pods.Pod, containers: tuple[runtime.ContainerInfo, ...],
                   previous: st.PodStatus | None, expected: bool) -> None:
    assert restartall.triggered(pod, containers, previous) is expected


@pytest.mark.parametrize(("containers", "previous", "phase", "expected"), [
    (SOURCE_EXITED, None, "Running",
     ("True", restartall.REASON_STARTED, restartall.MESSAGE_STARTED)),
    ((), old("True"), "Running", ("False", "", "")),  # cleaned up
    ((ctr("src"), ctr("app")), None, "Running", ("False", "", "")),
    (SOURCE_EXITED, None, "Failed", ("False", st.REASON_POD_FAILED, "")),
    ((), None, "Succeeded", ("False", st.REASON_POD_COMPLETED, "")),
], ids=["resetting", "cleaned", "quiet", "failed", "succeeded"])
def test_condition(containers: tuple[runtime.ContainerInfo, ...], previous: st.PodStatus | None,
                   phase: st.PodPhase, expected: tuple[str, str, str]) -> None:
    condition = restartall.condition(POD, containers, previous, phase)
    assert condition is not None
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        restartall.CONDITION, *expected)


def test_no_condition_on_a_pod_without_the_action() -> None:
    assert restartall.condition(PLAIN, (), None, "Running") is None


def test_reset_order_is_the_kubelets() -> None:
    """Regular non-sources, init non-sources (sidecars too), regular sources, init sources;
    every instance, older ones too; running ones are stopped first."""
    containers = (ctr("app"), ctr("side"), ctr("init", EXITED),
                  ctr("src", EXITED, exit_code=42, attempt=1), ctr("src", EXITED, exit_code=1))
    order = [(r.info.name, r.info.attempt, r.stop)
             for r in restartall.reset_order(POD, containers)]
    assert order == [("src", 0, False), ("app", 0, True), ("init", 0, False),
                     ("side", 0, True), ("src", 1, False)]


RUN = st.ContainerStateRunning()
TERMINATED_42 = st.ContainerStateTerminated(exit_code=42, container_id="c://src-0")
REMOVED = st.ContainerStateTerminated(exit_code=137, reason=restartall.REASON_RESTARTING,
                                      message=restartall.MESSAGE_REMOVED)


def status(state: st.ContainerStateValue, *, restarts: int = 0, cid: str = "",
           last: st.ContainerStateValue | None = None) -> st.ContainerStatus:
    return st.ContainerStatus(name="src", image="busybox", state=state, restart_count=restarts,
                              container_id=cid, last_state=last)


@pytest.mark.parametrize(("new", "previous", "cleaned", "expected"), [
    # the sync that finds it removed: waiting, one more restart, the removed last state
    (status(st.ContainerStateWaiting("ContainerCreating")),
     status(TERMINATED_42, restarts=2, cid="c://src-0"), True,
     replace(status(st.ContainerStateWaiting(restartall.REASON_RESTARTING,
                                             restartall.MESSAGE_REMOVED),
                    restarts=3, last=REMOVED), started=False)),
    # one that never started (still waiting) gets nothing
    (status(st.ContainerStateWaiting("PodInitializing")),
     status(st.ContainerStateWaiting("PodInitializing")), True,
     status(st.ContainerStateWaiting("PodInitializing"))),
    # later, still not started again: restarts and last state carried
    (status(st.ContainerStateWaiting("ContainerCreating")),
     status(st.ContainerStateWaiting(restartall.REASON_RESTARTING), restarts=3, last=REMOVED),
     False, status(st.ContainerStateWaiting("ContainerCreating"), restarts=3, last=REMOVED)),
    # running again: the count is at least the previous one, the removed last state stays
    (status(RUN, restarts=1, cid="c://src-3"),
     status(st.ContainerStateWaiting(restartall.REASON_RESTARTING), restarts=3, last=REMOVED),
     False, status(RUN, restarts=3, cid="c://src-3", last=REMOVED)),
], ids=["just-cleaned", "never-started", "carried", "running-again"])
def test_reset_statuses(new: st.ContainerStatus, previous: st.ContainerStatus, cleaned: bool,
                        expected: st.ContainerStatus) -> None:
    assert restartall.reset_statuses((new,), (previous,), just_cleaned=cleaned) == (expected,)


def test_removed_by_reset_counts_as_restartable() -> None:
    assert restartall.removed_by_reset(status(
        st.ContainerStateWaiting(restartall.REASON_RESTARTING), last=REMOVED))
    assert not restartall.removed_by_reset(status(TERMINATED_42))


def test_next_attempt_floor() -> None:
    assert restartall.next_attempt_floor([]) == 0
    assert restartall.next_attempt_floor([0, 3, 1]) == 4
