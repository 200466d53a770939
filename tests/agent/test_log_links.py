"""The kubelet's links to container logs (`/var/log/containers/<pod>_<ns>_<container>-<id>.log`)
on real containerd: made when a container starts, removed with the container, with the pod, and
by the container GC when their log is gone; never another agent's. Each agent of the tests has a
links directory of its own (`Harness`), not the host's /var/log/containers."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import AgentFactory, Instance
from nodelet import settings
from nodelet.model.core import runtime as rt
from nodelet.model.core import status as st
from support.harness import Harness, all_ready, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

NO_PERIODIC = 3600.0  # only the test's own collect() calls run


def links_dir(agent: Harness) -> Path:
    return agent.settings.logs.links_dir


def links(agent: Harness) -> dict[str, Path]:
    """The links of the agent's directory, by name, with their targets."""
    directory = links_dir(agent)
    if not directory.is_dir():
        return {}
    return {p.name: Path(os.readlink(p)) for p in directory.iterdir() if p.is_symlink()}


def container_id(pod_status: st.PodStatus) -> str:
    return pod_status.container_statuses[0].container_id.partition("://")[2]


async def test_a_started_container_gets_its_link_until_the_pod_goes(
        make_agent: AgentFactory) -> None:
    agent = await make_agent()
    agent.write("logger.yaml", pod_manifest("logger", command="echo hello-link; sleep 1000000"))
    running = await agent.wait_status("logger", all_ready, what="logger Ready")
    name = f"logger-{agent.settings.node_name}_default_main-{container_id(running)}.log"
    found = await eventually(lambda: links(agent), until=lambda ls: name in ls, within=10,
                             what=f"the link {name}")
    assert list(found) == [name]
    target = found[name]
    assert target.is_relative_to(agent.settings.data_dir / "logs") and target.name == "0.log"
    await eventually(lambda: (links_dir(agent) / name).read_text(),
                     until=lambda text: "hello-link" in text, within=10,
                     what="the container's log read through the link")

    agent.remove("logger.yaml")
    await eventually(lambda: agent.find("logger"), until=lambda f: f is None, within=30,
                     what="logger gone")
    assert links(agent) == {}


async def test_a_removed_container_takes_its_link_along(
        make_agent: AgentFactory, runtime: Instance) -> None:
    """A crash-looping container keeps one dead instance (the GC's default): the pod's
    worker removes the older ones with their logs, and their links."""
    agent = await make_agent(gc=replace(settings.GCSettings(),
                                        container_gc_period=NO_PERIODIC))
    agent.write("crash.yaml", pod_manifest("crash", command="echo boom; exit 1"))
    first = await agent.wait_status("crash", lambda s: bool(s.container_statuses
                                                            and container_id(s)),
                                    what="crash started")
    uid = agent.find("crash")[0].uid  # type: ignore[index]
    first_id = container_id(first)
    await agent.wait_status("crash", lambda s: s.container_statuses[0].restart_count >= 3,
                            within=60, what="three restarts")

    async def alive_and_linked() -> tuple[set[str], set[str]]:
        ids = {c.id for c in await runtime.client.list_containers(
            labels={rt.LABEL_POD_UID: uid})}
        linked = {n.rsplit("-", 1)[1].removesuffix(".log") for n in links(agent)}
        return ids, linked

    ids, _ = await eventually(alive_and_linked, until=lambda x: x[0] == x[1], within=10,
                              what="one link per container the runtime has")
    assert first_id not in ids and 1 <= len(ids) <= 2, (first_id, ids)


async def test_the_gc_removes_this_agents_dangling_links_only(
        make_agent: AgentFactory) -> None:
    """A link whose log file is gone and whose container the runtime does not have (an
    agent that died before removing it): the container GC removes it, but not another
    agent's dangling link, nor a running container's."""
    agent = await make_agent(gc=replace(settings.GCSettings(),
                                        container_gc_period=NO_PERIODIC))
    agent.write("alive.yaml", pod_manifest("alive"))
    running = await agent.wait_status("alive", all_ready, what="alive Ready")
    alive = f"alive-{agent.settings.node_name}_default_main-{container_id(running)}.log"
    await eventually(lambda: links(agent), until=lambda ls: alive in ls, within=10,
                     what="alive's link")
    directory = links_dir(agent)
    logs_root = agent.settings.data_dir / "logs"
    ours = "gone_default_main-" + "1" * 64 + ".log"
    (directory / ours).symlink_to(logs_root / "default_gone_uid-gone" / "main" / "0.log")
    foreign = "other_default_main-" + "2" * 64 + ".log"
    (directory / foreign).symlink_to(agent.root / "elsewhere" / "main" / "0.log")

    result = await agent.agent_or_fail().container_gc.collect()
    assert (result.links_removed, result.errors) == (1, ()), result
    assert set(links(agent)) == {alive, foreign}
    (directory / foreign).unlink()
