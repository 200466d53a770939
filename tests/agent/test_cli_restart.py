"""nodelet as a user runs it: `nodelet run` in its own process, killed with -9 and restarted.

Uses the embedded containerd (no --runtime-endpoint): containerd and the pods must survive the
agent's death, the new agent must adopt both — no second sandbox, no changed transition
times — and `nodelet reset` must then leave nothing behind (the link to the container's
log, made in the test's own --container-logs-dir, included).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nodelet.adapters import api_client, cni, mounts
from support.harness import pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODELET = [sys.executable, "-m", "nodelet.cli"]


def cgroup_root(root: Path) -> str:
    """A cgroup root of the test's own: an agent on the default "/" (a kubelet beside the
    tests) removes pod cgroups under /kubepods that are not its own, processes and all."""
    return f"/nodelet-test-{root.name}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Process:
    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.client = api_client.ApiClient(f"http://127.0.0.1:{port}", timeout=5)

    def start(self) -> None:
        # The child gets its own copy of the descriptor: ours is closed once it runs.
        with (self.root / "nodelet.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [*NODELET, "run", "--manifests", str(self.root / "manifests"),
                 "--data-dir", str(self.root / "data"), "--listen", f"127.0.0.1:{self.port}",
                 "--node-name", "clinode", "--port", "0",
                 "--container-logs-dir", str(self.root / "log-links"),
                 "--cgroup-root", cgroup_root(self.root)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    async def pods(self) -> list[dict[str, Any]]:
        data = await asyncio.to_thread(self.client.pods, precise=True)
        return list(data["items"])

    async def cli(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            *NODELET, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        assert proc.returncode == 0, out.decode()
        return out.decode()


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions", [])}


async def ready_pod(nodelet: Process) -> dict[str, Any] | None:
    try:
        items = await nodelet.pods()
    except api_client.ApiClientError:
        return None
    for pod in items:
        conds = conditions(pod)
        if conds and all(c["status"] == "True" for c in conds.values()) and len(conds) == 5:
            return pod
    return None


async def test_kill_9_and_restart_adopts_runtime_and_pods() -> None:
    root = Path(tempfile.mkdtemp(prefix="nlc-", dir="/tmp"))
    (root / "manifests").mkdir()
    (root / "manifests" / "web.yaml").write_text(pod_manifest("web", command="httpd -f -p 80"))
    nodelet = Process(root, free_port())
    try:
        nodelet.start()
        first = await eventually(lambda: ready_pod(nodelet), within=60, what="web Ready")
        table = await nodelet.cli("get", "pods", "--server", f"http://127.0.0.1:{nodelet.port}")
        assert "web-clinode" in table and "Running" in table and "True" in table
        described = await nodelet.cli("describe", "pod", "web-clinode",
                                      "--server", f"http://127.0.0.1:{nodelet.port}")
        assert "PodReadyToStartContainers" in described and "Started" in described
        main = first["status"]["containerStatuses"][0]["containerID"].partition("://")[2]
        link = root / "log-links" / f"web-clinode_default_main-{main}.log"
        assert link.resolve().is_file(), sorted((root / "log-links").iterdir())

        containerd_pid = int((root / "data" / "containerd" / "containerd.pid").read_text())
        assert nodelet.proc is not None
        nodelet.proc.send_signal(signal.SIGKILL)
        nodelet.proc.wait(timeout=10)
        os.kill(containerd_pid, 0)  # containerd survived the agent

        nodelet.start()
        second = await eventually(lambda: ready_pod(nodelet), within=60,
                                  what="web Ready after restart")
        assert second["metadata"]["uid"] == first["metadata"]["uid"]
        before, after = conditions(first), conditions(second)
        for type_, cond in before.items():
            assert after[type_]["lastTransitionTime"] == cond["lastTransitionTime"], type_
        assert second["status"]["podIP"] == first["status"]["podIP"]
        assert int((root / "data" / "containerd" / "containerd.pid").read_text()) \
            == containerd_pid, "the restarted agent adopted the running containerd"
        log = (root / "nodelet.log").read_text()
        assert log.count("created sandbox") == 1, "no second sandbox after the restart"

        nodelet.proc.send_signal(signal.SIGTERM)
        assert nodelet.proc.wait(timeout=30) == 0
    finally:
        if nodelet.proc is not None and nodelet.proc.poll() is None:
            nodelet.proc.kill()
            nodelet.proc.wait()
        reset = subprocess.run([*NODELET, "reset", "--data-dir", str(root / "data"),
                                "--container-logs-dir", str(root / "log-links"),
                                "--cgroup-root", cgroup_root(root)],
                               capture_output=True, text=True, timeout=120)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert not (root / "data").exists()
    assert await cni.instance_netns(root / "data") == []
    assert not await cni.bridge_exists(root / "data")
    assert mounts.mounts_under(root / "data") == []
    assert list((root / "log-links").iterdir()) == []
    (root / "log-links").rmdir()
    # Reset empties the instance's own cgroup root and leaves the directory.
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        own = hierarchy / cgroup_root(root).lstrip("/")
        if own.is_dir():
            own.rmdir()
    for path in root.iterdir():
        path.unlink() if path.is_file() else None
    (root / "manifests" / "web.yaml").unlink()
    (root / "manifests").rmdir()
    root.rmdir()
