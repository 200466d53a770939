"""Following a container's log file across rotation and restarts (services.logs.Follower), as
`nodelet logs -f` and the node server's `/containerLogs?follow=true` do, on real files."""

from __future__ import annotations

import shutil
from pathlib import Path

from nodelet.model.core import crilogs
from nodelet.services.serving import logs


def _line(text: str) -> bytes:
    return f"2026-01-01T00:00:00.000000001Z stdout F {text}\n".encode()


def _contents(lines: list[crilogs.LogLine] | None) -> list[bytes]:
    assert lines is not None
    return [line.content for line in lines]


def test_follows_rotation_then_restart_then_stops_when_the_directory_goes(tmp_path: Path) -> None:
    directory = tmp_path / "main"
    directory.mkdir()
    (directory / "0.log").write_bytes(_line("one") + _line("two"))
    follower = logs.Follower(logs.LogTarget("pod", "main", directory, 0))
    try:
        assert _contents(follower.poll()) == [b"one", b"two"]
        assert follower.poll() == []
        # Rotation: renamed away (the runtime still writes it until ReopenContainerLog)...
        (directory / "0.log").rename(directory / "0.log.20260101-000000")
        with (directory / "0.log.20260101-000000").open("ab") as old:
            old.write(_line("late"))
        assert _contents(follower.poll()) == [b"late"]
        assert follower.poll() == []  # between the rename and the reopen: nothing to switch to
        # ... and the reopened file is followed from its start.
        (directory / "0.log").write_bytes(_line("three"))
        assert _contents(follower.poll()) == []  # the old file drained, then the switch
        assert _contents(follower.poll()) == [b"three"]
        # A restart: the next attempt's file.
        (directory / "1.log").write_bytes(_line("four"))
        assert _contents(follower.poll()) == []
        assert _contents(follower.poll()) == [b"four"]
        shutil.rmtree(directory)
        assert follower.poll() is None
        assert follower.poll() is None
    finally:
        follower.close()
