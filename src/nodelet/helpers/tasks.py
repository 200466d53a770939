"""Named, supervised asyncio tasks.

Every background loop in nodelet is started through `TaskGroup.spawn`: it has a name, a crash
is logged with that name (and the group's `on_crash` hook is told), and `close()` cancels and
awaits every task still running, so shutdown never leaves a task behind. A loop that must never
die is started with `TaskGroup.supervise`: it is started again after a back-off whenever it
crashes, and its `Supervised` state tells health checks that it is down meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from nodelet.helpers import backoff as backoff_mod

log = logging.getLogger(__name__)

T = TypeVar("T")


class Supervised:
    """A supervised loop, for health checks: `error` says why it is down (None: running);
    `restarts` counts how often it was started again."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.error: str | None = None
        self.restarts = 0

    @property
    def up(self) -> bool:
        return self.error is None


class TaskGroup:
    def __init__(self, *, on_crash: Callable[[str, BaseException], None] | None = None) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_crash = on_crash

    def spawn(
        self, name: str, coro: Coroutine[Any, Any, T], *, awaited: bool = False
    ) -> asyncio.Task[T]:
        """Start `coro` as a named task. `awaited=True`: its owner awaits it and handles its
        exception, so the group does not report it as a crash."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._forget if awaited else self._finished)
        return task

    def supervise(
        self, name: str, start: Callable[[], Coroutine[Any, Any, None]], *,
        backoff: backoff_mod.Backoff,
    ) -> Supervised:
        """Run `start()` as the task `name` and run it again, after `backoff`, whenever it
        crashes or returns: the loop it runs must never stop while the group is open. The
        back-off starts over once a run lasted longer than its cap."""
        state = Supervised(name)
        self.spawn(name, self._supervise(state, start, backoff))
        return state

    async def _supervise(
        self, state: Supervised, start: Callable[[], Coroutine[Any, Any, None]],
        backoff: backoff_mod.Backoff,
    ) -> None:
        while True:
            began = time.monotonic()
            try:
                await start()
                why, exc_info = "stopped", None
            except Exception as exc:  # anything but cancellation: start it again
                why, exc_info = f"crashed ({type(exc).__name__}: {exc})", exc
            if time.monotonic() - began > backoff.cap:
                backoff.reset()
            delay = backoff.next_delay()
            state.error = f"{why}; restarting in {delay:.1f}s"
            state.restarts += 1
            log.error("task %s %s", state.name, state.error, exc_info=exc_info)
            await asyncio.sleep(delay)
            state.error = None

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("task %s crashed", task.get_name(), exc_info=exc)
            if self._on_crash is not None:
                self._on_crash(task.get_name(), exc)

    @property
    def names(self) -> list[str]:
        return sorted(t.get_name() for t in self._tasks)

    async def close(self, grace: float = 10.0) -> None:
        """Cancel every task and wait (at most `grace` seconds) for them to finish."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)


async def wait_event(event: asyncio.Event, within: float | None) -> bool:
    """Wait until `event` is set (True) or `within` seconds passed (False; None: no limit).

    asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that
    arrives as the event is set, and the loop that called it would then run on after its task
    group was closed."""
    try:
        async with asyncio.timeout(within):
            await event.wait()
    except TimeoutError:
        return False
    return True
