"""Dynamic provisioning as kind does it: rancher's local-path-provisioner behind a default
StorageClass named `standard`.

    await localpath.deploy(plane, path=dir, socket=containerd_socket, ctr=ctr_program)
    async with localpath.deployed(plane, path=dir, socket=..., ctr=..., node=name): ...
    await localpath.release(plane, namespace)   # a test's claims and their PVs, deleted
    await localpath.remove(plane)

What is deployed is upstream's `deploy/local-path-storage.yaml` of the pinned release
(LOCAL_PATH_PROVISIONER_VERSION in kube/versions.env), object for object, but for what kind
changes and what a node without a registry needs:

- the StorageClass is kind's: `standard`, the default class
  (`storageclass.kubernetes.io/is-default-class: "true"`), `WaitForFirstConsumer`, reclaim
  policy Delete, provisioner `rancher.io/local-path`;
- the provisioner's image is `localhost/nodelet/local-path-provisioner:<version>`, built from
  the binary of kube/build.sh (images/local_path_provisioner.py) and imported into the node's
  containerd with `ctr images import` (as nodelet imports its pause and busybox archives),
  asked for with `imagePullPolicy: IfNotPresent`; its flags are explicit (upstream relies on
  their defaults);
- the helper pod that makes and removes each volume's directory on the node runs nodelet's
  busybox (`localhost/nodelet/busybox:latest`, IfNotPresent) with upstream's setup and
  teardown scripts;
- `nodePathMap` sends every node's volumes to `path`, a directory the caller owns and removes
  (`make cluster`: `build/cluster/local-path`, removed by `make cluster-down`).

A volume is a directory `<path>/<pv name>_<namespace>_<claim name>` on the node the scheduler
chose for the claim's first pod, made by a helper pod before the PV (hostPath, with a node
affinity to that node) is created, and removed by another when the PV is deleted.

The provisioner reaches the API through `kubernetes.default`: kube-proxy must run beside the
node (`make cluster` runs it; tests join with `kube_proxy=True`).

Deliberately free of the control plane module at run time (it is imported both as
`support.localpath` by the tests and by controlplane.py run as a script): `plane` is anything
with ControlPlane's async `kubectl`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from support.controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "images"))
import local_path_provisioner as image  # noqa: E402  (images/, on the path above)

NAMESPACE = "local-path-storage"
NAME = "local-path-provisioner"
SERVICE_ACCOUNT = "local-path-provisioner-service-account"
ROLE = "local-path-provisioner-role"
BINDING = "local-path-provisioner-bind"
CONFIGMAP = "local-path-config"
CLASS = "standard"
PROVISIONER = "rancher.io/local-path"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
HELPER_IMAGE = "localhost/nodelet/busybox:latest"
# The provisioner's own name for "every node not listed" in nodePathMap.
ANY_NODE = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
# How long the image may take to show in the CRI after `ctr images import` returned
# (containerd 2.x's CRI learns of it from its event stream), and the rollout to finish.
IMAGE_SEEN_WITHIN = 10.0
ROLLOUT_WITHIN = 120
REMOVE_WITHIN = 120

# Upstream's scripts: the helper pod runs them with VOL_DIR the volume's directory.
SETUP = textwrap.dedent("""\
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "$VOL_DIR"
    """)
TEARDOWN = textwrap.dedent("""\
    #!/bin/sh
    set -eu
    rm -rf "$VOL_DIR"
    """)


def _meta(name: str, namespaced: bool = True) -> dict[str, Any]:
    return {"name": name, **({"namespace": NAMESPACE} if namespaced else {})}


def _rbac() -> list[dict[str, Any]]:
    """Upstream's Role (the helper pods), ClusterRole and their bindings."""
    rbac = "rbac.authorization.k8s.io/v1"
    read = ["get", "list", "watch"]
    write = ["get", "list", "watch", "create", "patch", "update", "delete"]
    subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    return [
        {"apiVersion": rbac, "kind": "Role", "metadata": _meta(ROLE),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": write}]},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": _meta(ROLE, False), "rules": [
            {"apiGroups": [""], "verbs": read, "resources": [
                "nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"]},
            {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": write},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": read}]},
        {"apiVersion": rbac, "kind": "RoleBinding", "metadata": _meta(BINDING),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
         "subjects": subject},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": _meta(BINDING, False),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": ROLE},
         "subjects": subject},
    ]


def _helper_pod() -> str:
    """Upstream's helperPod.yaml with nodelet's busybox (the provisioner adds the volumes,
    the command, the node and the namespace)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "helper-pod"},
        "spec": {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "node.kubernetes.io/disk-pressure", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{"name": "helper-pod", "image": HELPER_IMAGE,
                            "imagePullPolicy": "IfNotPresent"}],
        },
    }, indent=2)


def _config(path: Path) -> dict[str, Any]:
    config = {"nodePathMap": [{"node": ANY_NODE, "paths": [str(path)]}]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CONFIGMAP), "data": {
        "config.json": json.dumps(config, indent=2), "setup": SETUP, "teardown": TEARDOWN,
        "helperPod.yaml": _helper_pod()}}


def _deployment(node: str | None) -> dict[str, Any]:
    command = [
        image.PROGRAM, "--debug", "start", "--config", "/etc/config/config.json",
        "--provisioner-name", PROVISIONER, "--namespace", NAMESPACE,
        "--service-account-name", SERVICE_ACCOUNT, "--configmap-name", CONFIGMAP,
        "--helper-image", HELPER_IMAGE,
    ]
    selector = {"kubernetes.io/os": "linux"} | ({"kubernetes.io/hostname": node} if node else {})
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME),
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": NAME}}, "template": {
            "metadata": {"labels": {"app": NAME}},
            "spec": {
                "serviceAccountName": SERVICE_ACCOUNT, "nodeSelector": selector,
                "containers": [{
                    "name": NAME, "image": image.image_name(),
                    "imagePullPolicy": "IfNotPresent", "command": command,
                    "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/config/"}],
                    "env": [{"name": "POD_NAMESPACE",
                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"}],
                }],
                "volumes": [{"name": "config-volume", "configMap": {"name": CONFIGMAP}}],
            }}},
    }


def storage_class() -> dict[str, Any]:
    """kind's default class."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": CLASS, "annotations": {DEFAULT_CLASS: "true"}},
            "provisioner": PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete"}


