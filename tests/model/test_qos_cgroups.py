"""The QoS cgroup hierarchy (`qoscgroups`), table-driven: where each level is, kubepods with
node allocatable (capacity less system and kube reserved, not the eviction thresholds), the
burstable and besteffort shares, and the cgroup v1 and v2 interface files and values."""

from __future__ import annotations

import pytest

from nodelet.model.core import nodes, pods, qoscgroups, resources, specs

GI = 1024**3
MI = 1024**2


def ctr(cpu: int = 0, memory: int = 0, cpu_limit: int = 0, memory_limit: int = 0,
        name: str = "a") -> pods.Container:
    return pods.Container(name=name, image="busybox", resources=pods.Resources(
        cpu_request_milli=cpu, memory_request=memory, cpu_limit_milli=cpu_limit,
        memory_limit=memory_limit))


def pod(*containers: pods.Container, uid: str = "u1") -> pods.Pod:
    return pods.Pod(uid=pods.PodUID(uid), name=uid, namespace="default",
                    spec=pods.PodSpec(containers=containers or (ctr(),)))


BESTEFFORT = pod(ctr(), uid="be")
GUARANTEED = pod(ctr(500, MI, 500, MI), uid="g")


@pytest.mark.parametrize(("root", "kubepods", "burstable", "besteffort"), [
    ("/", "/kubepods", "/kubepods/burstable", "/kubepods/besteffort"),
    ("/nodelet-x", "/nodelet-x/kubepods", "/nodelet-x/kubepods/burstable",
     "/nodelet-x/kubepods/besteffort"),
    ("/a/b/", "/a/b/kubepods", "/a/b/kubepods/burstable", "/a/b/kubepods/besteffort"),
])
def test_levels(root: str, kubepods: str, burstable: str, besteffort: str) -> None:
    assert qoscgroups.kubepods(root) == kubepods
    assert qoscgroups.qos_parent("Guaranteed", root) == kubepods
    assert qoscgroups.qos_parent("Burstable", root) == burstable
    assert qoscgroups.qos_parent("BestEffort", root) == besteffort
    assert qoscgroups.qos_levels(root) == (burstable, besteffort, kubepods)  # deepest first
    assert qoscgroups.pod_parents("u", root) == (
        f"{kubepods}/podu", f"{burstable}/podu", f"{besteffort}/podu")


@pytest.mark.parametrize(("the_pod", "expected"), [
    (GUARANTEED, "/r/kubepods/podg"),
    (pod(ctr(100), uid="b"), "/r/kubepods/burstable/podb"),
    (BESTEFFORT, "/r/kubepods/besteffort/podbe"),
])
def test_pod_cgroup_sits_under_its_qos_level(the_pod: pods.Pod, expected: str) -> None:
    assert specs.pod_cgroup_parent(the_pod, "/r") == expected
    qos = resources.qos_class(the_pod)
    assert expected.rsplit("/", 1)[0] == qoscgroups.qos_parent(qos, "/r")


def machine(cpus: int = 2, memory: int = 8 * GI, **huge: int) -> dict[str, int]:
    spec = nodes.NodeSpec(name="n", host_ip="", machine=nodes.MachineFacts(
        cpus=cpus, memory_bytes=memory, ephemeral_storage_bytes=100 * GI,
        hugepages={k.replace("_", "-"): v for k, v in huge.items()}))
    return nodes.capacity(spec)


