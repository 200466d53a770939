"""The real kubelet as a peer: standalone on a given containerd and manifest directory, or joined
to a cluster as a node.

One module for the tests (`tests/differential/`, which has `tests/` on `sys.path`) and the
benchmarks (`bench/lifecycle.py`, `bench/twin.py` put `tests/` in front of `sys.path`). The
kubelet is the one `make kube` built (kube/versions.env names its version).

`KubeletPeer.start` writes a KubeletConfiguration that keeps the kubelet's defaults except
where these machines, or running beside other agents, force a change (each is named in
`config_for`; docs/differential.md has the table), starts the kubelet with its logs in a file
and waits for its read-only `/pods`. `pods()` reads that PodList; `events()` reads the events
the kubelet recorded: standalone it has no API server to post them to, so it only logs them
(`"Event occurred"` at verbosity 3, JSON lines here). `stop` removes its static pods first (so
it stops their sandboxes itself), stops it by PID, removes what it leaves in the runtime
(its stopped sandboxes and their containers: its garbage collector would only do that a
minute later), its volume mounts, directories and cgroup root; `leftovers` says what of it is
still on the host (all empty when clean). Errors: `PeerError`.

`JoinedKubelet.join` starts it as a node of a real control plane (tests/support/controlplane.py):
TLS bootstrap from a bootstrap kubeconfig (the client certificate's CSR is approved by
kube-controller-manager's csrapproving controller, as for nodelet), a KubeletConfiguration
from `join_config_for`, no static pods. `wait_ready` waits for its Node to be Ready; `stop`
drains the node (cordoned, its pods deleted and gone from the API), stops the kubelet by PID,
deletes the Node and removes what it left as `KubeletPeer.stop` does. Its sandboxes are those
that appeared in the runtime after it started. It needs an admin of the cluster (`Admin`:
tests/support/controlplane.py's `AdminClient`), never its own credentials: the node's requests are
what benchmarks count.

Both leave the host as they found it but for what the kubelet sets host-wide whenever it
starts (its iptables utility chains KUBE-FIREWALL / KUBE-KUBELET-CANARY and its kernel
tunables: shared by every kubelet of the host, so left alone). The links to container logs
it makes in /var/log/containers (a fixed path) are removed with it.

The kubelet kills every running pod of its runtime that it does not know (its pod cleanup
treats them as orphans): give it a containerd of its own, never one other agents share.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from nodelet.adapters import mounts
from nodelet.adapters.cri import client as cri_client
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import runtime as rt

REPO = Path(__file__).resolve().parents[2]
CGROUP_BASE = Path("/sys/fs/cgroup")
# The kubelet links every container's log here (a constant of the kubelet, not a setting).
CONTAINER_LOG_LINKS = Path("/var/log/containers")
POLL = 0.2
# The kubelet logs the events it records at this verbosity (client-go's record package).
EVENT_VERBOSITY = 3


class PeerError(Exception):
    """The kubelet could not be started, read or stopped cleanly; the message says which."""


class Admin(Protocol):
    """What a joined peer asks of the cluster's admin (AdminClient of
    tests/support/controlplane.py)."""

    async def get(self, path: str) -> dict[str, Any] | None: ...

    async def items(self, path: str, **params: str) -> list[dict[str, Any]]: ...

    async def delete(self, path: str, **body: Any) -> None: ...

    async def patch(self, path: str, patch: dict[str, Any], *,
                    content_type: str = ...) -> dict[str, Any]: ...


def kube_version() -> str:
    for line in (REPO / "kube" / "versions.env").read_text().splitlines():
        if line.startswith("KUBE_VERSION="):
            return line.split("=", 1)[1].strip()
    raise PeerError("kube/versions.env names no KUBE_VERSION")


def kubelet_binary() -> Path:
    path = REPO / "build" / "kube" / kube_version() / "kubelet"
    if not path.exists():
        raise PeerError(f"no kubelet at {path}: run `make kube` first")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def config_for(*, root: Path, manifests: Path, cgroup_root: str, read_only_port: int,
               port: int, healthz_port: int) -> dict[str, Any]:
    """The KubeletConfiguration: the defaults, except these (and why)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "staticPodPath": str(manifests),  # standalone: static pods only
        "fileCheckFrequency": "20s",  # the default, written out (nodelet's manifest resync)
        # These machines: containerd here runs runc with cgroupfs; swap may be on.
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        # These machines run cgroup v1, which the kubelet refuses by default since 1.35.
        "failCgroupV1": False,
        # Beside other agents on one machine: its own cgroup root, ports and directories.
        "cgroupRoot": cgroup_root,
        "readOnlyPort": read_only_port,  # the default is off; the peer is read through it
        "port": port,
        "healthzPort": healthz_port,
        "address": "127.0.0.1",
        "podLogsDir": str(root / "logs"),
        "authentication": {"anonymous": {"enabled": False},
                           "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},  # no API server to ask
        # No cluster DNS standalone (the kubelet then falls back to the host's resolv.conf).
        "resolvConf": "/etc/resolv.conf",
        # Its events are only logged standalone, at verbosity 3; JSON lines to parse them.
        "logging": {"format": "json", "verbosity": EVENT_VERBOSITY},
    }


