"""Image garbage collection: the kubelet's realImageGCManager, run every `image_gc_period`.

Each collection looks at the runtime (CRI ListImages and ListContainers: every container,
running or exited, marks its image used now). With `image_maximum_gc_age` set, it first
removes (CRI RemoveImage, by ID) every unused image that no container has used for longer
than that, whatever the disk usage — the kubelet's imageMaximumGCAge. None goes before the
collector has run that long (it knows uses from its start on, so a restart starts every count
afresh); an image never seen in use has no last use, and goes at the first collection after
that, or, appearing later, at the first collection that sees it (freeOldImages). Then it reads
how full the image filesystem is (CRI ImageFsInfo gives its mount point, `statvfs` the
numbers) and, once it is `image_gc_high_percent` full or more, removes unused images in the
order `model.core.imagegc` decides until usage is back at `image_gc_low_percent`. Images in
use, the protected ones (the sandbox image nodelet runs pods with) and those the runtime pins
always stay, and images first seen less than `image_minimum_gc_age` ago are not removed to
free space. A high threshold of 100 with no maximum age turns the periodic collection off, as
in the kubelet.

Events about the Node, as the kubelet records them:
- `FreeDiskSpaceFailed` (Warning) when fewer bytes could be freed than needed
  (`Failed to garbage collect required amount of images. Attempted to free N bytes, but only
  found M bytes eligible to free.`);
- `ImageGCFailed` (Warning, the error) when collections fail twice or more in a row;
- `InvalidDiskCapacity` (Warning) for an image filesystem of capacity 0.

`delete_unused()` removes every unused image that is old enough, whatever the usage: the
eviction manager's first resort under disk pressure.

Exceptions: none escape `collect()`, `delete_unused()` or `run()`: runtime and filesystem
errors are logged and reported in the result, and the loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from nodelet import settings as settings_mod
from nodelet.adapters import host
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import events as ev
from nodelet.model.core import imagegc as gc
from nodelet.model.core import runtime as rt
from nodelet.model.core import usage
from nodelet.model.core.durations import go_duration

log = logging.getLogger(__name__)


class ImageGCError(Exception):
    """The image filesystem cannot be found or read."""


class ImageRuntime(Protocol):
    """What image GC needs of the runtime (`cri.RuntimeClient` has it)."""

    async def list_images(self) -> list[rt.ImageInfo]: ...
    async def list_containers(self) -> list[rt.ContainerInfo]: ...
    async def image_fs_info(self) -> list[rt.FilesystemUsage]: ...
    async def remove_image(self, ref: str) -> None: ...


class NodeEvents(Protocol):
    """Where events about the node go (`recording.EventRecorder` has it)."""

    def record_node(self, type_: ev.EventType, reason: str, message: str) -> ev.Event: ...


class ImageGC:
    """Keeps a record of every image and removes unused ones when the disk fills up."""

    def __init__(
        self, *, client: ImageRuntime, recorder: NodeEvents, settings: settings_mod.GCSettings,
        protected: Sequence[str], clock: Callable[[], datetime],
        stats: Callable[[str], usage.FilesystemStats] = host.filesystem_stats,
        on_removed: Callable[[list[str], datetime], Awaitable[None]] | None = None,
    ) -> None:
        """`protected`: references (tags, digests or IDs) of images never to remove; `stats`:
        reads a filesystem's size and free space (statvfs); `on_removed`: told the IDs of the
        images a collection removed and when it began (the pulled-image records forget them
        unless written since, as the kubelet's post-GC hook prunes its records)."""
        self._client = client
        self._recorder = recorder
        self._period = settings.image_gc_period
        self.policy = gc.Policy(settings.image_gc_high_percent, settings.image_gc_low_percent,
                                timedelta(seconds=settings.image_minimum_gc_age),
                                timedelta(seconds=settings.image_maximum_gc_age))
        self._protected = tuple(protected)
        self._clock = clock
        # Last uses are known from here on (the kubelet's beganGC): no image expires before
        # the maximum age has passed since.
        self._started = clock()
        self._stats = stats
        self._on_removed = on_removed
        self._records: dict[str, gc.ImageRecord] = {}
        self._looked = False
        self._failed_last = False
        # collect() and delete_unused() (the eviction manager's) never run at once.
        self._lock = asyncio.Lock()

    @property
    def records(self) -> dict[str, gc.ImageRecord]:
        """The images known, by ID (a copy)."""
        return dict(self._records)

    async def run(self) -> None:
        """Look at the images at once (those already there count as old enough to free space,
        and as used now for the maximum age), then collect now and every period; run as a
        named task."""
        async with self._lock:
            try:
                await self._detect(self._clock())
            except cri_errors.CriError as exc:
                log.warning("image GC: cannot list images yet: %s", exc)
        while True:
            if self.policy.periodic:
                try:
                    await self.collect()
                except Exception:  # a bug must not end the collection for good
                    log.exception("image garbage collection crashed; trying again next period")
            await asyncio.sleep(self._period)

    async def collect(self) -> gc.ImageGCResult:
        """One collection by the thresholds; failures are logged, evented and returned."""
        async with self._lock:
            try:
                result = await self._collect()
            except (cri_errors.CriError, ImageGCError) as exc:
                result = gc.ImageGCResult(0, 0, error=f"image garbage collection failed: {exc}")
        self._report(result)
        return result

    async def delete_unused(self) -> int:
        """Remove every unused image older than the minimum age, whatever the disk usage;
        return the bytes freed (0 when the runtime cannot be read: logged)."""
        async with self._lock:
            try:
                now = self._clock()
                in_use = await self._detect(now)
                freed, removed, errors = await self._free(sys.maxsize, now, in_use)
            except cri_errors.CriError as exc:
                log.error("deleting unused images failed: %s", exc)
                return 0
        log.info("deleted %d unused images, %d bytes freed%s", len(removed), freed,
                 f"; errors: {'; '.join(errors)}" if errors else "")
        return freed

    # -- one collection --------------------------------------------------------------------

    async def _collect(self) -> gc.ImageGCResult:
        """As the kubelet's GarbageCollect: detect, remove the expired images, then free
        space; a failed removal for age fails the collection before the disk is looked at."""
        now = self._clock()
        in_use = await self._detect(now)
        expired, errors = await self._free_old(now, in_use)
        if errors:
            return gc.ImageGCResult(0, 0, expired=expired, error=gc.expiry_failure_message(
                self.policy.max_age, errors))
        stats = await self._image_fs_stats()
        try:
            amount = gc.amount_to_free(self.policy, stats)
        except gc.InvalidCapacity as exc:
            self._recorder.record_node("Warning", gc.INVALID_DISK_CAPACITY, str(exc))
            return gc.ImageGCResult(0, 0, expired=expired, error=str(exc))
        if amount <= 0:
            return gc.ImageGCResult(stats.used_percent, 0, expired=expired)
        log.info("image filesystem is %d%% full (high threshold %d%%): freeing %d bytes to "
                 "reach %d%%", stats.used_percent, self.policy.high_percent, amount,
                 self.policy.low_percent,
                 extra={"usage_percent": stats.used_percent, "amount_to_free": amount})
        freed, removed, errors = await self._free(amount, now, in_use)
        result = self._outcome(stats.used_percent, amount, freed, removed, errors)
        return replace(result, expired=expired)

    def _outcome(self, percent: int, amount: int, freed: int, removed: list[str],
                 errors: list[str]) -> gc.ImageGCResult:
        """The result; not enough freed is the kubelet's FreeDiskSpaceFailed event."""
        problems = []
        if freed < amount:
            message = gc.failure_message(amount, freed)
            self._recorder.record_node("Warning", gc.FREE_DISK_SPACE_FAILED, message)
            problems.append(message)
        if errors:
            problems.append(f"errors removing images: {'; '.join(errors)}")
        return gc.ImageGCResult(percent, amount, freed, tuple(removed), " ".join(problems))

    def _report(self, result: gc.ImageGCResult) -> None:
        """Log the result; a second failure in a row is an ImageGCFailed event (the kubelet
        events only repeated failures: the first may be stats not ready yet)."""
        if result.ok:
            if result.removed or result.expired or self._failed_last:
                log.info("image garbage collection succeeded: %d images removed for age, %d "
                         "to free space, %d bytes freed", len(result.expired),
                         len(result.removed), result.freed)
            self._failed_last = False
            return
        log.error("image garbage collection failed%s: %s",
                  " again" if self._failed_last else "", result.error)
        if self._failed_last:
            self._recorder.record_node("Warning", gc.IMAGE_GC_FAILED, result.error)
        self._failed_last = True

    # -- reading and removing ------------------------------------------------------------------

    async def _image_fs_stats(self) -> usage.FilesystemStats:
        filesystems = await self._client.image_fs_info()
        if not filesystems:
            raise ImageGCError("the runtime reports no image filesystem (CRI ImageFsInfo)")
        mountpoint = filesystems[0].mountpoint
        try:
            return await asyncio.to_thread(self._stats, mountpoint)
        except OSError as exc:
            raise ImageGCError(f"cannot read image filesystem {mountpoint}: {exc}") from exc

    async def _detect(self, now: datetime) -> frozenset[str]:
        """Refresh the records from the runtime; returns the IDs of the images in use."""
        images = await self._client.list_images()
        containers = await self._client.list_containers()
        in_use = gc.images_in_use(images, containers)
        self._records = gc.detect(self._records, images, in_use, now=now, first=not self._looked)
        self._looked = True
        return in_use

    async def _free_old(
        self, now: datetime, in_use: frozenset[str]
    ) -> tuple[tuple[str, ...], list[str]]:
        """Remove the images unused for longer than the maximum age (none when it is 0);
        a removal that fails is reported and the others go on. Returns IDs removed, errors."""
        max_age = self.policy.max_age
        old = gc.expired(self._records.values(), in_use=in_use, protected=self._protected,
                         now=now, started=self._started, max_age=max_age)
        removed, errors = [], []
        for record in old:
            error = await self._remove(
                record, f"unused for more than {go_duration(max_age.total_seconds())}")
            if error:
                errors.append(error)
            else:
                removed.append(record.id)
        if removed and self._on_removed is not None:
            await self._on_removed(removed, now)
        return tuple(removed), errors

    async def _free(
        self, amount: int, now: datetime, in_use: frozenset[str]
    ) -> tuple[int, list[str], list[str]]:
        """Remove candidates in order until `amount` bytes are freed; a removal that fails
        is skipped for the next candidate. Returns bytes freed, IDs removed, errors."""
        ordered = gc.candidates(self._records.values(), in_use=in_use,
                                protected=self._protected, now=now, min_age=self.policy.min_age)
        freed, removed, errors = 0, [], []
        while ordered and freed < amount:
            chosen = gc.select(ordered, amount - freed).remove
            ordered = ordered[len(chosen):]
            for record in chosen:
                error = await self._remove(record, f"to free {record.size} bytes")
                if error:
                    errors.append(error)
                else:
                    freed += record.size
                    removed.append(record.id)
        if removed and self._on_removed is not None:
            await self._on_removed(removed, now)
        return freed, removed, errors

    async def _remove(self, record: gc.ImageRecord, why: str) -> str:
        """Remove one image by ID (`why` says why, for the log); returns the error ("" when
        removed or already gone)."""
        try:
            await self._client.remove_image(record.id)
        except cri_errors.NotFound:
            pass  # removed by someone else: its space is free all the same
        except cri_errors.CriError as exc:
            log.warning("cannot remove image %s %s: %s", record.id, record.tags, exc)
            return f"{record.id}: {exc}"
        self._records.pop(record.id, None)
        log.info("removed image %s %s %s", record.id, list(record.tags), why,
                 extra={"image_id": record.id, "size": record.size})
        return ""
