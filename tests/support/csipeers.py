"""A CSI driver's upstream peers for a test on the session's real control plane: the CSI mock
driver on a unix socket, kubernetes-csi's external-provisioner and external-attacher (and,
with `resizer=True`, its external-resizer) beside it as host processes, its CSIDriver object
and a StorageClass.

    async with csi_peers(plane, admin, driver="csi-mock.nodelet.test",
                         socket_dir=data_dir / "plugins" / "csi-mock.nodelet.test",
                         attach_required=True, logs=tmp_path) as peers:
        peers.mock.socket        # <socket_dir>/csi.sock, where nodelet's plugin watcher looks
        peers.storage_class      # the class to claim from ("csi-mock" unless told)
        peers.mock.calls()       # the gRPC calls the driver answered, from its log

Where things come from (versions in kube/versions.env; `make kube` builds all four):

- `csi-mock-driver` (build/kube/<KUBE_VERSION>/): the mock driver of the Kubernetes e2e suite
  (`k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service` at KUBE_VERSION, which
  links CSI spec v1.12), served by kube/csi-mock/main.go. csi-test, where it used to live,
  removed its command in v4.3.0 (csi-test/v5 has none), and the Go proxy serves neither
  csi-test/v4 nor csi-driver-host-path; the e2e suite runs this same service inside e2e.test.
- `csi-provisioner` v6.4.0, `csi-attacher` v4.13.0 and `csi-resizer` v2.3.0
  (build/kube/<name>-<version>/), static, from their own modules (kube/external-provisioner,
  kube/external-attacher, kube/external-resizer; CSI spec v1.13). The resizer's module path
  is github.com/kubernetes-csi/external-resizer/v2.

What the mock driver does (read in its source at KUBE_VERSION):

- Flags (kube/csi-mock/main.go): `--endpoint` the socket (a stale one is replaced; removed on
  SIGTERM), `--name` the driver name, `--disable-attach`, `--attach-limit`,
  `--node-expand-required` (passed when `resizer=True` and no `mock_args` are given),
  `--enable-topology` and a few more; klog's `-v`. At `-v=3` it logs
  every call as `gRPCCall: {"Method":..., "Request":..., "Response":..., "Error":...}`
  (`MockDriver.calls()` reads them back).
- Identity: GetPluginInfo answers the name and vendor version 0.3.0; Probe is ready;
  capabilities CONTROLLER_SERVICE and online VOLUME_EXPANSION (+ accessibility constraints
  with `--enable-topology`).
- The node ID is the driver name, always: NodeGetInfo reports it, and ControllerPublish and
  ControllerUnpublish refuse any other node ID (NotFound). So the CSINode entry of any node
  names the driver itself as node ID; one mock stands for one node.
- Controller capabilities: CREATE_DELETE_VOLUME, PUBLISH_UNPUBLISH_VOLUME (unless
  `--disable-attach`), LIST_VOLUMES(+_PUBLISHED_NODES), GET_CAPACITY, snapshots,
  PUBLISH_READONLY, CLONE_VOLUME, GET_VOLUME, GET_VOLUME_HEALTH, MODIFY_VOLUME, EXPAND_VOLUME.
  ControllerExpandVolume sets the volume's capacity to the required bytes (InvalidArgument
  for a smaller one) and answers them with node_expansion_required as
  `--node-expand-required`; NodeExpandVolume answers the required bytes, changes nothing
  on disk.
  CreateVolume: a volume with the next number as ID (1-3 are preset "Mock Volume N"), the
  required (or limit) bytes as capacity, 100 GiB when none asked, OutOfRange from 1 TiB;
  volume_context `{"name": <the CreateVolume name, the PV's name>}` (the provisioner adds
  `storage.kubernetes.io/csiProvisionerIdentity` to the PV's volumeAttributes).
  ControllerPublish answers publish_context `{"device": "/dev/mock", "readonly":
  "false"|"true"}`; ListVolumes reports every volume published to its node (with attach),
  so the attacher's reconciler never marks an attachment detached. With `--disable-attach`
  the attacher takes its trivial handler: VolumeAttachments are marked attached without a
  call to the driver (and with attachRequired false none are made).
- Node capabilities: STAGE_UNSTAGE_VOLUME and GET_VOLUME_STATS always (+ EXPAND_VOLUME,
  GET_VOLUME_HEALTH, VOLUME_MOUNT_GROUP when asked). NodeStage wants
  publish_context["device"] (InvalidArgument without it, unless `--disable-attach`): the
  VolumeAttachment's attachmentMetadata must reach it. NodeStage and NodeUnstage touch
  nothing on disk (only its memory). NodePublish makes the target directory (one `mkdir`
  0755, not its parents: the caller makes `.../<pv>/`, the driver `.../<pv>/mount`) and mounts
  nothing; NodeUnpublish removes the target path, recursively (whatever a pod wrote there
  goes with it). NodeGetVolumeStats answers one usage entry, total = the volume's capacity
  in bytes (no used, available or inodes), for a path it published, NotFound otherwise.
- No state across restarts: volumes, attachments and publications live in its memory; a new
  process knows only the 3 preset volumes and numbers new ones from 4 again, so a staged
  volume is NotFound after a restart. The sidecars exit when their connection to the socket
  is lost (upstream's ExitOnConnectionLoss): restart them with the driver. The sidecars may
  send a call twice (idempotent: ControllerPublish on the attachment's own finalizer update,
  DeleteVolume on the PV's deletion): count calls as sets.
- Its socket's path must fit a sockaddr_un (107 bytes): `MockDriver.start` refuses a longer
  one (pytest's tmp_path plus `plugins/<driver>/csi.sock` comes close). Ready means the
  socket accepts a connection (it serves right after it binds).

The sidecars run with explicit flags (`provisioner_args`, `attacher_args`,
`resizer_args`): leader election off, `--node-deployment=false` (provisioner), capacity
tracking off, `--timeout=30s` (for the resizer, given explicitly, also the deadline of
ControllerExpandVolume and ControllerModifyVolume), retry intervals 1 s to 5 s, an HTTP
endpoint on a free loopback port (its `/metrics` answers once the sidecar reached the
driver: that is the readiness polled), `-v=5`. No feature gate is needed: the resizer v2.3.0
has none for RecoverVolumeExpansionFailure (GA in Kubernetes 1.34; its expand-and-recover
path is the only one), and its VolumeAttributesClass gate follows the API's discovery (v1 is
served). Each authenticates as a user of its own (`nodelet-tests:csi-provisioner:<driver>`,
a client certificate of the plane's CA) bound to a ClusterRole with the rules of upstream's
deploy/kubernetes/rbac.yaml `external-provisioner-runner` / `external-attacher-runner` /
`external-resizer-runner`; upstream's namespaced Roles (Leases for leader election,
CSIStorageCapacity, pods and ReplicaSets for capacity owners) serve what is off here and are
left out.

The StorageClass has `allowVolumeExpansion: true` (with or without the resizer; without it
nothing carries an expansion out). What the resizer does to a bound claim of the driver
whose `spec.resources.requests.storage` grew (read in its source at v2.3.0, seen in
test_csi_peers.py): status.allocatedResources storage = the new size,
allocatedResourceStatuses storage = ControllerResizeInProgress and the Resizing condition;
ControllerExpandVolume with the new size as required bytes; the PV's spec.capacity patched
to the answered size (with annotation `volume.alpha.kubernetes.io/pre-resize-capacity` = the
old one when the node must expand). When the driver answers node_expansion_required (the
mock with `--node-expand-required`, and it then advertises EXPAND_VOLUME on the node):
allocatedResourceStatuses storage = NodeResizePending and the FileSystemResizePending
condition beside Resizing, status.capacity still the old size: a node takes over there
(NodeExpandVolume, then status.capacity = the new size, no resize status, no resize
conditions; the resizer then drops the PV's annotation). Otherwise the resizer itself
finishes: status.capacity = the new size, no allocatedResourceStatuses, no resize
conditions, and the claim's annotation `volume.kubernetes.io/node-expansion-not-required`.

At the end of the block, in this order: VolumeAttachments of the driver deleted (the attacher
detaches) and the CSINodes of `CsiPeers.add_csinode` deleted, claims bound to the driver's PVs
deleted and those PVs gone (the provisioner calls DeleteVolume), the sidecars (the resizer
too) and the mock stopped by PID (SIGTERM, SIGKILL after 15 s), the socket removed, the
StorageClass, CSIDriver and RBAC objects deleted. Logs are files in `logs`; keep them when a
test failed.

Exceptions: `CsiPeerError` when a program is missing (run `make kube`), exits, or is not ready
in time (its log's tail in the message).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.controlplane import (
    AdminClient,
    Authority,
    Component,
    ControlPlane,
    ControlPlaneError,
    binary,
    free_ports,
    kubeconfig_text,
    tool,
)
from support.polling import eventually

SOCKET = "csi.sock"  # as the kubelet's /var/lib/kubelet/plugins/<driver>/csi.sock
# A unix socket's path fits sockaddr_un.sun_path (108 bytes with its NUL) or bind() fails.
SOCKET_PATH_MAX = 107
# How long a program may take to come up (the sidecars reach the driver within a second or
# two on 2 cores), and objects to go at the end.
READY_WITHIN = 60.0
GONE_WITHIN = 60.0
RBAC = "rbac.authorization.k8s.io/v1"
STORAGE = "storage.k8s.io/v1"
# The rules of upstream's deploy/kubernetes/rbac.yaml ClusterRoles, per sidecar.
_READ = ["get", "list", "watch"]
PROVISIONER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["persistentvolumes"],
     "verbs": [*_READ, "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": [*_READ, "update"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["events"],
     "verbs": ["list", "watch", "create", "update", "patch"]},
    {"apiGroups": ["snapshot.storage.k8s.io"], "resources": ["volumesnapshots"],
     "verbs": [*_READ, "update"]},
    {"apiGroups": ["snapshot.storage.k8s.io"], "resources": ["volumesnapshotcontents"],
     "verbs": ["get", "list"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": _READ},
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": _READ},
]
ATTACHER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": [*_READ, "patch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": _READ},
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"],
     "verbs": [*_READ, "patch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments/status"],
     "verbs": ["patch"]},
]
RESIZER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": [*_READ, "patch"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["pods"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"],
     "verbs": ["list", "watch", "create", "update", "patch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattributesclasses"],
     "verbs": _READ},
]


class CsiPeerError(Exception):
    """A CSI peer cannot run; the message says what to do or shows its log."""


def _program(path: Any) -> str:
    try:
        return str(path())
    except ControlPlaneError as e:
        raise CsiPeerError(str(e)) from e


def _alive(component: Component) -> None:
    if not component.alive():
        code = component.process.returncode if component.process else None
        raise CsiPeerError(f"{component.name} exited ({code}):\n{component.tail()}")


def _start(component: Component) -> None:
    """Component.start without KUBECONFIG in the environment: the provisioner takes it over
    its --kubeconfig flag."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with component.log.open("ab") as out:
        component.process = subprocess.Popen(
            component.args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env=env)


