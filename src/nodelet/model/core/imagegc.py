"""Image garbage collection by disk usage and by age (pure): the kubelet's realImageGCManager
(pkg/kubelet/images/image_gc_manager.go) as decisions over image records and filesystem stats.

The collector keeps one `ImageRecord` per image the runtime holds: when it first saw the image
and when a container (any container the runtime lists, running or exited) last used it
(`detect`). When the image filesystem is `high_percent` full or more, it frees
`amount_to_free` bytes — down to `low_percent` — by removing unused images, least recently
used first, then first detected first (`plan`). An image in use is never removed, nor a
protected one (the sandbox "pause" image), nor one the runtime pins, nor one detected less
than `min_age` ago: it may have just been pulled for a container about to start. Images
already there when the collector first looked count as detected in the unknown past
(`UNKNOWN_PAST`), as the kubelet's first detection does, so they are old enough at once.

With a `max_age` (the kubelet's imageMaximumGCAge; 0 is off), every collection first removes,
whatever the disk usage, the unused images last used more than `max_age` ago (`expired`, the
kubelet's freeOldImages). As there, an image never seen in use has no last use and so counts
as old, the minimum age does not apply, and nothing expires until the collector has run for
longer than `max_age`: the collector keeps no history across restarts, so the images it finds
at its start count as used at its start.

Exceptions: `PolicyError` for thresholds out of range or a maximum age not above the minimum
age; `InvalidCapacity` for a filesystem of no capacity (the kubelet's `InvalidDiskCapacity`
event).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from nodelet.model.core import runtime as rt
from nodelet.model.core import usage
from nodelet.model.core.durations import go_duration

# Event reasons of the kubelet (pkg/kubelet/events/event.go), about the Node.
FREE_DISK_SPACE_FAILED = "FreeDiskSpaceFailed"
IMAGE_GC_FAILED = "ImageGCFailed"
INVALID_DISK_CAPACITY = "InvalidDiskCapacity"

# "Detected" time of images found by the first detection: old enough for any minimum age.
UNKNOWN_PAST = datetime.min.replace(tzinfo=UTC)


class PolicyError(ValueError):
    """Image GC thresholds or ages out of range; the message names the setting."""


class InvalidCapacity(ValueError):
    """The image filesystem reports no capacity: usage cannot be computed."""


@dataclass(frozen=True)
class Policy:
    """When to collect (the kubelet's ImageGCPolicy): at `high_percent` usage or more, free
    down to `low_percent`; never an image detected less than `min_age` ago. Whatever the
    usage, images unused for more than `max_age` go (0: never)."""

    high_percent: int = 85
    low_percent: int = 80
    min_age: timedelta = timedelta(minutes=2)
    max_age: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        for name, value in (("high", self.high_percent), ("low", self.low_percent)):
            if not 0 <= value <= 100:
                raise PolicyError(f"image GC {name} threshold {value}% must be in 0..100")
        if self.low_percent > self.high_percent:
            raise PolicyError(f"image GC low threshold {self.low_percent}% can not be higher "
                              f"than the high threshold {self.high_percent}%")
        check_ages(self.min_age, self.max_age)

    @property
    def periodic(self) -> bool:
        """False at a high threshold of 100 % with no maximum age: the kubelet then runs no
        periodic image GC (an eviction manager may still ask to delete unused images)."""
        return self.high_percent < 100 or self.max_age > timedelta(0)


def check_ages(min_age: timedelta, max_age: timedelta) -> None:
    """The kubelet's validation of imageMaximumGCAge (pkg/kubelet/apis/config/validation):
    not negative, and when set (not 0) greater than imageMinimumGCAge. Raises PolicyError."""
    if max_age < timedelta(0):
        raise PolicyError(f"imageMaximumGCAge {_go(max_age)} must not be negative")
    if timedelta(0) < max_age <= min_age:
        raise PolicyError(
            f"imageMaximumGCAge {_go(max_age)} must be greater than imageMinimumGCAge "
            f"{_go(min_age)} (raise imageMaximumGCAge, lower imageMinimumGCAge, or set "
            "imageMaximumGCAge to 0 to turn collection by age off)")


def _go(age: timedelta) -> str:
    seconds = age.total_seconds()
    return f"-{go_duration(-seconds)}" if seconds < 0 else go_duration(seconds)


@dataclass(frozen=True)
class ImageRecord:
    """What the collector knows of one image. `last_used` is None until a container is seen
    using it; `pinned`: the runtime asks that it be kept (CRI Image.pinned, e.g. containerd's
    sandbox image)."""

    id: str
    size: int
    tags: tuple[str, ...]
    first_detected: datetime
    last_used: datetime | None = None
    digests: tuple[str, ...] = ()
    pinned: bool = False

    def known_as(self, ref: str) -> bool:
        """Whether `ref` names this image: its ID, one of its tags or repo digests."""
        return ref == self.id or ref in self.tags or ref in self.digests


@dataclass(frozen=True)
class Plan:
    """Images to remove, in order, and the bytes their removal frees."""

    remove: tuple[ImageRecord, ...]
    frees: int


@dataclass(frozen=True)
class ImageGCResult:
    """One collection: the usage seen, the bytes wanted and freed, the images removed to free
    them, the images removed for age (`expired`), and what went wrong ("" when nothing did)."""

    usage_percent: int
    amount_to_free: int
    freed: int = 0
    removed: tuple[str, ...] = ()
    error: str = ""
    expired: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.error


def amount_to_free(policy: Policy, stats: usage.FilesystemStats) -> int:
    """Bytes to free to bring usage down to the low threshold, once it reached the high one
    (0 below it): capacity*(100-low)/100 - available. Raises InvalidCapacity."""
    if stats.capacity <= 0:
        raise InvalidCapacity("invalid capacity 0 on image filesystem")
    if stats.used_percent < policy.high_percent:
        return 0
    available = min(stats.available, stats.capacity)
    return stats.capacity * (100 - policy.low_percent) // 100 - available


def images_in_use(
    images: Iterable[rt.ImageInfo], containers: Iterable[rt.ContainerInfo]
) -> frozenset[str]:
    """IDs of the images some container uses, by the image ID the runtime resolved for it
    (`image_ref`) or, failing that, the reference it was created from."""
    wanted = {ref for c in containers for ref in (c.image_ref, c.image) if ref}
    return frozenset(
        image.id for image in images
        if wanted & {image.id, *image.repo_tags, *image.repo_digests}
    )


def detect(
    records: Mapping[str, ImageRecord],
    images: Iterable[rt.ImageInfo],
    in_use: frozenset[str],
    *,
    now: datetime,
    first: bool = False,
) -> dict[str, ImageRecord]:
    """The records after looking at the runtime's `images`: new images detected `now` (at
    `UNKNOWN_PAST` on the `first` look), images in use used `now`, sizes, names and pinning
    refreshed, records of images that are gone dropped."""
    detected = UNKNOWN_PAST if first else now
    updated = {}
    for image in images:
        record = records.get(image.id) or ImageRecord(image.id, 0, (), detected)
        record = replace(record, size=image.size, tags=image.repo_tags,
                         digests=image.repo_digests, pinned=image.pinned)
        if image.id in in_use:
            record = replace(record, last_used=now)
        updated[image.id] = record
    return updated


def candidates(
    records: Iterable[ImageRecord],
    *,
    in_use: frozenset[str],
    protected: Sequence[str],
    now: datetime,
    min_age: timedelta,
) -> list[ImageRecord]:
    """The images that may be removed to free space, in removal order: never used or used
    longest ago first, then detected earliest first."""
    eligible = [
        r for r in _unused(records, in_use=in_use, protected=protected)
        if (r.last_used is None or r.last_used < now)
        and now - r.first_detected >= min_age
    ]
    return sorted(eligible, key=_removal_order)


def expired(
    records: Iterable[ImageRecord],
    *,
    in_use: frozenset[str],
    protected: Sequence[str],
    now: datetime,
    started: datetime,
    max_age: timedelta,
) -> list[ImageRecord]:
    """The images to remove for age (the kubelet's freeOldImages), in removal order: unused,
    not protected or pinned, and last used more than `max_age` before `now` (never used:
    always). None when `max_age` is 0 or the collector `started` `max_age` ago or less,
    since what it knows of last uses only begins then."""
    if max_age <= timedelta(0) or now - started <= max_age:
        return []
    old = [
        r for r in _unused(records, in_use=in_use, protected=protected)
        if r.last_used is None or now - r.last_used > max_age
    ]
    return sorted(old, key=_removal_order)


def _unused(
    records: Iterable[ImageRecord], *, in_use: frozenset[str], protected: Sequence[str]
) -> list[ImageRecord]:
    """The records GC may consider at all: not in use, not protected, not pinned (the
    kubelet's imagesInEvictionOrder)."""
    return [
        r for r in records
        if r.id not in in_use and not r.pinned
        and not any(r.known_as(ref) for ref in protected)
    ]


def _removal_order(record: ImageRecord) -> tuple[datetime, datetime]:
    return (record.last_used or UNKNOWN_PAST, record.first_detected)


def select(ordered: Sequence[ImageRecord], amount: int) -> Plan:
    """The first of `ordered` whose sizes add up to `amount` bytes (all of them if they do not
    reach it; none for an amount of 0 or less)."""
    chosen: list[ImageRecord] = []
    frees = 0
    for record in ordered:
        if frees >= amount:
            break
        chosen.append(record)
        frees += record.size
    return Plan(tuple(chosen), frees)


def plan(
    records: Iterable[ImageRecord],
    *,
    in_use: frozenset[str],
    protected: Sequence[str],
    now: datetime,
    policy: Policy,
    amount: int,
) -> Plan:
    """Which images to remove to free `amount` bytes, and how much that frees."""
    ordered = candidates(records, in_use=in_use, protected=protected, now=now,
                         min_age=policy.min_age)
    return select(ordered, amount)


def expiry_failure_message(max_age: timedelta, errors: Sequence[str]) -> str:
    """The kubelet's error when images older than the maximum age could not all be removed."""
    return (f"wanted to free images older than {_go(max_age)}, encountered errors in image "
            f"deletion: [{', '.join(errors)}]")


def failure_message(amount: int, freed: int) -> str:
    """The kubelet's FreeDiskSpaceFailed message (also its error text)."""
    return (f"Failed to garbage collect required amount of images. Attempted to free {amount} "
            f"bytes, but only found {freed} bytes eligible to free.")
