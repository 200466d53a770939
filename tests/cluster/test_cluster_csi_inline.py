"""Inline (ephemeral) CSI volumes on a nodelet node, with the real control plane: the
driver (tests/support/fakecsinode.py: no driver of inline volumes that runs here, see there)
registers through the registrar; a pod's `csi:` volume is published for it alone (no
attach, no stage) with its attributes, the pod's facts and its nodePublishSecretRef's data,
mounted read-only when asked, and unpublished when the pod goes; a driver whose CSIDriver
does not list the Ephemeral mode is refused in the kubelet's words."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from support.controlplane import AdminClient, ControlPlane, pod, pod_path
from support.csiregistrar import Registrar
from support.fakecsinode import FakeCsiNode
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "csi-inline-node"
DRIVER = "inline.nodelet.test"
CSIDRIVERS = "/apis/storage.k8s.io/v1/csidrivers"


def _user(name: str, *, read_only: bool = False) -> dict[str, Any]:
    volume = {"name": "data", "csi": {"driver": DRIVER, "readOnly": read_only,
                                      "volumeAttributes": {"size": "1Mi"},
                                      "nodePublishSecretRef": {"name": "creds"}}}
    spec = pod(name, node=NODE, command="cat /data/context.json && echo && sleep 1000000",
               volumes=[volume])
    spec["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return spec


async def _events(admin: AdminClient, namespace: str, name: str) -> list[str]:
    items = await admin.items(f"/api/v1/namespaces/{namespace}/events",
                              fieldSelector=f"involvedObject.name={name}")
    return [f"{e['reason']}: {e['message']}" for e in items]


async def test_an_inline_csi_volume_is_published_for_its_pod_alone(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    await admin.create(f"/api/v1/namespaces/{namespace}/secrets", {
        "metadata": {"name": "creds"}, "data": {"token": base64.b64encode(b"s3").decode()}})
    async with join(NODE) as harness:
        data = harness.settings.data_dir
        socket = data / "plugins" / DRIVER / "csi.sock"
        await admin.create(CSIDRIVERS, {"metadata": {"name": DRIVER}, "spec": {
            "attachRequired": False, "podInfoOnMount": True,
            "volumeLifecycleModes": ["Persistent"]}})
        try:
            async with FakeCsiNode(socket, node_id=NODE) as driver, \
                    Registrar(data / "plugins_registry", driver=DRIVER,
                              endpoint=str(socket)) as registrar:
                await eventually(lambda: registrar.registered.is_set(), within=30,
                                 what="the registration taken")
                # Persistent only: the kubelet's refusal.
                await admin.create(pod_path(namespace), _user("refused"))
                words = ('MountVolume.SetUp failed for volume "data" : kubernetes.io/csi: '
                         'mounter.SetupAt failed to check volume lifecycle mode: volume mode '
                         f'"Ephemeral" not supported by driver {DRIVER} (only supports '
                         '["Persistent"])')
                await eventually(lambda: _events(admin, namespace, "refused"), within=60,
                                 until=lambda seen: f"FailedMount: {words}" in seen, seen=repr,
                                 what="the lifecycle mode refusal")
                await admin.delete(pod_path(namespace, "refused"))
                await admin.delete(f"{CSIDRIVERS}/{DRIVER}")
                await eventually(lambda: admin.get(f"{CSIDRIVERS}/{DRIVER}"), within=30,
                                 until=lambda d: d is None, what="the CSIDriver gone")
                await admin.create(CSIDRIVERS, {"metadata": {"name": DRIVER}, "spec": {
                    "attachRequired": False, "podInfoOnMount": True,
                    "volumeLifecycleModes": ["Persistent", "Ephemeral"]}})

                await admin.create(pod_path(namespace), _user("inline", read_only=True))
                found = await eventually(
                    lambda: admin.get(pod_path(namespace, "inline")), within=90,
                    until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
                    seen=lambda p: repr((p or {}).get("status", {}).get("conditions")),
                    what="the inline pod Running")
                uid = found["metadata"]["uid"]
                (request,) = [r for r in driver.requests("NodePublishVolume")
                              if uid in r["target_path"]]
                assert request["target_path"] == str(
                    data / "pods" / uid / "volumes" / "kubernetes.io~csi" / "data" / "mount")
                assert request["volume_id"].startswith("csi-")
                assert request["readonly"] is True
                assert "staging_target_path" not in request  # no stage, no attach
                assert request["secrets"] == {"token": "s3"}
                context = request["volume_context"]
                assert (context["size"], context["csi.storage.k8s.io/ephemeral"],
                        context["csi.storage.k8s.io/pod.name"]) == ("1Mi", "true", "inline")
                # The container reads what the driver put in the volume.
                async def logs() -> str:
                    code, out, err = await control_plane.kubectl("-n", namespace, "logs",
                                                                 "inline")
                    return out.decode() if code == 0 else f"ERR {err.decode()}"

                text = await eventually(logs, within=30, until=lambda t: t and not
                                        t.startswith("ERR"), what="the pod's log")
                assert json.loads(text)["size"] == "1Mi"

                await admin.delete(pod_path(namespace, "inline"))
                await eventually(lambda: admin.get(pod_path(namespace, "inline")), within=60,
                                 until=lambda p: p is None, what="the inline pod gone")
                (gone,) = driver.requests("NodeUnpublishVolume")
                assert gone["target_path"] == request["target_path"]
                assert not (data / "pods" / uid).exists()
        finally:
            await admin.delete(f"{CSIDRIVERS}/{DRIVER}")
