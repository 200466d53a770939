"""CSI volumes as plain values (no I/O): where the kubelet's CSI plugin stages and publishes a
volume, what it writes beside it, what it asks the driver, and the objects a node keeps about
its drivers. The I/O is `services.podwork.csivolumes` (the Node service calls) and
`services.plugins` (registration).

The rules and names are pkg/volume/csi's: a staged volume lives at
`<data>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount`, a pod's at
`<pods>/<uid>/volumes/kubernetes.io~csi/<pv name>/mount`, each with a `vol_data.json` beside
it (what a restart needs to tear it down); a VolumeAttachment is named
`csi-<sha256(volumeHandle + driver + node)>`; PV access modes map to CSI's as asCSIAccessModeV1
maps them; `podInfoOnMount` adds the pod's name, namespace, UID and service account to the
volume context.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from nodelet.model.core import apijson, pods, tokens

PLUGIN_NAME = "kubernetes.io/csi"
POD_PLUGIN_DIR = "kubernetes.io~csi"
DATA_FILE = "vol_data.json"
GLOBAL_MOUNT = "globalmount"
# The Node annotation that maps each registered driver to its node ID (JSON).
NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid"
# What a CSIDriver says when there is none (the kubelet's defaults).
DEFAULT_FS_GROUP_POLICY = "ReadWriteOnceWithFSType"


@dataclass(frozen=True)
class CsiSource:
    """A PV's `csi` source, as a node reads it."""

    driver: str
    volume_handle: str
    read_only: bool = False
    fs_type: str = ""
    volume_attributes: Mapping[str, str] = field(default_factory=dict)
    access_mode: str = "ReadWriteOnce"  # the PV's first (the one CSI is told)
    mount_options: tuple[str, ...] = ()
    ephemeral: bool = False  # an inline volume of the pod (no PV)
    access_modes: tuple[str, ...] = ("ReadWriteOnce",)
    # The PV's nodeStageSecretRef and nodePublishSecretRef: (namespace, name).
    stage_secret: tuple[str, str] | None = None
    publish_secret: tuple[str, str] | None = None


@dataclass(frozen=True)
class DriverPolicy:
    """What a CSIDriver object says (all defaults when there is none: `exists` False)."""

    attach_required: bool = True
    pod_info_on_mount: bool = False
    fs_group_policy: str = DEFAULT_FS_GROUP_POLICY
    lifecycle_modes: tuple[str, ...] = ("Persistent",)
    exists: bool = False
    # Published again at every sync of the pod (drivers whose credentials expire).
    requires_republish: bool = False
    # The driver asks for the pod's service account tokens in the volume context.
    token_requests: bool = False


def csi_source(spec: Mapping[str, Any]) -> CsiSource:
    """The `csi` source of a PV's spec."""
    source = apijson.obj(spec.get("csi"))
    modes = spec.get("accessModes") or ["ReadWriteOnce"]
    return CsiSource(
        driver=str(source.get("driver") or ""),
        volume_handle=str(source.get("volumeHandle") or ""),
        read_only=source.get("readOnly") is True,
        fs_type=str(source.get("fsType") or ""),
        volume_attributes={str(k): str(v) for k, v in
                           apijson.obj(source.get("volumeAttributes")).items()},
        access_mode=str(modes[0]),
        mount_options=tuple(str(o) for o in spec.get("mountOptions") or ()),
        access_modes=tuple(str(m) for m in modes),
        stage_secret=_secret_ref(source.get("nodeStageSecretRef")),
        publish_secret=_secret_ref(source.get("nodePublishSecretRef")),
    )


def _secret_ref(ref: Any) -> tuple[str, str] | None:
    ref = apijson.obj(ref)
    name = str(ref.get("name") or "")
    return (str(ref.get("namespace") or ""), name) if name else None


def driver_policy(driver: apijson.JSON | None) -> DriverPolicy:
    """The CSIDriver's spec; None (no such object) gives the kubelet's defaults."""
    if driver is None:
        return DriverPolicy()
    spec = apijson.obj(driver.get("spec"))
    return DriverPolicy(
        attach_required=spec.get("attachRequired") is not False,
        pod_info_on_mount=spec.get("podInfoOnMount") is True,
        fs_group_policy=str(spec.get("fsGroupPolicy") or DEFAULT_FS_GROUP_POLICY),
        lifecycle_modes=tuple(str(m) for m in spec.get("volumeLifecycleModes")
                              or ("Persistent",)),
        exists=True,
        requires_republish=spec.get("requiresRepublish") is True,
        token_requests=bool(spec.get("tokenRequests")),
    )


def lifecycle_error(policy: DriverPolicy, driver: str, mode: str) -> str:
    """supportsVolumeLifecycleMode: "" when the driver takes volumes of `mode`
    ("Persistent" or "Ephemeral"), else the kubelet's reason."""
    if not policy.exists:
        return "" if mode == "Persistent" else (
            f'volume mode "{mode}" not supported by driver {driver} (no CSIDriver object)')
    if mode in policy.lifecycle_modes:
        return ""
    modes = json.dumps(list(policy.lifecycle_modes))
    return f'volume mode "{mode}" not supported by driver {driver} (only supports {modes})'


