"""A real full disk for tests: a tiny tmpfs (needs root) and a file that fills it up."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_tmpfs(mount_point: Path, *, size: str = "1m") -> Iterator[Path]:
    """Mount a `size` tmpfs on `mount_point` (created if missing); always unmounted after."""
    if os.geteuid() != 0:
        pytest.fail("a real full disk needs root (mount -t tmpfs); run as root")
    mount_point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "nodelet-test-tmpfs",
                    str(mount_point)], check=True, capture_output=True)
    try:
        yield mount_point
    finally:
        # Lazily: a file still open (a connection the test failed to close) must not leave
        # the mount behind.
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True, capture_output=True)


def fill(directory: Path) -> Path:
    """Write `directory/filler` until the file system is full; return the filler's path."""
    filler = directory / "filler"
    chunk = b"\0" * 4096
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler
