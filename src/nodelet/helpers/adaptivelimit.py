"""At most `limit` holders at once, with the limit moved by how long each hold took: the
runtime, not a constant, sets how many pod sandboxes are made at once.

A congested runtime answers slower. `AdaptiveLimit` keeps `floor`, the shortest hold seen;
it drifts up by `FLOOR_DRIFT` of itself per minute since it was seen (so a machine that got
slower is learnt again within minutes, while a burst of a minute moves it by a tenth at most).
After each hold that ended normally:
- if it took at most `tolerance` times the floor and the limit was what held its holder back
  (as many holders as the limit when it entered), the limit grows by one, up to `maximum`;
- if it took more than `tolerance` times the floor, the limit shrinks by one, down to `minimum`;
- otherwise it stays.
So the limit settles where one more holder would start to slow each of them down: where the
runtime is busy but not yet congested, as TCP Vegas settles on a path's queue. A hold that
raised an exception says nothing about congestion and moves nothing.

Waiters are served first come, first served. The clock is injectable (`clock`, monotonic
seconds) for table tests. No exceptions of its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

FLOOR_DRIFT = 0.1  # per minute


@dataclass(frozen=True)
class LimitSettings:
    """Where the limit starts and the bounds it moves in (the sandboxes' are SyncSettings');
    `tolerance`: how much slower than the fastest hold seen a hold may be before the runtime
    counts as congested."""

    initial: int
    minimum: int
    maximum: int
    tolerance: float = 2.0


class AdaptiveLimit:
    def __init__(self, settings: LimitSettings, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._clock = clock
        self.limit = max(settings.minimum, min(settings.initial, settings.maximum))
        self._floor: float | None = None  # the shortest hold seen, and when
        self._floor_at = 0.0
        self.busy = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.highest = self.limit  # the highest limit reached, for metrics and benchmarks

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """One holder: waits for a place, then measures how long it was held."""
        await self._enter()
        bound = self.busy >= self.limit  # the limit held this holder back, or would have
        started = self._clock()
        try:
            yield
        except BaseException:
            self._leave(None, bound)
            raise
        self._leave(self._clock() - started, bound)

    async def _enter(self) -> None:
        if self.busy < self.limit and not self._waiters:
            self.busy += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # _wake counted this holder in busy before it set the result
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.busy -= 1  # woken and cancelled at once: give the place back
                self._wake()
            else:  # still queued, or already passed over by _wake as done
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def _leave(self, seconds: float | None, bound: bool) -> None:
        self.busy -= 1
        if seconds is not None:
            self.observe(seconds, bound)
        self._wake()

    @property
    def floor(self) -> float | None:
        """The shortest hold seen, drifted up by the minutes since."""
        if self._floor is None:
            return None
        return self._floor * (1 + FLOOR_DRIFT * (self._clock() - self._floor_at) / 60)

    def observe(self, seconds: float, bound: bool) -> None:
        """One hold of `seconds`; `bound`: as many holders as the limit when it entered."""
        s = self._settings
        floor = self.floor
        if floor is None or seconds <= floor:
            floor = seconds
            self._floor, self._floor_at = seconds, self._clock()
        if seconds > s.tolerance * floor:
            self.limit = max(s.minimum, self.limit - 1)
        elif bound:
            self.limit = min(s.maximum, self.limit + 1)
            self.highest = max(self.highest, self.limit)

    def _wake(self) -> None:
        while self._waiters and self.busy < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.busy += 1
                waiter.set_result(None)
