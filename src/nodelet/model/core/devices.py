"""Device plugin resources (pure): what the kubelet's device manager decides
(pkg/kubelet/cm/devicemanager: manager.go, pod_devices.go, checkpoint/), as plain values.

- `Resource`: one extended resource a plugin serves, its devices and health, and when its
  plugin went away; `node_resources` turns them into the Node's capacity and allocatable
  (healthy devices are allocatable, unhealthy ones count in capacity only, a plugin gone for
  longer than the grace period leaves its resource at 0).
- `pick`: which free healthy devices a container gets (devicesToAllocate, without NUMA
  alignment: nodelet has no topology manager), in the kubelet's words when it cannot.
- `Allocation` and `run_options`: a plugin's Allocate answer, and what the container gets of
  all of them (envs, mounts, devices, annotations, CDI devices; the first of duplicates wins).
- `encode_checkpoint` / `decode_checkpoint`: the assignments as the kubelet's
  `kubelet_internal_checkpoint` lays them out (see there for the differences).
- `health_changes` and `resource_statuses`: device health in the pod status (the
  ResourceHealthStatus gate): which devices of a new list changed health (their pods' status
  is generated again), and a container's `allocatedResourcesStatus`.

Exceptions::

    DeviceError      a container cannot get its devices (its message is the kubelet's)
    CheckpointError  the checkpoint cannot be read (corrupt, or not this format)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import pods, resources, runtime, status

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
VERSION = "v1beta1"
SUPPORTED_VERSIONS = (VERSION,)
# The kubelet's endpointStopGracePeriod: a resource whose plugin went away keeps its capacity
# (all of it unhealthy) this long, for the plugin to come back.
STOP_GRACE_PERIOD = 300.0
# The kubelet's nodeWithoutTopology: the NUMA key of devices that name none.
NO_NUMA = -1
# The checkpoint of which devices each container holds, in the device plugin directory beside
# the kubelet's `kubelet_internal_checkpoint`: a name of its own, since the format is nodelet's
# and the kubelet's directory may be shared (`--device-plugins-dir /var/lib/kubelet/...`).
CHECKPOINT_NAME = "nodelet_device_checkpoint"


class DeviceError(errors.MessageError):
    """A container cannot get the devices it asks for."""


class CheckpointError(errors.MessageError):
    """The device checkpoint cannot be read."""


@dataclass(frozen=True)
class Device:
    id: str
    health: str = HEALTHY
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceSpec:
    container_path: str
    host_path: str
    permissions: str = ""


@dataclass(frozen=True)
class Allocation:
    """One plugin's answer to Allocate for one container (ContainerAllocateResponse)."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assignment:
    """The devices of `resource` that a pod's container holds, and the plugin's answer."""

    pod_uid: str
    container: str
    resource: str
    devices: Mapping[int, tuple[str, ...]]  # by NUMA node (NO_NUMA: none)
    allocation: Allocation

    @property
    def device_ids(self) -> frozenset[str]:
        return frozenset(d for ids in self.devices.values() for d in ids)


@dataclass(frozen=True)
class Resource:
    """A resource as its plugin last listed it; `stopped_at` (monotonic seconds): when its
    plugin's stream ended or it went away (None: connected)."""

    name: str
    devices: Mapping[str, Device] = field(default_factory=dict)
    stopped_at: float | None = None

    @property
    def healthy(self) -> frozenset[str]:
        """The devices that can be allocated: none once the plugin stopped (the kubelet's
        markResourceUnhealthy)."""
        if self.stopped_at is not None:
            return frozenset()
        return frozenset(i for i, d in self.devices.items() if d.health == HEALTHY)

    @property
    def unhealthy(self) -> frozenset[str]:
        return frozenset(self.devices) - self.healthy

    def expired(self, now: float, grace: float = STOP_GRACE_PERIOD) -> bool:
        return self.stopped_at is not None and now - self.stopped_at > grace


