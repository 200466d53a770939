"""`nodelet logs` as a user runs it, against a real agent's pods and their CRI log files;
the follower alone on plain files."""

from __future__ import annotations

import asyncio
import io
import re
import shutil
import signal
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import AgentFactory
from nodelet.model.core import status as st
from nodelet.services.serving import logs as container_logs
from support.harness import Harness, pod_manifest
from support.polling import eventually

NODELET = [sys.executable, "-m", "nodelet.cli"]
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) ")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def connection(agent: Harness) -> list[str]:
    return ["--server", f"http://127.0.0.1:{agent.agent_or_fail().server_port}",
            "--data-dir", str(agent.settings.data_dir)]


async def logs(agent: Harness, *args: str) -> Result:
    proc = await asyncio.create_subprocess_exec(
        *NODELET, "logs", *connection(agent), *args,  # later flags win
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


def running(pod_status: st.PodStatus) -> bool:
    return any(isinstance(c.state, st.ContainerStateRunning) for c in pod_status.container_statuses)


def restarted(pod_status: st.PodStatus) -> bool:
    return any(c.restart_count >= 1 for c in pod_status.container_statuses)


class Follower:
    """`nodelet logs -f` in the background; its output is read as it comes, with a deadline."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.out = ""

    @classmethod
    async def start(cls, agent: Harness, *args: str) -> Follower:
        proc = await asyncio.create_subprocess_exec(
            *NODELET, "logs", "-f", *args, *connection(agent),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        return cls(proc)

    async def wait_for(self, check: Callable[[str], bool], *, within: float = 30,
                       what: str) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + within
        while not check(self.out):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"{what} not seen within {within}s; output so far: {self.out!r}")
            try:
                chunk = await asyncio.wait_for(self.proc.stdout.read(4096), remaining)
            except TimeoutError:
                continue
            if not chunk:
                err = await self.stop()
                pytest.fail(f"logs -f ended before {what}; output {self.out!r}, stderr {err!r}")
            self.out += chunk.decode()
        return self.out

    async def stop(self) -> str:
        """Ctrl-C: the follower must exit cleanly; returns its stderr."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(self.proc.communicate(), timeout=10)
        return err.decode()


@pytest.mark.runtime
async def test_logs_of_a_running_pod(agent: Harness) -> None:
    agent.write("x.yaml", pod_manifest("x", command="echo one; echo two >&2; sleep 1000000"))
    await agent.wait_status("x", running, what="container running")
    # Both streams, by the manifest's name; the two pipes are not ordered against each other.
    result = await eventually(lambda: logs(agent, "x"), until=lambda r: r.out.count("\n") == 2,
                              within=30, every=0.1, what="two lines")
    assert sorted(result.out.splitlines()) == ["one", "two"], result
    assert result.code == 0 and result.err == ""

    full = await logs(agent, "x-testnode", "--timestamps")
    assert full.code == 0, full
    stamped = full.out.splitlines()
    assert all(TIMESTAMP.match(line) for line in stamped), stamped
    assert sorted(TIMESTAMP.sub("", line) for line in stamped) == ["one", "two"]

    last = await logs(agent, "x", "--tail", "1", "-n", "default")
    assert last.code == 0 and last.out in ("one\n", "two\n"), last
    assert (await logs(agent, "x", "--tail", "0")).out == ""


@pytest.mark.runtime
async def test_logs_errors(agent: Harness) -> None:
    agent.write("x.yaml", pod_manifest("x", command="echo one; sleep 1000000"))
    await agent.wait_status("x", running, what="container running")

    cases = {
        ("missing",): 'Error: pods "missing" not found\n',
        ("x", "-n", "kube-system"): 'Error: pods "x" not found in namespace "kube-system"\n',
        ("x", "-c", "nope"): "Error: container nope is not valid for pod x-testnode\n",
        ("x", "--previous"):
            'Error: previous terminated container "main" in pod "x-testnode" not found\n',
    }
    for args, message in cases.items():
        result = await logs(agent, *args)
        assert (result.code, result.out, result.err) == (1, "", message), args

    elsewhere = await logs(agent, "x", "--data-dir", str(agent.root / "not-the-data-dir"))
    assert elsewhere.code == 1, elsewhere
    assert f"{agent.root}/not-the-data-dir/logs/default_x-testnode_" in elsewhere.err
    assert "/main/0.log" in elsewhere.err and "--data-dir" in elsewhere.err

    proc = await asyncio.create_subprocess_exec(
        *NODELET, "logs", "x", "--server", "http://127.0.0.1:9", stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 2
    assert "cannot reach nodelet at http://127.0.0.1:9: connection refused" in err.decode()


@pytest.mark.runtime
async def test_logs_of_a_pod_with_several_containers(agent: Harness) -> None:
    side = textwrap.indent(textwrap.dedent("""\
        - name: side
          image: localhost/nodelet/busybox:latest
          imagePullPolicy: IfNotPresent
          command: ["sh", "-c", "echo from side; sleep 1000000"]
        """), "    ")
    agent.write("multi.yaml", pod_manifest("multi", init="echo from init",
                                           command="echo from main; sleep 1000000") + side)
    await agent.wait_status("multi", lambda s: len(s.container_statuses) == 2 and all(
        isinstance(c.state, st.ContainerStateRunning) for c in s.container_statuses),
        what="both containers running")

    unnamed = await logs(agent, "multi")
    assert (unnamed.code, unnamed.err) == (
        1, "Error: a container name must be specified for pod multi-testnode, choose one of: "
        "[main side] or one of the init containers: [init]\n"), unnamed
    for container in ("init", "main", "side"):
        await eventually(lambda c=container: logs(agent, "multi", "-c", c),
                         until=lambda r, c=container: r.out == f"from {c}\n",
                         within=30, every=0.1, what=f"the logs of {container}")


@pytest.mark.runtime
async def test_previous_after_a_restart_and_follow_across_it(agent: Harness) -> None:
    agent.write("r.yaml", pod_manifest("r", command="echo run; sleep 2; exit 1"))
    await agent.wait_status("r", running, what="first run")
    follower = await Follower.start(agent, "r")
    try:
        # The first run's line, then the second run's from the next attempt's file.
        await follower.wait_for(lambda out: out.count("run\n") >= 2, within=40,
                                what="lines of two runs")
    finally:
        err = await follower.stop()
    assert follower.proc.returncode == 130 and err == "", err

    await agent.wait_status("r", restarted, what="a restart")
    previous = await logs(agent, "r", "--previous")
    assert (previous.code, previous.out, previous.err) == (0, "run\n", ""), previous


@pytest.mark.runtime
async def test_previous_while_backing_off_is_the_run_that_exited(
        make_agent: AgentFactory) -> None:
    """In CrashLoopBackOff `--previous` reads the run that just exited, as the kubelet reads
    lastState.terminated (there is no older run on the first back-off)."""
    agent = await make_agent(sync_settings={"restart_backoff": 60.0})
    agent.write("c.yaml", pod_manifest("c", command="echo crashed; exit 3"))

    def backing_off(pod_status: st.PodStatus) -> bool:
        return any(isinstance(c.state, st.ContainerStateWaiting)
                   and c.state.reason == "CrashLoopBackOff" for c in pod_status.container_statuses)

    await agent.wait_status("c", backing_off, what="CrashLoopBackOff")
    previous = await logs(agent, "c", "--previous")
    assert (previous.code, previous.out, previous.err) == (0, "crashed\n", ""), previous
    current = await logs(agent, "c")
    assert (current.code, current.out) == (0, "crashed\n"), current


@pytest.mark.runtime
async def test_follow_prints_new_lines(agent: Harness) -> None:
    agent.write("t.yaml", pod_manifest(
        "t", command="i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done"))
    await agent.wait_status("t", running, what="container running")
    await eventually(lambda: logs(agent, "t"), until=lambda r: "tick-0" in r.out,
                     within=30, every=0.1, what="a first tick")

    follower = await Follower.start(agent, "t", "--tail", "1")
    try:
        out = await follower.wait_for(lambda out: out.count("\n") >= 4, what="four ticks")
    finally:
        err = await follower.stop()
    ticks = [int(line.removeprefix("tick-")) for line in out.splitlines()]
    # One line of history, then the lines written while following, in order.
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks))), out
    assert follower.proc.returncode == 130 and err == "", err


