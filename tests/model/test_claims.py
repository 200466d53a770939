"""The claim rules (model/core/claims.py), table-driven: which claim a volume names, when a
claim and its PV may be used, in the kubelet's words, and what of the PV a node reads."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import claims, pods

POD = pods.Pod(uid=pods.PodUID("u-1"), name="db", namespace="team", spec=pods.PodSpec(
    containers=(pods.Container(name="c", image="i", volume_mounts=(
        pods.VolumeMount("data", "/data"),), volume_devices=(
        pods.VolumeDevice("disk", "/dev/xvda"),)),)))


def pvc(*, phase: str = "Bound", volume: str = "pv-1", deleting: bool = False,
        finalizers: tuple[str, ...] = (), owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "db-scratch", "namespace": "team", "uid": "c-1",
                            "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "db",
                                    "uid": owner, "controller": True}]
    return {"metadata": meta, "spec": {"volumeName": volume}, "status": {"phase": phase}}


def pv(**spec: Any) -> dict[str, Any]:
    base = {"claimRef": {"uid": "c-1"}, "local": {"path": "/mnt/disks/a"}}
    return {"metadata": {"name": "pv-1", "annotations": {claims.GID_ANNOTATION: "1234"}},
            "spec": base | spec}


def test_the_claim_of_each_volume_type() -> None:
    claim = pods.Volume("data", "persistentVolumeClaim", {"claimName": "c", "readOnly": True})
    assert claims.claim_of(POD, claim) == claims.Claim("data", "c", read_only=True)
    scratch = pods.Volume("scratch", "ephemeral", {"volumeClaimTemplate": {"spec": {}}})
    assert claims.claim_of(POD, scratch) == claims.Claim("scratch", "db-scratch",
                                                         ephemeral=True)
    assert claims.claim_of(POD, pods.Volume("e", "emptyDir", {})) is None


@pytest.mark.parametrize(("obj", "error"), [
    (pvc(phase="Pending"), "PVC is not bound"),
    (pvc(volume=""), "PVC has empty pvc.Spec.VolumeName"),
    (pvc(deleting=True), "PVC is being deleted"),
    # Protected: still in use while the pods that use it run (the kubelet's rule).
    (pvc(deleting=True, finalizers=(claims.PROTECTION_FINALIZER,)), None),
    (pvc(), None),
])
def test_a_claim_may_be_used_once_bound_and_not_being_deleted(
        obj: dict[str, Any], error: str | None) -> None:
    if error is None:
        assert claims.check_claim(obj) == ("pv-1", "c-1")
        return
    with pytest.raises(claims.ClaimError) as info:
        claims.check_claim(obj)
    assert info.value.message == error and info.value.processing


@pytest.mark.parametrize(("owner", "ok"), [("u-1", True), ("u-2", False), ("", False)])
def test_a_generic_ephemeral_claim_must_be_controlled_by_the_pod(owner: str, ok: bool) -> None:
    if ok:
        claims.check_owner(POD, pvc(owner=owner))
        return
    with pytest.raises(claims.ClaimError) as info:
        claims.check_owner(POD, pvc(owner=owner))
    assert info.value.message == ("PVC team/db-scratch was not created for pod team/db "
                                  "(pod is not owner)")
    assert not info.value.processing


def test_what_a_node_reads_of_a_local_pv() -> None:
    terms = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}
    found = claims.persistent_volume(pv(nodeAffinity=terms, mountOptions=["noatime"]), "c-1",
                                     read_only=True)
    assert (found.name, found.source_type, found.path) == ("pv-1", "local", "/mnt/disks/a")
    assert (found.volume_mode, found.read_only, found.gid) == ("Filesystem", True, 1234)
    assert found.mount_options == ("noatime",)
    claims.check_node(found, {"kubernetes.io/hostname": "n1"}, "n1")
    with pytest.raises(claims.ClaimError, match=r"^no matching NodeSelectorTerms$"):
        claims.check_node(found, {"kubernetes.io/hostname": "n2"}, "n2")
    host = claims.persistent_volume(pv(local=None, hostPath={"path": "/srv", "type": "Directory"},
                                       volumeMode="Block"), "c-1", read_only=False)
    assert (host.source_type, host.path, host.host_path_type, host.volume_mode) == (
        "hostPath", "/srv", "Directory", "Block")


@pytest.mark.parametrize(("obj", "error"), [
    (pv(claimRef=None), "found PV object pv-1 but it has a nil pv.Spec.ClaimRef indicating it "
                        "is not yet bound to the claim"),
    (pv(claimRef={"uid": "c-9"}), "found PV object pv-1 but its pv.Spec.ClaimRef.UID c-9 does "
                                  "not point to claim.UID c-1"),
])
def test_a_pv_must_point_back_at_the_claim(obj: dict[str, Any], error: str) -> None:
    with pytest.raises(claims.ClaimError) as info:
        claims.persistent_volume(obj, "c-1", read_only=False)
    assert info.value.message == error


def test_volume_modes_and_the_kubelets_failure_words() -> None:
    assert claims.used_names(POD) == ({"data"}, {"disk"})
    claims.check_mode("data", "Filesystem", mounted=True, device=False)
    claims.check_mode("disk", "Block", mounted=False, device=True)
    with pytest.raises(claims.ClaimError, match="volume data has volumeMode Block, but is "
                                                "specified in volumeMounts"):
        claims.check_mode("data", "Block", mounted=True, device=False)
    with pytest.raises(claims.ClaimError, match="volume disk has volumeMode Filesystem, but is "
                                                "specified in volumeDevices"):
        claims.check_mode("disk", "Filesystem", mounted=False, device=True)
    assert claims.failure_message({"token", "a", "b"}, {
        "b": "error processing PVC ns/b: PVC is not bound", "a": "x"}) == (
        "Unable to attach or mount volumes: unmounted volumes=[a b token], unattached "
        "volumes=[], failed to process volumes=[a b]: x; error processing PVC ns/b: PVC is "
        "not bound")


def _resizing(*, asked: str | None = "NodeResizePending", conditions: tuple[str, ...] = (
        "FileSystemResizePending",)) -> dict[str, Any]:
    status: dict[str, Any] = {"capacity": {"storage": "1Gi"},
                              "conditions": [{"type": t, "status": "True"}
                                             for t in (*conditions, "ModifyingVolume")]}
    if asked is not None:
        status["allocatedResourceStatuses"] = {"storage": asked}
    return {"metadata": {"resourceVersion": "42"}, "status": status}


@pytest.mark.parametrize(("pvc", "size"), [
    (_resizing(), 2 << 30),
    (_resizing(asked="NodeResizeInProgress", conditions=()), 2 << 30),
    (_resizing(asked=None), 2 << 30),  # only the condition: an older resizer
    (_resizing(asked="ControllerResizeInProgress"), None),  # not the node's turn yet
    (_resizing(asked=None, conditions=()), None),
])
def test_a_node_expands_a_claim_when_the_resizer_left_it_to_the_node(
        pvc: dict[str, Any], size: int | None) -> None:
    pv = {"spec": {"capacity": {"storage": "2Gi"}}}
    assert claims.node_expansion(pvc, pv) == size
    if size is None:
        return
    assert claims.expansion_done(pvc, pv) == {
        "metadata": {"resourceVersion": "42"},
        "status": {"capacity": {"storage": "2Gi"}, "allocatedResourceStatuses": {"storage": None},
                   "conditions": [{"type": "ModifyingVolume", "status": "True"}]}}
