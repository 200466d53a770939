"""The sandbox decision (DESIGN §3), including the kubelet's generate_test cases."""

from __future__ import annotations

import pytest

from nodelet.model.core import pods, runtime, sandboxes

READY = runtime.SandboxState.READY
NOTREADY = runtime.SandboxState.NOTREADY
POD_NS = runtime.NamespaceMode.POD
NODE_NS = runtime.NamespaceMode.NODE


def make_pod(
    *, host_network: bool = False, restart_policy: pods.RestartPolicy = "Always"
) -> pods.Pod:
    spec = pods.PodSpec(
        containers=(pods.Container(name="c", image="busybox"),),
        host_network=host_network,
        restart_policy=restart_policy,
    )
    return pods.Pod(uid=pods.PodUID("uid-1"), name="p", namespace="default", spec=spec)


def sandbox(
    id_: str,
    *,
    attempt: int = 0,
    state: runtime.SandboxState = READY,
    created_at: int = 0,
    mode: runtime.NamespaceMode = POD_NS,
    ip: str = "10.0.0.10",
) -> runtime.SandboxInfo:
    return runtime.SandboxInfo(
        id=runtime.SandboxID(id_),
        name="p",
        namespace="default",
        uid="uid-1",
        attempt=attempt,
        state=state,
        created_at=created_at if created_at else attempt + 1,
        network_mode=mode,
        ip=ip,
    )


# The six cases of TestGeneratePodReadyToStartContainersCondition, plus hostNetwork variants.
@pytest.mark.parametrize(
    ("host_network", "boxes", "needed", "reason"),
    [
        pytest.param(False, [], True, sandboxes.MSG_NO_SANDBOX, id="empty pod status"),
        pytest.param(
            False, [sandbox("a", state=NOTREADY)], True, sandboxes.MSG_NOT_READY, id="not ready"
        ),
        pytest.param(
            False,
            [sandbox("b", attempt=1, ip="10.0.0.10"), sandbox("a", attempt=0, ip="10.0.0.11")],
            True,
            sandboxes.MSG_MULTIPLE_READY,
            id="multiple ready sandboxes",
        ),
        pytest.param(
            True, [sandbox("a", mode=POD_NS)], True, sandboxes.MSG_NAMESPACE_MODE, id="ns mode"
        ),
        pytest.param(False, [sandbox("a", ip="")], True, sandboxes.MSG_NO_IP, id="no IP"),
        pytest.param(False, [sandbox("a")], False, "", id="ready with IP"),
        pytest.param(
            True, [sandbox("a", mode=NODE_NS, ip="")], False, "", id="hostNetwork needs no IP"
        ),
        pytest.param(
            False, [sandbox("a", mode=NODE_NS)], True, sandboxes.MSG_NAMESPACE_MODE, id="NODE mode"
        ),
        pytest.param(
            False,
            [sandbox("old", attempt=0), sandbox("new", attempt=1, state=NOTREADY)],
            True,
            sandboxes.MSG_NOT_READY,
            id="newest not ready although an older one is",
        ),
    ],
)
def test_sandbox_change_reason(
    host_network: bool, boxes: list[runtime.SandboxInfo], needed: bool, reason: str
) -> None:
    change = sandboxes.sandbox_change(make_pod(host_network=host_network), boxes)
    assert (change.needed, change.reason) == (needed, reason)


@pytest.mark.parametrize(
    ("boxes", "attempt", "to_kill"),
    [
        pytest.param([], 0, None, id="first sandbox"),
        pytest.param([sandbox("a", state=NOTREADY)], 1, "a", id="one dead sandbox"),
        pytest.param(
            [
                sandbox("old", attempt=3, created_at=1, state=NOTREADY),
                sandbox("new", attempt=1, created_at=2, state=NOTREADY),
            ],
            4,
            "new",
            id="max attempt over all, newest killed",
        ),
        pytest.param([sandbox("a", attempt=2)], 2, "a", id="not needed: the sandbox in use"),
        pytest.param([sandbox("a", ip="", attempt=5)], 6, "a", id="no IP"),
    ],
)
def test_sandbox_change_attempt_and_kill(
    boxes: list[runtime.SandboxInfo], attempt: int, to_kill: str | None
) -> None:
    change = sandboxes.sandbox_change(make_pod(), boxes)
    assert (change.attempt, change.sandbox_to_kill) == (attempt, to_kill)


def test_namespace_mode_change_kills_nothing_like_the_kubelet() -> None:
    change = sandboxes.sandbox_change(make_pod(host_network=True), [sandbox("a")])
    assert change.needed
    assert change.sandbox_to_kill is None
    assert change.attempt == 1


def test_newest_is_chosen_by_creation_time_not_list_order() -> None:
    boxes = [
        sandbox("old", attempt=0, created_at=10, state=READY),
        sandbox("new", attempt=1, created_at=20, state=NOTREADY),
    ]
    for order in (boxes, boxes[::-1]):
        change = sandboxes.sandbox_change(make_pod(), order)
        assert (change.reason, change.sandbox_to_kill) == (sandboxes.MSG_NOT_READY, "new")


@pytest.mark.parametrize(
    ("policy", "needed", "attempt", "history", "expected"),
    [
        ("Always", True, 0, False, True),
        ("Always", True, 3, True, True),
        ("OnFailure", True, 3, True, True),
        ("Never", True, 0, False, True),  # first sandbox
        ("Never", True, 0, True, True),  # attempt 0: nothing has died yet
        ("Never", True, 1, False, True),  # no container ran in the dead sandbox
        ("Never", True, 1, True, False),  # sandbox died after containers ran
        ("Always", False, 0, True, False),
    ],
)
def test_should_create_sandbox(
    policy: pods.RestartPolicy, needed: bool, attempt: int, history: bool, expected: bool
) -> None:
    change = sandboxes.SandboxChange(needed, attempt, "x" if needed else "", None)
    assert sandboxes.should_create_sandbox(make_pod(restart_policy=policy), change, history) is (
        expected
    )


@pytest.mark.parametrize(
    ("ip", "extra", "expected"),
    [
        ("10.0.0.2", (), ("10.0.0.2",)),
        ("10.0.0.2", ("fd00::2",), ("10.0.0.2", "fd00::2")),
        ("", (), ()),
    ],
)
def test_sandbox_ips(ip: str, extra: tuple[str, ...], expected: tuple[str, ...]) -> None:
    info = runtime.SandboxInfo(
        id=runtime.SandboxID("a"),
        name="p",
        namespace="default",
        uid="u",
        attempt=0,
        state=READY,
        created_at=1,
        ip=ip,
        additional_ips=extra,
    )
    assert sandboxes.sandbox_ips(info) == expected