# -- the follower on plain files (no runtime): the `sleep` seam writes between polls ----------

T = "2024-05-01T12:00:00.000000001Z"


def test_follow_across_attempts_until_the_directory_goes(tmp_path: Path) -> None:
    directory = tmp_path / "logs" / "default_p_uid" / "main"
    directory.mkdir(parents=True)
    (directory / "0.log").write_bytes(f"{T} stdout F old\n{T} stdout F first\n".encode())
    steps = [
        # A record arrives in two writes; a long line in two fragments.
        lambda: _append(directory / "0.log", f"{T} stdout P lo".encode()),
        lambda: _append(directory / "0.log", f"ng-\n{T} stdout F line\n".encode()),
        # The container restarts between two polls: the old file is drained, then the new one
        # followed.
        lambda: (_append(directory / "0.log", f"{T} stderr F last words\n".encode()),
                 (directory / "1.log").write_bytes(f"{T} stdout F second run\n".encode())),
        lambda: _append(directory / "1.log", f"{T} stdout F more\n".encode()),
        lambda: shutil.rmtree(tmp_path / "logs"),
    ]

    def sleep(_: float) -> None:
        steps.pop(0)()

    out = io.BytesIO()
    target = container_logs.LogTarget("p", "main", directory, 0)
    container_logs.write_logs(target, out, tail=1, timestamps=True, follow=True, sleep=sleep)
    assert out.getvalue().decode().splitlines() == [
        f"{T} first", f"{T} long-line", f"{T} last words", f"{T} second run", f"{T} more"]
    assert not steps


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


