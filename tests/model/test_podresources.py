"""What the pod resources API reports (model/core/podresources.py), table-tested: which
containers a pod lists, a container's devices per NUMA node, and the allocatable devices."""

from __future__ import annotations

import pytest

from nodelet.model.core import devices, podresources, pods
from nodelet.model.core import resourceclaims as rc
from nodelet.model.core.devices import Device, Resource
from nodelet.model.core.podresources import ContainerDevices, ContainerResources, PodResources

R = "example.com/resource"
G = "example.com/gpu"


def _c(name: str, restart_policy: pods.ContainerRestartPolicy = "") -> pods.Container:
    return pods.Container(name=name, image="i", restart_policy=restart_policy)


POD = pods.Pod(uid=pods.PodUID("u-1"), name="p", namespace="team", spec=pods.PodSpec(
    init_containers=(_c("setup"), _c("proxy", "Always")), containers=(_c("a"), _c("b"))))


def test_sidecars_then_containers_are_listed_run_to_completion_init_containers_not() -> None:
    assert [c.name for c in podresources.containers(POD)] == ["proxy", "a", "b"]


def test_a_pod_entry_names_each_listed_container_with_its_devices() -> None:
    held = {"a": {R: {devices.NO_NUMA: ("d1",)}}, "setup": {R: {devices.NO_NUMA: ("d2",)}}}
    assert podresources.pod_resources(POD, held) == PodResources("p", "team", (
        ContainerResources("proxy"), ContainerResources("a", (ContainerDevices(R, ("d1",)),)),
        ContainerResources("b")))


@pytest.mark.parametrize(("held", "entries"), [
    ({}, ()),
    ({R: {devices.NO_NUMA: ("d2", "d1")}}, (ContainerDevices(R, ("d1",)),
                                            ContainerDevices(R, ("d2",)))),
    ({R: {0: ("d1",), 1: ("d2",)}}, (ContainerDevices(R, ("d1",), (0,)),
                                     ContainerDevices(R, ("d2",), (1,)))),
    ({G: {0: ("g1",)}, R: {devices.NO_NUMA: ("d1",)}},
     (ContainerDevices(G, ("g1",), (0,)), ContainerDevices(R, ("d1",)))),
])
def test_each_device_is_an_entry_per_numa_node(
        held: dict[str, dict[int, tuple[str, ...]]],
        entries: tuple[ContainerDevices, ...]) -> None:
    assert podresources.assigned(held) == entries


@pytest.mark.parametrize(("resources", "entries"), [
    ([], ()),
    ([Resource(R, {"d1": Device("d1"), "d2": Device("d2", devices.UNHEALTHY)})],
     (ContainerDevices(R, ("d1",)),)),
    ([Resource(R, {"d1": Device("d1", numa_nodes=(0, 1))})],
     (ContainerDevices(R, ("d1",), (0,)), ContainerDevices(R, ("d1",), (1,)))),
    ([Resource(R, {"d1": Device("d1")}, stopped_at=1.0)], ()),  # its plugin is gone
])
def test_allocatable_is_every_healthy_device_of_a_connected_plugin(
        resources: list[Resource], entries: tuple[ContainerDevices, ...]) -> None:
    assert podresources.allocatable(resources) == entries


def test_a_containers_claims_list_each_prepared_device_with_its_own_cdi_devices() -> None:
    info = rc.ClaimInfo(rc.ClaimRef("team", "cu", "p-gpu"), ("d",), ("d",), {"u-1"}, True, {
        "d": (rc.PreparedDevice(("r",), "pool", "dev-0", ("d/x=0",)),
              rc.PreparedDevice(("r",), "pool", "dev-1", ("d/x=1",)))})
    dynamic = podresources.dynamic([info])
    assert dynamic == (podresources.DynamicResource("p-gpu", "team", (
        podresources.ClaimResource("d", "pool", "dev-0", ("d/x=0",)),
        podresources.ClaimResource("d", "pool", "dev-1", ("d/x=1",)))),)
    entry = podresources.pod_resources(POD, {}, dynamic_of={"a": dynamic})
    assert [c.dynamic for c in entry.containers] == [(), dynamic, ()]
