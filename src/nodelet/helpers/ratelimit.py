"""A token bucket, like client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`; and
`PerKey`, one small bucket per key (a client's address) that never waits.

The bucket holds at most `burst` tokens and refills at `qps` tokens per second; `acquire()`
takes one, waiting (never busy) until one is there. Waiters are served first come, first served,
so a steady stream of callers cannot starve an early one. `qps <= 0` means unlimited.

The clock is injectable (`clock`, monotonic seconds) so tests and benchmarks can reason about
rates; `acquire()` sleeps with `asyncio.sleep`. No exceptions of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._lock = asyncio.Lock()
        self.taken = 0
        self.waited = 0.0  # seconds spent waiting for tokens, summed over callers

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def try_acquire(self) -> bool:
        """Take a token if one is there now; never waits."""
        if self.qps <= 0:
            self.taken += 1
            return True
        self._refill()
        if self._tokens >= 1.0 and not self._lock.locked():
            self._tokens -= 1.0
            self.taken += 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a token, waiting until the bucket has one."""
        if self.qps <= 0:
            self.taken += 1
            return
        async with self._lock:  # FIFO: asyncio.Lock wakes waiters in order
            started = self._clock()
            self._refill()
            while self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.qps)
                self._refill()
            self._tokens -= 1.0
            self.taken += 1
            self.waited += self._clock() - started


class PerKey:
    """A bucket of `burst` tokens refilled at `qps` per key; `allow(key)` takes one if there
    is one, never waits. The `size` keys used last are remembered: a key forgotten (the least
    recently used goes first) starts again with a full bucket, so memory stays bounded however
    many keys come. `qps <= 0` means unlimited."""

    def __init__(self, qps: float, burst: int, *, size: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._size = max(1, size)
        self._clock = clock
        self._buckets: OrderedDict[object, tuple[float, float]] = OrderedDict()
        self.refused = 0

    def allow(self, key: object) -> bool:
        if self.qps <= 0:
            return True
        now = self._clock()
        tokens, stamp = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - stamp) * self.qps)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self._size:
            self._buckets.popitem(last=False)
        if not allowed:
            self.refused += 1
        return allowed

    def __len__(self) -> int:
        return len(self._buckets)
