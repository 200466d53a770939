"""Raw CRI, the real kubelet and nodelet on ONE containerd, in one run; nodelet / kubelet last.

Run as root from the checkout (after `make runtime` and `make kube`):
    .venv/bin/python bench/versus.py [--pods 30] [--rounds 3] [--idle 60] [--kills 10]
                                     [--load N]

With `--load N`, N processes spin on a CPU each for the whole run (started first, stopped by
PID at the end), so that every contender is measured on a loaded machine; the report's
header says so, beside the load average at start and end.

1. ONE embedded containerd (`common.start_runtime`: containerd 2.x of `make runtime`, a fresh
   data dir under /tmp, its own /24), warmed up by 2 CRI pods.
2. **Startup**, `--rounds` interleaved rounds, the contenders' order rotated each round:
   - **cri**: bench/startup.py's loop of CRI calls (RunPodSandbox -> CreateContainer ->
     StartContainer, busybox `sleep 3600`), 8 pods in flight, in this process;
   - **kubelet**: the built kubelet standalone (`kubeletpeer.KubeletPeer`: its defaults but
     for what these machines force, and its default log verbosity), a fresh process per round;
   - **nodelet**: `nodelet run` as a subprocess with its defaults (but its own data dir,
     ports and cgroup root), a fresh process per round, measured exactly as the kubelet is.
   Each agent first runs one warm-up pod to Running and has it removed (pods reach a node
   that has been running); then N manifests (bench/startup.py's, the baseline's container)
   are written at once into its manifest dir (dot-names renamed in place). The agents are
   read only through their read-only `/pods`, polled every 50 ms (a read every 50 ms from its
   start). Measured per round: time from the manifests written until every container is seen
   running (and N / that time, the throughput); per pod the sandbox-ready latency twice —
   **LTT**: PodReadyToStartContainers=True lastTransitionTime - PodScheduled
   lastTransitionTime, whole seconds as both agents serialise them (the DESIGN definition);
   **seen**: manifests written -> the first read showing the condition True (50 ms
   resolution); the agent process's CPU seconds over the phase (utime + stime, with its
   reaped children) and its peak RSS (VmHWM; a fresh process per round, so warm-up and phase).
   For cri, "seen" is when the call returned (RunPodSandbox, StartContainer: exact), the
   "agent" CPU is this process's, and there is no LTT and no RSS.
3. **Idle**: each contender in turn with 20 running pods (for cri: containerd alone, no agent),
   after 5 s of settling: the agent's and containerd's CPU % over `--idle` seconds.
4. **Kill -> replacement**, each agent in turn on those 20 pods: `--kills` pods, one at a time,
   get their container's `sleep` SIGKILLed (found by its container ID in its cgroup, as
   bench/eventdriven.py does); measured from the kill to the first `/pods` read showing the
   container's restartCount incremented and it running again.
5. Prints a table per metric (cri | kubelet | nodelet | nodelet/kubelet) and the ratios with
   the aims of issue 26 last; every phase ends with the runtime empty (checked), and at the
   end the instance is reset and the run fails if anything leaked.

Only one agent runs at a time: the kubelet kills every running pod of its runtime that it does
not know, so each phase removes all it made before the next starts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))

import common  # bench/common.py: the runtime, its leak check, main
import eventdriven  # bench/eventdriven.py: the SIGKILL of a container's process
import nodelet
import startup  # bench/startup.py: the CRI baseline, the manifests, the CPU meter
from nodelet import settings as settings_
from nodelet.adapters import cgroups, mounts
from nodelet.model.core import runtime as rt
from nodelet.services.nodehealth import resetting
from support import checkout, kubeletpeer  # tests/support: the checkout, the kubelet as a peer

REPO = Path(__file__).resolve().parent.parent
NODELET = Path(sys.executable).parent / "nodelet"
NODE = "versus"  # both agents' node name: static pods are `<name>-versus`
CONTENDERS = ("cri", "kubelet", "nodelet")
POLL = 0.05
CONCURRENCY = 8  # the CRI loop's pods in flight (bench/startup.py's --concurrency)
IDLE_PODS = 20
# After the idle pods run: the last status writes and events, the agents' first housekeeping.
IDLE_SETTLE = 5.0
# Generous deadlines: they only catch a hang (the kubelet's first start takes some seconds).
START_WITHIN = 120.0
PER_POD_WITHIN = 3.0
REMOVE_WITHIN = 120.0
KILL_WITHIN = 60.0
# The kubelet's own logging defaults (the peer logs JSON at verbosity 3 for the differential
# harness's events; a benchmark measures the agent as it runs by default, as nodelet runs).
KUBELET_LOGGING = {"logging": {"format": "text", "verbosity": 0}}
DEFAULT_MAX_PODS = 110  # both agents' default; more pods need --max-pods / maxPods
MAX_PODS = 500  # the pod network is a /24 up to 200 pods, a /22 beyond


# -- measuring a process ------------------------------------------------------------------------


def process_cpu(pid: int) -> float:
    """utime + stime of `pid` with its reaped children (cutime + cstime), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return sum(int(v) for v in fields[11:15]) / common.CLK_TCK


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM) in MiB; nan once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