@pytest.mark.parametrize(("capacity", "reserved", "expected"), [
    # Nothing reserved: the whole machine (2 CPUs: 2048 shares).
    (machine(), (), qoscgroups.Limits(cpu_shares=2048, memory_limit=8 * GI)),
    # System and kube reserved both come off; the 100Mi hard eviction threshold does not.
    (machine(), (("cpu", "100m"), ("memory", "256Mi"), ("cpu", "400m"), ("memory", "1Gi")),
     qoscgroups.Limits(cpu_shares=1536, memory_limit=8 * GI - 256 * MI - GI)),
    # Pre-allocated huge pages are not memory pods can use.
    (machine(hugepages_2Mi=512 * MI), (("memory", "512Mi"),),
     qoscgroups.Limits(cpu_shares=2048, memory_limit=7 * GI)),
    # Everything reserved: the minimum shares, and no memory limit rather than 0.
    (machine(cpus=1, memory=GI), (("cpu", "2"), ("memory", "2Gi")),
     qoscgroups.Limits(cpu_shares=2, memory_limit=None)),
])
def test_node_allocatable_on_kubepods(capacity: dict[str, int],
                                      reserved: tuple[tuple[str, str], ...],
                                      expected: qoscgroups.Limits) -> None:
    limits = qoscgroups.node_allocatable(capacity, reserved)
    assert limits == expected
    assert limits.cpu_quota_us is None  # the kubelet sets no quota on kubepods


@pytest.mark.parametrize(("active", "burstable_shares"), [
    ([], 2),
    ([BESTEFFORT, GUARANTEED], 2),  # only Burstable pods count
    ([pod(ctr(300), uid="b")], 307),
    ([pod(ctr(300), uid="b"), pod(ctr(300), uid="c"), GUARANTEED], 614),
    # Summed in millicores, then converted: three pods of 1m make 3 shares, not 3 times 2.
    ([pod(ctr(1), uid="b"), pod(ctr(1), uid="c"), pod(ctr(1), uid="d")], 3),
    # A Burstable pod without a CPU request (memory only) adds nothing.
    ([pod(ctr(memory=MI), uid="b")], 2),
    # Init containers count as PodRequests counts them (the larger of init and app).
    ([pods.Pod(uid=pods.PodUID("i"), name="i", namespace="default", spec=pods.PodSpec(
        containers=(ctr(100),), init_containers=(ctr(1000, name="init"),)))], 1024),
])
def test_qos_levels_shares(active: list[pods.Pod], burstable_shares: int) -> None:
    assert qoscgroups.qos_limits(active, "/r") == {
        "/r/kubepods/burstable": qoscgroups.Limits(cpu_shares=burstable_shares),
        "/r/kubepods/besteffort": qoscgroups.Limits(cpu_shares=2),
    }


@pytest.mark.parametrize(("shares", "weight"), [
    (2, 1), (3, 1), (102, 4), (307, 12), (1024, 39), (2048, 79), (262_144, 10_000),
    (0, 1), (10**7, 10_000),  # clamped to the shares range first
])
def test_cpu_weight(shares: int, weight: int) -> None:
    assert qoscgroups.cpu_weight(shares) == weight


FULL = qoscgroups.Limits(cpu_shares=102, cpu_quota_us=10_000, memory_limit=32 * MI)
LIFTED = qoscgroups.pod_limits(specs.PodCgroup(cpu_shares=256))
SHARES_ONLY = qoscgroups.Limits(cpu_shares=2)
NODE = qoscgroups.Limits(cpu_shares=2048, memory_limit=8 * GI)


@pytest.mark.parametrize(("limits", "v1", "v2"), [
    (FULL,
     {"cpu": {"cpu.shares": "102", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "10000"},
      "memory": {"memory.limit_in_bytes": str(32 * MI)}},
     {"cpu.weight": "4", "cpu.max": "10000 100000", "memory.max": str(32 * MI)}),
    (LIFTED,
     {"cpu": {"cpu.shares": "256", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1"},
      "memory": {"memory.limit_in_bytes": "-1"}},
     {"cpu.weight": "10", "cpu.max": "max 100000", "memory.max": "max"}),
    # A QoS level: shares only; quota and memory are left as they are.
    (SHARES_ONLY, {"cpu": {"cpu.shares": "2"}, "memory": {}}, {"cpu.weight": "1"}),
    (NODE, {"cpu": {"cpu.shares": "2048"}, "memory": {"memory.limit_in_bytes": str(8 * GI)}},
     {"cpu.weight": "79", "memory.max": str(8 * GI)}),
])
def test_interface_files(limits: qoscgroups.Limits, v1: dict[str, dict[str, str]],
                         v2: dict[str, str]) -> None:
    assert qoscgroups.v1_files(limits) == v1
    assert qoscgroups.v2_files(limits) == v2
