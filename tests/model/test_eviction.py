"""Node-pressure eviction decisions (model.core.eviction), table by table."""

from __future__ import annotations

import dataclasses

import pytest

from nodelet import settings
from nodelet.model.core import eviction as ev
from nodelet.model.core import pods

MI = 1024 * 1024


def pod(name: str, *, priority: int | None = None, memory_request: int = 0,
        ephemeral_request: int = 0, ephemeral_limits: tuple[int, ...] = (0,),
        volumes: tuple[pods.Volume, ...] = (), source: pods.Source = "api",
        tolerations: tuple[pods.Toleration, ...] = (), cpu_request: int = 0) -> pods.Pod:
    containers = tuple(
        pods.Container(name=f"c{i}", image="busybox", resources=pods.Resources(
            memory_request=memory_request, cpu_request_milli=cpu_request,
            other_requests={"ephemeral-storage": ephemeral_request} if ephemeral_request else {},
            ephemeral_storage_limit=limit))
        for i, limit in enumerate(ephemeral_limits))
    return pods.Pod(uid=pods.PodUID(f"uid-{name}"), name=name, namespace="default",
                    source=source, spec=pods.PodSpec(containers=containers, volumes=volumes,
                                                     priority=priority,
                                                     tolerations=tolerations))


def test_thresholds_are_read_as_the_kubelet_flags_write_them() -> None:
    hard = ev.parse_thresholds(settings.EvictionSettings().hard)
    assert [t.written() for t in hard] == [
        "memory.available<104857600", "nodefs.available<10%", "nodefs.inodesFree<5%",
        "imagefs.available<15%"]
    assert hard[0].value(10**12) == 100 * MI and hard[1].value(1000) == 100
    soft = ev.parse_thresholds("memory.available<1Gi", hard=False,
                               grace_periods={"memory.available": 90.0})
    assert soft == (ev.Threshold("memory.available", quantity=1024 * MI, grace_period=90.0,
                                 hard=False),)


@pytest.mark.parametrize(("text", "error"), [
    ("memory.available>1Gi", "is not SIGNAL<QUANTITY"),
    ("cpu.available<1", "unknown eviction signal 'cpu.available'"),
    ("nodefs.available<0%", "must be above 0%"),
    ("nodefs.available<101%", "at most 100%"),
    ("nodefs.available<x%", "is not a percentage"),
    ("memory.available<lots", "is not a quantity"),
    ("memory.available<1Gi,memory.available<2Gi", "given twice"),
])
def test_bad_thresholds_say_what_is_wrong(text: str, error: str) -> None:
    with pytest.raises(ev.ThresholdError, match=error):
        ev.parse_thresholds(text)


def test_a_soft_threshold_needs_its_grace_period() -> None:
    with pytest.raises(ev.ThresholdError, match="grace period must be specified"):
        ev.parse_thresholds("nodefs.available<20%", hard=False)


def test_allocatable_holds_the_hard_memory_and_nodefs_thresholds() -> None:
    held = ev.allocatable_holds(ev.parse_thresholds(settings.EvictionSettings().hard),
                                {"memory": 8 * 1024 * MI, "ephemeral-storage": 1000 * MI})
    assert held == {"memory": 100 * MI, "ephemeral-storage": 100 * MI}


def test_a_threshold_is_met_only_below_it() -> None:
    nodefs = ev.Threshold(ev.NODEFS_AVAILABLE, percentage=0.10)
    memory = ev.Threshold(ev.MEMORY_AVAILABLE, quantity=100)
    seen = {ev.NODEFS_AVAILABLE: ev.Observation(available=99, capacity=1000),
            ev.MEMORY_AVAILABLE: ev.Observation(available=100, capacity=1000)}
    assert ev.met([nodefs, memory], seen) == (nodefs,)
    assert ev.met([ev.Threshold(ev.PID_AVAILABLE, quantity=10)], seen) == ()  # not observed


def test_soft_thresholds_evict_after_their_grace_period_and_start_again_when_relieved() -> None:
    soft = ev.Threshold(ev.MEMORY_AVAILABLE, quantity=100, grace_period=30.0, hard=False)
    hard = ev.Threshold(ev.NODEFS_AVAILABLE, percentage=0.1)
    p = ev.step(ev.Pressure(), [soft, hard], now=100.0)
    assert ev.past_grace(p, 100.0) == (hard,)
    p = ev.step(p, [soft], now=129.0)
    assert ev.past_grace(p, 129.0) == ()
    assert ev.past_grace(ev.step(p, [soft], now=130.0), 130.0) == (soft,)
    relieved = ev.step(p, [], now=131.0)
    assert ev.past_grace(ev.step(relieved, [soft], now=140.0), 140.0) == ()


