"""Container restarts with ContainerRestartRules (`restarts`), the pod phase and the worker's
actions that follow from them: tables after the kubelet's ContainerShouldRestart, getPhase and
computePodActions."""

from __future__ import annotations

import pytest

from nodelet.model.core import phases as ph
from nodelet.model.core import podactions as pa
from nodelet.model.core import pods, restarts, runtime, status

NOW = 1_000_000.0
SB = runtime.SandboxID("sb-1")


def rule(operator: str, *values: int) -> pods.RestartRule:
    return pods.RestartRule("Restart", operator, values)  # type: ignore[arg-type]


def ctr(policy: str = "", *rules: pods.RestartRule, name: str = "app") -> pods.Container:
    return pods.Container(name=name, image="busybox", restart_policy=policy,  # type: ignore[arg-type]
                          restart_rules=rules)


# (pod policy, container, exit code, restarted)
SHOULD_RESTART = [
    ("pod-always", "Always", ctr(), 0, True),
    ("pod-on-failure-success", "OnFailure", ctr(), 0, False),
    ("pod-on-failure-failure", "OnFailure", ctr(), 1, True),
    ("pod-never", "Never", ctr(), 1, False),
    ("container-always-over-pod-never", "Never", ctr("Always"), 1, True),
    ("container-never-over-pod-always", "Always", ctr("Never"), 1, False),
    ("container-on-failure-success", "Always", ctr("OnFailure"), 0, False),
    ("container-on-failure-failure", "Never", ctr("OnFailure"), 3, True),
    ("rule-in-matches", "Never", ctr("Never", rule("In", 42)), 42, True),
    ("rule-in-mismatch-falls-to-container-policy", "Always", ctr("Never", rule("In", 42)), 1,
     False),
    ("rule-not-in-matches", "Never", ctr("Never", rule("NotIn", 0, 1)), 2, True),
    ("rule-not-in-mismatch", "Never", ctr("Never", rule("NotIn", 0, 1)), 1, False),
    ("rule-mismatch-on-failure", "Never", ctr("OnFailure", rule("In", 42)), 7, True),
    ("first-match-wins", "Never", ctr("Never", rule("In", 1), rule("NotIn", 1)), 1, True),
]


@pytest.mark.parametrize(("pod_policy", "container", "code", "expected"),
                         [c[1:] for c in SHOULD_RESTART], ids=[c[0] for c in SHOULD_RESTART])
def test_should_restart(pod_policy: pods.RestartPolicy, container: pods.Container, code: int,
                        expected: bool) -> None:
    assert restarts.should_restart(pod_policy, container, code) is expected


@pytest.mark.parametrize(("pod_policy", "container", "expected"), [
    ("Never", ctr(), False), ("OnFailure", ctr(), True),
    ("Never", ctr("OnFailure"), True), ("Always", ctr("Never"), False),
    # A probe kill has no exit code of the container's choosing: rules do not count.
    ("Always", ctr("Never", rule("NotIn", 0)), False),
])
def test_restarted_after_probe_kill(pod_policy: pods.RestartPolicy, container: pods.Container,
                                    expected: bool) -> None:
    assert restarts.restarted_after_probe_kill(pod_policy, container) is expected


def make_pod(policy: pods.RestartPolicy, *containers: pods.Container,
             inits: tuple[pods.Container, ...] = ()) -> pods.Pod:
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default",
                    spec=pods.PodSpec(containers=containers, init_containers=inits,
                                      restart_policy=policy))


def done(code: int, name: str = "app") -> status.ContainerStatus:
    return status.ContainerStatus(name=name, image="busybox", state=status.ContainerStateTerminated(
        exit_code=code, reason="Completed" if code == 0 else "Error"))


def backing_off(code: int, name: str = "app") -> status.ContainerStatus:
    return status.ContainerStatus(
        name=name, image="busybox", state=status.ContainerStateWaiting(reason="CrashLoopBackOff"),
        last_state=status.ContainerStateTerminated(exit_code=code, reason="Error"))


RUNNING = status.ContainerStatus(name="b", image="busybox", state=status.ContainerStateRunning())

