"""How fast the pod lifecycle's time rules act, nodelet against the real kubelet, in one run.

Run as root from the checkout (after `make kube`, which builds the kubelet):
    .venv/bin/python bench/lifecycle.py [--rounds 5] [--no-kubelet]

1. Starts ONE embedded containerd in a fresh data dir under /tmp (`common.start_runtime`).
2. For each agent in turn — nodelet (an in-process `Agent` with its defaults, serving `/pods`
   on a free loopback port) and then the kubelet (`kubeletpeer.KubeletPeer`, standalone with
   its defaults but for what these machines force) — on that containerd, `--rounds` times:
   - **ready**: a pod whose readiness probe is `exec: [true]` every second. Measured: from the
     first `/pods` read showing the container running to the first showing the pod Ready.
   - **deadline**: `activeDeadlineSeconds: 5`. Measured: from the first read showing the pod
     to the first showing it Failed (DeadlineExceeded), minus the 5 s.
   - **liveness**: a liveness probe `exec: [false]` every second, failureThreshold 1,
     restartPolicy Always. Measured: from the first read showing the container running to the
     first showing restartCount 1.
   Both agents are read the same way: their `/pods` (a v1 PodList), polled every 50 ms.
   Each scenario also reports the time from the manifest written, which includes the pod's
   start (sandbox, container) and is the one compared as a ratio.
3. Prints the medians and maxima per agent and the ratios nodelet / kubelet, removes every
   pod, resets containerd and fails if anything leaked.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import common  # bench/common.py: the runtime, its leak check, main
from nodelet import app
from nodelet.model.core import runtime as rt
from support import kubeletpeer  # tests/support/kubeletpeer.py: the kubelet as a peer

POLL = 0.05
BUSYBOX = "localhost/nodelet/busybox:latest"
SCENARIOS: dict[str, str] = {
    "ready": """\
  restartPolicy: Always
  containers:
    - name: main
      image: {image}
      imagePullPolicy: IfNotPresent
      command: [sleep, "1000000"]
      readinessProbe: {{exec: {{command: ["true"]}}, periodSeconds: 1}}
""",
    "deadline": """\
  restartPolicy: Always
  activeDeadlineSeconds: 5
  containers:
    - name: main
      image: {image}
      imagePullPolicy: IfNotPresent
      command: [sleep, "1000000"]
""",
    "liveness": """\
  restartPolicy: Always
  containers:
    - name: main
      image: {image}
      imagePullPolicy: IfNotPresent
      command: [sleep, "1000000"]
      livenessProbe: {{exec: {{command: ["false"]}}, periodSeconds: 1, failureThreshold: 1}}
""",
}
DEADLINE = 5.0

Pods = Callable[[], Awaitable[list[dict[str, Any]]]]


async def idle(runtime: common.Runtime, within: float = 60.0) -> None:
    """Wait until no sandbox is ready: a removed pod is gone from `/pods` before its agent
    has stopped it, and the next round must not share the runtime with its termination."""
    deadline = time.monotonic() + within
    while any(s.state is rt.SandboxState.READY for s in await runtime.client.list_pod_sandboxes()):
        if time.monotonic() > deadline:
            raise common.BenchError(f"sandboxes still ready after {within}s")
        await asyncio.sleep(POLL)


def manifest(scenario: str, name: str) -> str:
    head = (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n"
            "  terminationGracePeriodSeconds: 1\n")
    return head + SCENARIOS[scenario].format(image=BUSYBOX)


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return statuses[0]  # type: ignore[no-any-return]


def running(pod: dict[str, Any]) -> bool:
    return "running" in (_container(pod).get("state") or {})


def ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions") or [])


def failed(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Failed"


def restarted(pod: dict[str, Any]) -> bool:
    return int(_container(pod).get("restartCount") or 0) >= 1


async def seen(pods: Pods, name: str, check: Callable[[dict[str, Any]], bool],
               within: float = 60.0) -> float:
    """The monotonic time of the first read in which pod `name` (by prefix) passes `check`."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            found = [p for p in await pods()
                     if p.get("metadata", {}).get("name", "").startswith(name)]
        except (aiohttp.ClientError, OSError):
            found = []
        now = time.monotonic()
        if found and check(found[0]):
            return now
        await asyncio.sleep(POLL)
    raise common.BenchError(f"pod {name}: {check.__name__} not seen within {within}s")


# What each scenario reports: (metric, what it measures). The first one of each is from the
# manifest written, so it is never near 0 and its ratio means something.
METRICS = {
    "ready": (("written->Ready", "manifest written to Ready"),
              ("running->Ready", "container seen running to Ready")),
    "deadline": (("written->Failed", "manifest written to Failed (the deadline is 5 s)"),
                 ("Failed-deadline", "Failed after the pod was first seen, minus 5 s")),
    "liveness": (("written->restart", "manifest written to restartCount 1"),
                 ("running->restart", "container seen running to restartCount 1")),
}