def test_conditions_last_the_transition_period_after_the_signal_clears() -> None:
    disk = ev.Threshold(ev.NODEFS_AVAILABLE, percentage=0.1)
    pid = ev.Threshold(ev.PID_AVAILABLE, quantity=10)
    p = ev.step(ev.Pressure(), [disk, pid], now=0.0)
    assert ev.conditions(p, 0.0, 300.0) == {"DiskPressure", "PIDPressure"}
    p = ev.step(p, [pid], now=10.0)
    assert ev.conditions(p, 299.0, 300.0) == {"DiskPressure", "PIDPressure"}
    assert ev.conditions(p, 300.0, 300.0) == {"PIDPressure"}  # pid still met at its last step
    assert ev.conditions(ev.step(p, [], now=20.0), 20.0, 0.0) == frozenset()
    assert ev.node_conditions_message({"MemoryPressure", "DiskPressure"}) == \
        "[DiskPressure MemoryPressure]"


def test_critical_pods() -> None:
    assert ev.is_critical(pod("static", source="file"))
    assert not ev.is_critical(pod("static", source="file"), static_pods_critical=False)
    assert ev.is_critical(pod("system", priority=ev.CRITICAL_PRIORITY))
    assert not ev.is_critical(pod("user", priority=ev.CRITICAL_PRIORITY - 1))
    mirror = pods.Pod(uid=pods.PodUID("m"), name="m", namespace="d", source="api",
                      spec=pods.PodSpec(containers=()),
                      annotations={pods.ANNOTATION_CONFIG_MIRROR: "hash"})
    assert ev.is_critical(mirror)


def _usage(p: pods.Pod, memory: int = 0, ephemeral: int = 0, processes: int = 0,
           empty_dirs: dict[str, int] | None = None) -> ev.PodUsage:
    return ev.PodUsage(p, containers=(ev.ContainerUsage("c0", memory=memory,
                                                        ephemeral=ephemeral),),
                       empty_dirs=empty_dirs or {}, processes=processes)


def test_memory_ranking_over_requests_first_then_priority_then_most_over() -> None:
    within = _usage(pod("within", memory_request=200 * MI), memory=150 * MI)
    small_over = _usage(pod("small-over", memory_request=10 * MI), memory=20 * MI)
    big_over = _usage(pod("big-over"), memory=90 * MI)
    important = _usage(pod("important", priority=1000), memory=500 * MI)
    order = ev.rank("memory", [within, important, small_over, big_over])
    assert [u.pod.name for u in order] == ["big-over", "small-over", "important", "within"]


def test_disk_ranking_counts_the_containers_and_the_empty_dirs() -> None:
    logs = _usage(pod("logs"), ephemeral=30 * MI)
    scratch = _usage(pod("scratch"), ephemeral=1 * MI, empty_dirs={"data": 50 * MI})
    asked = _usage(pod("asked", ephemeral_request=100 * MI), ephemeral=60 * MI)
    order = ev.rank("ephemeral-storage", [asked, logs, scratch])
    assert [u.pod.name for u in order] == ["scratch", "logs", "asked"]


def test_pid_ranking_is_priority_then_processes() -> None:
    order = ev.rank("pids", [_usage(pod("few"), processes=3),
                             _usage(pod("many"), processes=300),
                             _usage(pod("high", priority=10), processes=1000)])
    assert [u.pod.name for u in order] == ["many", "few", "high"]


def test_eviction_message_names_the_resource_the_threshold_and_the_heavy_containers() -> None:
    threshold = ev.Threshold(ev.NODEFS_AVAILABLE, percentage=0.10)
    usage = ev.PodUsage(pod("filler", ephemeral_limits=(0, 0)), containers=(
        ev.ContainerUsage("c0", ephemeral=3 * MI), ev.ContainerUsage("c1", ephemeral=0)),
        empty_dirs={"data": 40 * MI})
    message = ev.eviction_message(threshold, ev.Observation(5 * MI, 64 * MI), usage)
    assert message == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 6710886, "
        "available: 5Mi. Container c0 was using 3Mi, request is 0, has larger consumption "
        "of ephemeral-storage. ")
    pids = ev.eviction_message(ev.Threshold(ev.PID_AVAILABLE, quantity=100),
                               ev.Observation(50, 32768), usage)
    assert pids == "The node was low on resource: pids. Threshold quantity: 100, available: 50. "


def _empty_dir(name: str, limit: str | None, medium: str = "") -> pods.Volume:
    source: dict[str, str] = {"medium": medium} if medium else {}
    if limit is not None:
        source["sizeLimit"] = limit
    return pods.Volume(name=name, source_type="emptyDir", source=source)