async def _stop(component: Component) -> None:
    await asyncio.to_thread(component.stop)


# -- the mock driver -------------------------------------------------------------------------


@dataclass
class MockDriver:
    """The mock driver serving `name` on `<socket_dir>/csi.sock`."""

    name: str
    socket_dir: Path
    log: Path
    attach: bool = True  # PUBLISH_UNPUBLISH_VOLUME (else --disable-attach)
    extra_args: Sequence[str] = ()
    component: Component | None = None

    @property
    def socket(self) -> Path:
        return self.socket_dir / SOCKET

    @property
    def node_id(self) -> str:
        """What NodeGetInfo reports (and ControllerPublish accepts): the driver name."""
        return self.name

    def args(self) -> list[str]:
        return [_program(lambda: binary("csi-mock-driver")), f"--endpoint={self.socket}",
                f"--name={self.name}", f"--disable-attach={str(not self.attach).lower()}",
                "--attach-limit=0", "-v=3", *self.extra_args]

    async def start(self) -> None:
        """Start it and wait until its socket accepts a connection."""
        if len(os.fsencode(self.socket)) > SOCKET_PATH_MAX:
            raise CsiPeerError(f"{self.socket}: longer than a unix socket's {SOCKET_PATH_MAX}"
                               " bytes; give a shorter socket_dir or driver name")
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self.component = Component(f"csi-mock-driver {self.name}", self.args(), self.log)
        _start(self.component)
        await eventually(self._serving, within=READY_WITHIN, every=0.05,
                         what=f"{self.socket} accepting connections",
                         seen=lambda _: self.component.tail(5) if self.component else "")

    def _serving(self) -> bool:
        assert self.component is not None
        _alive(self.component)
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(self.socket))
            except OSError:
                return False
        return True

    async def stop(self) -> None:
        """Stop it by PID; its socket is gone after (it removes it on SIGTERM; a SIGKILL
        leaves it, so it is removed here too)."""
        if self.component is not None:
            await _stop(self.component)
        self.socket.unlink(missing_ok=True)

    def calls(self, method: str = "") -> list[dict[str, Any]]:
        """The calls it answered so far, oldest first (`method`: those whose gRPC method
        ends with it, e.g. "NodePublishVolume")."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            _, marker, body = line.partition("gRPCCall: ")
            if marker:
                call = json.loads(body)
                if call["Method"].endswith(method):
                    found.append(call)
        return found


# -- the sidecars ----------------------------------------------------------------------------


@dataclass
class Sidecar:
    """An external-provisioner, -attacher or -resizer for one driver, as a host process."""

    program: str  # "csi-provisioner", "csi-attacher" or "csi-resizer"
    args: list[str]
    log: Path
    port: int  # its --http-endpoint on 127.0.0.1
    component: Component | None = None

    async def start(self) -> None:
        """Start it and wait until its /metrics answers (it has reached the driver)."""
        self.component = Component(self.program, self.args, self.log)
        _start(self.component)
        await eventually(self._ready, within=READY_WITHIN, every=0.1,
                         what=f"{self.program} /metrics on 127.0.0.1:{self.port}",
                         seen=lambda _: self.component.tail(5) if self.component else "")

    async def _ready(self) -> bool:
        assert self.component is not None
        _alive(self.component)
        return await asyncio.to_thread(self._metrics)

    def _metrics(self) -> bool:
        url = f"http://127.0.0.1:{self.port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    async def stop(self) -> None:
        if self.component is not None:
            await _stop(self.component)


def _identity(plane: ControlPlane, user: str, name: str, directory: Path) -> Path:
    """A kubeconfig for `user`, by a client certificate of the plane's CA."""
    pair = Authority.load(plane.ca, plane.root / "pki").issue(name, user)
    path = directory / f"{name}.conf"
    path.write_text(kubeconfig_text(plane.server, plane.ca.cert, user=user, cert=pair))
    path.chmod(0o600)
    return path


