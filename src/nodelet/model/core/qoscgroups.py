"""The QoS cgroup hierarchy and what each level holds (pure), as the kubelet's container
manager lays it out with the cgroupfs driver (pkg/kubelet/cm: node_container_manager_linux.go,
qos_container_manager_linux.go, pod_container_manager_linux.go):

    <cgroup root>/kubepods                    node allocatable (--enforce-node-allocatable=pods)
    <cgroup root>/kubepods/pod<uid>           Guaranteed pods
    <cgroup root>/kubepods/burstable          shares = the Burstable pods' CPU requests
    <cgroup root>/kubepods/burstable/pod<uid>
    <cgroup root>/kubepods/besteffort         2 shares
    <cgroup root>/kubepods/besteffort/pod<uid>

`Limits` says what one cgroup gets; `v1_files` and `v2_files` say which interface files
carry it on a cgroup v1 or a cgroup v2 (unified) host, and with what text. The adapter
(`adapters.cgroups`) only makes directories and writes those files.

Not built: memory limits on the QoS levels (the kubelet sets them only with the alpha
QOSReserved feature) and memory.min (the alpha MemoryQoS feature, cgroup v2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodelet.model.core import pods, resources, specs

KUBEPODS = "kubepods"
# A limit lifted (v1 writes -1, v2 "max"), as opposed to None: leave the setting as it is.
UNLIMITED = -1
# The controllers the limits need; on cgroup v2 each parent enables them for its children.
V2_CONTROLLERS = ("cpu", "memory")
# The kernel's cpu.weight range and the shares range it is mapped from (runc's
# ConvertCPUSharesToCgroupV2Value, which the kubelet's cgroup manager uses).
_MAX_WEIGHT = 10_000


@dataclass(frozen=True)
class Limits:
    """One cgroup's settings: None leaves a setting as it is (the kubelet's nil
    ResourceConfig field), UNLIMITED lifts it."""

    cpu_shares: int | None = None
    cpu_quota_us: int | None = None
    memory_limit: int | None = None
    cpu_period_us: int = specs.CPU_PERIOD_US


# -- where ----------------------------------------------------------------------------------


def kubepods(cgroup_root: str = "/") -> str:
    """The node allocatable cgroup, `<cgroup root>/kubepods` (kubelet --cgroup-root)."""
    return f"{cgroup_root.rstrip('/')}/{KUBEPODS}"


def qos_parent(qos: resources.QOSClass, cgroup_root: str = "/") -> str:
    """Where a QoS class's pods go: Guaranteed pods sit directly under kubepods (the pod
    level itself is `specs.pod_cgroup_parent`)."""
    top = kubepods(cgroup_root)
    return top if qos == "Guaranteed" else f"{top}/{qos.lower()}"


def pod_parents(uid: str, cgroup_root: str = "/") -> tuple[str, ...]:
    """Every place a pod known only by its UID may have its cgroup (its QoS is unknown)."""
    return tuple(f"{qos_parent(qos, cgroup_root)}/pod{uid}"
                 for qos in ("Guaranteed", "Burstable", "BestEffort"))


def qos_levels(cgroup_root: str = "/") -> tuple[str, ...]:
    """The cgroups this hierarchy is made of, deepest first (the order to remove them in)."""
    return (qos_parent("Burstable", cgroup_root), qos_parent("BestEffort", cgroup_root),
            kubepods(cgroup_root))


# -- what -----------------------------------------------------------------------------------


def pod_limits(cgroup: specs.PodCgroup) -> Limits:
    """A pod's cgroup: a limit it does not have is lifted, not left as it was."""
    return Limits(
        cpu_shares=cgroup.cpu_shares,
        cpu_quota_us=UNLIMITED if cgroup.cpu_quota_us is None else cgroup.cpu_quota_us,
        memory_limit=UNLIMITED if cgroup.memory_limit is None else cgroup.memory_limit,
        cpu_period_us=cgroup.cpu_period_us,
    )


