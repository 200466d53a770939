"""A StatefulSet with a volumeClaimTemplates entry on the default StorageClass (`standard`,
local-path-provisioner as kind's: tests/support/localpath.py), on a nodelet node of the real
control plane, as `make cluster` gives it to a user (issue 37's acceptance):

- its 3 pods Running, each on a claim of its own that the StatefulSet controller made from the
  template and the provisioner bound to a hostPath PV on the node; each pod writes its name
  into its volume, which lands in the nodePathMap directory on the host;
- a pod deleted comes back (a new UID, the same name) on the same claim and finds its file;
- scaled to 0: no pod, no sandbox, no mount of their volumes left on the host; the claims and
  PVs stay (the StatefulSet's retention policy is Retain), the files too;
- the claims deleted: their PVs are deleted (the class's reclaim policy, Delete) and the
  directories removed by the provisioner's teardown helper pods.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from nodelet.adapters import mounts
from support import localpath
from support.controlplane import BUSYBOX, AdminClient, ControlPlane, conditions, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "statefulset-node"
REPLICAS = 3
# Writes its name the first time, finds it afterwards; says which in its log.
COMMAND = ('if [ -f /data/name ]; then echo "found $(cat /data/name)"; '
           'else hostname > /data/name && echo "wrote $(cat /data/name)"; fi; '
           'exec sleep 1000000')


def statefulset(namespace: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Service
        metadata: {{name: web, namespace: {namespace}}}
        spec:
          clusterIP: None
          selector: {{app: web}}
          ports: [{{port: 80}}]
        ---
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {{name: web, namespace: {namespace}}}
        spec:
          serviceName: web
          replicas: {REPLICAS}
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec:
              nodeSelector: {{kubernetes.io/hostname: {NODE}}}
              terminationGracePeriodSeconds: 1
              containers:
                - name: main
                  image: {BUSYBOX}
                  imagePullPolicy: IfNotPresent
                  command: ["sh", "-c", {COMMAND!r}]
                  volumeMounts: [{{name: data, mountPath: /data}}]
          volumeClaimTemplates:
            - metadata: {{name: data}}
              spec:
                accessModes: [ReadWriteOnce]
                resources: {{requests: {{storage: 16Mi}}}}
        """)


def _ready(pod: dict[str, Any]) -> bool:
    return conditions(pod).get("Ready", {}).get("status") == "True"


async def _pods(admin: AdminClient, namespace: str) -> dict[str, dict[str, Any]]:
    found = await admin.items(pod_path(namespace), labelSelector="app=web")
    return {p["metadata"]["name"]: p for p in found}