@pytest.mark.parametrize(("tail", "expected"), [
    (None, b"a\nb\nc\nunterminated\n"), (2, b"c\nunterminated\n"), (0, b"")])
def test_read_with_tail(tmp_path: Path, tail: int | None, expected: bytes) -> None:
    (tmp_path / "3.log").write_bytes(
        f"{T} stdout F a\n{T} stdout F b\n{T} stdout F c\n{T} stdout F unterminated".encode())
    out = io.BytesIO()
    container_logs.write_logs(container_logs.LogTarget("p", "main", tmp_path, 3), out, tail=tail)
    assert out.getvalue() == expected


# -- tails read from the end ----------------------------------------------------------------------

_P, _F = f"{T} stdout P ", f"{T} stdout F "


@pytest.mark.parametrize(("records", "tail", "final", "expected"), [
    ([_F + "a", _F + "b", _F + "c"], 2, False, [b"b", b"c"]),
    ([_F + "a", _F + "b"], 5, False, [b"a", b"b"]),  # fewer lines than asked: all
    ([_F + "a", _F + "b"], 0, False, []),
    # A line split into P fragments counts once, and is never cut in the middle.
    ([_F + "a", _P + "lo", _P + "ng", _F + "!", _F + "z"], 2, False, [b"long!", b"z"]),
    ([_P + "lo", _F + "ng", f"{T} stderr P e", _F + "x", f"{T} stderr F rr"], 2, False,
     [b"x", b"err"]),
    (["garbage", _F + "a"], 2, False, [b"garbage", b"a"]),  # a malformed record is a line
])
def test_tail_offset_finds_the_last_lines(tmp_path: Path, records: list[str], tail: int,
                                          final: bool, expected: list[bytes]) -> None:
    path = tmp_path / "0.log"
    path.write_bytes("".join(r + "\n" for r in records).encode() + b"unfinished " * 3)
    reader = container_logs.open_reader(container_logs.LogTarget("p", "main", tmp_path, 0),
                                        tail, final=final)
    try:
        assert [x.content for x in reader.lines(final=final)] == expected
    finally:
        reader.close()


class _Counting(io.FileIO):
    read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        self.read_bytes += len(data)
        return data


def test_a_tail_reads_only_the_end_of_a_large_log(tmp_path: Path) -> None:
    """Records straddle the 64 KiB blocks it reads backwards; the lines found are the last
    ones, and what was read is a block or two, not the 8 MiB file."""
    path = tmp_path / "0.log"
    with path.open("wb") as f:
        for n in range(200_000):
            f.write(f"{_F}line {n:06d} {'x' * (n % 37)}\n".encode())
    assert path.stat().st_size > 8 * 1024 * 1024
    with _Counting(path) as handle:
        offset = container_logs.tail_offset(handle, 3)
        assert handle.read_bytes <= 2 * 64 * 1024
        handle.seek(offset)
        assert [line.split(b" ")[4] for line in handle.read().splitlines()] == [
            b"199997", b"199998", b"199999"]
    # Every offset lands on a record's start, whatever straddles a block.
    with path.open("rb") as handle:
        for tail in (1, 700, 1500, 3001):
            handle.seek(container_logs.tail_offset(handle, tail))
            assert handle.read(len(T)).decode() == T
            assert len(handle.read().splitlines()) == tail  # the first one read on