@pytest.mark.parametrize(("volumes", "limits", "containers", "empty_dirs", "expected"), [
    ((_empty_dir("data", "10Mi"),), (0,), (5 * MI,), {"data": 11 * MI},
     'Usage of EmptyDir volume "data" exceeds the limit "10Mi". '),
    ((_empty_dir("data", "10Mi"),), (0,), (0,), {"data": 10 * MI}, None),
    ((_empty_dir("ram", "1Mi", medium="Memory"),), (0,), (0,), {"ram": 2 * MI}, None),
    ((_empty_dir("data", None),), (0,), (0,), {"data": 10**9}, None),
    ((), (4 * MI, 4 * MI), (5 * MI, 4 * MI), {},
     "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. "),
    ((), (4 * MI, 0), (5 * MI, 0), {},
     "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "),
    ((), (4 * MI, 8 * MI), (5 * MI, 1 * MI), {},
     'Container c0 exceeded its local ephemeral storage limit "4Mi". '),
    ((_empty_dir("data", None),), (4 * MI,), (1 * MI,), {"data": 4 * MI},
     "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "),
])
def test_local_storage_limits(volumes: tuple[pods.Volume, ...], limits: tuple[int, ...],
                              containers: tuple[int, ...], empty_dirs: dict[str, int],
                              expected: str | None) -> None:
    p = pod("p", volumes=volumes, ephemeral_limits=limits)
    usage = ev.PodUsage(p, containers=tuple(
        ev.ContainerUsage(f"c{i}", ephemeral=used) for i, used in enumerate(containers)),
        empty_dirs=empty_dirs)
    assert ev.local_storage_violation(usage) == expected


def test_admission_under_pressure() -> None:
    best_effort = pod("be")
    burstable = pod("burst", cpu_request=100)
    tolerant = pod("tolerant", tolerations=(pods.Toleration(
        key=ev.MEMORY_PRESSURE_TAINT, operator="Exists", effect="NoSchedule"),))
    memory = frozenset({"MemoryPressure"})
    assert ev.admission_rejection(best_effort, frozenset()) is None
    rejected = ev.admission_rejection(best_effort, memory)
    assert rejected is not None and rejected.reason == "Evicted"
    assert rejected.status_message == \
        "Pod was rejected: The node had condition: [MemoryPressure]. "
    assert ev.admission_rejection(burstable, memory) is None
    assert ev.admission_rejection(tolerant, memory) is None
    disk = ev.admission_rejection(burstable, frozenset({"DiskPressure", "MemoryPressure"}))
    assert disk is not None and disk.message == \
        "The node had condition: [DiskPressure MemoryPressure]. "
    assert ev.admission_rejection(pod("static", source="file"), frozenset({"DiskPressure"})) \
        is None
    assert ev.admission_rejection(pod("static", source="file"), frozenset({"DiskPressure"}),
                                  static_pods_critical=False) is not None


@pytest.mark.parametrize(("toleration", "tolerates"), [
    (pods.Toleration(operator="Exists"), True),
    (pods.Toleration(key=ev.MEMORY_PRESSURE_TAINT, operator="Exists"), True),
    (pods.Toleration(key=ev.MEMORY_PRESSURE_TAINT), True),  # Equal with the taint's empty value
    (pods.Toleration(key=ev.MEMORY_PRESSURE_TAINT, value="x"), False),
    (pods.Toleration(key=ev.MEMORY_PRESSURE_TAINT, operator="Exists", effect="NoExecute"),
     False),
    (pods.Toleration(key="other", operator="Exists"), False),
])
def test_tolerations_of_the_memory_pressure_taint(toleration: pods.Toleration,
                                                  tolerates: bool) -> None:
    assert toleration.tolerates(ev.MEMORY_PRESSURE_TAINT, "NoSchedule") is tolerates


def test_memory_ranking_adds_the_overhead_only_to_a_request() -> None:
    """GetResourceRequestQuantity: a pod's overhead raises its request, but gives no request
    to a pod without one."""
    def with_overhead(p: pods.Pod) -> pods.Pod:
        return dataclasses.replace(p, spec=dataclasses.replace(p.spec,
                                                               overhead={"memory": 50 * MI}))
    # Both use 100Mi over 40Mi of request; the overhead makes one of them within its request.
    covered = _usage(with_overhead(pod("covered", memory_request=60 * MI)), memory=100 * MI)
    over = _usage(pod("over", memory_request=60 * MI), memory=100 * MI)
    assert [u.pod.name for u in ev.rank("memory", [covered, over])] == ["over", "covered"]
    # No request: the overhead is not one, so both are over it by all they use.
    bare = _usage(with_overhead(pod("bare")), memory=30 * MI)
    heavier = _usage(pod("heavier"), memory=40 * MI)
    assert [u.pod.name for u in ev.rank("memory", [bare, heavier])] == ["heavier", "bare"]
