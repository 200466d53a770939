"""Pod conditions: one table per generator, then the assembly with gates and merging."""

from __future__ import annotations

import pytest

from nodelet import settings
from nodelet.model.core import conditions, pods, runtime, status
from nodelet.model.core.status import PodCondition

RUNNING = status.ContainerStateRunning()
WAITING = status.ContainerStateWaiting(reason="ContainerCreating")
DONE = status.ContainerStateTerminated(exit_code=0, reason="Completed")


def make_pod(
    containers: tuple[str, ...] = ("app",),
    inits: tuple[str, ...] = (),
    sidecars: tuple[str, ...] = (),
    gates: tuple[str, ...] = (),
) -> pods.Pod:
    init_containers = tuple(pods.Container(name=n, image="busybox") for n in inits) + tuple(
        pods.Container(name=n, image="busybox", restart_policy="Always") for n in sidecars
    )
    spec = pods.PodSpec(
        containers=tuple(pods.Container(name=n, image="busybox") for n in containers),
        init_containers=init_containers,
        readiness_gates=gates,
    )
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default", spec=spec)


def cs(
    name: str,
    state: status.ContainerStateValue = RUNNING,
    *,
    ready: bool = True,
    started: bool | None = True,
) -> status.ContainerStatus:
    return status.ContainerStatus(
        name=name, image="busybox", state=state, ready=ready, started=started
    )


def ready_sandbox(ip: str = "10.0.0.5") -> runtime.SandboxInfo:
    return runtime.SandboxInfo(
        id=runtime.SandboxID("sb"),
        name="p",
        namespace="default",
        uid="u",
        attempt=0,
        state=runtime.SandboxState.READY,
        created_at=1,
        ip=ip,
    )


def cond(
    type_: str, status_: status.ConditionStatus, reason: str = "", message: str = ""
) -> PodCondition:
    return PodCondition(type=type_, status=status_, reason=reason, message=message)


# --- ready to start ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("boxes", "error", "expected"),
    [
        ([ready_sandbox()], None, cond(status.POD_READY_TO_START_CONTAINERS, "True")),
        (
            [ready_sandbox()],
            "leftover error",
            cond(status.POD_READY_TO_START_CONTAINERS, "True"),
        ),
        (
            [],
            None,
            cond(
                status.POD_READY_TO_START_CONTAINERS,
                "False",
                "PodSandboxNotReady",
                "no pod sandbox exists",
            ),
        ),
        (
            [],
            "failed to create pod sandbox: plugin type=bridge failed (add): no IP addresses "
            "available in range set",
            cond(
                status.POD_READY_TO_START_CONTAINERS,
                "False",
                "PodSandboxNotReady",
                "no pod sandbox exists: failed to create pod sandbox: plugin type=bridge failed "
                "(add): no IP addresses available in range set",
            ),
        ),
        (
            [ready_sandbox(ip="")],
            None,
            cond(
                status.POD_READY_TO_START_CONTAINERS,
                "False",
                "PodSandboxNotReady",
                "pod sandbox has no IP address",
            ),
        ),
    ],
)
def test_ready_to_start_containers(
    boxes: list[runtime.SandboxInfo], error: str | None, expected: PodCondition
) -> None:
    assert conditions.ready_to_start_containers(make_pod(), boxes, error) == expected


def test_ready_to_start_under_old_name() -> None:
    got = conditions.ready_to_start_containers(
        make_pod(), [], None, condition_type=status.POD_HAS_NETWORK
    )
    assert (got.type, got.status) == ("PodHasNetwork", "False")


