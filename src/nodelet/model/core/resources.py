"""Node resources and whether a pod fits (pure): the kubelet's predicate admission
(pkg/kubelet/lifecycle/predicate.go over the scheduler's AdmissionCheck: noderesources.Fits,
then nodeports.Fits).

Amounts are integers in canonical units: `cpu` in millicores, `memory`, `ephemeral-storage`
and `hugepages-<size>` in bytes, `pods` and extended resources as counts. A pod's request is
the kubelet's PodRequests: app containers and sidecars run together, and each init container
runs beside the sidecars started before it, so the pod needs the larger of the two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from nodelet.model.core import names, pods, quantities

Amounts = Mapping[str, int]
QOSClass = Literal["Guaranteed", "Burstable", "BestEffort"]
# The resources noderesources.Fits checks first, in its order; the rest follow sorted by name.
_FIRST = ("cpu", "memory", "ephemeral-storage")
_OUT_OF = "OutOf"
PORTS_REASON = "NodePorts"
PORTS_MESSAGE = ("Predicate NodePorts failed: node(s) didn't have free ports for the requested "
                 "pod ports")


@dataclass(frozen=True)
class Misfit:
    """A resource the node does not have enough of (InsufficientResourceError)."""

    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def reason(self) -> str:
        """OutOfcpu, OutOfmemory, OutOfpods, OutOfhugepages-2Mi, ..."""
        return _OUT_OF + self.resource

    @property
    def message(self) -> str:
        return (f"Node didn't have enough resource: {self.resource}, requested: "
                f"{self.requested}, used: {self.used}, capacity: {self.capacity}")


def container_requests(container: pods.Container) -> dict[str, int]:
    r = container.resources
    found = {"cpu": r.cpu_request_milli, "memory": r.memory_request, **r.other_requests}
    return {name: value for name, value in found.items() if value}


def _add(total: dict[str, int], more: Amounts) -> dict[str, int]:
    out = dict(total)
    for name, value in more.items():
        out[name] = out.get(name, 0) + value
    return out


def _max(a: Amounts, b: Amounts) -> dict[str, int]:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in {*a, *b}}


def pod_requests(pod: pods.Pod, *, overhead: bool = True) -> dict[str, int]:
    """What the pod asks of the node: max(app containers + sidecars, each init container +
    the sidecars started before it), with the pod-level requests (spec.resources) in place of
    the containers' for cpu, memory and hugepages, plus the pod's overhead unless `overhead`
    is False (PodRequests with PodLevelResources, ExcludeOverhead). Remembered (`_by_spec`)."""
    return dict(_by_spec(pod.spec, "requests" if overhead else "requests-without-overhead",
                         lambda: _pod_requests(pod, overhead=overhead)))


def _pod_requests(pod: pods.Pod, *, overhead: bool) -> dict[str, int]:
    totals = _pod_level(pod_amounts(pod, container_requests), pod.spec.resources, requests=True)
    if not overhead:
        return totals
    return {k: v for k, v in _add(totals, pod.spec.overhead).items() if v}


_T = TypeVar("_T")
# What `_by_spec` remembers: (id of the spec, what) -> (the spec, the answer). The spec is
# kept with its answer, so an id reused by another spec is never taken for it. At most
# `_KEPT` are kept, then all are forgotten (a node has at most a few hundred pods).
_REMEMBERED: dict[tuple[int, str], tuple[pods.PodSpec, Any]] = {}
_KEPT = 4096


def _by_spec(spec: pods.PodSpec, what: str, work_out: Callable[[], _T]) -> _T:
    """`work_out()`, remembered by the identity of the pod's spec, which is immutable.
    Admission and the QoS shares weigh every admitted pod at each change: 250 admissions one
    after the other, the QoS shares with each, took 0.34 CPU-s; remembered, 0.06."""
    key = (id(spec), what)
    known = _REMEMBERED.get(key)
    if known is not None and known[0] is spec:
        return cast(_T, known[1])
    answer = work_out()
    if len(_REMEMBERED) >= _KEPT:
        _REMEMBERED.clear()
    _REMEMBERED[key] = (spec, answer)
    return answer


def pod_limits(pod: pods.Pod) -> dict[str, int]:
    """The containers' cpu and memory limits added up as `pod_requests` adds requests, the
    pod-level limits in their place where set, and the pod's overhead added to each limit
    that is not 0 (PodLimits)."""
    limits = _pod_level(pod_amounts(pod, lambda c: {"cpu": c.resources.cpu_limit_milli,
                                                    "memory": c.resources.memory_limit}),
                        pod.spec.resources, requests=False)
    return {name: value + pod.spec.overhead.get(name, 0) for name, value in limits.items()}


def _pod_level(totals: dict[str, int], level: pods.Resources | None, *,
               requests: bool) -> dict[str, int]:
    if level is None:
        return totals
    own = ({"cpu": level.cpu_request_milli, "memory": level.memory_request,
            **level.other_requests} if requests
           else {"cpu": level.cpu_limit_milli, "memory": level.memory_limit})
    written = level.written.get("requests" if requests else "limits", {})
    out = dict(totals)
    for name, value in own.items():
        if name in written and (name in ("cpu", "memory") or name.startswith("hugepages-")):
            out[name] = value
    return {k: v for k, v in out.items() if v}


def pod_amounts(
    pod: pods.Pod, of: Callable[[pods.Container], Amounts]
) -> dict[str, int]:
    """The pod's total of a per-container amount (requests, limits), as the kubelet's
    PodRequests/PodLimits add them up with init containers and sidecars."""
    return aggregate(pod.spec.containers, pod.spec.init_containers, of)


def aggregate(
    containers: Iterable[pods.Container], init_containers: Iterable[pods.Container],
    of: Callable[[pods.Container], Amounts],
) -> dict[str, int]:
    """AggregateContainerRequests/Limits: max(app containers + sidecars, each init container
    + the sidecars started before it)."""
    running: dict[str, int] = {}
    for container in containers:
        running = _add(running, of(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in init_containers:
        own = of(container)
        if container.restart_policy == "Always":
            sidecars = _add(sidecars, own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(sidecars, own))
    return {k: v for k, v in _max(_add(running, sidecars), init_peak).items() if v}


def amounts(pairs: Iterable[tuple[str, str]]) -> dict[str, int]:
    """(name, quantity) pairs such as ("cpu", "100m") in `Amounts` units, summed per name.
    Raises fields.ManifestError (a ValueError) for a quantity that does not parse."""
    out: dict[str, int] = {}
    for name, text in pairs:
        value = (quantities.cpu_millis(text, path=name) if name == "cpu"
                 else quantities.memory_bytes(text, path=name))
        out[name] = out.get(name, 0) + value
    return out


def reserved(reservations: Iterable[tuple[str, str]], *holds: Amounts) -> dict[str, int]:
    """Everything allocatable holds back: the reservations (--system-reserved,
    --kube-reserved) plus `holds` (the hard eviction thresholds, `eviction.allocatable_holds`)."""
    held = amounts(reservations)
    for hold in holds:
        held = _add(held, hold)
    return held


def allocatable(capacity: Amounts, *holds: Amounts) -> dict[str, int]:
    """Capacity minus everything held back (see `reserved`), never below zero: the node's
    Allocatable."""
    out = dict(capacity)
    for reservation in holds:
        for name, value in reservation.items():
            if name in out:
                out[name] = max(out[name] - value, 0)
    return out


def misfit(pod: pods.Pod, others: Sequence[pods.Pod], node: Amounts) -> Misfit | None:
    """The first resource the pod does not fit in beside the `others` already admitted (the
    kubelet reports only the first; `misfits`)."""
    return next(iter(misfits(pod, others, node)), None)


def misfits(pod: pods.Pod, others: Sequence[pods.Pod], node: Amounts) -> list[Misfit]:
    """Every resource the pod does not fit in beside the `others` already admitted, in the
    order noderesources.Fits checks them: pods, then cpu, memory, ephemeral-storage, then the
    others by name. Extended resources the node does not have are skipped, as the kubelet
    does (removeMissingExtendedResources); hugepages are native and checked (0 when the node
    has none)."""
    found = []
    pods_cap = node.get("pods")
    if pods_cap is not None and len(others) + 1 > pods_cap:
        found.append(Misfit("pods", 1, len(others), pods_cap))
    wanted = pod_requests(pod)
    used: dict[str, int] = {}
    for other in others:
        used = _add(used, pod_requests(other))
    names = [n for n in _FIRST if n in wanted]
    names += sorted(n for n in wanted if n not in _FIRST)
    for name in names:
        if name not in node and _extended(name):
            continue
        capacity = node.get(name, 0)
        if wanted[name] > capacity - used.get(name, 0):
            found.append(Misfit(name, wanted[name], used.get(name, 0), capacity))
    return found


def _extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-qualified name outside kubernetes.io."""
    return "/" in name and not name.split("/", 1)[0].endswith("kubernetes.io")


