"""Pod startup benchmark: nodelet against direct CRI calls, on one containerd, in one run.

Run as root from the checkout:  .venv/bin/python bench/startup.py [--pods 30] [--concurrency 8]
    [--runtimes built,system] [--load N]

1. For each runtime of `--runtimes` in turn (containerd 2.x of `make runtime`, the one on
   PATH), an embedded containerd in a fresh data dir under /tmp (its own /24 pod CIDR), and
   steps 2-4 on it; at the end the runtimes side by side.
2. Baseline: a plain loop of CRI calls (RunPodSandbox -> CreateContainer -> StartContainer,
   busybox `sleep 3600`) for N pods, at `--concurrency` and at each level of `--sweep`;
   throughput and per-pod RunPodSandbox latency; then the pods are stopped and removed.
3. nodelet: an in-process `Agent` on the SAME containerd (external endpoint); N manifests are
   written at once, half a manifest poll period after the agent's first scan (the average
   case); throughput (write -> all containers running), sandbox-ready latency
   (PodReadyToStartContainers lastTransitionTime - PodScheduled lastTransitionTime, precise
   times from the status cache) and detection latency (RunPodSandbox returned -> condition
   True in the status cache, measured in a status subscriber against `PodWork.sandbox_returned_at`).
4. Prints the table; removes the manifests, waits until nodelet removed every pod, stops the
   agent, resets the containerd instance and fails when anything was left behind.

Results are ratios against the baseline measured in the same run (see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import dataclasses
import os
import pstats
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import common  # bench/common.py: the runtime, its leak check, main
from nodelet import app
from nodelet import settings as settings_
from nodelet.adapters import host
from nodelet.adapters.cri import client as cri
from nodelet.model.core import dns as dns_
from nodelet.model.core import pods as pods_
from nodelet.model.core import runtime as rt
from nodelet.model.core import status as st
from nodelet.services.serving import metrics

IMAGE = settings_.BUSYBOX_IMAGE
COMMAND = ("sleep", "3600")
NAME_PREFIX = "bench-"
CONTAINER = "sleep"
# Generous deadlines: a 2-core machine runs 30 pods in ~5 s; these only catch a hang.
START_TIMEOUT_PER_POD = 3.0
REMOVE_TIMEOUT = 120.0
# Seconds of pause before each measured phase: the agent's first directory read, relist and
# housekeeping passes are over (as on a node that has been running), and for both sides the
# kernel has mostly cleaned up the network namespaces the previous phase removed.
SETTLE = 1.0
CLK_TCK = common.CLK_TCK

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: {container}
      image: {image}
      imagePullPolicy: IfNotPresent
      command: ["sleep", "3600"]
"""


