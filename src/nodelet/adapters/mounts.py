"""The host file system for pod volumes: tmpfs mounts, the kubelet's atomic writer, hostPath
type checks, safe subPath access (open without following symlinks, bind-mount by descriptor),
paths resolved with a volume as their root (env files) and shared mount propagation. The
functions without `async` block (file I/O); call them in a thread.

Exceptions::

    MountError      a mount, unmount or hostPath check failed, or a path inside a volume
                    cannot be resolved; `.message` says which path and why, in the
                    kubelet's words where it has some
"""

from __future__ import annotations

import asyncio
import ctypes
import errno as errno_
import functools
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from nodelet.adapters import commands
from nodelet.helpers import errors
from nodelet.model.core import volumes

# The atomic writer's names inside a volume directory (the kubelet's AtomicWriter).
DATA_LINK = "..data"
_DATA_TMP_LINK = "..data_tmp"


class MountError(errors.MessageError):
    """A mount or unmount that failed; `message` says which and why."""


# ---------------------------------------------------------------------------------------------
# Mounts


@dataclass(frozen=True)
class _MountInfo:
    """One line of /proc/self/mountinfo."""

    point: str
    optional: tuple[str, ...]  # `shared:N`, `master:N`, ...: the mount's propagation
    fstype: str


# How the kernel writes a mount point into /proc/self/mountinfo (`mangle_path`): these four
# characters octal-escaped, everything else as it is.
_MOUNTINFO_ESCAPES = str.maketrans({" ": "\\040", "\t": "\\011", "\n": "\\012",
                                    "\\": "\\134"})


def _mountinfo(containing: str = "") -> Iterator[_MountInfo]:
    """The mounts of this mount namespace, in mount order (one on top of another comes later).

    With `containing` (a path), only the lines that hold it as the kernel writes it are
    parsed: every mount at or below that path is among them. Volume set-up reads the table on
    every pod sync, and it has a few lines per running pod (rootfs, shm, netns, volumes): with
    30 pods (166 lines) parsing every line took 0.26 ms on top of the 0.3 ms read, the
    filtered lines 0.08 ms."""
    wanted = containing.translate(_MOUNTINFO_ESCAPES)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if wanted not in line:
            continue
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        # Field 5 is the mount point, with space, tab, newline and backslash octal-escaped;
        # the optional fields run from field 7 to the " - " separator.
        point = parts[4] if "\\" not in parts[4] else \
            re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[4])
        yield _MountInfo(point, tuple(parts[6:]), rest.split()[0] if rest else "")


def _within(top: str, path: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def mount_points(under: Path) -> list[tuple[Path, str]]:
    """(mount point, fs type) at or below `under`, deepest first (from /proc/self/mountinfo)."""
    top = os.path.realpath(under)
    found = {Path(m.point): m.fstype for m in _mountinfo(top) if _within(top, m.point)}
    return sorted(found.items(), key=lambda item: len(item[0].parts), reverse=True)


def is_mount_point(path: Path) -> bool:
    """Whether something is mounted on `path` itself (a bind mount on the same file system
    too, which `os.path.ismount` misses)."""
    top = os.path.realpath(path)
    return any(m.point == top for m in _mountinfo(top))


def is_tmpfs(path: Path) -> bool:
    top = Path(os.path.realpath(path))
    return any(point == top and fstype == "tmpfs" for point, fstype in mount_points(path))


async def mount_tmpfs(target: Path, *, size: int | None, mode: int, limit: float) -> None:
    """Mount a tmpfs on `target` with the given root mode; no size: the kernel's half of RAM."""
    options = f"mode={mode:04o}" + (f",size={size}" if size is not None else "")
    # The mount(2) call mount(8) makes for these arguments (strace: util-linux 2.38), without
    # starting mount(8): measured 0.07 ms of CPU against 1.6 ms (1.2 in the process: binary,
    # libraries, locale; 0.4 in nodelet: spawn, child watcher), and every pod with a token
    # volume has one. Only when the kernel refuses is mount(8) run, so a failure reads as it
    # always did. (A tmpfs mount does no I/O: it cannot hang.)
    if await asyncio.to_thread(_mount_tmpfs, str(target), options):
        return
    status, output = await commands.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], limit=limit
    )
    if status != 0:
        raise MountError(f"mount tmpfs on {target} failed ({status}): {output}")


def mounts_under(path: Path) -> list[Path]:
    """Mount points at or below `path`, deepest first."""
    return [point for point, _ in mount_points(path)]


# Passes over the mount points of a tree: a mount hidden under another one on the same path
# only shows once the one on top is gone.
UNMOUNT_PASSES = 8