def inline_source(uid: str, volume: str, source: Mapping[str, Any]) -> CsiSource:
    """An inline (ephemeral) `csi` pod volume as a source: its handle is the kubelet's
    makeVolumeHandle, `csi-<sha256(pod UID + volume name)>`."""
    handle = "csi-" + hashlib.sha256(f"{uid}{volume}".encode()).hexdigest()
    return CsiSource(
        driver=str(source.get("driver") or ""), volume_handle=handle,
        read_only=source.get("readOnly") is True, fs_type=str(source.get("fsType") or ""),
        volume_attributes={str(k): str(v) for k, v in
                           apijson.obj(source.get("volumeAttributes")).items()},
        ephemeral=True)


def attachment_name(volume_handle: str, driver: str, node: str) -> str:
    """The VolumeAttachment the attach/detach controller makes (getAttachmentName)."""
    return "csi-" + hashlib.sha256(f"{volume_handle}{driver}{node}".encode()).hexdigest()


def staging_path(plugins_dir: PurePosixPath, source: CsiSource) -> PurePosixPath:
    """The staged volume's directory (makeDeviceMountPath); its vol_data.json is beside it."""
    digest = hashlib.sha256(source.volume_handle.encode()).hexdigest()
    return plugins_dir / PLUGIN_NAME / source.driver / digest / GLOBAL_MOUNT


def access_mode(mode: str, *, single_node_multi_writer: bool) -> str:
    """The CSI access mode of a PV access mode (asCSIAccessModeV1)."""
    if mode == "ReadWriteOnce":
        return "SINGLE_NODE_MULTI_WRITER" if single_node_multi_writer else "SINGLE_NODE_WRITER"
    if mode == "ReadWriteOncePod":
        return "SINGLE_NODE_SINGLE_WRITER" if single_node_multi_writer else "SINGLE_NODE_WRITER"
    return {"ReadOnlyMany": "MULTI_NODE_READER_ONLY",
            "ReadWriteMany": "MULTI_NODE_MULTI_WRITER"}.get(mode, "UNKNOWN")


def volume_context(source: CsiSource, pod: pods.Pod, policy: DriverPolicy) -> dict[str, str]:
    """The volume context of NodePublishVolume: the PV's attributes, and the pod's facts when
    the driver asks for them (getPodInfoAttrs)."""
    context = dict(source.volume_attributes)
    if policy.pod_info_on_mount:
        context |= {
            "csi.storage.k8s.io/pod.name": pod.name,
            "csi.storage.k8s.io/pod.namespace": pod.namespace,
            "csi.storage.k8s.io/pod.uid": pod.uid,
            "csi.storage.k8s.io/serviceAccount.name": tokens.service_account(pod),
            "csi.storage.k8s.io/ephemeral": str(source.ephemeral).lower(),
        }
    return context


def applies_fs_group(policy: DriverPolicy, source: CsiSource, *, read_only: bool) -> bool:
    """Whether the node changes the volume's ownership to the fsGroup (supportsFSGroup)."""
    if read_only or policy.fs_group_policy == "None":
        return False
    if policy.fs_group_policy == "File":
        return True
    # hasReadWriteOnce: any of the PV's modes (an inline volume counts as ReadWriteOnce).
    writable_once = {"ReadWriteOnce", "ReadWriteOncePod"} & set(source.access_modes)
    return bool(source.fs_type) and bool(writable_once)


def pod_data(name: str, source: CsiSource, node: str) -> str:
    """The vol_data.json beside a pod's published volume (what teardown reads); `name` is
    the PV's, or an inline volume's own."""
    mode = "Ephemeral" if source.ephemeral else "Persistent"
    return json.dumps({
        "specVolID": name, "volumeHandle": source.volume_handle,
        "driverName": source.driver, "nodeName": node, "volumeLifecycleMode": mode,
        "attachmentID": attachment_name(source.volume_handle, source.driver, node),
    }, sort_keys=True)


def staging_data(source: CsiSource) -> str:
    """The vol_data.json beside a staged volume."""
    return json.dumps({"volumeHandle": source.volume_handle, "driverName": source.driver},
                      sort_keys=True)


def read_data(text: str) -> tuple[str, str]:
    """(driver, volume handle) of a vol_data.json ("", "" when unreadable)."""
    try:
        data = json.loads(text)
    except ValueError:
        return "", ""
    data = apijson.obj(data)
    return str(data.get("driverName") or ""), str(data.get("volumeHandle") or "")


def node_ids(*, drivers: Mapping[str, str]) -> str | None:
    """The Node's annotation for the registered drivers (driver -> node ID), as the kubelet
    writes it; None (removed) when there are none."""
    if not drivers:
        return None
    return json.dumps(dict(sorted(drivers.items())), separators=(",", ":"))
