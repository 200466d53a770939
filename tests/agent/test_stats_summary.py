"""The Summary API on real containerd, read where the node e2e suite reads it (the read-only
port's /stats/summary): what the kubelet adds to the runtime's figures — the `pods` system
container, only the running instance of a restarted container, the runtime's filesystems,
each container's rootfs and logs on their filesystems, the pod's emptyDir volume, and the
pod's ephemeral storage."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from conftest import AgentFactory
from support.harness import Harness, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

# The first run exits (a restart), the second prints again and stays.
COMMAND = ("[ -e /v/ran ] || { touch /v/ran; echo first; exit 1; }; "
           "echo again; sleep 1000000")
VOLUME = """\
volumes:
  - name: v
    emptyDir: {}
"""
MOUNT = """\
volumeMounts:
  - {name: v, mountPath: /v}
"""


async def summary(agent: Harness) -> dict[str, Any]:
    port = agent.agent_or_fail().server_port
    async with aiohttp.ClientSession() as session, \
            session.get(f"http://127.0.0.1:{port}/stats/summary") as response:
        assert response.status == 200, await response.text()
        body: dict[str, Any] = await response.json()
        return body


def restarted_and_running(agent: Harness) -> bool:
    found = agent.status_of("restarted")
    if found is None or not found.container_statuses:
        return False
    main = found.container_statuses[0]
    return main.restart_count >= 1 and main.ready


async def test_summary_of_a_restarted_container(make_agent: AgentFactory) -> None:
    agent = await make_agent()
    agent.write("restarted.yaml", pod_manifest("restarted", command=COMMAND,
                                               extra_spec=VOLUME, container_extra=MOUNT))
    await eventually(lambda: restarted_and_running(agent), within=60,
                     what="restarted: restarted once and running")
    name = f"restarted-{agent.settings.node_name}"

    def pod_of(body: dict[str, Any]) -> dict[str, Any] | None:
        return next((p for p in body["pods"] if p["podRef"]["name"] == name), None)

    body = await eventually(lambda: summary(agent),
                            until=lambda b: (pod := pod_of(b)) is not None and pod["containers"],
                            within=20, what=f"{name} in the summary")
    pod = pod_of(body)
    assert pod is not None
    # The exited first instance is not listed beside the running one.
    [main] = pod["containers"]
    assert main["name"] == "main" and main["cpu"]["usageCoreNanoSeconds"] > 0
    # The kubepods cgroup under the agent's cgroup root, as the kubelet's `pods`.
    [pods] = body["node"]["systemContainers"]
    assert pods["name"] == "pods" and pods["cpu"]["usageCoreNanoSeconds"] > 0
    assert pods["memory"]["workingSetBytes"] > 0 and pods["memory"]["availableBytes"] > 0
    runtime = body["node"]["runtime"]
    for fs in (runtime["imageFs"], runtime["containerFs"], main["rootfs"], main["logs"],
               pod["ephemeral-storage"]):
        assert fs["capacityBytes"] >= fs["availableBytes"] > 0, fs
        assert fs["inodes"] >= fs["inodesFree"] > 0, fs
        assert fs["usedBytes"] >= 0 and fs["inodesUsed"] >= 0, fs
    # containerd sums its snapshots' usage every 10 s (its stats_collect_period).
    await eventually(lambda: summary(agent),
                     until=lambda b: b["node"]["runtime"]["imageFs"]["usedBytes"] > 0,
                     within=30, what="the image filesystem's usage", every=1.0)
    # Both runs' log files (0.log, 1.log) under the container's log directory.
    assert main["logs"]["usedBytes"] > 0 and main["logs"]["inodesUsed"] >= 2
    # The emptyDir (its marker file), on the data dir's filesystem, counted in the pod's
    # ephemeral storage as the kubelet counts a disk-backed emptyDir.
    [volume] = [v for v in pod["volume"] if v["name"] == "v"]
    assert volume["inodesUsed"] >= 1 and volume["capacityBytes"] >= volume["availableBytes"] > 0
    assert pod["ephemeral-storage"]["usedBytes"] >= main["logs"]["usedBytes"] + \
        main["rootfs"]["usedBytes"] + volume["usedBytes"]
