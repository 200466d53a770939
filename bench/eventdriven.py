"""Event-driven against polling, in one run: what an idle node costs, how fast an exit is seen.

Run as root from the checkout:
    .venv/bin/python bench/eventdriven.py [--pods 100] [--idle 120] [--kills 50]
        [--runtimes built,system]

1. For each runtime of `--runtimes` in turn (containerd 2.x of `make runtime`, the one on
   PATH), ONE embedded containerd in a fresh data dir under /tmp (`common.start_runtime`).
2. For each mode, a fresh in-process `Agent` on that containerd, running `--pods` busybox pods
   (`sleep`, restartPolicy Always) from a manifest dir:
   - **polling**: no runtime event subscription, the relist every 1 s, the manifest directory
     polled every 0.2 s (nodelet before issue 13);
   - **events**: the defaults (containerd's event stream, inotify on the manifest directory,
     the relist only as a slow safety net).
   Once every pod runs (and 5 s of settling):
   - **idle cost**: CPU seconds of this process (the agent; the benchmark itself sleeps) and
     of containerd (`/proc/<pid>/stat`: utime + stime) over `--idle` seconds;
   - **reaction**: `--kills` pods, one at a time, get their container's process SIGKILLed
     from outside, as a crash ends it (the process is found by the container's ID in its
     cgroup). Measured from the kill: **seen**, the agent
     waking the pod's worker (its runtime event refreshed, or the relist found it), and
     **restart**, the agent's StartContainer call for the new instance (restartPolicy
     Always; the first restart has no back-off).
3. Prints both modes and the ratios events / polling per runtime, then the event-driven mode
   on the runtimes side by side (with where its events came from: CRI's GetContainerEvents on
   2.x, containerd's own on 1.6); removes every pod, resets containerd and fails if anything
   leaked.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common
from nodelet import app
from nodelet import settings as settings_
from nodelet.adapters.cri import client as cri
from nodelet.model.core import runtime as rt

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sleep", "1000000"]
"""
PREFIX = "ev"


def mode_settings(base: settings_.Settings, mode: str) -> settings_.Settings:
    """The agent's settings for `mode` (see the module docstring)."""
    if mode == "events":
        return base
    return dataclasses.replace(
        base,
        sync=dataclasses.replace(base.sync, relist_period=1.0, runtime_events=False),
        manifest_poll_period=0.2,
        manifest_watch=False,
    )


@dataclass(frozen=True)
class ModeResult:
    mode: str
    idle_seconds: float
    agent_cpu: float
    containerd_cpu: float
    reactions: tuple[float, ...]
    source: str = "-"  # where the agent's runtime events came from: "cri", "containerd", "-"
    # From StopContainer's call (the kill) to the agent waking the pod's worker.
    seen: tuple[float, ...] = ()


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def traced_wakes(log: dict[str, list[float]]) -> Iterator[None]:
    """Record when the agent learns that a pod's runtime state changed (its worker is woken:
    a runtime event's refresh, or the relist), by pod UID (monotonic seconds)."""
    original = app.Agent._runtime_changed

    def changed(self: Any, uid: Any) -> None:
        log.setdefault(str(uid), []).append(time.monotonic())
        original(self, uid)

    app.Agent._runtime_changed = changed  # type: ignore[method-assign]
    try:
        yield
    finally:
        app.Agent._runtime_changed = original  # type: ignore[method-assign]


@contextmanager
def traced_starts(log: dict[str, float]) -> Iterator[None]:
    """Record when the agent calls StartContainer, by container ID (monotonic seconds)."""
    original = cri.RuntimeClient.start_container

    async def start(self: Any, container_id: rt.ContainerID) -> None:
        log[container_id] = time.monotonic()
        await original(self, container_id)

    cri.RuntimeClient.start_container = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        cri.RuntimeClient.start_container = original  # type: ignore[method-assign]