def provisioner_args(kubeconfig: Path, socket_path: Path, port: int) -> list[str]:
    return [
        _program(lambda: tool("csi-provisioner")), f"--kubeconfig={kubeconfig}",
        f"--csi-address={socket_path}", "--leader-election=false",
        f"--http-endpoint=127.0.0.1:{port}", "--timeout=30s", "--retry-interval-start=1s",
        "--retry-interval-max=5s", "--worker-threads=4", "--volume-name-prefix=pvc",
        "--node-deployment=false", "--enable-capacity=false", "--extra-create-metadata=false",
        "--immediate-topology=true", "--strict-topology=false", "--default-fstype=",
        "--controller-publish-readonly=false", "--prevent-volume-mode-conversion=true",
        "--kube-api-qps=20", "--kube-api-burst=40", "-v=5",
    ]


def attacher_args(kubeconfig: Path, socket_path: Path, port: int) -> list[str]:
    return [
        _program(lambda: tool("csi-attacher")), f"--kubeconfig={kubeconfig}",
        f"--csi-address={socket_path}", "--leader-election=false",
        f"--http-endpoint=127.0.0.1:{port}", "--timeout=30s", "--retry-interval-start=1s",
        "--retry-interval-max=5s", "--worker-threads=4", "--resync=10m",
        "--reconcile-sync=1m", "--default-fstype=", "--kube-api-qps=20",
        "--kube-api-burst=40", "-v=5",
    ]