@dataclass(frozen=True)
class Usage:
    """CPU seconds so far: the agent (nan without one), containerd, and the runtime side
    (containerd, shims and their reaped children: runc, CNI plugins)."""

    agent: float
    containerd: float
    runtime: float

    @classmethod
    def sample(cls, runtime: common.Runtime, pid: int | None) -> Usage:
        agent = process_cpu(pid) if pid is not None else math.nan
        side = startup.runtime_side_seconds(runtime.data_dir)
        if pid is not None:
            # The agent's command line names the runtime's socket, so it is counted there too.
            side -= agent
        ctr = common.cpu_seconds(runtime.runner.pid) if runtime.runner.pid else math.nan
        return cls(agent, ctr, side)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.agent - other.agent, self.containerd - other.containerd,
                     self.runtime - other.runtime)


# -- an agent read through its /pods ------------------------------------------------------------


@dataclass
class Agent:
    """A started agent: its process, manifest dir and read-only `/pods`."""

    kind: str
    pid: int
    manifests: Path
    url: str
    session: aiohttp.ClientSession
    tail: Callable[[], str]

    async def pods(self) -> dict[str, dict[str, Any]]:
        """Its pods by manifest name (the static pod's name without `-<node>`)."""
        async with self.session.get(self.url,
                                    timeout=aiohttp.ClientTimeout(total=10)) as response:
            items: list[dict[str, Any]] = (await response.json()).get("items") or []
        return {str(p.get("metadata", {}).get("name", "")).removesuffix(f"-{NODE}"): p
                for p in items}


AgentStarter = Callable[[common.Runtime, Path, aiohttp.ClientSession, int],
                        AbstractAsyncContextManager[Agent]]


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return statuses[0]  # type: ignore[no-any-return]


def running(pod: dict[str, Any]) -> bool:
    return "running" in (_container(pod).get("state") or {})


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond  # type: ignore[no-any-return]
    return {}


def ready_to_start(pod: dict[str, Any]) -> bool:
    return condition(pod, "PodReadyToStartContainers").get("status") == "True"


def sandbox_ready_ltt(pod: dict[str, Any]) -> float | None:
    """lastTransitionTime(PodReadyToStartContainers True) - lastTransitionTime(PodScheduled),
    in seconds (whole seconds, as both agents serialise them)."""
    ready, scheduled = condition(pod, "PodReadyToStartContainers"), condition(pod, "PodScheduled")
    if ready.get("status") != "True" or not ready.get("lastTransitionTime") \
            or not scheduled.get("lastTransitionTime"):
        return None
    return (datetime.fromisoformat(ready["lastTransitionTime"])
            - datetime.fromisoformat(scheduled["lastTransitionTime"])).total_seconds()


