"""A CSI driver on a nodelet node, with the real control plane and the driver's upstream
peers (tests/support/csipeers.py: the e2e suite's CSI mock driver, kubernetes-csi's
external-provisioner and external-attacher) and a registrar of the project's own
(tests/support/csiregistrar.py, the kubelet's registration protocol).

The driver registers through nodelet's plugin registry (CSINode, the nodeid annotation); a
claim of its class is provisioned, attached by the attach/detach controller and the
external-attacher, staged once on the node and published for each pod that uses it — also
across a nodelet restart in the middle — then unpublished pod by pod and unstaged with the
last; `node.status.volumesInUse` names it meanwhile, and `/stats/summary` has its figures.
A volume of a driver that has not registered keeps its pod waiting with the kubelet's words
until it does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from nodelet import settings
from support.controlplane import AdminClient, ControlPlane, node_path, pod, pod_path
from support.criproxy import CriProxy
from support.csipeers import CsiPeers, csi_peers
from support.csiregistrar import Registrar
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "csi-node"
DRIVER = "csi-mock.nodelet.test"


def _claim(namespace: str, name: str, storage_class: str) -> tuple[str, dict[str, Any]]:
    return (f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                 "resources": {"requests": {"storage": "1Gi"}}}})


def _user(name: str, claim: str) -> dict[str, Any]:
    spec = pod(name, node=NODE, command="echo hi > /data/f && sleep 1000000",
               volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])
    spec["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return spec


async def _running(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    return await eventually(lambda: admin.get(pod_path(namespace, name)), within=120,
                            until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
                            seen=lambda p: repr((p or {}).get("status", {}).get("conditions")),
                            what=f"pod {name} Running")


async def _gone(admin: AdminClient, namespace: str, name: str) -> None:
    await admin.delete(pod_path(namespace, name))
    await eventually(lambda: admin.get(pod_path(namespace, name)), within=90,
                     until=lambda p: p is None, what=f"pod {name} gone")


async def _events(admin: AdminClient, namespace: str, name: str) -> list[str]:
    items = await admin.items(f"/api/v1/namespaces/{namespace}/events",
                              fieldSelector=f"involvedObject.name={name}")
    return [f"{e['reason']}: {e['message']}" for e in items]


@contextlib.asynccontextmanager
async def _registered(plane: ControlPlane, admin: AdminClient, data: Path, tmp_path: Path,
                      **peer_args: Any) -> AsyncIterator[CsiPeers]:
    """The mock driver and its peers without attach (`peer_args` for csi_peers), registered
    with the node whose data dir is `data` through the registrar."""
    async with csi_peers(plane, admin, driver=DRIVER, socket_dir=data / "plugins" / DRIVER,
                         attach_required=False, logs=tmp_path / "csi", **peer_args) as peers, \
            Registrar(data / "plugins_registry", driver=DRIVER,
                      endpoint=str(peers.mock.socket)) as registrar:
        await eventually(lambda: registrar.registered.is_set(), within=30,
                         what="the registration taken")
        yield peers


async def _metrics(plane: ControlPlane) -> str:
    code, out, err = await plane.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/metrics")
    assert code == 0, err.decode()
    return out.decode()


async def _summary_volume(plane: ControlPlane, pod_name: str) -> dict[str, Any] | None:
    code, out, err = await plane.kubectl("get", "--raw",
                                         f"/api/v1/nodes/{NODE}/proxy/stats/summary")
    assert code == 0, err.decode()
    for entry in json.loads(out)["pods"]:
        if entry["podRef"]["name"] == pod_name:
            return next((v for v in entry.get("volume", []) if v["name"] == "data"), None)
    return None


@pytest.mark.timeout(600)
async def test_a_csi_volume_is_staged_once_and_published_per_pod_across_a_restart(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str,
        tmp_path: Path) -> None:
    measured_often = {"node_server": settings.NodeServerSettings(volume_stats_period=1.0)}
    async with join(NODE, harness_args=measured_often) as harness:
        data = harness.settings.data_dir
        async with csi_peers(control_plane, admin, driver=DRIVER,
                             socket_dir=data / "plugins" / DRIVER, attach_required=True,
                             logs=tmp_path / "csi") as peers:
            path, claim = _claim(namespace, "vol", peers.storage_class)
            await admin.create(path, claim)
            # Its pod first: the driver has not registered, so the pod waits in its words.
            await admin.create(pod_path(namespace), _user("first", "vol"))
            words = f"driver name {DRIVER} not found in the list of registered CSI drivers"
            await eventually(lambda: _events(admin, namespace, "first"), within=120,
                             until=lambda seen: any(words in e for e in seen), seen=repr,
                             what="FailedMount: the driver is not registered")
            async with Registrar(data / "plugins_registry", driver=DRIVER,
                                 endpoint=str(peers.mock.socket)) as registrar:
                await eventually(lambda: registrar.registered.is_set(), within=30,
                                 what="the registration taken")
                csinode = await eventually(
                    lambda: admin.get(f"/apis/storage.k8s.io/v1/csinodes/{NODE}"), within=30,
                    until=lambda c: c and c["spec"].get("drivers"), what="the CSINode")
                assert [(d["name"], d["nodeID"]) for d in csinode["spec"]["drivers"]] == [
                    (DRIVER, peers.mock.node_id)]
                node = await admin.get(node_path(NODE)) or {}
                annotations = node["metadata"]["annotations"]
                assert json.loads(annotations["csi.volume.kubernetes.io/nodeid"]) == {
                    DRIVER: peers.mock.node_id}
                assert annotations[
                    "volumes.kubernetes.io/controller-managed-attach-detach"] == "true"

                first = await _running(admin, namespace, "first")
                pv = (await admin.get(f"{path}/vol") or {})["spec"]["volumeName"]
                target = data / "pods" / first["metadata"]["uid"] / "volumes" / \
                    "kubernetes.io~csi" / pv / "mount"
                assert (target / "f").read_text() == "hi\n"
                assert len(peers.mock.calls("NodeStageVolume")) == 1
                # The attacher's publish context reached NodeStage (the mock wants it).
                stage = peers.mock.calls("NodeStageVolume")[0]["Request"]
                assert stage["publish_context"]["device"] == "/dev/mock"
                publish = peers.mock.calls("NodePublishVolume")[0]["Request"]
                assert publish["target_path"] == str(target)
                assert publish["volume_context"]["csi.storage.k8s.io/pod.name"] == "first"
                in_use = f"kubernetes.io/csi/{DRIVER}^{stage['volume_id']}"
                await eventually(lambda: admin.get(node_path(NODE)), within=60,
                                 until=lambda n: in_use in n["status"].get("volumesInUse", []),
                                 what="volumesInUse")

                # nodelet restarted in the middle: the driver registers again, the volume is
                # found published, and a second pod gets it without a second stage.
                await harness.stop(terminate_pods=False)
                await harness.start()
                await admin.create(pod_path(namespace), _user("second", "vol"))
                await _running(admin, namespace, "second")
                assert len(peers.mock.calls("NodeStageVolume")) == 1
                assert len(peers.mock.calls("NodePublishVolume")) == 2
                # Its figures (NodeGetVolumeStats) in /stats/summary, through the API server.
                volume = await eventually(lambda: _summary_volume(control_plane, "second"),
                                          within=30, what="the volume in /stats/summary")
                assert volume["capacityBytes"] == 1 << 30
                assert volume["pvcRef"] == {"name": "vol", "namespace": namespace}
                # ... and in the kubelet's metrics.
                series = (f'kubelet_volume_stats_capacity_bytes{{namespace="{namespace}",'
                          'persistentvolumeclaim="vol"} 1.073741824e+09')
                await eventually(lambda: _metrics(control_plane), within=30,
                                 until=lambda text: series in text, what="the volume's metric")

                await _gone(admin, namespace, "first")
                assert len(peers.mock.calls("NodeUnpublishVolume")) == 1
                assert peers.mock.calls("NodeUnstageVolume") == []  # the second uses it
                await _gone(admin, namespace, "second")
                assert len(peers.mock.calls("NodeUnpublishVolume")) == 2
                assert len(peers.mock.calls("NodeUnstageVolume")) == 1
                staged = data / "plugins" / "kubernetes.io" / "csi" / DRIVER
                assert not any(staged.glob("*/vol_data.json"))
                await eventually(lambda: admin.get(node_path(NODE)), within=60,
                                 until=lambda n: not n["status"].get("volumesInUse"),
                                 what="volumesInUse empty")


@pytest.mark.timeout(600)
async def test_a_failing_node_publish_is_retried_and_leaves_nothing_behind(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str,
        tmp_path: Path) -> None:
    """The driver's NodePublishVolume fails (injected by a proxy in front of the real mock
    driver): the pod waits, its condition and event say why in the driver's words, no publish
    directory is left; once the driver answers again the pod starts."""
    async with join(NODE) as harness:
        data = harness.settings.data_dir
        async with csi_peers(control_plane, admin, driver=DRIVER,
                             socket_dir=data / "plugins" / DRIVER, attach_required=False,
                             logs=tmp_path / "csi") as peers, \
                CriProxy(upstream=f"unix://{peers.mock.socket}",
                         socket=data / "plugins" / DRIVER / "proxy.sock") as proxy, \
                Registrar(data / "plugins_registry", driver=DRIVER,
                          endpoint=str(data / "plugins" / DRIVER / "proxy.sock")) as registrar:
            await eventually(lambda: registrar.registered.is_set(), within=30,
                             what="the registration taken")
            # A final error (the kubelet's isFinalError): nothing can have been published.
            proxy.fail("NodePublishVolume", grpc.StatusCode.INTERNAL, "no more mounts")
            path, claim = _claim(namespace, "vol", peers.storage_class)
            await admin.create(path, claim)
            created = await admin.create(pod_path(namespace), _user("waits", "vol"))
            pv = (await eventually(lambda: admin.get(f"{path}/vol"), within=60,
                                   until=lambda c: c and c["spec"].get("volumeName"),
                                   what="the claim bound"))["spec"]["volumeName"]
            words = (f'MountVolume.SetUp failed for volume "{pv}" : rpc error: code = '
                     "Internal desc = no more mounts")
            await eventually(lambda: _events(admin, namespace, "waits"), within=60,
                             until=lambda seen: f"FailedMount: {words}" in seen, seen=repr,
                             what="the driver's refusal in an event")
            found = await admin.get(pod_path(namespace, "waits")) or {}
            ready = {c["type"]: c for c in found["status"]["conditions"]}
            assert ready["PodReadyToStartContainers"]["message"] == \
                f"no pod sandbox exists: {words}"
            published = data / "pods" / created["metadata"]["uid"] / "volumes" / \
                "kubernetes.io~csi" / pv
            assert not published.exists()  # nothing left of the failed publish
            proxy.heal("NodePublishVolume")
            await _running(admin, namespace, "waits")
            assert (published / "mount" / "f").read_text() == "hi\n"
            await _gone(admin, namespace, "waits")
            assert not published.exists()


@pytest.mark.timeout(600)
async def test_a_driver_that_requires_republish_is_published_again_at_each_sync(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str,
        tmp_path: Path) -> None:
    """CSIDriver.requiresRepublish: the pod's volume is published again at every sync of the
    pod (here every 2 s: a short resync period stands for the kubelet's 1-minute sync)."""
    often = {"sync_settings": {"resync_period": 2.0}}
    async with join(NODE, harness_args=often) as harness:
        data = harness.settings.data_dir
        async with _registered(control_plane, admin, data, tmp_path,
                               requires_republish=True) as peers:
            path, claim = _claim(namespace, "vol", peers.storage_class)
            await admin.create(path, claim)
            await admin.create(pod_path(namespace), _user("renewed", "vol"))
            await _running(admin, namespace, "renewed")
            await eventually(lambda: len(peers.mock.calls("NodePublishVolume")), within=60,
                             until=lambda n: n >= 3, what="the volume published again")
            targets = {c["Request"]["target_path"]
                       for c in peers.mock.calls("NodePublishVolume")}
            assert len(targets) == 1  # the same publication, renewed
            assert len(peers.mock.calls("NodeStageVolume")) == 1
            await _gone(admin, namespace, "renewed")
            assert len(peers.mock.calls("NodeUnpublishVolume")) == 1


@pytest.mark.timeout(600)
async def test_a_claim_grown_by_its_owner_is_expanded_on_the_node(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str,
        tmp_path: Path) -> None:
    """The claim's request raised from 1Gi to 2Gi: the external-resizer expands the volume
    and leaves the rest to the node (NodeResizePending); nodelet calls NodeExpandVolume on
    the pod's published volume and marks the claim expanded (capacity 2Gi, no resize status
    or conditions). The node looks at its claims at every sync of the pod (here every 2 s for
    the kubelet's loop)."""
    often = {"sync_settings": {"resync_period": 2.0}}
    async with join(NODE, harness_args=often) as harness:
        data = harness.settings.data_dir
        async with _registered(control_plane, admin, data, tmp_path, resizer=True) as peers:
            path, claim = _claim(namespace, "vol", peers.storage_class)
            await admin.create(path, claim)
            await admin.create(pod_path(namespace), _user("grows", "vol"))
            await _running(admin, namespace, "grows")
            await admin.patch(f"{path}/vol",
                              {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})

            def expanded(pvc: dict[str, Any] | None) -> bool:
                status = (pvc or {}).get("status", {})
                resize = {"FileSystemResizePending", "Resizing"}
                return (status.get("capacity", {}).get("storage") == "2Gi"
                        and not status.get("allocatedResourceStatuses")
                        and not resize & {c["type"] for c in status.get("conditions") or []})

            await eventually(lambda: admin.get(f"{path}/vol"), within=90, until=expanded,
                             seen=lambda p: repr((p or {}).get("status")),
                             what="the claim expanded on the node")
            (call,) = peers.mock.calls("NodeExpandVolume")
            assert call["Request"]["capacity_range"]["required_bytes"] == 2 << 30
            assert call["Request"]["volume_path"].endswith("/mount")
            await _gone(admin, namespace, "grows")