async def measure(scenario: str, pods: Pods, manifests: Path, name: str,
                  runtime: common.Runtime) -> dict[str, float]:
    written = time.monotonic()
    (manifests / f"{name}.yaml").write_text(manifest(scenario, name))
    if scenario == "ready":
        began = await seen(pods, name, running)
        done = await seen(pods, name, ready)
        values = (done - written, done - began)
    elif scenario == "deadline":
        began = await seen(pods, name, lambda p: True)
        done = await seen(pods, name, failed)
        values = (done - written, done - began - DEADLINE)
    else:
        began = await seen(pods, name, running)
        done = await seen(pods, name, restarted)
        values = (done - written, done - began)
    (manifests / f"{name}.yaml").unlink()
    await _gone(pods, name)
    await idle(runtime)
    return {metric: value for (metric, _), value in zip(METRICS[scenario], values, strict=True)}


async def _gone(pods: Pods, name: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while any(p.get("metadata", {}).get("name", "").startswith(name) for p in await pods()):
        if time.monotonic() > deadline:
            raise common.BenchError(f"pod {name} not removed within {within}s")
        await asyncio.sleep(POLL)


async def run_rounds(agent: str, pods: Pods, manifests: Path, rounds: int,
                     runtime: common.Runtime) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {m: [] for ms in METRICS.values() for m, _ in ms}
    for i in range(rounds):
        for scenario in SCENARIOS:
            took = await measure(scenario, pods, manifests, f"{scenario}-{agent}-{i}", runtime)
            for metric, value in took.items():
                results[metric].append(value)
            shown = ", ".join(f"{m} {v:.2f} s" for m, v in took.items())
            print(f"  {agent:8} {scenario:9} round {i + 1}: {shown}", flush=True)
    return results


async def nodelet_rounds(runtime: common.Runtime, rounds: int,
                         dirs: list[Path]) -> dict[str, list[float]]:
    s = common.agent_settings(runtime, dirs, prefix="lc", node_name="bench")
    assert s.manifests_dir is not None
    manifests = s.manifests_dir
    agent = app.Agent(s)
    await agent.start()
    pods = common.pods_reader(agent.server_port)
    try:
        return await run_rounds("nodelet", pods, manifests, rounds, runtime)
    finally:
        await agent.stop()


async def kubelet_rounds(runtime: common.Runtime, rounds: int,
                         dirs: list[Path]) -> dict[str, list[float]]:
    manifests = Path(tempfile.mkdtemp(prefix="lc-k-", dir="/tmp"))
    dirs.append(manifests)
    peer = await kubeletpeer.KubeletPeer.start(endpoint=runtime.runner.endpoint,
                                               manifests=manifests, client=runtime.client)
    try:
        return await run_rounds("kubelet", peer.pods, manifests, rounds, runtime)
    finally:
        await peer.stop(idle=lambda: idle(runtime))


def report(results: dict[str, dict[str, list[float]]]) -> None:
    agents = list(results)
    both = len(agents) == 2
    print(f"\n{'seconds (median / max)':24}" + "".join(f"{a:>18}" for a in agents) +
          ("   nodelet/kubelet" if both else ""))
    for scenario, metrics in METRICS.items():
        for index, (metric, _) in enumerate(metrics):
            medians = [statistics.median(results[a][metric]) for a in agents]
            line = f"{scenario + ' ' + metric:24}" + "".join(
                f"{f'{m:.2f} / {max(results[a][metric]):.2f}':>18}"
                for a, m in zip(agents, medians, strict=True))
            if both and index == 0:  # ratios only where the baseline is far from 0
                line += f"   {medians[0] / medians[1]:14.2f}"
            print(line)
    for scenario, metrics in METRICS.items():
        for metric, meaning in metrics:
            print(f"  {scenario} {metric}: {meaning}")


async def bench(args: argparse.Namespace) -> None:
    runtime = await common.start_runtime(prefix="lc")
    print(f"runtime: {runtime.version}; kubelet: "
          f"{'not run' if args.no_kubelet else kubeletpeer.kube_version()}; "
          f"rounds: {args.rounds}", flush=True)
    results: dict[str, dict[str, list[float]]] = {}
    dirs: list[Path] = []
    try:
        results["nodelet"] = await nodelet_rounds(runtime, args.rounds, dirs)
        if not args.no_kubelet:
            results["kubelet"] = await kubelet_rounds(runtime, args.rounds, dirs)
    finally:
        await common.teardown_runtime(runtime, dirs)
    report(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-kubelet", action="store_true",
                        help="nodelet only (no kubelet built)")
    parser.add_argument("--verbose", action="store_true")
    return common.run("bench/lifecycle.py", bench, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
