"""The checkpoint adapter over real SQLite files: corrupt files moved aside, bounded lock waits,
all-or-nothing batches, and what it does while another connection holds the lock."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodelet.adapters import checkpoint as cp
from nodelet.model.core import events as ev
from nodelet.model.core import pods
from nodelet.model.core import status as st

T0 = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
PRTSC = st.POD_READY_TO_START_CONTAINERS


def make_pod(uid: str = "uid-1") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    return pods.Pod(uid=pods.PodUID(uid), name=f"web-{uid}", namespace="default", spec=spec)


def ready_status(at: datetime = T0) -> st.PodStatus:
    return st.PodStatus(phase="Running", conditions=(
        st.PodCondition(st.POD_SCHEDULED, "True", last_transition_time=at),
        st.PodCondition(PRTSC, "True", last_transition_time=at),
    ))


def save(checkpoint: cp.Checkpoint, uid: str, at: datetime = T0) -> None:
    pod = make_pod(uid)
    checkpoint.save_pod_status(pod.uid, pod.name, pod.namespace, ready_status(at))


def corrupt_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".corrupt-" in p.name)


def write_not_a_database(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database" * 100)


def write_foreign_schema(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE pods (x TEXT)")
        conn.execute("PRAGMA user_version = 2")


def write_unknown_version(db: Path) -> None:
    cp.Checkpoint.open(db).close()
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("PRAGMA user_version = 99")


def write_failing_integrity(db: Path) -> None:
    """A file SQLite opens and reads, but whose table and primary-key index disagree."""
    checkpoint = cp.Checkpoint.open(db)
    for i in range(300):
        save(checkpoint, f"u{i:03d}")
    checkpoint.close()  # the last connection: the WAL is merged into the file
    data = bytearray(db.read_bytes())
    at = data.find(b"u150")
    data[at:at + 4] = b"z150"  # the first copy is in the table; its index entry still says u150
    db.write_bytes(bytes(data))


def write_unreadable_row(db: Path) -> None:
    checkpoint = cp.Checkpoint.open(db)
    save(checkpoint, "u1")
    checkpoint.close()
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE conditions SET last_transition_time = 'yesterday-ish'")


@pytest.mark.parametrize("damage", [
    write_not_a_database, write_foreign_schema, write_unknown_version, write_failing_integrity,
    write_unreadable_row,
])
def test_corrupt_checkpoint_is_moved_aside_and_replaced(
    db: Path, damage: Callable[[Path], None], caplog: pytest.LogCaptureFixture
) -> None:
    damage(db)
    before = db.read_bytes()
    with caplog.at_level(logging.WARNING, logger=cp.__name__):
        checkpoint, contents = cp.open_or_replace(db)
    try:
        assert contents == cp.Contents({}, [])
        save(checkpoint, "fresh")
        assert set(checkpoint.load_pod_statuses()) == {"fresh"}
    finally:
        checkpoint.close()
    moved = corrupt_files(db.parent)
    assert len(moved) == 1 and moved[0].startswith(f"{cp.FILENAME}.corrupt-"), moved
    assert (db.parent / moved[0]).read_bytes() == before, "kept as it was, for a post-mortem"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and moved[0] in warnings[0].getMessage()
    assert str(db) in warnings[0].getMessage()


@pytest.mark.parametrize("damage", [write_not_a_database, write_failing_integrity])
def test_open_still_refuses_a_corrupt_checkpoint(
    db: Path, damage: Callable[[Path], None]
) -> None:
    damage(db)
    with pytest.raises(cp.CheckpointCorrupt, match=str(db)):
        cp.Checkpoint.open(db)


def test_a_good_checkpoint_is_kept(db: Path) -> None:
    checkpoint = cp.Checkpoint.open(db)
    save(checkpoint, "u1")
    checkpoint.close()
    checkpoint, contents = cp.open_or_replace(db)
    checkpoint.close()
    assert set(contents.pod_statuses) == {"u1"}
    assert corrupt_files(db.parent) == []


def test_wal_and_shm_are_moved_aside_with_the_file(db: Path) -> None:
    """A stale `-wal` must never be replayed into the fresh database."""
    db.parent.mkdir(parents=True)
    for suffix, content in (("", b"db"), ("-wal", b"log"), ("-shm", b"shm")):
        db.with_name(db.name + suffix).write_bytes(content)
    moved = cp.move_aside(db, now=T0)
    assert moved.name == f"{cp.FILENAME}.corrupt-20240501T120000Z"
    assert sorted(p.name for p in db.parent.iterdir()) == [
        moved.name, f"{moved.name}-shm", f"{moved.name}-wal"]
    assert moved.with_name(moved.name + "-wal").read_bytes() == b"log"


def test_two_corrupt_files_in_the_same_second_both_kept(db: Path) -> None:
    write_not_a_database(db)
    first = cp.move_aside(db, now=T0)
    write_not_a_database(db)
    second = cp.move_aside(db, now=T0)
    assert first != second and first.exists() and second.exists()


def test_unusable_path_is_not_mistaken_for_corruption(tmp_path: Path) -> None:
    """A directory where the file should be: an error naming it, nothing moved."""
    db = tmp_path / "is-a-directory"
    db.mkdir()
    with pytest.raises(cp.CheckpointError, match="is-a-directory") as raised:
        cp.open_or_replace(db)
    assert not isinstance(raised.value, cp.CheckpointCorrupt)
    assert db.is_dir() and corrupt_files(tmp_path) == []


@pytest.fixture
def locked(db: Path) -> Iterator[sqlite3.Connection]:
    """The checkpoint exists, and another connection holds its write lock."""
    checkpoint = cp.Checkpoint.open(db)
    save(checkpoint, "before")
    checkpoint.close()
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    yield other
    other.close()


def test_opening_and_reading_a_locked_checkpoint_works(db: Path, locked: object) -> None:
    """WAL readers do not wait for a writer: an agent can start while another process writes."""
    checkpoint, contents = cp.open_or_replace(db, busy_timeout=0.05)
    checkpoint.close()
    assert set(contents.pod_statuses) == {"before"}
    assert corrupt_files(db.parent) == []


def test_a_write_gives_up_after_the_busy_timeout(db: Path, locked: sqlite3.Connection) -> None:
    checkpoint = cp.Checkpoint.open(db, busy_timeout=0.05)
    try:
        with pytest.raises(cp.CheckpointError, match="locked") as raised:
            save(checkpoint, "during")
        assert not isinstance(raised.value, cp.CheckpointCorrupt)
        locked.execute("ROLLBACK")
        save(checkpoint, "during")  # the same connection works once the lock is gone
        assert set(checkpoint.load_pod_statuses()) == {"before", "during"}
    finally:
        checkpoint.close()


def test_apply_is_all_or_nothing(db: Path) -> None:
    checkpoint = cp.Checkpoint.open(db)
    try:
        pod = make_pod("u1")
        event = ev.new_event(pod, "Normal", "Pulled", "pulled", at=T0, host="node-a")
        broken = cp.SavePod(pod.uid, pod.name, pod.namespace, ready_status())
        object.__setattr__(broken, "name", None)  # NOT NULL violated inside the transaction
        with pytest.raises(cp.CheckpointError):
            checkpoint.apply([cp.SaveEvent(event), broken])
        assert checkpoint.load_events() == []
        checkpoint.apply([cp.SaveEvent(event), cp.SavePod(pod.uid, pod.name, pod.namespace,
                                                          ready_status())])
        assert [e.name for e in checkpoint.load_events()] == [event.name]
    finally:
        checkpoint.close()


def test_given_first_ready_times_are_kept_over_the_status(db: Path) -> None:
    """A write that stands for several statuses carries the first time the pod was ready."""
    checkpoint = cp.Checkpoint.open(db)
    try:
        pod = make_pod("u1")
        not_ready = st.PodStatus(conditions=(st.PodCondition(PRTSC, "False"),))
        checkpoint.apply([cp.SavePod(pod.uid, pod.name, pod.namespace, not_ready,
                                     first_ready_to_start=T0)])
        stored = checkpoint.load_pod_statuses()[pod.uid]
        assert stored.first_ready_to_start == T0
    finally:
        checkpoint.close()


# The pods table as older versions wrote it (conditions are unchanged; events below).
_OLD_PODS = {
    1: "uid TEXT PRIMARY KEY, name TEXT NOT NULL, namespace TEXT NOT NULL, start_time TEXT, "
       "first_ready_to_start TEXT, first_ready TEXT",
    2: "uid TEXT PRIMARY KEY, name TEXT NOT NULL, namespace TEXT NOT NULL, start_time TEXT, "
       "first_ready_to_start TEXT, first_ready TEXT, phase TEXT NOT NULL DEFAULT 'Pending', "
       "reason TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT ''",
    3: "uid TEXT PRIMARY KEY, name TEXT NOT NULL, namespace TEXT NOT NULL, start_time TEXT, "
       "first_ready_to_start TEXT, first_ready TEXT, phase TEXT NOT NULL DEFAULT 'Pending', "
       "reason TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT '', "
       "pod_ips TEXT NOT NULL DEFAULT ''",
}
# The events table before version 4 (no field path).
_OLD_EVENTS = (
    "key TEXT PRIMARY KEY, name TEXT NOT NULL, namespace TEXT NOT NULL, pod_name TEXT NOT NULL, "
    "pod_uid TEXT NOT NULL, type TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL, "
    "count INTEGER NOT NULL, first_timestamp TEXT NOT NULL, last_timestamp TEXT NOT NULL, "
    "host TEXT NOT NULL, component TEXT NOT NULL")


def test_a_finished_pods_ips_are_remembered(db: Path) -> None:
    """Its sandbox is stopped, so after a restart only the checkpoint knows its IPs."""
    checkpoint = cp.Checkpoint.open(db)
    pod = make_pod("u1")
    done = replace(ready_status(), phase="Succeeded", pod_ips=("10.1.0.7", "fd00::7"))
    checkpoint.save_pod_status(pod.uid, pod.name, pod.namespace, done)
    checkpoint.close()
    checkpoint, contents = cp.open_or_replace(db)
    checkpoint.close()
    restored = contents.pod_statuses[pod.uid].to_status()
    assert (restored.phase, restored.pod_ips) == ("Succeeded", ("10.1.0.7", "fd00::7"))


@pytest.mark.parametrize("version", sorted(_OLD_PODS))
def test_an_older_checkpoint_is_migrated_not_moved_aside(db: Path, version: int) -> None:
    """Version 1 predates the pods' phase, reason and message columns, 2 their pod IPs, 3
    the events' field path."""
    db.parent.mkdir(parents=True)
    schema = cp._SCHEMA
    conditions = schema[schema.index("CREATE TABLE IF NOT EXISTS conditions"):
                        schema.index("CREATE TABLE IF NOT EXISTS events")]
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executescript(f"CREATE TABLE pods ({_OLD_PODS[version]});\n{conditions}"
                           f"CREATE TABLE events ({_OLD_EVENTS});")
        conn.execute("INSERT INTO pods (uid, name, namespace) VALUES ('u1', 'web', 'default')")
        conn.execute("INSERT INTO events VALUES ('[\"u1\", \"Normal\", \"Pulled\", \"m\"]', "
                     "'web.1', 'default', 'web', 'u1', "
                     "'Normal', 'Pulled', 'm', 1, '2026-01-01T00:00:00.000000Z', "
                     "'2026-01-01T00:00:00.000000Z', 'n', 'nodelet')")
        conn.execute(f"PRAGMA user_version = {version}")
    checkpoint, contents = cp.open_or_replace(db)
    checkpoint.close()
    assert corrupt_files(db.parent) == []
    restored = contents.pod_statuses[pods.PodUID("u1")]
    assert (restored.phase, restored.pod_ips) == ("Pending", ())
    assert [(e.reason, e.field_path) for e in contents.events] == [("Pulled", "")]
    if version < 4:  # the stored key is the event's key now: a repeat replaces the row
        checkpoint, contents = cp.open_or_replace(db)
        checkpoint.save_event(replace(contents.events[0], count=2))
        checkpoint.close()
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT count(*), max(count) FROM events").fetchone() == (1, 2)
