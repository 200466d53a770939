"""Watching one directory with inotify: which names in it changed, as they change.

Why asyncinotify (a small, maintained, pure-Python ctypes binding of inotify(7), no
dependencies): it registers the inotify descriptor with the asyncio loop (`add_reader`), so an
idle watch costs no CPU at all — no thread, no timer. watchfiles (Rust `notify`) was the other
candidate; its watch runs in a thread that wakes every `step` (50 ms) to check for signals and
for its stop event even when nothing changes, it debounces on its own clock (1.6 s by default)
and it refuses a directory that does not exist. Calling the syscalls ourselves would mean
keeping ctypes signatures and the `inotify_event` layout in this repository for no gain.

What is watched (as the kubelet's fsnotify file source):
- the directory, for creates, writes, closes after writing, renames in and out, deletes and
  attribute changes of its entries (`Change(name)`), and for its own removal or rename;
- its parent, for the directory's name only, so a directory removed and created again (or a
  symlink to it swapped) is watched again at once, and a directory that does not exist yet
  is picked up when it appears.
`Change(None)` means "read everything": the directory appeared, vanished or was replaced, or
the kernel's event queue overflowed and events were lost. `finished` is False for a write still
in progress (created, modified, attributes changed: a close or rename usually follows);
`removed` is True when the entry was deleted or renamed away (the kubelet's podDelete: the
name may be back by the time the directory is read).

Errors: `WatchError` (from `open_watch`, or from `InotifyWatch.next` when the watch stopped
working, e.g. the parent directory was removed) — the caller falls back to polling.
"""

from __future__ import annotations

import errno
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncinotify

log = logging.getLogger(__name__)

# Every change of an entry (the kubelet's fsnotify watches the same: Create, Write, Remove,
# Rename, Chmod), plus the directory's own removal or rename.
_DIRECTORY_EVENTS = (
    asyncinotify.Mask.CREATE | asyncinotify.Mask.MODIFY | asyncinotify.Mask.CLOSE_WRITE
    | asyncinotify.Mask.MOVED_TO | asyncinotify.Mask.MOVED_FROM | asyncinotify.Mask.DELETE
    | asyncinotify.Mask.ATTRIB | asyncinotify.Mask.DELETE_SELF | asyncinotify.Mask.MOVE_SELF
    | asyncinotify.Mask.ONLYDIR
)
# In the parent: the directory (or a symlink to it) coming and going.
_PARENT_EVENTS = (
    asyncinotify.Mask.CREATE | asyncinotify.Mask.MOVED_TO | asyncinotify.Mask.DELETE
    | asyncinotify.Mask.MOVED_FROM | asyncinotify.Mask.DELETE_SELF
    | asyncinotify.Mask.MOVE_SELF | asyncinotify.Mask.ONLYDIR
)
_APPEARED = asyncinotify.Mask.CREATE | asyncinotify.Mask.MOVED_TO
# An entry gone (the kubelet's fsnotify Remove and Rename, both a podDelete).
_REMOVED = asyncinotify.Mask.DELETE | asyncinotify.Mask.MOVED_FROM
# A file still being written; every other event of an entry leaves it complete or gone.
_IN_PROGRESS = asyncinotify.Mask.CREATE | asyncinotify.Mask.MODIFY | asyncinotify.Mask.ATTRIB
# The directory's own watch ended (it was removed, renamed, or its filesystem unmounted).
_GONE = (asyncinotify.Mask.DELETE_SELF | asyncinotify.Mask.MOVE_SELF
         | asyncinotify.Mask.IGNORED | asyncinotify.Mask.UNMOUNT)


class WatchError(Exception):
    """The directory cannot be watched (no inotify instance or watch left, no parent
    directory, permission denied): poll it instead."""


@dataclass(frozen=True)
class Change:
    """One change: of the entry `name` in the directory, or (None) of the directory itself;
    `finished`: the entry is complete or gone (closed after writing, renamed, deleted);
    `removed`: the entry was deleted or renamed away."""

    name: str | None
    finished: bool = True
    removed: bool = False


class DirectoryWatch(Protocol):
    """The seam the manifest watcher uses; tests may pass one that never reports anything."""

    async def next(self) -> Change:
        """Wait for the next change. Raises WatchError when the watch stopped working."""
        ...

    def close(self) -> None: ...


def open_watch(directory: Path) -> InotifyWatch:
    """Watch `directory` (which may not exist yet; its parent must). Raises WatchError."""
    return InotifyWatch(directory)


class InotifyWatch:
    def __init__(self, directory: Path) -> None:
        self._directory = directory
        try:
            self._inotify = asyncinotify.Inotify()
        except OSError as exc:
            raise WatchError(f"cannot start inotify: {exc.strerror or exc} (too many "
                             "inotify instances? fs.inotify.max_user_instances)") from exc
        try:
            self._parent = self._add(directory.parent, _PARENT_EVENTS)
            self._watch: asyncinotify.Watch | None = None
            self._rewatch()
        except WatchError:
            self._inotify.close()
            raise

    @property
    def armed(self) -> bool:
        """The directory itself is watched (False while it does not exist)."""
        return self._watch is not None

    async def next(self) -> Change:
        while True:
            event = await self._inotify.get()
            change = self._change(event)
            if change is not None:
                return change

    def close(self) -> None:
        self._inotify.close()

    def _change(self, event: asyncinotify.Event) -> Change | None:
        """What `event` means for the directory (None: nothing)."""
        if asyncinotify.Mask.Q_OVERFLOW in event.mask:
            log.warning("inotify queue overflowed on %s: reading it again", self._directory)
            return Change(None)
        watch = event.watch
        if watch is self._parent:
            return self._parent_change(event)
        if watch is None or watch is not self._watch:
            return None  # a watch dropped on purpose (the old directory) reporting its end
        if event.mask & _GONE:
            self._drop()
            return Change(None)
        if event.name is None:  # its own attributes changed (its mode may hide the files now)
            return Change(None)
        return Change(str(event.name), finished=not event.mask & _IN_PROGRESS,
                      removed=bool(event.mask & _REMOVED))

    def _parent_change(self, event: asyncinotify.Event) -> Change | None:
        if event.name is None:  # the parent itself was removed or renamed
            raise WatchError(f"the parent of {self._directory} was removed or renamed")
        if str(event.name) != self._directory.name:
            return None
        self._drop()
        if event.mask & _APPEARED:
            self._rewatch()
        return Change(None)

    def _rewatch(self) -> None:
        """Watch the directory if it exists (if not, the parent's watch tells when it does)."""
        try:
            self._watch = self._add(self._directory, _DIRECTORY_EVENTS)
        except WatchError as exc:
            if not isinstance(exc.__cause__, (FileNotFoundError, NotADirectoryError)):
                raise
            self._watch = None

    def _drop(self) -> None:
        """Stop watching the directory: it was removed, renamed or replaced."""
        watch, self._watch = self._watch, None
        if watch is not None and watch in self._inotify.watches:
            try:
                self._inotify.rm_watch(watch)
            except OSError:
                pass  # the kernel already removed it (the directory is gone)

    def _add(self, path: Path, mask: asyncinotify.Mask) -> asyncinotify.Watch:
        try:
            return self._inotify.add_watch(path, mask)
        except OSError as exc:
            hint = (" (too many inotify watches? fs.inotify.max_user_watches)"
                    if exc.errno == errno.ENOSPC else "")
            raise WatchError(f"cannot watch {path}: {exc.strerror or exc}{hint}") from exc
