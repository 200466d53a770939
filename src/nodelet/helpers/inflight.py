"""One lookup in flight per key (Go's singleflight, which k8s.io/apiserver's cached token
authenticator uses): the first caller of `Shared.run(key, lookup)` runs `lookup()`; callers
with the same key that arrive before it finished wait for its answer, or its exception.

A waiter that is cancelled leaves without cancelling the lookup. When the first caller is
cancelled, the waiters get `abandoned()` (an exception of the caller's choosing) instead of
waiting for ever. No exceptions of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

_V = TypeVar("_V")


class Shared(Generic[_V]):
    def __init__(self, abandoned: Callable[[], Exception]) -> None:
        self._abandoned = abandoned
        self._pending: dict[object, asyncio.Future[_V]] = {}
        self.merged = 0  # callers that waited for another's lookup

    def __len__(self) -> int:
        return len(self._pending)

    async def run(self, key: object, lookup: Callable[[], Awaitable[_V]]) -> _V:
        pending = self._pending.get(key)
        if pending is not None:
            self.merged += 1
            return await asyncio.shield(pending)
        future: asyncio.Future[_V] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self._pending[key] = future
        try:
            value = await lookup()
        except Exception as exc:
            future.set_exception(exc)
            raise
        except BaseException:
            future.set_exception(self._abandoned())
            raise
        finally:
            del self._pending[key]
        future.set_result(value)
        return value


def _retrieved(future: asyncio.Future[Any]) -> None:
    """An exception nobody waited for counts as seen (no 'never retrieved' warning)."""
    if not future.cancelled():
        future.exception()
