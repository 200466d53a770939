"""The real kubelet as a peer: started standalone on a given containerd and manifest directory.

`bench/lifecycle.py` imports this as a sibling module. The kubelet is the one `make kube` built
(kube/versions.env names its version). `KubeletPeer.start` writes a KubeletConfiguration that
keeps the kubelet's defaults except where these machines, or running beside other agents,
force a change (each is named in `config_for`), starts the kubelet and waits for its read-only
`/pods`; `stop` removes its static pods first (so it stops their sandboxes itself), then stops
it by PID and removes its directories and its cgroup root. Errors: `PeerError`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from nodelet.adapters import mounts

REPO = Path(__file__).resolve().parent.parent
CGROUP_ROOT = "/kubelet-peer"


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


def config_for(*, root: Path, manifests: Path, read_only_port: int, port: int,
               healthz_port: int) -> dict[str, Any]:
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
        "cgroupRoot": CGROUP_ROOT,
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
    }


@dataclass
class KubeletPeer:
    root: Path
    manifests: Path
    process: asyncio.subprocess.Process
    read_only_port: int
    log: Path

    @classmethod
    async def start(cls, *, endpoint: str, manifests: Path) -> KubeletPeer:
        """The kubelet on containerd at `endpoint` (unix://...), reading `manifests`."""
        root = Path(tempfile.mkdtemp(prefix="kubelet-peer-", dir="/tmp"))
        _make_cgroup_root(CGROUP_ROOT)  # the kubelet wants its cgroup root to exist
        ro = free_port()
        config = config_for(root=root, manifests=manifests, read_only_port=ro,
                            port=free_port(), healthz_port=free_port())
        (root / "config.yaml").write_text(json.dumps(config, indent=1))
        log = root / "kubelet.log"
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                str(kubelet_binary()), f"--config={root / 'config.yaml'}",
                f"--root-dir={root / 'root'}", f"--cert-dir={root / 'pki'}",
                f"--container-runtime-endpoint={endpoint}", "--hostname-override=peer",
                "--v=1", stdout=out, stderr=out, start_new_session=True)
        peer = cls(root, manifests, process, ro, log)
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
        return items

    async def stop(self, *, within: float = 90.0,
                   idle: Callable[[], Awaitable[None]] | None = None) -> None:
        """Remove its static pods and wait until it has none, and until `idle()` returns (the
        runtime has stopped their sandboxes), then stop it and clean up."""
        for path in self.manifests.iterdir():
            path.unlink()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while await self.pods():
            if loop.time() > deadline:
                raise PeerError(f"kubelet kept pods for {within}s: {self.tail()}")
            await asyncio.sleep(0.2)
        if idle is not None:
            await idle()
        await self.kill()

    async def kill(self) -> None:
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                os.killpg(self.process.pid, signal.SIGKILL)
                await self.process.wait()
        _remove_cgroup_root(CGROUP_ROOT)
        await asyncio.to_thread(_unmount_under, self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def _make_cgroup_root(root: str) -> None:
    """`root` in every v1 hierarchy; a cpuset child starts with the parent's CPUs and memory
    nodes (cgroup v1 leaves them empty)."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        if not hierarchy.is_dir() or hierarchy.is_symlink():
            continue
        top = hierarchy / root.strip("/")
        top.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).exists() and not (top / name).read_text().strip():
                (top / name).write_text((hierarchy / name).read_text())


def _remove_cgroup_root(root: str) -> None:
    """The kubelet's cgroup root in every v1 hierarchy, deepest first (empty by now)."""
    base = Path("/sys/fs/cgroup")
    for hierarchy in base.iterdir() if base.exists() else ():
        top = hierarchy / root.strip("/")
        if not top.is_dir():
            continue
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()),
                                key=lambda p: len(p.parts), reverse=True):
            directory.rmdir()
        top.rmdir()


def _unmount_under(root: Path) -> None:
    """The kubelet's volume mounts (emptyDir tmpfs, secrets...) under its root dir."""
    for point in sorted(mounts.mounts_under(root), key=lambda p: len(p.parts), reverse=True):
        mounts.detach(point)