def host_ports(pod: pods.Pod) -> set[tuple[str, str, int]]:
    """(protocol, host IP, host port) of every container port with a hostPort."""
    return {(p.protocol or "TCP", p.host_ip or "0.0.0.0", p.host_port)
            for c in (*pod.spec.init_containers, *pod.spec.containers) for p in c.ports
            if p.host_port}


def ports_conflict(pod: pods.Pod, others: Sequence[pods.Pod]) -> bool:
    """nodeports.Fits: a hostPort is taken when another pod uses it with the same protocol on
    the same host IP, or either side binds every address (0.0.0.0)."""
    wanted = host_ports(pod)
    taken = set().union(*(host_ports(o) for o in others)) if others else set()
    return any(
        proto == t_proto and port == t_port
        and (ip == t_ip or "0.0.0.0" in (ip, t_ip))
        for proto, ip, port in wanted for t_proto, t_ip, t_port in taken
    )


def qos_class(pod: pods.Pod) -> QOSClass:
    """Guaranteed, Burstable or BestEffort, by the kubelet's rules on cpu and memory requests
    and limits (other resources do not count). With pod-level cpu or memory (spec.resources),
    those alone decide, as the kubelet's GetPodQOS with PodLevelResources. Remembered
    (`_by_spec`)."""
    return _by_spec(pod.spec, "qos", lambda: _qos_class(pod))


