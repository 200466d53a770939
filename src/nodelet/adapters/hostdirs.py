"""The places nodelet keeps on the host, with the kubelet's modes (its setupDataDirs and
makePodDataDirs): only root reaches pod content, keys and checkpoints.

| path                              | mode | owner      | the kubelet                          |
|-----------------------------------|------|------------|--------------------------------------|
| `<data dir>`                      | 0750 | root:root  | `--root-dir` 0750                    |
| `<data dir>/containerd`           | 0750 | root:root  | - (it starts no runtime)             |
| `/run/nodelet`, `/run/nodelet/<h>`| 0711 | root:root  | containerd's `/run/containerd` 0711  |
| `<data dir>/pods`                 | 0750 | root:root  | `pods/` 0750                         |
| `<data dir>/pods/<uid>`           | 0750 | root:root  | `pods/<uid>` 0750                    |
| `<data dir>/logs`                 | 0750 | root:root  | `/var/log/pods` 0755, files 0640     |
| `<data dir>/pki`, `--cert-dir`    | 0700 | root:root  | `pki/` (keys 0600)                   |
| `<data dir>/checkpoint.db` (+WAL) | 0600 | root:root  | `checkpoints/` 0700                  |

`/run/nodelet/<h>` is the embedded containerd's state (adapters.containerd): a pod in a user
namespace is set up by runc as an unprivileged host user that must reach its rootfs there, so
the way there is traversable, not listable; nothing in the data dir needs that, wherever the
data dir is. The files below keep the kubelet's modes (secrets and ConfigMaps by
`defaultMode`, 0644, and fsGroup; termination-message files 0666, so the container's user may
write them): the directories are what keeps other host users out. `secure_dir` fixes an
existing directory at every start (mode and owner), not only a new one, so a data dir made by
an older nodelet with the umask's 0755 (or 0751) is closed too. Container logs are kept under
the data dir, 0750: a log may print what a pod read from a Secret, and the kubelet's 0755
`/var/log/pods` relies on the runtime's 0640 files alone.

`exposed_ancestors(path)` names the directories above `path` that another user could rename
or replace it in (writable by group or others without the sticky bit, or owned by another
user); the app warns about them.

Errors: `HostDirError` (a path that is not a directory, or a symlink not made by root); the
system calls' `OSError` for the caller to wrap.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

DATA_MODE = 0o750
RUNTIME_DIR_MODE = 0o711  # the runtime's state under /run (see the module docstring)
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


class HostDirError(Exception):
    """The path cannot be made one of nodelet's own directories; the message names it."""


@dataclass(frozen=True)
class Change:
    """What `secure_dir` or `secure_file` changed (for the log)."""

    path: Path
    mode: int  # the mode and owner it had
    uid: int
    gid: int
    made: int  # the mode it has now


def owner() -> tuple[int, int]:
    """Whose nodelet's places are: this process's (root, as nodelet runs)."""
    return os.geteuid(), os.getegid()


def secure_dir(path: Path, mode: int = DATA_MODE) -> Change | None:
    """`path` (and its missing parents) exists as a directory owned by `owner()` with exactly
    `mode`; what it had before when that differed. A symlink is followed only when root (this
    process's user) made it: one planted by another user is refused, never chmod-ed."""
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    with _opened(path, os.O_DIRECTORY) as fd:
        return _fix(fd, path, mode)


def secure_file(path: Path, mode: int = PRIVATE_FILE_MODE) -> Change | None:
    """As `secure_dir` for an existing file; None (nothing done) when it does not exist."""
    try:
        with _opened(path, 0) as fd:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise HostDirError(f"{path} is not a regular file")
            return _fix(fd, path, mode)
    except FileNotFoundError:
        return None


def secure_data_dir(data_dir: Path) -> list[Change]:
    """The data dir's own places of the table above made, or fixed when they exist: the data
    dir, `pods` and each pod's directory in it, `logs`, `pki`. What was changed."""
    changes = [secure_dir(data_dir), secure_dir(data_dir / "pods"),
               secure_dir(data_dir / "logs"), secure_dir(data_dir / "pki", PRIVATE_DIR_MODE)]
    for entry in os.scandir(data_dir / "pods"):
        if entry.is_dir(follow_symlinks=False):
            changes.append(secure_dir(Path(entry.path)))
    return [c for c in changes if c is not None]


def secure_files(paths: Iterable[Path], mode: int = PRIVATE_FILE_MODE) -> list[Change]:
    """`secure_file` for each of `paths` that exists."""
    changes = [secure_file(path, mode) for path in paths]
    return [c for c in changes if c is not None]


def pod_dir(pods_root: Path, uid: str) -> Path:
    """`<pods_root>/<uid>`, made 0750 when missing (the kubelet's pod directory; the pods
    root is made too when missing, but the agent made it 0750 at start)."""
    path = pods_root / uid
    pods_root.mkdir(mode=DATA_MODE, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=DATA_MODE)
        os.chmod(path, DATA_MODE)  # whatever the umask
    return path


@contextlib.contextmanager
def _opened(path: Path, flags: int) -> Iterator[int]:
    base = os.O_RDONLY | os.O_CLOEXEC | flags
    try:
        fd = os.open(path, base | os.O_NOFOLLOW)
    except OSError as exc:
        # A symlink: ELOOP, or ENOTDIR when a directory is asked for.
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        link = os.lstat(path)
        if not stat.S_ISLNK(link.st_mode):
            raise HostDirError(f"{path} is not a directory") from exc
        if link.st_uid != owner()[0]:
            raise HostDirError(
                f"{path} is a symlink owned by uid {link.st_uid}, not by nodelet's user: not "
                "followed (remove it, or make it as root)") from exc
        fd = os.open(path, base)
    try:
        yield fd
    finally:
        os.close(fd)


def _fix(fd: int, path: Path, mode: int) -> Change | None:
    info = os.fstat(fd)
    uid, gid = owner()
    before = Change(path, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, mode)
    if (info.st_uid, info.st_gid) != (uid, gid):
        os.fchown(fd, uid, gid)  # before the chmod: a chown may clear setuid/setgid bits
    if stat.S_IMODE(info.st_mode) != mode or (info.st_uid, info.st_gid) != (uid, gid):
        os.fchmod(fd, mode)
        return before
    return None


def exposed_ancestors(path: Path) -> list[str]:
    """The directories above `path` in which a user other than nodelet's could replace it,
    each with the reason; empty when only root can."""
    found = []
    uid = owner()[0]
    for parent in path.resolve().parents:
        try:
            info = os.stat(parent)
        except OSError:
            continue
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if info.st_uid not in (0, uid):
            found.append(f"{parent} (owned by uid {info.st_uid})")
        elif writable and not info.st_mode & stat.S_ISVTX:
            found.append(f"{parent} (mode {stat.S_IMODE(info.st_mode):04o}, no sticky bit)")
    return found