async def poll_until(check: Callable[[], Awaitable[bool]], within: float, what: str,
                     tail: Callable[[], str] = lambda: "") -> None:
    """Await `check()` every 50 ms until it is true; BenchError after `within` seconds."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise common.BenchError(f"{what} not reached within {within:g}s\n{tail()}")
        await asyncio.sleep(POLL)


@dataclass
class Seen:
    """Seconds after the manifests were written of the first read showing each pod's
    condition True, and its container running."""

    ready: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)

    def note(self, pods: dict[str, dict[str, Any]], names: Sequence[str], now: float) -> None:
        for name in names:
            pod = pods.get(name)
            if pod is None:
                continue
            if name not in self.ready and ready_to_start(pod):
                self.ready[name] = now
            if name not in self.running and running(pod):
                self.running[name] = now


async def follow(agent: Agent, names: Sequence[str], written: float) -> Seen:
    """Read `/pods` every 50 ms (from one read's start to the next) until every pod of
    `names` is seen running."""
    seen = Seen()
    within = START_WITHIN + PER_POD_WITHIN * len(names)
    while len(seen.running) < len(names):
        started = time.monotonic()
        if started - written > within:
            raise common.BenchError(
                f"{agent.kind}: {len(seen.running)} of {len(names)} pods running after "
                f"{within:g}s\n{agent.tail()}")
        pods = await agent.pods()
        seen.note(pods, names, time.monotonic() - written)
        await asyncio.sleep(max(0.0, started + POLL - time.monotonic()))
    return seen


def write_warm_up(manifests: Path) -> None:
    (manifests / "warm.yaml").write_text(startup.MANIFEST.format(
        name="warm", container=startup.CONTAINER, image=startup.IMAGE))


async def warm_up(agent: Agent, runtime: common.Runtime) -> None:
    """One pod to Running and removed: the agent's first-pod costs are paid before measuring."""
    write_warm_up(agent.manifests)

    async def warm_running() -> bool:
        pod = (await agent.pods()).get("warm")
        return pod is not None and running(pod)

    await poll_until(warm_running, START_WITHIN, f"{agent.kind}: warm-up pod running",
                     agent.tail)
    await remove_pods(agent, runtime)


async def no_ready_sandbox(runtime: common.Runtime) -> bool:
    return not any(s.state is rt.SandboxState.READY
                   for s in await runtime.client.list_pod_sandboxes())


async def remove_pods(agent: Agent, runtime: common.Runtime) -> None:
    """Delete the manifests; wait until `/pods` is empty and no sandbox is ready (a pod leaves
    `/pods` before its agent has stopped its sandbox)."""
    for sandbox in await runtime.client.list_pod_sandboxes():
        runtime.netns_seen.add(await runtime.client.sandbox_netns_path(sandbox.id))
    for path in agent.manifests.iterdir():
        path.unlink()

    async def gone() -> bool:
        return not await agent.pods()

    await poll_until(gone, REMOVE_WITHIN, f"{agent.kind}: every pod removed", agent.tail)
    await poll_until(lambda: no_ready_sandbox(runtime), REMOVE_WITHIN,
                     f"{agent.kind}: every sandbox stopped", agent.tail)


async def check_empty(runtime: common.Runtime, after: str) -> None:
    """The next phase starts on an empty runtime (the kubelet would kill what it finds)."""
    sandboxes = await runtime.client.list_pod_sandboxes()
    containers = await runtime.client.list_containers()
    if sandboxes or containers:
        raise common.BenchError(f"{after} left {len(sandboxes)} sandboxes and "
                                f"{len(containers)} containers in the runtime")


# -- the two agents -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def kubelet_agent(runtime: common.Runtime, work: Path, session: aiohttp.ClientSession,
                        pods: int) -> AsyncIterator[Agent]:
    """The kubelet standalone on the runtime; on leaving, its pods removed, it stopped by
    PID and what it left in the runtime removed (`KubeletPeer.stop`); BenchError on leaks."""
    manifests = Path(tempfile.mkdtemp(prefix="kubelet-manifests-", dir=work))
    config = KUBELET_LOGGING | ({"maxPods": pods + 1} if pods + 1 > DEFAULT_MAX_PODS else {})
    peer = await kubeletpeer.KubeletPeer.start(
        endpoint=runtime.runner.endpoint, manifests=manifests, node_name=NODE,
        client=runtime.client, config=config)
    agent = Agent("kubelet", peer.process.pid, manifests,
                  f"http://127.0.0.1:{peer.read_only_port}/pods", session, peer.tail)
    try:
        yield agent
        await remove_pods(agent, runtime)
    finally:
        await peer.stop(idle=lambda: poll_until(lambda: no_ready_sandbox(runtime),
                                                REMOVE_WITHIN, "kubelet: sandboxes stopped"))
        shutil.rmtree(manifests, ignore_errors=True)
    left = await peer.leftovers()
    if any(left.values()):
        raise common.BenchError(f"the kubelet left: {left}")


def nodelet_argv(top: Path, endpoint: str, port: int, cgroup_root: str, pods: int) -> list[str]:
    """`nodelet run` with its defaults but for its own dirs, ports and cgroup root (as the
    kubelet peer has its own)."""
    argv = [str(NODELET), "run", "--manifests", str(top / "manifests"),
            "--data-dir", str(top / "data"), "--runtime-endpoint", endpoint,
            "--listen", f"127.0.0.1:{port}", "--address", "127.0.0.1",
            "--port", str(kubeletpeer.free_port()), "--node-name", NODE,
            "--cgroup-root", cgroup_root, "--progress", "never"]
    if pods + 1 > DEFAULT_MAX_PODS:
        argv += ["--max-pods", str(pods + 1)]
    return argv


