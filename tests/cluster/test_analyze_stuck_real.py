"""`nodelet analyze` on pods stuck for real: a nodelet joined to the test API server on its own
containerd, whose pod range has one address, runs one pod; the next finds no IP, one mounts a
ConfigMap that does not exist, one asks for a RuntimeClass handler containerd does not have.
The real `kubectl` dumps the cluster (pods and events, as the admin), and analyze tells each
stuck pod with its cause.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from harness import Harness
from kubeapi import KubeApiServer, pod_object
from nodelet.adapters import cni
from nodelet.services import cluster
from polling import eventually

pytestmark = pytest.mark.runtime
NODE = "stuck-node"


def _one_address_range() -> str:
    """A /30 inside a fresh instance-style /24: host-local gives one address (the bridge's
    gateway takes the other)."""
    scratch = Path(tempfile.mkdtemp(prefix="nl-cidr-", dir="/tmp"))
    base = ipaddress.ip_network(cni.default_pod_cidr(scratch))
    scratch.rmdir()
    return str(next(base.subnets(new_prefix=30)))


def _condition(server: KubeApiServer, name: str) -> dict[str, Any]:
    pod = server.get("pods", "default", name) or {}
    return next((c for c in pod.get("status", {}).get("conditions", [])
                 if c["type"] == "PodReadyToStartContainers"), {})


async def _run(*args: str) -> bytes:
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out


async def test_pods_stuck_for_real_are_told_with_their_cause(instances: Any,
                                                            tmp_path: Path) -> None:
    instance = await instances(pod_cidrs=(_one_address_range(),))
    server = KubeApiServer(tls=True, node=NODE, bookmark_interval=1.0)
    await server.start()
    harness = Harness(endpoint=instance.containerd.endpoint, node_name=NODE)
    harness.settings = dataclasses.replace(harness.settings, cluster=cluster.ClusterSettings(
        kubeconfig=server.write_kubeconfig(tmp_path / "node.kubeconfig"),
        node_status_period=1.0, lease_renew_period=1.0, status_resync_period=2.0))
    try:
        await harness.start()
        server.create("pods", pod_object("first", node=NODE, grace=1))
        await eventually(lambda: _condition(server, "first").get("status") == "True",
                         within=60, what="first pod's sandbox ready (the only address)")
        server.create("pods", pod_object("no-ip", node=NODE, grace=1))
        config = pod_object("needs-config", node=NODE, grace=1)
        config["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "missing"}}]
        server.create("pods", config)
        vm = pod_object("vm", node=NODE, grace=1)
        vm["spec"]["runtimeClassName"] = "gvisor"
        server.create("pods", vm)
        causes = {"no-ip": "no IP addresses available", "needs-config": 'configmap "missing"',
                  "vm": "gvisor"}
        await eventually(
            lambda: {n: _condition(server, n).get("message", "") for n in causes},
            until=lambda seen: all(causes[n] in seen[n] for n in causes),
            within=60, what="three pods stuck with their cause")

        admin = server.write_kubeconfig(tmp_path / "admin.kubeconfig", admin=True)
        dump = tmp_path / "dump.json"
        dump.write_bytes(await _run("kubectl", "--kubeconfig", str(admin), "get",
                                    "pods,events", "-A", "-o", "json"))
        doc = json.loads(await _run(sys.executable, "-m", "nodelet.cli", "analyze", str(dump),
                                    "-o", "json"))
        assert doc["summary"]["pods"] == 4 and doc["overall"][
            "scheduledToReadyToStart"]["count"] == 1
        stuck = {s["name"]: s for s in doc["stuck"]}
        assert set(stuck) == set(causes)
        for name, cause in causes.items():
            assert cause in stuck[name]["condition"]["message"]
        assert any(e["reason"] == "FailedCreatePodSandBox" and "no IP addresses" in
                   e["lastMessage"] for e in stuck["no-ip"]["events"])
        assert any(e["reason"] == "FailedMount" for e in stuck["needs-config"]["events"])
        assert any("gvisor" in e["lastMessage"] for e in stuck["vm"]["events"])
        table = (await _run(sys.executable, "-m", "nodelet.cli", "analyze", str(dump))).decode()
        glance = " ".join(table.split("\n\n")[0].split())
        assert "Stuck: 3 pods before their sandbox" in glance
    finally:
        for pod in server.list_objects("pods"):
            server.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], grace=0)
        await harness.stop()
        harness.cleanup()
        await server.stop()
