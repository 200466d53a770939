"""Node resources and whether a pod fits (`resources`), table-driven: the kubelet's PodRequests
with init containers and sidecars, noderesources.Fits' order and wording, nodeports.Fits, and
allocatable = capacity - reservations - hard eviction thresholds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from nodelet import settings
from nodelet.model.core import admission, eviction, generation, nodes, pods, resources, specs
from nodelet.model.core import status as st

GI = 1024**3
MI = 1024**2


def ctr(name: str, cpu: int = 0, memory: int = 0, restart: Any = "", ports: tuple[Any, ...] = (),
        **other: int) -> pods.Container:
    return pods.Container(
        name=name, image="busybox", restart_policy=restart,
        resources=pods.Resources(cpu_request_milli=cpu, memory_request=memory,
                                 other_requests={k.replace("_", "-"): v
                                                 for k, v in other.items()}),
        ports=tuple(pods.ContainerPort(80, host_port=p[0], host_ip=p[1], protocol=p[2])
                    for p in ports))


def pod(*containers: pods.Container, init: tuple[pods.Container, ...] = (),
        uid: str = "u1") -> pods.Pod:
    return pods.Pod(uid=pods.PodUID(uid), name=uid, namespace="default",
                    spec=pods.PodSpec(containers=containers or (ctr("app"),),
                                      init_containers=init))


@pytest.mark.parametrize(("the_pod", "expected"), [
    (pod(ctr("a")), {}),
    (pod(ctr("a", 100, MI), ctr("b", 200, 2 * MI)), {"cpu": 300, "memory": 3 * MI}),
    # An init container runs alone: the pod needs the larger of it and the app containers.
    (pod(ctr("a", 100), init=(ctr("i", 500),)), {"cpu": 500}),
    (pod(ctr("a", 600), init=(ctr("i", 500),)), {"cpu": 600}),
    # Sidecars run beside the init containers after them and beside the app containers.
    (pod(ctr("a", 100), init=(ctr("s", 50, restart="Always"), ctr("i", 500))), {"cpu": 550}),
    (pod(ctr("a", 600), init=(ctr("s", 50, restart="Always"), ctr("i", 500))), {"cpu": 650}),
    (pod(ctr("a", 100), init=(ctr("i", 500), ctr("s", 50, restart="Always"))), {"cpu": 500}),
    (pod(ctr("a", ephemeral_storage=GI, hugepages_2Mi=4 * MI)),
     {"ephemeral-storage": GI, "hugepages-2Mi": 4 * MI}),
])
def test_pod_requests(the_pod: pods.Pod, expected: dict[str, int]) -> None:
    assert resources.pod_requests(the_pod) == expected


def test_remembered_requests_follow_the_spec_and_are_the_callers_own() -> None:
    """pod_requests and qos_class are remembered by the spec's identity: a pod with another
    spec (a resize) gets its own answer, and an answer changed by its caller is not what the
    next caller gets."""
    first = pod(ctr("a", 100, MI))
    answer = resources.pod_requests(first)
    answer["cpu"] = 1
    assert resources.pod_requests(first) == {"cpu": 100, "memory": MI}
    assert resources.pod_requests(first, overhead=False) == {"cpu": 100, "memory": MI}
    assert resources.qos_class(first) == "Burstable"
    resized = replace(first, spec=replace(first.spec, containers=(ctr("a", 300, 2 * MI),)))
    assert resources.pod_requests(resized) == {"cpu": 300, "memory": 2 * MI}
    none = replace(first, spec=replace(first.spec, containers=(ctr("a"),)))
    assert resources.qos_class(none) == "BestEffort"
    assert resources.pod_requests(first) == {"cpu": 100, "memory": MI}


NODE = {"cpu": 2000, "memory": 4 * GI, "pods": 3, "ephemeral-storage": 10 * GI,
        "hugepages-2Mi": 0, "example.com/gpu": 1}


@pytest.mark.parametrize(("the_pod", "others", "expected"), [
    (pod(ctr("a", 1000)), [pod(ctr("b", 1000), uid="o")], None),
    (pod(ctr("a", 1001)), [pod(ctr("b", 1000), uid="o")], ("cpu", 1001, 1000, 2000)),
    (pod(ctr("a", 0, 5 * GI)), [], ("memory", 5 * GI, 0, 4 * GI)),
    (pod(ctr("a")), [pod(uid=f"o{i}") for i in range(3)], ("pods", 1, 3, 3)),
    # pods first, then cpu, memory, ephemeral-storage, then the rest by name.
    (pod(ctr("a", 5000, 5 * GI)), [], ("cpu", 5000, 0, 2000)),
    (pod(ctr("a", hugepages_2Mi=2 * MI)), [], ("hugepages-2Mi", 2 * MI, 0, 0)),
    (pod(ctr("a", example_com_gpu=0)), [], None),
    # An extended resource the node does not have is skipped (removeMissingExtendedResources).
    (pod(ctr("a", **{"vendor.io/fpga": 1})), [], None),
    (pod(ctr("a", **{"example.com/gpu": 2})), [], ("example.com/gpu", 2, 0, 1)),
    (pod(ctr("a", ephemeral_storage=11 * GI)), [], ("ephemeral-storage", 11 * GI, 0, 10 * GI)),
])
def test_misfit(the_pod: pods.Pod, others: list[pods.Pod],
                expected: tuple[str, int, int, int] | None) -> None:
    found = resources.misfit(the_pod, others, NODE)
    assert (found and (found.resource, found.requested, found.used, found.capacity)) == expected


def test_misfit_is_worded_as_the_kubelet_words_it() -> None:
    found = resources.misfit(pod(ctr("a", 3000)), [], NODE)
    assert found is not None
    assert found.reason == "OutOfcpu"
    assert found.message == ("Node didn't have enough resource: cpu, requested: 3000, used: 0, "
                             "capacity: 2000")


@pytest.mark.parametrize(("mine", "theirs", "conflict"), [
    ((8080, "", "TCP"), (8080, "", "TCP"), True),
    ((8080, "", "TCP"), (8080, "", "UDP"), False),
    ((8080, "", "TCP"), (8081, "", "TCP"), False),
    ((8080, "127.0.0.1", "TCP"), (8080, "127.0.0.2", "TCP"), False),
    ((8080, "127.0.0.1", "TCP"), (8080, "0.0.0.0", "TCP"), True),
    ((8080, "", "TCP"), (8080, "127.0.0.1", "TCP"), True),
])
def test_ports_conflict(mine: tuple[int, str, str], theirs: tuple[int, str, str],
                        conflict: bool) -> None:
    other = pod(ctr("b", ports=(theirs,)), uid="o")
    assert resources.ports_conflict(pod(ctr("a", ports=(mine,))), [other]) is conflict


def test_admission_weighs_resources_then_affinity_then_ports() -> None:
    node = admission.Node(labels={"kubernetes.io/os": "linux"}, allocatable=NODE)
    other = pod(ctr("b", 1500, ports=((80, "", "TCP"),)), uid="o")
    both = pod(ctr("a", 1000, ports=((80, "", "TCP"),)))
    rejection = admission.admit(both, node, [other])
    assert rejection is not None and rejection.reason == "OutOfcpu"
    ports_only = pod(ctr("a", 100, ports=((80, "", "TCP"),)))
    rejection = admission.admit(ports_only, node, [other])
    assert rejection is not None and rejection.reason == "NodePorts"
    assert admission.admit(ports_only, node, []) is None
    unchecked = admission.admit(both, admission.Node(labels={}), [other])  # no allocatable
    assert unchecked is not None and unchecked.reason == "NodePorts"


def test_allocatable_holds_back_reservations_and_eviction_thresholds() -> None:
    machine = nodes.MachineFacts(cpus=2, memory_bytes=8 * GI, ephemeral_storage_bytes=100 * GI,
                                 hugepages={"hugepages-2Mi": 0})
    spec = nodes.NodeSpec(name="n", host_ip="192.0.2.1", machine=machine, max_pods=50)
    thresholds = eviction.parse_thresholds(settings.EvictionSettings().hard)
    held = resources.reserved([("cpu", "100m"), ("memory", "1Gi"), ("cpu", "0.4")],
                              eviction.allocatable_holds(thresholds, nodes.capacity(spec)))
    assert held == {"cpu": 500, "memory": GI + 100 * MI, "ephemeral-storage": 10 * GI}
    spec = nodes.NodeSpec(name="n", host_ip="192.0.2.1", machine=machine, max_pods=50,
                          reserved=held)
    assert nodes.allocatable(spec) == {"cpu": 1500, "memory": 7 * GI - 100 * MI, "pods": 50,
                                       "ephemeral-storage": 90 * GI, "hugepages-2Mi": 0}


def test_node_status_reports_capacity_and_allocatable_as_the_kubelet_writes_them() -> None:
    machine = nodes.MachineFacts(cpus=2, memory_bytes=8 * GI, ephemeral_storage_bytes=GI)
    spec = nodes.NodeSpec(name="n", host_ip="192.0.2.1", machine=machine,
                          reserved={"cpu": 250, "memory": 100 * MI})
    status = nodes.node_status(spec, None, ("True", "KubeletReady", "ready"), previous=None,
                               now=datetime(2026, 1, 1, tzinfo=UTC))
    assert status["capacity"] == {"cpu": "2", "memory": "8388608Ki", "pods": "110",
                                  "ephemeral-storage": str(GI)}
    assert status["allocatable"]["cpu"] == "1750m"
    assert status["allocatable"]["memory"] == f"{(8 * GI - 100 * MI) // 1024}Ki"


def limited(cpu_req: int, cpu_lim: int, mem_req: int, mem_lim: int) -> pods.Container:
    return pods.Container(name="c", image="busybox", resources=pods.Resources(
        cpu_request_milli=cpu_req, cpu_limit_milli=cpu_lim, memory_request=mem_req,
        memory_limit=mem_lim))


@pytest.mark.parametrize(("containers", "expected"), [
    ((ctr("a"),), "BestEffort"),
    ((ctr("a", ephemeral_storage=GI),), "BestEffort"),  # only cpu and memory count
    ((limited(100, 100, MI, MI),), "Guaranteed"),
    ((limited(100, 100, MI, MI), limited(0, 0, 0, 0)), "Burstable"),
    ((limited(50, 100, MI, MI),), "Burstable"),
    ((ctr("a", 100),), "Burstable"),
])
def test_qos_class(containers: tuple[pods.Container, ...], expected: str) -> None:
    the_pod = pod(*containers)
    assert resources.qos_class(the_pod) == expected
    status = generation.generate_status(
        the_pod, sandboxes=[], containers=[], old=None, last_sandbox_error=None, waiting={},
        host_ip="", now=datetime(2026, 1, 1, tzinfo=UTC), gates=settings.FeatureGates())
    assert st.to_api(status)["qosClass"] == expected


@pytest.mark.parametrize(("the_pod", "expected"), [
    (pod(ctr("a")), specs.PodCgroup(cpu_shares=2)),
    (pod(limited(100, 100, 32 * MI, 32 * MI)),
     specs.PodCgroup(cpu_shares=102, cpu_quota_us=10_000, memory_limit=32 * MI)),
    # Burstable: a limit only when every container declares it.
    (pod(limited(250, 500, MI, 0), limited(250, 500, MI, 0)),
     specs.PodCgroup(cpu_shares=512, cpu_quota_us=100_000)),
    (pod(limited(250, 0, MI, 4 * MI)), specs.PodCgroup(cpu_shares=256, memory_limit=4 * MI)),
    (pod(limited(100, 200, MI, 2 * MI), init=(limited(1000, 1000, MI, 8 * MI),)),
     specs.PodCgroup(cpu_shares=1024, cpu_quota_us=100_000, memory_limit=8 * MI)),
])
def test_pod_cgroup_limits(the_pod: pods.Pod, expected: specs.PodCgroup) -> None:
    assert specs.pod_cgroup(the_pod) == expected


def _limited(cpu: int, memory: int) -> pods.Container:
    return pods.Container(name="a", image="busybox", resources=pods.Resources(
        cpu_request_milli=cpu, cpu_limit_milli=cpu, memory_request=memory, memory_limit=memory))


def _with_overhead(the_pod: pods.Pod, **overhead: int) -> pods.Pod:
    return replace(the_pod, spec=replace(the_pod.spec, overhead=overhead))


# spec.overhead (a RuntimeClass's): added to the requests always, to the limits that are set
# (PodRequests, PodLimits); the QoS class and a BestEffort pod's cgroup ignore it
# (GetPodQOS, ResourceConfigForPod).
@pytest.mark.parametrize(("the_pod", "requests", "limits", "cgroup"), [
    (_with_overhead(pod(_limited(500, 64 * MI)), cpu=250, memory=32 * MI),
     {"cpu": 750, "memory": 96 * MI}, {"cpu": 750, "memory": 96 * MI},
     specs.PodCgroup(cpu_shares=768, cpu_quota_us=75_000, memory_limit=96 * MI)),
    # Requests without limits: the overhead adds to the shares, no limit appears.
    (_with_overhead(pod(ctr("a", 100)), cpu=250, memory=32 * MI),
     {"cpu": 350, "memory": 32 * MI}, {}, specs.PodCgroup(cpu_shares=358)),
    (_with_overhead(pod(ctr("a")), cpu=250), {"cpu": 250}, {},
     specs.PodCgroup(cpu_shares=specs.MIN_CPU_SHARES)),
])
def test_overhead_in_requests_limits_and_the_pod_cgroup(
        the_pod: pods.Pod, requests: dict[str, int], limits: dict[str, int],
        cgroup: specs.PodCgroup) -> None:
    assert resources.pod_requests(the_pod) == requests
    assert resources.pod_limits(the_pod) == limits
    assert specs.pod_cgroup(the_pod) == cgroup
    assert resources.qos_class(the_pod) == resources.qos_class(
        replace(the_pod, spec=replace(the_pod.spec, overhead={})))
    assert resources.pod_requests(the_pod, overhead=False) == resources.pod_requests(
        replace(the_pod, spec=replace(the_pod.spec, overhead={})))


def test_overhead_counts_in_admission() -> None:
    fits = pod(ctr("a", 1500))
    assert resources.misfit(fits, [], NODE) is None
    too_much = resources.misfit(_with_overhead(fits, cpu=600), [], NODE)
    assert too_much is not None and (too_much.resource, too_much.requested) == ("cpu", 2100)
