"""The alpha conditions beyond KEP-3085 (`extraconditions`): one table per gate, then the
assembly through `conditions.generate_conditions` (all gates off: the kubelet's conditions)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodelet import settings
from nodelet.model.core import conditions, extraconditions, pods, runtime, status
from nodelet.model.core import extraconditions as xc
from nodelet.model.core.status import PodCondition

V4, V6 = "10.0.0.5", "fd00::5"
BOTH: tuple[xc.Family, ...] = ("IPv4", "IPv6")
RUNNING = status.ContainerStateRunning()
WAITING = status.ContainerStateWaiting(reason="ContainerCreating")
MOUNT_ERROR = 'MountVolume.SetUp failed for volume "cm" : configmap "missing" not found'


def make_pod(*, inits: tuple[str, ...] = (), host_network: bool = False,
             volumes: tuple[str, ...] = ()) -> pods.Pod:
    spec = pods.PodSpec(
        containers=(pods.Container(name="app", image="busybox"),),
        init_containers=tuple(pods.Container(name=n, image="busybox") for n in inits),
        host_network=host_network,
        volumes=tuple(pods.Volume(name=v, source_type="configMap") for v in volumes),
    )
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default", spec=spec)


def sandbox(*ips: str, state: runtime.SandboxState = runtime.SandboxState.READY,
            host: bool = False) -> runtime.SandboxInfo:
    return runtime.SandboxInfo(
        id=runtime.SandboxID("sb"), name="p", namespace="default", uid="u", attempt=0,
        state=state, created_at=1, ip=ips[0] if ips else "", additional_ips=ips[1:],
        network_mode=runtime.NamespaceMode.NODE if host else runtime.NamespaceMode.POD)


def cond(type_: str, status_: status.ConditionStatus, reason: str = "",
         message: str = "") -> PodCondition:
    return PodCondition(type=type_, status=status_, reason=reason, message=message)


def cs(state: status.ContainerStateValue) -> status.ContainerStatus:
    return status.ContainerStatus(name="app", image="busybox", state=state, ready=False)


ALL_GATES = settings.FeatureGates(
    pod_ip_family_conditions=True, pod_ready_needs_all_ip_families=True,
    pod_volumes_condition=True, pod_initialized_after_sandbox=True)


# --- served families ---------------------------------------------------------------------------


@pytest.mark.parametrize(("cidrs", "expected"), [
    ((), ("IPv4",)),
    (("10.1.0.0/24",), ("IPv4",)),
    (("10.1.0.0/24", "fd00:1::/64"), ("IPv4", "IPv6")),
    (("fd00:1::/64", "10.1.0.0/24"), ("IPv6", "IPv4")),
    (("fd00:1::/64",), ("IPv6",)),
    (("10.1.0.0/24", "10.2.0.0/24"), ("IPv4",)),
    (("not a cidr", "fd00:1::/64"), ("IPv6",)),
])
def test_served_families(cidrs: tuple[str, ...], expected: tuple[str, ...]) -> None:
    assert xc.served_families(cidrs) == expected


# --- per-family conditions ---------------------------------------------------------------------


@pytest.mark.parametrize(("boxes", "family", "expected"), [
    ([sandbox(V4, V6)], "IPv4", cond(xc.IPV4_READY, "True")),
    ([sandbox(V4, V6)], "IPv6", cond(xc.IPV6_READY, "True")),
    ([sandbox(V6, V4)], "IPv4", cond(xc.IPV4_READY, "True")),
    ([sandbox(V4)], "IPv4", cond(xc.IPV4_READY, "True")),
    ([sandbox(V4)], "IPv6", cond(
        xc.IPV6_READY, "False", "PodSandboxNoIPv6Address",
        "pod sandbox has no IPv6 address (the node serves IPv4 and IPv6)")),
    ([sandbox(V6)], "IPv4", cond(
        xc.IPV4_READY, "False", "PodSandboxNoIPv4Address",
        "pod sandbox has no IPv4 address (the node serves IPv4 and IPv6)")),
    ([], "IPv4", cond(xc.IPV4_READY, "False", "PodSandboxNoIPv4Address",
                      "pod sandbox has no IPv4 address: no pod sandbox exists")),
    ([sandbox(V4, V6, state=runtime.SandboxState.NOTREADY)], "IPv6", cond(
        xc.IPV6_READY, "False", "PodSandboxNoIPv6Address",
        "pod sandbox has no IPv6 address: pod sandbox is not ready")),
    ([sandbox()], "IPv4", cond(xc.IPV4_READY, "False", "PodSandboxNoIPv4Address",
                               "pod sandbox has no IPv4 address: pod sandbox has no IP address")),
])
def test_family_condition(boxes: list[runtime.SandboxInfo], family: xc.Family,
                          expected: PodCondition) -> None:
    assert xc.family_condition(make_pod(), boxes, family, BOTH) == expected


@pytest.mark.parametrize(("boxes", "served", "expected"), [
    ([sandbox(V4, V6)], BOTH, cond(status.POD_READY_TO_START_CONTAINERS, "True")),
    ([sandbox(V4)], ("IPv4",), cond(status.POD_READY_TO_START_CONTAINERS, "True")),
    ([sandbox(V4)], BOTH, cond(
        status.POD_READY_TO_START_CONTAINERS, "False", "PodSandboxNoIPv6Address",
        "pod sandbox has no IPv6 address (the node serves IPv4 and IPv6)")),
    ([sandbox(V6)], BOTH, cond(
        status.POD_READY_TO_START_CONTAINERS, "False", "PodSandboxNoIPv4Address",
        "pod sandbox has no IPv4 address (the node serves IPv4 and IPv6)")),
])
def test_ready_to_start_needs_all_families(
    boxes: list[runtime.SandboxInfo], served: tuple[xc.Family, ...], expected: PodCondition
) -> None:
    ready = conditions.ready_to_start_containers(make_pod(), boxes, None)
    assert xc.all_families(ready, make_pod(), boxes, served) == expected


def test_all_families_keeps_false_and_host_network() -> None:
    not_ready = conditions.ready_to_start_containers(make_pod(), [], "boom")
    assert xc.all_families(not_ready, make_pod(), [], BOTH) == not_ready
    host = make_pod(host_network=True)
    ready = conditions.ready_to_start_containers(host, [sandbox(host=True)], None)
    assert xc.all_families(ready, host, [sandbox(host=True)], BOTH) == ready


# --- volumes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("volumes", "boxes", "facts", "expected"), [
    ((), [], xc.Facts(), cond(xc.VOLUMES_READY, "True")),
    (("cm",), [], xc.Facts(), cond(xc.VOLUMES_READY, "False", "VolumesNotReady",
                                   "volumes are not set up yet")),
    (("cm",), [], xc.Facts(volume_error=MOUNT_ERROR),
     cond(xc.VOLUMES_READY, "False", "FailedMount", MOUNT_ERROR)),
    (("cm",), [], xc.Facts(volumes_ready=True), cond(xc.VOLUMES_READY, "True")),
    # An agent restart: the sandbox in use was created after its volumes.
    (("cm",), [sandbox(V4)], xc.Facts(), cond(xc.VOLUMES_READY, "True")),
    # A volume that fails later (a ConfigMap deleted) wins over the sandbox in use.
    (("cm",), [sandbox(V4)], xc.Facts(volumes_ready=True, volume_error=MOUNT_ERROR),
     cond(xc.VOLUMES_READY, "False", "FailedMount", MOUNT_ERROR)),
])
def test_volumes_condition(volumes: tuple[str, ...], boxes: list[runtime.SandboxInfo],
                           facts: xc.Facts, expected: PodCondition) -> None:
    assert xc.volumes_condition(make_pod(volumes=volumes), boxes, facts) == expected


# --- Initialized after the sandbox -------------------------------------------------------------

INIT_TRUE = cond(status.INITIALIZED, "True")


@pytest.mark.parametrize(("pod", "given", "boxes", "statuses", "expected"), [
    (make_pod(), INIT_TRUE, [], [cs(WAITING)], cond(
        status.INITIALIZED, "False", "PodSandboxNotReady",
        "waiting for the pod sandbox: no pod sandbox exists")),
    (make_pod(), INIT_TRUE, [sandbox(V4)], [cs(WAITING)], INIT_TRUE),
    # The sandbox died after the containers ran: still initialized.
    (make_pod(), INIT_TRUE, [sandbox(V4, state=runtime.SandboxState.NOTREADY)],
     [cs(status.ContainerStateTerminated(exit_code=0))], INIT_TRUE),
    (make_pod(), INIT_TRUE, [sandbox(V4)], [cs(RUNNING)], INIT_TRUE),
    # Init containers: the kubelet's rule already waits for them (so for the sandbox).
    (make_pod(inits=("i",)), INIT_TRUE, [], [], INIT_TRUE),
    (make_pod(), cond(status.INITIALIZED, "True", "PodCompleted"), [], [],
     cond(status.INITIALIZED, "True", "PodCompleted")),
])
def test_initialized_after_sandbox(
    pod: pods.Pod, given: PodCondition, boxes: list[runtime.SandboxInfo],
    statuses: list[status.ContainerStatus], expected: PodCondition,
) -> None:
    assert xc.initialized_after_sandbox(given, pod, boxes, statuses) == expected


# --- assembly ----------------------------------------------------------------------------------


def generate(pod: pods.Pod, boxes: list[runtime.SandboxInfo], gates: settings.FeatureGates,
             facts: xc.Facts | None = None,
             old: tuple[PodCondition, ...] = ()) -> tuple[PodCondition, ...]:
    return conditions.generate_conditions(
        pod, old_conditions=old, sandboxes=boxes, last_sandbox_error=None,
        container_statuses=[cs(WAITING)], init_statuses=[], phase="Pending", gates=gates,
        extra=facts)


def test_gates_off_is_the_kubelet() -> None:
    pod = make_pod(volumes=("cm",))
    facts = xc.Facts(families=BOTH, volume_error=MOUNT_ERROR)
    off = settings.FeatureGates()
    assert generate(pod, [sandbox(V4)], off, facts) == generate(pod, [sandbox(V4)], off)
    assert [c.type for c in generate(pod, [], off, facts)] == [
        status.POD_READY_TO_START_CONTAINERS, status.INITIALIZED, status.READY,
        status.CONTAINERS_READY, status.POD_SCHEDULED]


def test_all_gates_order_and_values() -> None:
    pod = make_pod(volumes=("cm",))
    out = generate(pod, [sandbox(V4)], ALL_GATES, xc.Facts(families=BOTH, volumes_ready=True))
    assert [c.type for c in out] == [
        status.POD_READY_TO_START_CONTAINERS, xc.IPV4_READY, xc.IPV6_READY, xc.VOLUMES_READY,
        status.INITIALIZED, status.READY, status.CONTAINERS_READY, status.POD_SCHEDULED]
    by_type = {c.type: c for c in out}
    assert by_type[status.POD_READY_TO_START_CONTAINERS].reason == "PodSandboxNoIPv6Address"
    assert by_type[xc.IPV4_READY].status == "True"
    assert by_type[xc.IPV6_READY].status == "False"
    assert by_type[xc.VOLUMES_READY].status == "True"
    # Initialized follows the sandbox the containers use, not the stricter condition.
    assert by_type[status.INITIALIZED].status == "True"


def test_missing_config_map_blames_volumes_only() -> None:
    pod = make_pod(volumes=("cm",))
    gates = replace(ALL_GATES, pod_ready_needs_all_ip_families=False)
    out = {c.type: c for c in generate(pod, [], gates,
                                       xc.Facts(families=BOTH, volume_error=MOUNT_ERROR))}
    assert out[xc.VOLUMES_READY] == cond(xc.VOLUMES_READY, "False", "FailedMount", MOUNT_ERROR)
    for family in (xc.IPV4_READY, xc.IPV6_READY):
        assert "MountVolume" not in out[family].message
    assert out[status.INITIALIZED].status == "False"


def test_without_ready_to_start_the_new_conditions_precede_initialized() -> None:
    gates = replace(ALL_GATES, pod_ready_to_start_containers=False)
    out = generate(make_pod(), [sandbox(V4)], gates, xc.Facts())
    assert [c.type for c in out][:3] == [xc.IPV4_READY, xc.VOLUMES_READY, status.INITIALIZED]


def test_host_network_pod_has_no_family_conditions() -> None:
    pod = make_pod(host_network=True)
    types = [c.type for c in generate(pod, [sandbox(host=True)], ALL_GATES,
                                      xc.Facts(families=BOTH))]
    assert xc.IPV4_READY not in types and xc.IPV6_READY not in types
    assert xc.VOLUMES_READY in types


def test_stale_family_condition_is_dropped_and_others_kept() -> None:
    old = (cond(xc.IPV6_READY, "True"), cond("example.com/Gate", "True"))
    out = generate(make_pod(), [sandbox(V4)], ALL_GATES, xc.Facts(families=("IPv4",)), old)
    types = [c.type for c in out]
    assert xc.IPV6_READY not in types and "example.com/Gate" in types
    assert xc.TYPES <= conditions.WRITTEN_TYPES
    assert extraconditions.owned_types(settings.FeatureGates()) == frozenset()
