"""Container log rotation on real containerd: a container flooding its log keeps at most
max_files files of about max_size each, `nodelet logs` reads on across rotations, and a
deleted pod's logs are gone."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from conftest import AgentFactory
from harness import all_ready, pod_manifest
from nodelet import settings
from polling import eventually

MAX_SIZE = 256 * 1024
MAX_FILES = 3
# About 2 MB/s: 500 lines of 200 bytes every 50 ms.
FLOOD = 'while true; do yes "$(printf %0200d 7)" | head -n 500; sleep 0.05; done'


def log_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "logs").glob("default_flood-testnode_*/main/*"))


async def test_a_flooding_container_keeps_a_bounded_log(make_agent: AgentFactory) -> None:
    agent = await make_agent(logs=settings.LogSettings(
        max_size=MAX_SIZE, max_files=MAX_FILES, monitor_period=0.2))
    agent.write("flood.yaml", pod_manifest("flood", command=FLOOD))
    await agent.wait_status("flood", all_ready, what="flooding container running")
    rotator = agent.agent_or_fail().log_rotator
    await eventually(lambda: rotator.rotations, until=lambda n: n >= 2 * MAX_FILES,
                     within=60, what="several rotations")
    # Read between two rotations: while one runs, 0.log is renamed before the runtime has
    # reopened a new one (a window that grows with the machine's load).
    files = await eventually(lambda: log_files(agent.settings.data_dir),
                             until=lambda fs: bool(fs) and fs[0].name == "0.log"
                             and len(fs) <= MAX_FILES, within=10,
                             what=f"0.log and at most {MAX_FILES} files between two rotations")
    rotated = [f for f in files if f.name != "0.log"]
    assert rotated and all(f.stat().st_size > MAX_SIZE for f in rotated)
    # Each rotated file holds whole CRI lines: the runtime reopened its log, nothing was cut.
    for f in rotated:
        assert all(line.endswith(b"7") for line in f.read_bytes().splitlines())
    # `nodelet logs` reads the current file, which the runtime reopened (right after a
    # rotation it may hold no whole line yet: asked again then).
    server = f"http://127.0.0.1:{agent.agent_or_fail().server_port}"

    async def tail() -> tuple[int | None, bytes]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "nodelet.cli", "logs", "flood", "--tail", "2", "--server",
            server, "--data-dir", str(agent.settings.data_dir), stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
        return proc.returncode, out

    code, out = await eventually(tail, until=lambda r: r[0] != 0 or r[1].count(b"\n") >= 2,
                                 within=20, what="two lines of the current log")
    assert code == 0 and out.splitlines() == [b"0" * 199 + b"7"] * 2, out[-300:]
    logs_dir = files[0].parents[1]
    agent.remove("flood.yaml")
    await eventually(lambda: logs_dir.exists(), until=lambda exists: not exists, within=60,
                     what="the deleted pod's log directory removed")
