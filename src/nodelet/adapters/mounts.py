"""The host file system for pod volumes: tmpfs mounts, the kubelet's atomic writer, hostPath
type checks. The functions without `async` block (file I/O); call them in a thread.

Exceptions::

    MountError      a mount, unmount or hostPath check failed; `.message` says which path
                    and why, in the kubelet's words where it has some
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from nodelet.adapters import commands
from nodelet.model import volumes

# The atomic writer's names inside a volume directory (the kubelet's AtomicWriter).
DATA_LINK = "..data"
_DATA_TMP_LINK = "..data_tmp"


class MountError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------------------------------------
# Mounts


def mount_points(under: Path) -> list[tuple[Path, str]]:
    """(mount point, fs type) at or below `under`, deepest first (from /proc/self/mountinfo)."""
    top = os.path.realpath(under)
    found: dict[Path, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        # Field 5 is the mount point, with space, tab, newline and backslash octal-escaped.
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields.split()[4])
        if point == top or point.startswith(top + "/"):
            found[Path(point)] = rest.split()[0] if rest else ""
    return sorted(found.items(), key=lambda item: len(item[0].parts), reverse=True)


def is_tmpfs(path: Path) -> bool:
    top = Path(os.path.realpath(path))
    return any(point == top and fstype == "tmpfs" for point, fstype in mount_points(path))


async def mount_tmpfs(target: Path, *, size: int | None, mode: int, limit: float) -> None:
    """Mount a tmpfs on `target` with the given root mode; no size: the kernel's half of RAM."""
    options = f"mode={mode:04o}" + (f",size={size}" if size is not None else "")
    status, output = await commands.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], limit=limit
    )
    if status != 0:
        raise MountError(f"mount tmpfs on {target} failed ({status}): {output}")


def mounts_under(path: Path) -> list[Path]:
    """Mount points at or below `path`, deepest first."""
    return [point for point, _ in mount_points(path)]


async def unmount_all(path: Path, *, limit: float = 10.0) -> list[Path]:
    """Unmount everything at or below `path` (lazily when busy); returns what was unmounted."""
    done = []
    for point in mounts_under(path):
        try:
            await unmount(point, limit=limit)
        except MountError:
            continue
        done.append(point)
    return done


async def unmount(target: Path, *, limit: float) -> None:
    """Unmount `target`, lazily when it is busy (a container may still hold it)."""
    status, output = await commands.run(["umount", str(target)], limit=limit)
    if status != 0:
        status, output = await commands.run(["umount", "-l", str(target)], limit=limit)
    if status != 0:
        raise MountError(f"unmount {target} failed ({status}): {output}")


# ---------------------------------------------------------------------------------------------
# The atomic writer


def _read_files(directory: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            mode = stat.S_IMODE(path.stat().st_mode)
            out[path.relative_to(directory).as_posix()] = (path.read_bytes(), mode)
    return out


def _write_files(directory: Path, payload: Mapping[str, volumes.FileSpec]) -> None:
    for rel, spec in payload.items():
        path = directory / rel
        for parent in reversed(path.relative_to(directory).parents[:-1]):
            (directory / parent).mkdir(mode=0o755, exist_ok=True)
        path.write_bytes(spec.data)
        path.chmod(spec.mode)


def _timestamped_dir(target: Path) -> Path:
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
    made = Path(tempfile.mkdtemp(prefix=f"..{stamp}.", dir=target))
    made.chmod(0o755)
    return made


def current_data_dir(target: Path) -> Path | None:
    """The timestamped directory `..data` points at, or None before the first write."""
    link = target / DATA_LINK
    return target / os.readlink(link) if link.is_symlink() else None


def write_atomically(target: Path, payload: Mapping[str, volumes.FileSpec]) -> bool:
    """Make `target` show exactly `payload`, the way the kubelet's AtomicWriter does.

    The files go into a fresh `..<timestamp>` directory; the `..data` symlink is then swapped
    to it with one rename, and every top-level name is a symlink through `..data`, so a
    reader sees the old set or the new set, never a mix. Returns False when nothing changed
    (the directory is left alone, so paths resolved earlier for subPath mounts stay valid).
    """
    target.mkdir(mode=0o755, parents=True, exist_ok=True)
    old = current_data_dir(target)
    wanted = {rel: (spec.data, spec.mode) for rel, spec in payload.items()}
    if old is not None and old.is_dir() and _read_files(old) == wanted:
        _link_top_level(target, payload)
        return False
    new = _timestamped_dir(target)
    _write_files(new, payload)
    tmp_link = target / _DATA_TMP_LINK
    tmp_link.unlink(missing_ok=True)
    os.symlink(new.name, tmp_link)
    os.rename(tmp_link, target / DATA_LINK)
    _link_top_level(target, payload)
    _remove_stale(target, keep=new.name)
    return True


def _link_top_level(target: Path, payload: Mapping[str, volumes.FileSpec]) -> None:
    tops = {rel.split("/", 1)[0] for rel in payload}
    for name in tops:
        link = target / name
        if not link.is_symlink():
            if link.exists():  # not ours (a subPath mount point created earlier): replace
                _remove(link)
            os.symlink(f"{DATA_LINK}/{name}", link)
    for entry in target.iterdir():
        if not entry.name.startswith("..") and entry.name not in tops and entry.is_symlink():
            entry.unlink()


def _remove_stale(target: Path, *, keep: str) -> None:
    """Old timestamped directories (also those a crash in the middle of a write left)."""
    for entry in target.iterdir():
        if entry.name.startswith("..") and entry.name not in (keep, DATA_LINK) \
                and not entry.is_symlink():
            _remove(entry)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


# ---------------------------------------------------------------------------------------------
# hostPath


_TYPE_CHECKS = {
    "Directory": (stat.S_ISDIR, "a directory"),
    "File": (stat.S_ISREG, "a file"),
    "Socket": (stat.S_ISSOCK, "a socket file"),
    "CharDevice": (stat.S_ISCHR, "a character device"),
    "BlockDevice": (stat.S_ISBLK, "a block device"),
}


def _file_mode(path: str) -> int | None:
    try:
        return os.stat(path).st_mode
    except OSError:
        return None


def _create(path: str, type_: str) -> None:
    try:
        if type_ == "DirectoryOrCreate":
            os.makedirs(path, mode=0o755)
            os.chmod(path, 0o755)
        else:  # FileOrCreate: the parent must exist, as in the kubelet
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDONLY, 0o644))
            os.chmod(path, 0o644)
    except FileExistsError:
        return  # created meanwhile; the type check that follows decides
    except OSError as exc:
        what = "mkdir" if type_ == "DirectoryOrCreate" else "open"
        raise MountError(f"{what} {path}: {(exc.strerror or str(exc)).lower()}") from exc


def check_host_path(path: str, type_: str) -> None:
    """The kubelet's hostPath type check, creating the path for the ...OrCreate types."""
    if not type_:
        return
    if type_.endswith("OrCreate") and _file_mode(path) is None:
        _create(path, type_)
    check, what = _TYPE_CHECKS[type_.removesuffix("OrCreate")]
    mode = _file_mode(path)
    if mode is None or not check(mode):
        raise MountError(f"hostPath type check failed: {path} is not {what}")