# -- small helpers ------------------------------------------------------------------------------


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent not idle since boot (/proc/stat), anyone's work included."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle) / CLK_TCK


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds of each thread of this process so far, keyed `name (tid)` (Python's name
    for Python threads, the kernel's for native ones such as grpc's)."""
    python_names = {t.native_id: t.name for t in threading.enumerate()}
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended
        name = python_names.get(int(task.name)) or text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        found[f"{name} ({task.name})"] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return found


def _thread_deltas(
    before: dict[str, float], after: dict[str, float]
) -> tuple[tuple[str, float], ...]:
    """Per thread *kind* (name without its number): CPU seconds used between two samples."""
    kinds: dict[str, float] = {}
    for key, seconds in after.items():
        kind = key.rsplit(" (", 1)[0].rstrip("0123456789_")
        kinds[kind] = kinds.get(kind, 0.0) + seconds - before.get(key, 0.0)
    return tuple(sorted(kinds.items(), key=lambda kv: -kv[1]))


def runtime_side_seconds(data_dir: Path) -> float:
    """CPU seconds so far of every process of the runtime under test: containerd and its shims
    (their command lines name the data dir), each with its reaped children (CNI plugins, runc)."""
    marker = str(data_dir).encode()
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / CLK_TCK


@dataclass
class CpuMeter:
    """CPU seconds used over one phase: this process (the agent), containerd, the machine."""

    containerd_pid: int | None
    data_dir: Path | None = None
    wall: float = 0.0
    own: float = 0.0
    runtime: float = 0.0
    machine: float = 0.0
    # CPU seconds of this process's threads over the phase, by thread name (grpc's poller,
    # the to_thread workers, the checkpoint writer...), busiest first.
    threads: tuple[tuple[str, float], ...] = ()
    # containerd, shims, runc, CNI plugins (see runtime_side_seconds); nan without data_dir.
    runtime_side: float = float("nan")

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        wall, own, machine = time.monotonic(), time.process_time(), machine_busy_seconds()
        ctr = common.cpu_seconds(self.containerd_pid) if self.containerd_pid else float("nan")
        threads = thread_cpu_seconds()
        side = runtime_side_seconds(self.data_dir) if self.data_dir else float("nan")
        try:
            yield
        finally:
            self.wall = time.monotonic() - wall
            self.own = time.process_time() - own
            self.threads = _thread_deltas(threads, thread_cpu_seconds())
            if self.data_dir:
                self.runtime_side = runtime_side_seconds(self.data_dir) - side
            self.machine = machine_busy_seconds() - machine
            after = common.cpu_seconds(self.containerd_pid) if self.containerd_pid else float("nan")
            self.runtime = after - ctr

    def describe(self) -> str:
        return (f"{self.wall:.2f} s: agent/bench {self.own:.2f}, containerd {self.runtime:.2f}, "
                f"runtime side {self.runtime_side:.2f}, machine {self.machine:.2f} CPU-s "
                f"({self.machine / self.wall:.1f} of {os.cpu_count()} cores busy)")


# -- baseline: direct CRI calls -----------------------------------------------------------------


@dataclass(frozen=True)
class BaselinePod:
    sandbox_id: rt.SandboxID
    container_id: rt.ContainerID
    sandbox_seconds: float
    total_seconds: float


@dataclass(frozen=True)
class BaselineResult:
    concurrency: int
    pods: int
    seconds: float
    sandbox_latencies: tuple[float, ...]
    pod_latencies: tuple[float, ...]
    cpu: CpuMeter

    @property
    def rate(self) -> float:
        return self.pods / self.seconds


def baseline_configs(
    runtime: common.Runtime, name: str, dns: rt.DNSConfig
) -> tuple[rt.SandboxConfig, rt.ContainerConfig]:
    uid = str(uuid.uuid4())
    labels = {rt.LABEL_POD_UID: uid, rt.LABEL_POD_NAME: name, rt.LABEL_POD_NAMESPACE: "bench"}
    sandbox = rt.SandboxConfig(
        name=name, namespace="bench", uid=uid, attempt=0, hostname=name, dns=dns,
        log_directory=str(runtime.data_dir / "pods" / f"bench_{name}_{uid}"), labels=labels,
    )
    container = rt.ContainerConfig(
        name=CONTAINER, attempt=0, image=IMAGE, log_path=f"{CONTAINER}/0.log", command=COMMAND,
        labels={**labels, rt.LABEL_CONTAINER_NAME: CONTAINER},
    )
    return sandbox, container


async def baseline_pod(
    runtime: common.Runtime, name: str, dns: rt.DNSConfig, slots: asyncio.Semaphore
) -> BaselinePod:
    sandbox_config, container_config = baseline_configs(runtime, name, dns)
    async with slots:
        started = time.monotonic()
        # As nodelet does (syncing._run_sandbox): the kubelet creates the log dir first.
        await asyncio.to_thread(
            Path(sandbox_config.log_directory).mkdir, parents=True, exist_ok=True
        )
        calling = time.monotonic()
        sandbox_id = await runtime.client.run_pod_sandbox(sandbox_config)
        sandbox_seconds = time.monotonic() - calling
        container_id = await runtime.client.create_container(
            sandbox_id, container_config, sandbox_config
        )
        await runtime.client.start_container(container_id)
        return BaselinePod(sandbox_id, container_id, sandbox_seconds,
                           time.monotonic() - started)


async def remove_baseline_pods(
    runtime: common.Runtime, created: Sequence[BaselinePod], slots: asyncio.Semaphore
) -> None:
    async def remove(pod: BaselinePod) -> None:
        async with slots:
            runtime.netns_seen.add(await runtime.client.sandbox_netns_path(pod.sandbox_id))
            await runtime.client.stop_container(pod.container_id, 0)
            await runtime.client.stop_pod_sandbox(pod.sandbox_id)
            await runtime.client.remove_pod_sandbox(pod.sandbox_id)

    await asyncio.gather(*(remove(p) for p in created))


def _host_dns() -> rt.DNSConfig:
    """The host's resolver for the baseline's sandboxes, read as nodelet reads it (empty when
    it cannot be read)."""
    try:
        return dns_.parse_resolv_conf(host.read_resolv_conf(Path("/etc/resolv.conf")))
    except (OSError, dns_.ResolvConfError):
        return rt.DNSConfig()


async def run_baseline(runtime: common.Runtime, pods: int, concurrency: int) -> BaselineResult:
    slots = asyncio.Semaphore(concurrency)
    dns = _host_dns()
    names = [f"{NAME_PREFIX}c{concurrency}-{i:03d}" for i in range(pods)]
    meter = CpuMeter(runtime.runner.pid, runtime.data_dir)
    # As before nodelet's burst: the kernel's cleanup of the previous phase's network
    # namespaces (kworkers, not counted anywhere else) is mostly over.
    await asyncio.sleep(SETTLE)
    with meter.measure():
        results = await asyncio.gather(
            *(baseline_pod(runtime, n, dns, slots) for n in names), return_exceptions=True
        )
    created = [r for r in results if isinstance(r, BaselinePod)]
    await remove_baseline_pods(runtime, created, asyncio.Semaphore(8))
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise common.BenchError(f"baseline: {len(failures)} of {pods} pods failed: {failures[0]}")
    return BaselineResult(
        concurrency=concurrency, pods=pods, seconds=meter.wall,
        sandbox_latencies=tuple(p.sandbox_seconds for p in created),
        pod_latencies=tuple(p.total_seconds for p in created), cpu=meter,
    )


# -- diagnostics and what-ifs (off by default; they patch the CRI client class) -----------------


@contextlib.contextmanager
def patched(cls: type, name: str, wrap: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(cls, name)
    setattr(cls, name, wrap(original))
    try:
        yield
    finally:
        setattr(cls, name, original)


def traced_calls(log: list[tuple[str, float]]) -> Callable[[Any], Any]:
    """Wrap `RuntimeClient._call`: record (CRI operation, seconds) of every call."""

    def wrap(call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(self: Any, method: Any, request: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return await call(self, method, request, **kwargs)
            finally:
                operation = type(request).__name__.removesuffix("Request")
                log.append((operation, time.monotonic() - started))

        return timed

    return wrap


# -- nodelet ------------------------------------------------------------------------------------


@dataclass
class PodTimes:
    """One nodelet pod's milestones: monotonic seconds since the manifests were written."""

    sandbox_starting: float | None = None
    sandbox_seconds: float | None = None
    ready_to_start: float | None = None
    running: float | None = None
    sandbox_ready_latency: float | None = None  # condition LTT - PodScheduled LTT
    detection: float | None = None  # RunPodSandbox returned -> condition True in the cache
    scheduled_offset: float | None = None  # PodScheduled LTT - manifests written (wall clock)
    seen_offset: float | None = None  # creationTimestamp (config seen) - manifests written


