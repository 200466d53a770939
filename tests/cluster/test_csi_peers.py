"""The CSI peers on the real control plane, without a node (tests/support/csipeers.py): the
e2e suite's mock driver on a unix socket, kubernetes-csi's external-provisioner and
external-attacher beside it as host processes under identities with upstream's RBAC.

A claim of the mock's StorageClass (Immediate binding) is provisioned: a PV whose
`spec.csi.driver` is the mock's name and whose volume handle the mock numbered, bound to the
claim. A VolumeAttachment made by hand for that PV and a node name (with a CSINode naming the
driver there, as a node's registration would) is attached by the attacher: ControllerPublish
reached the mock with the CSINode's node ID, and `status.attachmentMetadata` carries the
mock's publish context (the `device` NodeStage will want). At the end the attachment is
detached, the volume deleted (DeleteVolume), every object and process gone, and no request of
the sidecars was refused. Without attach (`--disable-attach`, attachRequired false) the mock
advertises no PUBLISH_UNPUBLISH_VOLUME and a claim is provisioned all the same.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from support import csipeers
from support.controlplane import AdminClient, ControlPlane
from support.polling import eventually

NODE = "csi-peers-node"  # no Node object: the attacher needs only the CSINode


def claim(name: str, storage_class: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "16Mi"}}}}


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
