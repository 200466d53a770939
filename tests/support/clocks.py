"""A wall clock a test moves by hand: `clock()` is its aware UTC now, `clock.advance(s)` moves
it on, for the code that takes a clock (the status manager, the recorder, the token manager)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self.now = start if start is not None else datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class MonotonicClock:
    """Monotonic seconds a test moves by hand: `clock()` reads them, `clock.now += s` moves
    them on (the rate limits, caches and adaptive limits that take a monotonic clock)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now