class BenchMetrics(metrics.Metrics):
    """nodelet's own metrics plus per-pod timings, through the observers.SyncObserver hooks."""

    def __init__(self) -> None:
        super().__init__()
        self.t0 = time.monotonic()
        self.times: dict[str, PodTimes] = {}

    def of(self, pod: pods_.Pod) -> PodTimes:
        return self.times.setdefault(pod.name, PodTimes())

    def sandbox_starting(self, pod: pods_.Pod) -> None:
        super().sandbox_starting(pod)
        self.of(pod).sandbox_starting = time.monotonic() - self.t0

    def sandbox_created(self, pod: pods_.Pod, seconds: float) -> None:
        super().sandbox_created(pod, seconds)
        self.of(pod).sandbox_seconds = seconds


class Tracker:
    """A status-manager subscriber: notes when each bench pod's condition and containers are up."""

    def __init__(self, agent: app.Agent, observer: BenchMetrics, pods: int) -> None:
        self._agent = agent
        self._observer = observer
        self._pods = pods
        self.t0_wall = datetime.now(UTC)
        self.all_running = asyncio.Event()
        self.running: set[str] = set()

    def start_clock(self) -> None:
        self._observer.t0 = time.monotonic()
        self.t0_wall = datetime.now(UTC)

    def __call__(self, pod: pods_.Pod, pod_status: st.PodStatus) -> None:
        if not pod.name.startswith(NAME_PREFIX):
            return
        now = time.monotonic()
        times = self._observer.of(pod)
        cond = pod_status.condition(st.POD_READY_TO_START_CONTAINERS)
        if cond is not None and cond.status == "True" and times.ready_to_start is None:
            self._on_ready(pod, pod_status, cond, times, now)
        if times.running is None and _all_running(pod, pod_status):
            times.running = now - self._observer.t0
            self.running.add(pod.name)
            if len(self.running) == self._pods:
                self.all_running.set()

    def _on_ready(
        self, pod: pods_.Pod, pod_status: st.PodStatus, cond: st.PodCondition,
        times: PodTimes, now: float,
    ) -> None:
        times.ready_to_start = now - self._observer.t0
        work = self._agent.workers.work(pod.uid)
        if work is not None and work.sandbox_returned_at is not None:
            times.detection = now - work.sandbox_returned_at
        scheduled = pod_status.condition(st.POD_SCHEDULED)
        if scheduled is not None and scheduled.last_transition_time and cond.last_transition_time:
            times.sandbox_ready_latency = (
                cond.last_transition_time - scheduled.last_transition_time
            ).total_seconds()
            times.scheduled_offset = (
                scheduled.last_transition_time - self.t0_wall).total_seconds()
        created = getattr(pod, "creation_timestamp", None)
        if isinstance(created, datetime):
            times.seen_offset = (created - self.t0_wall).total_seconds()