@dataclass(frozen=True)
class NodeResources:
    """What the Node reports of device plugin resources: counts per resource name;
    `removed` names the resources whose plugin is gone for good (reported as 0)."""

    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    removed: frozenset[str] = frozenset()


def node_resources(resources: Iterable[Resource], now: float,
                   grace: float = STOP_GRACE_PERIOD) -> NodeResources:
    """The kubelet's GetCapacity: capacity counts every device, allocatable the healthy
    ones; a resource whose plugin stopped more than `grace` seconds ago is removed."""
    capacity, allocatable, removed = {}, {}, set()
    for resource in resources:
        if resource.expired(now, grace):
            removed.add(resource.name)
            continue
        capacity[resource.name] = len(resource.devices)
        allocatable[resource.name] = len(resource.healthy)
    return NodeResources(capacity, allocatable, frozenset(removed))


def validate_registration(version: str, resource_name: str) -> str | None:
    """The kubelet's refusal of a Register request, in its words; None when it is taken."""
    if version not in SUPPORTED_VERSIONS:
        supported = " ".join(f'"{v}"' for v in SUPPORTED_VERSIONS)  # Go's %q of an array
        return (f'requested API version "{version}" is not supported by kubelet. Supported '
                f"version is [{supported}]")
    if not resources.is_extended_resource(resource_name):
        return f'the ResourceName "{resource_name}" is invalid'
    return None


def pick(resource: Resource, needed: int, *, in_use: frozenset[str],
         preferred: Sequence[str] = (), reusable: frozenset[str] = frozenset()
         ) -> tuple[str, ...]:
    """The devices of `resource` a container that asks for `needed` gets: first those of the
    pod's init containers that have run (`reusable`, the kubelet's devicesToReuse), then the
    plugin's `preferred` (GetPreferredAllocation), then the free healthy devices in order.
    Raises DeviceError with the kubelet's words when it cannot."""
    available = _healthy(resource) - in_use
    if len(available) < needed:
        raise DeviceError(f"requested number of devices unavailable for {resource.name}. "
                          f"Requested: {needed}, Available: {len(available)}")
    chosen = sorted(reusable & available)[:needed]
    chosen += [d for d in dict.fromkeys(preferred)
               if d in available and d not in chosen][:needed - len(chosen)]
    chosen += [d for d in sorted(available) if d not in chosen][:needed - len(chosen)]
    return tuple(chosen)


def _healthy(resource: Resource) -> frozenset[str]:
    """The resource's healthy devices; DeviceError in the kubelet's words when it has none."""
    if not resource.healthy:
        raise DeviceError("no healthy devices present; cannot allocate unhealthy devices "
                          f"{resource.name}")
    return resource.healthy


def check_held(resource: Resource, held: frozenset[str]) -> None:
    """Devices a container holds from before a node reboot are its own again only while
    they are all healthy; raises DeviceError with the kubelet's words."""
    if not held <= _healthy(resource):
        raise DeviceError("previously allocated devices are no longer healthy; cannot "
                          f"allocate unhealthy devices {resource.name}")


def reusable(pod: pods.Pod, container: str,
             held: Callable[[str], frozenset[str]]) -> frozenset[str]:
    """The devices the pod's `container` may take from the containers before it (the kubelet's
    devicesToReuse, walked in their order): those a run-to-completion init container held,
    less those a sidecar or an app container before it took since (they keep running).
    `held(name)`: the devices of the resource that container `name` holds."""
    run_to_completion = {c.name for c in pod.spec.init_containers if c.restart_policy != "Always"}
    reuse: set[str] = set()
    for before in (*pod.spec.init_containers, *pod.spec.containers):
        if before.name == container:
            break
        if before.name in run_to_completion:
            reuse |= held(before.name)
        else:
            reuse -= held(before.name)
    return frozenset(reuse)


