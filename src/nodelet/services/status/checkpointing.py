"""Writing the checkpoint behind the event loop: on its own thread, retried until it succeeds.

The status manager and the event recorder write through a `CheckpointWriter` (a
`checkpoint.Store`) from the event loop. A write only goes into a dirty set — one entry per pod
UID, per event key, and one pending prune, so the newest value of each wins — and wakes the
writer task (`checkpoint-writer`), which waits `write_delay` for the rest of a burst and writes
the whole set in one transaction on the writer's own thread (the one sqlite3 connection lives
and is used only there). SQLite waits at most `busy_timeout` seconds for another connection's
lock, on that thread: the event loop never waits for the disk.

A write that fails (disk full, locked longer than the busy timeout) is not lost: its entries go
back into the dirty set, unless a newer value replaced them meanwhile, and the writer tries again
after a doubling back-off, until it succeeds. Statuses and events are served from memory
meanwhile. While writes fail, the health check `checkpoint` fails (`/healthz`); the observer is
told after every attempt (metrics: failures, entries pending). `close()` writes what is pending,
bounded by `flush_timeout`.

Exceptions: `open()` raises `checkpoint.CheckpointError` when the file cannot be opened (a corrupt
one is moved aside and replaced: `checkpoint.open_or_replace`). Writes never raise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from nodelet import settings as settings_mod
from nodelet.adapters import checkpoint as cp
from nodelet.helpers import backoff, tasks
from nodelet.model.core import events as ev
from nodelet.model.core import health, pods, transitions
from nodelet.model.core import status as st

log = logging.getLogger(__name__)

T = TypeVar("T")

# Told after every write attempt: the entries still pending, and the error if it failed.
WriteObserver = Callable[[int, cp.CheckpointError | None], None]

HEALTH_CHECK = "checkpoint"
_PRUNE: Hashable = ("prune",)


class CheckpointWriter:
    """A `checkpoint.Store` whose writes are queued on the event loop and written on a thread.

    Create with `await CheckpointWriter.open(...)`, `start()` its task, `await close()` at the
    end. Loads return what the file held when it was opened.
    """

    def __init__(
        self,
        *,
        checkpoint: cp.Checkpoint,
        contents: cp.Contents,
        executor: ThreadPoolExecutor,
        settings: settings_mod.CheckpointSettings,
        observer: WriteObserver | None = None,
    ) -> None:
        self._checkpoint = checkpoint
        self._contents = contents
        self._executor = executor  # one thread: the only one that touches the connection
        self._settings = settings
        self._observer = observer
        self._dirty: dict[Hashable, cp.Write] = {}
        self._in_flight = 0  # entries of the batch being written now
        self._wake = asyncio.Event()
        self._writing = asyncio.Lock()  # one batch in flight: a retried batch never overtakes
        self._task: asyncio.Task[None] | None = None
        self._failures = 0  # consecutive failed attempts
        self._error: cp.CheckpointError | None = None
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        settings: settings_mod.CheckpointSettings,
        observer: WriteObserver | None = None,
    ) -> CheckpointWriter:
        """Open (or replace, when corrupt) the checkpoint at `path` and read it, on the writer
        thread. Raises CheckpointError."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        opening = functools.partial(cp.open_or_replace, path, busy_timeout=settings.busy_timeout)
        try:
            checkpoint, contents = await asyncio.get_running_loop().run_in_executor(
                executor, opening)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(checkpoint=checkpoint, contents=contents, executor=executor,
                   settings=settings, observer=observer)

    def start(self, group: tasks.TaskGroup) -> None:
        """Start the writer task in `group` (it runs until cancelled)."""
        self._task = group.spawn("checkpoint-writer", self._run())

    # -- checkpoint.Store -------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._checkpoint.path

    @property
    def pending(self) -> int:
        """Entries not written yet: queued, or being written now."""
        return len(self._dirty) + self._in_flight

    @property
    def in_flight(self) -> int:
        """Entries of the batch being written now (0: no write is running)."""
        return self._in_flight

    def load_pod_statuses(self) -> dict[pods.PodUID, cp.StoredPodStatus]:
        return dict(self._contents.pod_statuses)

    def load_events(self) -> list[ev.Event]:
        return list(self._contents.events)

    def save_pod_status(
        self, uid: pods.PodUID, name: str, namespace: str, status: st.PodStatus
    ) -> None:
        # The first-ready times travel with the write: a newer status of the same pod replaces
        # this one in the dirty set, and must not lose the *first* time it turned True.
        self._note(("pod", uid), cp.SavePod(
            uid, name, namespace, status,
            first_ready_to_start=transitions.ready_to_start_since(status),
            first_ready=transitions.ready_since(status)))

    def forget_pod(self, uid: pods.PodUID) -> None:
        self._note(("pod", uid), cp.ForgetPod(uid))

    def save_event(self, event: ev.Event) -> None:
        self._note(("event", event.key), cp.SaveEvent(event))

    def prune_events(self, max_events: int) -> None:
        self._note(_PRUNE, cp.PruneEvents(max_events))

    def _note(self, key: Hashable, write: cp.Write) -> None:
        if self._closed:
            log.warning("checkpoint %s is closed, not writing %s", self.path,
                        type(write).__name__)
            return
        older = self._dirty.pop(key, None)
        self._dirty[key] = write if older is None else newest(older, write)
        self._wake.set()

    # -- writing ----------------------------------------------------------------------------

    async def _run(self) -> None:
        delays = backoff.Backoff(self._settings.retry_backoff, self._settings.retry_backoff_max)
        while True:
            await self._wake.wait()
            await asyncio.sleep(self._settings.write_delay)  # the rest of a burst joins
            self._wake.clear()
            if await self._write_dirty():
                delays.reset()
            else:
                await asyncio.sleep(delays.next_delay())
                self._wake.set()  # try again, even if nothing new came

    async def _write_dirty(self) -> bool:
        """Write everything dirty in one transaction; False if it failed (entries kept)."""
        async with self._writing:
            batch, self._dirty = self._dirty, {}
            if not batch:
                return True
            error: cp.CheckpointError | None = None
            self._in_flight = len(batch)
            try:
                await self._in_thread(functools.partial(self._checkpoint.apply, ordered(batch)))
            except cp.CheckpointError as exc:
                error = exc
            except BaseException:
                # Cancelled (shutdown): the thread may still write the batch; writing it
                # again is harmless, losing it is not.
                self._requeue(batch)
                raise
            finally:
                self._in_flight = 0
            if error is not None:
                self._requeue(batch)
            self._attempted(error)
            return error is None

    def _requeue(self, batch: dict[Hashable, cp.Write]) -> None:
        for key, older in batch.items():
            newer = self._dirty.get(key)
            self._dirty[key] = older if newer is None else newest(older, newer)

    def _attempted(self, error: cp.CheckpointError | None) -> None:
        if error is None and self._error is not None:
            log.info("checkpoint %s written again after %d failed attempts", self.path,
                     self._failures)
        elif error is not None and (self._error is None or str(error) != str(self._error)):
            log.warning("cannot write checkpoint, %d entries kept and retried: %s",
                        len(self._dirty), error)
        self._failures = self._failures + 1 if error is not None else 0
        self._error = error
        if self._observer is not None:
            self._observer(len(self._dirty), error)

    async def _in_thread(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    # -- health and shutdown ----------------------------------------------------------------

    def health(self) -> health.HealthCheck:
        """Fails while writes fail (and if the writer task died)."""
        if self._task is not None and self._task.done():
            return health.HealthCheck(HEALTH_CHECK, False, "the checkpoint writer task stopped")
        if self._error is not None:
            return health.HealthCheck(
                HEALTH_CHECK, False,
                f"{self.pending} entries not written after {self._failures} failed "
                f"attempts: {self._error}")
        return health.HealthCheck(HEALTH_CHECK, True)

    async def close(self) -> None:
        """Stop the writer task, write what is pending (retrying with back-off for at most
        `flush_timeout` seconds) and close the database. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            async with asyncio.timeout(self._settings.flush_timeout):
                await self._stop_task()
                await self._flush()
                await self._in_thread(self._checkpoint.close)
        except TimeoutError:
            log.warning("checkpoint %s: %d entries not written within %.1f s at shutdown; their "
                        "transition times and events are lost", self.path, self.pending,
                        self._settings.flush_timeout)
            self._executor.submit(self._checkpoint.close)  # after the write still in flight
        finally:
            self._executor.shutdown(wait=False)

    async def _stop_task(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task])

    async def _flush(self) -> None:
        delays = backoff.Backoff(self._settings.retry_backoff, self._settings.retry_backoff_max)
        while self._dirty:
            if not await self._write_dirty():
                await asyncio.sleep(delays.next_delay())


def newest(older: cp.Write, newer: cp.Write) -> cp.Write:
    """The write that stands for both: `newer`, keeping the first-ready times `older` had
    (they record the *first* time a condition turned True)."""
    if isinstance(older, cp.SavePod) and isinstance(newer, cp.SavePod):
        return dataclasses.replace(
            newer,
            first_ready_to_start=older.first_ready_to_start or newer.first_ready_to_start,
            first_ready=older.first_ready or newer.first_ready,
        )
    return newer


def ordered(batch: dict[Hashable, cp.Write]) -> list[cp.Write]:
    """The batch in the order to write it: prunes last, after the events they bound."""
    writes: Iterable[cp.Write] = batch.values()
    return sorted(writes, key=lambda write: isinstance(write, cp.PruneEvents))
