"""The checkpoint: what the runtime cannot tell nodelet after a restart, in SQLite.

Kept per pod UID: each condition's status and precise `lastTransitionTime`, the pod's start
time, and the first times PodReadyToStartContainers (or PodHasNetwork) and Ready turned True,
with the pod's name and namespace. Kept for the node: the event history (bounded by the caller
through `prune_events`).

The database is `<data-dir>/checkpoint.db` (stdlib `sqlite3`, WAL journal, `synchronous=NORMAL`).
Each call is a small synchronous transaction, but it waits up to `busy_timeout` seconds for a
lock held by another connection, and a full disk makes it fail: the agent calls it from its own
writer thread (`services.status.checkpointing`), never from the event loop. One `Checkpoint` is used
from one thread (the thread that opened it), as sqlite3 requires.

Writes are values (`SavePod`, `ForgetPod`, `SaveEvent`, `PruneEvents`); `apply` writes several
in one transaction, all or nothing, and writing the same value twice is harmless.

`Store` is the seam the status manager and the event recorder write through: a `Checkpoint`
(writes synchronous, failures raised) or the agent's write-behind writer (writes queued on the
event loop, written on the writer thread, retried until they succeed).

Exceptions:

    CheckpointError          the database cannot be opened, read or written (locked longer than
                             the busy timeout, disk full...); the message names the file.
    └── CheckpointCorrupt    the file is not a usable checkpoint: not a database, tables this
                             version does not know, or `PRAGMA integrity_check` failing.
                             `open_or_replace` moves such a file aside and starts afresh: it
                             only holds transition times and events.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from nodelet import settings as settings_
from nodelet.model.core import events as ev
from nodelet.model.core import pods, transitions
from nodelet.model.core import status as st

log = logging.getLogger(__name__)

FILENAME = "checkpoint.db"
# Seconds a statement waits for another connection's lock (sqlite3's own default is 5).
DEFAULT_BUSY_TIMEOUT = settings_.CheckpointSettings.busy_timeout
# 2: pods remember their phase, reason and message (a terminal phase such as
# DeadlineExceeded cannot be derived from the runtime again after a restart).
# 3: and their pod IPs (a finished pod's sandbox is stopped, so the runtime has them no more).
# 4: events remember the container they are about (involvedObject.fieldPath).
_SCHEMA_VERSION = 4
# The columns each older version lacks, added by the upgrade: (table, column definition).
_ADDED_COLUMNS = {
    2: (("pods", "phase TEXT NOT NULL DEFAULT 'Pending'"),
        ("pods", "reason TEXT NOT NULL DEFAULT ''"),
        ("pods", "message TEXT NOT NULL DEFAULT ''")),
    3: (("pods", "pod_ips TEXT NOT NULL DEFAULT ''"),),
    4: (("events", "field_path TEXT NOT NULL DEFAULT ''"),),
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pods (
    uid TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    namespace TEXT NOT NULL,
    start_time TEXT,
    first_ready_to_start TEXT,
    first_ready TEXT,
    phase TEXT NOT NULL DEFAULT 'Pending',
    reason TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    pod_ips TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS conditions (
    uid TEXT NOT NULL REFERENCES pods(uid) ON DELETE CASCADE,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    last_transition_time TEXT,
    PRIMARY KEY (uid, type)
);
CREATE TABLE IF NOT EXISTS events (
    key TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    namespace TEXT NOT NULL,
    pod_name TEXT NOT NULL,
    pod_uid TEXT NOT NULL,
    type TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    count INTEGER NOT NULL,
    first_timestamp TEXT NOT NULL,
    last_timestamp TEXT NOT NULL,
    host TEXT NOT NULL,
    component TEXT NOT NULL,
    field_path TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS events_by_last ON events (last_timestamp);
"""