def tail_of(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.asynccontextmanager
async def nodelet_agent(runtime: common.Runtime, work: Path, session: aiohttp.ClientSession,
                        pods: int) -> AsyncIterator[Agent]:
    """`nodelet run` on the runtime; on leaving, its pods removed, it stopped by PID and its
    instance reset (`nodelet reset`'s code: sandboxes, cgroups, mounts, data dir)."""
    top = Path(tempfile.mkdtemp(prefix="nodelet-", dir=work))
    (top / "manifests").mkdir()
    port, cgroup_root, log = kubeletpeer.free_port(), f"/nodelet-versus-{top.name}", top / "log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            *nodelet_argv(top, runtime.runner.endpoint, port, cgroup_root, pods),
            stdout=out, stderr=out, start_new_session=True)
    agent = Agent("nodelet", process.pid, top / "manifests", f"http://127.0.0.1:{port}/pods",
                  session, lambda: tail_of(log))
    try:
        await _wait_serving(agent, process)
        yield agent
        await remove_pods(agent, runtime)
    finally:
        await kubeletpeer.stop_by_pid(process, 30.0)
        await reset_nodelet(runtime, top, cgroup_root)


async def _wait_serving(agent: Agent, process: asyncio.subprocess.Process) -> None:
    async def serving() -> bool:
        if process.returncode is not None:
            raise common.BenchError(f"nodelet exited {process.returncode}\n{agent.tail()}")
        try:
            await agent.pods()
        except (aiohttp.ClientError, OSError):
            return False
        return True

    await poll_until(serving, START_WITHIN, "nodelet serving /pods", agent.tail)


async def reset_nodelet(runtime: common.Runtime, top: Path, cgroup_root: str) -> None:
    """What `nodelet reset` does for the instance under `top`, then its cgroup root, its
    shared bind of its pods dir and its directory; BenchError naming what is left."""
    settings = settings_.Settings(
        data_dir=top / "data",
        runtime=dataclasses.replace(runtime.settings.runtime, endpoint=runtime.runner.endpoint),
        node=dataclasses.replace(settings_.NodeSettings(), cgroup_root=cgroup_root))
    report = await resetting.reset(settings)
    left = report.errors + cgroups.remove_pod_cgroup(cgroup_root)  # the root itself
    for point in mounts.mounts_under(top):  # its shared bind of its pods dir outlives it
        mounts.detach(point)
    shutil.rmtree(top, ignore_errors=True)
    if left:
        raise common.BenchError(f"nodelet left: {left}")


STARTERS: dict[str, AgentStarter] = {"kubelet": kubelet_agent, "nodelet": nodelet_agent}


# -- startup ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Startup:
    """One contender's startup phase in one round."""

    contender: str
    pods: int
    seconds: float  # manifests written (cri: first call) -> every container seen running
    ready_ltt: tuple[float, ...]  # per pod, whole seconds; empty for cri
    ready_seen: tuple[float, ...]  # per pod: written -> condition seen True (cri: call returned)
    running_seen: tuple[float, ...]  # per pod: written -> container seen running
    usage: Usage
    peak_rss: float = math.nan  # MiB, the agent process

    @property
    def rate(self) -> float:
        return self.pods / self.seconds


async def cri_startup(runtime: common.Runtime, pods: int) -> Startup:
    """bench/startup.py's baseline pods, each one's milestones noted since the first call:
    RunPodSandbox returned, StartContainer returned."""
    slots, dns = asyncio.Semaphore(CONCURRENCY), startup._host_dns()
    meter = startup.CpuMeter(runtime.runner.pid, runtime.data_dir)
    await asyncio.sleep(startup.SETTLE)  # as the baseline: the last phase's netns cleanup
    began = time.monotonic()

    async def one(name: str) -> tuple[startup.BaselinePod, float]:
        pod = await startup.baseline_pod(runtime, name, dns, slots)
        return pod, time.monotonic() - began

    with meter.measure():
        results = await asyncio.gather(
            *(one(f"{startup.NAME_PREFIX}{i:03d}") for i in range(pods)), return_exceptions=True)
    done = [r for r in results if isinstance(r, tuple)]
    await startup.remove_baseline_pods(runtime, [p for p, _ in done], asyncio.Semaphore(8))
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise common.BenchError(f"cri: {len(failures)} of {pods} pods failed: {failures[0]}")
    # The sandbox returned its slot's start + the log dir's mkdir (~0.1 ms) + the call.
    ready = tuple(end - p.total_seconds + p.sandbox_seconds for p, end in done)
    return Startup("cri", pods, meter.wall, (), ready, tuple(end for _, end in done),
                   Usage(meter.own, meter.runtime, meter.runtime_side))


