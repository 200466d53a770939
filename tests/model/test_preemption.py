"""Room for a critical pod (`preemption`), table-driven: the kubelet's getPodsToPreempt —
best-effort before burstable before guaranteed, the fewest pods by distance, critical and
higher-priority pods never chosen — and its words when nothing can make room."""

from __future__ import annotations

import pytest

from nodelet.model.core import admission, pods, preemption

MI = 1024**2


def workload(uid: str, *, cpu: int = 0, memory: int = 0, limits: bool = False,
             static: bool = False, priority: int | None = None) -> pods.Pod:
    """A pod of one container; with `limits`, its limits equal its requests (Guaranteed)."""
    resources = pods.Resources(cpu_request_milli=cpu, memory_request=memory,
                               cpu_limit_milli=cpu if limits else 0,
                               memory_limit=memory if limits else 0)
    return pods.Pod(uid=pods.PodUID(uid), name=uid, namespace="default",
                    source="file" if static else "api",
                    spec=pods.PodSpec(containers=(pods.Container(
                        name="app", image="busybox", resources=resources),),
                        priority=priority))


CRITICAL = workload("critical", cpu=1500, static=True)
BEST = workload("best")
BURST_SMALL = workload("burst-small", cpu=300)
BURST_BIG = workload("burst-big", cpu=900, memory=64 * MI)
GUARANTEED = workload("guaranteed", cpu=1000, memory=64 * MI, limits=True)


def need(**amounts: int) -> tuple[preemption.Requirement, ...]:
    return tuple(preemption.Requirement(name, q) for name, q in amounts.items())


@pytest.mark.parametrize(("candidates", "needed", "chosen"), [
    pytest.param((BEST, BURST_SMALL, GUARANTEED), need(pods=1), ["best"],
                 id="a pod's room: best-effort first"),
    pytest.param((BEST, BURST_SMALL, BURST_BIG, GUARANTEED), need(cpu=800), ["burst-big"],
                 id="burstable before guaranteed, the nearest one"),
    pytest.param((BEST, BURST_SMALL, BURST_BIG, GUARANTEED), need(cpu=1100),
                 ["burst-big", "burst-small"], id="two burstable rather than a guaranteed"),
    pytest.param((BURST_SMALL, GUARANTEED), need(cpu=1200), ["burst-small", "guaranteed"],
                 id="the guaranteed one only because burstable ones are not enough"),
    pytest.param((BEST, GUARANTEED, workload("other-critical", cpu=4000, static=True)),
                 need(cpu=900), ["guaranteed"], id="critical pods are never chosen"),
])
def test_choose(candidates: tuple[pods.Pod, ...], needed: tuple[preemption.Requirement, ...],
                chosen: list[str]) -> None:
    assert [p.uid for p in preemption.choose(CRITICAL, candidates, needed)] == chosen


def test_nothing_can_make_room_in_the_kubelets_words() -> None:
    with pytest.raises(preemption.NoPreemption) as raised:
        preemption.choose(CRITICAL, (BEST, BURST_SMALL), need(cpu=998100))
    assert str(raised.value) == (
        "no set of running pods found to reclaim resources: [(res: cpu, q: 997800), ]")
    refusal = preemption.refusal(raised.value)
    assert refusal.reason == "UnexpectedAdmissionError"
    assert refusal.status_message == (
        "Pod was rejected: Unexpected error while attempting to recover from admission "
        "failure: preemption: error finding a set of pods to preempt: no set of running pods "
        "found to reclaim resources: [(res: cpu, q: 997800), ]")


def test_requirements_are_what_is_short_of_allocatable() -> None:
    """requested - (allocatable - used), for every resource short, pods first."""
    allocatable = {"cpu": 2000, "memory": 1024 * MI, "pods": 2}
    others = (BURST_SMALL, GUARANTEED)
    wanted = workload("critical", cpu=1500, memory=2048 * MI, static=True)
    assert preemption.requirements(wanted, others, allocatable) == need(
        pods=1, cpu=800, memory=2048 * MI - (1024 - 64) * MI)
    assert preemption.requirements(BEST, (), allocatable) == ()


@pytest.mark.parametrize(("preemptor", "preemptee", "expected"), [
    (CRITICAL, BEST, True),
    (CRITICAL, workload("static", static=True), False),
    (BEST, BURST_SMALL, False),
    (workload("high", priority=100), workload("low", priority=10), True),
    (workload("same", priority=10), workload("low", priority=10), False),
    (workload("system", priority=2_000_000_000), workload("low", priority=10), True),
])
def test_preemptable(preemptor: pods.Pod, preemptee: pods.Pod, expected: bool) -> None:
    assert preemption.preemptable(preemptor, preemptee) is expected


def test_a_critical_pod_is_not_refused_for_resources_but_for_anything_else() -> None:
    """Admission leaves resources to preemption for a critical pod; a host port taken still
    refuses it."""
    node = admission.Node(labels={}, allocatable={"cpu": 1000, "pods": 10})
    assert admission.admit(CRITICAL, node, (), critical=True) is None
    refused = admission.admit(CRITICAL, node, ())
    assert refused is not None and refused.reason == "OutOfcpu"
