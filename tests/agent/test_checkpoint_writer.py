"""The checkpoint written behind the event loop over real SQLite files: writes wait for a lock on
the writer thread, failed writes stay pending and are retried until written (newest value wins),
health and metrics show it, and a shutdown flushes what is pending."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from nodelet import settings
from nodelet.adapters import checkpoint as cp
from nodelet.helpers import tasks
from nodelet.model.core import events as ev
from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.services.serving import metrics
from nodelet.services.status import checkpointing, statuses
from support.clocks import FakeClock
from support.disks import fill, tiny_tmpfs
from support.polling import eventually

T0 = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
PRTSC = st.POD_READY_TO_START_CONTAINERS
FAST = settings.CheckpointSettings(busy_timeout=0.05, retry_backoff=0.02, retry_backoff_max=0.2,
                                   flush_timeout=5.0)
WITHIN = 20.0


def make_pod(uid: str = "uid-1") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    return pods.Pod(uid=pods.PodUID(uid), name=f"web-{uid}", namespace="default", spec=spec)


def make_status(sandbox: st.ConditionStatus, ready: st.ConditionStatus = "False") -> st.PodStatus:
    return st.PodStatus(conditions=(
        st.PodCondition(st.POD_SCHEDULED, "True"),
        st.PodCondition(PRTSC, sandbox),
        st.PodCondition(st.READY, ready),
    ))


@dataclass
class Rig:
    """A started writer, the status manager writing through it, and what it reported."""

    db: Path
    writer: checkpointing.CheckpointWriter
    group: tasks.TaskGroup
    statuses: statuses.StatusManager
    clock: FakeClock
    attempts: list[str | None] = field(default_factory=list)  # None: written; else the error

    @property
    def failures(self) -> int:
        return sum(1 for a in self.attempts if a is not None)

    async def close(self) -> None:
        await self.group.close()
        await self.writer.close()


async def start_rig(db: Path, config: settings.CheckpointSettings = FAST) -> Rig:
    attempts: list[str | None] = []
    writer = await checkpointing.CheckpointWriter.open(
        db, settings=config,
        observer=lambda pending, error: attempts.append(None if error is None else str(error)))
    group = tasks.TaskGroup()
    writer.start(group)
    clock = FakeClock(T0)
    manager = statuses.StatusManager(checkpoint=writer, clock=clock)
    manager.restore()
    return Rig(db, writer, group, manager, clock, attempts)


@pytest_asyncio.fixture(loop_scope="session")
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    started = await start_rig(tmp_path / "data" / cp.FILENAME)
    yield started
    await started.close()


def stored(db: Path) -> dict[pods.PodUID, cp.StoredPodStatus]:
    """What a fresh connection reads from the file (as a restarted agent would)."""
    checkpoint = cp.Checkpoint.open(db)
    try:
        return checkpoint.load_pod_statuses()
    finally:
        checkpoint.close()


def stored_ltt(db: Path, uid: pods.PodUID, type_: str) -> datetime | None:
    found = [c for c in stored(db)[uid].conditions if c.type == type_]
    assert found, f"no {type_} stored for {uid}"
    return found[0].last_transition_time


@pytest.fixture
def lock() -> Iterator[Callable[[Path], sqlite3.Connection]]:
    """`lock(db)`: another connection takes the checkpoint's write lock (BEGIN EXCLUSIVE)."""
    held: list[sqlite3.Connection] = []

    def take(db: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(db, isolation_level=None, timeout=5)
        conn.execute("BEGIN EXCLUSIVE")
        held.append(conn)
        return conn

    yield take
    for conn in held:
        conn.close()


async def test_writes_reach_the_file(rig: Rig) -> None:
    pod = make_pod()
    rig.statuses.set_status(pod, make_status("True"))
    await eventually(lambda: rig.writer.pending == 0 and rig.attempts, within=WITHIN,
                     what="written")
    assert stored_ltt(rig.db, pod.uid, PRTSC) == T0
    assert rig.attempts == [None]
    assert rig.writer.health().ok


async def test_a_write_waits_for_the_lock_on_its_thread_not_on_the_loop(
    tmp_path: Path, lock: Callable[[Path], sqlite3.Connection]
) -> None:
    """With a busy timeout longer than the lock is held, the write waits for it on the writer
    thread while the event loop keeps running, and then succeeds at the first attempt."""
    rig = await start_rig(tmp_path / cp.FILENAME, replace(FAST, busy_timeout=60.0))
    try:
        other = lock(rig.db)
        rig.statuses.set_status(make_pod(), make_status("True"))
        await eventually(lambda: rig.writer.in_flight == 1, within=WITHIN,
                         what="the write waiting for the lock")
        turns = 0
        while turns < 20:  # the loop runs while the write is blocked in SQLite
            await asyncio.sleep(0)
            turns += 1
        assert rig.writer.in_flight == 1 and rig.attempts == [], "still waiting for the lock"
        other.execute("ROLLBACK")
        await eventually(lambda: rig.writer.pending == 0 and rig.attempts, within=WITHIN,
                         what="written")
        assert rig.attempts == [None]
    finally:
        await rig.close()


async def test_locked_writes_are_retried_until_written_newest_value_wins(
    rig: Rig, lock: Callable[[Path], sqlite3.Connection], caplog: pytest.LogCaptureFixture
) -> None:
    pod = make_pod()
    rig.statuses.set_status(pod, make_status("False"))
    await eventually(lambda: rig.writer.pending == 0 and rig.attempts, within=WITHIN,
                     what="first write")
    other = lock(rig.db)

    ready_at = rig.clock.advance(2)
    rig.statuses.set_status(pod, make_status("True"))  # first ready: must survive
    await eventually(lambda: rig.failures >= 2, within=WITHIN, what="failed attempts while locked")
    health = rig.writer.health()
    assert not health.ok and health.name == "checkpoint" and "locked" in health.message
    died_at = rig.clock.advance(3)
    rig.statuses.set_status(pod, make_status("False"))  # replaces the pending write
    assert rig.writer.pending == 1
    assert stored_ltt(rig.db, pod.uid, PRTSC) == T0, "nothing written while locked"

    other.execute("ROLLBACK")
    await eventually(lambda: rig.writer.health().ok and rig.writer.pending == 0, within=WITHIN,
                     what="recovered")
    assert stored_ltt(rig.db, pod.uid, PRTSC) == died_at
    assert stored(rig.db)[pod.uid].first_ready_to_start == ready_at
    assert rig.attempts[-1] is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "one warning per failure streak, not one per attempt"


async def test_events_and_forgotten_pods_are_retried_too(
    rig: Rig, lock: Callable[[Path], sqlite3.Connection]
) -> None:
    pod, other_pod = make_pod("a"), make_pod("b")
    rig.statuses.set_status(pod, make_status("True"))
    rig.statuses.set_status(other_pod, make_status("True"))
    await eventually(lambda: rig.writer.pending == 0 and rig.attempts, within=WITHIN,
                     what="first writes")
    other = lock(rig.db)
    event = ev.new_event(pod, "Warning", "BackOff", "back-off", at=T0, host="node-a")
    rig.writer.save_event(event)
    rig.writer.save_event(ev.new_event(pod, "Normal", "Pulled", "pulled", at=T0, host="node-a"))
    rig.writer.prune_events(1)
    rig.statuses.forget(other_pod.uid)
    await eventually(lambda: rig.failures >= 1, within=WITHIN, what="a failed attempt")
    other.execute("ROLLBACK")
    await eventually(lambda: rig.writer.pending == 0 and rig.writer.health().ok, within=WITHIN,
                     what="recovered")
    assert set(stored(rig.db)) == {pod.uid}
    checkpoint = cp.Checkpoint.open(rig.db)
    try:
        assert len(checkpoint.load_events()) == 1, "the prune ran after the events it bounds"
    finally:
        checkpoint.close()


async def test_close_flushes_what_is_pending(tmp_path: Path) -> None:
    db = tmp_path / cp.FILENAME
    writer = await checkpointing.CheckpointWriter.open(db, settings=FAST)  # no task started
    manager = statuses.StatusManager(checkpoint=writer, clock=lambda: T0)
    pod = make_pod()
    manager.set_status(pod, make_status("True", "True"))
    assert writer.pending == 1
    await writer.close()
    assert stored_ltt(db, pod.uid, st.READY) == T0
    await writer.close()  # idempotent


async def test_close_gives_up_after_the_flush_timeout(
    tmp_path: Path, lock: Callable[[Path], sqlite3.Connection],
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = tmp_path / cp.FILENAME
    writer = await checkpointing.CheckpointWriter.open(db, settings=replace(FAST,
                                                                            flush_timeout=0.5))
    lock(db)  # never released
    writer.save_pod_status(pods.PodUID("u"), "web", "default", make_status("True"))
    await writer.close()  # returns although nothing could be written
    lost = [r.getMessage() for r in caplog.records if "not written within" in r.getMessage()]
    assert lost and "1 entries" in lost[0]


@pytest.mark.runtime
async def test_a_full_disk_fails_writes_until_space_is_freed(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "disk", size="1m") as disk:
        rig = await start_rig(disk / cp.FILENAME)
        try:
            pod = make_pod()
            rig.statuses.set_status(pod, make_status("False"))
            await eventually(lambda: rig.writer.pending == 0 and rig.attempts, within=WITHIN,
                             what="first write")
            filler = fill(disk)
            ready_at = rig.clock.advance(2)
            rig.statuses.set_status(pod, make_status("True"))
            await eventually(lambda: rig.failures >= 1, within=WITHIN,
                             what="a failed write on the full disk")
            health = rig.writer.health()
            assert not health.ok and "full" in health.message, health
            filler.unlink()
            await eventually(lambda: rig.writer.health().ok and rig.writer.pending == 0,
                             within=WITHIN, what="recovered once space is freed")
            assert stored_ltt(rig.db, pod.uid, PRTSC) == ready_at
        finally:
            await rig.close()


def test_failures_and_pending_entries_are_metrics() -> None:
    observed = metrics.Metrics()
    observed.observe_checkpoint_write(3, cp.CheckpointError("database or disk is full"))
    observed.observe_checkpoint_write(3, cp.CheckpointError("database or disk is full"))
    text = observed.render()[0].decode()
    assert "nodelet_checkpoint_write_failures_total 2.0" in text
    assert "nodelet_checkpoint_pending_writes 3.0" in text
    observed.observe_checkpoint_write(0, None)
    text = observed.render()[0].decode()
    assert "nodelet_checkpoint_write_failures_total 2.0" in text
    assert "nodelet_checkpoint_pending_writes 0.0" in text


def _save(status: st.PodStatus, **first: datetime) -> cp.SavePod:
    return cp.SavePod(pods.PodUID("u"), "web", "default", status, **first)


T1 = T0 + timedelta(seconds=1)


@pytest.mark.parametrize(("older", "newer", "expected"), [
    pytest.param(_save(make_status("True"), first_ready_to_start=T0), _save(make_status("False")),
                 _save(make_status("False"), first_ready_to_start=T0), id="first-ready-kept"),
    pytest.param(_save(make_status("True"), first_ready_to_start=T0),
                 _save(make_status("True"), first_ready_to_start=T1),
                 _save(make_status("True"), first_ready_to_start=T0), id="earliest-first-ready"),
    pytest.param(_save(make_status("True")), cp.ForgetPod(pods.PodUID("u")),
                 cp.ForgetPod(pods.PodUID("u")), id="forget-wins"),
    pytest.param(cp.PruneEvents(5), cp.PruneEvents(3), cp.PruneEvents(3), id="newest-prune"),
])
def test_newest_write_stands_for_both(older: cp.Write, newer: cp.Write,
                                      expected: cp.Write) -> None:
    assert checkpointing.newest(older, newer) == expected


def test_prunes_are_written_after_events() -> None:
    pod = make_pod()
    event = cp.SaveEvent(ev.new_event(pod, "Normal", "Pulled", "pulled", at=T0, host="n"))
    batch: dict[Any, cp.Write] = {"prune": cp.PruneEvents(1), "event": event}
    assert checkpointing.ordered(batch) == [event, cp.PruneEvents(1)]