async def agent_startup(start: AgentStarter, runtime: common.Runtime, work: Path,
                        session: aiohttp.ClientSession, pods: int) -> Startup:
    async with start(runtime, work, session, pods) as agent:
        await warm_up(agent, runtime)
        await asyncio.sleep(startup.SETTLE)  # as before the CRI loop: the netns cleanup
        result = await measure_startup(agent, runtime, pods)
    return result


async def measure_startup(agent: Agent, runtime: common.Runtime, pods: int) -> Startup:
    before = Usage.sample(runtime, agent.pid)
    written = time.monotonic()
    names = [p.stem for p in startup.write_manifests(agent.manifests, pods)]
    seen = await follow(agent, names, written)
    usage = Usage.sample(runtime, agent.pid) - before
    final = await agent.pods()
    ltt = [sandbox_ready_ltt(final[n]) for n in names]
    return Startup(agent.kind, pods, max(seen.running.values()),
                   tuple(v for v in ltt if v is not None), tuple(seen.ready.values()),
                   tuple(seen.running.values()), usage, peak_rss_mib(agent.pid))


async def run_startup(contender: str, runtime: common.Runtime, work: Path,
                      session: aiohttp.ClientSession, pods: int) -> Startup:
    if contender == "cri":
        result = await cri_startup(runtime, pods)
    else:
        result = await agent_startup(STARTERS[contender], runtime, work, session, pods)
    await check_empty(runtime, contender)
    return result


# -- idle and kill -> replacement ---------------------------------------------------------------


@dataclass(frozen=True)
class Steady:
    """One contender with `IDLE_PODS` running pods: idle CPU, then kill -> replacement."""

    contender: str
    seconds: float
    usage: Usage
    kills: tuple[float, ...] = ()
    peak_rss: float = math.nan

    def percent(self, seconds: float) -> float:
        return 100 * seconds / self.seconds


async def cri_steady(runtime: common.Runtime, idle: float) -> Steady:
    """containerd with the pods and no agent: the floor under both agents' idle cost."""
    slots, dns = asyncio.Semaphore(CONCURRENCY), startup._host_dns()
    created = await asyncio.gather(*(startup.baseline_pod(runtime, f"idle-{i:03d}", dns, slots)
                                     for i in range(IDLE_PODS)))
    try:
        await asyncio.sleep(IDLE_SETTLE)
        usage = await idle_usage(runtime, None, idle)
    finally:
        await startup.remove_baseline_pods(runtime, created, asyncio.Semaphore(8))
    return Steady("cri", idle, usage)


async def idle_usage(runtime: common.Runtime, pid: int | None, idle: float) -> Usage:
    before = Usage.sample(runtime, pid)
    await asyncio.sleep(idle)  # the measured interval itself: nothing else runs in it
    return Usage.sample(runtime, pid) - before


async def agent_steady(start: AgentStarter, runtime: common.Runtime, work: Path,
                       session: aiohttp.ClientSession, args: argparse.Namespace) -> Steady:
    async with start(runtime, work, session, IDLE_PODS) as agent:
        written = time.monotonic()
        names = [p.stem for p in startup.write_manifests(agent.manifests, IDLE_PODS)]
        await follow(agent, names, written)
        await asyncio.sleep(IDLE_SETTLE)
        usage = await idle_usage(runtime, agent.pid, args.idle)
        kills = [await kill_and_wait(agent, name) for name in names[:args.kills]]
        rss = peak_rss_mib(agent.pid)
    return Steady(agent.kind, args.idle, usage, tuple(kills), rss)


async def kill_and_wait(agent: Agent, name: str) -> float:
    """SIGKILL pod `name`'s container process; seconds until `/pods` shows its restartCount
    incremented and the container running again."""
    status = _container((await agent.pods())[name])
    count = int(status.get("restartCount") or 0)
    killed = time.monotonic()
    eventdriven.kill_container_process(str(status.get("containerID", "")).split("://")[-1])

    async def replaced() -> bool:
        pod = (await agent.pods()).get(name)
        return (pod is not None and running(pod)
                and int(_container(pod).get("restartCount") or 0) > count)

    await poll_until(replaced, KILL_WITHIN, f"{agent.kind}: {name} replaced", agent.tail)
    return time.monotonic() - killed


