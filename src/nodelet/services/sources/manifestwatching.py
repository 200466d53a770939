"""When to read the manifest directory: on its inotify events, with a slow full re-read as a
safety net, and by polling only while it cannot be watched.

Like the kubelet's file source (fsnotify on the static pod path, plus a full re-list every
`fileCheckFrequency`, 20 s): an idle directory costs nothing between the re-reads. A finished
change (a file closed, renamed in or out, deleted) is read at once, a burst at most once per
`manifest_debounce` s, and a write in progress once it paused for `manifest_debounce` s
(`model/core/manifestchanges`): an editor's save or an atomic write (a dot-temp file renamed
over the manifest) is one read, and 50 files copied at once are a few. Every read is a full
`ManifestSource.scan` — cheap, it compares stamps and parses only changed files — so a read
after lost events, a removed and re-created directory or a re-opened watch repairs everything.

While the directory cannot be watched (watching turned off with `manifest_watch`, no inotify
instance or watch left, no parent directory) it is polled every `manifest_poll_period`, and the
watch is tried again at each poll. Falling back is logged once, as is watching again; /healthz
stays passing meanwhile, since changes are still read, only later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from nodelet import settings as settings_mod
from nodelet.adapters import dirwatch
from nodelet.model.core import manifestchanges as mc
from nodelet.services.sources import sources

log = logging.getLogger(__name__)

OpenWatch = Callable[[Path], dirwatch.DirectoryWatch]


class ManifestWatcher:
    """Runs `source.scan` whenever the directory may have changed; `run` never returns."""

    def __init__(
        self, *, source: sources.ManifestSource, directory: Path,
        settings: settings_mod.Settings, open_watch: OpenWatch | None = None,
    ) -> None:
        self._source = source
        self._directory = directory
        self._settings = settings
        self._open_watch = open_watch or dirwatch.open_watch
        # True while inotify is used, False while polling, None before the first attempt.
        self.watching: bool | None = None

    async def run(self) -> None:
        while True:
            watch = self._open() if self._settings.manifest_watch else None
            if watch is None:
                watch = await self._poll()
            try:
                await self._follow(watch)
            finally:
                watch.close()

    def _open(self) -> dirwatch.DirectoryWatch | None:
        """A watch on the directory, or None (logged when polling starts) if it cannot be had."""
        try:
            watch = self._open_watch(self._directory)
        except dirwatch.WatchError as exc:
            self._polling(str(exc))
            return None
        if self.watching is False:
            log.info("watching manifest directory %s with inotify again", self._directory)
        self.watching = True
        return watch

    def _polling(self, why: str) -> None:
        if self.watching is not False:
            log.warning("cannot watch manifest directory %s (%s): polling it every %g s",
                        self._directory, why, self._settings.manifest_poll_period)
        self.watching = False

    async def _poll(self) -> dirwatch.DirectoryWatch:
        """Scan every poll period until a watch can be opened (never, if watching is off)."""
        if not self._settings.manifest_watch:
            self._polling("watching is turned off (manifest_watch)")
        while True:
            await self._source.scan()
            await asyncio.sleep(self._settings.manifest_poll_period)
            if self._settings.manifest_watch and (watch := self._open()) is not None:
                return watch

    async def _follow(self, watch: dirwatch.DirectoryWatch) -> None:
        """Scan on changes and every resync period, until the watch breaks."""
        await self._source.scan()  # what changed before the watch started
        pending, last_read = mc.Pending(), time.monotonic()
        resync_at = last_read + self._settings.manifest_resync_period
        next_change = self._next(watch)
        try:
            while True:
                now = time.monotonic()
                due = self._due(pending, last_read)
                if now >= min(due, resync_at):
                    await self._source.scan(pending.names, removed=pending.removed)
                    pending, last_read = mc.Pending(), time.monotonic()
                    resync_at = last_read + self._settings.manifest_resync_period
                    continue
                # Not cancelled on timeout: the task keeps an event that came meanwhile.
                await asyncio.wait({next_change}, timeout=min(due, resync_at) - now)
                if not next_change.done():
                    continue
                try:
                    change = next_change.result()
                except dirwatch.WatchError as exc:
                    self._polling(str(exc))
                    return
                pending = mc.noted(pending, change.name, time.monotonic(),
                                   finished=change.finished, removed=change.removed)
                next_change = self._next(watch)
        finally:
            await _cancel(next_change)

    def _due(self, pending: mc.Pending, last_read: float) -> float:
        due = mc.due_at(pending, last_read=last_read, quiet=self._settings.manifest_debounce,
                        longest=self._settings.manifest_debounce_max)
        return float("inf") if due is None else due

    @staticmethod
    def _next(watch: dirwatch.DirectoryWatch) -> asyncio.Task[dirwatch.Change]:
        # Owned by `_follow`, which reads its result or cancels and awaits it.
        return asyncio.get_running_loop().create_task(watch.next(), name="manifest-watch-next")


async def _cancel(task: asyncio.Task[dirwatch.Change]) -> None:
    """Cancel `task` and wait for it; its own outcome no longer matters."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
