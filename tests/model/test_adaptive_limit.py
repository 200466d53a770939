"""helpers/adaptivelimit: the limit grows while holds stay fast and the limit binds, shrinks when
they slow down, stays within its bounds, and serves waiters first come, first served."""

from __future__ import annotations

import asyncio

import pytest

from nodelet.helpers.adaptivelimit import AdaptiveLimit, LimitSettings
from support.clocks import MonotonicClock

SETTINGS = LimitSettings(initial=4, minimum=2, maximum=6, tolerance=2.0)


@pytest.mark.parametrize(("holds", "limit"), [
    # (seconds, bound) in order -> the limit after them
    ([(1.0, True)], 5),                       # fast (it is the floor) and bound: grows
    ([(1.0, False)], 4),                      # fast but not bound: stays
    ([(1.0, True), (1.9, True)], 6),          # within tolerance of the floor: grows
    ([(1.0, True), (2.5, True)], 4),          # congested: shrinks
    ([(1.0, True), (2.5, False)], 4),         # congested whether bound or not
    ([(1.0, True)] * 5, 6),                   # never above the maximum
    ([(1.0, True)] + [(3.0, True)] * 5, 2),   # never below the minimum
    ([(3.0, True), (1.0, True), (2.5, True)], 5),  # the floor is the shortest hold seen
])
def test_the_limit_follows_the_holds(holds: list[tuple[float, bool]], limit: int) -> None:
    limiter = AdaptiveLimit(SETTINGS, clock=MonotonicClock(100.0))
    for seconds, bound in holds:
        limiter.observe(seconds, bound)
    assert limiter.limit == limit


def test_the_floor_drifts_up_with_time_so_a_slower_machine_is_learnt_again() -> None:
    clock = MonotonicClock(100.0)
    limiter = AdaptiveLimit(SETTINGS, clock=clock)
    limiter.observe(1.0, True)
    assert limiter.floor == 1.0
    clock.now += 60  # a minute: a tenth higher
    assert limiter.floor == pytest.approx(1.1)
    clock.now += 600  # ten more: 2.1; a hold of 2.5 s is no longer congestion
    limiter.observe(2.5, True)
    assert limiter.limit == 6


def test_the_initial_limit_is_kept_within_the_bounds() -> None:
    assert AdaptiveLimit(LimitSettings(initial=10, minimum=2, maximum=6)).limit == 6
    assert AdaptiveLimit(LimitSettings(initial=0, minimum=2, maximum=6)).limit == 2


async def test_holders_wait_their_turn_and_failures_move_nothing() -> None:
    clock = MonotonicClock(100.0)
    limiter = AdaptiveLimit(LimitSettings(initial=2, minimum=2, maximum=2), clock=clock)
    order: list[str] = []
    release = asyncio.Event()

    async def holder(name: str, fail: bool = False) -> None:
        async with limiter.hold():
            order.append(name)
            await release.wait()
            if fail:
                raise RuntimeError(name)

    tasks = [asyncio.create_task(holder("a", fail=True)), asyncio.create_task(holder("b")),
             asyncio.create_task(holder("c")), asyncio.create_task(holder("d"))]
    await asyncio.sleep(0)
    assert order == ["a", "b"] and limiter.busy == 2
    tasks[2].cancel()  # a waiter that leaves gives up its turn
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert order == ["a", "b", "d"]
    assert isinstance(results[0], RuntimeError) and isinstance(results[2],
                                                                asyncio.CancelledError)
    assert limiter.busy == 0 and not limiter._waiters


async def test_a_limit_that_grows_lets_two_waiters_in_when_one_holder_leaves() -> None:
    limiter = AdaptiveLimit(LimitSettings(initial=1, minimum=1, maximum=4),
                            clock=MonotonicClock(100.0))
    releases = [asyncio.Event() for _ in range(3)]
    entered: list[int] = []

    async def holder(i: int) -> None:
        async with limiter.hold():
            entered.append(i)
            await releases[i].wait()

    tasks = [asyncio.create_task(holder(i)) for i in range(3)]
    await asyncio.sleep(0)
    assert entered == [0]
    releases[0].set()  # a fast hold that the limit bound: the limit grows to 2
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert entered == [0, 1, 2] and limiter.limit == 2 and limiter.busy == 2
    for release in releases:
        release.set()
    await asyncio.gather(*tasks)