def _all_running(pod: pods_.Pod, pod_status: st.PodStatus) -> bool:
    wanted = {c.name for c in pod.spec.containers}
    running = {c.name for c in pod_status.container_statuses
               if isinstance(c.state, st.ContainerStateRunning)}
    return bool(wanted) and wanted <= running


@dataclass(frozen=True)
class NodeletResult:
    pods: int
    seconds: float
    times: dict[str, PodTimes]
    cpu: CpuMeter
    histogram_detection_mean: float
    histogram_detection_le_50ms: float
    cri_calls: tuple[tuple[str, float], ...] = ()
    loop_lags: tuple[float, ...] = ()
    sandbox_limit: tuple[int, int] = (0, 0)  # the adaptive limit at the end, its highest

    @property
    def rate(self) -> float:
        return self.pods / self.seconds

    def values(self, name: str) -> list[float]:
        found = (getattr(t, name) for t in self.times.values())
        return [v for v in found if isinstance(v, float)]


def agent_settings(
    runtime: common.Runtime, data_dir: Path, manifests: Path, poll: float | None, pods: int,
    sandbox_limit: int | None = None,
) -> settings_.Settings:
    """nodelet's defaults on `runtime`, but for the what-ifs: the manifest poll period and
    the RunPodSandbox calls in flight (`sandbox_limit`; 0: as many as there are pods)."""
    defaults = settings_.Settings()
    fixed = sandbox_limit or max(pods, 1)
    sync = defaults.sync if sandbox_limit is None else dataclasses.replace(
        defaults.sync, min_parallel_sandboxes=fixed, initial_parallel_sandboxes=fixed,
        max_parallel_sandboxes=fixed)
    return settings_.Settings(
        sync=sync,
        data_dir=data_dir,
        manifests_dir=manifests,
        manifest_poll_period=defaults.manifest_poll_period if poll is None else poll,
        runtime=dataclasses.replace(runtime.settings.runtime, endpoint=runtime.runner.endpoint),
        server=settings_.ServerSettings(port=0),
        # Any free port: several benches (or a running nodelet) never collide on 10250.
        node_server=settings_.NodeServerSettings(address="127.0.0.1", port=0),
        # More than the kubelet's default 110 pods needs --max-pods, as on a kubelet.
        node=settings_.NodeSettings(max_pods=max(defaults.node.max_pods, pods)),
    )


def write_manifests(directory: Path, pods: int) -> list[Path]:
    """Write every manifest (dot-prefixed, ignored by the source), then rename them in place."""
    paths = []
    for i in range(pods):
        name = f"{NAME_PREFIX}{i:03d}"
        hidden = directory / f".{name}.yaml"
        hidden.write_text(MANIFEST.format(name=name, container=CONTAINER, image=IMAGE))
        paths.append(hidden)
    final = [p.with_name(p.name[1:]) for p in paths]
    for hidden, path in zip(paths, final, strict=True):
        hidden.rename(path)
    return final