def resizer_args(kubeconfig: Path, socket_path: Path, port: int) -> list[str]:
    # --timeout given explicitly is also the deadline of ControllerExpandVolume and
    # ControllerModifyVolume (over --resize-timeout and --modify-timeout).
    return [
        _program(lambda: tool("csi-resizer")), f"--kubeconfig={kubeconfig}",
        f"--csi-address={socket_path}", "--leader-election=false",
        f"--http-endpoint=127.0.0.1:{port}", "--timeout=30s", "--retry-interval-start=1s",
        "--retry-interval-max=5s", "--workers=4", "--resync-period=10m",
        "--handle-volume-inuse-error=true", "--extra-modify-metadata=false",
        "--kube-api-qps=20", "--kube-api-burst=40", "-v=5",
    ]


# -- objects ---------------------------------------------------------------------------------


def csidriver(name: str, *, attach_required: bool, pod_info_on_mount: bool = True,
              fs_group_policy: str = "File",
              lifecycle_modes: Sequence[str] = ("Persistent",),
              requires_republish: bool = False) -> dict[str, Any]:
    return {"apiVersion": STORAGE, "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"attachRequired": attach_required, "podInfoOnMount": pod_info_on_mount,
                     "fsGroupPolicy": fs_group_policy,
                     "volumeLifecycleModes": list(lifecycle_modes),
                     "requiresRepublish": requires_republish, "storageCapacity": False}}


