"""`tasks.wait_event`: set, timed out, and cancelled even as the event is set (the case
Python 3.11's asyncio.wait_for gets wrong)."""

from __future__ import annotations

import asyncio

import pytest

from nodelet.helpers import tasks


async def test_set_and_timed_out() -> None:
    event = asyncio.Event()
    assert await tasks.wait_event(event, 0.01) is False
    event.set()
    assert await tasks.wait_event(event, 0.01) is True
    assert await tasks.wait_event(event, None) is True


async def test_a_cancellation_is_never_swallowed() -> None:
    for _ in range(200):
        event = asyncio.Event()
        waiter = asyncio.create_task(tasks.wait_event(event, 10.0))
        await asyncio.sleep(0)  # the waiter is inside event.wait()
        event.set()
        waiter.cancel()  # in the same loop iteration as the wake-up
        with pytest.raises(asyncio.CancelledError):
            await waiter
