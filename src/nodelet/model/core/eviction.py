"""Node-pressure eviction (pure): the decisions of the kubelet's eviction manager
(pkg/kubelet/eviction), over plain values the eviction service observes.

- **Signals and thresholds.** `memory.available`, `nodefs.available`, `nodefs.inodesFree`,
  `imagefs.available`, `imagefs.inodesFree` and `pid.available`, each compared with a threshold
  written as the kubelet's flags write it (`memory.available<100Mi`, `nodefs.available<10%`).
  A hard threshold acts at once; a soft one once it was met for its grace period.
- **Node conditions.** MemoryPressure, DiskPressure, PIDPressure are True while a threshold of
  theirs is met and for `pressure transition period` after (so they do not flap).
- **Ranking.** Which pod goes first: for memory, pods using more than they request, then lower
  priority, then the most over their request; the same on disk with ephemeral storage; for
  PIDs, lower priority then the most processes. Critical pods (static pods, mirror pods,
  priority 2000000000 and more) are never evicted — the kubelet does not re-admit static pods.
- **Local storage limits.** A pod whose disk-backed emptyDir outgrows its sizeLimit, whose
  containers together outgrow their ephemeral-storage limits, or a container over its own
  limit is evicted whatever the node's state.
- **Admission under pressure.** Under MemoryPressure only BestEffort pods are refused (unless
  they tolerate the memory-pressure taint); under any other pressure every pod is refused;
  critical pods are always admitted.

Messages, reasons and formats are the kubelet's (helpers.go), trailing spaces included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from nodelet.model.core import admission, pods, quantities, resources

MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
PID_AVAILABLE = "pid.available"

MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"

CONDITION_OF = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE, NODEFS_AVAILABLE: DISK_PRESSURE,
    NODEFS_INODES_FREE: DISK_PRESSURE, IMAGEFS_AVAILABLE: DISK_PRESSURE,
    IMAGEFS_INODES_FREE: DISK_PRESSURE, PID_AVAILABLE: PID_PRESSURE,
}
# The resource a signal's eviction reclaims (signalToResource).
RESOURCE_OF = {
    MEMORY_AVAILABLE: "memory", NODEFS_AVAILABLE: "ephemeral-storage",
    IMAGEFS_AVAILABLE: "ephemeral-storage", NODEFS_INODES_FREE: "inodes",
    IMAGEFS_INODES_FREE: "inodes", PID_AVAILABLE: "pids",
}

REASON = "Evicted"
DISRUPTION_REASON = "TerminationByKubelet"  # of the DisruptionTarget condition
CRITICAL_PRIORITY = 2_000_000_000  # scheduling.SystemCriticalPriority
MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"

_STATEMENT = re.compile(r"\s*([A-Za-z.]+)\s*<\s*(\S+?)\s*\Z")


class ThresholdError(ValueError):
    """A threshold setting that cannot be read; the message says which and why."""


@dataclass(frozen=True)
class Threshold:
    """`signal` < `quantity` (bytes or a count), or < `percentage` of the capacity (0..1)."""

    signal: str
    quantity: int | None = None
    percentage: float | None = None
    # Seconds it must be met before pods are evicted; 0 for a hard threshold.
    grace_period: float = 0.0
    hard: bool = True

    def value(self, capacity: int) -> int:
        if self.quantity is not None:
            return self.quantity
        return int(capacity * (self.percentage or 0.0))

    def written(self) -> str:
        if self.percentage is not None:
            return f"{self.signal}<{self.percentage * 100:g}%"
        return f"{self.signal}<{self.quantity}"


@dataclass(frozen=True)
class Observation:
    """What a signal measures now: what is available of what capacity (bytes or counts)."""

    available: int
    capacity: int


Observations = Mapping[str, Observation]


def parse_thresholds(text: str, *, hard: bool = True,
                     grace_periods: Mapping[str, float] | None = None) -> tuple[Threshold, ...]:
    """`memory.available<100Mi,nodefs.available<10%` as --eviction-hard / --eviction-soft.
    Soft thresholds need a grace period per signal (--eviction-soft-grace-period)."""
    found: dict[str, Threshold] = {}
    for statement in filter(None, (part.strip() for part in text.split(","))):
        match = _STATEMENT.match(statement)
        if match is None:
            raise ThresholdError(f"{statement!r} is not SIGNAL<QUANTITY (e.g. "
                                 "memory.available<100Mi or nodefs.available<10%)")
        signal, value = match.groups()
        if signal not in CONDITION_OF:
            raise ThresholdError(f"unknown eviction signal {signal!r} (known: "
                                 f"{', '.join(sorted(CONDITION_OF))})")
        if signal in found:
            raise ThresholdError(f"eviction signal {signal} given twice")
        threshold = _threshold(signal, value)
        if not hard:
            grace = (grace_periods or {}).get(signal)
            if grace is None:
                raise ThresholdError("grace period must be specified for the soft eviction "
                                     f"threshold {signal}")
            threshold = replace(threshold, grace_period=grace, hard=False)
        found[signal] = threshold
    return tuple(found.values())


def _threshold(signal: str, value: str) -> Threshold:
    if value.endswith("%"):
        try:
            percent = float(value[:-1])
        except ValueError:
            raise ThresholdError(f"{signal}: {value!r} is not a percentage") from None
        if not 0 < percent <= 100:
            raise ThresholdError(f"{signal}: {value} must be above 0% and at most 100%")
        return Threshold(signal, percentage=percent / 100)
    try:
        quantity = quantities.memory_bytes(value)
    except ValueError:
        raise ThresholdError(f"{signal}: {value!r} is not a quantity (e.g. 100Mi)") from None
    if quantity < 0:
        raise ThresholdError(f"{signal}: {value} must not be negative")
    return Threshold(signal, quantity=quantity)


def parse_grace_periods(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    """--eviction-soft-grace-period's signals checked; seconds by signal."""
    out = {}
    for signal, seconds in pairs:
        if signal not in CONDITION_OF:
            raise ThresholdError(f"unknown eviction signal {signal!r} in a grace period")
        if seconds < 0:
            raise ThresholdError(f"grace period of {signal} must not be negative")
        out[signal] = seconds
    return out