def storage_class(name: str, driver: str, *, binding: str) -> dict[str, Any]:
    return {"apiVersion": STORAGE, "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": driver, "volumeBindingMode": binding, "reclaimPolicy": "Delete",
            "allowVolumeExpansion": True}


def csinode(node: str, driver: str, node_id: str) -> dict[str, Any]:
    """A CSINode naming `driver` on `node` (what a node's registration writes; the attacher
    reads the node ID there). For tests without a node."""
    return {"apiVersion": STORAGE, "kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": [{"name": driver, "nodeID": node_id, "topologyKeys": None}]}}


def _rbac(name: str, user: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name},
         "rules": rules},
        {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": user}]},
    ]


def _path(obj: dict[str, Any]) -> str:
    group = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
              "CSIDriver": "csidrivers", "StorageClass": "storageclasses",
              "CSINode": "csinodes"}[obj["kind"]]
    return f"{group}/{plural}/{obj['metadata']['name']}"


# -- all together ----------------------------------------------------------------------------


@dataclass
class CsiPeers:
    """What `csi_peers` started; `users` are the sidecars' API identities."""

    driver: str
    mock: MockDriver
    provisioner: Sidecar
    attacher: Sidecar
    storage_class: str
    users: dict[str, str]
    objects: list[dict[str, Any]] = field(default_factory=list)
    csinodes: list[str] = field(default_factory=list)
    resizer: Sidecar | None = None  # with `resizer=True`

    async def add_csinode(self, admin: AdminClient, node: str) -> None:
        """Create a CSINode for `node` naming this driver (deleted at the end)."""
        obj = csinode(node, self.driver, self.mock.node_id)
        await admin.create(_path(obj).rsplit("/", 1)[0], obj)
        self.csinodes.append(node)


def _user(program: str, driver: str) -> str:
    return f"nodelet-tests:{program}:{driver}"


