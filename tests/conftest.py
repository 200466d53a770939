"""Shared fixtures: real embedded containerd instances for tests marked `runtime`.

- `runtime` (session): ONE embedded containerd in a fresh data dir under /tmp, ready, with the
  local images imported. Tests must remove what they create.
- `make_agent` / `agent` (function): real nodelet agents (tests/harness.py) on the session's
  containerd.
- `instances` (function): a factory for extra, private instances (`await instances(...)`), for
  tests that kill, adopt or reconfigure containerd; each is reset and checked at teardown.

Every instance is torn down with `nodelet reset`, and the teardown fails the run when the
instance left a network namespace, veth, bridge, mount or data dir behind.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from harness import Harness
from nodelet import settings as settings_
from nodelet.adapters import cni, containerd, mounts
from nodelet.adapters.cri import client as cri_client
from nodelet.model import runtime as runtime_model
from nodelet.services import resetting

T = TypeVar("T")


@dataclass
class Instance:
    """One running embedded containerd and a CRI client connected to it."""

    data_dir: Path
    settings: settings_.Settings
    containerd: containerd.EmbeddedContainerd
    client: cri_client.RuntimeClient
    # netns paths tests saw, to check after reset that none survived.
    netns_seen: set[str] = field(default_factory=set)


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("runtime tests need root (containerd, runc and CNI plugins); run as root")


async def start_instance(**runtime_overrides: object) -> Instance:
    """Start a ready containerd with images in a fresh, short data dir (socket paths <108)."""
    _require_root()
    data_dir = Path(tempfile.mkdtemp(prefix="nl-", dir="/tmp"))
    defaults: dict[str, object] = {
        # Explicit, so tests can read it back; derived from the data dir, so it is unique.
        "pod_cidrs": (cni.default_pod_cidr(data_dir),),
        "ready_timeout": 30.0,
        "restart_backoff": 0.2,
        "timeouts": settings_.CriTimeouts(default=30.0, run_sandbox=60.0, connect=5.0),
    }
    runtime = replace(settings_.RuntimeSettings(), **(defaults | runtime_overrides))  # type: ignore[arg-type]
    settings = settings_.Settings(data_dir=data_dir, runtime=runtime)
    runner = containerd.EmbeddedContainerd(data_dir=data_dir, settings=runtime)
    try:
        await runner.start()
        client = await cri_client.RuntimeClient.connect(runner.endpoint, timeouts=runtime.timeouts)
        await runner.wait_ready(client)
    except BaseException:
        await runner.detach()
        await resetting.reset(settings)
        raise
    return Instance(data_dir, settings, runner, client)


def _existing(paths: set[str]) -> list[str]:
    return [p for p in paths if os.path.exists(p)]


async def leftovers(instance: Instance) -> dict[str, object]:
    """What of the instance still exists on the host (all empty/False when clean)."""
    netns = _existing(instance.netns_seen)
    netns += await cni.instance_netns(instance.data_dir)
    return {
        "netns": netns,
        "veths": await cni.bridge_ports(instance.data_dir),
        "bridge": await cni.bridge_exists(instance.data_dir),
        "mounts": mounts.mounts_under(instance.data_dir),
        "data_dir": instance.data_dir.exists(),
    }


async def stop_instance(instance: Instance) -> resetting.ResetReport:
    """Reset the instance and assert it left nothing behind."""
    await instance.client.close()
    await instance.containerd.detach()
    report = await resetting.reset(instance.settings)
    left = await leftovers(instance)
    assert not any(left.values()), f"instance {instance.data_dir} leaked: {left}"
    assert not report.errors, report.errors
    return report


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def runtime() -> AsyncIterator[Instance]:
    instance = await start_instance()
    try:
        yield instance
    finally:
        await stop_instance(instance)


InstanceFactory = Callable[..., Awaitable[Instance]]
AgentFactory = Callable[..., Awaitable[Harness]]


@pytest_asyncio.fixture(loop_scope="session")
async def instances() -> AsyncIterator[InstanceFactory]:
    started: list[Instance] = []

    async def factory(**runtime_overrides: object) -> Instance:
        instance = await start_instance(**runtime_overrides)
        started.append(instance)
        return instance

    try:
        yield factory
    finally:
        for instance in started:
            await stop_instance(instance)


def sandbox_config(
    instance: Instance, name: str, **overrides: object
) -> runtime_model.SandboxConfig:
    """A pod sandbox config whose logs go under the instance's data dir."""
    uid = f"uid-{name}"
    config = runtime_model.SandboxConfig(
        name=name,
        namespace="default",
        uid=uid,
        attempt=0,
        hostname=name,
        log_directory=str(instance.data_dir / "pods" / f"default_{name}_{uid}"),
        labels={runtime_model.LABEL_POD_UID: uid, runtime_model.LABEL_POD_NAME: name},
    )
    return replace(config, **overrides)  # type: ignore[arg-type]


async def eventually(check: Callable[[], Awaitable[T]], *, within: float, what: str) -> T:
    """Poll `check` until it returns a truthy value; fail with the last value after `within` s."""
    deadline = time.monotonic() + within
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = await check()
        except Exception as e:  # the runtime may be down while we poll (restart tests)
            last = e
        else:
            if last:
                return last  # type: ignore[return-value]
        await asyncio.sleep(0.05)
    pytest.fail(f"{what} not seen within {within}s; last: {last!r}")


# -- agents (tests/agent) -----------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def make_agent(runtime: Instance) -> AsyncIterator[AgentFactory]:
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
async def agent(make_agent: AgentFactory) -> Harness:
    return await make_agent()


# -- local image registry (tests/registry.py) ---------------------------------------------------


@pytest.fixture(scope="session")
def registry() -> Any:
    """Debian's docker-registry on 127.0.0.1 (plain HTTP, no auth, storage in a temp dir).

    `.host` ("127.0.0.1:PORT"), `.push(repo, tag)` → a pullable reference to a fresh busybox
    variant, `async with .slow_proxy(delay_s) as proxy:` → `proxy.host` holds blob GETs.
    """
    import registry as registry_  # tests/registry.py

    with registry_.Registry.started() as running:
        yield running