# --- Initialized -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "inits", "regular", "phase", "expected"),
    [
        pytest.param(make_pod(), None, None, "Pending", cond("Initialized", "True"), id="no init"),
        pytest.param(
            make_pod(inits=("i",)),
            None,
            None,
            "Pending",
            cond("Initialized", "False", "UnknownContainerStatuses"),
            id="unknown statuses",
        ),
        pytest.param(
            make_pod(inits=("i1", "i2")),
            [cs("i1", DONE, ready=True)],
            [],
            "Pending",
            cond(
                "Initialized",
                "False",
                "ContainersNotInitialized",
                "containers with unknown status: [i2]",
            ),
            id="one missing",
        ),
        pytest.param(
            make_pod(inits=("i1", "i2")),
            [cs("i1", RUNNING, ready=False), cs("i2", WAITING, ready=False)],
            [],
            "Pending",
            cond(
                "Initialized",
                "False",
                "ContainersNotInitialized",
                "containers with incomplete status: [i1 i2]",
            ),
            id="incomplete",
        ),
        pytest.param(
            make_pod(inits=("i",)),
            [cs("i", DONE, ready=True)],
            [],
            "Pending",
            cond("Initialized", "True"),
            id="done",
        ),
        pytest.param(
            make_pod(sidecars=("s",)),
            [cs("s", RUNNING, ready=False, started=True)],
            [],
            "Pending",
            cond("Initialized", "True"),
            id="sidecar started",
        ),
        pytest.param(
            make_pod(sidecars=("s",)),
            [cs("s", RUNNING, ready=False, started=False)],
            [],
            "Pending",
            cond(
                "Initialized",
                "False",
                "ContainersNotInitialized",
                "containers with incomplete status: [s]",
            ),
            id="sidecar not started",
        ),
        pytest.param(
            make_pod(inits=("i",)),
            [cs("i", DONE, ready=True)],
            [],
            "Succeeded",
            cond("Initialized", "True", "PodCompleted"),
            id="succeeded",
        ),
        pytest.param(
            make_pod(sidecars=("s",)),
            [cs("s", WAITING, ready=False, started=False)],
            [cs("app", RUNNING)],
            "Running",
            cond("Initialized", "True"),
            id="regular container started: stays initialized",
        ),
    ],
)
def test_initialized(
    pod: pods.Pod,
    inits: list[status.ContainerStatus] | None,
    regular: list[status.ContainerStatus] | None,
    phase: status.PodPhase,
    expected: PodCondition,
) -> None:
    assert conditions.initialized(pod, inits, phase, container_statuses=regular) == expected


# --- ContainersReady ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "regular", "inits", "phase", "expected"),
    [
        pytest.param(
            make_pod(),
            None,
            None,
            "Pending",
            cond("ContainersReady", "False", "UnknownContainerStatuses"),
            id="unknown",
        ),
        pytest.param(
            make_pod(("a", "b")),
            [cs("a")],
            [],
            "Running",
            cond(
                "ContainersReady",
                "False",
                "ContainersNotReady",
                "containers with unknown status: [b]",
            ),
            id="missing",
        ),
        pytest.param(
            make_pod(("a", "b", "c")),
            [cs("a", ready=False), cs("c", WAITING, ready=False)],
            [],
            "Running",
            cond(
                "ContainersReady",
                "False",
                "ContainersNotReady",
                "containers with unknown status: [b], containers with unready status: [a c]",
            ),
            id="unknown and unready",
        ),
        pytest.param(
            make_pod(("a",)), [cs("a")], [], "Running", cond("ContainersReady", "True"), id="ready"
        ),
        pytest.param(
            make_pod(("a",), sidecars=("s",)),
            [cs("a")],
            [cs("s", ready=False)],
            "Running",
            cond(
                "ContainersReady",
                "False",
                "ContainersNotReady",
                "containers with unready status: [s]",
            ),
            id="sidecar counts",
        ),
        pytest.param(
            make_pod(("a",), inits=("i",)),
            [cs("a")],
            [cs("i", WAITING, ready=False)],
            "Running",
            cond("ContainersReady", "True"),
            id="regular init does not count",
        ),
        pytest.param(
            make_pod(("a",)),
            [cs("a", DONE, ready=False)],
            [],
            "Succeeded",
            cond("ContainersReady", "False", "PodCompleted"),
            id="succeeded",
        ),
        pytest.param(
            make_pod(("a",)),
            [cs("a", RUNNING, ready=True)],
            [],
            "Failed",
            cond("ContainersReady", "False", "PodFailed"),
            id="failed",
        ),
    ],
)
def test_containers_ready(
    pod: pods.Pod,
    regular: list[status.ContainerStatus] | None,
    inits: list[status.ContainerStatus] | None,
    phase: status.PodPhase,
    expected: PodCondition,
) -> None:
    assert conditions.containers_ready(pod, regular, inits, phase) == expected


# --- Ready -------------------------------------------------------------------------------------

CR_TRUE = cond("ContainersReady", "True")


