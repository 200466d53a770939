"""The wall clock every job reads: aware UTC datetimes (status and event times, deadlines).

Passed to each job as its `clock` by the wiring, so tests can give one a clock of their own.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)
