"""Image GC decisions (`model.core.imagegc`): when to collect and how much, which images are
in use, how records follow the runtime, and which images go first."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import events as ev
from nodelet.model.core import imagegc as gc
from nodelet.model.core import runtime as rt
from nodelet.model.core import usage

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
POLICY = gc.Policy(high_percent=85, low_percent=80, min_age=timedelta(minutes=2))


def stats(capacity: int, available: int) -> usage.FilesystemStats:
    return usage.FilesystemStats(capacity=capacity, available=available, inodes=0, inodes_free=0)


@pytest.mark.parametrize(("capacity", "available", "percent", "amount"), [
    (1000, 500, 50, 0),
    (1000, 160, 84, 0),
    # 15.1 % free counts as 85 % used: the kubelet truncates available*100/capacity.
    (1000, 151, 85, 49),
    (1000, 150, 85, 50),  # exactly at the high threshold: collect
    (1000, 0, 100, 200),  # full: free down to 80 %
    (1000, 2000, 0, 0),  # more available than capacity: as much as capacity
    (100 * 2**30, 5 * 2**30, 95, 15 * 2**30),
])
def test_amount_to_free(capacity: int, available: int, percent: int, amount: int) -> None:
    fs = stats(capacity, available)
    assert fs.used_percent == percent
    assert gc.amount_to_free(POLICY, fs) == amount


def test_amount_to_free_needs_a_capacity() -> None:
    with pytest.raises(gc.InvalidCapacity, match="invalid capacity 0 on image filesystem"):
        gc.amount_to_free(POLICY, stats(0, 0))


@pytest.mark.parametrize(("high", "low", "error"), [
    (101, 80, "high threshold 101% must be in 0..100"),
    (85, -1, "low threshold -1% must be in 0..100"),
    (70, 80, "low threshold 80% can not be higher than the high threshold 70%"),
])
def test_policy_refuses_bad_thresholds(high: int, low: int, error: str) -> None:
    with pytest.raises(gc.PolicyError, match=error):
        gc.Policy(high_percent=high, low_percent=low)


def test_policy_at_100_percent_is_not_periodic() -> None:
    assert gc.Policy().periodic
    assert not gc.Policy(high_percent=100, low_percent=80).periodic


def image(id_: str, *tags: str, size: int = 100, digests: tuple[str, ...] = ()) -> rt.ImageInfo:
    return rt.ImageInfo(id=id_, repo_tags=tags, repo_digests=digests, size=size)


def container(image_ref: str, image_name: str = "") -> rt.ContainerInfo:
    return rt.ContainerInfo(id=rt.ContainerID("c"), sandbox_id=rt.SandboxID("s"), name="main",
                            attempt=0, image=image_name or image_ref, image_ref=image_ref,
                            state=rt.ContainerState.EXITED, created_at=0)


IMAGES = (image("sha256:a", "a:1"), image("sha256:b", "b:1", digests=("b@sha256:bd",)),
          image("sha256:c", "c:1"))


@pytest.mark.parametrize(("containers", "expected"), [
    ((), set()),
    ((container("sha256:a"),), {"sha256:a"}),  # by the image ID the runtime resolved
    ((container("", "b:1"),), {"sha256:b"}),  # by the reference it was created from
    ((container("", "b@sha256:bd"),), {"sha256:b"}),
    ((container("sha256:gone", "gone:1"),), set()),
    ((container("sha256:a"), container("sha256:c")), {"sha256:a", "sha256:c"}),
])
def test_images_in_use(containers: tuple[rt.ContainerInfo, ...], expected: set[str]) -> None:
    assert gc.images_in_use(IMAGES, containers) == expected


def test_first_detection_dates_images_in_the_unknown_past() -> None:
    records = gc.detect({}, IMAGES, frozenset({"sha256:a"}), now=NOW, first=True)
    assert {r.first_detected for r in records.values()} == {gc.UNKNOWN_PAST}
    assert records["sha256:a"].last_used == NOW
    assert records["sha256:b"].last_used is None
    assert records["sha256:b"].digests == ("b@sha256:bd",)


def test_detection_keeps_history_and_follows_the_runtime() -> None:
    earlier = NOW - timedelta(hours=1)
    known = {"sha256:a": gc.ImageRecord("sha256:a", 100, ("a:1",), earlier, earlier),
             "sha256:gone": gc.ImageRecord("sha256:gone", 5, (), earlier)}
    now_there = (image("sha256:a", "a:1", "a:2", size=150), image("sha256:new", "new:1"))
    records = gc.detect(known, now_there, frozenset(), now=NOW)
    assert set(records) == {"sha256:a", "sha256:new"}  # a removed image is forgotten
    assert records["sha256:a"] == gc.ImageRecord("sha256:a", 150, ("a:1", "a:2"), earlier,
                                                 earlier)
    assert records["sha256:new"].first_detected == NOW
    used = gc.detect(records, now_there, frozenset({"sha256:a"}), now=NOW)
    assert used["sha256:a"].last_used == NOW


def record(id_: str, *, detected_ago: int = 3600, used_ago: int | None = None, size: int = 100,
           tags: tuple[str, ...] = ()) -> gc.ImageRecord:
    used = NOW - timedelta(seconds=used_ago) if used_ago is not None else None
    return gc.ImageRecord(id_, size, tags, NOW - timedelta(seconds=detected_ago), used)


RECORDS = (
    record("used-recently", used_ago=60),
    record("used-long-ago", used_ago=3000),
    record("never-used-new", detected_ago=600),
    record("never-used-old", detected_ago=7200),
    record("too-young", detected_ago=60),
    record("pause", tags=("localhost/nodelet/pause:1.0",)),
    record("running", used_ago=0),  # in use: detection just set its last use to now
)


def test_candidates_in_removal_order() -> None:
    ordered = gc.candidates(RECORDS, in_use=frozenset({"running"}),
                            protected=("localhost/nodelet/pause:1.0",), now=NOW,
                            min_age=timedelta(minutes=2))
    assert [r.id for r in ordered] == [
        "never-used-old", "never-used-new", "used-long-ago", "used-recently"]


@pytest.mark.parametrize(("protected", "kept"), [
    (("localhost/nodelet/pause:1.0",), True),  # by reference
    (("pause",), True),  # by ID
    ((), False),
])
def test_protected_images_are_never_candidates(protected: tuple[str, ...], kept: bool) -> None:
    ordered = gc.candidates(RECORDS, in_use=frozenset(), protected=protected, now=NOW,
                            min_age=timedelta(0))
    assert ("pause" not in [r.id for r in ordered]) is kept


@pytest.mark.parametrize(("amount", "removed", "frees"), [
    (0, [], 0),
    (1, ["old"], 300),
    (300, ["old"], 300),
    (301, ["old", "mid"], 500),
    (10_000, ["old", "mid", "new"], 550),  # not enough: everything eligible
])
def test_plan_frees_just_enough(amount: int, removed: list[str], frees: int) -> None:
    records = (record("new", used_ago=10, size=50), record("old", used_ago=1000, size=300),
               record("mid", used_ago=100, size=200), record("young", detected_ago=1, size=999),
               record("busy", used_ago=0, size=999))
    plan = gc.plan(records, in_use=frozenset({"busy"}), protected=(), now=NOW, policy=POLICY,
                   amount=amount)
    assert [r.id for r in plan.remove] == removed
    assert plan.frees == frees


def test_failure_message_is_the_kubelets() -> None:
    assert gc.failure_message(388231987, 0) == (
        "Failed to garbage collect required amount of images. Attempted to free 388231987 "
        "bytes, but only found 0 bytes eligible to free.")


def test_node_event_is_about_the_node() -> None:
    event = ev.new_node_event("node-1", "Warning", gc.FREE_DISK_SPACE_FAILED, "full", at=NOW)
    api = ev.event_to_api(event)
    assert api["involvedObject"] == {"kind": "Node", "name": "node-1", "uid": "node-1",
                                     "apiVersion": "v1"}
    assert api["metadata"]["namespace"] == "default"
    assert api["source"] == {"component": ev.COMPONENT, "host": "node-1"}


# -- the maximum age (the kubelet's imageMaximumGCAge, freeOldImages) -------------------------

MAX_AGE = timedelta(minutes=1)
AGED = (
    record("never-used", detected_ago=7200),
    record("never-used-just-pulled", detected_ago=0),  # no minimum age for age GC
    record("used-long-ago", used_ago=3000),
    record("used-just-over", used_ago=61),
    record("used-exactly-max-age-ago", used_ago=60),  # not *more* than the max age
    record("used-recently", used_ago=10),
    record("running", used_ago=0),
    record("pause", tags=("localhost/nodelet/pause:1.0",)),
    gc.ImageRecord("pinned", 100, ("other/pause:3.10",), NOW - timedelta(hours=2), pinned=True),
)
OLD = ["never-used", "never-used-just-pulled", "used-long-ago", "used-just-over"]


@pytest.mark.parametrize(("started_ago", "max_age", "removed"), [
    (timedelta(hours=1), MAX_AGE, OLD),
    # Nothing until the collector has run for longer than the max age: what it knows of last
    # uses begins at its start (the e2e "should not GC unused images prematurely").
    (timedelta(seconds=60), MAX_AGE, []),
    (timedelta(seconds=0), MAX_AGE, []),
    (timedelta(seconds=61), MAX_AGE, OLD),
    (timedelta(hours=1), timedelta(0), []),  # 0: off
    (timedelta(hours=1), timedelta(minutes=30), ["never-used", "never-used-just-pulled",
                                                 "used-long-ago"]),
])
def test_expired_images(started_ago: timedelta, max_age: timedelta, removed: list[str]) -> None:
    old = gc.expired(AGED, in_use=frozenset({"running"}),
                     protected=("localhost/nodelet/pause:1.0",), now=NOW,
                     started=NOW - started_ago, max_age=max_age)
    assert sorted(r.id for r in old) == sorted(removed)


def test_expired_images_come_in_removal_order() -> None:
    old = gc.expired(AGED, in_use=frozenset({"running"}), protected=("pause",), now=NOW,
                     started=NOW - timedelta(days=1), max_age=MAX_AGE)
    assert [r.id for r in old] == ["never-used", "never-used-just-pulled", "used-long-ago",
                                   "used-just-over"]


def test_in_use_protected_and_pinned_images_never_expire() -> None:
    ancient = NOW - timedelta(days=30)
    records = [gc.ImageRecord(i, 1, (f"{i}:1",), ancient, ancient, pinned=i == "pinned")
               for i in ("busy", "pause", "pinned", "victim")]
    kwargs = {"now": NOW, "started": ancient, "max_age": MAX_AGE}
    old = gc.expired(records, in_use=frozenset({"busy"}), protected=("pause:1",), **kwargs)
    assert [r.id for r in old] == ["victim"]
    # Nor are they removed to free space.
    ordered = gc.candidates(records, in_use=frozenset({"busy"}), protected=("pause:1",),
                            now=NOW, min_age=timedelta(0))
    assert [r.id for r in ordered] == ["victim"]


def test_detection_follows_pinning() -> None:
    pinned = rt.ImageInfo(id="sha256:p", repo_tags=("p:1",), pinned=True)
    records = gc.detect({}, (pinned,), frozenset(), now=NOW)
    assert records["sha256:p"].pinned
    unpinned = gc.detect(records, (replace(pinned, pinned=False),), frozenset(), now=NOW)
    assert not unpinned["sha256:p"].pinned


@pytest.mark.parametrize(("min_age", "max_age", "error"), [
    (timedelta(minutes=2), timedelta(0), ""),  # off: any minimum age
    (timedelta(seconds=1), timedelta(minutes=1), ""),  # the node e2e suite's pair
    (timedelta(minutes=2), timedelta(minutes=2),
     "imageMaximumGCAge 2m0s must be greater than imageMinimumGCAge 2m0s"),
    (timedelta(minutes=2), timedelta(minutes=1),
     "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 2m0s"),
    (timedelta(0), timedelta(seconds=-1), "imageMaximumGCAge -1s must not be negative"),
])
def test_max_age_must_exceed_min_age(min_age: timedelta, max_age: timedelta,
                                     error: str) -> None:
    if not error:
        gc.check_ages(min_age, max_age)
        assert gc.Policy(min_age=min_age, max_age=max_age).max_age == max_age
        return
    with pytest.raises(gc.PolicyError, match=error):
        gc.check_ages(min_age, max_age)
    with pytest.raises(gc.PolicyError, match=error):
        gc.Policy(min_age=min_age, max_age=max_age)


def test_a_max_age_keeps_collection_periodic_at_100_percent() -> None:
    # The kubelet stubs its image GC only for a high threshold of 100 AND no max age.
    assert gc.Policy(high_percent=100, low_percent=80, min_age=timedelta(seconds=1),
                     max_age=MAX_AGE).periodic


def test_expiry_failure_message_is_the_kubelets() -> None:
    assert gc.expiry_failure_message(MAX_AGE, ["sha256:a: busy", "sha256:b: gone"]) == (
        "wanted to free images older than 1m0s, encountered errors in image deletion: "
        "[sha256:a: busy, sha256:b: gone]")
