"""Named, supervised asyncio tasks.

Every background loop in nodelet is started through `TaskGroup.spawn`: it has a name, a crash
is logged with that name (and the group's `on_crash` hook is told), and `close()` cancels and
awaits every task still running, so shutdown never leaves a task behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


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

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            logger.error("task %s crashed", task.get_name(), exc_info=exc)
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