# (pod, init statuses, statuses, phase): the e2e's "Container Restart Rules" pods among them.
PHASES = [
    ("rule-match-restarts-under-pod-never", make_pod("Never", ctr("Never", rule("In", 42)))),
    ("rule-mismatch-fails", make_pod("Never", ctr("Never", rule("In", 42)))),
    ("container-never-under-pod-always-fails", make_pod("Always", ctr("Never"))),
    ("container-always-under-pod-never-runs", make_pod("Never", ctr("Always"))),
    ("container-on-failure-succeeds", make_pod("Never", ctr("OnFailure"))),
    ("one-restarting-one-done", make_pod("Never", ctr("Never"), ctr("Always", name="b"))),
    ("init-with-own-on-failure-retries", make_pod("Never", ctr(),
                                                  inits=(ctr("OnFailure", name="i"),))),
    ("init-with-own-never-fails-the-pod", make_pod("Always", ctr(),
                                                   inits=(ctr("Never", name="i"),))),
]
PHASE_INPUTS: list[tuple[list[status.ContainerStatus], list[status.ContainerStatus], str]] = [
    ([], [done(42)], "Running"),
    ([], [done(1)], "Failed"),
    ([], [done(1)], "Failed"),
    ([], [backing_off(1)], "Running"),
    ([], [done(0)], "Succeeded"),
    ([], [done(0), backing_off(1, "b")], "Running"),
    ([backing_off(1, "i")], [], "Pending"),
    ([done(1, "i")], [], "Failed"),
]


@pytest.mark.parametrize(("pod", "inits", "regular", "expected"),
                         [(c[1], *i) for c, i in zip(PHASES, PHASE_INPUTS, strict=True)],
                         ids=[c[0] for c in PHASES])
def test_phase(pod: pods.Pod, inits: list[status.ContainerStatus],
               regular: list[status.ContainerStatus], expected: str) -> None:
    assert ph.pod_phase(pod, inits, regular) == expected


def exited(code: int, name: str = "app", attempt: int = 0) -> runtime.ContainerInfo:
    return runtime.ContainerInfo(
        id=runtime.ContainerID(f"{name}-{attempt}"), sandbox_id=SB, name=name, attempt=attempt,
        image="busybox", image_ref="busybox", state=runtime.ContainerState.EXITED,
        created_at=attempt + 1, started_at=int((NOW - 5) * 1e9), exit_code=code)


def action_of(pod: pods.Pod, *containers: runtime.ContainerInfo) -> str:
    sandbox = runtime.SandboxInfo(id=SB, name="p", namespace="default", uid="u", attempt=0,
                                  state=runtime.SandboxState.READY, created_at=1, ip="10.0.0.5")
    state = runtime.PodRuntime(uid="u", sandboxes=(sandbox,), containers=containers)
    actions = pa.container_actions(pod, state, pa.ContainerFacts(sandbox_id=SB, now=NOW))
    return " ".join(type(a).__name__ for a in actions)


@pytest.mark.parametrize(("pod", "code", "expected"), [
    (make_pod("Never", ctr("Never", rule("In", 42))), 42, "Start"),
    (make_pod("Never", ctr("Never", rule("In", 42))), 1, "LeaveExited"),
    (make_pod("Always", ctr("Never")), 1, "LeaveExited"),
    (make_pod("Never", ctr("Always")), 0, "Start"),
    (make_pod("Never", ctr("OnFailure")), 0, "LeaveExited"),
])
def test_exited_app_container(pod: pods.Pod, code: int, expected: str) -> None:
    assert action_of(pod, exited(code)) == expected


def test_init_container_with_its_own_policy() -> None:
    """A failed init container is retried by its own OnFailure under a Never pod; with its
    own Never under an Always pod it is left, and the pod fails (getPhase above)."""
    retried = make_pod("Never", ctr(), inits=(ctr("OnFailure", name="i"),))
    assert action_of(retried, exited(1, "i")) == "Start"
    left = make_pod("Always", ctr(), inits=(ctr("Never", name="i"),))
    assert action_of(left, exited(1, "i")) == "LeaveExited"
    assert action_of(left, exited(0, "i")) == "Start"  # done: the app container starts


def test_a_probe_kill_restarts_by_the_policies_alone() -> None:
    running = runtime.ContainerInfo(
        id=runtime.ContainerID("app-0"), sandbox_id=SB, name="app", attempt=0, image="busybox",
        image_ref="busybox", state=runtime.ContainerState.RUNNING, created_at=1,
        started_at=int((NOW - 5) * 1e9))
    sandbox = runtime.SandboxInfo(id=SB, name="p", namespace="default", uid="u", attempt=0,
                                  state=runtime.SandboxState.READY, created_at=1, ip="10.0.0.5")
    state = runtime.PodRuntime(uid="u", sandboxes=(sandbox,), containers=(running,))
    facts = pa.ContainerFacts(sandbox_id=SB, now=NOW, liveness_failed={"app": "startup"})
    for pod, restarted in ((make_pod("Always", ctr("Never", rule("NotIn", 0))), False),
                           (make_pod("Never", ctr("OnFailure")), True)):
        (kill,) = pa.container_actions(pod, state, facts)
        assert isinstance(kill, pa.KillUnhealthy)
        assert (kill.probe, kill.restart) == ("startup", restarted)
        after = pa.after_probe_kill(pod, kill, state, facts)
        assert isinstance(after, pa.Start if restarted else pa.LeaveExited)