def _peers(plane: ControlPlane, *, driver: str, socket_dir: Path, attach_required: bool,
           logs: Path, storage_class_name: str, binding: str, pod_info_on_mount: bool,
           fs_group_policy: str, mock_args: Sequence[str] | None,
           lifecycle_modes: Sequence[str] = ("Persistent",),
           requires_republish: bool = False, resizer: bool = False) -> CsiPeers:
    if mock_args is None:
        # With the resizer: ControllerExpandVolume answers node_expansion_required, and the
        # node advertises EXPAND_VOLUME.
        mock_args = ("--node-expand-required",) if resizer else ()
    mock = MockDriver(driver, socket_dir, logs / f"csi-mock-driver-{driver}.log",
                      attach=attach_required, extra_args=mock_args)
    programs = ("csi-provisioner", "csi-attacher", *(("csi-resizer",) if resizer else ()))
    users = {p: _user(p, driver) for p in programs}
    conf = {p: _identity(plane, u, f"{p}-{driver}", logs) for p, u in users.items()}
    p_port, a_port, r_port = free_ports(3)
    provisioner = Sidecar("csi-provisioner",
                          provisioner_args(conf["csi-provisioner"], mock.socket, p_port),
                          logs / f"csi-provisioner-{driver}.log", p_port)
    attacher = Sidecar("csi-attacher", attacher_args(conf["csi-attacher"], mock.socket, a_port),
                       logs / f"csi-attacher-{driver}.log", a_port)
    rules = {"csi-provisioner": PROVISIONER_RULES, "csi-attacher": ATTACHER_RULES,
             "csi-resizer": RESIZER_RULES}
    objects = [
        *(obj for p in programs for obj in _rbac(f"nodelet-tests-{p}-{driver}", users[p],
                                                 rules[p])),
        csidriver(driver, attach_required=attach_required,
                  pod_info_on_mount=pod_info_on_mount, fs_group_policy=fs_group_policy,
                  lifecycle_modes=lifecycle_modes, requires_republish=requires_republish),
        storage_class(storage_class_name, driver, binding=binding),
    ]
    peers = CsiPeers(driver, mock, provisioner, attacher, storage_class_name, users, objects)
    if resizer:
        peers.resizer = Sidecar("csi-resizer",
                                resizer_args(conf["csi-resizer"], mock.socket, r_port),
                                logs / f"csi-resizer-{driver}.log", r_port)
    return peers


@contextlib.asynccontextmanager
async def csi_peers(plane: ControlPlane, admin: AdminClient, *, driver: str, socket_dir: Path,
                    attach_required: bool, logs: Path, storage_class_name: str = "csi-mock",
                    binding: str = "Immediate", pod_info_on_mount: bool = True,
                    fs_group_policy: str = "File",
                    mock_args: Sequence[str] | None = None,
                    lifecycle_modes: Sequence[str] = ("Persistent",),
                    requires_republish: bool = False,
                    resizer: bool = False) -> AsyncIterator[CsiPeers]:
    """The mock driver `driver` on `<socket_dir>/csi.sock` (PUBLISH_UNPUBLISH_VOLUME as
    `attach_required`; `mock_args` added to its flags, `--node-expand-required` when not
    given and `resizer`), its provisioner and attacher (and resizer with `resizer`), its
    CSIDriver (attachRequired, podInfoOnMount, fsGroupPolicy, `lifecycle_modes`,
    `requires_republish`) and a StorageClass (`binding`: Immediate or WaitForFirstConsumer),
    all ready; logs and kubeconfigs in `logs`. Everything goes at the end (see the module
    docstring)."""
    logs.mkdir(parents=True, exist_ok=True)
    peers = _peers(plane, driver=driver, socket_dir=socket_dir,
                   attach_required=attach_required, logs=logs,
                   storage_class_name=storage_class_name, binding=binding,
                   pod_info_on_mount=pod_info_on_mount, fs_group_policy=fs_group_policy,
                   mock_args=mock_args, lifecycle_modes=lifecycle_modes,
                   requires_republish=requires_republish, resizer=resizer)
    try:
        for obj in peers.objects:
            await admin.create(_path(obj).rsplit("/", 1)[0], obj)
        await peers.mock.start()
        await peers.provisioner.start()
        await peers.attacher.start()
        if peers.resizer is not None:
            await peers.resizer.start()
        yield peers
    finally:
        await _teardown(peers, admin)


