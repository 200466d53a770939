"""Node pressure seen from the cluster, on real containerd and the real kube-apiserver: a pod
from the API that fills the node's small data-dir filesystem is evicted — Failed, reason
Evicted, a DisruptionTarget condition (which NodeRestriction lets a node write) and an Evicted
event in the API — and the Node reports DiskPressure while it lasts."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet import settings
from support.controlplane import AdminClient, node_path, pod, pod_path
from support.disks import tiny_tmpfs
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "pressed-node"


async def node_condition(admin: AdminClient, type_: str) -> dict[str, Any]:
    node = await admin.get(node_path(NODE)) or {}
    found = [c for c in node.get("status", {}).get("conditions", []) if c["type"] == type_]
    return found[0] if found else {}


async def test_an_api_pod_filling_the_disk_is_evicted_and_the_node_reports_pressure(
        join: Any, admin: AdminClient, namespace: str) -> None:
    eviction = settings.EvictionSettings(monitoring_period=0.3, pressure_transition_period=1.5)
    async with join(NODE, start=False, node_status_period=0.3,
                    harness_args={"eviction": eviction}) as harness:
        with tiny_tmpfs(harness.settings.data_dir, size="48m"):
            await harness.start()
            try:
                assert (await node_condition(admin, "DiskPressure"))["status"] == "False"
                hog = pod("hog", node=NODE, volumes=[{"name": "data", "emptyDir": {}}],
                          command="dd if=/dev/zero of=/data/f bs=1M count=46; sleep 1000000")
                hog["spec"]["containers"][0]["volumeMounts"] = [
                    {"name": "data", "mountPath": "/data"}]
                await admin.create(pod_path(namespace), hog)

                async def pressure() -> str:
                    return str((await node_condition(admin, "DiskPressure")).get("status"))

                await eventually(pressure, until=lambda s: s == "True", within=60,
                                 what="the Node's DiskPressure")
                pressed = await node_condition(admin, "DiskPressure")
                assert (pressed["reason"], pressed["message"]) == (
                    "KubeletHasDiskPressure", "kubelet has disk pressure")

                async def evicted() -> dict[str, Any] | None:
                    found = await admin.get(pod_path(namespace, "hog")) or {}
                    return found if found.get("status", {}).get("reason") == "Evicted" else None

                found = await eventually(evicted, within=60, what="hog Evicted in the API")
                assert found["status"]["phase"] == "Failed"
                assert found["status"]["message"].startswith(
                    "The node was low on resource: ephemeral-storage. ")
                marks = [c for c in found["status"]["conditions"]
                         if c["type"] == "DisruptionTarget"]
                assert [(c["status"], c["reason"]) for c in marks] == [
                    ("True", "TerminationByKubelet")]

                async def evicted_events() -> list[dict[str, Any]]:
                    return [e for e in await admin.items(f"/api/v1/namespaces/{namespace}/events")
                            if e.get("reason") == "Evicted"]

                events = await eventually(evicted_events, within=30,
                                          what="the Evicted event in the API")
                assert events[0]["involvedObject"]["name"] == "hog"
                assert events[0]["type"] == "Warning"
                await eventually(pressure, until=lambda s: s == "False", within=60,
                                 what="DiskPressure cleared on the Node")
            finally:
                # Stopped here, while its data dir is still mounted.
                await admin.delete(pod_path(namespace, "hog"))
                await eventually(lambda: admin.get(pod_path(namespace, "hog")), within=60,
                                 until=lambda p: p is None, what="hog deleted by nodelet")
                await harness.stop()
