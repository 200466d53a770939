"""Node pressure and local storage limits on real containerd: a pod filling a small data-dir
filesystem is evicted as the kubelet evicts it, the DiskPressure it caused clears and
admission refuses pods while it lasts; pods over an emptyDir sizeLimit or a container's
ephemeral-storage limit are evicted; critical pods and bystanders are never disturbed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import AgentFactory, Instance
from nodelet import settings
from nodelet.model.core import status as st
from support.disks import tiny_tmpfs
from support.harness import Harness, all_ready, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

# Observed often, conditions kept briefly: the same rules, on a test's time scale.
FAST = settings.EvictionSettings(monitoring_period=0.3, pressure_transition_period=1.5,
                                 static_pods_critical=False)


def evicted(pod_status: st.PodStatus) -> bool:
    """Failed with reason Evicted, its containers stopped."""
    return pod_status.phase == "Failed" and pod_status.reason == "Evicted" and all(
        isinstance(c.state, st.ContainerStateTerminated) for c in pod_status.container_statuses)


def disruption(pod_status: st.PodStatus) -> st.PodCondition | None:
    return next((c for c in pod_status.conditions if c.type == "DisruptionTarget"), None)


def empty_dir_pod(name: str, command: str, *, size_limit: str = "") -> str:
    source = f"{{sizeLimit: {size_limit}}}" if size_limit else "{}"
    return pod_manifest(name, command=command, extra_spec=f"""\
        volumes:
          - name: data
            emptyDir: {source}
        """, container_extra="""\
        volumeMounts:
          - {name: data, mountPath: /data}
        """)


def bystander(name: str) -> str:
    """A pod that must never be disturbed: critical by priority (the kubelet never evicts
    those), as a system pod would be."""
    return pod_manifest(name, extra_spec="priority: 2000000000\n")


async def _running_container(agent: Harness, name: str) -> str:
    pod_status = await agent.wait_status(name, all_ready, what=f"{name} running")
    return pod_status.container_statuses[0].container_id


async def _undisturbed(agent: Harness, name: str, container_id: str) -> None:
    pod_status = agent.status_of(name)
    assert pod_status is not None and all_ready(pod_status), pod_status
    assert pod_status.container_statuses[0].container_id == container_id
    assert pod_status.container_statuses[0].restart_count == 0


@asynccontextmanager
async def agent_on_small_disk(runtime: Instance, size: str) -> AsyncIterator[Harness]:
    """An agent whose data dir (nodefs: emptyDirs, logs) is a `size` tmpfs."""
    harness = Harness(endpoint=runtime.containerd.endpoint, eviction=FAST)
    try:
        with tiny_tmpfs(harness.settings.data_dir, size=size):
            await harness.start()
            try:
                yield harness
            finally:
                await harness.stop()
    finally:
        harness.cleanup()


async def test_disk_pressure_evicts_the_pod_filling_the_disk_then_clears(
        runtime: Instance) -> None:
    async with agent_on_small_disk(runtime, "48m") as agent:
        manager = agent.agent_or_fail().eviction
        agent.write("calm.yaml", bystander("calm"))
        calm = await _running_container(agent, "calm")
        agent.write("filler.yaml", empty_dir_pod(
            "filler", "dd if=/dev/zero of=/data/fill bs=1M count=46; sleep 1000000"))

        pod_status = await agent.wait_status("filler", evicted, within=60,
                                             what="filler evicted for disk pressure")
        assert pod_status.message.startswith(
            "The node was low on resource: ephemeral-storage. Threshold quantity: ")
        condition = disruption(pod_status)
        assert condition is not None and condition.status == "True"
        assert condition.reason == "TerminationByKubelet"
        assert any(e.reason == "Evicted" and e.type == "Warning"
                   and e.message == pod_status.message for e in agent.events_of("filler"))
        node_events = [e for e in agent.agent_or_fail().events() if e.kind == "Node"]
        assert any(e.reason == "EvictionThresholdMet"
                   and e.message == "Attempting to reclaim ephemeral-storage"
                   for e in node_events)

        # Its emptyDir is torn down with it, so the pressure clears (after the transition).
        await eventually(lambda: "DiskPressure" not in manager.conditions(), within=30,
                         what="DiskPressure cleared")
        await _undisturbed(agent, "calm", calm)
        agent.write("after.yaml", pod_manifest("after"))
        await agent.wait_status("after", all_ready, what="a new pod admitted after pressure")


async def test_admission_refuses_pods_while_the_disk_is_under_pressure(
        runtime: Instance) -> None:
    async with agent_on_small_disk(runtime, "16m") as agent:
        manager = agent.agent_or_fail().eviction
        # Something the node cannot reclaim fills its disk: no pod to evict, pressure stays.
        filler = agent.settings.data_dir / "filler"
        filler.write_bytes(b"\0" * (15 * 1024 * 1024))
        await eventually(lambda: "DiskPressure" in manager.conditions(), within=30,
                         what="DiskPressure")
        agent.write("late.yaml", pod_manifest("late"))
        pod_status = await agent.wait_status(
            "late", lambda s: s.phase == "Failed", what="late refused")
        assert (pod_status.reason, pod_status.message) == (
            "Evicted", "Pod was rejected: The node had condition: [DiskPressure]. ")
        assert disruption(pod_status) is None  # refused, not evicted
        filler.unlink()
        await eventually(lambda: not manager.conditions(), within=30, what="pressure cleared")


async def test_an_empty_dir_over_its_size_limit_is_evicted(make_agent: AgentFactory) -> None:
    agent = await make_agent(eviction=FAST)
    agent.write("calm.yaml", bystander("calm"))
    calm = await _running_container(agent, "calm")
    agent.write("scratch.yaml", empty_dir_pod(
        "scratch", "dd if=/dev/zero of=/data/big bs=1M count=3; sleep 1000000",
        size_limit="1Mi"))
    pod_status = await agent.wait_status("scratch", evicted, within=60,
                                         what="scratch evicted for its emptyDir")
    assert pod_status.message == 'Usage of EmptyDir volume "data" exceeds the limit "1Mi". '
    volume = _empty_dir_path(agent, "scratch")
    await eventually(lambda: not volume.exists(), within=30, what="its emptyDir torn down")
    await _undisturbed(agent, "calm", calm)


def _empty_dir_path(agent: Harness, name: str) -> Path:
    found = agent.find(name)
    assert found is not None
    volumes_dir = agent.agent_or_fail().volumes.volumes_dir(found[0].uid)
    return volumes_dir / "kubernetes.io~empty-dir" / "data"


async def test_a_container_over_its_ephemeral_storage_limit_is_evicted(
        make_agent: AgentFactory) -> None:
    agent = await make_agent(eviction=FAST)
    agent.write("writer.yaml", pod_manifest(
        "writer", command="dd if=/dev/zero of=/big bs=1M count=3; sleep 1000000",
        container_extra="""\
        resources:
          limits: {ephemeral-storage: 1Mi}
        """))
    # containerd measures writable layers every 10 s: allow a few rounds.
    pod_status = await agent.wait_status("writer", evicted, within=60,
                                         what="writer evicted for its ephemeral storage")
    assert pod_status.message in (
        # The pod's total limit is its one container's: the kubelet checks the pod first.
        "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ",
        'Container main exceeded its local ephemeral storage limit "1Mi". ')


async def test_static_pods_are_critical_by_default(make_agent: AgentFactory) -> None:
    """The kubelet's rule: a static pod over its limit is not evicted (it would never be
    admitted again); the eviction manager says why in its log, the pod keeps running."""
    agent = await make_agent(eviction=replace(FAST, static_pods_critical=True))
    agent.write("scratch.yaml", empty_dir_pod(
        "scratch", "dd if=/dev/zero of=/data/big bs=1M count=2; touch /data/done; "
                   "sleep 1000000", size_limit="1Mi"))
    running = await _running_container(agent, "scratch")
    done = _empty_dir_path(agent, "scratch") / "done"
    await eventually(done.exists, within=30, what="2 MiB written")
    manager = agent.agent_or_fail().eviction
    passes = manager.passes
    await eventually(lambda: manager.passes >= passes + 3, within=30, what="three passes")
    await _undisturbed(agent, "scratch", running)
    assert manager.evicted == 0
