"""`nodelet analyze` on pods stuck for real: a nodelet node joined to the real control plane on
its own containerd, whose pod range has one address, runs one pod; the next finds no IP, one
mounts a ConfigMap that does not exist, one asks for a RuntimeClass whose handler containerd
does not have. The real `kubectl` dumps the namespace (pods and events, as the admin), and
analyze tells each stuck pod with its cause.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nodelet.adapters import cni
from support.controlplane import AdminClient, ControlPlane, conditions, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime
NODE = "stuck-node"


def _one_address_range() -> str:
    """A /30 inside a fresh instance-style /24: host-local gives one address (the bridge's
    gateway takes the other)."""
    scratch = Path(tempfile.mkdtemp(prefix="nl-cidr-", dir="/tmp"))
    base = ipaddress.ip_network(cni.default_pod_cidr(scratch))
    scratch.rmdir()
    return str(next(base.subnets(new_prefix=30)))


async def _run(*args: str) -> bytes:
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out


async def test_pods_stuck_for_real_are_told_with_their_cause(
        instances: Any, join: Any, admin: AdminClient, control_plane: ControlPlane,
        namespace: str, tmp_path: Path) -> None:
    instance = await instances(pod_cidrs=(_one_address_range(),))
    runtime_class = f"gvisor-{namespace}"  # kube-apiserver admits a pod of an existing one
    await admin.create("/apis/node.k8s.io/v1/runtimeclasses", {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": runtime_class}, "handler": "gvisor"})

    async def condition(name: str) -> dict[str, Any]:
        found = await admin.get(pod_path(namespace, name))
        return conditions(found).get("PodReadyToStartContainers", {})

    try:
        async with join(NODE, on=instance, pod_cidrs=instance.settings.runtime.pod_cidrs):
            await admin.create(pod_path(namespace), pod("first", node=NODE))
            await eventually(lambda: condition("first"),
                             until=lambda c: c.get("status") == "True", within=60,
                             what="first pod's sandbox ready (the only address)")
            await admin.create(pod_path(namespace), pod("no-ip", node=NODE))
            await admin.create(pod_path(namespace), pod(
                "needs-config", node=NODE,
                volumes=[{"name": "cfg", "configMap": {"name": "missing"}}]))
            await admin.create(pod_path(namespace), pod("vm", node=NODE,
                                                        runtimeClassName=runtime_class))
            causes = {"no-ip": "no IP addresses available", "needs-config": 'configmap "missing"',
                      "vm": "gvisor"}

            async def messages() -> dict[str, str]:
                return {n: (await condition(n)).get("message", "") for n in causes}

            await eventually(messages, until=lambda seen: all(causes[n] in seen[n] for n in causes),
                             within=60, what="three pods stuck with their cause")

            dump = tmp_path / "dump.json"
            code, out, err = await control_plane.kubectl("get", "pods,events", "-n", namespace,
                                                         "-o", "json")
            assert code == 0, err.decode()
            dump.write_bytes(out)
            doc = json.loads(await _run(sys.executable, "-m", "nodelet.cli", "analyze",
                                        str(dump), "-o", "json"))
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
            table = (await _run(sys.executable, "-m", "nodelet.cli", "analyze",
                                str(dump))).decode()
            glance = " ".join(table.split("\n\n")[0].split())
            assert "Stuck: 3 pods before their sandbox" in glance
    finally:
        await admin.delete(f"/apis/node.k8s.io/v1/runtimeclasses/{runtime_class}")
