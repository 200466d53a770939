"""Writing secrets (private keys, client certificates) to disk: whole, private and durable.

`write(path, data, mode=0o600)` replaces `path` atomically: a reader (or a crash) sees the old
file or the new one, never half of one. The temp file next to it (`.<name>.tmp`) is removed
first and created with O_EXCL | O_NOFOLLOW, so neither a leftover temp file with a wider mode
nor a symlink planted in its place is reused or followed; its mode is set with fchmod
(whatever the umask), the data and then the directory are fsynced around the rename.
`private_dir(path)` makes a directory, or tightens an existing one, to 0700.

Errors: OSError from the system calls, for the caller to wrap and name.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def private_dir(path: Path) -> None:
    """`path` and its missing parents exist; `path` itself is 0700 (an existing one too:
    mkdir's mode applies only to a directory it creates)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def write(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `path` with `data`, with exactly `mode` (see the module doc)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    sync_dir(path.parent)


def sync_dir(directory: Path) -> None:
    """fsync `directory`, so a rename in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