def _qos_class(pod: pods.Pod) -> QOSClass:
    level = pod.spec.resources
    if level is not None and {*level.written.get("requests", {}),
                              *level.written.get("limits", {})} & {"cpu", "memory"}:
        return _requirements_qos(level)
    everything = (*pod.spec.init_containers, *pod.spec.containers)
    if all(c.resources.compute == (0, 0, 0, 0) for c in everything):
        return "BestEffort"
    guaranteed = all(
        r.cpu_limit_milli and r.memory_limit
        and r.cpu_request_milli in (0, r.cpu_limit_milli)
        and r.memory_request in (0, r.memory_limit)
        for r in (c.resources for c in everything)
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _requirements_qos(level: pods.Resources) -> QOSClass:
    """requirementsQOS: per cpu and memory, request = limit > 0 is Guaranteed, both 0
    BestEffort, anything else Burstable; a mix is Burstable."""
    classes = set()
    for request, limit in ((level.cpu_request_milli, level.cpu_limit_milli),
                           (level.memory_request, level.memory_limit)):
        if not request and not limit:
            classes.add("BestEffort")
        elif request == limit or (limit and not request):
            classes.add("Guaranteed")
        else:
            classes.add("Burstable")
    if classes == {"BestEffort"}:
        return "BestEffort"
    return "Guaranteed" if classes == {"Guaranteed"} else "Burstable"


def is_native_resource(name: str) -> bool:
    """helper.IsNativeResource: no domain, or a kubernetes.io one."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-qualified name outside kubernetes.io, not
    starting with `requests.`, that also works as a quota name (`requests.<name>`)."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return names.is_qualified_name(f"requests.{name}")
