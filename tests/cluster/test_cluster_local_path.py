"""Dynamic provisioning as kind does it, on a nodelet node of the real control plane:
rancher's local-path-provisioner (built from its pinned Go module, its image imported into the
node's containerd; tests/support/localpath.py) behind the default StorageClass `standard`.

Its Deployment runs on the nodelet node. A claim that names no class gets `standard` from
kube-apiserver's DefaultStorageClass admission and waits (WaitForFirstConsumer) until a pod
using it is scheduled; the provisioner then runs a helper pod on the node that makes the
volume's directory under the nodePathMap directory, and creates a hostPath PV with a node
affinity to the node. The pod runs and writes a file, which lands in that directory on the
host; a second pod on the same claim reads it back; once the claim is deleted, the PV is
deleted and a teardown helper pod removes the directory.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from support import localpath
from support.controlplane import BUSYBOX, AdminClient, ControlPlane, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "local-path-node"
PROVISIONER_USER = (f"system:serviceaccount:{localpath.NAMESPACE}:"
                    f"{localpath.SERVICE_ACCOUNT}")


def claim(name: str, size: str = "16Mi") -> dict[str, Any]:
    """A claim of the default class (it names none)."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}}}


def user(name: str, claim_name: str, command: str, *,
         restart: str = "Always") -> dict[str, Any]:
    """A busybox pod on NODE (placed by the scheduler) with the claim at /data."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                     "terminationGracePeriodSeconds": 1, "restartPolicy": restart,
                     "containers": [{"name": "main", "image": BUSYBOX,
                                     "imagePullPolicy": "IfNotPresent",
                                     "command": ["sh", "-c", command],
                                     "volumeMounts": [{"name": "data",
                                                       "mountPath": "/data"}]}],
                     "volumes": [{"name": "data",
                                  "persistentVolumeClaim": {"claimName": claim_name}}]}}


def phase(obj: dict[str, Any] | None) -> str:
    return str((obj or {}).get("status", {}).get("phase", ""))


def deploy_args(runtime: Instance, volumes: Path) -> dict[str, Any]:
    return {"path": volumes, "socket": runtime.containerd.paths.socket,
            "ctr": runtime.containerd.programs.ctr, "node": NODE}


async def provisioner_pods(admin: AdminClient) -> list[dict[str, Any]]:
    return await admin.items(pod_path(localpath.NAMESPACE),
                             labelSelector=f"app={localpath.NAME}")


def helper_pods_created(plane: ControlPlane, pv: str) -> set[str]:
    """The helper pods the provisioner created for `pv`, by the audit log ("create" or
    "delete", the provisioner's own word for the action)."""
    return {e["objectRef"]["name"].split("-")[2] for e in plane.audit_events()
            if e.get("user", {}).get("username") == PROVISIONER_USER and e["verb"] == "create"
            and e.get("objectRef", {}).get("resource") == "pods"
            and e.get("stage") == "ResponseComplete"
            and e["responseStatus"].get("code") == 201
            and e["objectRef"].get("name", "").endswith(pv)}


async def test_claim_provisioned_on_the_node_read_back_and_deleted(
        join: Any, admin: AdminClient, control_plane: ControlPlane, runtime: Instance,
        namespace: str) -> None:
    async with join(NODE, kube_proxy=True) as harness:
        volumes = harness.root / "local-path"
        async with localpath.deployed(control_plane, **deploy_args(runtime, volumes)):
            try:
                await _claim_lifecycle(admin, control_plane, namespace, volumes)
            finally:
                await localpath.release(control_plane, namespace)
        assert await admin.get(f"/api/v1/namespaces/{localpath.NAMESPACE}") is None
        assert await admin.get(
            f"/apis/storage.k8s.io/v1/storageclasses/{localpath.CLASS}") is None
        assert list(volumes.iterdir()) == []
        volumes.rmdir()


async def _claim_lifecycle(admin: AdminClient, plane: ControlPlane, namespace: str,
                           volumes: Path) -> None:
    # The provisioner runs on the nodelet node; the class is kind's.
    (running,) = await eventually(lambda: provisioner_pods(admin), within=60,
                                  until=lambda ps: len(ps) == 1 and phase(ps[0]) == "Running",
                                  what="the provisioner's pod Running")
    assert running["spec"]["nodeName"] == NODE
    sc = await admin.get(f"/apis/storage.k8s.io/v1/storageclasses/{localpath.CLASS}")
    assert sc is not None
    assert sc["metadata"]["annotations"][localpath.DEFAULT_CLASS] == "true"
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        localpath.PROVISIONER, "WaitForFirstConsumer", "Delete")

    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    made = await admin.create(claims, claim("data"))
    assert made["spec"]["storageClassName"] == localpath.CLASS  # DefaultStorageClass admission
    assert phase(await admin.get(f"{claims}/data")) == "Pending"  # waits for a consumer

    token = secrets.token_hex(8)
    await admin.create(pod_path(namespace), user(
        "writer", "data", f"echo {token} > /data/file && exec sleep 1000000"))
    await eventually(lambda: admin.get(pod_path(namespace, "writer")), within=90,
                     until=lambda p: phase(p) == "Running", seen=phase,
                     what="the writer Running on its provisioned volume")
    bound = await eventually(lambda: admin.get(f"{claims}/data"), within=10,
                             until=lambda c: phase(c) == "Bound", seen=phase,
                             what="the claim Bound")
    pv_name = bound["spec"]["volumeName"]
    pv = await admin.get(f"/api/v1/persistentvolumes/{pv_name}")
    assert pv is not None
    spec = pv["spec"]
    assert spec["storageClassName"] == localpath.CLASS
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == \
        localpath.PROVISIONER
    term = spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert (term["key"], term["operator"], term["values"]) == (
        "kubernetes.io/hostname", "In", [NODE])
    directory = Path(spec["hostPath"]["path"])
    assert directory == volumes / f"{pv_name}_{namespace}_data"
    # The file the pod wrote, on the host.
    written = await eventually(lambda: _read(directory / "file"), within=10,
                               what=f"the writer's file in {directory}")
    assert written == f"{token}\n"
    await eventually(lambda: helper_pods_created(plane, pv_name), within=10,
                     until=lambda made: made == {"create"},
                     what="the setup helper pod in the audit log")

    # Another pod on the same claim reads it back.
    await admin.delete(pod_path(namespace, "writer"))
    await eventually(lambda: admin.get(pod_path(namespace, "writer")), within=60,
                     until=lambda p: p is None, what="the writer deleted")
    await admin.create(pod_path(namespace), user("reader", "data", "cat /data/file",
                                                 restart="Never"))
    await eventually(lambda: admin.get(pod_path(namespace, "reader")), within=60,
                     until=lambda p: phase(p) == "Succeeded", seen=phase,
                     what="the reader Succeeded")
    code, out, err = await plane.kubectl("logs", "reader", "-n", namespace)
    assert code == 0, err.decode()
    assert out.decode() == f"{token}\n"

    # The claim deleted: the PV goes (reclaim policy Delete), and a teardown helper pod
    # removes the directory.
    await admin.delete(pod_path(namespace, "reader"))
    await admin.delete(f"{claims}/data")
    await eventually(lambda: admin.get(f"/api/v1/persistentvolumes/{pv_name}"), within=60,
                     until=lambda p: p is None, what=f"{pv_name} deleted")
    await eventually(lambda: directory.exists(), within=10, until=lambda e: not e,
                     what=f"{directory} removed")
    await eventually(lambda: helper_pods_created(plane, pv_name), within=10,
                     until=lambda made: made == {"create", "delete"},
                     what="the setup and teardown helper pods in the audit log")
    await eventually(lambda: admin.items(pod_path(localpath.NAMESPACE)), within=30,
                     until=lambda ps: [p["metadata"]["name"] for p in ps] ==
                     [running["metadata"]["name"]],
                     seen=lambda ps: repr([p["metadata"]["name"] for p in ps]),
                     what="the helper pods deleted by the provisioner")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