def _histogram(registry_metrics: metrics.Metrics) -> tuple[float, float]:
    registry = registry_metrics.registry
    name = "nodelet_sandbox_ready_detection_seconds"
    count = registry.get_sample_value(f"{name}_count") or 0.0
    total = registry.get_sample_value(f"{name}_sum") or 0.0
    le = registry.get_sample_value(f"{name}_bucket", {"le": "0.05"}) or 0.0
    return (total / count if count else float("nan"), le / count if count else float("nan"))


async def wait_for(event: asyncio.Event, within: float, what: str, seen: object) -> None:
    try:
        await asyncio.wait_for(event.wait(), within)
    except TimeoutError as exc:
        raise common.BenchError(f"{what} not reached within {within:g}s; seen: {seen}") from exc


async def run_nodelet(
    runtime: common.Runtime, args: argparse.Namespace, dirs: tuple[Path, Path]
) -> NodeletResult:
    data_dir, manifests = dirs
    agent = app.Agent(agent_settings(runtime, data_dir, manifests, args.manifest_poll, args.pods,
                                     args.sandbox_limit))
    observer = BenchMetrics()
    # Replaced before start(): the agent passes `self.metrics` to the syncer as its observer.
    agent.metrics = observer
    await agent.start()
    try:
        tracker = Tracker(agent, observer, args.pods)
        calls: list[tuple[str, float]] = []
        if not agent.settings.manifest_watch:
            # Polled: start() scanned just now; writing at once would land right after a scan
            # (the worst case, a whole poll period). Half a period is the average case.
            await asyncio.sleep(agent.settings.manifest_poll_period / 2)
        else:
            # Watched: the watch's first read ran just now, and a burst that follows a read
            # within `manifest_debounce` waits for it (up to 50 ms, 1.5 % of a 30-pod run);
            # pods reach a node that has been running a moment, so let the start settle.
            await asyncio.sleep(SETTLE)
        agent.statuses.subscribe(tracker)
        with contextlib.ExitStack() as stack:
            if args.cri_trace:
                stack.enter_context(patched(cri.RuntimeClient, "_call", traced_calls(calls)))
            result = await _measure_nodelet(runtime, agent, tracker, observer, args.pods,
                                            args.profile)
        await remove_nodelet_pods(runtime, agent, manifests)
    finally:
        await agent.stop()
    slots = agent.syncer.sandbox_slots
    return dataclasses.replace(result, cri_calls=tuple(calls),
                               sandbox_limit=(slots.limit, slots.highest))


async def _measure_nodelet(
    runtime: common.Runtime, agent: app.Agent, tracker: Tracker, observer: BenchMetrics, pods: int,
    profile: Path | None,
) -> NodeletResult:
    manifests = agent.settings.manifests_dir
    assert manifests is not None
    meter = CpuMeter(runtime.runner.pid, runtime.data_dir)
    # The event loop thread's CPU time, not wall time: robust when the machine is shared.
    profiler = cProfile.Profile(time.thread_time) if profile else None
    lags: list[float] = []
    sampler = asyncio.create_task(sample_loop_lag(lags), name="bench-loop-lag")
    with meter.measure():
        if profiler:
            profiler.enable()
        tracker.start_clock()
        write_manifests(manifests, pods)
        try:
            await wait_for(tracker.all_running, 30 + START_TIMEOUT_PER_POD * pods,
                           "all nodelet pods running", sorted(tracker.running))
        finally:
            sampler.cancel()
            if profiler:
                profiler.disable()
    if profiler and profile:
        profiler.dump_stats(profile)
    mean, le = _histogram(observer)
    return NodeletResult(pods=pods, seconds=meter.wall, times=dict(observer.times), cpu=meter,
                         histogram_detection_mean=mean, histogram_detection_le_50ms=le,
                         loop_lags=tuple(lags))


async def sample_loop_lag(lags: list[float], period: float = 0.005) -> None:
    """How late a 5 ms timer fires: how long callbacks (status subscribers too) wait to run."""
    while True:
        started = time.monotonic()
        await asyncio.sleep(period)
        lags.append(time.monotonic() - started - period)