def objects(*, path: Path, node: str | None = None) -> list[dict[str, Any]]:
    """Every object, the namespace first; `node`: the provisioner's pod goes there."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(SERVICE_ACCOUNT)},
        *_rbac(), _deployment(node), storage_class(), _config(path),
    ]


def manifest(**kwargs: Any) -> bytes:
    """`objects(...)` as one v1 List for `kubectl apply -f -`."""
    return json.dumps({"apiVersion": "v1", "kind": "List",
                       "items": objects(**kwargs)}).encode()


# -- the image on the node -------------------------------------------------------------------


async def import_image(*, socket: Path, ctr: str) -> str:
    """Build the image's archive if needed, import it into the containerd listening on
    `socket` (namespace k8s.io) and wait until its CRI knows the image; its reference."""
    from nodelet import settings
    from nodelet.adapters.cri import client as cri_client

    archive = await asyncio.to_thread(image.build_archive)
    done = await asyncio.to_thread(
        subprocess.run, [ctr, "--address", str(socket), "-n", "k8s.io", "images", "import",
                         str(archive)], capture_output=True, text=True, timeout=120,
        check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ctr images import {archive}: {done.stderr.strip()}")
    ref = image.image_name()
    client = await cri_client.RuntimeClient.connect(f"unix://{socket}",
                                                    timeouts=settings.CriTimeouts())
    try:
        deadline = time.monotonic() + IMAGE_SEEN_WITHIN
        while await client.image_status(ref) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ref} imported, not in the CRI after {IMAGE_SEEN_WITHIN}s")
            await asyncio.sleep(0.1)
    finally:
        await client.close()
    return ref


# -- deploy and remove -------------------------------------------------------------------------


async def _kubectl(plane: ControlPlane, *args: str, stdin: bytes | None = None,
                   timeout: float = 60.0) -> str:
    code, out, err = await plane.kubectl(*args, stdin=stdin, timeout=timeout)
    if code != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {(out + err).decode().strip()}")
    return out.decode()


async def deploy(plane: ControlPlane, *, path: Path, socket: Path, ctr: str,
                 node: str | None = None) -> None:
    """Import the image into the node's containerd (`socket`), apply every object and wait
    until the provisioner's Deployment is rolled out. `path` is made (0755) if missing."""
    path.mkdir(parents=True, exist_ok=True)
    await import_image(socket=socket, ctr=ctr)
    await _kubectl(plane, "apply", "-f", "-", stdin=manifest(path=path, node=node))
    await _kubectl(plane, "rollout", "status", f"deployment/{NAME}", "-n", NAMESPACE,
                   f"--timeout={ROLLOUT_WITHIN}s", timeout=ROLLOUT_WITHIN + 10)


async def remove(plane: ControlPlane) -> None:
    """Delete every object and wait until they are gone (the namespace too). The volumes'
    directories are the caller's: a PV still there keeps its own. The Deployment goes first,
    its pod with it (foreground), so that no event of its node about it comes to a namespace
    being terminated (kube-apiserver refuses those, 403)."""
    await _kubectl(plane, "delete", f"deployment/{NAME}", "-n", NAMESPACE, "--ignore-not-found",
                   "--cascade=foreground", "--wait", f"--timeout={REMOVE_WITHIN}s",
                   timeout=REMOVE_WITHIN + 10)
    await _kubectl(plane, "delete", "-f", "-", "--ignore-not-found", "--wait",
                   f"--timeout={REMOVE_WITHIN}s", stdin=manifest(path=Path("/")),
                   timeout=REMOVE_WITHIN + 10)


async def _volumes_of(plane: ControlPlane, namespace: str) -> list[str]:
    """The PVs of class `standard` bound (or released) to claims of `namespace`."""
    found = json.loads(await _kubectl(plane, "get", "persistentvolumes", "-o", "json"))
    return [pv["metadata"]["name"] for pv in found["items"]
            if pv["spec"].get("storageClassName") == CLASS
            and (pv["spec"].get("claimRef") or {}).get("namespace") == namespace]


async def release(plane: ControlPlane, namespace: str, *, within: float = REMOVE_WITHIN) -> None:
    """Delete the StatefulSets, pods and claims of `namespace` (a test's own) and wait until
    the PVs provisioned for them are deleted: the provisioner's teardown helper pods have
    removed their directories. Before `remove`, or the PVs would wait for a provisioner."""
    from support.polling import eventually

    await _kubectl(plane, "delete", "statefulsets,pods,persistentvolumeclaims", "--all",
                   "-n", namespace, "--wait", f"--timeout={within:.0f}s",
                   timeout=within + 10)
    await eventually(lambda: _volumes_of(plane, namespace), within=within, every=0.2,
                     until=lambda left: not left,
                     what=f"the PVs of the claims of {namespace} deleted")


@contextlib.asynccontextmanager
async def deployed(plane: ControlPlane, *, path: Path, socket: Path, ctr: str,
                   node: str | None = None) -> AsyncIterator[None]:
    """`deploy` for the block's time, `remove` after it."""
    try:
        await deploy(plane, path=path, socket=socket, ctr=ctr, node=node)
        yield
    finally:
        await remove(plane)
