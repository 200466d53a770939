"""Start-up checks made before anything starts, and an HTTP server that does not wait forever
for slow clients (real sockets; real `nodelet run` processes for the CLI)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_http_server import FakeView

from conftest import AgentFactory
from nodelet import app, settings
from nodelet.adapters import http_server
from nodelet.services.serving import preflight
from support.harness import all_ready, pod_manifest
from support.polling import eventually


def config(tmp_path: Path, **server: object) -> settings.Settings:
    base = settings.Settings(data_dir=tmp_path / "data")
    return settings.Settings(data_dir=base.data_dir,
                             server=settings.ServerSettings(**{"port": 0, **server}),  # type: ignore[arg-type]
                             node_server=settings.NodeServerSettings(port=0))


def test_empty_or_unreadable_token_files_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "token"
    empty.write_text(" \n")
    with pytest.raises(preflight.StartupError, match="is empty"):
        preflight.check(config(tmp_path, auth_token_file=empty))
    with pytest.raises(preflight.StartupError, match="cannot read it"):
        preflight.check(config(tmp_path, auth_token_file=tmp_path / "missing"))
    empty.write_text("good-token\n")
    assert preflight.check(config(tmp_path, auth_token_file=empty)).token == "good-token"


def test_a_non_loopback_address_needs_a_token(tmp_path: Path) -> None:
    with pytest.raises(preflight.StartupError, match="needs --auth-token-file"):
        preflight.check(config(tmp_path, host="0.0.0.0"))


def test_a_port_in_use_is_reported_before_start(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(preflight.StartupError, match="cannot listen there"):
            preflight.check(config(tmp_path, port=port))


def test_the_node_servers_port_in_use_is_reported_before_start(tmp_path: Path) -> None:
    """Port 10250 held by another agent (a kubelet, a second nodelet) stops the start before
    containerd or any pod does."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = dataclasses.replace(config(tmp_path), node_server=settings.NodeServerSettings(
            address="127.0.0.1", port=port))
        with pytest.raises(preflight.StartupError,
                           match=rf"--address/--port \(the node server\) 127.0.0.1:{port}: "
                                 "cannot listen there"):
            preflight.check(taken)


def test_pod_cidrs_and_the_runtimes_programs_are_checked(tmp_path: Path) -> None:
    base = config(tmp_path)
    for cidr in ("10.0.0.0/33", "banana"):
        bad = dataclasses.replace(base, runtime=dataclasses.replace(base.runtime,
                                                                    pod_cidrs=(cidr,)))
        with pytest.raises(preflight.StartupError, match=rf"--pod-cidr {cidr}: not a network"):
            preflight.check(bad)
    missing = dataclasses.replace(base, runtime=dataclasses.replace(
        base.runtime, runtime_bin_dir=tmp_path / "nowhere"))
    with pytest.raises(preflight.StartupError, match=r"--runtime-bin-dir: .*nowhere/containerd "
                                                     "is missing"):
        preflight.check(missing)


def test_a_broken_kubeconfig_is_reported_before_start(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\n")
    base = config(tmp_path)
    with pytest.raises(preflight.StartupError, match=r"--kubeconfig: .*current-context"):
        preflight.check(settings.Settings(
            data_dir=base.data_dir, server=base.server,
            cluster=settings.ClusterSettings(kubeconfig=broken)))


@pytest.mark.parametrize("flags", [
    ["--listen", "0.0.0.0:10399"],
    ["--listen", "127.0.0.1:10399", "--auth-token-file", "EMPTY"],
    ["--system-reserved", "pid=100"],
    ["--kube-reserved", "cpu=1x"],
    ["--system-reserved", "memory"],
    ["--max-pods", "0"],
    ["--cgroup-root", "kubepods-parent"],
    ["--cgroup-root", "/a/../b"],
    ["--container-log-max-files", "1"],
    ["--container-log-max-size", "ten"],
    ["--minimum-container-ttl-duration", "ten"],
    ["--maximum-dead-containers", "-2"],
    ["--maximum-dead-containers-per-container", "-2"],
    ["--listen", "127.0.0.1:99999"],
    ["--pod-cidr", "10.0.0.0/33"],
    ["--runtime-bin-dir", "/nonexistent"],
    ["--port", "0", "--address", "127.0.0.1", "--listen", "127.0.0.1:BUSY"],
])
def test_nodelet_run_refuses_before_starting_anything(tmp_path: Path, flags: list[str]) -> None:
    (tmp_path / "empty").write_text("")
    flags = [str(tmp_path / "empty") if f == "EMPTY" else f for f in flags]
    data = tmp_path / "data"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        flags = [f.replace("BUSY", str(busy.getsockname()[1])) for f in flags]
        done = subprocess.run(
            [sys.executable, "-m", "nodelet.cli", "run", "--data-dir", str(data),
             "--port", "0", *flags],
            capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done
    # Ours, or argparse's for a flag's own type (--listen HOST:PORT).
    assert done.stderr.startswith("Error: --") or "error: argument --" in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr
    assert not data.exists()  # no containerd, no checkpoint, nothing


async def test_slow_clients_are_disconnected_and_others_served() -> None:
    server = http_server.HttpServer(FakeView(), http_server.Timeouts(header=0.5, idle=5))
    await server.start("127.0.0.1", 0, None)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the headers never end
        await writer.drain()
        # Meanwhile a normal client is answered.
        fast_reader, fast_writer = await asyncio.open_connection("127.0.0.1", server.port)
        fast_writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(fast_reader.read(), 10)
        assert answer.startswith(b"HTTP/1.1 200")
        fast_writer.close()

        async def closed() -> bool:
            """Send a byte; the server has closed the connection once a read sees its end."""
            writer.write(b"X")
            try:
                return await asyncio.wait_for(reader.read(1), 0.2) == b""
            except TimeoutError:
                return False
            except ConnectionError:
                return True

        # Sending a byte now and then does not keep the connection: it is closed.
        await eventually(closed, within=20, every=0, what="the slow connection closed")
        writer.close()
    finally:
        await server.stop()


async def test_kept_alive_connections_get_a_fresh_header_deadline() -> None:
    server = http_server.HttpServer(FakeView(), http_server.Timeouts(header=0.5, idle=5))
    await server.start("127.0.0.1", 0, None)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        for _ in range(3):  # each request is complete: the connection is kept
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await asyncio.wait_for(reader.readexactly(length), 10)
        writer.write(b"GET /healthz HTTP/1.1\r\n")  # a slow second request
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        await server.stop()


@pytest.mark.runtime
async def test_one_agent_per_data_dir_and_no_reset_under_a_running_one(
        make_agent: AgentFactory) -> None:
    """The data dir's lock (adapters.instancelock): a second agent on it, or `nodelet reset`,
    is refused with the running agent's PID, and the running agent's pod is left alone."""
    agent = await make_agent()
    agent.write("keep.yaml", pod_manifest("keep"))
    await agent.wait_status("keep", all_ready, what="keep Ready")
    holder = f"a nodelet (pid {os.getpid()}) is running with --data-dir {agent.settings.data_dir}"
    second = app.Agent(agent.settings)
    with pytest.raises(preflight.StartupError, match=re.escape(holder)):
        await second.start()
    done = subprocess.run(
        [sys.executable, "-m", "nodelet.cli", "reset", "--data-dir", str(agent.settings.data_dir)],
        capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert done.stderr == f"Error: {holder}: stop it first (Ctrl-C or SIGTERM), or choose " \
        "another --data-dir\n"
    found = agent.find("keep")
    assert found is not None and found[1] is not None and all_ready(found[1])
    assert agent.settings.data_dir.is_dir()