def remove_files(directory: Path) -> None:
    for path in directory.iterdir():
        path.unlink()


async def remove_nodelet_pods(runtime: common.Runtime, agent: app.Agent, manifests: Path) -> None:
    """Delete the manifests and wait until nodelet stopped and removed every pod."""
    for sandbox in await runtime.client.list_pod_sandboxes():
        runtime.netns_seen.add(await runtime.client.sandbox_netns_path(sandbox.id))
    remove_files(manifests)
    deadline = time.monotonic() + REMOVE_TIMEOUT
    while time.monotonic() < deadline:
        left = await runtime.client.list_pod_sandboxes()
        if not left and not agent.workers.uids():
            return
        await asyncio.sleep(0.2)
    raise common.BenchError(f"nodelet did not remove its pods within {REMOVE_TIMEOUT:g}s: "
                            f"workers {sorted(agent.workers.uids())}, sandboxes {len(left)}")


# -- the report ---------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return common.percentile(values, 50)


@dataclass(frozen=True)
class Rates:
    """Per-round throughputs of one configuration."""

    label: str
    rates: tuple[float, ...]
    sandbox: tuple[float, ...]  # RunPodSandbox seconds, pooled over rounds

    @property
    def median(self) -> float:
        return median(self.rates)


def baseline_rates(rounds: Sequence[Sequence[BaselineResult]]) -> dict[int, Rates]:
    out: dict[int, Rates] = {}
    for level in [b.concurrency for b in rounds[0]]:
        runs = [b for r in rounds for b in r if b.concurrency == level]
        out[level] = Rates(f"baseline (CRI direct), concurrency {level}",
                           tuple(b.rate for b in runs),
                           tuple(v for b in runs for v in b.sandbox_latencies))
    return out


def print_report(
    rounds: Sequence[Sequence[BaselineResult]], nodes: Sequence[NodeletResult], primary: int,
    what_ifs: str,
) -> None:
    levels_ = baseline_rates(rounds)
    pods = nodes[0].pods
    node = Rates(f"nodelet (all {pods} at once)", tuple(n.rate for n in nodes),
                 tuple(v for n in nodes for v in n.values("sandbox_seconds")))
    print()
    what_if = f"; WHAT-IF: {what_ifs}" if what_ifs else ""
    print(f"startup benchmark: {pods} pods x {len(nodes)} rounds, {os.cpu_count()} CPUs, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC{what_if}")
    print(f"{'':50}{'pods/s median (rounds)':<26}{'RunPodSandbox p50':>18}{'p99':>10}")
    for rates in [*levels_.values(), node]:
        per_round = " ".join(f"{r:.1f}" for r in rates.rates)
        p50, p99 = (ms(common.percentile(rates.sandbox, q)) for q in (50, 99))
        print(f"{rates.label:50}{rates.median:6.2f}  ({per_round:<15}) {p50:>18}{p99:>10}")
    print()
    _ratios(rounds, levels_, node, primary, pods)
    values = [v for n in nodes for v in n.values("sandbox_ready_latency")]
    _percentiles("sandbox-ready (PodScheduled -> True)", values)
    values = [v for n in nodes for v in n.values("detection")]
    _percentiles("detection (RunPodSandbox ret. -> True)", values, " (aim p99 <= 10 ms)")
    means = ", ".join(f"{ms(n.histogram_detection_mean)} ({n.histogram_detection_le_50ms:.0%}"
                      " <= 50 ms)" for n in nodes)
    _row("detection, nodelet histogram mean/round", means)
    lags = [v for n in nodes for v in n.loop_lags]
    _percentiles("event-loop lag (5 ms timer overshoot)", lags)
    _breakdown(nodes)
    calls = [c for n in nodes for c in n.cri_calls]
    if calls:
        _cri_trace(calls, len(nodes))
    print()
    print("CPU per phase, last round (wall: agent/bench process, containerd, whole machine):")
    for b in rounds[-1]:
        _row(f"  baseline c{b.concurrency}", b.cpu.describe())
    _row("  nodelet", nodes[-1].cpu.describe())
    _row("  nodelet's threads (CPU-s)",
         ", ".join(f"{name} {sec:.2f}" for name, sec in nodes[-1].cpu.threads if sec > 0))


