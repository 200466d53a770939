"""Garbage collection of dead containers and sandboxes on real containerd: the kubelet's
policy (`model.core.gc`) as the agent's collector and its pod workers execute it. Counts are
read back with CRI ListContainers / ListPodSandbox."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from conftest import AgentFactory, Instance
from nodelet import settings
from nodelet.adapters.cri import client as cri_client
from nodelet.model.core import runtime as rt
from nodelet.model.core import status as st
from nodelet.services.nodehealth import containergc
from support.harness import Harness, all_ready, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

GCAgentFactory = Callable[..., Awaitable[Harness]]
# Long enough that only the test's own collect() calls run in tests that make them.
NO_PERIODIC = 3600.0


@pytest_asyncio.fixture(loop_scope="session")
async def gc_agent(make_agent: AgentFactory) -> GCAgentFactory:
    """Agents on the shared containerd with the given GCSettings fields."""

    async def factory(**gc_fields: Any) -> Harness:
        return await make_agent(gc=replace(settings.GCSettings(), **gc_fields))

    return factory


def uid_of(agent: Harness, name: str) -> str:
    found = agent.find(name)
    assert found is not None, f"pod {name} not found"
    return found[0].uid


async def containers_of(client: cri_client.RuntimeClient, uid: str) -> list[rt.ContainerInfo]:
    return await client.list_containers(labels={rt.LABEL_POD_UID: uid})


async def sandboxes_of(client: cri_client.RuntimeClient, uid: str) -> list[rt.SandboxInfo]:
    return await client.list_pod_sandboxes(labels={rt.LABEL_POD_UID: uid})


def restarts(pod_status: st.PodStatus) -> int:
    return pod_status.container_statuses[0].restart_count if pod_status.container_statuses else 0


async def test_a_crash_looping_container_keeps_one_dead_instance(
        gc_agent: GCAgentFactory, runtime: Instance) -> None:
    agent = await gc_agent(container_gc_period=0.5)
    agent.write("crash.yaml", pod_manifest("crash", command="echo boom; exit 1"))
    await agent.wait_status("crash", lambda s: s.container_statuses != (), what="crash synced")
    uid = uid_of(agent, "crash")
    most: list[int] = [0]

    async def count_then_restarts() -> int:
        most[0] = max(most[0], len(await containers_of(runtime.client, uid)))
        pod_status = agent.status_of("crash")
        return restarts(pod_status) if pod_status is not None else 0

    await eventually(count_then_restarts, until=lambda n: n >= 4, within=60,
                     what="four restarts", every=0.05)
    # The newest instance (running, or exited and backing off) plus one dead one.
    assert most[0] <= 2, f"up to {most[0]} containers of the crash-looping pod at once"
    left = await eventually(lambda: containers_of(runtime.client, uid),
                            until=lambda cs: len(cs) <= 2, within=10, what="at most two")
    assert len({c.id for c in left}) == len(left)
    # lastState survives: the newest dead instance is the one kept.
    pod_status = await agent.wait_status(
        "crash", lambda s: isinstance(s.container_statuses[0].last_state,
                                      st.ContainerStateTerminated),
        what="lastState terminated")
    assert restarts(pod_status) >= 4


async def test_dead_sandboxes_are_collected_after_recreation(
        gc_agent: GCAgentFactory, runtime: Instance) -> None:
    agent = await gc_agent(container_gc_period=0.5)
    agent.write("sbx.yaml", pod_manifest("sbx"))
    await agent.wait_status("sbx", all_ready, what="sbx Ready")
    uid = uid_of(agent, "sbx")
    seen: list[rt.SandboxID] = []
    for attempt in (1, 2, 3):
        ready = [s for s in await sandboxes_of(runtime.client, uid)
                 if s.state is rt.SandboxState.READY]
        assert len(ready) == 1, ready
        seen.append(ready[0].id)
        await runtime.client.stop_pod_sandbox(ready[0].id)  # the pod's sandbox "died"

        async def recreated(attempt: int = attempt) -> list[rt.SandboxInfo]:
            return [s for s in await sandboxes_of(runtime.client, uid)
                    if s.state is rt.SandboxState.READY and s.attempt == attempt]

        await eventually(recreated, within=30, what=f"sandbox attempt {attempt}")
        await agent.wait_status("sbx", all_ready, what=f"sbx Ready again ({attempt})")
    # Left: the newest (READY) sandbox and the one holding the newest dead instance of
    # `main` (its lastState); the two before have no containers left and are removed.
    boxes = await eventually(lambda: sandboxes_of(runtime.client, uid),
                             until=lambda bs: len(bs) == 2, within=20,
                             what="two sandboxes left")
    assert {b.attempt for b in boxes} == {2, 3}
    assert not {b.id for b in boxes} & set(seen[:2])
    dead = [c for c in await containers_of(runtime.client, uid)
            if c.state is not rt.ContainerState.RUNNING]
    assert len(dead) == 1 and dead[0].sandbox_id == seen[2], dead


async def test_terminated_pods_are_emptied_only_when_asked(
        gc_agent: GCAgentFactory, runtime: Instance) -> None:
    agent = await gc_agent(container_gc_period=NO_PERIODIC)
    agent.write("done.yaml", pod_manifest("done", command="exit 0", restart_policy="Never"))
    await agent.wait_status("done", lambda s: s.phase == "Succeeded", what="done Succeeded")
    uid = uid_of(agent, "done")
    await eventually(lambda: sandboxes_of(runtime.client, uid),
                     until=lambda bs: all(b.state is rt.SandboxState.NOTREADY for b in bs),
                     within=20, what="the terminal pod's sandbox stopped")
    gc = agent.agent_or_fail().container_gc

    kept = await gc.collect()
    assert (kept.containers_removed, kept.sandboxes_removed) == (0, 0), kept
    assert len(await containers_of(runtime.client, uid)) == 1
    assert len(await sandboxes_of(runtime.client, uid)) == 1

    emptied = await gc.collect(evict_terminated=True)
    assert (emptied.containers_removed, emptied.sandboxes_removed, emptied.errors) == (
        1, 1, ()), emptied
    assert await containers_of(runtime.client, uid) == []
    assert await sandboxes_of(runtime.client, uid) == []
    # The pod stays Succeeded and nothing is created again for it.
    pod_status = await agent.wait_status("done", lambda s: s.phase == "Succeeded",
                                         what="still Succeeded")
    assert pod_status.phase == "Succeeded"
    assert await sandboxes_of(runtime.client, uid) == []


async def test_the_node_wide_limit_holds(gc_agent: GCAgentFactory, runtime: Instance) -> None:
    agent = await gc_agent(container_gc_period=NO_PERIODIC, max_containers=2)
    names = ("one", "two", "three")
    for name in names:
        agent.write(f"{name}.yaml", pod_manifest(name, command="exit 0",
                                                 restart_policy="Never"))
    for name in names:
        await agent.wait_status(name, lambda s: s.phase == "Succeeded",
                                what=f"{name} Succeeded")
    uids = [uid_of(agent, name) for name in names]
    dead = [c for uid in uids for c in await containers_of(runtime.client, uid)]
    assert len(dead) == 3
    oldest = min(dead, key=lambda c: c.created_at)

    result = await agent.agent_or_fail().container_gc.collect()
    assert (result.containers_removed, result.errors) == (1, ()), result
    left = [c for uid in uids for c in await containers_of(runtime.client, uid)]
    assert sorted(c.id for c in left) == sorted(c.id for c in dead if c.id != oldest.id)
    # Each pod keeps its newest sandbox, even the one now without containers.
    assert all([len(await sandboxes_of(runtime.client, uid)) == 1 for uid in uids])


# -- the collector alone, on leftovers of a pod no source wants -------------------------------


async def _exited_container(client: cri_client.RuntimeClient, sandbox_id: rt.SandboxID,
                            config: rt.SandboxConfig, name: str, attempt: int
                            ) -> rt.ContainerID:
    container = rt.ContainerConfig(
        name=name, attempt=attempt, image=settings.BUSYBOX_IMAGE,
        log_path=f"{name}/{attempt}.log", command=("sh", "-c", f"echo {name} {attempt}"),
        labels={rt.LABEL_POD_UID: config.uid, rt.LABEL_POD_NAME: config.name,
                rt.LABEL_POD_NAMESPACE: config.namespace, rt.LABEL_CONTAINER_NAME: name})
    container_id = await client.create_container(sandbox_id, container, config)
    await client.start_container(container_id)
    await eventually(lambda: client.container_status(container_id),
                     until=lambda c: c.state is rt.ContainerState.EXITED, within=20,
                     what=f"{name} {attempt} exited")
    return container_id


async def test_leftovers_of_a_gone_pod_are_collected(runtime: Instance, tmp_path: Path) -> None:
    client = runtime.client
    logs_root = tmp_path / "logs"
    uid = "uid-gc-leftover"
    log_dir = logs_root / f"default_leftover_{uid}"
    stray = logs_root / "default_stray_uid-gc-stray"  # a gone pod with nothing in the runtime
    stray.mkdir(parents=True)
    config = rt.SandboxConfig(
        name="leftover", namespace="default", uid=uid, attempt=0, hostname="leftover",
        log_directory=str(log_dir),
        labels={rt.LABEL_POD_UID: uid, rt.LABEL_POD_NAME: "leftover",
                rt.LABEL_POD_NAMESPACE: "default"})
    log_dir.mkdir(parents=True)
    sandbox_id = await client.run_pod_sandbox(config)
    gone = {"now": False}
    gc = containergc.ContainerGC(
        client=client, settings=settings.GCSettings(), logs_root=logs_root,
        removable=lambda u: gone["now"] and u in (uid, "uid-gc-stray"),
        terminated=lambda u: False, clock=time.time)
    try:
        for name, attempt in (("main", 0), ("main", 1), ("side", 0)):
            await _exited_container(client, sandbox_id, config, name, attempt)
        assert (log_dir / "main" / "0.log").exists()

        # Still wanted: only the older dead instance of `main` goes, with its log file.
        first = await gc.collect()
        assert (first.containers_removed, first.errors) == (1, ()), first
        assert sorted((c.name, c.attempt) for c in await containers_of(client, uid)) == [
            ("main", 1), ("side", 0)]
        assert not (log_dir / "main" / "0.log").exists()
        assert (log_dir / "main" / "1.log").exists() and stray.exists()

        # Gone: every dead container goes; the READY sandbox is active and stays, and so does
        # the log directory of a pod with something left in the runtime.
        gone["now"] = True
        second = await gc.collect()
        assert (second.containers_removed, second.sandboxes_removed,
                second.log_directories_removed) == (2, 0, 1), second
        assert await containers_of(client, uid) == []
        assert [s.id for s in await sandboxes_of(client, uid)] == [sandbox_id]
        assert log_dir.exists() and not stray.exists()

        # Once the sandbox is no longer READY it is inactive: removed, then the logs.
        await client.stop_pod_sandbox(sandbox_id)
        third = await gc.collect()
        assert (third.sandboxes_removed, third.log_directories_removed, third.errors) == (
            1, 1, ()), third
        assert await sandboxes_of(client, uid) == []
        assert not log_dir.exists()
    finally:
        with contextlib.suppress(cri_client.CriError):
            await client.stop_pod_sandbox(sandbox_id)
            await client.remove_pod_sandbox(sandbox_id)
