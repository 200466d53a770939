"""Room for a critical pod: which running pods to preempt when it does not fit (pure, no I/O).

As the kubelet's CriticalPodAdmissionHandler (pkg/kubelet/preemption): a critical pod
(`eviction.is_critical`: static pods, mirror pods, priority 2000000000 and more) is never
refused for want of resources. The node frees what it lacks by stopping pods it may preempt
(`preemptable`: not critical, or of a lower priority), the fewest it can, best-effort pods
first, then burstable, then guaranteed (`choose`); when even all of them would not free
enough, the pod is refused with `UnexpectedAdmissionError` and the kubelet's words
(`refusal`). A preempted pod is Failed (`REASON`, `MESSAGE`) and marked as a
DisruptionTarget (`DISRUPTION_MESSAGE`).

`NoPreemption` is the only exception: no set of pods frees enough.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nodelet.model.core import admission, eviction, pods, resources

REASON = "Preempting"
MESSAGE = "Preempted in order to admit critical pod"
DISRUPTION_MESSAGE = "Pod was preempted by Kubelet to accommodate a critical pod."
UNEXPECTED_REASON = "UnexpectedAdmissionError"


class NoPreemption(Exception):
    """No set of running pods frees what the critical pod needs; the message says what is
    missing, in the kubelet's words."""


@dataclass(frozen=True)
class Requirement:
    """How much more of `resource` the node needs (an InsufficientResourceError's
    GetInsufficientAmount: requested - (allocatable - used), in `resources` units)."""

    resource: str
    quantity: int


def requirements(pod: pods.Pod, others: Sequence[pods.Pod],
                 allocatable: resources.Amounts) -> tuple[Requirement, ...]:
    """Every resource the pod does not fit in beside `others`, and by how much."""
    return tuple(Requirement(m.resource, m.requested - (m.capacity - m.used))
                 for m in resources.misfits(pod, others, allocatable))


def _request(pod: pods.Pod, resource: str) -> int:
    """What preempting `pod` gives back of `resource` (GetResourceRequest: one of `pods`)."""
    return 1 if resource == "pods" else resources.pod_requests(pod).get(resource, 0)


def _subtract(needed: Sequence[Requirement], freed: Sequence[pods.Pod]) -> list[Requirement]:
    """What is still needed once `freed` are preempted."""
    left = []
    for need in needed:
        quantity = need.quantity - sum(_request(p, need.resource) for p in freed)
        if quantity > 0:
            left.append(Requirement(need.resource, quantity))
    return left


def describe(needed: Sequence[Requirement]) -> str:
    """The kubelet's list: `[(res: cpu, q: 998100), ]`."""
    return "[" + "".join(f"(res: {n.resource}, q: {n.quantity}), " for n in needed) + "]"


def preemptable(preemptor: pods.Pod, preemptee: pods.Pod, *,
                static_pods_critical: bool = True) -> bool:
    """kubetypes.Preemptable: a critical pod preempts any pod that is not; otherwise only a
    higher priority preempts a lower one."""
    def critical(pod: pods.Pod) -> bool:
        return eviction.is_critical(pod, static_pods_critical=static_pods_critical)
    if critical(preemptor) and not critical(preemptee):
        return True
    mine, theirs = preemptor.spec.priority, preemptee.spec.priority
    return mine is not None and theirs is not None and mine > theirs


def choose(preemptor: pods.Pod, candidates: Sequence[pods.Pod],
           needed: Sequence[Requirement], *,
           static_pods_critical: bool = True) -> tuple[pods.Pod, ...]:
    """The pods to preempt so that `needed` is freed (getPodsToPreempt): the guaranteed pods
    needed even if every burstable and best-effort one went, then the burstable ones needed
    beside those, then the best-effort ones. Raises NoPreemption."""
    tiers: dict[resources.QOSClass, list[pods.Pod]] = {
        "BestEffort": [], "Burstable": [], "Guaranteed": []}
    for pod in candidates:
        if preemptable(preemptor, pod, static_pods_critical=static_pods_critical):
            tiers[resources.qos_class(pod)].append(pod)
    best, burst, guaranteed = tiers["BestEffort"], tiers["Burstable"], tiers["Guaranteed"]
    missing = _subtract(needed, [*best, *burst, *guaranteed])
    if missing:
        raise NoPreemption(f"no set of running pods found to reclaim resources: "
                           f"{describe(missing)}")
    from_guaranteed = _by_distance(guaranteed, _subtract(needed, [*best, *burst]))
    from_burst = _by_distance(burst, _subtract(needed, [*best, *from_guaranteed]))
    from_best = _by_distance(best, _subtract(needed, [*from_burst, *from_guaranteed]))
    return (*from_best, *from_burst, *from_guaranteed)


def _by_distance(pool: Sequence[pods.Pod], needed: Sequence[Requirement]) -> list[pods.Pod]:
    """getPodsToPreemptByDistance: again and again the pod that leaves the least of what is
    needed (each resource weighed as the fraction it leaves, squared), the smaller request
    (memory, then cpu) between two as near."""
    left, chosen, needed = list(pool), [], list(needed)
    while needed:
        if not left:
            raise NoPreemption(f"no set of running pods found to reclaim resources: "
                               f"{describe(needed)}")
        index, best_distance = 0, float(len(needed) + 1)
        for i, pod in enumerate(left):
            distance = _distance(needed, pod)
            if distance < best_distance or (distance == best_distance
                                            and _smaller(pod, left[index])):
                index, best_distance = i, distance
        needed = _subtract(needed, [left[index]])
        chosen.append(left[index])
        # The last pod takes the chosen one's place, as the kubelet's slice does: it decides
        # which of two pods as near wins in the next round.
        left[index] = left[-1]
        left.pop()
    return chosen


def _distance(needed: Sequence[Requirement], pod: pods.Pod) -> float:
    total = 0.0
    for need in needed:
        remaining = need.quantity - _request(pod, need.resource)
        if remaining > 0:
            total += (remaining / need.quantity) ** 2
    return total


def _smaller(a: pods.Pod, b: pods.Pod) -> bool:
    for resource in ("memory", "cpu"):
        mine, theirs = _request(a, resource), _request(b, resource)
        if mine != theirs:
            return mine < theirs
    return True


def refusal(problem: NoPreemption) -> admission.Rejection:
    """The kubelet's refusal of a critical pod no preemption can make room for."""
    return admission.Rejection(
        UNEXPECTED_REASON,
        "Unexpected error while attempting to recover from admission failure: preemption: "
        f"error finding a set of pods to preempt: {problem}")
