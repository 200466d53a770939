"""One agent per data dir: `nodelet run` holds an exclusive lock on `<data dir>/nodelet.lock`
for as long as it runs, as the kubelet holds its `--lock-file`. A second `nodelet run`, or a
`nodelet reset`, on the same data dir is refused while the lock is held, with the holder's
PID: both would act on the same containerd, sandboxes and checkpoint as the running agent.

The lock is flock(2) on a file opened close-on-exec, so the kernel drops it when the agent's
process ends however it ends, and the containerd the agent leaves running never holds it.

Exceptions::

    LockHeld    another process holds the data dir (`pid`: the holder's, when it wrote one)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

FILENAME = "nodelet.lock"


class LockHeld(Exception):
    """Another nodelet holds the data dir."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"a nodelet ({holder}) is running with --data-dir {data_dir}: stop it "
                         "first (Ctrl-C or SIGTERM), or choose another --data-dir")
        self.pid = pid


class InstanceLock:
    """The held lock; `release` (or the process's end) lets the next holder in."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> InstanceLock:
        """Take the data dir's lock (the directory must exist) and write this PID into it;
        raises LockHeld when another process holds it."""
        fd = os.open(data_dir / FILENAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _pid_in(fd)
            os.close(fd)
            raise LockHeld(data_dir, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd)

    def release(self) -> None:
        """Let go of the lock (once; later calls do nothing)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _pid_in(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode().strip())
    return None