def node_allocatable(capacity: Mapping[str, int],
                     reservations: Iterable[tuple[str, str]]) -> Limits:
    """kubepods with --enforce-node-allocatable=pods (the kubelet's default): shares from
    capacity less system and kube reserved CPU, and a memory limit of capacity less reserved
    memory and the pre-allocated huge pages (getNodeAllocatableInternalAbsolute). The hard
    eviction thresholds are not subtracted here: they hold back Allocatable, which admission
    and the scheduler see, but the kernel's limit is left above them so that eviction acts
    before the OOM killer. No CPU quota (the kubelet sets none)."""
    left = resources.allocatable(capacity, resources.amounts(reservations))
    huge = sum(v for k, v in left.items() if k.startswith("hugepages-"))
    memory = left.get("memory", 0) - huge
    return Limits(cpu_shares=specs.cpu_shares(left.get("cpu", 0)),
                  memory_limit=memory if memory > 0 else None)


def qos_limits(active: Iterable[pods.Pod], cgroup_root: str = "/") -> dict[str, Limits]:
    """The QoS levels' limits given the pods admitted and not yet terminated (the kubelet's
    setCPUCgroupConfig): burstable gets the Burstable pods' CPU requests summed in
    millicores, then converted to shares (at least 2); besteffort always gets 2."""
    milli = sum(resources.pod_requests(p).get("cpu", 0) for p in active
                if resources.qos_class(p) == "Burstable")
    return {
        qos_parent("Burstable", cgroup_root): Limits(cpu_shares=specs.cpu_shares(milli)),
        qos_parent("BestEffort", cgroup_root): Limits(cpu_shares=specs.MIN_CPU_SHARES),
    }


# -- how: interface files -------------------------------------------------------------------


def cpu_weight(shares: int) -> int:
    """cgroup v2 cpu.weight for v1 shares: 1 + ((shares - 2) * 9999) / 262142, integer
    math, mapping [2, 262144] onto [1, 10000] (runc's ConvertCPUSharesToCgroupV2Value)."""
    shares = min(max(shares, specs.MIN_CPU_SHARES), specs.MAX_CPU_SHARES)
    weight = 1 + (shares - specs.MIN_CPU_SHARES) * (_MAX_WEIGHT - 1) // (
        specs.MAX_CPU_SHARES - specs.MIN_CPU_SHARES)
    return min(weight, _MAX_WEIGHT)


def v1_files(limits: Limits) -> dict[str, dict[str, str]]:
    """Controller hierarchy → interface file → text, for a cgroup v1 host. Both
    hierarchies are listed, empty when nothing is set there, so the cgroup is made in each."""
    cpu: dict[str, str] = {}
    if limits.cpu_shares is not None:
        cpu["cpu.shares"] = str(limits.cpu_shares)
    if limits.cpu_quota_us is not None:
        cpu["cpu.cfs_period_us"] = str(limits.cpu_period_us)
        cpu["cpu.cfs_quota_us"] = str(limits.cpu_quota_us)
    memory: dict[str, str] = {}
    if limits.memory_limit is not None:
        memory["memory.limit_in_bytes"] = str(limits.memory_limit)
    return {"cpu": cpu, "memory": memory}


def v2_files(limits: Limits) -> dict[str, str]:
    """Interface file → text, for a cgroup v2 host: cpu.weight, cpu.max "<quota> <period>"
    ("max <period>": no quota), memory.max (bytes or "max")."""
    files: dict[str, str] = {}
    if limits.cpu_shares is not None:
        files["cpu.weight"] = str(cpu_weight(limits.cpu_shares))
    if limits.cpu_quota_us is not None:
        quota = "max" if limits.cpu_quota_us == UNLIMITED else str(limits.cpu_quota_us)
        files["cpu.max"] = f"{quota} {limits.cpu_period_us}"
    if limits.memory_limit is not None:
        files["memory.max"] = ("max" if limits.memory_limit == UNLIMITED
                               else str(limits.memory_limit))
    return files