async def run_steady(contender: str, runtime: common.Runtime, work: Path,
                     session: aiohttp.ClientSession, args: argparse.Namespace) -> Steady:
    if contender == "cri":
        result = await cri_steady(runtime, args.idle)
    else:
        result = await agent_steady(STARTERS[contender], runtime, work, session, args)
    await check_empty(runtime, f"{contender} (idle)")
    return result


# -- the report ---------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return common.percentile(values, 50) if values else math.nan


def pooled(results: Sequence[Startup], name: str) -> list[float]:
    return [v for r in results for v in getattr(r, name)]


@dataclass(frozen=True)
class Row:
    label: str
    values: dict[str, float]  # by contender; nan where it does not apply
    unit: str = ""
    digits: int = 2


def cell(value: float, digits: int) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def ratio(row: Row) -> float:
    kubelet, node = row.values.get("kubelet", math.nan), row.values.get("nodelet", math.nan)
    return node / kubelet if kubelet and not math.isnan(kubelet) else math.nan


def print_table(title: str, rows: Sequence[Row]) -> None:
    print(f"\n{title}")
    print(f"{'':50}{'cri':>10}{'kubelet':>10}{'nodelet':>10}{'nodelet/kubelet':>17}")
    for row in rows:
        label = f"{row.label} ({row.unit})" if row.unit else row.label
        print(f"{label:50}" + "".join(
            f"{cell(row.values.get(c, math.nan), row.digits):>10}" for c in CONTENDERS)
            + f"{cell(ratio(row), 2):>17}")


def startup_rows(by: dict[str, list[Startup]]) -> dict[str, list[Row]]:
    def med(get: Callable[[Startup], float]) -> dict[str, float]:
        return {c: median([get(r) for r in rs]) for c, rs in by.items()}

    def pct(name: str, q: float) -> dict[str, float]:
        return {c: common.percentile(pooled(rs, name), q) if pooled(rs, name) else math.nan
                for c, rs in by.items()}

    return {
        "throughput, manifests written -> every container running (median of rounds)": [
            Row("throughput", med(lambda r: r.rate), "pods/s"),
            Row("time to all running", med(lambda r: r.seconds), "s")],
        "sandbox-ready, LTT: PodScheduled -> PodReadyToStartContainers lastTransitionTime "
        "(whole seconds; pooled)": [
            Row("sandbox-ready LTT p50", pct("ready_ltt", 50), "s"),
            Row("sandbox-ready LTT p99", pct("ready_ltt", 99), "s")],
        "sandbox-ready, seen: manifests written -> first /pods read with the condition True "
        "(50 ms polls; cri: RunPodSandbox returned; pooled)": [
            Row("sandbox-ready seen p50", pct("ready_seen", 50), "s"),
            Row("sandbox-ready seen p99", pct("ready_seen", 99), "s")],
        "per pod, manifests written -> container seen running (cri: StartContainer returned)": [
            Row("written -> running p50", pct("running_seen", 50), "s"),
            Row("written -> running p99", pct("running_seen", 99), "s")],
        "CPU over the startup phase (median of rounds; cri's agent: this process's loop)": [
            Row("agent CPU", med(lambda r: r.usage.agent), "CPU-s"),
            Row("agent CPU per pod", med(lambda r: 1000 * r.usage.agent / r.pods), "CPU-ms", 1),
            Row("containerd CPU", med(lambda r: r.usage.containerd), "CPU-s"),
            Row("runtime side CPU (containerd, shims, runc, CNI)",
                med(lambda r: r.usage.runtime), "CPU-s")],
        "memory (median of rounds; a fresh agent per round: warm-up + phase)": [
            Row("agent peak RSS (VmHWM)", med(lambda r: r.peak_rss), "MiB", 0)],
    }


def _nan_zero(value: float) -> float:
    return 0.0 if math.isnan(value) else value


def steady_rows(by: dict[str, Steady], kills: int) -> dict[str, list[Row]]:
    def get(f: Callable[[Steady], float]) -> dict[str, float]:
        return {c: f(s) for c, s in by.items()}

    def kill_pct(q: float) -> dict[str, float]:
        return {c: common.percentile(s.kills, q) if s.kills else math.nan for c, s in by.items()}

    return {
        f"idle, {IDLE_PODS} running pods (cri: containerd alone, no agent)": [
            Row("idle agent CPU", get(lambda s: s.percent(s.usage.agent)), "%"),
            Row("idle containerd CPU", get(lambda s: s.percent(s.usage.containerd)), "%"),
            Row("idle runtime side CPU", get(lambda s: s.percent(s.usage.runtime)), "%"),
            Row("idle agent + runtime side CPU",
                get(lambda s: s.percent(_nan_zero(s.usage.agent) + s.usage.runtime)), "%"),
            Row("agent peak RSS, idle + kills", get(lambda s: s.peak_rss), "MiB", 0)],
        f"kill -> replacement: {kills} container processes SIGKILLed, one at a time "
        "-> /pods shows restartCount+1 and running": [
            Row("kill -> replacement p50", kill_pct(50), "s", 3),
            Row("kill -> replacement p99", kill_pct(99), "s", 3)],
    }


