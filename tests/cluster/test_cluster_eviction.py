"""Node pressure seen from the cluster, on real containerd: a pod from the API that fills the
node's small data-dir filesystem is evicted — Failed, reason Evicted, a DisruptionTarget
condition and an Evicted event in the API — and the Node reports
DiskPressure while it lasts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from disks import tiny_tmpfs
from harness import Harness
from kubeapi import KubeApiServer, pod_object
from nodelet import settings
from nodelet.services import cluster
from polling import eventually

pytestmark = pytest.mark.runtime

NODE = "pressed-node"


def node_condition(server: KubeApiServer, type_: str) -> dict[str, Any]:
    node = server.get("nodes", "", NODE) or {}
    found = [c for c in node.get("status", {}).get("conditions", []) if c["type"] == type_]
    return found[0] if found else {}


async def test_an_api_pod_filling_the_disk_is_evicted_and_the_node_reports_pressure(
        runtime: Instance, tmp_path: Path) -> None:
    server = KubeApiServer(bookmark_interval=1.0, node=NODE)
    await server.start()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    harness = Harness(endpoint=runtime.containerd.endpoint, node_name=NODE,
                      eviction=settings.EvictionSettings(monitoring_period=0.3,
                                                         pressure_transition_period=1.5))
    harness.settings = dataclasses.replace(harness.settings, cluster=cluster.ClusterSettings(
        kubeconfig=kubeconfig, node_status_period=0.3, lease_renew_period=1.0,
        status_resync_period=2.0))
    try:
        with tiny_tmpfs(harness.settings.data_dir, size="48m"):
            await harness.start()
            try:
                assert node_condition(server, "DiskPressure")["status"] == "False"
                server.create("pods", pod_object(
                    "hog", node=NODE, volumes=[{"name": "data", "emptyDir": {}}],
                    containers=[{"name": "main", "image": "localhost/nodelet/busybox:latest",
                                 "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", "dd if=/dev/zero of=/data/f bs=1M "
                                             "count=46; sleep 1000000"],
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]))

                await eventually(lambda: node_condition(server, "DiskPressure").get("status"),
                                 until=lambda s: s == "True", within=60,
                                 what="the Node's DiskPressure")
                pressed = node_condition(server, "DiskPressure")
                assert (pressed["reason"], pressed["message"]) == (
                    "KubeletHasDiskPressure", "kubelet has disk pressure")

                def evicted() -> dict[str, Any] | None:
                    pod = server.get("pods", "default", "hog") or {}
                    return pod if pod.get("status", {}).get("reason") == "Evicted" else None

                pod = await eventually(evicted, within=60, what="hog Evicted in the API")
                assert pod["status"]["phase"] == "Failed"
                assert pod["status"]["message"].startswith(
                    "The node was low on resource: ephemeral-storage. ")
                marks = [c for c in pod["status"]["conditions"]
                         if c["type"] == "DisruptionTarget"]
                assert [(c["status"], c["reason"]) for c in marks] == [
                    ("True", "TerminationByKubelet")]
                events = await eventually(
                    lambda: [e for e in server.list_objects("events")
                             if e.get("reason") == "Evicted"],
                    within=30, what="the Evicted event in the API")
                assert events[0]["involvedObject"]["name"] == "hog"
                assert events[0]["type"] == "Warning"

                await eventually(lambda: node_condition(server, "DiskPressure").get("status"),
                                 until=lambda s: s == "False", within=60,
                                 what="DiskPressure cleared on the Node")
            finally:
                server.delete("pods", "default", "hog", grace=0)
                await harness.stop()
    finally:
        harness.cleanup()
        await server.stop()