# The columns of each table, in order (a file with other ones is not ours: it is moved aside).
_COLUMNS = {
    "pods": ("uid", "name", "namespace", "start_time", "first_ready_to_start", "first_ready",
             "phase", "reason", "message", "pod_ips"),
    "conditions": ("uid", "type", "status", "last_transition_time"),
    "events": ("key", "name", "namespace", "pod_name", "pod_uid", "type", "reason", "message",
               "count", "first_timestamp", "last_timestamp", "host", "component", "field_path"),
}
# SQLite's primary result codes that mean the file itself is damaged or foreign.
_CORRUPT_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


class CheckpointError(Exception):
    """The checkpoint database cannot be used; the message names the file."""


class CheckpointCorrupt(CheckpointError):
    """The file is not a usable checkpoint (not a database, foreign tables, integrity fails)."""


class _Corrupt(sqlite3.DatabaseError):
    """Raised inside `_initialise` for a file SQLite reads but nodelet cannot use."""


@dataclass(frozen=True)
class StoredCondition:
    type: str
    status: st.ConditionStatus
    last_transition_time: datetime | None


@dataclass(frozen=True)
class StoredPodStatus:
    """What the checkpoint remembers of one pod's status."""

    uid: pods.PodUID
    name: str
    namespace: str
    start_time: datetime | None
    conditions: tuple[StoredCondition, ...]
    first_ready_to_start: datetime | None
    first_ready: datetime | None
    phase: st.PodPhase = "Pending"
    reason: str = ""
    message: str = ""
    pod_ips: tuple[str, ...] = ()

    def to_status(self) -> st.PodStatus:
        """A status carrying only the remembered conditions and start time.

        Enough as the "old" status of `transitions.merge_status`, which reads nothing else.
        """
        conditions = tuple(
            st.PodCondition(
                type=c.type, status=c.status, last_transition_time=c.last_transition_time
            )
            for c in self.conditions
        )
        return st.PodStatus(phase=self.phase, reason=self.reason, message=self.message,
                            conditions=conditions, start_time=self.start_time,
                            pod_ips=self.pod_ips)


@dataclass(frozen=True)
class SavePod:
    """Remember `status`'s conditions, start time, phase, reason, message and pod IPs for pod
    `uid`.

    First-ready times: the given ones, else those of `status`; a time already stored wins.
    """

    uid: pods.PodUID
    name: str
    namespace: str
    status: st.PodStatus
    first_ready_to_start: datetime | None = None
    first_ready: datetime | None = None


@dataclass(frozen=True)
class ForgetPod:
    """Drop everything remembered about pod `uid`."""

    uid: pods.PodUID


@dataclass(frozen=True)
class SaveEvent:
    """Insert `event`, or replace the stored event with the same key (aggregation)."""

    event: ev.Event


@dataclass(frozen=True)
class PruneEvents:
    """Keep only the `max_events` events with the newest `last_timestamp`."""

    max_events: int


Write = SavePod | ForgetPod | SaveEvent | PruneEvents


class Store(Protocol):
    """What the status manager and the event recorder need of a checkpoint."""

    @property
    def path(self) -> Path: ...

    def load_pod_statuses(self) -> dict[pods.PodUID, StoredPodStatus]: ...

    def load_events(self) -> list[ev.Event]: ...

    def save_pod_status(
        self, uid: pods.PodUID, name: str, namespace: str, status: st.PodStatus
    ) -> None: ...

    def forget_pod(self, uid: pods.PodUID) -> None: ...

    def save_event(self, event: ev.Event) -> None: ...

    def prune_events(self, max_events: int) -> None: ...


