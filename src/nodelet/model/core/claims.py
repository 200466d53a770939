"""A pod's claims as plain values: which PersistentVolumeClaim a `persistentVolumeClaim` or
generic `ephemeral` volume names, whether the claim and its PersistentVolume may be used, and
what of the PV a node needs to set it up (no I/O).

The rules and the words are the kubelet's desired-state populator (createVolumeSpec,
getPVCExtractPV, getPVSpec) and component-helpers' ephemeral.VolumeIsForPod and
CheckNodeAffinity: a claim that is not bound, or is being deleted without its protection
finalizer, keeps the pod waiting; a generic ephemeral volume's claim is `<pod>-<volume>`
and must be controlled by the pod; the PV must point back at the claim's UID; the volume
mode must be Block for volumeDevices and Filesystem for volumeMounts.

Exceptions::

    ClaimError      a claim or its PV that cannot be used yet; `.message` is the kubelet's
                    error text (the service prefixes "error processing PVC ns/name: " where
                    the kubelet does: `processing`)
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any, Literal

from nodelet.helpers import errors
from nodelet.model.core import affinity, apijson, csi, pods, quantities

CLAIM_TYPES = frozenset({"persistentVolumeClaim", "ephemeral"})
# The kubelet's in-tree plugin directory names under <pod dir>/volumes and volumeDevices.
LOCAL_PLUGIN_DIR = "kubernetes.io~local-volume"
PROTECTION_FINALIZER = "kubernetes.io/pvc-protection"
# pv.beta.kubernetes.io/gid: a group the kubelet adds to every container of the pod.
GID_ANNOTATION = "pv.beta.kubernetes.io/gid"

VolumeMode = Literal["Filesystem", "Block"]


class ClaimError(errors.MessageError):
    """A claim (or its PV) the pod cannot use yet. `processing`: the kubelet's message says
    "error processing PVC <ns>/<name>: " before it."""

    def __init__(self, message: str, *, processing: bool = True) -> None:
        super().__init__(message)
        self.processing = processing


@dataclass(frozen=True)
class Claim:
    """A pod volume backed by a claim: the claim's name and the volume's readOnly."""

    volume: str
    name: str
    read_only: bool = False
    ephemeral: bool = False


@dataclass(frozen=True)
class PersistentVolume:
    """What a node needs of a bound PV. `source_type` is the PV's one source (`local`,
    `hostPath`, or another, which nodelet refuses when it sets the volume up); `path` and
    `host_path_type` are those of a local or hostPath PV; `read_only` is the claim
    volume's readOnly (the kubelet's spec.ReadOnly)."""

    name: str
    source_type: str
    path: str = ""
    host_path_type: str = ""
    volume_mode: VolumeMode = "Filesystem"
    read_only: bool = False
    node_terms: tuple[affinity.Term, ...] = ()
    gid: int | None = None
    mount_options: tuple[str, ...] = ()
    csi: csi.CsiSource | None = None  # a CSI PV's source
    fs_type: str = ""  # a local PV's fsType (for a block device: the kubelet's default ext4)


def claim_of(pod: pods.Pod, volume: pods.Volume) -> Claim | None:
    """The claim of a `persistentVolumeClaim` or `ephemeral` volume (None for other types);
    an ephemeral volume's claim is named `<pod name>-<volume name>`."""
    if volume.source_type == "persistentVolumeClaim":
        return Claim(volume=volume.name, name=str(volume.source.get("claimName") or ""),
                     read_only=volume.source.get("readOnly") is True)
    if volume.source_type == "ephemeral":
        return Claim(volume=volume.name, name=f"{pod.name}-{volume.name}", ephemeral=True)
    return None


def check_claim(pvc: apijson.JSON) -> tuple[str, str]:
    """(PV name, claim UID) of a claim that may be used: getPVCExtractPV's checks."""
    meta, spec = apijson.obj(pvc.get("metadata")), apijson.obj(pvc.get("spec"))
    finalizers = meta.get("finalizers") or []
    if meta.get("deletionTimestamp") and PROTECTION_FINALIZER not in finalizers:
        raise ClaimError("PVC is being deleted")
    if apijson.obj(pvc.get("status")).get("phase") != "Bound":
        raise ClaimError("PVC is not bound")
    volume_name = str(spec.get("volumeName") or "")
    if not volume_name:
        raise ClaimError("PVC has empty pvc.Spec.VolumeName")
    return volume_name, str(meta.get("uid") or "")