@pytest.mark.parametrize(
    ("gates", "cr", "existing", "expected"),
    [
        pytest.param((), CR_TRUE, [], cond("Ready", "True"), id="ready"),
        pytest.param(
            (),
            cond(
                "ContainersReady",
                "False",
                "ContainersNotReady",
                "containers with unready status: [a]",
            ),
            [],
            cond("Ready", "False", "ContainersNotReady", "containers with unready status: [a]"),
            id="copies ContainersReady",
        ),
        pytest.param(
            ("example.com/lb",),
            CR_TRUE,
            [],
            cond(
                "Ready",
                "False",
                "ReadinessGatesNotReady",
                'corresponding condition of pod readiness gate "example.com/lb" does not exist.',
            ),
            id="gate missing",
        ),
        pytest.param(
            ("example.com/lb", "other"),
            CR_TRUE,
            [cond("example.com/lb", "False"), cond("other", "Unknown")],
            cond(
                "Ready",
                "False",
                "ReadinessGatesNotReady",
                'the status of pod readiness gate "example.com/lb" is not "True", but False, '
                'the status of pod readiness gate "other" is not "True", but Unknown',
            ),
            id="gates not true",
        ),
        pytest.param(
            ("example.com/lb",),
            CR_TRUE,
            [cond("example.com/lb", "True")],
            cond("Ready", "True"),
            id="gate true",
        ),
    ],
)
def test_pod_ready(
    gates: tuple[str, ...], cr: PodCondition, existing: list[PodCondition], expected: PodCondition
) -> None:
    assert conditions.pod_ready(make_pod(gates=gates), cr, existing, "Running") == expected


def test_pod_scheduled() -> None:
    assert conditions.pod_scheduled() == cond("PodScheduled", "True")


# --- assembly ----------------------------------------------------------------------------------

ON = settings.FeatureGates()
OFF = settings.FeatureGates(pod_ready_to_start_containers=False)
OLD_NAME = settings.FeatureGates(pod_has_network=True)


def generate(
    pod: pods.Pod,
    gates: settings.FeatureGates,
    old: tuple[PodCondition, ...] = (),
    boxes: tuple[runtime.SandboxInfo, ...] = (),
    regular: list[status.ContainerStatus] | None = None,
) -> tuple[PodCondition, ...]:
    return conditions.generate_conditions(
        pod,
        old_conditions=old,
        sandboxes=boxes,
        last_sandbox_error=None,
        container_statuses=[] if regular is None else regular,
        init_statuses=[],
        phase="Pending",
        gates=gates,
    )


@pytest.mark.parametrize(
    ("gates", "old", "types"),
    [
        pytest.param(
            ON,
            (),
            [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ],
            id="kubelet order",
        ),
        pytest.param(
            OFF, (), ["Initialized", "Ready", "ContainersReady", "PodScheduled"], id="gate off"
        ),
        pytest.param(
            OLD_NAME,
            (),
            ["PodHasNetwork", "Initialized", "Ready", "ContainersReady", "PodScheduled"],
            id="old name",
        ),
        pytest.param(
            OFF,
            (cond("PodReadyToStartContainers", "True"),),
            [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ],
            id="gate off: not owned, kept as written",
        ),
        pytest.param(
            ON,
            (
                cond("example.com/lb", "True"),
                cond("Ready", "True"),
                cond("DisruptionTarget", "True", "TerminationByKubelet"),
                cond("PodReadyToStartContainers", "True"),
                cond("PodScheduled", "True"),
            ),
            [
                "example.com/lb",
                "DisruptionTarget",
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ],
            id="unowned kept in place, owned regenerated",
        ),
    ],
)
def test_generate_conditions_types(
    gates: settings.FeatureGates, old: tuple[PodCondition, ...], types: list[str]
) -> None:
    assert [c.type for c in generate(make_pod(), gates, old)] == types


def test_generate_conditions_regenerates_owned_and_keeps_others_untouched() -> None:
    disruption = cond("DisruptionTarget", "True", "TerminationByKubelet", "node shutdown")
    old = (cond("PodReadyToStartContainers", "True"), disruption, cond("Ready", "True"))
    got = {c.type: c for c in generate(make_pod(), ON, old)}
    assert got["DisruptionTarget"] is disruption
    assert got["PodReadyToStartContainers"] == cond(
        "PodReadyToStartContainers", "False", "PodSandboxNotReady", "no pod sandbox exists"
    )
    assert got["Ready"].status == "False"


def test_generate_conditions_ready_sees_readiness_gates_from_old() -> None:
    pod = make_pod(gates=("example.com/lb",))
    boxes = (ready_sandbox(),)
    running = [cs("app")]
    not_yet = {c.type: c for c in generate(pod, ON, (), boxes, running)}
    assert not_yet["Ready"].reason == "ReadinessGatesNotReady"
    assert not_yet["ContainersReady"].status == "True"
    gated = {
        c.type: c for c in generate(pod, ON, (cond("example.com/lb", "True"),), boxes, running)
    }
    assert gated["Ready"] == cond("Ready", "True")
    assert gated["PodReadyToStartContainers"] == cond("PodReadyToStartContainers", "True")


def test_generate_conditions_sets_no_transition_time() -> None:
    assert all(c.last_transition_time is None for c in generate(make_pod(), ON))