def allocatable_holds(thresholds: Iterable[Threshold],
                      capacity: Mapping[str, int]) -> dict[str, int]:
    """What the hard thresholds keep out of Allocatable: memory.available as memory and
    nodefs.available as ephemeral-storage (the kubelet's node allocatable)."""
    held = {}
    for t in thresholds:
        if t.hard and t.signal == MEMORY_AVAILABLE:
            held["memory"] = t.value(capacity.get("memory", 0))
        elif t.hard and t.signal == NODEFS_AVAILABLE:
            held["ephemeral-storage"] = t.value(capacity.get("ephemeral-storage", 0))
    return held


def met(thresholds: Iterable[Threshold], observations: Observations) -> tuple[Threshold, ...]:
    """The thresholds whose signal is below them now (signals not observed are never met)."""
    out = []
    for t in thresholds:
        seen = observations.get(t.signal)
        if seen is not None and seen.available < t.value(seen.capacity):
            out.append(t)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Pressure over time


@dataclass(frozen=True)
class Pressure:
    """What the eviction manager remembers between observations (times in monotonic seconds):
    when each threshold was first met in its current run, and when each node condition last
    had a threshold met."""

    first_met: Mapping[Threshold, float] = field(default_factory=dict)
    last_met: Mapping[str, float] = field(default_factory=dict)


def step(pressure: Pressure, met_now: Sequence[Threshold], now: float) -> Pressure:
    """The memory after an observation at `now`: a threshold no longer met forgets when it
    was first met (its grace period starts again)."""
    first = {t: pressure.first_met.get(t, now) for t in met_now}
    last = dict(pressure.last_met)
    for t in met_now:
        last[CONDITION_OF[t.signal]] = now
    return Pressure(first_met=first, last_met=last)


def past_grace(pressure: Pressure, now: float) -> tuple[Threshold, ...]:
    """Thresholds met for at least their grace period: the ones that evict."""
    return tuple(t for t, since in pressure.first_met.items() if now - since >= t.grace_period)


def conditions(pressure: Pressure, now: float, transition_period: float) -> frozenset[str]:
    """Node conditions that are True: a threshold of theirs is met, or was within the
    transition period (--eviction-pressure-transition-period)."""
    met_now = {CONDITION_OF[t.signal] for t in pressure.first_met}
    return frozenset(c for c, last in pressure.last_met.items()
                     if c in met_now or now - last < transition_period)


def node_conditions_message(names: Iterable[str]) -> str:
    """Go's %v of a []NodeConditionType: `[MemoryPressure DiskPressure]`."""
    return "[" + " ".join(sorted(names)) + "]"


# ---------------------------------------------------------------------------------------------
# Pods


def is_critical(pod: pods.Pod, *, static_pods_critical: bool = True) -> bool:
    """IsCriticalPod: static pods (unless `static_pods_critical` is off — nodelet's own
    choice for a standalone node), mirror pods, and priority at least 2000000000."""
    if pod.is_static and static_pods_critical:
        return True
    if pod.annotations.get(pods.ANNOTATION_CONFIG_MIRROR) is not None:
        return True
    return pod.spec.priority is not None and pod.spec.priority >= CRITICAL_PRIORITY


@dataclass(frozen=True)
class ContainerUsage:
    name: str
    memory: int = 0  # working set bytes
    # The writable layer and the logs (what the container's ephemeral-storage limit bounds).
    ephemeral: int = 0
    inodes: int = 0


