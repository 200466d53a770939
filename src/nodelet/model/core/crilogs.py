"""Container logs as the CRI writes them, and which log file holds a container's run (pure).

containerd writes every line a container prints as

    <RFC3339Nano time> <stdout|stderr> <P|F> <content>\\n

where `P` marks a partial line (containerd splits lines longer than its buffer; the rest follows
in later `P`/`F` records of the same stream) and `F` a full one. The files live at
`<data dir>/logs/<namespace>_<pod name>_<pod uid>/<container>/<attempt>.log`, the attempt being
the container's restart count (`model.core.specs`).

Contents are bytes: a container may print anything, and `nodelet logs` passes it on unchanged.

Exceptions:

    LogsError    the pod has no such container, several and none was named, or no previous
                 run; the message is the one kubectl would print
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nodelet.model.core import apijson

JSON = apijson.JSON

STREAMS = (b"stdout", b"stderr")
_PARTIAL, _FULL = b"P", b"F"


class LogsError(Exception):
    """The logs asked for do not exist; the message names the pod and container. `public` is
    what a remote client is told (the node server's 400): the message itself unless it names
    host paths or gives advice only this node's operator can follow."""

    def __init__(self, message: str, *, public: str | None = None) -> None:
        super().__init__(message)
        self.public = message if public is None else public


@dataclass(frozen=True)
class LogLine:
    """One logical line. `timestamp` is the CRI time of its first fragment, empty for a
    malformed record (whose `content` is the raw record, kept verbatim)."""

    content: bytes
    timestamp: str = ""
    stream: str = ""
    partial: bool = False

    @property
    def malformed(self) -> bool:
        return not self.timestamp


def parse_line(raw: bytes) -> LogLine:
    """One record of a CRI log file (with or without its newline)."""
    record = raw[:-1] if raw.endswith(b"\n") else raw
    parts = record.split(b" ", 3)
    if len(parts) == 3:
        parts.append(b"")  # an empty line whose writer dropped the space after the tag
    if len(parts) != 4 or parts[1] not in STREAMS or parts[2] not in (_PARTIAL, _FULL) \
            or not _looks_like_time(parts[0]):
        return LogLine(content=record)
    return LogLine(content=parts[3], timestamp=parts[0].decode("ascii"),
                   stream=parts[1].decode("ascii"), partial=parts[2] == _PARTIAL)


def _looks_like_time(value: bytes) -> bool:
    # RFC 3339: `2024-05-01T12:00:00.123456789Z` or with a numeric offset.
    return len(value) >= 20 and value[4:5] == b"-" and value[10:11] == b"T" \
        and value[:4].isdigit()


class PartialJoiner:
    """Joins `P` fragments with the rest of their line, per stream (stdout and stderr
    fragments may interleave). A line is emitted when its `F` record arrives."""

    def __init__(self) -> None:
        self._pending: dict[str, LogLine] = {}

    def push(self, line: LogLine) -> list[LogLine]:
        """The lines completed by `line` (none while it is a fragment)."""
        if line.malformed:
            return [line]
        head = self._pending.pop(line.stream, None)
        if head is not None:
            line = replace(head, content=head.content + line.content, partial=line.partial)
        if line.partial:
            self._pending[line.stream] = line
            return []
        return [line]

    def flush(self) -> list[LogLine]:
        """Fragments whose line never finished (the file ended), oldest first."""
        pending = sorted(self._pending.values(), key=lambda line: line.timestamp)
        self._pending.clear()
        return [replace(line, partial=False) for line in pending]


def render(line: LogLine, *, timestamps: bool) -> bytes:
    """What `nodelet logs` prints for a line: its content, after its time with `--timestamps`."""
    prefix = line.timestamp.encode("ascii") + b" " if timestamps and not line.malformed else b""
    return prefix + line.content + b"\n"


# --- which file


def log_path(data_dir: Path, pod: JSON, container: str, attempt: int) -> Path:
    """`<data dir>/logs/<namespace>_<name>_<uid>/<container>/<attempt>.log`."""
    return container_log_dir(data_dir, pod, container) / f"{attempt}.log"


def container_log_dir(data_dir: Path, pod: JSON, container: str) -> Path:
    meta = apijson.obj(pod.get("metadata"))
    pod_dir = f"{meta.get('namespace', 'default')}_{meta.get('name', '')}_{meta.get('uid', '')}"
    return data_dir / "logs" / pod_dir / container


def choose_container(pod: JSON, container: str | None) -> str:
    """The container to read: the one named, or the pod's only (non-init) container."""
    spec = apijson.obj(pod.get("spec"))
    names = [str(c.get("name")) for c in apijson.objs(spec.get("containers"))]
    init = [str(c.get("name")) for c in apijson.objs(spec.get("initContainers"))]
    ephemeral = [str(c.get("name")) for c in apijson.objs(spec.get("ephemeralContainers"))]
    pod_name = apijson.obj(pod.get("metadata")).get("name", "")
    if container is None and len(names) == 1:
        return names[0]
    if container is None:
        message = f"a container name must be specified for pod {pod_name}, " \
            f"choose one of: [{' '.join(names)}]"
        if init:
            message += f" or one of the init containers: [{' '.join(init)}]"
        raise LogsError(message)
    if container not in names + init + ephemeral:
        raise LogsError(f"container {container} is not valid for pod {pod_name}")
    return container


def restart_count(pod: JSON, container: str) -> int | None:
    """The container's `restartCount` from the pod status, None before it has a status."""
    status = apijson.obj(pod.get("status"))
    for entry in apijson.objs(status.get("containerStatuses")) + \
            apijson.objs(status.get("initContainerStatuses")):
        if entry.get("name") == container:
            return int(entry.get("restartCount", 0) or 0)
    return None


def _waiting_after_exit(pod: JSON, container: str) -> bool:
    """The container waits to run again (CrashLoopBackOff) after a run that exited: its status
    shows that run as `lastState.terminated` and no newer one."""
    status = apijson.obj(pod.get("status"))
    for entry in apijson.objs(status.get("containerStatuses")) + \
            apijson.objs(status.get("initContainerStatuses")):
        if entry.get("name") == container:
            return "waiting" in apijson.obj(entry.get("state")) and \
                "terminated" in apijson.obj(entry.get("lastState"))
    return False


def choose_attempt(pod: JSON, container: str, present: Sequence[int], *, previous: bool) -> int:
    """The attempt whose file to read: the newest run (the restart count, or a newer file the
    status does not show yet), or with `previous` the run the status shows as
    `lastState.terminated`, as the kubelet reads it: the newest run before the current one, or
    while the container waits to run again (CrashLoopBackOff) the run that just exited."""
    counted = restart_count(pod, container)
    current = max([*present, *([counted] if counted is not None else [])], default=0)
    if not previous:
        return current
    if counted is not None and _waiting_after_exit(pod, container):
        exited = [a for a in present if a <= counted]
        if exited:
            return max(exited)
    earlier = [a for a in present if a < current]
    if not earlier:
        pod_name = apijson.obj(pod.get("metadata")).get("name", "")
        raise LogsError(
            f'previous terminated container "{container}" in pod "{pod_name}" not found')
    return max(earlier)


def attempt_of(filename: str) -> int | None:
    """`3.log` → 3; None for any other file."""
    stem, dot, ext = filename.partition(".")
    return int(stem) if dot and ext == "log" and stem.isdigit() else None


def last_lines(raw: bytes, max_lines: int, max_bytes: int) -> str:
    """The last `max_lines` logged lines of a CRI log (fragments joined), cut to the last
    `max_bytes` bytes: the kubelet's FallbackToLogsOnError termination message. As the
    kubelet reads them, complete lines keep their newline; a last fragment never completed
    has none."""
    joiner = PartialJoiner()
    lines: list[bytes] = []
    for record in raw.splitlines():
        lines += [line.content + b"\n" for line in joiner.push(parse_line(record))]
    lines += [line.content for line in joiner.flush()]
    text = b"".join(lines[-max_lines:]) if max_lines > 0 else b""
    return text[-max_bytes:].decode(errors="ignore")


# --- the links in /var/log/containers

LINK_SUFFIX = ".log"
# A file name may have at most 255 bytes on ext4: the kubelet cuts longer link names there,
# suffix included (kuberuntime's logSymlink), so a cut name keeps `.log` but may lose the end
# of the container ID.
MAX_LINK_NAME = 255
# The kubelet reads a container ID back from a link name only when at least this long.
MIN_LINK_ID = 6


def link_name(pod_name: str, namespace: str, container: str, container_id: str) -> str:
    """`<pod>_<namespace>_<container>-<container ID>.log`, the name of the link the kubelet
    keeps to a started container's log (legacyLogSymlink), cut as it cuts it."""
    stem = f"{pod_name}_{namespace}_{container}-{container_id}"
    return stem[:MAX_LINK_NAME - len(LINK_SUFFIX)] + LINK_SUFFIX


def link_container_id(name: str) -> str | None:
    """The container ID a link name ends with (what follows its last `-`), as the kubelet's
    container GC reads it; None when the name is no link's (no `.log`, an ID too short)."""
    if not name.endswith(LINK_SUFFIX) or "-" not in name:
        return None
    found = name[:-len(LINK_SUFFIX)].rsplit("-", 1)[1]
    return found if len(found) >= MIN_LINK_ID else None