async def unmount_all(path: Path, *, limit: float = 10.0) -> list[Path]:
    """Unmount everything at or below `path` (lazily when busy), also mounts stacked on one
    path; returns what was unmounted."""
    done: list[Path] = []
    for _ in range(UNMOUNT_PASSES):
        progress = False
        for point, fstype in mount_points(path):
            try:
                await unmount(point, limit=limit, fstype=fstype)
            except MountError:
                continue
            done.append(point)
            progress = True
        if not progress:
            break
    return done


async def unmount(target: Path, *, limit: float, fstype: str = "") -> None:
    """Unmount `target`, lazily when it is busy (a container may still hold it). `fstype`
    is what /proc/self/mountinfo says is mounted there."""
    # A tmpfs (no backing store: its unmount cannot hang) gets the umount2(2) call umount(8)
    # makes, without starting umount(8), as `mount_tmpfs`; the commands run when it fails.
    if fstype == "tmpfs" and await asyncio.to_thread(_umount, str(target)):
        return
    status, output = await commands.run(["umount", str(target)], limit=limit)
    if status != 0:
        status, output = await commands.run(["umount", "-l", str(target)], limit=limit)
    if status != 0:
        raise MountError(f"unmount {target} failed ({status}): {output}")


async def bind(source: str, target: Path, *, read_only: bool, options: tuple[str, ...] = (),
               limit: float) -> None:
    """Bind-mount `source` onto the directory `target` (read-only if asked, with the PV's
    mount options), as the kubelet's local volume plugin: with mount(8), whose error is
    the kubelet's too."""
    opts = ",".join(("bind", *(("ro",) if read_only else ()), *options))
    argv = ["mount", "-o", opts, source, str(target)]
    status, output = await commands.run(argv, limit=limit)
    if status != 0:
        raise MountError(f"mount failed: exit status {status}\nMounting command: mount\n"
                         f"Mounting arguments: {' '.join(argv[1:])}\nOutput: {output.strip()}")


async def format_and_mount(device: str, target: Path, *, fstype: str, options: tuple[str, ...],
                           limit: float) -> None:
    """Mount the block device `device` on `target` as `fstype`, formatting it first when it
    holds no file system and no partition table (mount-utils' SafeFormatAndMount, which the
    kubelet's local volumes use: blkid, then mkfs, never over existing data)."""
    status, output = await commands.run(
        ["blkid", "-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", device], limit=limit)
    if status == 2:  # nothing found on it: a blank device
        mkfs = ["mkfs.ext4", "-F", "-m0", device] if fstype in ("ext3", "ext4") else \
            ["mkfs." + fstype, device]
        status, output = await commands.run(mkfs, limit=limit)
        if status != 0:
            raise MountError(f"format of {device} as {fstype} failed ({status}): {output}")
    elif status != 0:
        raise MountError(f"blkid {device} failed ({status}): {output}")
    argv = ["mount", "-t", fstype, *(["-o", ",".join(options)] if options else []), device,
            str(target)]
    status, output = await commands.run(argv, limit=limit)
    if status != 0:
        raise MountError(f"mount failed: exit status {status}\nMounting command: mount\n"
                         f"Mounting arguments: {' '.join(argv[1:])}\nOutput: {output.strip()}")


# ---------------------------------------------------------------------------------------------
# Mount syscalls (flags from <sys/mount.h>)

_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_SHARED = 0x100000
_MNT_DETACH = 2


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, flags: int) -> None:
    """mount(2) without a file system type or data: binds and propagation changes. Unlike
    mount(8), nothing canonicalizes `source`, so /proc/self/fd/N stays the opened file."""
    if _libc().mount(source.encode(), target.encode(), None, ctypes.c_ulong(flags), None):
        error = ctypes.get_errno()
        raise MountError(f"mount {source} on {target}: {os.strerror(error).lower()}")


def _mount_tmpfs(target: str, options: str) -> bool:
    """mount("tmpfs", target, "tmpfs", 0, options), as `mount -t tmpfs -o <options> tmpfs
    <target>` calls it; False when the kernel refused."""
    return not _libc().mount(b"tmpfs", target.encode(), b"tmpfs", ctypes.c_ulong(0),
                             options.encode())


def _umount(target: str) -> bool:
    """umount2(target, 0), as `umount <target>` calls it; False when the kernel refused."""
    return not _libc().umount2(target.encode(), 0)


def detach(target: Path) -> None:
    """Unmount whatever is mounted on `target` (lazily when busy), also mounts stacked there."""
    for _ in range(UNMOUNT_PASSES):
        if not is_mount_point(target):
            return
        if _libc().umount2(str(target).encode(), 0) and \
                _libc().umount2(str(target).encode(), _MNT_DETACH):
            error = ctypes.get_errno()
            raise MountError(f"unmount {target}: {os.strerror(error).lower()}")
    raise MountError(f"unmount {target}: still mounted after {UNMOUNT_PASSES} unmounts")


