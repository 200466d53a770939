"""What a pod worker does next (`podactions`), table-driven like the kubelet's
computePodActions tests: no containerd, only values."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nodelet.model.core import handlers, pods, runtime, sandboxes, specs
from nodelet.model.core import podactions as pa

READY = runtime.SandboxState.READY
NOTREADY = runtime.SandboxState.NOTREADY
RUNNING = runtime.ContainerState.RUNNING
EXITED = runtime.ContainerState.EXITED
CREATED = runtime.ContainerState.CREATED
NOW = 1_000_000.0
SB = runtime.SandboxID("sb-1")


def pod(*names: str, init: tuple[pods.Container, ...] = (), policy: pods.RestartPolicy = "Always",
        host_network: bool = False, **spec: Any) -> pods.Pod:
    containers = tuple(pods.Container(name=n, image="busybox") for n in names or ("app",))
    return pods.Pod(
        uid=pods.PodUID("uid-1"), name="p", namespace="default",
        spec=pods.PodSpec(containers=containers, init_containers=init, restart_policy=policy,
                          host_network=host_network, **spec))


def sidecar(name: str) -> pods.Container:
    return pods.Container(name=name, image="busybox", restart_policy="Always")


def probed_sidecar(name: str) -> pods.Container:
    return pods.Container(name=name, image="busybox", restart_policy="Always",
                          startup_probe=handlers.Probe(handlers.ExecAction(("true",))))


def init(name: str) -> pods.Container:
    return pods.Container(name=name, image="busybox")


def sandbox(id_: str = "sb-1", *, attempt: int = 0, state: runtime.SandboxState = READY,
            ip: str = "10.0.0.5") -> runtime.SandboxInfo:
    return runtime.SandboxInfo(id=runtime.SandboxID(id_), name="p", namespace="default",
                               uid="uid-1", attempt=attempt, state=state,
                               created_at=attempt + 1, ip=ip)


def ctr(name: str, state: runtime.ContainerState = RUNNING, *, attempt: int = 0,
        exit_code: int = 0, started: float = NOW - 5, sandbox_id: str = "sb-1",
        finished: float = 0.0) -> runtime.ContainerInfo:
    return runtime.ContainerInfo(
        id=runtime.ContainerID(f"{name}-{attempt}"), sandbox_id=runtime.SandboxID(sandbox_id),
        name=name, attempt=attempt, image="busybox", image_ref="busybox", state=state,
        created_at=attempt + 1, started_at=int(started * 1e9), exit_code=exit_code,
        finished_at=int(finished * 1e9))


def state(*containers: runtime.ContainerInfo,
          boxes: tuple[runtime.SandboxInfo, ...] = (sandbox(),)) -> runtime.PodRuntime:
    return runtime.PodRuntime(pods.PodUID("uid-1"), sandboxes=boxes, containers=containers)


# -- the pod --------------------------------------------------------------------------------


@pytest.mark.parametrize(("the_pod", "the_state", "terminal", "network", "expected"), [
    pytest.param(pod(), state(), True, None, pa.StopPod(), id="terminal"),
    pytest.param(pod(), state(boxes=()), False, "cni config uninitialized",
                 pa.WaitForNetwork("cni config uninitialized"), id="network-not-ready"),
    pytest.param(pod(host_network=True), state(boxes=()), False, "cni config uninitialized",
                 pa.CreateSandbox(sandboxes.SandboxChange(True, 0, sandboxes.MSG_NO_SANDBOX,
                                                          None)),
                 id="host-network-ignores-the-network"),
    pytest.param(pod(), state(boxes=()), False, None,
                 pa.CreateSandbox(sandboxes.SandboxChange(True, 0, sandboxes.MSG_NO_SANDBOX,
                                                          None)), id="first-sandbox"),
    pytest.param(pod(), state(ctr("app"), boxes=(sandbox(state=NOTREADY),)), False, None,
                 pa.CreateSandbox(sandboxes.SandboxChange(True, 1, sandboxes.MSG_NOT_READY,
                                                          SB)), id="dead-sandbox-recreated"),
    pytest.param(pod(policy="Never"), state(ctr("app", EXITED),
                                            boxes=(sandbox(state=NOTREADY),)),
                 False, None, pa.StopPod(), id="never-after-containers-ran"),
    pytest.param(pod(policy="Never"), state(boxes=(sandbox(state=NOTREADY),)), False, None,
                 pa.CreateSandbox(sandboxes.SandboxChange(True, 1, sandboxes.MSG_NOT_READY,
                                                          SB)), id="never-before-containers"),
    pytest.param(pod(), state(ctr("app")), False, None, pa.SyncContainers(), id="in-use"),
])
def test_pod_action(the_pod: pods.Pod, the_state: runtime.PodRuntime, terminal: bool,
                    network: str | None, expected: pa.PodAction) -> None:
    assert pa.pod_action(the_pod, the_state, terminal=terminal,
                         network_problem=network) == expected


@pytest.mark.parametrize(("spec", "deletion", "expected"), [
    ({}, None, 30.0), ({"termination_grace_period_seconds": 5}, None, 5.0),
    ({"termination_grace_period_seconds": 5}, 0, 0.0),
])
def test_grace_period(spec: dict[str, Any], deletion: int | None, expected: float) -> None:
    the_pod = pod(**spec)
    if deletion is not None:
        the_pod = pods.Pod(uid=the_pod.uid, name="p", namespace="default", spec=the_pod.spec,
                           deletion_grace_period_seconds=deletion)
    assert pa.grace_period(the_pod) == expected


@pytest.mark.parametrize(("deadline", "start", "expected"), [
    (None, NOW - 10, None), (60, None, None), (60, NOW - 10, 50.0), (60, NOW - 70, -10.0),
])
def test_deadline_left(deadline: int | None, start: float | None,
                       expected: float | None) -> None:
    assert pa.deadline_left(pod(active_deadline_seconds=deadline), start, NOW) == expected


# -- containers -----------------------------------------------------------------------------


def made_from(info: runtime.ContainerInfo, image: str) -> runtime.ContainerInfo:
    """The instance as created from a container whose image was `image`."""
    definition = specs.definition_hash(pods.Container(name=info.name, image=image))
    return replace(info, annotations={specs.ANNOTATION_CONTAINER_HASH: definition})


def test_after_replace_starts_the_next_attempt_without_back_off() -> None:
    the_pod = pod("a")
    action = pa.Replace(the_pod.spec.containers[0], "regular", ctr("a", attempt=2), 1.0)
    started = pa.after_replace(the_pod, action, state(ctr("a", attempt=2)), facts())
    assert (started.attempt, started.restart) == (3, False)


def facts(**kwargs: Any) -> pa.ContainerFacts:
    return pa.ContainerFacts(sandbox_id=SB, now=NOW, **kwargs)


def summary(actions: tuple[pa.ContainerAction, ...]) -> list[tuple[str, ...]]:
    """(action, container[, detail]) rows, easy to read in a table."""
    rows: list[tuple[str, ...]] = []
    for a in actions:
        name = a.container.name
        if isinstance(a, pa.Start):
            rows.append(("start", name, f"attempt={a.attempt}", f"restart={a.restart}"))
        elif isinstance(a, pa.BackOff):
            rows.append(("back-off", name, f"{a.wait:g}s"))
        elif isinstance(a, pa.KeepRunning):
            rows.append(("keep", name) + (("reset",) if a.reset_backoff else ()))
        elif isinstance(a, pa.KillUnhealthy):
            rows.append(("kill", name, f"grace={a.grace:g}"))
        elif isinstance(a, pa.Replace):
            rows.append(("replace", name, f"grace={a.grace:g}"))
        else:
            rows.append(("leave", name))
    return rows


CASES: list[tuple[str, pods.Pod, runtime.PodRuntime, pa.ContainerFacts, list[tuple[str, ...]]]] = [
    ("fresh-sandbox-starts-all-apps", pod("a", "b"), state(), facts(),
     [("start", "a", "attempt=0", "restart=False"), ("start", "b", "attempt=0", "restart=False")]),
    ("running-is-kept", pod("a"), state(ctr("a")), facts(), [("keep", "a")]),
    ("first-init-only", pod("app", init=(init("i1"), init("i2"))), state(), facts(),
     [("start", "i1", "attempt=0", "restart=False")]),
    ("running-init-holds-the-rest", pod("app", init=(init("i1"), init("i2"))), state(ctr("i1")),
     facts(), [("keep", "i1")]),
    ("next-init-after-success", pod("app", init=(init("i1"), init("i2"))),
     state(ctr("i1", EXITED)), facts(), [("start", "i2", "attempt=0", "restart=False")]),
    ("apps-after-all-inits", pod("app", init=(init("i1"),)), state(ctr("i1", EXITED)), facts(),
     [("start", "app", "attempt=0", "restart=False")]),
    ("failed-init-restarts", pod("app", init=(init("i1"),)),
     state(ctr("i1", EXITED, exit_code=1)), facts(),
     [("start", "i1", "attempt=1", "restart=True")]),
    ("failed-init-never", pod("app", init=(init("i1"),), policy="Never"),
     state(ctr("i1", EXITED, exit_code=1)), facts(), [("leave", "i1")]),
    ("sidecar-kept-alongside-next-init", pod("app", init=(sidecar("s"), init("i1"))),
     state(ctr("s")), facts(), [("keep", "s"), ("start", "i1", "attempt=0", "restart=False")]),
    # Until the pod has initialized, what follows a sidecar waits for it to run (and to pass
    # its startup probe), as the kubelet's computeInitContainerActions.
    ("exited-sidecar-restarts-under-never", pod("app", init=(sidecar("s"),), policy="Never"),
     state(ctr("s", EXITED)), facts(), [("start", "s", "attempt=1", "restart=True")]),
    ("new-sidecar-first", pod("app", init=(sidecar("s"), init("i1"))), state(), facts(),
     [("start", "s", "attempt=0", "restart=False")]),
    ("sidecar-not-started-holds-the-rest", pod("app", init=(probed_sidecar("s"), init("i1"))),
     state(ctr("s")), facts(started={"s": False}), [("keep", "s")]),
    ("started-sidecar-lets-the-next-go", pod("app", init=(probed_sidecar("s"), init("i1"))),
     state(ctr("s")), facts(started={"s": True}),
     [("keep", "s"), ("start", "i1", "attempt=0", "restart=False")]),
    ("initialized-pod-restarts-its-sidecar-alongside", pod("app", init=(sidecar("s"),)),
     state(ctr("s", EXITED), ctr("app")), facts(),
     [("start", "s", "attempt=1", "restart=True"), ("keep", "app")]),
    ("always-restarts-success", pod("a"), state(ctr("a", EXITED)), facts(),
     [("start", "a", "attempt=1", "restart=True")]),
    ("on-failure-leaves-success", pod("a", policy="OnFailure"), state(ctr("a", EXITED)), facts(),
     [("leave", "a")]),
    ("on-failure-restarts-failure", pod("a", policy="OnFailure"),
     state(ctr("a", EXITED, exit_code=2)), facts(),
     [("start", "a", "attempt=1", "restart=True")]),
    ("never-leaves-failure", pod("a", policy="Never"), state(ctr("a", EXITED, exit_code=2)),
     facts(), [("leave", "a")]),
    # The back-off counts from the exit, as the kubelet's doBackOff (from FinishedAt).
    ("crash-loop-back-off", pod("a"), state(ctr("a", EXITED, attempt=3, finished=NOW - 5)),
     facts(restarts={"a": pa.RestartState(delay=20)}), [("back-off", "a", "15s")]),
    ("back-off-over", pod("a"), state(ctr("a", EXITED, attempt=3, finished=NOW - 21)),
     facts(restarts={"a": pa.RestartState(delay=20)}),
     [("start", "a", "attempt=4", "restart=True")]),
    ("attempts-count-every-instance", pod("a"),
     state(ctr("a", EXITED, attempt=1), ctr("a", EXITED, attempt=5, sandbox_id="old")),
     facts(), [("start", "a", "attempt=6", "restart=True")]),
    ("created-but-not-started-is-started-anew", pod("a"), state(ctr("a", CREATED)), facts(),
     [("start", "a", "attempt=1", "restart=False")]),
    ("other-sandboxes-instances-do-not-count", pod("a"),
     state(ctr("a", sandbox_id="old")), facts(), [("start", "a", "attempt=1", "restart=False")]),
    ("liveness-failed-is-killed", pod("a", termination_grace_period_seconds=7), state(ctr("a")),
     facts(liveness_failed={"a": "liveness"}), [("kill", "a", "grace=7")]),
    ("long-runner-resets-back-off", pod("a"), state(ctr("a", started=NOW - 601)),
     facts(restarts={"a": pa.RestartState(delay=40)}),
     [("keep", "a", "reset")]),
    ("short-runner-keeps-back-off", pod("a"), state(ctr("a", started=NOW - 599)),
     facts(restarts={"a": pa.RestartState(delay=40)}), [("keep", "a")]),
    # A pod update changed the image: the running instance is replaced (the kubelet's
    # "definition changed"); one created from the current definition, or before the
    # annotation existed, is kept.
    ("changed-definition-is-replaced", pod("a", termination_grace_period_seconds=5),
     state(made_from(ctr("a"), "other-image")), facts(), [("replace", "a", "grace=5")]),
    ("current-definition-is-kept", pod("a"), state(made_from(ctr("a"), "busybox")), facts(),
     [("keep", "a")]),
    ("floor-after-a-reset", pod("a"), state(), facts(attempt_floor={"a": 3}),
     [("start", "a", "attempt=3", "restart=False")]),
]


@pytest.mark.parametrize(("the_pod", "the_state", "the_facts", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_container_actions(the_pod: pods.Pod, the_state: runtime.PodRuntime,
                           the_facts: pa.ContainerFacts, expected: list[tuple[str, ...]]) -> None:
    assert summary(pa.container_actions(the_pod, the_state, the_facts)) == expected


def test_crash_loop_message_is_the_kubelets() -> None:
    (action,) = pa.container_actions(
        pod("a"), state(ctr("a", EXITED, finished=NOW - 35)),
        facts(restarts={"a": pa.RestartState(delay=40)}))
    assert isinstance(action, pa.BackOff)
    assert action.message == ("back-off 40s restarting failed container=a "
                              "pod=p_default(uid-1)")


EXEC = handlers.ExecAction(("true",))


BOTH = {"liveness_probe": handlers.Probe(EXEC, termination_grace_period_seconds=3),
        "startup_probe": handlers.Probe(EXEC, termination_grace_period_seconds=4)}


@pytest.mark.parametrize(("probes", "failed", "expected"), [
    ({"liveness_probe": handlers.Probe(EXEC, termination_grace_period_seconds=3)}, "liveness",
     3.0),
    ({"startup_probe": handlers.Probe(EXEC, termination_grace_period_seconds=4)}, "startup",
     4.0),
    # The failed probe's, as the kubelet's setTerminationGracePeriod ("should override
    # timeoutGracePeriodSeconds when StartupProbe field is set").
    (BOTH, "startup", 4.0), (BOTH, "liveness", 3.0),
    ({"liveness_probe": handlers.Probe(EXEC, period_seconds=1)}, "liveness", 30.0),
    ({"startup_probe": handlers.Probe(EXEC, period_seconds=1),
      "liveness_probe": handlers.Probe(EXEC, termination_grace_period_seconds=3)}, "startup",
     30.0),
])
def test_unhealthy_grace(probes: dict[str, Any], failed: str, expected: float) -> None:
    container = pods.Container(name="a", image="busybox", **probes)
    assert pa.unhealthy_grace(pod("a"), container, failed) == expected


def test_a_killed_container_is_decided_again_as_exited() -> None:
    the_pod, the_state = pod("a"), state(ctr("a"))
    killed = ctr("a", EXITED, exit_code=137)
    action = pa.container_action(the_pod, the_pod.spec.containers[0], "regular", killed,
                                 the_state, facts())
    assert action == pa.Start(the_pod.spec.containers[0], "regular", 1, restart=True)


def test_newly_exited() -> None:
    assert pa.newly_exited([ctr("a")], [ctr("a", EXITED)])
    assert not pa.newly_exited([ctr("a", EXITED)], [ctr("a", EXITED)])
    assert not pa.newly_exited([], [ctr("a")])


def test_something_runs_until_every_container_exited_and_every_sandbox_was_stopped() -> None:
    sb = sandbox(state=NOTREADY)
    assert pa.something_runs(state(ctr("a"), boxes=(sb,)), stopped={sb.id})
    assert pa.something_runs(state(ctr("a", EXITED), boxes=(sb,)), stopped=set())
    assert not pa.something_runs(state(ctr("a", EXITED), boxes=(sb,)), stopped={sb.id})


@pytest.mark.parametrize(("the_pod", "running", "expected"), [
    pytest.param(pod("a", "b"), {"a", "b"}, {}, id="no-sidecars"),
    pytest.param(pod("a", "b", init=(sidecar("s1"), init("i"), sidecar("s2"))),
                 {"a", "b", "s1", "s2"},
                 {"s2": ("a", "b"), "s1": ("a", "b", "s2")}, id="reverse-order-after-the-app"),
    pytest.param(pod("a", "b", init=(sidecar("s1"), sidecar("s2"))), {"b", "s1", "s2"},
                 {"s2": ("b",), "s1": ("b", "s2")}, id="exited-app-is-no-wait"),
    # As the kubelet: the chain runs through the next declared sidecar, and one that does not
    # run is no wait — s1 then does not wait for s3.
    pytest.param(pod("a", init=(sidecar("s1"), sidecar("s2"), sidecar("s3"))),
                 {"a", "s1", "s3"}, {"s3": ("a",), "s1": ("a",)}, id="chain-through-stopped"),
])
def test_termination_prerequisites(the_pod: pods.Pod, running: set[str],
                                   expected: dict[str, tuple[str, ...]]) -> None:
    assert pa.termination_prerequisites(the_pod, running) == expected


@pytest.mark.parametrize(("the_pod", "the_state", "expected"), [
    # Found by tests/differential (sidecar-main-exits): nodelet kept the pod Running.
    pytest.param(pod("app", init=(sidecar("s"),), policy="Never"),
                 state(ctr("s"), ctr("app", EXITED)), True, id="never-app-done"),
    pytest.param(pod("app", init=(sidecar("s"),), policy="OnFailure"),
                 state(ctr("s"), ctr("app", EXITED)), True, id="onfailure-app-succeeded"),
    pytest.param(pod("app", init=(sidecar("s"),), policy="OnFailure"),
                 state(ctr("s"), ctr("app", EXITED, exit_code=1)), False,
                 id="onfailure-app-failed-restarts"),
    pytest.param(pod("app", init=(sidecar("s"),)), state(ctr("s"), ctr("app", EXITED)),
                 False, id="always-restarts"),
    pytest.param(pod("app", "b", init=(sidecar("s"),), policy="Never"),
                 state(ctr("s"), ctr("app", EXITED), ctr("b")), False, id="one-still-runs"),
    pytest.param(pod("app", init=(sidecar("s"),), policy="Never"),
                 state(ctr("s", EXITED), ctr("app", EXITED)), False, id="sidecar-exited"),
    pytest.param(pod("app", policy="Never"), state(ctr("app", EXITED)), False,
                 id="no-sidecar"),
])
def test_completed_with_sidecars(the_pod: pods.Pod, the_state: runtime.PodRuntime,
                                 expected: bool) -> None:
    actions = pa.container_actions(the_pod, the_state, facts())
    assert pa.completed_with_sidecars(actions) is expected