class Checkpoint:
    """An open checkpoint database. Create with `Checkpoint.open`; `close()` when done."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path

    @property
    def path(self) -> Path:
        return self._path

    @classmethod
    def open(cls, path: Path, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> Checkpoint:
        """Open (creating if missing) the database at `path`, check it and its schema.

        A statement waits at most `busy_timeout` seconds for another connection's lock.
        Raises CheckpointCorrupt if the file is not a usable checkpoint, CheckpointError if
        it cannot be opened (not writable, locked while its schema had to be created...).
        """
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=busy_timeout)
            conn.row_factory = sqlite3.Row
        except (OSError, sqlite3.Error) as exc:
            raise CheckpointError(f"cannot open checkpoint {path}: {exc}") from exc
        checkpoint = cls(conn, path)
        try:
            with checkpoint._guard("initialise"):
                _initialise(conn)
        except CheckpointError:
            conn.close()
            raise
        return checkpoint

    def close(self) -> None:
        """Close the database. Idempotent."""
        self._conn.close()

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if _is_corrupt(exc):
                raise CheckpointCorrupt(
                    f"checkpoint {self._path} is corrupt ({action}): {exc} (nodelet moves it "
                    f"aside at its next start: it only keeps transition times and events)"
                ) from exc
            raise CheckpointError(f"cannot {action} checkpoint {self._path}: {exc}") from exc

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Reading rows: a value this version cannot parse means the file is not usable."""
        try:
            with self._guard("read"):
                yield
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointCorrupt(
                f"checkpoint {self._path} holds a row nodelet cannot read: {exc!r}") from exc

    def apply(self, writes: Iterable[Write]) -> None:
        """Write all of `writes`, in order, in one transaction: all or nothing."""
        with self._guard("write"):
            try:
                with self._conn:
                    for write in writes:
                        _apply(self._conn, write)
            finally:
                # A failed COMMIT (disk full) may leave the transaction open: end it, so the
                # next attempt starts clean.
                if self._conn.in_transaction:
                    self._conn.rollback()

    # --- pod statuses

    def save_pod_status(
        self, uid: pods.PodUID, name: str, namespace: str, status: st.PodStatus
    ) -> None:
        """Remember `status`'s conditions (status + transition time) and start time for `uid`.

        The first-ready times are set from `status` only if not remembered yet: they record the
        *first* time the condition turned True.
        """
        self.apply([SavePod(uid, name, namespace, status)])

    def load_pod_statuses(self) -> dict[pods.PodUID, StoredPodStatus]:
        """Everything remembered about pod statuses, by pod UID."""
        with self._reading():
            pod_rows = self._conn.execute("SELECT * FROM pods").fetchall()
            cond_rows = self._conn.execute("SELECT * FROM conditions ORDER BY rowid").fetchall()
            conditions: dict[str, list[StoredCondition]] = {}
            for uid, type_, status, ltt in cond_rows:
                conditions.setdefault(uid, []).append(StoredCondition(
                    type=type_, status=status, last_transition_time=st.parse_time(ltt)))
            return {
                pods.PodUID(row[0]): _stored_pod(row, tuple(conditions.get(row[0], ())))
                for row in pod_rows
            }

    def forget_pod(self, uid: pods.PodUID) -> None:
        """Drop everything remembered about the status of pod `uid` (no-op if unknown)."""
        self.apply([ForgetPod(uid)])

    # --- events

    def save_event(self, event: ev.Event) -> None:
        """Insert `event`, or replace the stored event with the same key (aggregation)."""
        self.apply([SaveEvent(event)])

    def load_events(self) -> list[ev.Event]:
        """All stored events, oldest `last_timestamp` first."""
        with self._reading():
            rows = self._conn.execute(
                "SELECT * FROM events ORDER BY last_timestamp, rowid"
            ).fetchall()
            return [_event(row) for row in rows]

    def prune_events(self, max_events: int) -> None:
        """Keep only the `max_events` events with the newest `last_timestamp`."""
        self.apply([PruneEvents(max_events)])


@dataclass(frozen=True)
class Contents:
    """Everything a checkpoint holds, as read when it was opened."""

    pod_statuses: dict[pods.PodUID, StoredPodStatus]
    events: list[ev.Event]


def open_or_replace(
    path: Path, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT
) -> tuple[Checkpoint, Contents]:
    """`Checkpoint.open` and read everything; a corrupt file (not a database, foreign tables,
    failing `PRAGMA integrity_check`, rows this version cannot read) is moved aside to
    `<name>.corrupt-<UTC time>` with a warning, and a fresh checkpoint is created.

    Raises CheckpointError when the file cannot be opened or read for another reason.
    """
    try:
        return _open_and_read(path, busy_timeout)
    except CheckpointCorrupt as exc:
        moved = move_aside(path)
        log.warning("checkpoint %s is corrupt, moved it to %s and starting with an empty one "
                    "(transition times and events of earlier runs are lost): %s",
                    path, moved, exc.__cause__ or exc)
    return _open_and_read(path, busy_timeout)


