"""The node's pulled-image records (the kubelet's PullManager, pkg/kubelet/images/pullmanager):
which credentials pulled each image, so that `images.ImagePuller` lets a pod use an image that
is already present only when `model.core.pullrecords.must_pull` says it may.

The records live in memory, loaded from their files (`adapters.pullrecordfiles`) at the first
use, and every change is written through to the files in order (one lock), so they survive a
restart. At that first use, as the kubelet's `initialize`, each pulling intent left by an
earlier run whose image the runtime now has becomes a record without credentials: nobody may
use that image without pulling it once.

A pull is bracketed, as in the kubelet: `pulling(image)` before (an intent on disk while any
pull of that image runs; OSError when it cannot be written, and then the pull is not tried),
then `pulled(...)` or `pull_failed(image)`. A record that cannot be written is logged and its
intent left in place, so that after a restart the image needs a pull once more (fail safe).
`forget(image_refs)` drops the records of images the image GC removed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from nodelet.adapters import pullrecordfiles as files
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import pullrecords as pr
from nodelet.model.core import runtime as rt

log = logging.getLogger(__name__)

_T = TypeVar("_T")
PodSecrets = Callable[[], Awaitable[Sequence[pr.PullSecret]]]


class ImageLister(Protocol):
    """What the start needs of the runtime (`cri.RuntimeClient` has it)."""

    async def list_images(self) -> list[rt.ImageInfo]: ...


class RecordStore(Protocol):
    """Where the records are kept (`pullrecordfiles.PullRecordFiles`)."""

    def load(self) -> files.Loaded: ...
    def write_intent(self, image: str) -> None: ...
    def delete_intent(self, image: str) -> None: ...
    def write_record(self, record: pr.PulledRecord) -> None: ...
    def delete_record(self, image_ref: str) -> None: ...


class PullManager:
    def __init__(self, *, store: RecordStore, verification: pr.Verification,
                 images: ImageLister, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._verification = verification
        self._images = images
        self._clock = clock
        self._records: dict[str, pr.PulledRecord] = {}  # by image ID
        self._pulling: Counter[str] = Counter()  # pulls in flight, by image as written
        self._left_over: set[str] = set()  # intents of an earlier run, not yet resolved
        self._files = files.Loaded((), (), frozenset(), frozenset())
        self._loaded = False
        self._lock = asyncio.Lock()  # the load, then each file write in order

    async def must_pull(self, image: str, image_ref: str, pod_secrets: PodSecrets
                        ) -> pr.Decision:
        """Whether a pod must pull the present `image` (ID `image_ref`) with its own
        credentials; `pod_secrets` gives its pull Secrets for the image, asked only if the
        record names Secrets."""
        if not await self._load():
            return pr.MUST_PULL  # as the kubelet when it cannot read its records
        if (pr.file_name(image_ref) in self._files.unreadable_records
                or pr.file_name(image) in self._files.unreadable_intents):
            return pr.MUST_PULL  # fail safe, as the kubelet on a record it cannot read
        record = self._records.get(image_ref)
        pulled_by_kubelet = (record is not None or self._pulling[image] > 0
                             or image in self._left_over)
        found = pr.decide_from_record(image, record, pulled_by_kubelet=pulled_by_kubelet,
                                      verification=self._verification)
        if isinstance(found, pr.Decision):
            return found
        decision = pr.decide_from_secrets(found, await pod_secrets())
        if decision.learn is not None:
            await self._merge(image, image_ref, pr.PullCredentials(secrets=(decision.learn,)))
        return decision

    async def pulling(self, image: str) -> None:
        """Raises OSError when the intent cannot be written."""
        await self._load()
        async with self._lock:
            await asyncio.to_thread(self._store.write_intent, image)
        self._pulling[image] += 1

    async def pulled(self, image: str, image_ref: str, secret: pr.PullSecret | None) -> None:
        """A pull succeeded with the credential of `secret` (None: anonymously or with the
        node's own credentials)."""
        if await self._merge(image, image_ref, pr.pulled_with(secret)):
            await self._done(image)
        # else, as the kubelet: the intent stays, so the image counts as pulled by the agent
        # with credentials unknown.

    async def pull_failed(self, image: str) -> None:
        await self._done(image)

    async def forget(self, image_refs: Iterable[str], before: datetime) -> None:
        """Drop the records of images that are gone from the node, but those written since
        `before` (the image was pulled again meanwhile)."""
        await self._load()
        for image_ref in image_refs:
            record = self._records.get(image_ref)
            if record is not None and record.updated < before:
                del self._records[image_ref]
                await self._write(self._store.delete_record, image_ref)

    # -- internals ---------------------------------------------------------------------------

    async def _done(self, image: str) -> None:
        self._pulling[image] -= 1
        if self._pulling[image] > 0:
            return
        del self._pulling[image]
        self._left_over.discard(image)
        await self._write(self._store.delete_intent, image)

    async def _merge(self, image: str, image_ref: str, new: pr.PullCredentials | None) -> bool:
        """Record what pulled `image`; False when the record could not be written."""
        await self._load()
        record = pr.merged(self._records.get(image_ref), image_ref, image, new, self._clock())
        if record is None:
            return True
        self._records[image_ref] = record
        return await self._write(self._store.write_record, record)

    async def _write(self, action: Callable[[_T], None], arg: _T) -> bool:
        async with self._lock:
            try:
                await asyncio.to_thread(action, arg)
            except OSError as exc:
                log.error("cannot write the pulled-image records: %s", exc)
                return False
        return True

    async def _load(self) -> bool:
        """Read the files once; False (and again at the next call) when they cannot be."""
        if self._loaded:
            return True
        async with self._lock:
            if self._loaded:
                return True
            try:
                loaded = await asyncio.to_thread(self._store.load)
            except OSError as exc:
                log.error("cannot read the pulled-image records: %s", exc)
                return False
            self._records = {r.image_ref: r for r in loaded.records}
            self._left_over = set(loaded.intents)
            self._files = loaded
            self._loaded = True
        if self._left_over:
            await self._resolve_left_over()
        return True

    async def _resolve_left_over(self) -> None:
        """Intents of an earlier run whose image is here: records without credentials."""
        try:
            present = await self._images.list_images()
        except cri_errors.CriError as exc:  # they stay intents: verified meanwhile
            log.warning("cannot list images to resolve earlier pulls: %s", exc)
            return
        for info in present:
            for image in {*info.repo_tags, *info.repo_digests} & self._left_over:
                if await self._merge(image, info.id, None):
                    self._left_over.discard(image)
                    await self._write(self._store.delete_intent, image)

