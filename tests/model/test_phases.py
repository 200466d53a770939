"""The pod phase (the kubelet's getPhase) and container statuses from runtime containers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from nodelet.model.core import phases, pods, runtime, status

RUNNING = status.ContainerStateRunning()
WAITING = status.ContainerStateWaiting(reason="ContainerCreating")
OK = status.ContainerStateTerminated(exit_code=0, reason="Completed")
ERR = status.ContainerStateTerminated(exit_code=1, reason="Error")
BACKOFF = status.ContainerStateWaiting(reason="CrashLoopBackOff")


def make_pod(
    containers: tuple[str, ...] = ("app",),
    inits: tuple[str, ...] = (),
    sidecars: tuple[str, ...] = (),
    policy: pods.RestartPolicy = "Always",
    **container_kw: Any,
) -> pods.Pod:
    init_containers = tuple(pods.Container(name=n, image="busybox") for n in inits) + tuple(
        pods.Container(name=n, image="busybox", restart_policy="Always") for n in sidecars
    )
    spec = pods.PodSpec(
        containers=tuple(
            pods.Container(name=n, image="busybox", **container_kw) for n in containers
        ),
        init_containers=init_containers,
        restart_policy=policy,
    )
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default", spec=spec)


def cs(
    name: str,
    state: status.ContainerStateValue,
    last: status.ContainerStateValue | None = None,
    started: bool | None = None,
) -> status.ContainerStatus:
    return status.ContainerStatus(
        name=name, image="busybox", state=state, last_state=last, started=started
    )


@pytest.mark.parametrize(
    ("pod", "inits", "regular", "expected"),
    [
        pytest.param(make_pod(), [], [], "Pending", id="nothing yet"),
        pytest.param(make_pod(), [], [cs("app", WAITING)], "Pending", id="waiting"),
        pytest.param(make_pod(), [], [cs("app", RUNNING)], "Running", id="running"),
        pytest.param(make_pod(("a", "b")), [], [cs("a", RUNNING)], "Pending", id="one unknown"),
        pytest.param(make_pod(inits=("i",)), [cs("i", RUNNING)], [], "Pending", id="init running"),
        pytest.param(
            make_pod(inits=("i",)),
            [cs("i", OK)],
            [cs("app", RUNNING)],
            "Running",
            id="init done, app running",
        ),
        pytest.param(
            make_pod(inits=("i",), policy="Never"),
            [cs("i", ERR)],
            [cs("app", WAITING)],
            "Failed",
            id="init failed, Never",
        ),
        pytest.param(
            make_pod(inits=("i",), policy="Always"),
            [cs("i", BACKOFF, last=ERR)],
            [cs("app", WAITING)],
            "Pending",
            id="init crash looping, Always",
        ),
        pytest.param(
            make_pod(sidecars=("s",)),
            [cs("s", RUNNING, started=False)],
            [cs("app", WAITING)],
            "Pending",
            id="sidecar not started",
        ),
        pytest.param(
            make_pod(sidecars=("s",)),
            [cs("s", RUNNING, started=True)],
            [cs("app", RUNNING)],
            "Running",
            id="sidecar and app running",
        ),
        pytest.param(
            make_pod(sidecars=("s",), policy="Never"),
            [cs("s", OK)],
            [cs("app", OK)],
            "Succeeded",
            id="terminated sidecar ignored",
        ),
        pytest.param(
            make_pod(policy="Always"), [], [cs("app", OK)], "Running", id="Always restarts"
        ),
        pytest.param(make_pod(policy="Never"), [], [cs("app", OK)], "Succeeded", id="Never ok"),
        pytest.param(make_pod(policy="Never"), [], [cs("app", ERR)], "Failed", id="Never error"),
        pytest.param(
            make_pod(policy="OnFailure"), [], [cs("app", OK)], "Succeeded", id="OnFailure ok"
        ),
        pytest.param(
            make_pod(policy="OnFailure"),
            [],
            [cs("app", ERR)],
            "Running",
            id="OnFailure error restarts",
        ),
        pytest.param(
            make_pod(policy="Always"),
            [],
            [cs("app", BACKOFF, last=ERR)],
            "Running",
            id="crash loop counts as stopped",
        ),
        pytest.param(
            make_pod(("a", "b"), policy="Never"),
            [],
            [cs("a", OK), cs("b", RUNNING)],
            "Running",
            id="one still running",
        ),
    ],
)
def test_pod_phase(
    pod: pods.Pod,
    inits: list[status.ContainerStatus],
    regular: list[status.ContainerStatus],
    expected: status.PodPhase,
) -> None:
    assert phases.pod_phase(pod, inits, regular) == expected


@pytest.mark.parametrize("old", ["Succeeded", "Failed"])
def test_terminal_phase_never_goes_back(old: status.PodPhase) -> None:
    pod = make_pod()
    assert phases.pod_phase(pod, [], [cs("app", RUNNING)], old_phase=old) == old


def test_non_terminal_old_phase_is_recomputed() -> None:
    assert phases.pod_phase(make_pod(), [], [cs("app", RUNNING)], old_phase="Pending") == "Running"


# --- container statuses ------------------------------------------------------------------------

NS = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z in nanoseconds
T0 = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def info(
    name: str,
    attempt: int = 0,
    state: runtime.ContainerState = runtime.ContainerState.RUNNING,
    exit_code: int = 0,
    reason: str = "",
) -> runtime.ContainerInfo:
    return runtime.ContainerInfo(
        id=runtime.ContainerID(f"{name}-{attempt}"),
        sandbox_id=runtime.SandboxID("sb"),
        name=name,
        attempt=attempt,
        image="docker.io/library/busybox:latest",
        image_ref="sha256:abc",
        state=state,
        created_at=NS + attempt,
        started_at=NS,
        finished_at=NS + 2_000_000_000 if state is runtime.ContainerState.EXITED else 0,
        exit_code=exit_code,
        reason=reason,
    )


EXITED = runtime.ContainerState.EXITED


def test_missing_containers_are_creating() -> None:
    inits, regular = phases.container_statuses(make_pod(("a", "b")), [])
    assert inits == ()
    assert [(s.name, s.state, s.ready) for s in regular] == [
        ("a", status.ContainerStateWaiting(reason="ContainerCreating"), False),
        ("b", status.ContainerStateWaiting(reason="ContainerCreating"), False),
    ]


def test_pod_initializing_with_init_containers() -> None:
    inits, regular = phases.container_statuses(make_pod(inits=("i",)), [info("i")])
    assert inits[0].state == status.ContainerStateRunning(started_at=T0)
    assert inits[0].ready is False
    assert regular[0].state == status.ContainerStateWaiting(reason="PodInitializing")


@pytest.mark.parametrize(
    ("exit_code", "runtime_reason", "reason"),
    [
        (0, "", "Completed"),
        (1, "", "Error"),
        (137, "OOMKilled", "OOMKilled"),
        (2, "Error", "Error"),
    ],
)
def test_exited_is_terminated(exit_code: int, runtime_reason: str, reason: str) -> None:
    _, (got,) = phases.container_statuses(
        make_pod(), [info("app", state=EXITED, exit_code=exit_code, reason=runtime_reason)]
    )
    assert got.state == status.ContainerStateTerminated(
        exit_code=exit_code,
        reason=reason,
        started_at=T0,
        finished_at=datetime(2023, 11, 14, 22, 13, 22, tzinfo=UTC),
        container_id="containerd://app-0",
    )
    assert (got.ready, got.started) == (False, False)


@pytest.mark.parametrize(
    ("container_kw", "ready_map", "expected_ready", "expected_started"),
    [
        pytest.param({}, None, True, True, id="no probe: ready"),
        pytest.param({"readiness_probe": {"exec": {}}}, None, False, True, id="probe, no result"),
        pytest.param({"readiness_probe": {"exec": {}}}, {"app": True}, True, True, id="probe ok"),
        pytest.param({}, {"app": False}, False, True, id="explicit not ready"),
        pytest.param({"startup_probe": {"exec": {}}}, None, False, False, id="not started yet"),
    ],
)
def test_readiness_defaults(
    container_kw: dict[str, Any],
    ready_map: dict[str, bool] | None,
    expected_ready: bool,
    expected_started: bool,
) -> None:
    _, (got,) = phases.container_statuses(make_pod(**container_kw), [info("app")], ready=ready_map)
    assert (got.ready, got.started) == (expected_ready, expected_started)


def test_attempts_give_last_state_and_restart_count() -> None:
    runs = [
        info("app", 0, EXITED, exit_code=1),
        info("app", 2, runtime.ContainerState.RUNNING),
        info("app", 1, EXITED, exit_code=2),
    ]
    _, (got,) = phases.container_statuses(make_pod(), runs)
    assert isinstance(got.state, status.ContainerStateRunning)
    assert isinstance(got.last_state, status.ContainerStateTerminated)
    assert got.last_state.exit_code == 2
    assert got.restart_count == 2
    assert (got.container_id, got.image_id) == ("containerd://app-2", "sha256:abc")


def test_waiting_override_moves_exit_to_last_state() -> None:
    message = "back-off 10s restarting failed container=app pod=p_default(u)"
    _, (got,) = phases.container_statuses(
        make_pod(),
        [info("app", 0, EXITED, exit_code=1), info("app", 1, EXITED, exit_code=1)],
        waiting={"app": ("CrashLoopBackOff", message)},
    )
    assert got.state == status.ContainerStateWaiting("CrashLoopBackOff", message)
    assert isinstance(got.last_state, status.ContainerStateTerminated)
    assert got.last_state.container_id == "containerd://app-1"
    assert got.restart_count == 1


def test_waiting_override_for_missing_container() -> None:
    _, (got,) = phases.container_statuses(
        make_pod(), [], waiting={"app": ("ErrImagePull", "pull failed")}
    )
    assert got.state == status.ContainerStateWaiting("ErrImagePull", "pull failed")


def test_waiting_override_ignored_while_running() -> None:
    _, (got,) = phases.container_statuses(
        make_pod(), [info("app")], waiting={"app": ("CrashLoopBackOff", "x")}
    )
    assert isinstance(got.state, status.ContainerStateRunning)


def test_a_sidecar_that_completed_or_a_pod_being_deleted_shows_no_waiting_reason() -> None:
    """The kubelet skips an init container that exited 0, a sidecar too, and restarts
    nothing of a pod being deleted (ShouldContainerBeRestarted)."""
    done = info("side", 0, EXITED, exit_code=0, reason="Completed")
    (got,), _ = phases.container_statuses(
        make_pod(containers=("app",), sidecars=("side",)), [done],
        waiting={"side": ("CrashLoopBackOff", "x")})
    assert isinstance(got.state, status.ContainerStateTerminated)
    deleting = replace(make_pod(), deletion_timestamp=T0)
    failed = info("app", 0, EXITED, exit_code=128, reason="StartError")
    _, (got,) = phases.container_statuses(deleting, [failed],
                                          waiting={"app": ("RunContainerError", "x")})
    assert isinstance(got.state, status.ContainerStateTerminated)


@pytest.mark.parametrize(
    ("policy", "inits", "waiting_shown"),
    [
        pytest.param("Never", (), False, id="never: stays terminated"),
        pytest.param("OnFailure", (), True, id="on failure: restarted, waits"),
        pytest.param("Always", (), True, id="always: restarted, waits"),
        pytest.param("Never", ("app",), False, id="init, never: stays terminated"),
        pytest.param("OnFailure", ("app",), True, id="init, on failure: waits"),
    ],
)
def test_a_start_error_waits_only_when_restarted(
    policy: pods.RestartPolicy, inits: tuple[str, ...], waiting_shown: bool
) -> None:
    """The kubelet shows why a start failed (RunContainerError) only for a container it will
    start again; otherwise the runtime's StartError (exit code 128) stays, with no last state."""
    pod = make_pod(containers=() if inits else ("app",), inits=inits, policy=policy)
    failed = info("app", 0, EXITED, exit_code=128, reason="StartError")
    init_statuses, regular = phases.container_statuses(
        pod, [failed], waiting={"app": ("RunContainerError", "exec: no such file")})
    (got,) = init_statuses or regular
    if waiting_shown:
        assert got.state == status.ContainerStateWaiting("RunContainerError",
                                                         "exec: no such file")
        assert isinstance(got.last_state, status.ContainerStateTerminated)
    else:
        assert isinstance(got.state, status.ContainerStateTerminated)
        assert (got.state.reason, got.state.exit_code) == ("StartError", 128)
        assert got.last_state is None


