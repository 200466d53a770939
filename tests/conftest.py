"""Shared fixtures, and the hygiene every async test is held to.

- Every async test fails if it leaves an asyncio task of its own running, or if the event loop
  reports a problem while it runs (a task destroyed while pending, an exception nobody
  retrieved); see `_hygiene`. Unclosed sockets, files and sessions fail any test through
  `filterwarnings = ["error"]` (a ResourceWarning raised in `__del__` reaches pytest as an
  unraisable exception, which is an error too). Waiting for state: `polling.eventually`.
- `runtime` (session): ONE embedded containerd in a fresh data dir under /tmp, ready, with the
  local images imported. Tests must remove what they create. Which containerd: the one
  `make runtime` built (2.x, the default), or with NODELET_TEST_RUNTIME=system the one on
  PATH (Debian's 1.6); the header of the run names it.
- `make_agent` / `agent` (function): real nodelet agents (tests/support/harness.py) on the session's
  containerd.
- `instances` (function): a factory for extra, private instances (`await instances(...)`), for
  tests that kill, adopt or reconfigure containerd; each is reset and checked at teardown.
- `registry` (session): a local image registry; `pulled` (function): image references removed
  from the session's containerd at teardown.
- `checkpoint` / `db`: a real SQLite checkpoint, or the path an agent would keep it at.

Every instance is torn down with `nodelet reset`, and the teardown fails the run when the
instance left a network namespace, veth, bridge, mount, data dir or runtime state dir behind.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import signal
import tempfile
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from nodelet import settings as settings_
from nodelet.adapters import checkpoint as cp
from nodelet.adapters import cni, containerd, mounts
from nodelet.adapters.cri import client as cri_client
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import runtime as runtime_model
from nodelet.services.nodehealth import resetting
from support.harness import Harness

# The real control plane and nodes joined to it (tests/support/clusterfixtures.py).
pytest_plugins = ["support.clusterfixtures"]

@dataclass
class Instance:
    """One running embedded containerd and a CRI client connected to it."""

    data_dir: Path
    settings: settings_.Settings
    containerd: containerd.EmbeddedContainerd
    client: cri_client.RuntimeClient
    # netns paths tests saw, to check after reset that none survived.
    netns_seen: set[str] = field(default_factory=set)


def runtime_bin_dir_for_tests() -> Path | None:
    """The runtime the tests run on (see the module docstring); None: containerd on PATH."""
    if os.environ.get("NODELET_TEST_RUNTIME", "built") == "system":
        return None
    built = settings_.built_runtime_dir()
    if built is None:
        pytest.exit("containerd 2.x is not built: run `make runtime` (or set "
                    "NODELET_TEST_RUNTIME=system for the containerd on PATH)", returncode=2)
    return built


def runtime_programs_for_tests() -> containerd.Programs:
    """The programs (and containerd version) of the runtime the tests run on."""
    return containerd.find_programs(
        replace(settings_.RuntimeSettings(), runtime_bin_dir=runtime_bin_dir_for_tests()))


def pytest_configure() -> None:
    """A run started in the background by a non-interactive shell (`make test &`, nohup)
    inherits SIGINT ignored, and so would every program the tests start: the tests that
    press Ctrl-C on a CLI (`nodelet logs -f`) need it delivered as on a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header() -> str:
    try:
        found = runtime_programs_for_tests()
    except containerd.ContainerdError as exc:
        return f"runtime: {exc}"
    return f"runtime: {found.describe()}, runc {found.runc}"


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("runtime tests need root (containerd, runc and CNI plugins); run as root")


