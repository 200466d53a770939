"""StatusManager over a real SQLite checkpoint: transition times, versions, restart, sinks."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodelet.adapters import checkpoint as cp
from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.services.status import statuses
from support.clocks import FakeClock

T0 = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
PRTSC = st.POD_READY_TO_START_CONTAINERS


def make_pod(name: str = "web", uid: str = "uid-1") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    return pods.Pod(uid=pods.PodUID(uid), name=name, namespace="default", spec=spec)


def make_status(
    sandbox: st.ConditionStatus, ready: st.ConditionStatus = "False", message: str = ""
) -> st.PodStatus:
    reason = "" if sandbox == "True" else st.REASON_POD_SANDBOX_NOT_READY
    return st.PodStatus(
        phase="Pending" if ready == "False" else "Running",
        conditions=(
            st.PodCondition(st.POD_SCHEDULED, "True"),
            st.PodCondition(PRTSC, sandbox, reason, message),
            st.PodCondition(st.READY, ready),
        ),
    )


def ltt(status: st.PodStatus | None, type_: str) -> datetime | None:
    assert status is not None
    found = status.condition(type_)
    assert found is not None
    return found.last_transition_time


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def manager(db: Path, clock: FakeClock) -> Iterator[statuses.StatusManager]:
    checkpoint = cp.Checkpoint.open(db)
    mgr = statuses.StatusManager(checkpoint=checkpoint, clock=clock)
    mgr.restore()
    yield mgr
    checkpoint.close()


def test_first_status_gets_now_and_version_1(
    manager: statuses.StatusManager, clock: FakeClock
) -> None:
    pod = make_pod()
    assert manager.version(pod.uid) == 0
    assert manager.set_status(pod, make_status("False", message="no pod sandbox exists"))
    assert manager.version(pod.uid) == 1
    assert ltt(manager.get(pod.uid), PRTSC) == T0
    assert manager.pods() == [(pod, manager.get(pod.uid))]


def test_identical_status_is_dropped(manager: statuses.StatusManager, clock: FakeClock) -> None:
    pod = make_pod()
    manager.set_status(pod, make_status("False"))
    clock.advance(5)
    assert not manager.set_status(pod, make_status("False"))
    assert manager.version(pod.uid) == 1


def test_message_change_is_stored_without_moving_the_time(
    manager: statuses.StatusManager, clock: FakeClock
) -> None:
    pod = make_pod()
    manager.set_status(pod, make_status("False", message="no pod sandbox exists"))
    clock.advance(5)
    assert manager.set_status(pod, make_status("False", message="pod sandbox has no IP address"))
    assert manager.version(pod.uid) == 2
    status = manager.get(pod.uid)
    assert ltt(status, PRTSC) == T0
    assert status is not None and status.condition(PRTSC) is not None
    assert status.condition(PRTSC).message == "pod sandbox has no IP address"  # type: ignore[union-attr]


def test_flip_moves_only_the_flipped_condition(
    manager: statuses.StatusManager, clock: FakeClock
) -> None:
    pod = make_pod()
    manager.set_status(pod, make_status("False"))
    flipped_at = clock.advance(2.5)
    manager.set_status(pod, make_status("True"))
    status = manager.get(pod.uid)
    assert ltt(status, PRTSC) == flipped_at
    assert ltt(status, st.POD_SCHEDULED) == T0
    assert ltt(status, st.READY) == T0
    assert manager.first_ready_to_start(pod.uid) == flipped_at


def test_first_ready_times_are_the_first_ones(
    manager: statuses.StatusManager, clock: FakeClock
) -> None:
    pod = make_pod()
    first = clock.advance(1)
    manager.set_status(pod, make_status("True", "True"))
    clock.advance(10)
    manager.set_status(pod, make_status("False"))  # sandbox died
    again = clock.advance(10)
    manager.set_status(pod, make_status("True", "True"))
    assert ltt(manager.get(pod.uid), PRTSC) == again
    assert manager.first_ready_to_start(pod.uid) == first
    assert manager.first_ready(pod.uid) == first


def test_pod_has_network_counts_as_ready_to_start(
    manager: statuses.StatusManager, clock: FakeClock
) -> None:
    pod = make_pod()
    status = st.PodStatus(conditions=(st.PodCondition(st.POD_HAS_NETWORK, "True"),))
    manager.set_status(pod, status)
    assert manager.first_ready_to_start(pod.uid) == T0


def test_start_time_is_kept(manager: statuses.StatusManager, clock: FakeClock) -> None:
    pod = make_pod()
    manager.set_status(pod, st.PodStatus(start_time=T0))
    later = clock.advance(3)
    manager.set_status(pod, st.PodStatus(phase="Running", start_time=later))
    status = manager.get(pod.uid)
    assert status is not None and status.start_time == T0


def restart(db: Path, clock: FakeClock) -> tuple[statuses.StatusManager, cp.Checkpoint]:
    checkpoint = cp.Checkpoint.open(db)
    mgr = statuses.StatusManager(checkpoint=checkpoint, clock=clock)
    mgr.restore()
    return mgr, checkpoint


def test_restart_keeps_times_of_unchanged_conditions(
    manager: statuses.StatusManager, clock: FakeClock, db: Path
) -> None:
    pod = make_pod()
    manager.set_status(pod, make_status("False"))
    ready_at = clock.advance(2)
    manager.set_status(pod, dataclasses.replace(make_status("True"), start_time=T0))
    clock.advance(100)

    again, checkpoint = restart(db, clock)
    try:
        assert again.restored_uids() == {pod.uid}
        assert again.first_ready_to_start(pod.uid) == ready_at
        assert again.set_status(pod, make_status("True", "True"))
        status = again.get(pod.uid)
        assert ltt(status, PRTSC) == ready_at  # precise, microseconds included
        assert ltt(status, st.POD_SCHEDULED) == T0
        assert ltt(status, st.READY) == clock.now  # flipped while we were away
        assert status is not None and status.start_time == T0
        assert again.restored_uids() == set()
    finally:
        checkpoint.close()


def test_forget_drops_cache_and_checkpoint_row(
    manager: statuses.StatusManager, clock: FakeClock, db: Path
) -> None:
    pod = make_pod()
    manager.set_status(pod, make_status("True"))
    manager.forget(pod.uid)
    assert manager.get(pod.uid) is None
    assert manager.pods() == []
    assert manager.first_ready_to_start(pod.uid) is None
    assert manager.version(pod.uid) == 1  # versions never go back
    again, checkpoint = restart(db, clock)
    try:
        assert again.restored_uids() == set()
    finally:
        checkpoint.close()


def test_subscribers_see_stored_statuses_only(
    manager: statuses.StatusManager, clock: FakeClock
) -> None:
    seen: list[tuple[str, str]] = []

    def sink(pod: pods.Pod, status: st.PodStatus) -> None:
        seen.append((pod.name, status.phase))

    def broken(pod: pods.Pod, status: st.PodStatus) -> None:
        raise RuntimeError("sink bug")

    manager.subscribe(broken)
    unsubscribe = manager.subscribe(sink)
    pod = make_pod()
    manager.set_status(pod, make_status("False"))
    manager.set_status(pod, make_status("False"))
    manager.set_status(pod, make_status("True", "True"))
    unsubscribe()
    manager.set_status(pod, make_status("False"))
    assert seen == [("web", "Pending"), ("web", "Running")]


class CountingCheckpoint(cp.Checkpoint):
    saves = 0

    def save_pod_status(
        self, uid: pods.PodUID, name: str, namespace: str, status: st.PodStatus
    ) -> None:
        self.saves += 1
        super().save_pod_status(uid, name, namespace, status)


def test_checkpoint_written_only_when_transitions_change(db: Path, clock: FakeClock) -> None:
    checkpoint = CountingCheckpoint.open(db)
    assert isinstance(checkpoint, CountingCheckpoint)
    try:
        manager = statuses.StatusManager(checkpoint=checkpoint, clock=clock)
        pod = make_pod()
        manager.set_status(pod, make_status("False", message="a"))
        clock.advance(1)
        manager.set_status(pod, make_status("False", message="b"))  # stored, same transitions
        assert (checkpoint.saves, manager.version(pod.uid)) == (1, 2)
        manager.set_status(pod, make_status("True"))
        assert checkpoint.saves == 2
    finally:
        checkpoint.close()


def test_corrupt_checkpoint_names_the_file(tmp_path: Path) -> None:
    db = tmp_path / cp.FILENAME
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(cp.CheckpointError, match=str(db)):
        cp.Checkpoint.open(db)


def test_unwritable_checkpoint_names_the_file(tmp_path: Path) -> None:
    db = tmp_path / "is-a-directory"
    db.mkdir()
    with pytest.raises(cp.CheckpointError, match="is-a-directory"):
        cp.Checkpoint.open(db)


def test_checkpoint_uses_wal(db: Path) -> None:
    cp.Checkpoint.open(db).close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_terminal_phase_and_reason_survive_a_restart(tmp_path: Path) -> None:
    """DeadlineExceeded cannot be read back from the runtime: the checkpoint keeps it."""
    path = tmp_path / "checkpoint.db"
    first = cp.Checkpoint.open(path)
    manager = statuses.StatusManager(checkpoint=first, clock=lambda: T0)
    pod = make_pod()
    failed = st.PodStatus(phase="Failed", reason="DeadlineExceeded",
                          message="Pod was active on the node longer than the specified deadline",
                          conditions=(st.PodCondition(type=st.READY, status="False"),))
    manager.set_status(pod, failed)
    first.close()

    second = cp.Checkpoint.open(path)
    restarted = statuses.StatusManager(checkpoint=second, clock=lambda: T0)
    restarted.restore()
    known = restarted.last_known(pod.uid)
    second.close()
    assert known is not None
    assert (known.phase, known.reason, known.message) == (
        failed.phase, failed.reason, failed.message)
    assert restarted.get(pod.uid) is None, "nothing was set since the restart"
