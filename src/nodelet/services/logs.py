"""`nodelet logs`: find a container's CRI log file on this node, print it, and follow it.

The pod comes from the agent's API (its UID names the log directory); the file is read
directly from `<data dir>/logs`, as the kubelet serves /containerLogs from /var/log/pods.
Following polls the file for growth, moves on to the fresh file when log rotation renamed the
old one away (`Follower`), and to the next attempt's file when the container restarts, until the
caller interrupts it (Ctrl-C) or the log directory is removed. The node server's /containerLogs
follows with the same `Follower`.

Errors are `crilogs.LogsError`, with kubectl's messages where kubectl has one.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from nodelet.model.core import crilogs
from nodelet.model.reports import presenting

JSON = crilogs.JSON

# Seconds between checks for new lines while following: short enough to feel live, and a stat
# plus a read of nothing costs next to nothing.
POLL_INTERVAL = 0.2
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class LogTarget:
    """One run (attempt) of one container, and where its log files live."""

    pod_name: str
    container: str
    directory: Path
    attempt: int

    @property
    def path(self) -> Path:
        return self.directory / f"{self.attempt}.log"


def find_pod(pod_list: JSON, name: str, namespace: str | None) -> JSON:
    """The pod by its full name, or by its manifest name (static pods are `<name>-<node>`)."""
    pod = presenting.find_pod(pod_list, name, namespace)
    if pod is not None:
        return pod
    where = f' in namespace "{namespace}"' if namespace else ""
    raise crilogs.LogsError(f'pods "{name}" not found{where}')


def locate(pod: JSON, *, container: str | None, previous: bool, data_dir: Path) -> LogTarget:
    """The log file to read; raises LogsError when the container or the file does not exist."""
    name = crilogs.choose_container(pod, container)
    directory = crilogs.container_log_dir(data_dir, pod, name)
    attempt = crilogs.choose_attempt(pod, name, attempts(directory), previous=previous)
    target = LogTarget(str(pod.get("metadata", {}).get("name", "")), name, directory, attempt)
    if not target.path.is_file():
        raise crilogs.LogsError(
            f'no log file for container "{name}" in pod "{target.pod_name}" at {target.path}: '
            f"it has not started yet, or --data-dir is not the agent's data dir",
            public=f'container "{name}" in pod "{target.pod_name}" has no log yet')
    return target


def attempts(directory: Path) -> list[int]:
    """The attempts that have a log file in a container's log directory, ascending."""
    try:
        names = [entry.name for entry in directory.iterdir()]
    except FileNotFoundError:
        return []
    except PermissionError as exc:
        raise crilogs.LogsError(
            f"cannot read {directory}: permission denied — run as the agent's user",
            public="cannot read the container's logs") from exc
    found = (crilogs.attempt_of(n) for n in names)
    return sorted(a for a in found if a is not None)


def write_logs(
    target: LogTarget,
    out: BinaryIO,
    *,
    tail: int | None = None,
    timestamps: bool = False,
    follow: bool = False,
    poll_interval: float = POLL_INTERVAL,
    sleep: Callable[[float], Any] = time.sleep,
) -> None:
    """Print the target's lines (the last `tail` ones), then with `follow` keep printing new
    ones — across restarts — until interrupted or the log directory disappears."""
    reader = _Reader(target.path)
    try:
        lines: Iterable[crilogs.LogLine] = reader.lines(final=not follow)
        if tail is not None:
            lines = collections.deque(lines, maxlen=max(tail, 0))
        _write(out, lines, timestamps)
        if follow:
            reader = _follow(target, reader, out, timestamps, poll_interval, sleep)
    finally:
        reader.close()


def _follow(
    target: LogTarget,
    reader: _Reader,
    out: BinaryIO,
    timestamps: bool,
    poll_interval: float,
    sleep: Callable[[float], Any],
) -> _Reader:
    """Follow until the directory goes; returns the reader in use, for the caller to close."""
    follower = Follower(target, reader)
    while (lines := follower.poll()) is not None:
        if not _write(out, lines, timestamps):
            sleep(poll_interval)
    return follower.reader


class Follower:
    """Follows one container's log from `target` on: across rotations (the file renamed to
    `<n>.log.<time>` and a fresh `<n>.log` opened by the runtime) and restarts (`<n+1>.log`)."""

    def __init__(self, target: LogTarget, reader: _Reader | None = None) -> None:
        self._target = target
        self._attempt = target.attempt
        self.reader = reader or _Reader(target.path)
        self._over = False

    def poll(self) -> list[crilogs.LogLine] | None:
        """The lines written since the last poll (maybe none), or None once the log is over
        (its directory was removed). Blocking file reads: call it on a thread in async code."""
        if self._over:
            return None
        lines = list(self.reader.lines(final=False))
        if lines:
            return lines
        path = self._target.directory / f"{self._attempt}.log"
        if self.reader.replaced_at(path):
            # Rotated: the runtime writes the new file since ReopenContainerLog; finish the old.
            lines = list(self.reader.lines(final=True))
            self.reader.close()
            self.reader = _Reader(path)
            return lines
        newer = [a for a in attempts(self._target.directory) if a > self._attempt]
        if not newer and self._target.directory.exists():
            return []
        # The old run has exited before the next one was created: drain it completely.
        lines = list(self.reader.lines(final=True))
        self.reader.close()
        if not newer:
            self._over = True
            return lines or None
        self._attempt = newer[0]
        self.reader = _Reader(self._target.directory / f"{self._attempt}.log")
        return lines

    def close(self) -> None:
        self.reader.close()


def _write(out: BinaryIO, lines: Iterable[crilogs.LogLine], timestamps: bool) -> int:
    count = 0
    for line in lines:
        out.write(crilogs.render(line, timestamps=timestamps))
        count += 1
    if count:
        out.flush()
    return count


class _Reader:
    """Reads a growing CRI log file record by record; a record is complete at its newline."""

    def __init__(self, path: Path) -> None:
        try:
            self._file = path.open("rb")
        except OSError as exc:
            raise crilogs.LogsError(f"cannot read log file {path}: {exc.strerror}",
                                    public="cannot read the container's log") from exc
        self._rest = b""
        self._joiner = crilogs.PartialJoiner()

    def lines(self, *, final: bool) -> Iterator[crilogs.LogLine]:
        """The lines completed since the last call; `final`: the file is done, so an unfinished
        last record or fragment is a line of its own."""
        while chunk := self._file.read(_CHUNK):
            records = (self._rest + chunk).split(b"\n")
            self._rest = records.pop()
            for record in records:
                yield from self._joiner.push(crilogs.parse_line(record))
        if final:
            if self._rest:
                yield from self._joiner.push(crilogs.parse_line(self._rest))
                self._rest = b""
            yield from self._joiner.flush()

    def replaced_at(self, path: Path) -> bool:
        """Whether `path` now names another file than the one being read (log rotation); False
        while it names none (between the rename and the runtime's reopen)."""
        try:
            return path.stat().st_ino != os.fstat(self._file.fileno()).st_ino
        except FileNotFoundError:
            return False

    def close(self) -> None:
        self._file.close()