async def start_instance(*, data_dir: Path | None = None,
                         **runtime_overrides: object) -> Instance:
    """Start a ready containerd with images in a fresh, short data dir (socket paths <108),
    or in `data_dir` (a new directory the caller made, e.g. on a small filesystem)."""
    _require_root()
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="nl-", dir="/tmp"))
    defaults: dict[str, object] = {
        # Explicit, so tests can read it back; derived from the data dir, so it is unique.
        "pod_cidrs": (cni.default_pod_cidr(data_dir),),
        "ready_timeout": 30.0,
        "restart_backoff": 0.2,
        "timeouts": settings_.CriTimeouts(default=30.0, run_sandbox=60.0, connect=5.0),
        "runtime_bin_dir": runtime_bin_dir_for_tests(),
        # CDI specs (of the DRA test driver) in the instance's own directory, not the host's.
        "cdi_spec_dirs": (data_dir / "cdi",),
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
    state = instance.containerd.paths.state  # outside the data dir (/run/nodelet/<hash>)
    return {
        "netns": netns,
        "veths": await cni.bridge_ports(instance.data_dir),
        "bridge": await cni.bridge_exists(instance.data_dir),
        "mounts": mounts.mounts_under(instance.data_dir) + mounts.mounts_under(state),
        "data_dir": instance.data_dir.exists(),
        "state_dir": state.exists(),
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


# -- local image registry (tests/support/registry.py) ------------------------------------------


@pytest.fixture(scope="session")
def registry() -> Any:
    """Debian's docker-registry on 127.0.0.1 (plain HTTP, no auth, storage in a temp dir).

    `.host` ("127.0.0.1:PORT"), `.push(repo, tag)` → a pullable reference to a fresh busybox
    variant, `async with .slow_proxy(delay_s) as proxy:` → `proxy.host` holds blob GETs.
    """
    from support import registry as registry_  # tests/support/registry.py

    with registry_.Registry.started() as running:
        yield running


# -- fixtures several test files share ----------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def pulled(runtime: Instance) -> AsyncIterator[list[str]]:
    """References to remove from containerd at the end. Request it before `agent`, so that
    it is torn down after the agent has removed its pods."""
    refs: list[str] = []
    yield refs
    for ref in refs:
        try:
            await runtime.client.remove_image(ref)
        except cri_errors.NotFound:
            pass


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Where an agent with data dir `tmp_path / "data"` keeps its checkpoint (not created)."""
    return tmp_path / "data" / cp.FILENAME


@pytest.fixture
def checkpoint(tmp_path: Path) -> Iterator[cp.Checkpoint]:
    """A real SQLite checkpoint in the test's temp dir, closed at teardown."""
    opened = cp.Checkpoint.open(tmp_path / cp.FILENAME)
    yield opened
    opened.close()


# -- hygiene: no leaked tasks, no problems reported by the event loop ---------------------------
#
# A task belongs to the test whose context created it: `_hygiene` sets `_OWNER` before the
# test's other function-scoped fixtures run (autouse fixtures come first in their scope), and
# pytest-asyncio runs those fixtures and the test in copies of that context, so the test's own
# tasks, its agents' tasks and everything they spawn carry it. Session- and module-scoped
# fixtures are set up before it, so a shared containerd or server, and the tasks its own
# background tasks spawn later, carry none and never count. Tasks cannot tell their context on
# Python 3.11 (`Task.get_context` is 3.12), so a task factory writes the owner down.

_OWNER: contextvars.ContextVar[object | None] = contextvars.ContextVar("test_owner", default=None)
_owners: weakref.WeakKeyDictionary[asyncio.Task[Any], object] = weakref.WeakKeyDictionary()
_loop_problems: list[dict[str, Any]] = []
# Loop turns a test's cancelled tasks get, after its fixtures are torn down, to finish.
_SETTLE_TURNS = 20
# Seconds leaked tasks get to end once cancelled, so they cannot disturb the next test.
_CANCEL_WITHIN = 10.0


def _owned_task(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
) -> asyncio.Task[Any]:
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
    context = kwargs.get("context")
    owner = context.get(_OWNER) if context is not None else _OWNER.get()
    if owner is not None:
        _owners[task] = owner
    return task


def _record_problem(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Loop exception handler: log as asyncio does, and keep it for `_hygiene` to fail the
    async test that runs (what comes between two async tests is only logged)."""
    _loop_problems.append(context)
    loop.default_exception_handler(context)


def _where(task: asyncio.Task[Any]) -> str:
    """The task's name and coroutine, and the innermost line of ours (else any) it waits at."""
    coro: Any = task.get_coro()
    name = getattr(coro, "__qualname__", repr(coro))
    lines: list[str] = []
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        lines.append(f"{coro.cr_frame.f_code.co_filename}:{coro.cr_frame.f_lineno}")
        coro = coro.cr_await
    here = os.getcwd() + os.sep
    ours = [line.removeprefix(here) for line in lines if line.startswith(here)]
    return f"{task.get_name()} ({name}, waiting at {(ours or lines or ['?'])[-1]})"


def _problem(context: dict[str, Any]) -> str:
    text = str(context.get("message", "?"))
    for key in ("exception", "task", "future", "handle"):
        if key in context:
            text += f"; {key}: {context[key]!r}"
    return text


async def _leaked_tasks(owner: object) -> list[asyncio.Task[Any]]:
    this = asyncio.current_task()

    def running() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if t is not this and _owners.get(t) is owner]

    for _ in range(_SETTLE_TURNS):
        if not running():
            return []
        await asyncio.sleep(0)
    return running()


async def _cancel(leaked: list[asyncio.Task[Any]]) -> None:
    for task in leaked:
        task.cancel()
    await asyncio.wait(leaked, timeout=_CANCEL_WITHIN)


@pytest_asyncio.fixture(autouse=True, loop_scope="session")
async def _hygiene(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Fail an async test that leaves a task of its own running after its fixtures are torn
    down, or while which the event loop reported a problem; leaked tasks are cancelled."""
    if not pytest_asyncio.is_async_test(request.node):
        yield
        return
    loop = asyncio.get_running_loop()
    if loop.get_task_factory() is not _owned_task:
        assert loop.get_task_factory() is None, "another task factory is installed"
        loop.set_task_factory(_owned_task)  # type: ignore[arg-type]
    loop.set_exception_handler(_record_problem)
    owner = object()
    _OWNER.set(owner)
    _loop_problems.clear()
    yield
    leaked = await _leaked_tasks(owner)
    described = [_where(t) for t in leaked]
    if leaked:
        await _cancel(leaked)
    gc.collect()  # so what the test dropped unclosed is reported now, to this test
    problems = [_problem(c) for c in _loop_problems]
    _loop_problems.clear()
    assert not described, f"tasks left running by the test: {described}"
    assert not problems, f"the event loop reported: {problems}"
