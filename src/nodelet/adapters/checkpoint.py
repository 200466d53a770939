"""The checkpoint: what the runtime cannot tell nodelet after a restart, in SQLite.

Kept per pod UID: each condition's status and precise `lastTransitionTime`, the pod's start
time, and the first times PodReadyToStartContainers (or PodHasNetwork) and Ready turned True,
with the pod's name and namespace. Kept for the node: the event history (bounded by the caller
through `prune_events`).

The database is `<data-dir>/checkpoint.db` (stdlib `sqlite3`, WAL journal, `synchronous=NORMAL`):
each call is a small synchronous transaction, well under a millisecond, so callers may make it
from the event loop, but not from hot loops. One `Checkpoint` is used from one thread.

Exceptions:

    CheckpointError          the database cannot be opened, read or written; the message names
                             the file and what to do (a corrupt file can be deleted: it only
                             holds transition times and events).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from nodelet.model import events as ev
from nodelet.model import pods, transitions
from nodelet.model import status as st

FILENAME = "checkpoint.db"
# 2: pods remember their phase, reason and message (a terminal phase such as
# DeadlineExceeded cannot be derived from the runtime again after a restart).
_SCHEMA_VERSION = 2

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
    message TEXT NOT NULL DEFAULT ''
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
    component TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_last ON events (last_timestamp);
"""


class CheckpointError(Exception):
    """The checkpoint database cannot be used; the message names the file."""


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
                            conditions=conditions, start_time=self.start_time)


class Checkpoint:
    """An open checkpoint database. Create with `Checkpoint.open`; `close()` when done."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path

    @property
    def path(self) -> Path:
        return self._path

    @classmethod
    def open(cls, path: Path) -> Checkpoint:
        """Open (creating if missing) the database at `path` and its schema.

        Raises CheckpointError if the file is not a usable SQLite database or not writable.
        """
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path)
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
            raise CheckpointError(
                f"cannot {action} checkpoint {self._path}: {exc} "
                f"(if the file is corrupt, stop nodelet and delete it: it only keeps "
                f"transition times and events)"
            ) from exc

    # --- pod statuses

    def save_pod_status(
        self, uid: pods.PodUID, name: str, namespace: str, status: st.PodStatus
    ) -> None:
        """Remember `status`'s conditions (status + transition time) and start time for `uid`.

        The first-ready times are set from `status` only if not remembered yet: they record the
        *first* time the condition turned True.
        """
        row = (
            str(uid),
            name,
            namespace,
            st.format_precise(status.start_time),
            st.format_precise(transitions.ready_to_start_since(status)),
            st.format_precise(transitions.ready_since(status)),
            status.phase,
            status.reason,
            status.message,
        )
        conditions = [
            (str(uid), c.type, c.status, st.format_precise(c.last_transition_time))
            for c in status.conditions
        ]
        with self._guard("write"), self._conn:
            self._conn.execute(_UPSERT_POD, row)
            self._conn.execute("DELETE FROM conditions WHERE uid = ?", (str(uid),))
            self._conn.executemany("INSERT INTO conditions VALUES (?, ?, ?, ?)", conditions)

    def load_pod_statuses(self) -> dict[pods.PodUID, StoredPodStatus]:
        """Everything remembered about pod statuses, by pod UID."""
        with self._guard("read"):
            pod_rows = self._conn.execute("SELECT * FROM pods").fetchall()
            cond_rows = self._conn.execute("SELECT * FROM conditions ORDER BY rowid").fetchall()
        conditions: dict[str, list[StoredCondition]] = {}
        for uid, type_, status, ltt in cond_rows:
            conditions.setdefault(uid, []).append(
                StoredCondition(type=type_, status=status, last_transition_time=st.parse_time(ltt))
            )
        return {
            pods.PodUID(row[0]): _stored_pod(row, tuple(conditions.get(row[0], ())))
            for row in pod_rows
        }

    def forget_pod(self, uid: pods.PodUID) -> None:
        """Drop everything remembered about the status of pod `uid` (no-op if unknown)."""
        with self._guard("write"), self._conn:
            self._conn.execute("DELETE FROM conditions WHERE uid = ?", (str(uid),))
            self._conn.execute("DELETE FROM pods WHERE uid = ?", (str(uid),))

    # --- events

    def save_event(self, event: ev.Event) -> None:
        """Insert `event`, or replace the stored event with the same key (aggregation)."""
        row = (
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
        )
        with self._guard("write"), self._conn:
            self._conn.execute(f"INSERT OR REPLACE INTO events VALUES ({', '.join('?' * 13)})", row)

    def load_events(self) -> list[ev.Event]:
        """All stored events, oldest `last_timestamp` first."""
        with self._guard("read"):
            rows = self._conn.execute(
                "SELECT * FROM events ORDER BY last_timestamp, rowid"
            ).fetchall()
        return [_event(row) for row in rows]

    def prune_events(self, max_events: int) -> None:
        """Keep only the `max_events` events with the newest `last_timestamp`."""
        with self._guard("write"), self._conn:
            self._conn.execute(
                "DELETE FROM events WHERE key NOT IN "
                "(SELECT key FROM events ORDER BY last_timestamp DESC, rowid DESC LIMIT ?)",
                (max(max_events, 0),),
            )


# A row's first-ready times are written once: COALESCE keeps the remembered one.
_UPSERT_POD = """
INSERT INTO pods (uid, name, namespace, start_time, first_ready_to_start, first_ready, phase,
                  reason, message)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (uid) DO UPDATE SET
    name = excluded.name,
    namespace = excluded.namespace,
    start_time = excluded.start_time,
    phase = excluded.phase,
    reason = excluded.reason,
    message = excluded.message,
    first_ready_to_start = COALESCE(pods.first_ready_to_start, excluded.first_ready_to_start),
    first_ready = COALESCE(pods.first_ready, excluded.first_ready)
"""


def _initialise(conn: sqlite3.Connection) -> None:
    # WAL + NORMAL: commits do not fsync the database, only the log at checkpoints; losing the
    # last transaction on power loss is acceptable for transition times and events.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, 1, _SCHEMA_VERSION):
        raise sqlite3.DatabaseError(f"unknown schema version {version}")
    conn.executescript(_SCHEMA)
    if version == 1:  # the pods table predates phase, reason and message
        for column in ("phase TEXT NOT NULL DEFAULT 'Pending'",
                       "reason TEXT NOT NULL DEFAULT ''", "message TEXT NOT NULL DEFAULT ''"):
            conn.execute(f"ALTER TABLE pods ADD COLUMN {column}")
    conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
    conn.commit()


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
    )