def by_numa(resource: Resource, ids: Iterable[str]) -> dict[int, tuple[str, ...]]:
    """The devices `ids` keyed by their NUMA nodes, as the checkpoint keeps them."""
    out: dict[int, list[str]] = {}
    for device_id in ids:
        device = resource.devices.get(device_id)
        for node in (device.numa_nodes if device is not None else ()) or (NO_NUMA,):
            out.setdefault(node, []).append(device_id)
    return {node: tuple(found) for node, found in out.items()}


def health_changes(old: Mapping[str, Device], listed: Iterable[Device]) -> frozenset[str]:
    """The devices of a new ListAndWatch list whose health differs from the last list's
    (`old`, by ID), or that it did not have: a device back after a while may still be held
    (the kubelet's genericDeviceUpdateCallback, which then syncs the pods holding them)."""
    return frozenset(d.id for d in listed if d.id not in old or old[d.id].health != d.health)


def resource_statuses(held: Mapping[str, Iterable[str]],
                      listed: Mapping[str, Mapping[str, Device]]
                      ) -> tuple[status.ResourceStatus, ...]:
    """A container's allocatedResourcesStatus: for each resource it holds devices of (`held`,
    by resource name), each device with its health in the plugin's last list (`listed`, by
    resource and ID), as the kubelet's UpdateAllocatedResourcesStatus: `Healthy` as listed,
    `Unhealthy` for any other health, and `Healthy` for a device not listed (since the agent
    started: the kubelet's default). A plugin that went away leaves its last list in force.
    Sorted by resource name and device ID (the kubelet's order is its maps')."""
    out = []
    for name, ids in sorted(held.items()):
        known = listed.get(name, {})
        out.append(status.ResourceStatus(name, tuple(
            status.ResourceHealth(device_id, _health(known.get(device_id)))
            for device_id in sorted(set(ids)))))
    return tuple(r for r in out if r.resources)


def _health(device: Device | None) -> status.ResourceHealthStatus:
    return "Healthy" if device is None or device.health == HEALTHY else "Unhealthy"


@dataclass(frozen=True)
class RunOptions:
    """What a container gets of its devices (the kubelet's DeviceRunContainerOptions)."""

    envs: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    cdi_devices: tuple[str, ...] = ()


def run_options(allocations: Iterable[Allocation]) -> RunOptions:
    """Every allocation of a container merged, by resource name order: the first value of an
    env, annotation, mount or device path wins, a CDI device is named once."""
    envs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    mounts: dict[str, Mount] = {}
    devices: dict[str, DeviceSpec] = {}
    cdi: dict[str, None] = {}
    for allocation in allocations:
        for key, value in allocation.envs.items():
            envs.setdefault(key, value)
        for mount in allocation.mounts:
            mounts.setdefault(mount.container_path, mount)
        for spec in allocation.devices:
            devices.setdefault(spec.container_path, spec)
        for key, value in allocation.annotations.items():
            annotations.setdefault(key, value)
        for name in allocation.cdi_devices:
            cdi.setdefault(name)
    return RunOptions(tuple(envs.items()), tuple(mounts.values()), tuple(devices.values()),
                      tuple(annotations.items()), tuple(cdi))