# ---------------------------------------------------------------------------------------------
# Shared mount propagation


def _containing_mount(path: str) -> _MountInfo:
    """The mount `path` is on: the deepest mount point above it, the last one mounted there."""
    best: _MountInfo | None = None
    for info in _mountinfo():
        if _within(info.point, path) and (best is None or len(info.point) >= len(best.point)):
            best = info
    if best is None:
        raise MountError(f"no mount found for {path} in /proc/self/mountinfo")
    return best


def make_rshared(path: Path) -> bool:
    """Put `path` on a shared mount, the kubelet's MakeRShared of its root directory: nothing
    to do when the mount it is on is shared already, else it is bound onto itself (unless it
    is a mount point already) and made rshared. Refuses (MountError) to bind over mounts below
    `path`, which the bind would hide. True when it bound `path`."""
    top = os.path.realpath(path)
    info = _containing_mount(top)
    if any(field.startswith("shared:") for field in info.optional):
        return False
    bind = info.point != top
    if bind:
        below = [str(point) for point in mounts_under(Path(top))]
        if below:
            raise MountError(f"cannot make {top} shared: the bind would hide the mounts "
                             f"below it ({', '.join(below)}); run `nodelet reset` first")
        _mount(top, top, _MS_BIND)
    _mount("none", top, _MS_SHARED | _MS_REC)
    return bind


# ---------------------------------------------------------------------------------------------
# Safe subPath access (the kubelet's pkg/volume/util/subpath/subpath_linux.go)
#
# A container can replace any directory of its (writable) volume with a symlink at any time;
# a path checked and then handed on as a string can lead out of the volume by the time it is
# used (CVE-2017-1002101, CVE-2021-25741). So a subPath is opened one component at a time with
# O_NOFOLLOW, and what was opened is bind-mounted through its descriptor.

_DIR_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_PATH_NOFOLLOW = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def _components(relative: str) -> list[str]:
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise MountError(f"path {relative} must not contain '..'")
    return parts


def _open_child(parent: int, name: str, flags: int, path: str) -> int:
    """openat(parent, name) refusing a symlink: O_NOFOLLOW fails on one (ELOOP), or opens the
    link itself with O_PATH, which fstat then shows."""
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno_.ELOOP:
            raise MountError(f"unexpected symlink found {path}") from exc
        raise MountError(f"cannot open {path}: {(exc.strerror or str(exc)).lower()}") from exc
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise MountError(f"unexpected symlink found {path}")
    return fd


def open_beneath(base: str, relative: str) -> int:
    """An O_PATH descriptor of `base/relative` (the kubelet's doSafeOpen), opened from `base`
    one component at a time without following symlinks: a symlink anywhere below `base` is
    refused with MountError, whenever it was put there. `base` must be a resolved directory
    path (no symlinks). The caller closes the descriptor."""
    fd = os.open(base, _DIR_NOFOLLOW)
    path = base
    try:
        for part in _components(relative):
            path = os.path.join(path, part)
            child = _open_child(fd, part, _PATH_NOFOLLOW, path)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _existing_prefix(base: str, parts: list[str]) -> int:
    """How many leading components of `base/parts` exist (a symlink counts)."""
    for count in range(len(parts)):
        if not os.path.lexists(os.path.join(base, *parts[:count + 1])):
            return count
    return len(parts)


def make_dirs_beneath(base: str, relative: str, *, mode: int, gid: int) -> None:
    """Create the directories of `base/relative` that are missing (the kubelet's SafeMakeDir):
    the part that exists is resolved, must stay below `base` and is opened with
    `open_beneath`; each missing directory is made with mkdirat and entered with O_NOFOLLOW,
    so none can be swapped for a symlink meanwhile. New directories get `mode` exactly (no
    umask; setgid included) and group `gid`."""
    parts = _components(relative)
    have = _existing_prefix(base, parts)
    existing = os.path.realpath(os.path.join(base, *parts[:have]))
    if not _within(base, existing):
        raise MountError(f"path {os.path.join(base, *parts[:have])} resolves outside "
                         f"{base}: {existing}")
    fd = open_beneath(base, os.path.relpath(existing, base))
    path = existing
    try:
        for part in parts[have:]:
            path = os.path.join(path, part)
            created = _make_dir_at(fd, part, mode, path)
            child = _open_child(fd, part, _DIR_NOFOLLOW, path)
            os.close(fd)
            fd = child
            if created:
                os.fchown(fd, -1, gid)  # before the chmod: a chown may clear setgid
                os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _make_dir_at(parent: int, name: str, mode: int, path: str) -> bool:
    """mkdirat; False when something is there already (the open that follows checks it)."""
    try:
        os.mkdir(name, mode, dir_fd=parent)
    except FileExistsError:
        return False
    except OSError as exc:
        raise MountError(f"cannot create directory {path}: "
                         f"{(exc.strerror or str(exc)).lower()}") from exc
    return True


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def bind_descriptor(fd: int, target: Path) -> bool:
    """Bind-mount the file `fd` refers to onto `target` (a path nodelet owns, created as a
    directory or an empty file to match) through /proc/self/fd, so no path inside the volume
    is resolved again (the kubelet's doBindSubPath). A bind of the same file already on
    `target` is reused, another one replaced, so mounts never stack. Checks afterwards that
    `target` shows the opened inode. True when it mounted."""
    opened = os.fstat(fd)
    if is_mount_point(target):
        if _same_file(os.stat(target), opened):
            return False
        detach(target)
    _make_target(target, directory=stat.S_ISDIR(opened.st_mode))
    _mount(f"/proc/self/fd/{fd}", str(target), _MS_BIND)
    if not _same_file(os.stat(target), opened):
        detach(target)
        raise MountError(f"bind mount on {target} does not show the opened file")
    return True