def _ratios(
    rounds: Sequence[Sequence[BaselineResult]], levels_: dict[int, Rates], node: Rates,
    primary: int, pods: int,
) -> None:
    best = max(levels_.values(), key=lambda r: r.median)
    paired = [n / max(b.rate for b in r) for n, r in zip(node.rates, rounds, strict=True)]
    _row("ratio nodelet / best baseline (medians)",
         f"{node.median / best.median:.2f}  (best: {best.label.rsplit(', ', 1)[1]}; aim >= 0.95)")
    _row("ratio nodelet / same round's best, per round",
         " ".join(f"{p:.2f}" for p in paired))
    _row(f"ratio nodelet / baseline c{primary} (--concurrency)",
         f"{node.median / levels_[primary].median:.2f}")
    if pods in levels_:
        _row(f"ratio nodelet / baseline c{pods} (same in flight)",
             f"{node.median / levels_[pods].median:.2f}")


def _row(label: str, value: str) -> None:
    print(f"{label:50}{value}")


def _percentiles(label: str, values: Sequence[float], note: str = "") -> None:
    p50, p99 = (ms(common.percentile(values, q)) for q in (50, 99))
    _row(label, f"p50 {p50}, p99 {p99}, "
         f"max {ms(max(values, default=float('nan')))}  (n={len(values)}){note}")


def _cri_trace(calls: Sequence[tuple[str, float]], rounds: int) -> None:
    print()
    print(f"nodelet CRI calls while starting, all {rounds} rounds (count, p50 / p99 / total):")
    by_op: dict[str, list[float]] = {}
    for operation, seconds in calls:
        by_op.setdefault(operation, []).append(seconds)
    for operation, values in sorted(by_op.items(), key=lambda kv: -sum(kv[1])):
        _row(f"  {operation}", f"{len(values):4d}  {ms(common.percentile(values, 50))} / "
             f"{ms(common.percentile(values, 99))} / {sum(values):.2f} s")


def _breakdown(nodes: Sequence[NodeletResult]) -> None:
    """Median milestones since the manifests were written: where a pod's time goes."""
    print()
    print("nodelet milestones, seconds after the manifests were written "
          "(min / p50 / max, pooled):")
    for label, name in (
        ("config seen (creationTimestamp)", "seen_offset"),
        ("PodScheduled (first status)", "scheduled_offset"),
        ("RunPodSandbox called", "sandbox_starting"),
        ("PodReadyToStartContainers True", "ready_to_start"),
        ("all containers running", "running"),
    ):
        values = [v for n in nodes for v in n.values(name)]
        if values:
            _row(f"  {label}", f"{min(values):.3f} / {common.percentile(values, 50):.3f} / "
                 f"{max(values):.3f}")


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=30, help="pods per phase (default 30)")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="baseline pods in flight (default 8)")
    parser.add_argument("--sweep", default="4,all",
                        help="more baseline concurrency levels, comma-separated; 'all' = --pods; "
                             "'' for none (default 4,all)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (baselines, nodelet), interleaved; medians are reported "
                             "(default 3)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write a cProfile of the nodelet phase to this file")
    parser.add_argument("--manifest-poll", type=float, default=None,
                        help="what-if: nodelet's manifest poll period in seconds "
                             "(default: nodelet's own, 0.5)")
    parser.add_argument("--sandbox-limit", type=int, default=None,
                        help="what-if: a fixed limit of nodelet's RunPodSandbox calls in "
                             "flight (SyncSettings' min, initial and max_parallel_sandboxes "
                             "all K; 0: every pod at once). Default: the adaptive limit")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes spinning during the whole run, e.g. one per core "
                             "(0)")
    parser.add_argument("--cri-trace", action="store_true",
                        help="print per-operation CRI latency of the nodelet phase")
    parser.add_argument("-v", "--verbose", action="store_true", help="nodelet's INFO logs")
    common.add_runtimes_arg(parser)
    args = parser.parse_args(argv)
    if args.pods < 1 or args.pods > 1000 or args.concurrency < 1 or args.rounds < 1:
        parser.error("--pods must be 1..1000; --concurrency, --rounds >= 1")
    return args


def levels(args: argparse.Namespace) -> list[int]:
    extra = [args.pods if v == "all" else int(v) for v in args.sweep.split(",") if v.strip()]
    return sorted({args.concurrency, *extra})


