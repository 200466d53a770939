"""Back-off arithmetic: jittered retry periods and doubling back-offs with a cap (pure)."""

from __future__ import annotations

import random
from dataclasses import dataclass


def jittered(period: float, jitter: float, rng: random.Random | None = None) -> float:
    """`period` stretched by up to `jitter` (a fraction), like wait.Jitter: [p, p * (1 + j)]."""
    r = (rng or random).random()
    return period * (1.0 + jitter * r)


@dataclass
class Backoff:
    """A doubling back-off per key (container restarts, image pulls): 10 s → 20 s → … → cap.

    `next_delay` returns the delay to wait now and doubles it for the next time; `reset` starts
    over (after the thing ran long enough).
    """

    initial: float
    cap: float
    _current: float = 0.0

    def next_delay(self) -> float:
        self._current = self.initial if self._current == 0.0 else min(self._current * 2, self.cap)
        return self._current

    @property
    def current(self) -> float:
        return self._current

    def reset(self) -> None:
        self._current = 0.0