def merge_envs(device_envs: Sequence[tuple[str, str]],
               own: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The container's environment with its devices' variables first, as the kubelet's
    GenerateRunContainerOptions appends them (the container's own value of a name wins)."""
    names = {name for name, _ in own}
    return (*((n, v) for n, v in device_envs if n not in names), *own)


def with_devices(config: runtime.ContainerConfig,
                 options: RunOptions) -> runtime.ContainerConfig:
    """The container's CRI config with its devices' options, as the kubelet's
    GenerateRunContainerOptions and generateContainerConfig put them: their envs before the
    container's own (which win), their mounts before the volumes', their devices after the
    block volumes', their annotations under the kubelet's own, and the CDI devices."""
    return replace(
        config,
        envs=merge_envs(options.envs, config.envs),
        mounts=(*(runtime.Mount(m.container_path, m.host_path, readonly=m.read_only)
                  for m in options.mounts), *config.mounts),
        devices=(*config.devices, *(runtime.Device(d.container_path, d.host_path,
                                                   d.permissions) for d in options.devices)),
        annotations={**dict(options.annotations), **config.annotations},
        cdi_devices=(*config.cdi_devices, *options.cdi_devices))


def device_requests(container: pods.Container, known: Iterable[str]) -> dict[str, int]:
    """What the container asks of the resources in `known` (device plugin resources):
    extended resources, whose request equals their limit."""
    names = set(known)
    return {name: count for name, count in container.resources.other_requests.items()
            if name in names and count > 0}


# -- the checkpoint --------------------------------------------------------------------------
# The kubelet's layout: {"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}},
# "Checksum": N}, each entry with PodUID, ContainerName, ResourceName, DeviceIDs (by NUMA
# node) and AllocResp. Two differences, so the file is nodelet's own: AllocResp is the answer
# as a JSON object (the kubelet's is the protobuf message's bytes), and the checksum is the
# first 4 bytes of SHA-256 over the canonical JSON of Data (the kubelet hashes Go's printing
# of its structs).


def _allocation_json(a: Allocation) -> dict[str, Any]:
    return {"Envs": dict(a.envs), "Annotations": dict(a.annotations),
            "Mounts": [[m.container_path, m.host_path, m.read_only] for m in a.mounts],
            "Devices": [[d.container_path, d.host_path, d.permissions] for d in a.devices],
            "CDIDevices": list(a.cdi_devices)}


def _allocation_from(obj: Mapping[str, Any]) -> Allocation:
    return Allocation(
        envs={str(k): str(v) for k, v in (obj.get("Envs") or {}).items()},
        mounts=tuple(Mount(str(c), str(h), bool(r)) for c, h, r in obj.get("Mounts") or ()),
        devices=tuple(DeviceSpec(str(c), str(h), str(p)) for c, h, p in obj.get("Devices") or ()),
        annotations={str(k): str(v) for k, v in (obj.get("Annotations") or {}).items()},
        cdi_devices=tuple(str(n) for n in obj.get("CDIDevices") or ()))


def _checksum(data: Mapping[str, Any]) -> int:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return int.from_bytes(hashlib.sha256(canonical).digest()[:4], "big")


def encode_checkpoint(assignments: Iterable[Assignment],
                      registered: Mapping[str, Iterable[str]]) -> bytes:
    """The checkpoint file's bytes: every assignment, and the healthy devices of each
    registered resource (the kubelet's RegisteredDevices)."""
    entries = [{"PodUID": a.pod_uid, "ContainerName": a.container, "ResourceName": a.resource,
                "DeviceIDs": {str(n): list(ids) for n, ids in sorted(a.devices.items())},
                "AllocResp": _allocation_json(a.allocation)}
               for a in sorted(assignments, key=lambda a: (a.pod_uid, a.container, a.resource))]
    data = {"PodDeviceEntries": entries,
            "RegisteredDevices": {r: sorted(ids) for r, ids in sorted(registered.items())}}
    return json.dumps({"Data": data, "Checksum": _checksum(data)}, indent=1).encode()


def decode_checkpoint(blob: bytes) -> tuple[list[Assignment], dict[str, list[str]]]:
    """The assignments and registered resources of a checkpoint; CheckpointError when the
    bytes are not one or its checksum does not match."""
    try:
        whole = json.loads(blob)
        data = whole["Data"]
        if _checksum(data) != whole["Checksum"]:
            raise CheckpointError("device checkpoint is corrupt: checksum mismatch")
        assignments = [
            Assignment(str(e["PodUID"]), str(e["ContainerName"]), str(e["ResourceName"]),
                       {int(n): tuple(map(str, ids)) for n, ids in e["DeviceIDs"].items()},
                       _allocation_from(e["AllocResp"]))
            for e in data.get("PodDeviceEntries") or ()]
        registered = {str(r): [str(i) for i in ids]
                      for r, ids in (data.get("RegisteredDevices") or {}).items()}
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"device checkpoint cannot be read: {exc}") from exc
    return assignments, registered