def what_ifs(args: argparse.Namespace) -> str:
    found = []
    if args.manifest_poll is not None:
        found.append(f"manifest poll {args.manifest_poll:g} s")
    if args.sandbox_limit is not None:
        found.append(f"at most {args.sandbox_limit or 'every pod'} RunPodSandbox at once")
    if args.load:
        found.append(f"{args.load} busy processes")
    return ", ".join(found)


async def bench(args: argparse.Namespace) -> None:
    summaries: list[tuple[str, float, float, float]] = []
    for label, bin_dir in common.runtimes(args):
        summaries.append(await bench_on(args, label, bin_dir))
    if len(summaries) > 1:
        print("\nruntimes side by side (each ratio against the baseline of its own runtime):")
        _row("runtime", f"{'nodelet / best baseline':>24} {'nodelet pods/s':>15} "
             f"{'sandbox-ready p99':>18}")
        for name, ratio, rate, p99 in summaries:
            _row(name, f"{ratio:24.2f} {rate:15.2f} {ms(p99):>18}")
    if args.profile:
        print(f"\ncProfile of the first nodelet phase: {args.profile} (top 25 by own time)")
        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(25)


async def bench_on(args: argparse.Namespace, label: str,
                   bin_dir: Path | None) -> tuple[str, float, float, float]:
    """The whole benchmark on one runtime: (its name, nodelet / best baseline, nodelet's
    median pods/s, sandbox-ready p99)."""
    # Above 200 pods a /24 is too small: a /22 of its own.
    runtime = await common.start_runtime(
        prefix="nlb-", pod_cidr="10.251.0.0/22" if args.pods > 200 else None, bin_dir=bin_dir)
    work_dir = Path(tempfile.mkdtemp(prefix="nlb-agent-", dir="/tmp"))
    name = f"{runtime.version} ({label})"
    try:
        print(f"\n== {name}: containerd {runtime.runner.endpoint} (pid {runtime.runner.pid}), "
              f"pod CIDR {runtime.settings.runtime.pod_cidrs[0]}")
        await run_baseline(runtime, 2, 2)  # warm-up: first sandbox pays one-off costs
        rounds: list[list[BaselineResult]] = []
        nodes: list[NodeletResult] = []
        for round_ in range(args.rounds):
            rounds.append(await run_round_baselines(runtime, args, round_))
            nodes.append(await run_round_nodelet(runtime, args, round_, work_dir))
        print_report(rounds, nodes, args.concurrency, what_ifs(args))
    finally:
        await common.teardown_runtime(runtime, [work_dir])
    best = max(baseline_rates(rounds).values(), key=lambda r: r.median)
    rate = median([n.rate for n in nodes])
    ready = [v for n in nodes for v in n.values("sandbox_ready_latency")]
    return name, rate / best.median, rate, common.percentile(ready, 99)


async def run_round_baselines(
    runtime: common.Runtime, args: argparse.Namespace, round_: int
) -> list[BaselineResult]:
    results = []
    for concurrency in levels(args):
        result = await run_baseline(runtime, args.pods, concurrency)
        print(f"round {round_ + 1}: baseline c{concurrency}: {result.rate:.2f} pods/s")
        results.append(result)
    return results


async def run_round_nodelet(
    runtime: common.Runtime, args: argparse.Namespace, round_: int, work_dir: Path
) -> NodeletResult:
    """A fresh agent (own data dir, empty manifest dir) per round."""
    top = work_dir / f"round-{round_ + 1}"
    manifests = top / "manifests"
    manifests.mkdir(parents=True)
    profile = args.profile if round_ == 0 else None
    options = argparse.Namespace(**{**vars(args), "profile": profile})
    node = await run_nodelet(runtime, options, (top / "agent", manifests))
    print(f"round {round_ + 1}: nodelet: {node.rate:.2f} pods/s (sandboxes in flight: limit "
          f"{node.sandbox_limit[0]} at the end, {node.sandbox_limit[1]} at its highest)")
    return node


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return common.run("bench/startup.py", loaded, args)


async def loaded(args: argparse.Namespace) -> None:
    with common.busy_processes(args.load):
        await bench(args)


if __name__ == "__main__":
    sys.exit(main())