@pytest.mark.parametrize(
    ("mount", "supported", "expected"),
    [
        pytest.param(pods.VolumeMount("v", "/v"), True, ("", False), id="writable"),
        pytest.param(pods.VolumeMount("v", "/v", read_only=True), True, ("Disabled", True),
                     id="read-only"),
        pytest.param(pods.VolumeMount("v", "/v", read_only=True,
                                      recursive_read_only="IfPossible"), True,
                     ("Enabled", True), id="if possible, supported"),
        pytest.param(pods.VolumeMount("v", "/v", read_only=True,
                                      recursive_read_only="IfPossible"), False,
                     ("Disabled", True), id="if possible, not supported"),
        pytest.param(pods.VolumeMount("v", "/v", read_only=True,
                                      recursive_read_only="Enabled"), False,
                     ("Disabled", True), id="enabled, not supported: cannot resolve"),
        pytest.param(pods.VolumeMount("v", "/v", read_only=True,
                                      recursive_read_only="Enabled",
                                      mount_propagation="HostToContainer"), True,
                     ("Disabled", True), id="enabled with propagation: cannot resolve"),
    ],
)
def test_volume_mount_statuses(mount: pods.VolumeMount, supported: bool,
                               expected: tuple[str, bool]) -> None:
    """containerStatuses[].volumeMounts as the kubelet 1.37 writes them."""
    container = pods.Container(name="app", image="busybox", volume_mounts=(mount,))
    (got,) = phases.volume_mount_statuses(container, rro_supported=supported)
    assert (got.name, got.mount_path) == ("v", "/v")
    assert (got.recursive_read_only, got.read_only) == expected
    shown = status._container_status_to_api(status.ContainerStatus(
        name="app", image="busybox", state=RUNNING, volume_mounts=(got,)))["volumeMounts"]
    assert shown == [{"name": "v", "mountPath": "/v",
                      **({"readOnly": True, "recursiveReadOnly": expected[0]}
                         if expected[1] else {})}]


@pytest.mark.parametrize(("exit_code", "ready"), [(0, True), (1, False)])
def test_init_container_ready_when_completed(exit_code: int, ready: bool) -> None:
    (got,), _ = phases.container_statuses(
        make_pod(inits=("i",)), [info("i", state=EXITED, exit_code=exit_code)]
    )
    assert got.ready is ready


def test_sidecar_ready_like_a_regular_container() -> None:
    (got,), _ = phases.container_statuses(make_pod(sidecars=("s",)), [info("s")])
    assert (got.ready, got.started) == (True, True)


def test_statuses_follow_spec_order_and_ignore_unknown_names() -> None:
    _, regular = phases.container_statuses(
        make_pod(("b", "a")), [info("a"), info("zzz"), info("b")]
    )
    assert [s.name for s in regular] == ["b", "a"]


def test_created_container_is_waiting() -> None:
    _, (got,) = phases.container_statuses(
        make_pod(), [info("app", state=runtime.ContainerState.CREATED)]
    )
    assert got.state == status.ContainerStateWaiting(reason="ContainerCreating")
