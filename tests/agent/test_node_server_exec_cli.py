"""`nodelet exec` as a user runs it, in a subprocess against a real agent and containerd:
the end of stdin (a pipe, a regular file, /dev/null) ends the command with its exit code, a
command that cannot start says why, and refused sessions carry the server's reason.

Regressions of a newcomer's trial: `echo hi | nodelet exec -i web -- cat` never ended,
`< script.sh` and `< /dev/null` crashed in epoll, `exec -it web -- stty size` exited 1 with no
output, and refusals printed `404 Invalid response status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import ssl
import struct
import sys
import termios
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import aiohttp
import pytest
import pytest_asyncio

from conftest import AgentFactory
from nodelet.adapters import servingcerts
from support.harness import Harness, all_ready, pod_manifest, waiting_reason
from support.polling import eventually

pytestmark = pytest.mark.runtime

# How long a command that should end may take (a hang fails the test after it).
ENDS_WITHIN = 30.0


@dataclass
class Node:
    agent: Harness
    url: str

    def exec(self, *args: str) -> list[str]:
        """`nodelet exec ARGS` against this agent, with its node-local credential (tests run
        as root) and its self-signed certificate (given before the command's `--`)."""
        at = args.index("--") if "--" in args else len(args)
        return [sys.executable, "-m", "nodelet.cli", "exec", *args[:at], "--node-server",
                self.url, "--data-dir", str(self.agent.settings.data_dir), *args[at:]]


@pytest_asyncio.fixture(loop_scope="session")
async def node(make_agent: AgentFactory) -> AsyncIterator[Node]:
    agent = await make_agent()
    agent.write("web.yaml", pod_manifest("web"))
    await agent.wait_status("web", all_ready, what="pod running")
    yield Node(agent, f"https://127.0.0.1:{agent.agent_or_fail().node_server_port}")


async def _run(command: list[str], stdin: int | IO[bytes] | None = None,
               data: bytes | None = None) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, stderr); fails when the command has not ended in ENDS_WITHIN."""
    process = await asyncio.create_subprocess_exec(
        *command, stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(data), ENDS_WITHIN)
    except TimeoutError:
        pytest.fail(f"nodelet {command[3:]} still runs after {ENDS_WITHIN:g} s")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, stdout, stderr


async def test_the_end_of_piped_stdin_ends_the_command(node: Node) -> None:
    # kubectl closes the container's stdin when its own ends: cat sees EOF and exits, and
    # the command's exit code is nodelet's.
    assert await _run(node.exec("-i", "web", "--", "cat"),
                      asyncio.subprocess.PIPE, b"hi\n") == (0, b"hi\n", b"")
    assert await _run(node.exec("-i", "web", "--", "sh", "-c", "cat; exit 3"),
                      asyncio.subprocess.PIPE, b"line\n") == (3, b"line\n", b"")


async def test_stdin_from_a_regular_file_or_dev_null(node: Node, tmp_path: Path) -> None:
    # epoll refuses regular files and /dev/null (EPERM): they are read as a pipe is, then
    # their end closes the container's stdin.
    script = tmp_path / "script.sh"
    script.write_text("echo from-script\nexit 6\n")
    with script.open("rb") as stdin:
        assert await _run(node.exec("-i", "web", "--", "sh"), stdin) == \
            (6, b"from-script\n", b"")
    with open(os.devnull, "rb") as stdin:
        assert await _run(node.exec("-i", "web", "--", "cat"), stdin) == (0, b"", b"")


async def _terminal_session(node: Node, *command: str) -> tuple[int, bytes]:
    """`nodelet exec -it web -- COMMAND` on a pty of 40 rows and 100 columns: its exit code
    and what the terminal showed."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    process = await asyncio.create_subprocess_exec(
        *node.exec("-it", "web", "--", *command),
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    os.set_blocking(master, False)
    shown = bytearray()

    def read() -> int | None:
        with contextlib.suppress(BlockingIOError, OSError):
            shown.extend(os.read(master, 4096))
        return process.returncode

    try:
        code = await eventually(read, until=lambda rc: rc is not None, within=ENDS_WITHIN,
                                what=f"exec -it {command} ended", every=0.01,
                                seen=lambda _: f"the terminal showed {bytes(shown)!r}")
        read()  # what was written just before the end
        assert code is not None
        return code, bytes(shown)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)


async def test_a_command_that_cannot_start_in_a_terminal_says_why(node: Node) -> None:
    # The busybox image has no `stty` on its PATH (its shell runs the applet): the runtime's
    # reason came on the error stream and was dropped, leaving exit code 1 and nothing shown.
    code, shown = await _terminal_session(node, "stty", "size")
    assert code == 1, shown
    assert b'exec: "stty": executable file not found in $PATH' in shown, shown
    # The size is sent with the session's start, before any SIGWINCH: a command that polls
    # for it sees it (the runtime applies a size only to a process it started already).
    code, shown = await _terminal_session(
        node, "sh", "-c", 'until [ "$(stty size 2>/dev/null)" ]; do :; done; stty size')
    assert (code, shown) == (0, b"40 100\r\n")


async def test_refused_sessions_say_why(node: Node) -> None:
    agent = node.agent
    agent.write("never.yaml", pod_manifest("never").replace(
        "localhost/nodelet/busybox:latest", "localhost/nodelet/absent:latest").replace(
        "IfNotPresent", "Never"))
    agent.write("done.yaml", pod_manifest("done", command="true", restart_policy="Never"))
    await agent.wait_status("never", lambda s: waiting_reason(s) == "ErrImageNeverPull",
                            what="a pod whose container never starts")
    await agent.wait_status("done", lambda s: s.phase == "Succeeded", what="a completed pod")

    # kubectl's words, from the pod it read first.
    assert await _run(node.exec("web", "-c", "nope", "--", "true")) == (
        2, b"", b"Error: container nope is not valid for pod web-testnode out of: main\n")
    assert await _run(node.exec("done", "--", "true")) == (
        2, b"", b"Error: cannot exec into a container in a completed pod; current phase is "
                b"Succeeded\n")
    # The server's reason (the kubelet's words) for a container that is not running, shown
    # as kubectl shows a refused upgrade.
    assert await _run(node.exec("never", "--", "true")) == (
        2, b"", b'Error: unable to upgrade connection: container not found ("main")\n')

    # The server itself names a container the pod does not have as kube-apiserver does.
    token = servingcerts.local_token_path(agent.settings.data_dir).read_text().strip()
    ca = agent.settings.data_dir / "pki" / "nodelet.crt"
    connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(ca)))
    async with aiohttp.ClientSession(connector=connector) as session, session.post(
            f"{node.url}/exec/default/web-testnode/nope?command=true&output=1",
            headers={"Authorization": f"Bearer {token}"}) as response:
        assert (response.status, await response.text()) == (
            404, "container nope is not valid for pod web-testnode\n")