def _open_and_read(path: Path, busy_timeout: float) -> tuple[Checkpoint, Contents]:
    checkpoint = Checkpoint.open(path, busy_timeout=busy_timeout)
    try:
        return checkpoint, Contents(checkpoint.load_pod_statuses(), checkpoint.load_events())
    except CheckpointError:
        checkpoint.close()
        raise


def move_aside(path: Path, now: datetime | None = None) -> Path:
    """Rename `path` (and its `-wal` and `-shm` files) to `<path>.corrupt-<UTC time>`; return
    the new name. A stale `-wal` must not be replayed into the fresh database."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    serial = 1
    while target.exists():
        serial += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}.{serial}")
    for suffix in ("-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(target.with_name(target.name + suffix))
    path.rename(target)
    return target


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, _Corrupt) or (code is not None and code & 0xFF in _CORRUPT_CODES)


def _apply(conn: sqlite3.Connection, write: Write) -> None:
    match write:
        case SavePod():
            _save_pod(conn, write)
        case ForgetPod(uid=uid):
            conn.execute("DELETE FROM conditions WHERE uid = ?", (str(uid),))
            conn.execute("DELETE FROM pods WHERE uid = ?", (str(uid),))
        case SaveEvent(event=event):
            conn.execute(f"INSERT OR REPLACE INTO events VALUES ({', '.join('?' * 14)})",
                         _event_row(event))
        case PruneEvents(max_events=max_events):
            conn.execute(
                "DELETE FROM events WHERE key NOT IN "
                "(SELECT key FROM events ORDER BY last_timestamp DESC, rowid DESC LIMIT ?)",
                (max(max_events, 0),),
            )


def _save_pod(conn: sqlite3.Connection, write: SavePod) -> None:
    uid, status = str(write.uid), write.status
    row = (
        uid,
        write.name,
        write.namespace,
        st.format_precise(status.start_time),
        st.format_precise(write.first_ready_to_start or transitions.ready_to_start_since(status)),
        st.format_precise(write.first_ready or transitions.ready_since(status)),
        status.phase,
        status.reason,
        status.message,
        ",".join(status.pod_ips),
    )
    conditions = [
        (uid, c.type, c.status, st.format_precise(c.last_transition_time))
        for c in status.conditions
    ]
    conn.execute(_UPSERT_POD, row)
    conn.execute("DELETE FROM conditions WHERE uid = ?", (uid,))
    conn.executemany("INSERT INTO conditions VALUES (?, ?, ?, ?)", conditions)


def _event_row(event: ev.Event) -> tuple[object, ...]:
    return (
        json.dumps(list(event.key)),
        event.name,
        event.namespace,
        event.pod_name,
        str(event.pod_uid),
        event.type,
        event.reason,
        event.message,
        event.count,
        st.format_precise(event.first_timestamp),
        st.format_precise(event.last_timestamp),
        event.host,
        event.component,
        event.field_path,
    )


# A row's first-ready times are written once: COALESCE keeps the remembered one.
_UPSERT_POD = """
INSERT INTO pods (uid, name, namespace, start_time, first_ready_to_start, first_ready, phase,
                  reason, message, pod_ips)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (uid) DO UPDATE SET
    name = excluded.name,
    namespace = excluded.namespace,
    start_time = excluded.start_time,
    phase = excluded.phase,
    reason = excluded.reason,
    message = excluded.message,
    pod_ips = excluded.pod_ips,
    first_ready_to_start = COALESCE(pods.first_ready_to_start, excluded.first_ready_to_start),
    first_ready = COALESCE(pods.first_ready, excluded.first_ready)
