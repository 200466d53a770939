"""The Node object and its status: labels, the Ready condition's wording, capacity, and
transition times that move only with the status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import nodes
from nodelet.model.core import runtime as rt

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MACHINE = nodes.MachineFacts(cpus=2, memory_bytes=4 * 1024**3, machine_id="m1", boot_id="b1",
                             kernel_version="6.1.0", os_image="Debian", architecture="arm64")
SPEC = nodes.NodeSpec(name="n1", host_ip="192.0.2.10", machine=MACHINE, max_pods=30,
                      pod_cidrs=("10.77.0.0/24", "fd00::/64"), labels={"role": "edge"})
VERSION = rt.VersionInfo("containerd", "1.6.20", "v1")


def runtime_status(runtime: bool = True, network: bool = True) -> rt.RuntimeStatus:
    return rt.RuntimeStatus((
        rt.RuntimeCondition("RuntimeReady", runtime),
        rt.RuntimeCondition("NetworkReady", network, "NetworkPluginNotReady", "cni config"),
    ))


def condition(status: dict, type_: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_node_object_has_the_kubelets_labels_and_pod_cidrs() -> None:
    node = nodes.node_object(SPEC)
    assert node["metadata"]["labels"] == {
        "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "arm64", "role": "edge"}
    assert node["spec"] == {"podCIDR": "10.77.0.0/24", "podCIDRs": ["10.77.0.0/24", "fd00::/64"]}
    assert nodes.node_object(nodes.NodeSpec("n2", "192.0.2.1", MACHINE))["spec"] == {}


@pytest.mark.parametrize(("runtime", "error", "expected"), [
    (runtime_status(), "", ("True", "KubeletReady", "kubelet is posting ready status")),
    (runtime_status(network=False), "",
     ("False", "KubeletNotReady", "container runtime network not ready: NetworkReady=false "
      "reason:NetworkPluginNotReady message:cni config")),
    (rt.RuntimeStatus(()), "",
     ("False", "KubeletNotReady", "container runtime not ready: RuntimeReady=false "
      "reason:missing message:not reported; container runtime network not ready: "
      "NetworkReady=false reason:missing message:not reported")),
    (None, "connection refused",
     ("False", "KubeletNotReady",
      "container runtime status check may not have completed yet: connection refused")),
    (None, "", ("False", "KubeletNotReady",
                "container runtime status check may not have completed yet")),
])
def test_ready_condition_is_worded_as_the_kubelet_words_it(
        runtime: rt.RuntimeStatus | None, error: str, expected: nodes.ConditionValue) -> None:
    assert nodes.ready_condition(runtime, error) == expected


def test_node_status_reports_capacity_addresses_and_node_info() -> None:
    status = nodes.node_status(SPEC, VERSION, nodes.ready_condition(runtime_status()),
                               previous=None, now=T0)
    assert status["capacity"] == {"cpu": "2", "memory": "4194304Ki", "pods": "30",
                                  "ephemeral-storage": "0"}
    assert status["allocatable"] == status["capacity"]
    assert status["addresses"] == [{"type": "InternalIP", "address": "192.0.2.10"},
                                   {"type": "Hostname", "address": "n1"}]
    assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://1.6.20"
    assert status["nodeInfo"]["kubeletVersion"] == nodes.KUBELET_VERSION
    assert [c["type"] for c in status["conditions"]] == [
        "MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    # NodeDeclaredFeatures (GA in 1.37): what the scheduler may send here that needs it.
    assert status["declaredFeatures"] == sorted(status["declaredFeatures"]) == [
        "InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers",
        "RestartAllContainersOnContainerExits"]
    unanswered = nodes.node_status(SPEC, None, nodes.ready_condition(None), previous=None, now=T0)
    assert unanswered["nodeInfo"]["containerRuntimeVersion"] == ""


@pytest.mark.parametrize(("was_ready", "now_ready", "moved"), [
    (True, True, False),
    (False, False, False),
    (True, False, True),
    (False, True, True),
])
def test_transition_time_moves_only_with_the_status(
        was_ready: bool, now_ready: bool, moved: bool) -> None:
    before = nodes.node_status(SPEC, VERSION,
                               nodes.ready_condition(runtime_status(network=was_ready)),
                               previous=None, now=T0)
    later = T0 + timedelta(minutes=1)
    after = nodes.node_status(SPEC, VERSION,
                              nodes.ready_condition(runtime_status(network=now_ready)),
                              previous=before, now=later)
    ready = condition(after, "Ready")
    assert ready["lastHeartbeatTime"] == "2026-01-01T00:01:00Z"
    assert ready["lastTransitionTime"] == ("2026-01-01T00:01:00Z" if moved
                                           else "2026-01-01T00:00:00Z")
    assert condition(after, "DiskPressure")["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_a_status_that_only_beats_is_not_a_change() -> None:
    ready = nodes.ready_condition(runtime_status())
    first = nodes.node_status(SPEC, VERSION, ready, previous=None, now=T0)
    beat = nodes.node_status(SPEC, VERSION, ready, previous=first, now=T0 + timedelta(seconds=10))
    assert nodes.status_changed(None, first)
    assert not nodes.status_changed(first, beat)
    down = nodes.node_status(SPEC, VERSION, nodes.ready_condition(runtime_status(network=False)),
                             previous=first, now=T0 + timedelta(seconds=10))
    assert nodes.status_changed(first, down)


def test_pressure_conditions_are_worded_as_the_kubelet_words_them() -> None:
    ready = nodes.ready_condition(runtime_status())
    calm = nodes.node_status(SPEC, VERSION, ready, previous=None, now=T0)
    pressed = nodes.node_status(SPEC, VERSION, ready, previous=calm,
                                now=T0 + timedelta(seconds=10),
                                pressure=frozenset({"DiskPressure", "PIDPressure"}))
    disk, pid, memory = (condition(pressed, t) for t in
                         ("DiskPressure", "PIDPressure", "MemoryPressure"))
    assert (disk["status"], disk["reason"], disk["message"]) == (
        "True", "KubeletHasDiskPressure", "kubelet has disk pressure")
    assert (pid["status"], pid["reason"], pid["message"]) == (
        "True", "KubeletHasInsufficientPID", "kubelet has insufficient PID available")
    assert disk["lastTransitionTime"] == "2026-01-01T00:00:10Z"
    assert (memory["status"], memory["reason"]) == ("False", "KubeletHasSufficientMemory")
    assert memory["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert nodes.status_changed(calm, pressed)
    short = nodes.node_status(SPEC, VERSION, ready, previous=None, now=T0,
                              pressure=frozenset({"MemoryPressure"}))
    assert condition(short, "MemoryPressure")["reason"] == "KubeletHasInsufficientMemory"


def test_a_node_new_here_zeroes_only_its_extended_resources() -> None:
    status = {"capacity": {"cpu": "2", "memory": "1Ki", "hugepages-2Mi": "0",
                           "example.com/dongle": "4", "kubernetes.io/x": "1",
                           "nvidia.com/gpu": "8"}}
    assert nodes.extended_at_zero(status) == {"example.com/dongle": 0, "nvidia.com/gpu": 0}
    assert nodes.extended_at_zero({}) == {}