# What issue 42 aims at, nodelet / kubelet: (row label, "<=" or ">=", bound); issue 26's where
# issue 42 names none (the kill -> replacement and LTT rows).
AIMS = (("throughput", ">=", 2.0), ("sandbox-ready seen p99", "<=", 0.5),
        ("sandbox-ready LTT p99", "<=", 0.5), ("agent CPU per pod", "<=", 0.5),
        ("agent peak RSS (VmHWM)", "<=", 0.75), ("idle agent + runtime side CPU", "<=", 1.0),
        ("kill -> replacement p99", "<=", 1.0))


def print_ratios(rows: Sequence[Row]) -> None:
    """Every ratio again, last, with the aim where one is named."""
    print("\nnodelet / kubelet (the aims of issue 42, or issue 26 where 42 names none):")
    aims = {label: (op, bound) for label, op, bound in AIMS}
    for row in rows:
        value = ratio(row)
        if math.isnan(value):
            continue
        line = f"  {row.label:48}{value:8.2f}"
        if row.label in aims:
            op, bound = aims[row.label]
            met = value >= bound if op == ">=" else value <= bound
            line += f"   aim {op} {bound:g}: {'met' if met else 'NOT met'}"
        print(line)


def versions() -> str:
    pairs = [line.strip() for line in (REPO / "kube" / "versions.env").read_text().splitlines()
             if "=" in line and not line.lstrip().startswith("#")]
    return ", ".join(pairs)


def write_json(path: Path, args: argparse.Namespace, runtime: common.Runtime,
               load: tuple[float, ...], now: tuple[float, ...],
               sections: Sequence[tuple[str, list[Row]]]) -> None:
    """The report's figures as one JSON object, appended as one line to `path` (a history:
    each run adds its line, so a change shows against the runs before it)."""
    record = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": checkout.current_commit(dirty=True),
        "runtime": runtime.version, "kubelet": kubeletpeer.kube_version(),
        "machine": {"cpus": os.cpu_count(), "load_start": list(load), "load_end": list(now)},
        "run": {"pods": args.pods, "rounds": args.rounds, "idle": args.idle,
                "kills": args.kills, "load": args.load, "contenders": args.contenders},
        "rows": {row.label: {**{c: v for c, v in row.values.items() if not math.isnan(v)},
                             "unit": row.unit,
                             **({"nodelet/kubelet": ratio(row)}
                                if not math.isnan(ratio(row)) else {})}
                 for _, rows in sections for row in rows},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(record) + "\n")


