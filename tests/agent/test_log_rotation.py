"""Container log rotation on real containerd: a container flooding its log keeps at most
max_files files of about max_size each, every rotated file but the newest gzipped, no line
lost or cut across the rotations, `nodelet logs` reads on across rotations, and a deleted
pod's logs are gone."""

from __future__ import annotations

import asyncio
import gzip
import sys
from pathlib import Path

import pytest

from conftest import AgentFactory
from nodelet import settings
from nodelet.services.nodehealth import logrotation
from support.harness import all_ready, pod_manifest
from support.polling import eventually

MAX_SIZE = 256 * 1024
MAX_FILES = 3
# About 2 MB/s: 500 numbered lines of 200 bytes every 50 ms (the numbers show a lost line).
TAIL = b"0" * 189 + b"7"
FLOOD = ("i=0; while true; do seq $i $((i + 499)) | sed s/$/:" + TAIL.decode() + "/; "
         "i=$((i + 500)); sleep 0.05; done")


def records(path: Path) -> list[tuple[bytes, bytes]]:
    """(tag, content) of each CRI record of a log file, gzipped or not."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    found = []
    for line in raw.splitlines():
        _, _, tag, content = line.split(b" ", 3)
        found.append((tag, content))
    return found


def check_numbered(files: list[list[tuple[bytes, bytes]]]) -> int:
    """The rotated files' records, oldest file first, hold consecutive numbered lines, each
    as written: a line may only be split into a partial (P) record and its rest, also across
    two files.
    The first line may be the rest of one in a removed file, the last one unfinished (it
    goes on in the current log). Returns how many lines were checked."""
    lines: list[bytes] = []
    pending = b""
    for file_records in files:
        for tag, content in file_records:
            pending += content
            if tag == b"F":
                lines.append(pending)
                pending = b""
    numbers = []
    for index, line in enumerate(lines):
        number, _, rest = line.partition(b":")
        if index == 0 and rest != TAIL:
            continue  # the rest of a line whose start was in a removed file
        assert rest == TAIL and number.isdigit(), f"line {index} cut: {line[:80]!r}..."
        numbers.append(int(number))
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), "a line was lost"
    return len(numbers)


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
    # Read between two rotations, once the last one's compression is done: while one runs,
    # 0.log is renamed before the runtime has reopened a new one (a window that grows with
    # the machine's load). A file removed or compressed while being read: read again.
    def steady(fs: list[Path]) -> bool:
        rotated = fs[1:]
        return (bool(fs) and fs[0].name == "0.log" and len(fs) == MAX_FILES
                and [f.suffix == ".gz" for f in rotated] == [True] * (len(rotated) - 1) + [False])

    def snapshot() -> tuple[list[Path], list[list[tuple[bytes, bytes]]]] | None:
        fs = log_files(agent.settings.data_dir)
        return (fs, [records(f) for f in fs[1:]]) if steady(fs) else None

    files, contents = await eventually(
        snapshot, within=10, ignoring=(FileNotFoundError,),
        what=f"0.log and {MAX_FILES - 1} rotated files, all but the newest gzipped (as the "
             "kubelet's), between two rotations")
    # Each rotated file about max_size, every line in them whole, none lost.
    assert all(sum(len(c) for _, c in rs) > MAX_SIZE * 0.9 for rs in contents)
    assert check_numbered(contents) > 1000
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
    assert code == 0 and all(line.endswith(b":" + TAIL) for line in out.splitlines()), out[-300:]
    logs_dir = files[0].parents[1]
    agent.remove("flood.yaml")
    await eventually(lambda: logs_dir.exists(), until=lambda exists: not exists, within=60,
                     what="the deleted pod's log directory removed")


def test_an_undone_rotation_never_replaces_a_log_the_runtime_reopened(tmp_path: Path) -> None:
    """A reopen that failed as seen by nodelet (a timed-out call) may still have happened:
    the rotated file gets its name back only if the runtime made no new file by that name,
    which `os.rename` would have replaced, losing what the runtime wrote into it."""
    rotated, current = tmp_path / "0.log.20261204-210000", tmp_path / "0.log"
    rotated.write_bytes(b"old\n")
    assert logrotation._rename_back(rotated, current)
    assert current.read_bytes() == b"old\n" and not rotated.exists()
    current.rename(rotated)
    current.write_bytes(b"written after the reopen\n")
    assert not logrotation._rename_back(rotated, current)
    assert current.read_bytes() == b"written after the reopen\n"
    assert rotated.read_bytes() == b"old\n"


def test_compress_leaves_a_whole_gz_and_no_original(tmp_path: Path) -> None:
    rotated = tmp_path / "0.log.20261204-210000"
    rotated.write_bytes(b"line\n" * 1000)
    logrotation.compress(rotated)
    assert sorted(p.name for p in tmp_path.iterdir()) == [rotated.name + ".gz"]
    assert gzip.decompress((tmp_path / (rotated.name + ".gz")).read_bytes()) == b"line\n" * 1000


def test_a_compression_whose_file_went_leaves_nothing(tmp_path: Path) -> None:
    """The pod's logs deleted while a rotated file is gzipped: no `.tmp` (nor an emptied
    directory) stays behind (bench/logflood.py found a `.gz.tmp` left after a deletion)."""
    pod_dir = tmp_path / "logs" / "default_flood_uid"
    container_dir = pod_dir / "main"
    container_dir.mkdir(parents=True)
    rotated = container_dir / "0.log.20261204-210000"
    rotated.write_bytes(b"line\n" * 1000)
    rotated.unlink()  # as the pod's deletion does, just before the compression runs
    with pytest.raises(FileNotFoundError):
        logrotation.compress(rotated)
    assert not pod_dir.exists() and (tmp_path / "logs").exists()
