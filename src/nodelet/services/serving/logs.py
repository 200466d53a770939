"""`nodelet logs`: find a container's CRI log file on this node, print it, and follow it.

The pod comes from the agent's API (its UID names the log directory); the file is read
directly from `<data dir>/logs`, as the kubelet serves /containerLogs from /var/log/pods.
Following polls the file for growth, moves on to the fresh file when log rotation renamed the
old one away (`Follower`), and to the next attempt's file when the container restarts, until the
caller interrupts it (Ctrl-C) or the log directory is removed. The node server's /containerLogs
follows with the same `Follower`.

A tail (`--tail`, `tailLines`) starts reading at `tail_offset`: the file is read backwards
from its end, block by block, until the last N lines are found, so `--tail=10` of a 10 MiB log
reads a few KiB and never holds the file; the lines after it are read forward in chunks
(`Reader.lines(max_bytes=...)`), so no caller holds more than one batch either.

Errors are `crilogs.LogsError`, with kubectl's messages where kubectl has one.
"""

from __future__ import annotations

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
# At most about this much of a file is read (and its lines held) per poll or batch.
BATCH_BYTES = 4 * _CHUNK


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
    reader = open_reader(target, tail, final=not follow)
    try:
        _write(out, reader.lines(final=not follow), timestamps)
        if follow:
            reader = _follow(target, reader, out, timestamps, poll_interval, sleep)
    finally:
        reader.close()


def _follow(
    target: LogTarget,
    reader: Reader,
    out: BinaryIO,
    timestamps: bool,
    poll_interval: float,
    sleep: Callable[[float], Any],
) -> Reader:
    """Follow until the directory goes; returns the reader in use, for the caller to close."""
    follower = Follower(target, reader)
    while (lines := follower.poll()) is not None:
        if not _write(out, lines, timestamps):
            sleep(poll_interval)
    return follower.reader


def open_reader(target: LogTarget, tail: int | None = None, *, final: bool = False) -> Reader:
    """A reader of the target's file from its start, or from its last `tail` lines (`final`:
    as `tail_offset`'s)."""
    reader = Reader(target.path)
    if tail is not None:
        reader.seek(tail_offset(reader.handle, max(tail, 0), final=final))
    return reader


def tail_offset(handle: BinaryIO, lines: int, *, final: bool = False) -> int:
    """Where the file's last `lines` complete lines begin (0 when it has no more than that),
    found by reading backwards from the end. A line ends at a record that is not a partial
    (`P`) fragment, as `crilogs.PartialJoiner` joins them; bytes after the last newline are a
    record still being written, not a line yet — unless `final` (the file is done: they are
    its last line, as `Reader.lines(final=True)` reads them)."""
    found = 0
    end = handle.seek(0, os.SEEK_END) if final else _complete_end(handle)
    for start, record in _records_backwards(handle, end):
        if not crilogs.parse_line(record).partial:
            found += 1
            if found > lines:
                return start + len(record)
    return 0


def _complete_end(handle: BinaryIO) -> int:
    """The offset just past the file's last newline (0 without one)."""
    pos = handle.seek(0, os.SEEK_END)
    while pos > 0:
        step = min(_CHUNK, pos)
        handle.seek(pos - step)
        cut = handle.read(step).rfind(b"\n")
        if cut >= 0:
            return pos - step + cut + 1
        pos -= step
    return 0


def _records_backwards(handle: BinaryIO, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, record with its newline) of each record before `end`, last first (the last
    without one when `end` follows none); one block and the record that straddles it in
    memory at a time."""
    pos, pending = end, b""
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        handle.seek(pos)
        buffer = handle.read(step) + pending  # the file's bytes [pos, pos + len(buffer))
        stop = len(buffer)
        while (cut := buffer.rfind(b"\n", 0, stop - 1)) >= 0:
            yield pos + cut + 1, buffer[cut + 1:stop]
            stop = cut + 1
        pending = buffer[:stop]
    if pending:
        yield 0, pending


class Follower:
    """Follows one container's log from `target` on: across rotations (the file renamed to
    `<n>.log.<time>` and a fresh `<n>.log` opened by the runtime) and restarts (`<n+1>.log`)."""

    def __init__(self, target: LogTarget, reader: Reader | None = None) -> None:
        self._target = target
        self._attempt = target.attempt
        self.reader = reader or Reader(target.path)
        self._over = False

    def poll(self) -> list[crilogs.LogLine] | None:
        """The lines written since the last poll (maybe none), or None once the log is over
        (its directory was removed). Blocking file reads: call it on a thread in async code."""
        if self._over:
            return None
        lines = list(self.reader.lines(final=False, max_bytes=BATCH_BYTES))
        if lines or not self.reader.at_end:
            return lines
        path = self._target.directory / f"{self._attempt}.log"
        if self.reader.replaced_at(path):
            # Rotated: the runtime writes the new file since ReopenContainerLog; finish the old.
            lines = list(self.reader.lines(final=True))
            self.reader.close()
            self.reader = Reader(path)
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
        self.reader = Reader(self._target.directory / f"{self._attempt}.log")
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


class Reader:
    """Reads a growing CRI log file record by record; a record is complete at its newline."""

    def __init__(self, path: Path) -> None:
        try:
            self._file = path.open("rb")
        except OSError as exc:
            raise crilogs.LogsError(f"cannot read log file {path}: {exc.strerror}",
                                    public="cannot read the container's log") from exc
        self._rest = b""
        self._joiner = crilogs.PartialJoiner()
        # Whether the last `lines` call read up to the end of the file.
        self.at_end = False

    @property
    def handle(self) -> BinaryIO:
        return self._file

    def seek(self, offset: int) -> None:
        """Read on from `offset` (a record's start), as if the file began there."""
        self._file.seek(offset)
        self._rest = b""
        self._joiner = crilogs.PartialJoiner()

    def lines(self, *, final: bool, max_bytes: int | None = None) -> Iterator[crilogs.LogLine]:
        """The lines completed since the last call, reading at most about `max_bytes` (whole
        chunks; `at_end` says whether the end was reached); `final`: the file is done, so once
        its end is read an unfinished last record or fragment is a line of its own."""
        read, self.at_end = 0, False
        while max_bytes is None or read < max_bytes:
            chunk = self._file.read(_CHUNK)
            if not chunk:
                self.at_end = True
                break
            read += len(chunk)
            records = (self._rest + chunk).split(b"\n")
            self._rest = records.pop()
            for record in records:
                yield from self._joiner.push(crilogs.parse_line(record))
        if final and self.at_end:
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
