"""Container log rotation (pure): the kubelet's container log manager
(pkg/kubelet/logs/container_log_manager.go) as decisions over file names and sizes.

A running container's log `<dir>/<n>.log` that has grown past `max_size` is renamed to
`<n>.log.<UTC time YYYYmmdd-HHMMSS>` and the runtime is asked to reopen the log
(CRI ReopenContainerLog); at most `max_files` files are kept per log, the current one
included, oldest rotated first removed. As the kubelet, every rotated file but the newest is
gzipped (`<n>.log.<time>.gz`): the newest may still be read by whoever followed the log
across the rotation. A `.tmp` file is a compression that did not finish: removed.

Beyond the kubelet: after a round that found a log at twice its size or more (a container
flooding it), the next round comes within `FLOOD_CHECK` seconds rather than a whole period,
so a flooded file holds about one second of the flood rather than a whole period of it
(`next_check`; measured in docs/benchmarks.md, bench/logflood.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

TIME_FORMAT = "%Y%m%d-%H%M%S"
# A log this many times its size when rotated marks a flood; the next round then comes after
# at most this many seconds.
FLOOD_FACTOR = 2
FLOOD_CHECK = 1.0


GZ = ".gz"
TMP = ".tmp"


@dataclass(frozen=True)
class Plan:
    """`rotate_to`: the name the current log gets (None: no rotation now); `remove`: rotated
    files to delete, oldest first; `compress`: rotated files to gzip into `<name>.gz`."""

    rotate_to: str | None
    remove: tuple[str, ...]
    compress: tuple[str, ...] = ()


def rotated_name(log_name: str, now: datetime) -> str:
    return f"{log_name}.{now.strftime(TIME_FORMAT)}"


def _of(log_name: str, name: str) -> bool:
    prefix = f"{log_name}."
    return name.startswith(prefix) and name[len(prefix):][:1].isdigit()


def rotated_files(log_name: str, names: list[str] | tuple[str, ...]) -> list[str]:
    """The rotated files of `log_name` among the directory's `names`, plain or gzipped,
    oldest first (the time stamp sorts as text)."""
    return sorted(n for n in names if _of(log_name, n) and not n.endswith(TMP))


def unfinished_files(log_name: str, names: list[str] | tuple[str, ...]) -> list[str]:
    """Compressions of `log_name`'s rotated files that never finished (`.gz.tmp`)."""
    return sorted(n for n in names if _of(log_name, n) and n.endswith(TMP))


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
    excess = max(len(rotated) - keep, 0)
    remove = rotated[:excess]
    kept = rotated[excess:]
    # A plain file whose .gz is there: compressed, but removing the original did not happen.
    remove += [n for n in kept if n + GZ in sizes]
    compress = [n for n in kept[:-1] if not n.endswith(GZ) and n + GZ not in sizes]
    remove += unfinished_files(log_name, list(sizes))
    return Plan(rotate_to, tuple(remove), tuple(compress))


def next_check(period: float, rotated_sizes: Iterable[int], max_size: int) -> float:
    """Seconds until the next round, given the sizes the logs rotated in this one had."""
    flooded = any(size >= FLOOD_FACTOR * max_size for size in rotated_sizes)
    return min(period, FLOOD_CHECK) if flooded else period