def check_owner(pod: pods.Pod, pvc: apijson.JSON) -> None:
    """ephemeral.VolumeIsForPod: the claim of a generic ephemeral volume is the pod's."""
    meta = apijson.obj(pvc.get("metadata"))
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    controller = [r for r in apijson.objs(meta.get("ownerReferences"))
                  if r.get("controller") is True]
    if namespace != pod.namespace or not controller or controller[0].get("uid") != pod.uid:
        raise ClaimError(f"PVC {namespace}/{name} was not created for pod "
                         f"{pod.namespace}/{pod.name} (pod is not owner)", processing=False)


def persistent_volume(pv: apijson.JSON, claim_uid: str, *, read_only: bool) -> PersistentVolume:
    """The PV bound to the claim `claim_uid`: getPVSpec's checks, then what a node reads."""
    meta, spec = apijson.obj(pv.get("metadata")), apijson.obj(pv.get("spec"))
    name = str(meta.get("name") or "")
    ref = spec.get("claimRef")
    if not isinstance(ref, Mapping):
        raise ClaimError(f"found PV object {name} but it has a nil pv.Spec.ClaimRef "
                         "indicating it is not yet bound to the claim")
    if ref.get("uid") != claim_uid:
        raise ClaimError(f"found PV object {name} but its pv.Spec.ClaimRef.UID "
                         f"{ref.get('uid') or ''} does not point to claim.UID {claim_uid}")
    source_type = _source_type(spec)
    source = apijson.obj(spec.get(source_type))
    mode: VolumeMode = "Block" if spec.get("volumeMode") == "Block" else "Filesystem"
    return PersistentVolume(
        name=name, source_type=source_type, path=str(source.get("path") or ""),
        host_path_type=str(source.get("type") or "") if source_type == "hostPath" else "",
        volume_mode=mode, read_only=read_only, node_terms=_node_terms(spec),
        gid=_gid(apijson.obj(meta.get("annotations")).get(GID_ANNOTATION)),
        mount_options=tuple(str(o) for o in spec.get("mountOptions") or ()),
        csi=csi.csi_source(spec) if source_type == "csi" else None,
        fs_type=str(source.get("fsType") or "") if source_type == "local" else "",
    )


def check_mode(volume: str, mode: VolumeMode, *, mounted: bool, device: bool) -> None:
    """createVolumeSpec's rule: volumeMounts need a Filesystem volume, volumeDevices a
    Block one."""
    if mounted and mode != "Filesystem":
        raise ClaimError(f"volume {volume} has volumeMode {mode}, but is specified in "
                         "volumeMounts", processing=False)
    if device and mode != "Block":
        raise ClaimError(f"volume {volume} has volumeMode {mode}, but is specified in "
                         "volumeDevices", processing=False)


# The claim conditions of a resize (MergeResizeConditionOnPVC drops them once it is done).
RESIZE_CONDITIONS = frozenset({"FileSystemResizePending", "Resizing", "ControllerResizeError",
                               "NodeResizeError"})
_NODE_RESIZE = ("NodeResizePending", "NodeResizeInProgress")


def resize_asked(pvc: apijson.JSON) -> bool:
    """Whether the resizer left the claim's expansion to the node: allocatedResourceStatuses
    storage NodeResizePending (or in progress), or, without it, the FileSystemResizePending
    condition."""
    status = apijson.obj(pvc.get("status"))
    asked = apijson.obj(status.get("allocatedResourceStatuses")).get("storage")
    pending = any(c.get("type") == "FileSystemResizePending"
                  for c in apijson.objs(status.get("conditions")))
    return asked in _NODE_RESIZE or (asked is None and pending)


def node_expansion(pvc: apijson.JSON, pv: apijson.JSON) -> int | None:
    """The size in bytes the node is to expand the claim's volume to, None when there is
    nothing to do (the kubelet's NodeExpander pre-check): asked for (`resize_asked`) and the
    PV says a size."""
    if not resize_asked(pvc):
        return None
    new = _bytes(apijson.obj(apijson.obj(pv.get("spec")).get("capacity")).get("storage"))
    return new or None


