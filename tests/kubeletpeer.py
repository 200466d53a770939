"""The real kubelet as a peer: started standalone on a given containerd and manifest directory.

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
from typing import Any

import aiohttp

from nodelet.adapters import mounts
from nodelet.adapters.cri import client as cri_client
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import runtime as rt

REPO = Path(__file__).resolve().parent.parent
CGROUP_BASE = Path("/sys/fs/cgroup")
# The kubelet logs the events it records at this verbosity (client-go's record package).
EVENT_VERBOSITY = 3


class PeerError(Exception):
    """The kubelet could not be started, read or stopped cleanly; the message says which."""


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
                    config: Mapping[str, Any] | None = None) -> KubeletPeer:
        """The kubelet on containerd at `endpoint` (unix://...), reading `manifests`; its
        static pods are named `<name>-<node_name>`. With `client` (a CRI client of the same
        runtime) `stop` also removes its sandboxes. `config`: fields over the generated
        KubeletConfiguration."""
        root = Path(tempfile.mkdtemp(prefix="kubelet-peer-", dir="/tmp"))
        cgroup_root = f"/{root.name}"
        _make_cgroup_root(cgroup_root)  # the kubelet wants its cgroup root to exist
        ro = free_port()
        generated = config_for(root=root, manifests=manifests, cgroup_root=cgroup_root,
                               read_only_port=ro, port=free_port(), healthz_port=free_port())
        (root / "config.yaml").write_text(json.dumps(generated | dict(config or {}), indent=1))
        log = root / "kubelet.log"
        try:
            with log.open("wb") as out:
                process = await asyncio.create_subprocess_exec(
                    str(kubelet_binary()), f"--config={root / 'config.yaml'}",
                    f"--root-dir={root / 'root'}", f"--cert-dir={root / 'pki'}",
                    f"--container-runtime-endpoint={endpoint}",
                    f"--hostname-override={node_name}",
                    stdout=out, stderr=out, start_new_session=True)
        except BaseException:
            _remove_cgroup_root(cgroup_root)
            shutil.rmtree(root, ignore_errors=True)
            raise
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
        loop = asyncio.get_running_loop()
        while any(s.state is rt.SandboxState.READY for s in await self._sandboxes()):
            if loop.time() > deadline:
                raise PeerError(f"kubelet's sandboxes still ready: {self.tail()}")
            await asyncio.sleep(0.2)

    async def kill(self) -> None:
        """Stop it by PID, then remove its sandboxes, mounts, directories and cgroups."""
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                os.killpg(self.process.pid, signal.SIGKILL)
                await self.process.wait()
        for sandbox in await self._sandboxes():
            try:
                await self.client.stop_pod_sandbox(sandbox.id)  # type: ignore[union-attr]
                await self.client.remove_pod_sandbox(sandbox.id)  # type: ignore[union-attr]
            except cri_errors.NotFound:
                pass
        await asyncio.to_thread(_unmount_under, self.root)
        _remove_cgroup_root(self.cgroup_root)
        shutil.rmtree(self.root, ignore_errors=True)

    async def leftovers(self) -> dict[str, object]:
        """What of it is still on the host: all empty when `stop` cleaned up."""
        return {
            "process": self.process.returncode is None,
            "sandboxes": [s.id for s in await self._sandboxes()],
            "cgroups": [str(p) for p in _cgroup_dirs(self.cgroup_root)],
            "mounts": mounts.mounts_under(self.root),
            "root": self.root.exists(),
        }


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
