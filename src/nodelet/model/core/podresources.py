"""What the pod resources API reports (the kubelet's pkg/kubelet/apis/podresources server and
the container manager's conversions), as plain values: pure rules, no I/O.

- `containers`: the containers a pod's entry lists: its restartable init containers (sidecars),
  then its containers; other init containers are left out, as the kubelet leaves them.
- `assigned`: a container's devices, one entry per device and NUMA node it was assigned on
  (the device manager's checkpoint keys devices by NUMA node); a device without a NUMA node
  has no topology (the kubelet's nodeWithoutTopology).
- `allocatable`: the healthy devices of every resource, one entry per device and NUMA node its
  plugin listed (none: no topology), as GetAllocatableResources answers.

nodelet has no CPU or memory manager (the kubelet's `none` policies): no exclusive CPUs and no
memory are reported, which is what the kubelet reports under those policies. Dynamic resources
are empty: nodelet has no DRA.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodelet.model.core import devices, pods, resourceclaims


@dataclass(frozen=True)
class ContainerDevices:
    resource: str
    device_ids: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()  # empty: no topology


@dataclass(frozen=True)
class ClaimResource:
    """One device of a DRA claim, as the pod resources API shows it."""

    driver: str
    pool: str
    device: str
    cdi_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class DynamicResource:
    """A DRA claim a container names, with its prepared devices."""

    claim_name: str
    claim_namespace: str
    resources: tuple[ClaimResource, ...] = ()


@dataclass(frozen=True)
class ContainerResources:
    name: str
    devices: tuple[ContainerDevices, ...] = ()
    dynamic: tuple[DynamicResource, ...] = ()


@dataclass(frozen=True)
class PodResources:
    name: str
    namespace: str
    containers: tuple[ContainerResources, ...] = ()


def containers(pod: pods.Pod, *, sidecars: bool = True) -> tuple[pods.Container, ...]:
    """The containers listed; `sidecars=False`: v1alpha1's (the pod's containers only)."""
    listed = tuple(c for c in pod.spec.init_containers
                   if sidecars and c.restart_policy == "Always")
    return (*listed, *pod.spec.containers)


def assigned(by_resource: Mapping[str, Mapping[int, tuple[str, ...]]]
             ) -> tuple[ContainerDevices, ...]:
    """`by_resource`: each resource's device IDs by NUMA node (`devices.Assignment.devices`)."""
    out: list[ContainerDevices] = []
    for resource in sorted(by_resource):
        for numa, ids in sorted(by_resource[resource].items()):
            nodes = () if numa == devices.NO_NUMA else (numa,)
            out.extend(ContainerDevices(resource, (i,), nodes) for i in sorted(ids))
    return tuple(out)


def allocatable(resources: Iterable[devices.Resource]) -> tuple[ContainerDevices, ...]:
    out: list[ContainerDevices] = []
    for resource in sorted(resources, key=lambda r: r.name):
        healthy = resource.healthy
        for device_id in sorted(healthy):
            nodes = resource.devices[device_id].numa_nodes
            if not nodes:
                out.append(ContainerDevices(resource.name, (device_id,)))
            out.extend(ContainerDevices(resource.name, (device_id,), (n,)) for n in nodes)
    return tuple(out)


def dynamic(claims: Iterable[resourceclaims.ClaimInfo]) -> tuple[DynamicResource, ...]:
    """The claims a container names (the kubelet's GetDynamicResources): every device each
    driver prepared, with that device's CDI devices."""
    return tuple(DynamicResource(info.ref.name, info.ref.namespace, tuple(
        ClaimResource(driver, d.pool, d.device, d.cdi_ids)
        for driver in sorted(info.devices) for d in info.devices[driver]))
        for info in claims)


def pod_resources(pod: pods.Pod, devices_of: Mapping[str, Mapping[str, Mapping[int, tuple[
        str, ...]]]], *, sidecars: bool = True,
        dynamic_of: Mapping[str, tuple[DynamicResource, ...]] | None = None) -> PodResources:
    """The pod's entry; `devices_of`: by container name, what `assigned` takes; `dynamic_of`:
    by container name, its claims (`dynamic`)."""
    claimed = dynamic_of or {}
    return PodResources(pod.name, pod.namespace, tuple(
        ContainerResources(c.name, assigned(devices_of.get(c.name, {})),
                           claimed.get(c.name, ()))
        for c in containers(pod, sidecars=sidecars)))