def _make_target(target: Path, *, directory: bool) -> None:
    """An empty directory or file to bind onto (a file takes any non-directory: a bind
    mount gives it the source's type); one of the other kind, left by an earlier bind of
    another file, is replaced."""
    target.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    if os.path.lexists(target) and target.is_dir() != directory:
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        else:
            target.unlink()
    if directory:
        target.mkdir(mode=0o750, exist_ok=True)
    else:
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640))


# ---------------------------------------------------------------------------------------------
# A path inside a volume, with the volume as its root (the kubelet's securejoin.SecureJoin)
#
# An env file (fileKeyRef) is named by a path inside an emptyDir that the pod's containers
# write: symlinks in it are followed as securejoin follows them, with the volume as "/" (an
# absolute target and ".." start over from, or stop at, the volume). Each step is opened from
# the descriptor of the one before with O_NOFOLLOW, so a symlink swapped in meanwhile is
# resolved inside the volume too; the string path is only for messages.

_STEP = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_LINKS = 255  # securejoin's MaxSymlinkLimit


def _step(parent: int, part: str) -> int | None:
    """An O_PATH descriptor of `part` in `parent`, not followed; None when it does not exist
    (or `parent` is no directory), which securejoin takes lexically."""
    try:
        return os.open(part, _STEP, dir_fd=parent)
    except (FileNotFoundError, NotADirectoryError):
        return None


def open_in_root(root: str, unsafe: str) -> tuple[int, str]:
    """An O_PATH descriptor of `unsafe` resolved inside the directory `root` as securejoin
    resolves it, and the path it resolved to. Raises FileNotFoundError when it does not
    exist, MountError after 255 symlinks (securejoin's words). The caller closes it."""
    opened = [os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)]
    names: list[str] = []
    missing: list[str] = []  # past a component that does not exist: lexical
    remaining, links = unsafe.split("/"), 0
    try:
        while remaining:
            part = remaining.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if missing:
                    missing.pop()
                elif names:
                    names.pop()
                    os.close(opened.pop())
                continue
            fd = None if missing else _step(opened[-1], part)
            if fd is None:
                missing.append(part)
            elif not stat.S_ISLNK(os.fstat(fd).st_mode):
                opened.append(fd)
                names.append(part)
            else:
                links += 1
                target = _read_link(fd)
                if links > _MAX_LINKS:
                    raise MountError(f"SecureJoin {root}/{unsafe}: too many levels of "
                                     "symbolic links")
                if target.startswith("/"):
                    names.clear()
                    while len(opened) > 1:
                        os.close(opened.pop())
                remaining[:0] = target.split("/")
        path = os.path.normpath(os.path.join(root, *names, *missing))
        if missing:
            raise FileNotFoundError(errno_.ENOENT, os.strerror(errno_.ENOENT), path)
        return opened.pop(), path
    finally:
        for fd in opened:
            os.close(fd)


def _read_link(fd: int) -> str:
    """The target of the symlink `fd` (an O_PATH descriptor of it), which it closes."""
    try:
        return os.readlink("", dir_fd=fd)
    finally:
        os.close(fd)


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
    if mode is None:
        raise MountError(f"hostPath type check failed, {path} is not {what}, unable to "
                         f'determine its type: path "{path}" does not exist')
    if not check(mode):
        found = next((name for name, (test, _) in _TYPE_CHECKS.items() if test(mode)), None)
        if found is None:  # a FIFO: the kubelet knows no name for it either
            raise MountError(f"hostPath type check failed, {path} is not {what}, unable to "
                             "determine its type: only recognise file, directory, socket, "
                             "block device and character device")
        raise MountError(f"hostPath type check failed: {path} is not {what}, it's a {found}")
