"""PersistentVolumeClaims on a nodelet node, with the real control plane's PV binder and
ephemeral-volume controller: a `local` PV bind-mounted under the pod (fsGroup applied,
unmounted when the pod goes, the data kept), a `hostPath` PV used in place, a claim that is
not bound yet keeping the pod waiting with the kubelet's words until it is, a generic
ephemeral volume's claim made by the controller-manager and owned by the pod, a claim whose
PV selects another node, and a raw block PV (a loop device) given to the container as a
device."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.controlplane import AdminClient, conditions, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "claims-node"
PVS = "/api/v1/persistentvolumes"


def _claims(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/persistentvolumeclaims" + (f"/{name}" if name else "")


def _pv(name: str, source: dict[str, Any], *, node: str = NODE, mode: str = "Filesystem",
        claim: tuple[str, str] | None = None, storage_class: str = "",
        gid: int | None = None) -> dict[str, Any]:
    """A 1Gi PV for one claim (pre-bound with `claim`: namespace, name), on `node`."""
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class,
        "volumeMode": mode, **source,
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
    }
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    meta: dict[str, Any] = {"name": name}
    if gid is not None:  # a group every container of a pod using it gets
        meta["annotations"] = {"pv.beta.kubernetes.io/gid": str(gid)}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def _pvc(name: str, *, volume: str = "", mode: str = "Filesystem",
         storage_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "volumeMode": mode,
                            "storageClassName": storage_class,
                            "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": spec}


@contextlib.asynccontextmanager
async def _volumes(admin: AdminClient, *pvs: dict[str, Any]) -> AsyncIterator[None]:
    """The PVs, deleted at the end (they are cluster-wide; their data is the test's)."""
    for pv in pvs:
        await admin.create(PVS, pv)
    try:
        yield
    finally:
        for pv in pvs:
            await admin.delete(f"{PVS}/{pv['metadata']['name']}")


@contextlib.contextmanager
def _host_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="nodelet-pv-"))
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


async def _phase(admin: AdminClient, namespace: str, name: str, phase: str) -> dict[str, Any]:
    return await eventually(lambda: admin.get(pod_path(namespace, name)), within=90,
                            until=lambda p: p and p.get("status", {}).get("phase") == phase,
                            seen=lambda p: repr((p or {}).get("status")),
                            what=f"pod {name} {phase}")


async def _events(admin: AdminClient, namespace: str, name: str) -> list[str]:
    items = await admin.items(f"/api/v1/namespaces/{namespace}/events",
                              fieldSelector=f"involvedObject.name={name}")
    return [f"{e['reason']}: {e['message']}" for e in items]


def _mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo") as info:
        return [line.split()[4] for line in info if line.split()[4].startswith(str(path))]


async def test_a_local_pv_is_mounted_for_its_pod_and_unmounted_when_it_goes_across_a_restart(
        join: Any, admin: AdminClient, namespace: str) -> None:
    with _host_dir() as data:
        (data / "before").write_text("kept\n")
        pv = f"local-{namespace}"
        async with join(NODE) as harness, _volumes(admin, _pv(
                pv, {"local": {"path": str(data)}}, claim=(namespace, "data"), gid=3456)):
            await admin.create(_claims(namespace), _pvc("data", volume=pv))
            writer = pod("writer", node=NODE, command="cat /data/before && echo hi > "
                          "/data/written && id -G > /data/groups && sleep 1000000",
                          securityContext={"fsGroup": 2345,
                                           "fsGroupChangePolicy": "OnRootMismatch"},
                          volumes=[{"name": "store",
                                    "persistentVolumeClaim": {"claimName": "data"}}])
            writer["spec"]["containers"][0]["volumeMounts"] = [
                {"name": "store", "mountPath": "/data"}]
            await admin.create(pod_path(namespace), writer)
            running = await _phase(admin, namespace, "writer", "Running")
            uid = running["metadata"]["uid"]
            assert (data / "written").read_text() == "hi\n"
            # The fsGroup, then the PV's group (its gid annotation).
            groups = (await eventually(lambda: (data / "groups").read_text(), within=30,
                                       ignoring=(FileNotFoundError,), what="id -G")).split()
            assert groups[-2:] == ["2345", "3456"], groups
            # The kubelet's layout: the PV's path bound onto the pod's directory for the PV,
            # owned by the fsGroup (setgid, group-writable).
            target = harness.root / "data" / "pods" / uid / "volumes" / \
                "kubernetes.io~local-volume" / pv
            assert str(target) in _mounts_under(harness.root)
            info = os.stat(data)
            assert info.st_gid == 2345 and info.st_mode & 0o2070 == 0o2070
            # nodelet stops with the volume mounted, the pod is deleted meanwhile: started
            # again, it finds the mount on disk and takes it down with the pod.
            await harness.stop(terminate_pods=False)
            assert str(target) in _mounts_under(harness.root)
            await admin.delete(pod_path(namespace, "writer"))
            await harness.start()
            await eventually(lambda: admin.get(pod_path(namespace, "writer")), within=60,
                             until=lambda p: p is None, what="the writer pod gone")
            assert _mounts_under(harness.root / "data" / "pods" / uid) == []
            assert not target.exists()
            # The data is the PV's: it stays.
            assert (data / "written").read_text() == "hi\n"