def join_config_for(*, root: Path, cgroup_root: str, port: int, healthz_port: int,
                    client_ca: Path) -> dict[str, Any]:
    """The KubeletConfiguration of a node joining a cluster: the defaults, except these (and
    why). No static pods, no read-only port, the default logging."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # These machines, as standalone: cgroupfs, swap may be on, cgroup v1.
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "failCgroupV1": False,
        # Beside other agents on one machine: its own cgroup root, ports and directories.
        "cgroupRoot": cgroup_root,
        "port": port,  # on the default address 0.0.0.0: kube-apiserver reaches it there
        "healthzPort": healthz_port,
        "podLogsDir": str(root / "logs"),
        # The defaults written out, with the cluster CA to check kube-apiserver's client
        # certificate (logs, exec) against, as kubeadm configures it.
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(client_ca)}},
        "authorization": {"mode": "Webhook"},
        # kubeadm's setting and nodelet's default (v1beta1's default is false): the
        # bootstrapped client certificate is renewed by a CSR before it expires.
        "rotateCertificates": True,
        # The default written out: a self-signed serving certificate, no serving CSR.
        "serverTLSBootstrap": False,
    }


@dataclass
class KubeletPeer:
    root: Path
    manifests: Path
    process: asyncio.subprocess.Process
    read_only_port: int
    log: Path
    cgroup_root: str
    node_name: str
    client: cri_client.RuntimeClient | None = None
    # UIDs of the pods it served: their sandboxes are removed at `stop`.
    uids: set[str] = field(default_factory=set)

    @classmethod
    async def start(cls, *, endpoint: str, manifests: Path, node_name: str = "peer",
                    client: cri_client.RuntimeClient | None = None,
                    config: Mapping[str, Any] | None = None, binary: Path | None = None,
                    env: Mapping[str, str] | None = None) -> KubeletPeer:
        """The kubelet on containerd at `endpoint` (unix://...), reading `manifests`; its
        static pods are named `<name>-<node_name>`. With `client` (a CRI client of the same
        runtime) `stop` also removes its sandboxes. `config`: fields over the generated
        KubeletConfiguration; `binary`: another build of it (default: `kubelet_binary()`);
        `env`: variables over this process's environment for it."""
        root = Path(tempfile.mkdtemp(prefix="kubelet-peer-", dir="/tmp"))
        cgroup_root = f"/{root.name}"
        _make_cgroup_root(cgroup_root)  # the kubelet wants its cgroup root to exist
        ro = free_port()
        generated = config_for(root=root, manifests=manifests, cgroup_root=cgroup_root,
                               read_only_port=ro, port=free_port(), healthz_port=free_port())
        log = root / "kubelet.log"
        process = await _spawn(root, cgroup_root, generated | dict(config or {}),
                               endpoint=endpoint, node_name=node_name, binary=binary, env=env)
        peer = cls(root, manifests, process, ro, log, cgroup_root, node_name, client)
        try:
            await peer._wait_serving(60.0)
        except BaseException:
            await peer.kill()
            raise
        return peer

    async def _wait_serving(self, within: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while loop.time() < deadline:
            if self.process.returncode is not None:
                raise PeerError(f"kubelet exited {self.process.returncode}: {self.tail()}")
            try:
                await self.pods()
                return
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(0.2)
        raise PeerError(f"kubelet not serving /pods within {within}s: {self.tail()}")

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def pods(self) -> list[dict[str, Any]]:
        """The kubelet's pods with their status (the read-only `/pods`, a v1 PodList)."""
        async with aiohttp.ClientSession() as session, session.get(
                f"http://127.0.0.1:{self.read_only_port}/pods",
                timeout=aiohttp.ClientTimeout(total=5)) as response:
            body = await response.json()
        items: list[dict[str, Any]] = body.get("items") or []
        self.uids.update(str(p.get("metadata", {}).get("uid", "")) for p in items)
        return items

    def events(self) -> list[dict[str, str]]:
        """The events it recorded so far, oldest first: `namespace`, `name` (of the pod),
        `fieldPath`, `type`, `reason`, `message` (from its log; no count or timestamps)."""
        return events_in(self.log.read_text(errors="replace"))

    async def stop(self, *, within: float = 90.0,
                   idle: Callable[[], Awaitable[None]] | None = None) -> None:
        """Remove its static pods and wait until it has none, and until `idle()` returns (the
        runtime has stopped their sandboxes), then stop it and clean up."""
        for path in self.manifests.iterdir():
            path.unlink()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        try:
            while await self.pods():
                if loop.time() > deadline:
                    raise PeerError(f"kubelet kept pods for {within}s: {self.tail()}")
                await asyncio.sleep(0.2)
            if idle is not None:
                await idle()
            await self._wait_stopped(deadline)
        finally:
            await self.kill()

    async def _sandboxes(self) -> list[rt.SandboxInfo]:
        if self.client is None:
            return []
        suffix = f"-{self.node_name}"
        return [s for s in await self.client.list_pod_sandboxes()
                if s.uid in self.uids or s.name.endswith(suffix)]

    async def _wait_stopped(self, deadline: float) -> None:
        """Until none of its sandboxes is ready (a pod leaves `/pods` before it is stopped)."""
        await _until_none_ready(self._sandboxes, deadline, self.tail)

    async def kill(self) -> None:
        """Stop it by PID, then remove its sandboxes, mounts, log links, directories and
        cgroups."""
        await stop_by_pid(self.process)
        await _remove_sandboxes(self.client, await self._sandboxes())
        await _clean_host(self.root, self.cgroup_root)

    async def leftovers(self) -> dict[str, object]:
        """What of it is still on the host: all empty when `stop` cleaned up."""
        return {"process": self.process.returncode is None,
                "sandboxes": [s.id for s in await self._sandboxes()],
                **_host_leftovers(self.root, self.cgroup_root)}


def node_path(node: str) -> str:
    return f"/api/v1/nodes/{node}"


def node_ready(node: dict[str, Any] | None) -> bool:
    conditions = (node or {}).get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def drain(admin: Admin, node: str, *, within: float,
                alive: Callable[[], None] = lambda: None) -> None:
    """Cordon `node` (a controller's replacement pods stay off it), delete its pods and wait
    until its agent has terminated them and they are gone from the API, as `kubectl drain`.
    `alive()` raises when the agent is gone (nothing would delete them then)."""
    if await admin.get(node_path(node)) is None:
        return  # never registered: no pod can be bound to it
    await admin.patch(node_path(node), {"spec": {"unschedulable": True}})
    selector = {"fieldSelector": f"spec.nodeName={node}"}
    for pod in await admin.items("/api/v1/pods", **selector):
        meta = pod["metadata"]
        await admin.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while left := await admin.items("/api/v1/pods", **selector):
        alive()
        if loop.time() > deadline:
            names = [p["metadata"]["name"] for p in left]
            raise PeerError(f"pods of {node} not gone within {within:g}s: {names}")
        await asyncio.sleep(POLL)


@dataclass
class JoinedKubelet:
    """The kubelet as a node of a cluster; see the module docstring."""

    root: Path
    process: asyncio.subprocess.Process
    log: Path
    cgroup_root: str
    node_name: str
    healthz_port: int
    client: cri_client.RuntimeClient | None = None
    # The runtime's sandboxes before it started: not its own, never removed.
    foreign: frozenset[str] = frozenset()
    argv: tuple[str, ...] = ()  # its command line, for `respawn`

    @classmethod
    async def join(cls, *, endpoint: str, bootstrap_kubeconfig: Path, client_ca: Path,
                   node_name: str, client: cri_client.RuntimeClient | None = None,
                   config: Mapping[str, Any] | None = None) -> JoinedKubelet:
        """The kubelet on containerd at `endpoint` (unix://...), joining as node `node_name`
        with `bootstrap_kubeconfig` (a bootstrap token's); `client_ca`: the cluster CA. With
        `client` (a CRI client of the same runtime) `stop` also removes its sandboxes.
        `config`: fields over `join_config_for`'s. Returns once its healthz answers; then
        `wait_ready`."""
        foreign = frozenset(s.id for s in await client.list_pod_sandboxes()) if client \
            else frozenset()
        root = Path(tempfile.mkdtemp(prefix="kubelet-node-", dir="/tmp"))
        cgroup_root = f"/{root.name}"
        _make_cgroup_root(cgroup_root)
        healthz = free_port()
        generated = join_config_for(root=root, cgroup_root=cgroup_root, port=free_port(),
                                    healthz_port=healthz, client_ca=client_ca)
        extra = (f"--kubeconfig={root / 'kubelet.conf'}",
                 f"--bootstrap-kubeconfig={bootstrap_kubeconfig}")
        merged = generated | dict(config or {})
        healthz = int(merged.get("healthzPort", healthz))  # `config` may name its own
        process = await _spawn(root, cgroup_root, merged,
                               endpoint=endpoint, node_name=node_name, extra=extra)
        peer = cls(root, process, root / "kubelet.log", cgroup_root, node_name, healthz,
                   client, foreign,
                   tuple(_argv(root, endpoint=endpoint, node_name=node_name, extra=extra)))
        try:
            await peer._wait_healthy(60.0)
        except BaseException:
            await peer.kill()
            raise
        return peer

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> None:
        """PeerError (with its log's tail) when the kubelet has exited."""
        if self.process.returncode is not None:
            raise PeerError(f"kubelet exited {self.process.returncode}: {self.tail()}")

    async def send_signal(self, sig: int, *, within: float = 60.0) -> None:
        """`sig` to its process group, and wait until it has exited (SIGKILL after
        `within` s): a restart of the node agent, its pods left running."""
        if self.process.returncode is not None:
            return
        os.killpg(self.process.pid, sig)
        try:
            await asyncio.wait_for(self.process.wait(), within)
        except TimeoutError:
            os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()

    async def respawn(self, config: Path | None = None) -> None:
        """Start it again once it has exited, as before, or with `config` for its config
        file (the node suite's `kubelet-config`)."""
        if self.process.returncode is None:
            raise PeerError("the kubelet is still running")
        argv = [f"--config={config}" if config is not None and a.startswith("--config=")
                else a for a in self.argv]
        self.process = await _exec(argv, self.log)

    async def _wait_healthy(self, within: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        url = f"http://127.0.0.1:{self.healthz_port}/healthz"
        async with aiohttp.ClientSession() as session:
            while loop.time() < deadline:
                self.alive()
                try:
                    async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
                        if r.status == 200:
                            return
                except (aiohttp.ClientError, OSError):
                    pass
                await asyncio.sleep(POLL)
        raise PeerError(f"kubelet's healthz not answering within {within}s: {self.tail()}")

    async def wait_ready(self, admin: Admin, *, within: float = 120.0) -> dict[str, Any]:
        """Its Node once it is registered and Ready (TLS bootstrap, CSR approved by the
        controller-manager, first status); PeerError with its log's tail after `within`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not node_ready(node := await admin.get(node_path(self.node_name))):
            self.alive()
            if loop.time() > deadline:
                seen = "not registered" if node is None else "registered, not Ready"
                raise PeerError(f"node {self.node_name} {seen} within {within:g}s: "
                                f"{self.tail()}")
            await asyncio.sleep(POLL)
        assert node is not None
        return node

    async def stop(self, admin: Admin, *, within: float = 90.0) -> None:
        """Drain its node (its pods deleted and gone from the API), wait until none of its
        sandboxes is ready, then stop it, delete its Node and clean up (`kill`)."""
        loop = asyncio.get_running_loop()
        try:
            await drain(admin, self.node_name, within=within, alive=self.alive)
            await _until_none_ready(self._sandboxes, loop.time() + within, self.tail)
        finally:
            await self.kill(admin)

    async def kill(self, admin: Admin | None = None) -> None:
        """Stop it by PID, delete its Node (with `admin`), remove its sandboxes, mounts, log
        links, directories and cgroups."""
        await stop_by_pid(self.process)
        if admin is not None:
            # After the kubelet stopped: a running one would report the Node again.
            await admin.delete(node_path(self.node_name))
        await _remove_sandboxes(self.client, await self._sandboxes())
        await _clean_host(self.root, self.cgroup_root)

    async def _sandboxes(self) -> list[rt.SandboxInfo]:
        if self.client is None:
            return []
        return [s for s in await self.client.list_pod_sandboxes() if s.id not in self.foreign]

    async def leftovers(self, admin: Admin | None = None) -> dict[str, object]:
        """What of it is still on the host (and with `admin`, its Node): all empty when
        `stop` cleaned up."""
        node = admin is not None and await admin.get(node_path(self.node_name)) is not None
        return {"process": self.process.returncode is None, "node": node,
                "sandboxes": [s.id for s in await self._sandboxes()],
                **_host_leftovers(self.root, self.cgroup_root)}


def events_in(log: str) -> list[dict[str, str]]:
    """The `"Event occurred"` records of a kubelet's JSON log, oldest first."""
    found = []
    for line in log.splitlines():
        if '"Event occurred"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        obj = record.get("object") or {}
        found.append({"namespace": str(obj.get("namespace", "")),
                      "name": str(obj.get("name", "")),
                      "fieldPath": str(record.get("fieldPath", "")),
                      "type": str(record.get("type", "")),
                      "reason": str(record.get("reason", "")),
                      "message": str(record.get("message", ""))})
    return found


# -- what both peers share: the process, its sandboxes, the host ------------------------------


def _argv(root: Path, *, endpoint: str, node_name: str, extra: tuple[str, ...] = (),
          binary: Path | None = None) -> list[str]:
    """The kubelet's command line, with its config file `<root>/config.yaml`."""
    return [str(binary or kubelet_binary()), f"--config={root / 'config.yaml'}",
            f"--root-dir={root / 'root'}", f"--cert-dir={root / 'pki'}",
            f"--container-runtime-endpoint={endpoint}", f"--hostname-override={node_name}",
            *extra]


async def _spawn(root: Path, cgroup_root: str, config: Mapping[str, Any], *, endpoint: str,
                 node_name: str, extra: tuple[str, ...] = (), binary: Path | None = None,
                 env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
    """The kubelet with `config` (written to `<root>/config.yaml`), its state, certificates and
    log (`kubelet.log`) under `root`; on failure its root and cgroup root are removed."""
    (root / "config.yaml").write_text(json.dumps(config, indent=1))
    try:
        return await _exec(_argv(root, endpoint=endpoint, node_name=node_name, extra=extra,
                                 binary=binary), root / "kubelet.log", env)
    except BaseException:
        _remove_cgroup_root(cgroup_root)
        shutil.rmtree(root, ignore_errors=True)
        raise


async def _exec(argv: list[str], log: Path,
                env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
    """`argv` in a session of its own, its output appended to `log`."""
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=out, start_new_session=True,
            env={**os.environ, **env} if env else None)


async def stop_by_pid(process: asyncio.subprocess.Process, within: float = 20.0) -> None:
    """SIGTERM its process group (led by its PID), SIGKILL after `within` seconds."""
    if process.returncode is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), within)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def _remove_sandboxes(client: cri_client.RuntimeClient | None,
                            sandboxes: list[rt.SandboxInfo]) -> None:
    """Stop and remove them (and so their containers): its garbage collector would only do
    that a minute later."""
    for sandbox in sandboxes if client is not None else []:
        try:
            await client.stop_pod_sandbox(sandbox.id)  # type: ignore[union-attr]
            await client.remove_pod_sandbox(sandbox.id)  # type: ignore[union-attr]
        except cri_errors.NotFound:
            pass


async def _until_none_ready(sandboxes: Callable[[], Awaitable[list[rt.SandboxInfo]]],
                            deadline: float, tail: Callable[[], str]) -> None:
    loop = asyncio.get_running_loop()
    while any(s.state is rt.SandboxState.READY for s in await sandboxes()):
        if loop.time() > deadline:
            raise PeerError(f"kubelet's sandboxes still ready: {tail()}")
        await asyncio.sleep(POLL)


async def _clean_host(root: Path, cgroup_root: str) -> None:
    """Its volume mounts, container log links, cgroup root and directories."""
    await asyncio.to_thread(_unmount_under, root)
    for link in _log_links(root):
        link.unlink(missing_ok=True)
    _remove_cgroup_root(cgroup_root)
    shutil.rmtree(root, ignore_errors=True)


def _host_leftovers(root: Path, cgroup_root: str) -> dict[str, object]:
    return {"cgroups": [str(p) for p in _cgroup_dirs(cgroup_root)],
            "mounts": mounts.mounts_under(root),
            "log links": [str(p) for p in _log_links(root)],
            "root": root.exists()}


def _log_links(root: Path) -> list[Path]:
    """Its links in /var/log/containers (to the container logs under its `podLogsDir`): it
    removes one only when it removes the container itself."""
    if not CONTAINER_LOG_LINKS.is_dir():
        return []
    inside = f"{root}/"
    return [link for link in CONTAINER_LOG_LINKS.iterdir()
            if link.is_symlink() and os.readlink(link).startswith(inside)]


def _hierarchies() -> list[Path]:
    if not CGROUP_BASE.exists():
        return []
    return [h for h in CGROUP_BASE.iterdir() if h.is_dir() and not h.is_symlink()]


def _make_cgroup_root(root: str) -> None:
    """`root` in every v1 hierarchy; a cpuset child starts with the parent's CPUs and memory
    nodes (cgroup v1 leaves them empty)."""
    for hierarchy in _hierarchies():
        top = hierarchy / root.strip("/")
        top.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).exists() and not (top / name).read_text().strip():
                (top / name).write_text((hierarchy / name).read_text())


def _cgroup_dirs(root: str) -> list[Path]:
    found = []
    for hierarchy in _hierarchies():
        top = hierarchy / root.strip("/")
        if top.is_dir():
            found += [p for p in top.rglob("*") if p.is_dir()] + [top]
    return found


def _remove_cgroup_root(root: str) -> None:
    """The kubelet's cgroup root in every v1 hierarchy, deepest first (empty by now)."""
    for directory in sorted(_cgroup_dirs(root), key=lambda p: len(p.parts), reverse=True):
        try:
            directory.rmdir()
        except OSError:
            pass  # still has a process: `leftovers` reports it


def _unmount_under(root: Path) -> None:
    """The kubelet's volume mounts (emptyDir tmpfs, secrets...) under its root dir."""
    for point in sorted(mounts.mounts_under(root), key=lambda p: len(p.parts), reverse=True):
        mounts.detach(point)
