"""Fixtures for agent tests: a real nodelet agent on the session's containerd."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest_asyncio
from harness import Harness


@pytest_asyncio.fixture(loop_scope="session")
async def make_agent(runtime: Any) -> AsyncIterator[Callable[..., Awaitable[Harness]]]:
    """Start agents on the shared containerd; each is emptied and stopped at teardown."""
    started: list[Harness] = []

    async def factory(**kwargs: Any) -> Harness:
        kwargs.setdefault("endpoint", runtime.containerd.endpoint)
        harness = Harness(**kwargs)
        started.append(harness)
        await harness.start()
        return harness

    try:
        yield factory
    finally:
        for harness in started:
            try:
                await harness.stop()
            finally:
                harness.cleanup()


@pytest_asyncio.fixture(loop_scope="session")
async def agent(make_agent: Callable[..., Awaitable[Harness]]) -> Harness:
    return await make_agent()