async def test_a_claim_not_bound_keeps_the_pod_waiting_until_it_is(
        join: Any, admin: AdminClient, namespace: str) -> None:
    with _host_dir() as data:
        pv = f"late-{namespace}"
        async with join(NODE):
            await admin.create(_claims(namespace), _pvc("late", storage_class="none"))
            waiting = pod("waiting", node=NODE, scheduler=False, command="sleep 1000000",
                          volumes=[{"name": "store",
                                    "persistentVolumeClaim": {"claimName": "late"}}])
            waiting["spec"]["containers"][0]["volumeMounts"] = [
                {"name": "store", "mountPath": "/data"}]
            await admin.create(pod_path(namespace), waiting)
            # The kubelet's words (WaitForAttachAndMount's error, as syncPod's event says it).
            words = (f"FailedMount: Unable to attach or mount volumes: unmounted volumes=[store],"
                     f" unattached volumes=[], failed to process volumes=[store]: error "
                     f"processing PVC {namespace}/late: PVC is not bound")
            await eventually(lambda: _events(admin, namespace, "waiting"), within=60,
                             until=lambda seen: words in seen, seen=repr,
                             what="the FailedMount event of a claim not bound")
            found = await admin.get(pod_path(namespace, "waiting"))
            ready = conditions(found)["PodReadyToStartContainers"]
            assert (found or {})["status"]["phase"] == "Pending"
            assert ready["status"] == "False"
            # Bound now: the pod starts.
            async with _volumes(admin, _pv(pv, {"hostPath": {"path": str(data)}},
                                           claim=(namespace, "late"), storage_class="none")):
                await _phase(admin, namespace, "waiting", "Running")
                await admin.delete(pod_path(namespace, "waiting"))
                await eventually(lambda: admin.get(pod_path(namespace, "waiting")), within=60,
                                 until=lambda p: p is None, what="the pod gone")


async def test_a_generic_ephemeral_volume_uses_the_claim_made_for_the_pod(
        join: Any, admin: AdminClient, namespace: str) -> None:
    with _host_dir() as data:
        pv = f"eph-{namespace}"
        template = {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none",
                             "resources": {"requests": {"storage": "1Gi"}}}}
        async with join(NODE), _volumes(admin, _pv(
                pv, {"hostPath": {"path": str(data)}}, claim=(namespace, "scratchy-scratch"),
                storage_class="none")):
            spec = pod("scratchy", node=NODE, command="echo eph > /scratch/f && sleep 1000000",
                       volumes=[{"name": "scratch",
                                 "ephemeral": {"volumeClaimTemplate": template}}])
            spec["spec"]["containers"][0]["volumeMounts"] = [
                {"name": "scratch", "mountPath": "/scratch"}]
            await admin.create(pod_path(namespace), spec)
            running = await _phase(admin, namespace, "scratchy", "Running")
            claim = await admin.get(_claims(namespace, "scratchy-scratch")) or {}
            owner = claim["metadata"]["ownerReferences"][0]
            assert (owner["uid"], owner["controller"]) == (running["metadata"]["uid"], True)
            await eventually(lambda: (data / "f").exists(), within=30, what="the file written")
            assert (data / "f").read_text() == "eph\n"


async def test_a_claim_not_made_for_the_pod_and_a_pv_of_another_node_are_refused(
        join: Any, admin: AdminClient, namespace: str) -> None:
    with _host_dir() as data:
        pv = f"elsewhere-{namespace}"
        # A claim of the name a generic ephemeral volume would have, bound, but not made for
        # the pod (the ephemeral volume controller leaves it alone).
        async with join(NODE), _volumes(admin, _pv(
                pv, {"local": {"path": str(data)}}, node="another-node",
                claim=(namespace, "far")), _pv(
                f"foreign-{namespace}", {"hostPath": {"path": str(data)}},
                claim=(namespace, "other-scratch"), storage_class="none")):
            await admin.create(_claims(namespace), _pvc("far", volume=pv))
            await admin.create(_claims(namespace), _pvc("other-scratch", storage_class="none"))
            far = pod("far", node=NODE, scheduler=False,
                      volumes=[{"name": "store", "persistentVolumeClaim": {"claimName": "far"}}])
            far["spec"]["containers"][0]["volumeMounts"] = [{"name": "store", "mountPath": "/d"}]
            template = {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none",
                                 "resources": {"requests": {"storage": "1Gi"}}}}
            other = pod("other", node=NODE, scheduler=False, volumes=[
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}])
            other["spec"]["containers"][0]["volumeMounts"] = [
                {"name": "scratch", "mountPath": "/d"}]
            await admin.create(pod_path(namespace), far)
            await admin.create(pod_path(namespace), other)
            words = (f'FailedMount: MountVolume.NodeAffinity check failed for volume "{pv}" : '
                     "no matching NodeSelectorTerms")
            await eventually(lambda: _events(admin, namespace, "far"), within=60,
                             until=lambda seen: words in seen, seen=repr,
                             what="the node affinity refusal")
            # The claim `other-scratch` exists but is not the pod's (the controller left it).
            mine = (f"failed to process volumes=[scratch]: PVC {namespace}/other-scratch was "
                    f"not created for pod {namespace}/other (pod is not owner)")
            await eventually(lambda: _events(admin, namespace, "other"), within=60,
                             until=lambda seen: any(mine in e for e in seen), seen=repr,
                             what="the ownership refusal")