@dataclass(frozen=True)
class PodUsage:
    """A pod's usage as measured: its containers, its disk-backed emptyDirs by volume name,
    and its processes."""

    pod: pods.Pod
    containers: tuple[ContainerUsage, ...] = ()
    empty_dirs: Mapping[str, int] = field(default_factory=dict)
    empty_dir_inodes: int = 0
    processes: int = 0

    def total(self, resource: str) -> int:
        if resource == "memory":
            return sum(c.memory for c in self.containers)
        if resource == "ephemeral-storage":
            return sum(c.ephemeral for c in self.containers) + sum(self.empty_dirs.values())
        if resource == "inodes":
            return sum(c.inodes for c in self.containers) + self.empty_dir_inodes
        return self.processes


def _request(pod: pods.Pod, resource: str) -> int:
    """GetResourceRequestQuantity: the overhead counts only on top of a request."""
    own = resources.pod_requests(pod, overhead=False).get(resource, 0)
    return own + pod.spec.overhead.get(resource, 0) if own else 0


def rank(resource: str, usages: Iterable[PodUsage]) -> list[PodUsage]:
    """Pods in the order the kubelet evicts them to reclaim `resource`: for memory, disk and
    inodes, those using more than they request first, then lower priority, then the most
    used above the request; for pids, lower priority, then the most processes."""

    def priority(u: PodUsage) -> int:
        return u.pod.spec.priority or 0

    if resource == "pids":
        return sorted(usages, key=lambda u: (priority(u), -u.processes))

    def key(u: PodUsage) -> tuple[bool, int, int]:
        over = u.total(resource) - _request(u.pod, resource)
        return (over <= 0, priority(u), -over)

    return sorted(usages, key=key)


def _amount(resource: str, value: int) -> str:
    return quantities.format_binary(value) if resource in ("memory", "ephemeral-storage") \
        else str(value)


def eviction_message(threshold: Threshold, seen: Observation, usage: PodUsage) -> str:
    """The evicted pod's status message and event (evictionMessage): the starved resource,
    the threshold and what was available, and each container using more than it requests."""
    resource = RESOURCE_OF[threshold.signal]
    message = (f"The node was low on resource: {resource}. Threshold quantity: "
               f"{_amount(resource, threshold.value(seen.capacity))}, available: "
               f"{_amount(resource, seen.available)}. ")
    if resource not in ("memory", "ephemeral-storage"):
        return message
    specs = {c.name: c for c in usage.pod.spec.containers}
    for used in usage.containers:
        container = specs.get(used.name)
        if container is None:
            continue
        request = resources.container_requests(container).get(resource, 0)
        amount = used.memory if resource == "memory" else used.ephemeral
        if amount > request:
            message += (f"Container {used.name} was using {_amount(resource, amount)}, "
                        f"request is {_amount(resource, request)}, has larger consumption "
                        f"of {resource}. ")
    return message


def local_storage_violation(usage: PodUsage) -> str | None:
    """The eviction message when the pod outgrew a local storage limit, in the kubelet's
    order: a disk-backed emptyDir over its sizeLimit, the pod over the sum of its
    containers' ephemeral-storage limits, a container over its own limit."""
    pod = usage.pod
    for volume in pod.spec.volumes:
        if volume.source_type != "emptyDir" or volume.source.get("medium") == "Memory":
            continue
        limit = _size_limit(volume.source)
        in_dir = usage.empty_dirs.get(volume.name)
        if limit and in_dir is not None and in_dir > limit:
            return (f'Usage of EmptyDir volume "{volume.name}" exceeds the limit '
                    f'"{quantities.format_binary(limit)}". ')
    limits = [c.resources.ephemeral_storage_limit for c in pod.spec.containers]
    if any(limits) and usage.total("ephemeral-storage") > sum(limits):
        return ("Pod ephemeral local storage usage exceeds the total limit of containers "
                f"{quantities.format_binary(sum(limits))}. ")
    specs = {c.name: c for c in pod.spec.containers}
    for container_usage in usage.containers:
        container = specs.get(container_usage.name)
        limit = container.resources.ephemeral_storage_limit if container else 0
        if limit and container_usage.ephemeral > limit:
            return (f"Container {container_usage.name} exceeded its local ephemeral storage limit "
                    f'"{quantities.format_binary(limit)}". ')
    return None


def _size_limit(source: Mapping[str, object]) -> int:
    raw = source.get("sizeLimit")
    if raw is None or raw == "":
        return 0
    try:
        return quantities.memory_bytes(raw)
    except ValueError:  # refused when the manifest was read; never here
        return 0


def admission_rejection(pod: pods.Pod, pressed: frozenset[str], *,
                        static_pods_critical: bool = True) -> admission.Rejection | None:
    """The eviction manager's admit handler: None to admit, else why not."""
    if not pressed or is_critical(pod, static_pods_critical=static_pods_critical):
        return None
    if pressed == {MEMORY_PRESSURE} and (resources.qos_class(pod) != "BestEffort" or any(
            t.tolerates(MEMORY_PRESSURE_TAINT, "NoSchedule") for t in pod.spec.tolerations)):
        return None
    return admission.Rejection(
        REASON, f"The node had condition: {node_conditions_message(pressed)}. ")