def expansion_done(pvc: apijson.JSON, pv: apijson.JSON) -> apijson.Obj:
    """The claim status patch once the node expanded the volume (MarkNodeExpansionFinished-
    WithRecovery): the PV's capacity, no storage resize status, no resize conditions; guarded
    by the claim's resourceVersion."""
    status = apijson.obj(pvc.get("status"))
    capacity = apijson.obj(apijson.obj(pv.get("spec")).get("capacity")).get("storage")
    return {
        "metadata": {"resourceVersion": apijson.obj(pvc.get("metadata")).get("resourceVersion")},
        "status": {
            "capacity": {"storage": capacity},
            "allocatedResourceStatuses": {"storage": None},
            "conditions": [c for c in apijson.objs(status.get("conditions"))
                           if c.get("type") not in RESIZE_CONDITIONS] or None,
        },
    }


def _bytes(value: Any) -> int:
    try:
        return int(quantities.parse_quantity(value)) if value is not None else 0
    except ValueError:  # not a quantity: no size said
        return 0


def unique_name(pv: PersistentVolume) -> str:
    """The kubelet's unique volume name of an attachable PV (`kubernetes.io/csi/<driver>^
    <handle>`), as `node.status.volumesInUse` lists it; "" for the others."""
    if pv.csi is None:
        return ""
    return f"{csi.PLUGIN_NAME}/{pv.csi.driver}^{pv.csi.volume_handle}"


def check_node(pv: PersistentVolume, labels: Mapping[str, str], node_name: str) -> None:
    """CheckNodeAffinity: a PV with required node affinity only on a node it selects."""
    if pv.node_terms and not affinity.matches(pv.node_terms, labels, node_name):
        raise ClaimError("no matching NodeSelectorTerms", processing=False)


def failure_message(unmounted: Set[str], failed: Mapping[str, str]) -> str:
    """The kubelet's FailedMount text when claims could not be processed (volume name ->
    error), with the volumes the containers use that are not set up yet (`unmounted`, the
    failed ones among them): WaitForAttachAndMount's error as syncPod's event words it."""
    names = " ".join(sorted(failed))
    return (f"Unable to attach or mount volumes: unmounted volumes=[{' '.join(sorted(unmounted))}]"
            f", unattached volumes=[], failed to process volumes=[{names}]: "
            + "; ".join(failed[name] for name in sorted(failed)))


def used_names(pod: pods.Pod) -> tuple[set[str], set[str]]:
    """(volumes some container mounts, volumes some container has as a device)."""
    containers = (*pod.spec.init_containers, *pod.spec.containers,
                  *pod.spec.ephemeral_containers)
    return ({m.name for c in containers for m in c.volume_mounts},
            {d.name for c in containers for d in c.volume_devices})


_PV_SOURCES = (
    "local", "hostPath", "csi", "nfs", "iscsi", "fc", "flexVolume", "gcePersistentDisk",
    "awsElasticBlockStore", "azureDisk", "azureFile", "cinder", "cephfs", "rbd", "glusterfs",
    "vsphereVolume", "portworxVolume", "quobyte", "flocker", "photonPersistentDisk", "scaleIO",
    "storageos",
)  # fmt: skip


def _source_type(spec: Mapping[str, Any]) -> str:
    return next((k for k in _PV_SOURCES if spec.get(k) is not None), "")


def _node_terms(spec: Mapping[str, Any]) -> tuple[affinity.Term, ...]:
    required = apijson.obj(apijson.obj(spec.get("nodeAffinity")).get("required"))
    return tuple(affinity.Term(expressions=_requirements(term.get("matchExpressions")),
                               fields=_requirements(term.get("matchFields")))
                 for term in apijson.objs(required.get("nodeSelectorTerms")))


def _requirements(items: Any) -> tuple[affinity.Requirement, ...]:
    return tuple(affinity.Requirement(str(r.get("key") or ""), str(r.get("operator") or ""),
                                      tuple(str(v) for v in r.get("values") or ()))
                 for r in apijson.objs(items))


def _gid(value: Any) -> int | None:
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None
