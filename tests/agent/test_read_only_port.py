"""The read-only API can be turned off: a real agent started from a KubeletConfiguration with
`readOnlyPort: 0` and `healthzPort: 0` listens on no port of its own but the node server's
(the listening sockets of this process, read from /proc), and one with a port serves there;
so does the healthz server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from conftest import Instance
from nodelet import cli
from nodelet.adapters import http_server
from support.harness import Harness
from support.polling import eventually

pytestmark = pytest.mark.runtime

CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
readOnlyPort: {port}
healthzPort: {healthz}
"""


def listening_ports() -> set[int]:
    """The TCP ports this process listens on."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in mine:  # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


async def _agent(runtime: Instance, tmp_path: Path, port: int, healthz: int = 0) -> Harness:
    (tmp_path / "kubelet.yaml").write_text(CONFIG.format(port=port, healthz=healthz))
    from_file = cli.settings_from_argv(["run", "--data-dir", str(tmp_path / "unused"),
                                        "--config", str(tmp_path / "kubelet.yaml")])
    harness = Harness(endpoint=runtime.containerd.endpoint)
    harness.settings = replace(harness.settings, server=from_file.server)
    await harness.start()
    return harness


async def test_read_only_port_0_serves_nothing(runtime: Instance, tmp_path: Path) -> None:
    before = listening_ports()
    harness = await _agent(runtime, tmp_path, 0)
    try:
        agent = harness.agent_or_fail()
        assert not harness.settings.server.enabled
        assert listening_ports() - before == {agent.node_server_port}
        with pytest.raises(AssertionError):
            agent.server_port  # noqa: B018 (no read-only server to ask)
    finally:
        await harness.stop()
        harness.cleanup()


def free_port() -> int:
    with socket.socket() as probe:  # a free port for the file to name
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_read_only_port_from_the_file_serves(runtime: Instance, tmp_path: Path) -> None:
    port = free_port()
    harness = await _agent(runtime, tmp_path, port)
    try:
        assert port in listening_ports()
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/healthz") as response:
            assert response.status == 200
    finally:
        await harness.stop()
        harness.cleanup()


async def test_the_healthz_server_serves_healthz_alone(runtime: Instance,
                                                       tmp_path: Path) -> None:
    """The kubelet's healthz server (healthzPort, 10248 by default): /healthz without
    credentials, nothing else; taken back when the agent stops."""
    healthz = free_port()
    harness = await _agent(runtime, tmp_path, 0, healthz)
    try:
        await eventually(lambda: healthz in listening_ports(), within=10,
                         what="the healthz server listening")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{healthz}/healthz") as response:
                assert (response.status, await response.text()) == (200, "ok")
            async with session.get(f"http://127.0.0.1:{healthz}/pods") as response:
                assert response.status == 404
    finally:
        await harness.stop()
        harness.cleanup()
    assert healthz not in listening_ports()


async def test_the_healthz_server_waits_for_its_port() -> None:
    """A taken port is tried again until it is free; the agent never stops for it."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    server = http_server.HealthzServer(retry_every=0.05)
    task = asyncio.create_task(server.run("127.0.0.1", port), name="healthz")
    try:
        await asyncio.sleep(0.2)
        assert server.port is None and not task.done()
        taken.close()
        await eventually(lambda: server.port, within=10, what="the healthz server bound")
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/healthz") as response:
            assert (response.status, await response.text()) == (200, "ok")
    finally:
        taken.close()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