async def poll(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise common.BenchError(f"{what} not reached within {within:g}s")
        await asyncio.sleep(0.05)


async def running_containers(client: cri.RuntimeClient) -> dict[str, rt.ContainerInfo]:
    """The benchmark's pods' running containers, by pod name."""
    found = {}
    for container in await client.list_containers():
        name = container.labels.get(rt.LABEL_POD_NAME, "")
        if name.startswith(PREFIX) and container.state is rt.ContainerState.RUNNING:
            found[name] = container
    return found


async def run_mode(runtime: common.Runtime, args: argparse.Namespace, mode: str,
                   work: Path) -> ModeResult:
    top = work / mode
    manifests = top / "manifests"
    manifests.mkdir(parents=True)
    base = settings_.Settings(
        data_dir=top / "agent", manifests_dir=manifests,
        runtime=dataclasses.replace(runtime.settings.runtime, endpoint=runtime.runner.endpoint),
        server=settings_.ServerSettings(port=0),
        # Any free port: several benches (or a running nodelet) never collide on 10250.
        node_server=settings_.NodeServerSettings(address="127.0.0.1", port=0))
    starts: dict[str, float] = {}
    wakes: dict[str, list[float]] = {}
    with traced_starts(starts), traced_wakes(wakes):
        agent = app.Agent(mode_settings(base, mode))
        await agent.start()
        try:
            for i in range(args.pods):
                (manifests / f"{PREFIX}{i:03d}.yaml").write_text(
                    MANIFEST.format(name=f"{PREFIX}{i:03d}"))
            await poll(lambda: _all_running(runtime, args.pods), 300, f"{args.pods} pods running")
            await asyncio.sleep(5.0)  # settle: the last statuses, events and writes
            agent_cpu, containerd_cpu = cpu_self(), common_cpu(runtime)
            await asyncio.sleep(args.idle)
            agent_cpu, containerd_cpu = cpu_self() - agent_cpu, common_cpu(runtime) - containerd_cpu
            reactions, seen = await measure_reactions(runtime, args.kills, starts, wakes)
            source = agent.runtime_events.source_name if agent.runtime_events else "-"
        finally:
            for path in manifests.iterdir():
                path.unlink()
            await poll(lambda: _none_left(runtime), 300, "every pod removed")
            await agent.stop()
    return ModeResult(mode, args.idle, agent_cpu, containerd_cpu, tuple(reactions), source,
                      tuple(seen))


def common_cpu(runtime: common.Runtime) -> float:
    pid = runtime.runner.pid
    return common.cpu_seconds(pid) if pid is not None else float("nan")


async def _all_running(runtime: common.Runtime, pods: int) -> bool:
    return len(await running_containers(runtime.client)) >= pods


async def _none_left(runtime: common.Runtime) -> bool:
    return not any(s.labels.get(rt.LABEL_POD_NAME, "").startswith(PREFIX)
                   for s in await runtime.client.list_pod_sandboxes())


def kill_container_process(container_id: str) -> None:
    """SIGKILL the main process of the container `container_id`: the `sleep` in its cgroup
    (each of a container's cgroup paths ends in its ID)."""
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or container_id not in (proc / "cgroup").read_text():
                continue
            if (proc / "cmdline").read_bytes().startswith(b"sleep\0"):
                os.kill(int(proc.name), signal.SIGKILL)
                return
        except OSError:
            continue
    raise common.BenchError(f"no sleep process in the cgroup of container {container_id}")


async def measure_reactions(runtime: common.Runtime, kills: int, starts: dict[str, float],
                            wakes: dict[str, list[float]]) -> tuple[list[float], list[float]]:
    """SIGKILL `kills` pods' container processes one at a time, as a crash would end them:
    seconds from the kill to the agent's StartContainer of the new instance, and from the
    kill to the agent seeing it (the pod's worker woken)."""
    victims = sorted((await running_containers(runtime.client)).items())[:kills]
    reactions, seen = [], []
    for name, container in victims:
        before = set(starts)
        uid = container.labels.get(rt.LABEL_POD_UID, "")
        killed = time.monotonic()
        kill_container_process(container.id)

        async def restarted(pod: str = name, old: rt.ContainerID = container.id) -> bool:
            now = await running_containers(runtime.client)
            return pod in now and now[pod].id != old

        await poll(restarted, 60, f"{name} restarted")
        new = [starts[c] for c in set(starts) - before]
        if not new:
            raise common.BenchError(f"{name}: no StartContainer call seen")
        reactions.append(min(new) - killed)
        woken = [t for t in wakes.get(uid, []) if t >= killed]
        if not woken:
            raise common.BenchError(f"{name}: the agent was never woken for its pod")
        seen.append(min(woken) - killed)
    return reactions, seen


def print_report(results: Sequence[ModeResult], args: argparse.Namespace) -> None:
    print(f"\nevent-driven benchmark: {args.pods} pods, {args.idle:g} s idle, "
          f"{args.kills} kills, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'mode':10} {'events':>10} {'agent CPU-s':>12} {'containerd CPU-s':>17} "
          f"{'together':>9} {'restart p50':>13} {'p99':>9} {'max':>9} {'seen p50':>15} "
          f"{'p99':>9}")
    for r in results:
        print(f"{r.mode:10} {r.source:>10} {r.agent_cpu:12.2f} {r.containerd_cpu:17.2f} "
              f"{r.agent_cpu + r.containerd_cpu:9.2f} "
              f"{common.percentile(r.reactions, 50) * 1000:10.1f} ms "
              f"{common.percentile(r.reactions, 99) * 1000:6.1f} ms "
              f"{max(r.reactions, default=float('nan')) * 1000:6.1f} ms "
              f"{common.percentile(r.seen, 50) * 1000:12.1f} ms "
              f"{common.percentile(r.seen, 99) * 1000:6.1f} ms")
    by_mode = {r.mode: r for r in results}
    if {"polling", "events"} <= set(by_mode):
        p, e = by_mode["polling"], by_mode["events"]
        ratio = (e.agent_cpu + e.containerd_cpu) / (p.agent_cpu + p.containerd_cpu)
        print(f"idle CPU, events / polling (agent + containerd): {ratio:.2f}  (aim <= 0.20)")
        print(f"seen p99, events / polling: "
              f"{common.percentile(e.seen, 99) / common.percentile(p.seen, 99):.2f}; "
              f"events: {common.percentile(e.seen, 99) * 1000:.1f} ms (aim: p99 <= 100 ms)")


async def bench(args: argparse.Namespace) -> None:
    measured: list[tuple[str, Sequence[ModeResult]]] = []
    for label, bin_dir in common.runtimes(args):
        runtime = await common.start_runtime(prefix="nlb-", bin_dir=bin_dir)
        work = Path(tempfile.mkdtemp(prefix="nlb-ev-", dir="/tmp"))
        results = []
        try:
            for mode in args.modes.split(","):
                results.append(await run_mode(runtime, args, mode, work))
                print(f"{runtime.version} ({label}), {mode}: done", flush=True)
        finally:
            await common.teardown_runtime(runtime, [work])
        measured.append((f"{runtime.version} ({label})", results))
    for name, found in measured:
        print(f"\n== {name}")
        print_report(found, args)
    if len(measured) > 1:
        print_comparison(measured)


def print_comparison(measured: Sequence[tuple[str, Sequence[ModeResult]]]) -> None:
    """The event-driven mode on each runtime side by side, the first as the reference."""
    print("\nruntimes side by side (events mode; ratios against the first):")
    print(f"{'runtime':34} {'events from':>12} {'idle CPU-s':>11} {'restart p50':>13} "
          f"{'p99':>9} {'p99 ratio':>10} {'seen p99':>15}")
    first: ModeResult | None = None
    for name, results in measured:
        events = next((r for r in results if r.mode == "events"), None)
        if events is None:
            continue
        first = first or events
        p99 = common.percentile(events.reactions, 99)
        print(f"{name:34} {events.source:>12} {events.agent_cpu + events.containerd_cpu:11.2f} "
              f"{common.percentile(events.reactions, 50) * 1000:10.1f} ms {p99 * 1000:6.1f} ms "
              f"{p99 / common.percentile(first.reactions, 99):10.2f} "
              f"{common.percentile(events.seen, 99) * 1000:12.1f} ms")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--idle", type=float, default=120.0, help="idle seconds per mode")
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--modes", default="polling,events")
    common.add_runtimes_arg(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.kills <= args.pods <= 200:
        parser.error("need 1 <= --kills <= --pods <= 200 (the pod CIDR is a /24)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return common.run("bench/eventdriven.py", bench, args)


if __name__ == "__main__":
    sys.exit(main())