async def _teardown(peers: CsiPeers, admin: AdminClient) -> None:
    try:
        await _release_attachments(peers, admin)
        await _release_volumes(peers, admin)
    finally:
        for program in (peers.resizer, peers.attacher, peers.provisioner):
            if program is not None:
                await program.stop()
        await peers.mock.stop()
        for obj in reversed(peers.objects):
            await admin.delete(_path(obj))


async def _release_attachments(peers: CsiPeers, admin: AdminClient) -> None:
    """Delete the driver's VolumeAttachments (the attacher detaches them and drops its
    finalizer) and the CSINodes of `add_csinode`; wait until the attachments are gone."""
    attachments = f"/apis/{STORAGE}/volumeattachments"

    async def mine() -> list[str]:
        return [va["metadata"]["name"] for va in await admin.items(attachments)
                if va["spec"]["attacher"] == peers.driver]

    for name in await mine():
        await admin.delete(f"{attachments}/{name}")
    await eventually(mine, until=lambda left: not left, within=GONE_WITHIN, every=0.2,
                     what=f"the VolumeAttachments of {peers.driver} gone")
    for node in peers.csinodes:
        await admin.delete(f"/apis/{STORAGE}/csinodes/{node}")


async def _volumes(peers: CsiPeers, admin: AdminClient) -> list[dict[str, Any]]:
    return [pv for pv in await admin.items("/api/v1/persistentvolumes")
            if (pv["spec"].get("csi") or {}).get("driver") == peers.driver]


async def _release_volumes(peers: CsiPeers, admin: AdminClient) -> None:
    """Delete the claims bound to the driver's PVs and wait until those PVs are gone (the
    provisioner calls DeleteVolume and removes its finalizer)."""

    async def mine() -> list[dict[str, Any]]:
        return await _volumes(peers, admin)

    for pv in await mine():
        ref = pv["spec"].get("claimRef") or {}
        if ref.get("namespace") and ref.get("name"):
            await admin.delete(f"/api/v1/namespaces/{ref['namespace']}/"
                               f"persistentvolumeclaims/{ref['name']}")
        if pv["spec"].get("persistentVolumeReclaimPolicy") != "Delete":
            await admin.delete(f"/api/v1/persistentvolumes/{pv['metadata']['name']}")
    await eventually(mine, until=lambda left: not left, within=GONE_WITHIN, every=0.2,
                     what=f"the PVs of {peers.driver} gone",
                     seen=lambda left: ", ".join(pv["metadata"]["name"] for pv in left))


def _race(e: dict[str, Any]) -> bool:
    """The attacher's JSON patch of a PV's finalizers failing its `test` op (422): it drops
    its finalizer only once the PV is being deleted, by index, while the provisioner drops
    its own; it retries and succeeds. Upstream's own race, not a refusal."""
    return bool(e["responseStatus"]["code"] == 422 and e["verb"] == "patch"
            and e.get("objectRef", {}).get("resource") == "persistentvolumes"
            and e.get("userAgent", "").startswith("csi-attacher/"))


def refused(events: list[dict[str, Any]], users: Sequence[str]) -> list[str]:
    """The audit log's requests of `users` that were refused (403, or 4xx but 404/409 and
    the attacher's finalizer race, `_race`)."""
    return [f"{e['verb']} {e.get('requestURI')} -> {e['responseStatus']['code']}"
            for e in events if e.get("user", {}).get("username") in users
            and e.get("stage") == "ResponseComplete"
            and 400 <= e.get("responseStatus", {}).get("code", 0) < 500
            and e["responseStatus"]["code"] not in (404, 409) and not _race(e)]