"""


def _initialise(conn: sqlite3.Connection) -> None:
    """Check the file and bring its schema up to date; raises sqlite3.DatabaseError (`_Corrupt`
    for a file SQLite reads but nodelet cannot use).

    An up-to-date file is only read here (WAL readers never wait for a writer's lock), so the
    agent starts even while another connection holds the checkpoint locked.
    """
    conn.execute("PRAGMA foreign_keys=ON")
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check(5)")]
    if problems != ["ok"]:
        raise _Corrupt(f"integrity check failed: {'; '.join(problems)}")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, *range(1, _SCHEMA_VERSION + 1)):
        raise _Corrupt(f"unknown schema version {version}")
    if version != _SCHEMA_VERSION or _columns(conn) != _COLUMNS:
        _check_known(_columns(conn), version)  # before changing anything in a foreign file
        _create_schema(conn, version)
    # NORMAL: commits do not fsync the database, only the log at checkpoints; losing the last
    # transaction on power loss is acceptable for transition times and events.
    conn.execute("PRAGMA synchronous=NORMAL")
    found = _columns(conn)
    if found != _COLUMNS:
        raise _Corrupt(f"unexpected tables or columns: {found}")


def _check_known(found: dict[str, tuple[str, ...]], version: int) -> None:
    """Raise `_Corrupt` if a table exists with columns no version of nodelet wrote."""
    for table, columns in found.items():
        expected = _COLUMNS[table]
        if version:  # without the columns later versions added
            later = sum(1 for v, added in _ADDED_COLUMNS.items() if v > version
                        for t, _ in added if t == table)
            expected = expected[:len(expected) - later]
        if columns and columns != expected:
            raise _Corrupt(f"unexpected columns in table {table}: {', '.join(columns)}")


def _create_schema(conn: sqlite3.Connection, version: int) -> None:
    # WAL: readers neither block the writer nor wait for it.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(_SCHEMA)
    for added in (v for v in sorted(_ADDED_COLUMNS) if version and v > version):
        for table, column in _ADDED_COLUMNS[added]:  # the table predates these columns
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
    if version and version < 4:  # the events' keys gain their (empty) field path
        for rowid, key in conn.execute("SELECT rowid, key FROM events").fetchall():
            parts = json.loads(key)
            if isinstance(parts, list) and len(parts) == 4:
                conn.execute("UPDATE events SET key = ? WHERE rowid = ?",
                             (json.dumps([*parts, ""]), rowid))
    conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
    conn.commit()


def _columns(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """Our tables' column names, in order (a table that does not exist: none)."""
    return {
        table: tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
        for table in _COLUMNS
    }


def _stored_pod(row: sqlite3.Row, conditions: tuple[StoredCondition, ...]) -> StoredPodStatus:
    return StoredPodStatus(
        uid=pods.PodUID(row["uid"]),
        name=row["name"],
        namespace=row["namespace"],
        start_time=st.parse_time(row["start_time"]),
        conditions=conditions,
        first_ready_to_start=st.parse_time(row["first_ready_to_start"]),
        first_ready=st.parse_time(row["first_ready"]),
        phase=row["phase"],
        reason=row["reason"],
        message=row["message"],
        pod_ips=tuple(ip for ip in row["pod_ips"].split(",") if ip),
    )


def _event(row: sqlite3.Row) -> ev.Event:
    first_timestamp = st.parse_time(row["first_timestamp"])
    last_timestamp = st.parse_time(row["last_timestamp"])
    assert first_timestamp is not None and last_timestamp is not None  # NOT NULL columns
    return ev.Event(
        name=row["name"],
        namespace=row["namespace"],
        pod_name=row["pod_name"],
        pod_uid=pods.PodUID(row["pod_uid"]),
        type="Warning" if row["type"] == "Warning" else "Normal",
        reason=row["reason"],
        message=row["message"],
        count=row["count"],
        first_timestamp=first_timestamp,
        last_timestamp=last_timestamp,
        host=row["host"],
        component=row["component"],
        field_path=row["field_path"],
    )
