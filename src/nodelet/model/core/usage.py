"""How full a filesystem is (pure): the numbers image garbage collection and node pressure
read from `statvfs` of the image filesystem or the data dir (`adapters.host.filesystem_stats`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FilesystemStats:
    """One filesystem's size and free space, as an unprivileged writer sees it: `available` is
    what a non-root process may still write (statvfs `f_bavail`, as cadvisor reports it to the
    kubelet), so a filesystem with reserved blocks counts them as used."""

    capacity: int  # bytes
    available: int  # bytes
    inodes: int
    inodes_free: int

    @property
    def used_percent(self) -> int:
        """Percent used as the kubelet's image GC computes it: 100 - available*100/capacity,
        rounded towards more usage (0 for a filesystem of no capacity)."""
        if self.capacity <= 0:
            return 0
        return 100 - min(self.available, self.capacity) * 100 // self.capacity
