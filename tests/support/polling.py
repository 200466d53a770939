"""The one way tests wait for state: poll with a deadline, and say what was last seen.

    pod = await eventually(lambda: agent.find("web"), within=30, what="web admitted")
    status = await eventually(client.status, until=lambda s: s.runtime_ready, within=20,
                              what="CRI ready", ignoring=(cri_errors.CriError,))

`check` may be a plain function or a coroutine function. No test sleeps to wait for state.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

import pytest

T = TypeVar("T")

#: How often `check` runs unless a call site says otherwise, in seconds.
EVERY = 0.05


@overload
async def eventually(
    check: Callable[[], Awaitable[T]], *, within: float, what: str,
    until: Callable[[T], object] = ..., every: float = ...,
    ignoring: tuple[type[Exception], ...] = ..., seen: Callable[[T], str] = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T], *, within: float, what: str,
    until: Callable[[T], object] = ..., every: float = ...,
    ignoring: tuple[type[Exception], ...] = ..., seen: Callable[[T], str] = ...,
) -> T: ...


async def eventually(
    check: Callable[[], Any], *, within: float, what: str,
    until: Callable[[Any], object] = bool, every: float = EVERY,
    ignoring: tuple[type[Exception], ...] = (), seen: Callable[[Any], str] = repr,
) -> Any:
    """Run `check()` every `every` s until `until(value)` holds (by default: the value is
    truthy), and return that value. `check` runs at least once, and again until a run ends
    after the deadline, so a state reached just before the deadline is still seen.

    After `within` s the test fails with `what` and the last value, shown by `seen` (repr by
    default). Exceptions of the `ignoring` types count as "not yet" (a runtime restarting, a
    server still starting) and are shown as the last value; any other exception propagates.
    """
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        error: Exception | None = None
        try:
            last = check()
            if inspect.isawaitable(last):
                last = await last
        except ignoring as e:
            error = e
        else:
            if until(last):
                return last
        if time.monotonic() >= deadline:
            shown = repr(error) if error is not None else seen(last)
            pytest.fail(f"{what} not seen within {within}s; last: {shown}")
        await asyncio.sleep(every)
