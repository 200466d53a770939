"""End to end on real containerd: nodelet joins the test API server, runs a bound pod, reports
its five conditions in the API and removes it when it is deleted.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import pytest

from conftest import Instance
from harness import Harness
from kubeapi import KubeApiServer, pod_object, poll
from nodelet.services import cluster

pytestmark = pytest.mark.runtime

ORDER = ("PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady", "Ready")


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_bound_pod_runs_reports_five_conditions_and_is_deleted(
        runtime: Instance, tmp_path: Path) -> None:
    server = KubeApiServer(bookmark_interval=1.0)
    await server.start()
    harness = Harness(endpoint=runtime.containerd.endpoint, node_name="e2e-node")
    config = cluster.ClusterSettings(
        kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"), node_status_period=1.0,
        lease_renew_period=1.0, status_resync_period=2.0)
    harness.settings = dataclasses.replace(harness.settings, cluster=config)  # type: ignore[call-arg]
    try:
        await harness.start()
        node = server.get("nodes", "", "e2e-node")
        assert node is not None
        ready = {c["type"]: c for c in node["status"]["conditions"]}["Ready"]
        assert ready["status"] == "True", ready
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")

        created = server.create("pods", pod_object("web", node="e2e-node", grace=1))
        uid = created["metadata"]["uid"]

        def running() -> dict | None:
            pod = server.get("pods", "default", "web")
            conds = {c["type"]: c for c in (pod or {}).get("status", {}).get("conditions", [])}
            if all(conds.get(t, {}).get("status") == "True" for t in ORDER):
                return conds
            return None

        conds = await poll(running, within=60, what="five conditions True in the API")
        times = [_time(conds[t]["lastTransitionTime"]) for t in ORDER]
        assert times == sorted(times), conds
        status = server.get("pods", "default", "web")["status"]
        assert status["phase"] == "Running" and status["podIP"]
        assert server.get("leases", "kube-node-lease", "e2e-node") is not None

        server.delete("pods", "default", "web")  # graceful: deletionTimestamp first
        await poll(lambda: server.get("pods", "default", "web") is None, within=60,
                   what="pod deleted from the API by nodelet")
        agent = harness.agent_or_fail()
        await poll(lambda: not [p for p, _ in agent.pods() if p.uid == uid], within=30,
                   what="pod gone from the agent")
        deletes = [r for r in server.requests if r.verb == "delete" and r.status == 200]
        assert deletes, "nodelet issued no final delete"
    finally:
        await harness.stop()
        harness.cleanup()
        await server.stop()
