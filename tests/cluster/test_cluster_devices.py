"""Device plugin resources on a real control plane: the sample device plugin
(tests/support/deviceplugins.py) registers with a joined nodelet, the Node's capacity and
allocatable show `example.com/resource: 2`, the real scheduler places pods asking for it, a
third pod beyond the two devices stays Pending (the scheduler sees the Node's allocatable),
and when the plugin stops allocatable drops to 0 while capacity stays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.controlplane import AdminClient, node_path, pod, pod_path
from support.deviceplugins import RESOURCE, sample_plugin
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "devices-node"


def counts(node: dict[str, Any] | None) -> tuple[str | None, str | None]:
    status = (node or {}).get("status", {})
    return (status.get("capacity", {}).get(RESOURCE),
            status.get("allocatable", {}).get(RESOURCE))


def asking(name: str) -> dict[str, Any]:
    manifest = pod(name, node=NODE)
    manifest["spec"]["containers"][0]["resources"] = {"limits": {RESOURCE: "1"}}
    return manifest


def unschedulable(obj: dict[str, Any] | None) -> bool:
    conditions = (obj or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
               and RESOURCE in c.get("message", "") for c in conditions)


def phase(obj: dict[str, Any] | None) -> str:
    return str((obj or {}).get("status", {}).get("phase", ""))


async def test_node_reports_device_resources_and_the_scheduler_uses_them(
        join: Any, admin: AdminClient, namespace: str, tmp_path: Path) -> None:
    async with join(NODE) as node:
        directory = node.settings.device_plugins_dir
        async with sample_plugin(directory, log=tmp_path / "sample-device-plugin.log") as p:
            await eventually(lambda: admin.get(node_path(NODE)), within=60,
                             until=lambda n: counts(n) == ("2", "2"),
                             what="the Node's capacity and allocatable of the resource",
                             seen=lambda n: f"{counts(n)}; plugin: {p.tail()}")
            for name in ("dev-1", "dev-2"):
                await admin.create(pod_path(namespace), asking(name))
            for name in ("dev-1", "dev-2"):
                await eventually(lambda n=name: admin.get(pod_path(namespace, n)), within=90,
                                 until=lambda o: phase(o) == "Running",
                                 what=f"{name} running with a device")
            await admin.create(pod_path(namespace), asking("dev-3"))
            third = await eventually(lambda: admin.get(pod_path(namespace, "dev-3")),
                                     within=60, until=lambda o: unschedulable(o),
                                     what="dev-3 unschedulable: no device left")
            assert not (third or {})["spec"].get("nodeName"), third
            p.stop()
            await eventually(lambda: admin.get(node_path(NODE)), within=60,
                             until=lambda n: counts(n) == ("2", "0"),
                             what="allocatable 0 and capacity kept once the plugin stopped")
            for name in ("dev-1", "dev-2", "dev-3"):
                await admin.delete(pod_path(namespace, name))


DONGLE = "example.com/dongle"


def dongles(node: dict[str, Any] | None) -> tuple[str | None, str | None]:
    status = (node or {}).get("status", {})
    return status.get("capacity", {}).get(DONGLE), status.get("allocatable", {}).get(DONGLE)


async def test_a_node_new_to_its_device_manager_zeroes_the_extended_resources_it_had(
        join: Any, admin: AdminClient, tmp_path: Path) -> None:
    """The kubelet's reconcileExtendedResource: a Node adopted by an agent without a device
    checkpoint (a new data dir: the node was made anew) sets every extended resource to 0 in
    its first status, once; with the checkpoint, what the Node had stays."""
    advertised = {"status": {"capacity": {DONGLE: "4"}, "allocatable": {DONGLE: "4"}}}
    async with join("devices-reset") as node:
        # A plugin registered once: the device checkpoint is written and kept.
        async with sample_plugin(node.settings.device_plugins_dir,
                                 log=tmp_path / "sample-device-plugin.log"):
            await eventually(lambda: admin.get(node_path("devices-reset")), within=60,
                             until=lambda n: counts(n) == ("2", "2"),
                             what="the plugin's resource on the Node")
        checkpoint = node.agent_or_fail().device_manager.checkpoint_file  # type: ignore[union-attr]
        assert checkpoint.exists()
        await admin.patch(node_path("devices-reset") + "/status", advertised)
        await node.stop()
        await node.start()
        found = await admin.get(node_path("devices-reset"))
        assert dongles(found) == ("4", "4"), found
        # Without it, the node is new here: the dongles it advertised are not its own.
        await node.stop()
        checkpoint.unlink()
        await node.start()
        await eventually(lambda: admin.get(node_path("devices-reset")), within=30,
                         until=lambda n: dongles(n) == ("0", "0") and counts(n) == ("0", "0"),
                         what="every extended resource of the Node at 0",
                         seen=lambda n: f"{dongles(n)} {counts(n)}")
        # Once: what the admin advertises after stays, through the node's next statuses
        # (one is sent when the plugin comes back).
        await admin.patch(node_path("devices-reset") + "/status", advertised)
        async with sample_plugin(node.settings.device_plugins_dir,
                                 log=tmp_path / "sample-device-plugin-2.log"):
            found = await eventually(lambda: admin.get(node_path("devices-reset")), within=60,
                                     until=lambda n: counts(n) == ("2", "2"),
                                     what="the plugin's resource on the Node again")
            assert dongles(found) == ("4", "4"), found