def print_report(args: argparse.Namespace, runtime: common.Runtime, load: tuple[float, ...],
                 by: dict[str, list[Startup]], steady: dict[str, Steady]) -> None:
    now = os.getloadavg()
    print(f"\nversus: raw CRI | kubelet {kubeletpeer.kube_version()} | nodelet "
          f"{nodelet.__version__}, one {runtime.version}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"versions (kube/versions.env): {versions()}")
    print(f"machine: {os.cpu_count()} CPUs; load average at start "
          f"{' '.join(f'{v:.2f}' for v in load)}, at end {' '.join(f'{v:.2f}' for v in now)}")
    print(f"run: --pods {args.pods} --rounds {args.rounds} --idle {args.idle:g} "
          f"--kills {args.kills} --load {args.load}; cri = CRI calls at concurrency "
          f"{CONCURRENCY}")
    sections = list(startup_rows(by).items()) + list(steady_rows(steady, args.kills).items())
    for title, rows in sections:
        print_table(title, rows)
    print_ratios([row for _, rows in sections for row in rows])
    if args.json:
        write_json(args.json, args, runtime, load, now, sections)
        print(f"\nappended to {args.json}")


# -- main ---------------------------------------------------------------------------------------


def order(contenders: Sequence[str], round_: int) -> list[str]:
    """The contenders rotated by the round: each goes first once in len(contenders) rounds."""
    shift = round_ % len(contenders)
    return [*contenders[shift:], *contenders[:shift]]


async def startup_rounds(args: argparse.Namespace, runtime: common.Runtime, work: Path,
                         session: aiohttp.ClientSession) -> dict[str, list[Startup]]:
    by: dict[str, list[Startup]] = {c: [] for c in args.contenders}
    for round_ in range(args.rounds):
        for contender in order(args.contenders, round_):
            result = await run_startup(contender, runtime, work, session, args.pods)
            by[contender].append(result)
            print(f"round {round_ + 1}: {contender:8} {result.rate:6.2f} pods/s, all running "
                  f"{result.seconds:.2f} s, agent {result.usage.agent:.2f} CPU-s, "
                  f"peak RSS {cell(result.peak_rss, 0)} MiB", flush=True)
    return by


async def steady_phases(args: argparse.Namespace, runtime: common.Runtime, work: Path,
                        session: aiohttp.ClientSession) -> dict[str, Steady]:
    found = {}
    for contender in args.contenders:
        found[contender] = result = await run_steady(contender, runtime, work, session, args)
        print(f"idle: {contender:8} agent {cell(result.percent(result.usage.agent), 2)} %, "
              f"containerd {result.percent(result.usage.containerd):.2f} %; kills "
              f"{' '.join(f'{k:.2f}' for k in result.kills) or '-'}", flush=True)
    return found


def new_cgroups(name: str) -> list[Path]:
    """`name` in the cgroup root (v2) and in each v1 hierarchy, where it does not exist yet."""
    base = Path("/sys/fs/cgroup")
    tops = [base, *(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())]
    return [top / name for top in tops if not (top / name).exists()]


def remove_empty(cgroups_: Sequence[Path]) -> None:
    for path in cgroups_:
        try:
            path.rmdir()
        except OSError:
            pass  # never made, or in use by another runtime: not this run's to remove


async def bench(args: argparse.Namespace) -> None:
    with common.busy_processes(args.load):
        await measure(args)


async def measure(args: argparse.Namespace) -> None:
    load = os.getloadavg()
    # The CRI loop's sandboxes have no cgroup parent, so runc puts them under /k8s.io: made by
    # this run when it was missing, removed at the end once empty.
    made = new_cgroups("k8s.io")
    runtime = await common.start_runtime(prefix="vs-",
                                         pod_prefix_len=24 if args.pods <= 200 else 22)
    work = Path(tempfile.mkdtemp(prefix="vs-work-", dir="/tmp"))
    try:
        print(f"runtime: {runtime.version} at {runtime.runner.endpoint} "
              f"(pid {runtime.runner.pid}); kubelet {kubeletpeer.kube_version()}", flush=True)
        await startup.run_baseline(runtime, 2, 2)  # warm-up: the first sandbox's one-off costs
        async with aiohttp.ClientSession() as session:
            by = await startup_rounds(args, runtime, work, session)
            steady = await steady_phases(args, runtime, work, session)
    except kubeletpeer.PeerError as exc:
        raise common.BenchError(f"the kubelet: {exc}") from exc
    finally:
        await common.teardown_runtime(runtime, [work])
        remove_empty(made)
    print_report(args, runtime, load, by, steady)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=30, help="pods per startup phase (30)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved startup rounds, the order rotated each round (3)")
    parser.add_argument("--idle", type=float, default=60.0,
                        help=f"idle seconds measured with {IDLE_PODS} running pods (60)")
    parser.add_argument("--kills", type=int, default=10,
                        help=f"container processes killed, at most {IDLE_PODS} (10)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help="comma-separated subset of cri,kubelet,nodelet (all)")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes spinning during the whole run, e.g. one per "
                             "core (0)")
    parser.add_argument("--json", type=Path, default=None,
                        help="append the report's figures to this file as one JSON line")
    parser.add_argument("-v", "--verbose", action="store_true", help="nodelet's INFO logs")
    args = parser.parse_args(argv)
    args.contenders = [c for c in CONTENDERS if c in args.contenders.split(",")]
    if not 1 <= args.pods <= MAX_PODS or args.rounds < 1 or not 0 <= args.kills <= IDLE_PODS:
        parser.error(f"need 1 <= --pods <= {MAX_PODS}, --rounds >= 1, "
                     f"0 <= --kills <= {IDLE_PODS}")
    if not args.contenders or args.idle <= 0 or not 0 <= args.load <= 64:
        parser.error("name at least one of cri,kubelet,nodelet; --idle > 0; "
                     "0 <= --load <= 64")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return common.run("bench/versus.py", bench, args)


if __name__ == "__main__":
    sys.exit(main())
