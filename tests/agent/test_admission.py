"""Admission against the node's resources and host ports, on real containerd: a pod that does
not fit is Failed with the kubelet's reason and message before anything of it is created, and
the other pods run."""

from __future__ import annotations

import os

from conftest import AgentFactory, Instance
from nodelet import settings
from nodelet.model.core import nodes, resources
from nodelet.model.core import status as st
from support.harness import Harness, all_ready, pod_manifest

PORT = 18093
# Static pods are critical to the kubelet; with this, only priority makes a pod critical.
NOT_CRITICAL = settings.EvictionSettings(static_pods_critical=False)


def failed(pod_status: st.PodStatus) -> bool:
    return pod_status.phase == "Failed"


async def refused(agent: Harness, name: str) -> st.PodStatus:
    pod_status = await agent.wait_status(name, failed, what=f"{name} refused at admission")
    assert pod_status.message.startswith("Pod was rejected: ")
    assert pod_status.container_statuses == ()
    assert any(e.type == "Warning" and e.reason == pod_status.reason
               for e in agent.events_of(name))
    return pod_status


def requesting(name: str, requests: str) -> str:
    return pod_manifest(name, container_extra=f"""\
        resources:
          requests: {requests}
          limits: {requests}
        """)


async def test_pods_that_do_not_fit_the_allocatable_are_refused(
    make_agent: AgentFactory, runtime: Instance
) -> None:
    """Static pods not taken as critical here (nodelet's option): refused for resources with
    the kubelet's reason and message, as it refuses any pod that is not critical."""
    agent = await make_agent(eviction=NOT_CRITICAL)
    agent.write("bystander.yaml", pod_manifest("bystander"))
    agent.write("cpu.yaml", requesting("cpu", "{cpu: '1000', memory: 64Mi}"))
    agent.write("memory.yaml", requesting("memory", "{cpu: 100m, memory: 100Ti}"))
    agent.write("huge.yaml", requesting("huge", "{memory: 64Mi, hugepages-2Mi: 4Mi}"))
    allocatable = nodes.allocatable(agent.agent_or_fail().node_spec)
    assert allocatable["cpu"] == (os.cpu_count() or 1) * 1000  # nothing reserved for cpu
    cpu = await refused(agent, "cpu")
    assert (cpu.reason, cpu.message) == (
        "OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu, requested: "
        f"1000000, used: 0, capacity: {allocatable['cpu']}")
    memory = await refused(agent, "memory")
    assert memory.reason == "OutOfmemory"
    assert f"capacity: {allocatable['memory']}" in memory.message
    huge = await refused(agent, "huge")  # this machine pre-allocates no huge pages
    assert huge.reason == "OutOfhugepages-2Mi"
    await agent.wait_status("bystander", all_ready, what="bystander runs")
    sandbox_uids = {s.uid for s in await runtime.client.list_pod_sandboxes()}
    assert all(agent.status_of(n) is not None for n in ("cpu", "memory", "huge"))
    pod_uids = {p.uid for p, _ in agent.agent_or_fail().pods()
                if p.name.startswith(("cpu-", "memory-", "huge-"))}
    assert pod_uids and not pod_uids & sandbox_uids  # nothing was created for them


async def test_a_taken_host_port_is_refused_until_it_is_free(agent: Harness) -> None:
    ports = f"ports: [{{containerPort: 80, hostPort: {PORT}}}]\n"
    agent.write("first.yaml", pod_manifest("first", container_extra=ports))
    await agent.wait_status("first", all_ready, what="first pod on the host port")
    agent.write("second.yaml", pod_manifest("second", container_extra=ports))
    second = await refused(agent, "second")
    assert (second.reason, second.message) == (
        resources.PORTS_REASON, f"Pod was rejected: {resources.PORTS_MESSAGE}")
    assert all_ready(agent.status_of("first"))  # type: ignore[arg-type]
    agent.remove("first.yaml")
    agent.remove("second.yaml")
    agent.write("third.yaml", pod_manifest("third", container_extra=ports))
    await agent.wait_status("third", all_ready, what="the freed host port taken again")


def critical_requesting(name: str, cpu: str) -> str:
    """A pod critical by its priority (as a system-node-critical pod), requesting `cpu`."""
    return pod_manifest(name, extra_spec="priority: 2000001000\n", container_extra=f"""\
        resources:
          requests: {{cpu: {cpu}}}
        """)


async def test_a_critical_pod_makes_room_by_preempting_others(
    make_agent: AgentFactory,
) -> None:
    """As the kubelet's CriticalPodAdmissionHandler: a critical pod that does not fit is
    admitted once a pod that is not critical is stopped for it — that pod Failed with reason
    Preempting, a DisruptionTarget condition and a Warning event; a critical pod that no
    preemption can make room for is refused with UnexpectedAdmissionError and the kubelet's
    words."""
    agent = await make_agent(eviction=NOT_CRITICAL)
    allocatable = nodes.allocatable(agent.agent_or_fail().node_spec)["cpu"]
    agent.write("victim.yaml", pod_manifest("victim", container_extra=f"""\
        resources:
          requests: {{cpu: {allocatable - 500}m}}
        """))
    await agent.wait_status("victim", all_ready, what="the victim runs")
    agent.write("critical.yaml", critical_requesting("critical", "1000m"))
    critical = await agent.wait_status("critical", all_ready, what="the critical pod runs")
    victim = await agent.wait_status("victim", lambda s: s.phase == "Failed" and all(
        isinstance(c.state, st.ContainerStateTerminated) for c in s.container_statuses),
        what="the victim preempted and stopped")
    # As the kubelet's preemption, which returns once the victim is killed: the critical
    # pod starts after the victim's container stopped (whole seconds in the status).
    stopped = victim.container_statuses[0].state
    started = critical.container_statuses[0].state
    assert isinstance(stopped, st.ContainerStateTerminated)
    assert isinstance(started, st.ContainerStateRunning)
    assert stopped.finished_at is not None and started.started_at is not None
    assert started.started_at >= stopped.finished_at.replace(microsecond=0)
    assert (victim.reason, victim.message) == (
        "Preempting", "Preempted in order to admit critical pod")
    target = next(c for c in victim.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason, target.message) == (
        "True", "TerminationByKubelet",
        "Pod was preempted by Kubelet to accommodate a critical pod.")
    assert any(e.type == "Warning" and e.reason == "Preempting" for e in agent.events_of("victim"))
    agent.write("huge.yaml", critical_requesting("huge", "'1000'"))
    huge = await refused(agent, "huge")
    short = 1_000_000 - (allocatable - 1000)
    assert (huge.reason, huge.message) == (
        "UnexpectedAdmissionError",
        "Pod was rejected: Unexpected error while attempting to recover from admission "
        "failure: preemption: error finding a set of pods to preempt: no set of running pods "
        f"found to reclaim resources: [(res: cpu, q: {short}), ]")
    await agent.wait_status("critical", all_ready, what="the critical pod still runs")
