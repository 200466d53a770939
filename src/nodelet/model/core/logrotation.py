"""Container log rotation (pure): the kubelet's container log manager
(pkg/kubelet/logs/container_log_manager.go) as decisions over file names and sizes.

A running container's log `<dir>/<n>.log` that has grown past `max_size` is renamed to
`<n>.log.<UTC time YYYYmmdd-HHMMSS>` and the runtime is asked to reopen the log
(CRI ReopenContainerLog); at most `max_files` files are kept per log, the current one
included, oldest rotated first removed. (The kubelet also gzips rotated files but the newest;
nodelet keeps them plain, so `nodelet logs` can read them as they are.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

TIME_FORMAT = "%Y%m%d-%H%M%S"


@dataclass(frozen=True)
class Plan:
    """`rotate_to`: the name the current log gets (None: no rotation now); `remove`: rotated
    files to delete, oldest first."""

    rotate_to: str | None
    remove: tuple[str, ...]


def rotated_name(log_name: str, now: datetime) -> str:
    return f"{log_name}.{now.strftime(TIME_FORMAT)}"


def rotated_files(log_name: str, names: list[str] | tuple[str, ...]) -> list[str]:
    """The rotated files of `log_name` among the directory's `names`, oldest first (the time
    stamp sorts as text)."""
    prefix = f"{log_name}."
    return sorted(n for n in names if n.startswith(prefix) and n[len(prefix):][:1].isdigit())


def plan(log_name: str, sizes: Mapping[str, int], *, max_size: int, max_files: int,
         now: datetime) -> Plan:
    """What to do with one container log, given the sizes of the files in its directory."""
    rotated = rotated_files(log_name, list(sizes))
    rotate_to = None
    if sizes.get(log_name, 0) > max_size:
        name = rotated_name(log_name, now)
        if name not in sizes:  # twice within a second: the next round rotates it
            rotate_to = name
            rotated.append(name)
    keep = max(max_files - 1, 0)  # the current file is one of max_files
    excess = len(rotated) - keep
    return Plan(rotate_to, tuple(rotated[:excess]) if excess > 0 else ())
