"""The CSI peers on the real control plane, without a node (tests/support/csipeers.py): the
e2e suite's mock driver on a unix socket, kubernetes-csi's external-provisioner and
external-attacher (and external-resizer) beside it as host processes under identities with
upstream's RBAC.

A claim of the mock's StorageClass (Immediate binding) is provisioned: a PV whose
`spec.csi.driver` is the mock's name and whose volume handle the mock numbered, bound to the
claim. A VolumeAttachment made by hand for that PV and a node name (with a CSINode naming the
driver there, as a node's registration would) is attached by the attacher: ControllerPublish
reached the mock with the CSINode's node ID, and `status.attachmentMetadata` carries the
mock's publish context (the `device` NodeStage will want). At the end the attachment is
detached, the volume deleted (DeleteVolume), every object and process gone, and no request of
the sidecars was refused. Without attach (`--disable-attach`, attachRequired false) the mock
advertises no PUBLISH_UNPUBLISH_VOLUME and a claim is provisioned all the same. With the
external-resizer (`resizer=True`), a claim asking for more is expanded on the controller
(ControllerExpandVolume, the PV's capacity) and left NodeResizePending for a node.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from nodelet.adapters.csi.client import NodeClient
from support import csipeers
from support.controlplane import AdminClient, ControlPlane
from support.polling import eventually

NODE = "csi-peers-node"  # no Node object: the attacher needs only the CSINode


def claim(name: str, storage_class: str, size: str = "16Mi") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}


def attachment(name: str, *, driver: str, pv: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {"attacher": driver, "nodeName": node,
                     "source": {"persistentVolumeName": pv}}}


async def bound_volume(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    pvc = await eventually(
        lambda: admin.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"),
        until=lambda c: c and c["status"].get("phase") == "Bound", within=60, every=0.1,
        what=f"claim {name} Bound")
    assert pvc is not None
    pv = await admin.get(f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
    assert pv is not None
    return pv


async def test_claim_provisioned_and_attachment_attached(
        control_plane: ControlPlane, admin: AdminClient, namespace: str,
        tmp_path: Path) -> None:
    # Short: the socket's path must fit a sockaddr_un (107 bytes), under pytest's tmp_path.
    driver = f"mock-{secrets.token_hex(3)}.csi.test"
    socket_dir = tmp_path / "plugins" / driver
    va_name = f"csi-peers-{secrets.token_hex(4)}"
    async with csipeers.csi_peers(control_plane, admin, driver=driver, socket_dir=socket_dir,
                                  attach_required=True, logs=tmp_path / "logs",
                                  storage_class_name=driver) as peers:
        assert peers.mock.socket == socket_dir / "csi.sock"
        await admin.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                           claim("data", peers.storage_class))
        pv = await bound_volume(admin, namespace, "data")
        assert pv["spec"]["csi"]["driver"] == driver
        handle = pv["spec"]["csi"]["volumeHandle"]
        assert [c["Response"]["volume"]["volume_id"]
                for c in peers.mock.calls("CreateVolume")] == [handle]
        assert pv["spec"]["capacity"]["storage"] == "16Mi"

        await peers.add_csinode(admin, NODE)
        await admin.create("/apis/storage.k8s.io/v1/volumeattachments",
                           attachment(va_name, driver=driver, pv=pv["metadata"]["name"],
                                      node=NODE))
        va = await eventually(
            lambda: admin.get(f"/apis/storage.k8s.io/v1/volumeattachments/{va_name}"),
            until=lambda v: v and (v.get("status") or {}).get("attached"), within=60,
            every=0.1, what=f"VolumeAttachment {va_name} attached",
            seen=lambda v: f"{v and v.get('status')}\n{peers.attacher.log.read_text()[-2000:]}")
        assert va is not None
        assert va["status"]["attachmentMetadata"] == {"device": "/dev/mock",
                                                      "readonly": "false"}
        # Once or twice (idempotent): the attacher may sync the VolumeAttachment again on the
        # update that added its finalizer, before its status patch is seen.
        publishes = {(c["Request"]["volume_id"], c["Request"]["node_id"])
                     for c in peers.mock.calls("ControllerPublishVolume")}
        assert publishes == {(handle, peers.mock.node_id)}
        assert peers.mock.node_id == driver

    # csi_peers' end: detached, deleted, stopped, removed.
    assert peers.mock.calls("ControllerUnpublishVolume")
    # The provisioner may ask twice (DeleteVolume is idempotent): for the Released PV, and
    # again on the update its own delete of the PV object makes, before it drops its finalizer.
    assert {c["Request"]["volume_id"] for c in peers.mock.calls("DeleteVolume")} == {handle}
    assert not peers.mock.socket.exists()
    for program in (peers.mock, peers.provisioner, peers.attacher):
        assert program.component is not None and not program.component.alive()
    assert await admin.get(f"/apis/storage.k8s.io/v1/csidrivers/{driver}") is None
    assert await admin.get(f"/apis/storage.k8s.io/v1/storageclasses/{driver}") is None
    assert await admin.get(f"/apis/storage.k8s.io/v1/csinodes/{NODE}") is None
    assert await admin.get(f"/api/v1/persistentvolumes/{pv['metadata']['name']}") is None
    events = await eventually(control_plane.audit_events, within=10, every=0.2,
                              until=lambda evs: any(
                                  e.get("user", {}).get("username") in peers.users.values()
                                  for e in evs),
                              what="the sidecars' requests in the audit log",
                              seen=lambda evs: f"{len(evs)} events")
    assert csipeers.refused(events, list(peers.users.values())) == []


async def test_without_attach_the_driver_publishes_nothing_on_the_controller(
        control_plane: ControlPlane, admin: AdminClient, namespace: str,
        tmp_path: Path) -> None:
    """attach_required=False: the CSIDriver says so, the mock (--disable-attach) advertises no
    PUBLISH_UNPUBLISH_VOLUME, and a claim is provisioned all the same."""
    driver = f"mock-{secrets.token_hex(3)}.csi.test"
    async with csipeers.csi_peers(control_plane, admin, driver=driver,
                                  socket_dir=tmp_path / "plugins" / driver,
                                  attach_required=False, logs=tmp_path / "logs",
                                  storage_class_name=driver, pod_info_on_mount=False,
                                  fs_group_policy="None") as peers:
        spec = (await admin.get(f"/apis/storage.k8s.io/v1/csidrivers/{driver}") or {})["spec"]
        assert (spec["attachRequired"], spec["podInfoOnMount"], spec["fsGroupPolicy"]) == (
            False, False, "None")
        await admin.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                           claim("data", peers.storage_class))
        pv = await bound_volume(admin, namespace, "data")
        assert pv["spec"]["csi"]["driver"] == driver
        # csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME is 2.
        (caps, *_) = peers.mock.calls("ControllerGetCapabilities")
        kinds = {c["Type"]["Rpc"]["type"] for c in caps["Response"]["capabilities"]}
        assert 1 in kinds and 2 not in kinds
    assert not peers.mock.calls("ControllerPublishVolume")
    assert await admin.get(f"/api/v1/persistentvolumes/{pv['metadata']['name']}") is None


GI = 1 << 30


async def test_resizer_expands_the_volume_and_leaves_the_node_its_part(
        control_plane: ControlPlane, admin: AdminClient, namespace: str,
        tmp_path: Path) -> None:
    """resizer=True: a bound claim asking for 2Gi instead of 1Gi is expanded on the
    controller (ControllerExpandVolume to 2Gi); the PV's capacity becomes 2Gi, and as the mock
    (--node-expand-required) wants the node to expand too, the claim says so: its
    allocatedResourceStatuses storage NodeResizePending, its FileSystemResizePending
    condition, its status capacity still 1Gi. That is where a node takes over."""
    driver = f"mock-{secrets.token_hex(3)}.csi.test"
    async with csipeers.csi_peers(control_plane, admin, driver=driver,
                                  socket_dir=tmp_path / "plugins" / driver,
                                  attach_required=True, logs=tmp_path / "logs",
                                  storage_class_name=driver, resizer=True) as peers:
        assert peers.resizer is not None
        assert "--node-expand-required" in peers.mock.args()
        sc = await admin.get(f"/apis/storage.k8s.io/v1/storageclasses/{driver}")
        assert sc is not None and sc["allowVolumeExpansion"] is True
        claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
        await admin.create(claims, claim("data", peers.storage_class, "1Gi"))
        pv = await bound_volume(admin, namespace, "data")
        pv_path = f"/api/v1/persistentvolumes/{pv['metadata']['name']}"
        handle = pv["spec"]["csi"]["volumeHandle"]
        assert pv["spec"]["capacity"]["storage"] == "1Gi"

        await admin.patch(f"{claims}/data",
                          {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
        grown = await eventually(
            lambda: admin.get(pv_path), within=60, every=0.1,
            until=lambda v: v and v["spec"]["capacity"]["storage"] == "2Gi",
            what=f"PV {pv_path} at 2Gi",
            seen=lambda v: f"{v and v['spec']['capacity']}\n"
                           f"{peers.resizer.log.read_text()[-2000:] if peers.resizer else ''}")
        assert grown is not None

        def node_pending(c: dict[str, Any] | None) -> bool:
            status = (c or {}).get("status") or {}
            return (status.get("allocatedResourceStatuses") == {"storage": "NodeResizePending"}
                    and "FileSystemResizePending" in {
                        cond["type"] for cond in status.get("conditions") or []
                        if cond["status"] == "True"})

        pvc = await eventually(lambda: admin.get(f"{claims}/data"), until=node_pending,
                               within=60, every=0.1, what="claim data NodeResizePending",
                               seen=lambda c: f"{c and c.get('status')}")
        assert pvc is not None
        assert pvc["status"]["allocatedResources"] == {"storage": "2Gi"}
        assert pvc["status"]["capacity"] == {"storage": "1Gi"}  # the node's part is not done
        # The resizer keeps its Resizing condition beside FileSystemResizePending: the node
        # that finishes the expansion drops both.
        assert {c["type"] for c in pvc["status"]["conditions"]
                if c["status"] == "True"} >= {"Resizing", "FileSystemResizePending"}
        # The size before, for the node's expansion (upstream's AnnotateFsResize, on by
        # default); the resizer removes it once the claim's capacity reached the PV's.
        assert grown["metadata"]["annotations"][
            "volume.alpha.kubernetes.io/pre-resize-capacity"] == "1Gi"
        expands = {(c["Request"]["volume_id"], c["Request"]["capacity_range"]["required_bytes"],
                    c["Response"]["capacity_bytes"], c["Response"]["node_expansion_required"])
                   for c in peers.mock.calls("ControllerExpandVolume")}
        assert expands == {(handle, 2 * GI, 2 * GI, True)}
        # What a node's NodeGetCapabilities finds (asked here as a node would).
        node = NodeClient(str(peers.mock.socket), timeout=10)
        try:
            assert "EXPAND_VOLUME" in await node.capabilities()
        finally:
            await node.close()

    assert peers.resizer.component is not None and not peers.resizer.component.alive()
    assert await admin.get(pv_path) is None
    events = await eventually(control_plane.audit_events, within=10, every=0.2,
                              until=lambda evs: any(
                                  e.get("user", {}).get("username") == peers.users["csi-resizer"]
                                  for e in evs),
                              what="the resizer's requests in the audit log",
                              seen=lambda evs: f"{len(evs)} events")
    assert csipeers.refused(events, list(peers.users.values())) == []