async def test_a_block_pv_is_a_device_in_the_container(
        join: Any, admin: AdminClient, namespace: str) -> None:
    with _host_dir() as data, _loop_device(data / "disk.img") as device:
        pv = f"block-{namespace}"
        async with join(NODE) as harness, _volumes(admin, _pv(
                pv, {"local": {"path": device}}, mode="Block", claim=(namespace, "disk"))):
            await admin.create(_claims(namespace), _pvc("disk", volume=pv, mode="Block"))
            spec = pod("raw", node=NODE, command="test -b /dev/xvda && printf block-data | "
                       "dd of=/dev/xvda bs=10 count=1 conv=fsync && sleep 1000000",
                       volumes=[{"name": "disk",
                                 "persistentVolumeClaim": {"claimName": "disk"}}])
            spec["spec"]["containers"][0]["volumeDevices"] = [
                {"name": "disk", "devicePath": "/dev/xvda"}]
            await admin.create(pod_path(namespace), spec)
            running = await _phase(admin, namespace, "raw", "Running")
            with open(device, "rb") as disk:
                assert await eventually(lambda: (disk.seek(0), disk.read(10))[1], within=30,
                                        until=lambda b: b == b"block-data",
                                        what="the data written through the device")
            link = harness.root / "data" / "pods" / running["metadata"]["uid"] / \
                "volumeDevices" / "kubernetes.io~local-volume" / pv
            assert os.readlink(link) == device
            await admin.delete(pod_path(namespace, "raw"))
            await eventually(lambda: admin.get(pod_path(namespace, "raw")), within=60,
                             until=lambda p: p is None, what="the raw pod gone")
            assert not os.path.lexists(link)


async def test_a_local_pv_on_a_block_device_is_formatted_and_mounted_once(
        join: Any, admin: AdminClient, namespace: str) -> None:
    """A local PV whose path is a blank block device, in Filesystem mode: formatted (ext4,
    the kubelet's default), mounted once at the kubelet's global path, bound into the pod;
    unmounted when no pod uses it, the data kept on the device."""
    with _host_dir() as data, _loop_device(data / "disk.img") as device:
        pv = f"blockfs-{namespace}"
        async with join(NODE) as harness, _volumes(admin, _pv(
                pv, {"local": {"path": device}}, claim=(namespace, "fs"))):
            await admin.create(_claims(namespace), _pvc("fs", volume=pv))
            spec = pod("onfs", node=NODE, command="echo kept > /data/f && sleep 1000000",
                       volumes=[{"name": "store", "persistentVolumeClaim": {"claimName": "fs"}}])
            spec["spec"]["containers"][0]["volumeMounts"] = [
                {"name": "store", "mountPath": "/data"}]
            await admin.create(pod_path(namespace), spec)
            await _phase(admin, namespace, "onfs", "Running")
            global_mount = harness.root / "data" / "plugins" / "kubernetes.io" / \
                "local-volume" / "mounts" / pv
            assert str(global_mount) in _mounts_under(harness.root)
            blkid = subprocess.run(["blkid", "-o", "value", "-s", "TYPE", device],
                                   capture_output=True, text=True, check=True)
            assert blkid.stdout.strip() == "ext4"
            await admin.delete(pod_path(namespace, "onfs"))
            await eventually(lambda: admin.get(pod_path(namespace, "onfs")), within=60,
                             until=lambda p: p is None, what="the pod gone")
            assert _mounts_under(global_mount) == []
            with tempfile.TemporaryDirectory() as check:
                subprocess.run(["mount", device, check], check=True)
                try:
                    assert (Path(check) / "f").read_text() == "kept\n"
                finally:
                    subprocess.run(["umount", check], check=True)


@contextlib.contextmanager
def _loop_device(image: Path) -> Iterator[str]:
    """A 16 MiB file attached to a free loop device (detached at the end)."""
    with open(image, "wb") as f:
        f.truncate(16 << 20)
    device = subprocess.run(["losetup", "--find", "--show", str(image)], check=True,
                            capture_output=True, text=True).stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "-d", device], check=False)
