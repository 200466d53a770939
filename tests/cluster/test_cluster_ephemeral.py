"""Ephemeral containers with the real kubectl 1.37 (`kubectl debug`) on the real control plane:
added to a running pod through its ephemeralcontainers subresource, each is started once in
the pod's sandbox — in its target's PID namespace with `--target` — reported in
ephemeralContainerStatuses, reachable by `kubectl logs`, `exec` and `attach`, and never
restarted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import Instance
from support.controlplane import BUSYBOX, AdminClient, ControlPlane, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "ephemeral-node"
TARGET_COMMAND = "sleep 999999"  # what the debugger sees in its target's PID namespace


async def _ephemeral(admin: AdminClient, namespace: str) -> dict[str, dict[str, Any]]:
    found = await admin.get(pod_path(namespace, "target")) or {}
    return {s["name"]: s for s in found.get("status", {}).get("ephemeralContainerStatuses") or []}


def _state(statuses: dict[str, dict[str, Any]], name: str) -> str:
    return next(iter(statuses.get(name, {}).get("state") or {"": None}))


async def _attached(plane: ControlPlane, namespace: str) -> str:
    """`kubectl debug -i` with a shell: once kubectl says it attaches, a line is typed until
    its answer comes back (one typed before the runtime connected the session's stdin is
    lost), then `exit`; what the shell printed."""
    process = await asyncio.create_subprocess_exec(
        *plane.kubectl_args("-n", namespace, "debug", "target", f"--image={BUSYBOX}",
                            "--image-pull-policy=IfNotPresent", "-c", "attached", "-i", "--",
                            "sh"),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    assert process.stdin and process.stdout and process.stderr
    try:
        while b"try pressing enter" not in await asyncio.wait_for(
                process.stderr.readline(), 60):
            pass

        async def typed() -> bytes:
            process.stdin.write(b"echo through-attach\n")  # type: ignore[union-attr]
            try:
                return await asyncio.wait_for(process.stdout.readline(), 1)  # type: ignore
            except TimeoutError:
                return b""

        line = await eventually(typed, within=30, what="the shell's answer through attach")
        process.stdin.write(b"exit 0\n")
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 60) == 0
        return line.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_kubectl_debug_starts_ephemeral_containers_once(
        join: Any, admin: AdminClient, control_plane: ControlPlane, runtime: Instance,
        namespace: str) -> None:
    async def kubectl(*args: str, stdin: bytes | None = None) -> str:
        code, out, err = await control_plane.kubectl("-n", namespace, *args, stdin=stdin)
        assert code == 0, err.decode()
        return out.decode()

    async def debug(name: str, command: str, *extra: str) -> None:
        await kubectl("debug", "target", f"--image={BUSYBOX}", "--image-pull-policy=IfNotPresent",
                      "-c", name, *extra, "--", "sh", "-c", command)

    async with join(NODE) as harness:
        await admin.create(pod_path(namespace), pod("target", node=NODE, command=TARGET_COMMAND))
        await eventually(lambda: admin.get(pod_path(namespace, "target")), within=60,
                         until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
                         what="the target pod Running")
        await debug("debugger", "echo polo; ps -o args; sleep 1000000", "--target=main")
        await eventually(lambda: _ephemeral(admin, namespace), within=60,
                         until=lambda s: _state(s, "debugger") == "running",
                         what="the debugger running in ephemeralContainerStatuses")
        logs = await eventually(lambda: kubectl("logs", "target", "-c", "debugger"), within=30,
                                until=lambda out: TARGET_COMMAND in out,
                                what="the debugger's log with the target's processes")
        assert logs.startswith("polo\n"), logs
        assert "marco" in await kubectl("exec", "target", "-c", "debugger", "--", "echo", "marco")

        # Attached as a user types into `kubectl debug -i`: its stdin is the shell's, through
        # the node server.
        assert "through-attach" in await _attached(control_plane, namespace)

        # One that exits is left exited: a later sync (another one added) starts no second
        # instance of it.
        await debug("quitter", "exit 3")
        await eventually(lambda: _ephemeral(admin, namespace), within=60,
                         until=lambda s: _state(s, "quitter") == "terminated",
                         what="the quitter terminated")
        await debug("late", "sleep 1000000")
        statuses = await eventually(lambda: _ephemeral(admin, namespace), within=60,
                                    until=lambda s: _state(s, "late") == "running",
                                    what="the late one running")
        quitter = statuses["quitter"]
        assert quitter["state"]["terminated"]["exitCode"] == 3
        assert quitter["restartCount"] == 0 and quitter["ready"] is False
        assert _state(statuses, "attached") == "terminated"
        target = await admin.get(pod_path(namespace, "target"))
        assert target is not None
        state = await harness.agent_or_fail().relister.refresh_pod(target["metadata"]["uid"])
        assert [c.name for c in state.containers].count("quitter") == 1
        assert target["status"]["phase"] == "Running"
        assert target["status"]["observedGeneration"] == target["metadata"]["generation"]


async def test_an_ephemeral_container_mounts_the_pods_volumes(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    """An ephemeral container's volumeMounts are the pod's volumes, as for any container (the
    storage suite's checks read a volume through one)."""
    spec = pod("shared", node=NODE, command="echo from-main > /data/f && sleep 1000000",
               volumes=[{"name": "data", "emptyDir": {}}])
    spec["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    async with join(NODE):
        await admin.create(pod_path(namespace), spec)
        await eventually(lambda: admin.get(pod_path(namespace, "shared")), within=60,
                         until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
                         what="the pod Running")
        await admin.patch(pod_path(namespace, "shared", "ephemeralcontainers"), {"spec": {
            "ephemeralContainers": [{
                "name": "reader", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "cat /mnt/f && sleep 1000000"],
                "volumeMounts": [{"name": "data", "mountPath": "/mnt"}]}]}},
            content_type="application/strategic-merge-patch+json")

        async def logs() -> str:
            code, out, _ = await control_plane.kubectl("-n", namespace, "logs", "shared",
                                                       "-c", "reader")
            return out.decode() if code == 0 else ""

        assert await eventually(logs, within=60, until=bool,
                                what="the ephemeral container's log") == "from-main\n"