async def _claims(admin: AdminClient, namespace: str) -> dict[str, dict[str, Any]]:
    found = await admin.items(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")
    return {c["metadata"]["name"]: c for c in found}


async def _log(plane: ControlPlane, namespace: str, name: str) -> str:
    code, out, err = await plane.kubectl("logs", name, "-n", namespace)
    assert code == 0, err.decode()
    return out.decode()


def _host_mounts_of(names: set[str]) -> list[str]:
    """Mounts of the host's mount namespace whose source or mount point names one of
    `names` (a PV's directory, a pod's UID)."""
    left = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        root, point = line.split()[3:5]
        if any(name in root or name in point for name in names):
            left.append(f"{root} on {point}")
    return left


async def test_statefulset_on_the_default_class(
        join: Any, admin: AdminClient, control_plane: ControlPlane, runtime: Instance,
        namespace: str) -> None:
    async with join(NODE, kube_proxy=True) as harness:
        volumes = harness.root / "local-path"
        async with localpath.deployed(
                control_plane, path=volumes, socket=runtime.containerd.paths.socket,
                ctr=runtime.containerd.programs.ctr, node=NODE):
            try:
                await _statefulset(admin, control_plane, runtime, namespace, volumes)
            finally:
                await localpath.release(control_plane, namespace)
        assert list(volumes.iterdir()) == []
        volumes.rmdir()


async def _statefulset(admin: AdminClient, plane: ControlPlane, runtime: Instance,
                       namespace: str, volumes: Path) -> None:
    names = [f"web-{i}" for i in range(REPLICAS)]
    await plane.apply(statefulset(namespace))
    code, out, err = await plane.kubectl("rollout", "status", "statefulset/web", "-n", namespace,
                                         "--timeout=180s", timeout=200)
    assert code == 0, (out + err).decode()
    first = await eventually(lambda: _pods(admin, namespace), within=30,
                             until=lambda ps: sorted(ps) == names
                             and all(map(_ready, ps.values())),
                             seen=lambda ps: repr({n: conditions(p) for n, p in ps.items()}),
                             what=f"{REPLICAS} pods Ready")
    assert {p["spec"]["nodeName"] for p in first.values()} == {NODE}
    for name in names:
        assert await _log(plane, namespace, name) == f"wrote {name}\n"

    # Each pod's claim, made from the template, bound to a PV of the default class whose
    # directory on the host holds the pod's file.
    claims = await _claims(admin, namespace)
    assert sorted(claims) == [f"data-{n}" for n in names]
    directories: dict[str, Path] = {}
    for name in names:
        claim = claims[f"data-{name}"]
        assert claim["status"]["phase"] == "Bound"
        assert claim["spec"]["storageClassName"] == localpath.CLASS
        pv = await admin.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
        assert pv is not None
        directory = Path(pv["spec"]["hostPath"]["path"])
        assert directory.parent == volumes
        assert (directory / "name").read_text() == f"{name}\n"
        directories[name] = directory

    # A pod deleted comes back on its claim and finds its file.
    await admin.delete(pod_path(namespace, "web-1"))
    old_uid = first["web-1"]["metadata"]["uid"]
    again = await eventually(
        lambda: _pods(admin, namespace), within=90,
        until=lambda ps: "web-1" in ps and ps["web-1"]["metadata"]["uid"] != old_uid
        and _ready(ps["web-1"]),
        seen=lambda ps: repr({n: (p["metadata"]["uid"], p["status"].get("phase"))
                              for n, p in ps.items()}),
        what="web-1 back, Ready")
    assert await _log(plane, namespace, "web-1") == "found web-1\n"
    assert (await _claims(admin, namespace))["data-web-1"]["metadata"]["uid"] == \
        claims["data-web-1"]["metadata"]["uid"]
    uids = {p["metadata"]["uid"] for p in (*first.values(), *again.values())}

    # Scaled to 0: no pod, no sandbox, no mount of theirs on the host; claims and PVs stay.
    code, _, err = await plane.kubectl("scale", "statefulset/web", "-n", namespace,
                                       "--replicas=0")
    assert code == 0, err.decode()
    await eventually(lambda: _pods(admin, namespace), within=90, until=lambda ps: not ps,
                     what="every pod deleted after the scale to 0")
    await eventually(runtime.client.list_pod_sandboxes, within=60,
                     until=lambda sandboxes: not {s.uid for s in sandboxes} & uids,
                     what="every sandbox of the StatefulSet removed")
    assert _host_mounts_of(uids | {d.name for d in directories.values()}) == []
    assert mounts.mounts_under(volumes) == []
    kept = await _claims(admin, namespace)
    assert {n: c["status"]["phase"] for n, c in kept.items()} == {
        f"data-{n}": "Bound" for n in names}
    for name, directory in directories.items():
        assert (directory / "name").read_text() == f"{name}\n"
    # The claims' deletion (localpath.release, in the caller) deletes the PVs, as the
    # class's reclaim policy says, and their directories: checked there.
    for claim in kept.values():
        pv = claim["spec"]["volumeName"]
        assert (await admin.get(f"/api/v1/persistentvolumes/{pv}") or {}).get(
            "spec", {}).get("persistentVolumeReclaimPolicy") == "Delete"
