"""How much of its own code an agent runs because of one pod: nodelet against the real kubelet.

Run as root from the checkout (after `make kube`; this builds the kubelet with Go's coverage
counters, `kube/build.sh kubelet-cover`, about 2 minutes the first time):
    .venv/bin/python bench/walk.py [--idle-runs 2] [--list]

`tests/agent/test_sync_walk.py` follows one pod's first sync task; this asks the wider
question the same way for both agents. For each agent, on ONE embedded containerd:
1. **with the pod**: start the agent, write a plain busybox pod's manifest, stop measuring
   when its `/pods` shows the pod Ready;
2. **idle** (`--idle-runs` times, with fresh state): start the agent and measure for as long
   as the first run took, without a pod.
The functions that ran in the first run and in none of the idle ones are the pod's: reading
its manifest, admitting, syncing, the runtime calls, the status. Counted: those functions and
the source files that hold them. Only each agent's own code is counted — nodelet's
`src/nodelet` (a profiler on every call, in every thread), the kubelet's `pkg/kubelet` and
CRI client (`k8s.io/cri-client`), by its coverage counters (`go tool covdata func`) — not the
libraries under it (client-go, apimachinery; asyncio, grpc). For nodelet the files are also
counted without the pure `model/` and the `helpers/` (what test_sync_walk calls the acting
layers); the kubelet's code has no such split.

Prints both counts and the ratio nodelet / kubelet; `--list` prints the files. Removes every
pod, resets containerd and fails if anything leaked.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import common  # bench/common.py: the runtime, its leak check, main
from nodelet import app
from support import kubeletpeer  # tests/support/kubeletpeer.py: the kubelet as a peer
from support.harness import pod_manifest  # tests/support/harness.py

REPO = Path(__file__).resolve().parent.parent
SRC = str(REPO / "src" / "nodelet") + "/"
POLL = 0.05
READY_WITHIN = 120.0
Function = tuple[str, str]  # (source file, function)
Pods = Callable[[], Awaitable[list[dict[str, Any]]]]


@dataclasses.dataclass
class Result:
    functions: set[Function]
    files: set[str]
    acting: set[str] | None = None  # nodelet: the files outside model/ and helpers/


def is_ready(items: list[dict[str, Any]]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for p in items for c in p.get("status", {}).get("conditions") or [])


async def until_ready(pods: Pods) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_WITHIN
    while not is_ready(await pods()):
        if loop.time() > deadline:
            raise common.BenchError(f"the pod was not Ready within {READY_WITHIN:g}s")
        await asyncio.sleep(POLL)


async def exercise(pods: Pods, manifests: Path, hold: float | None) -> float:
    """With `hold` None: write the pod and wait until it is Ready; else wait `hold` seconds.
    Returns the seconds it took."""
    started = time.monotonic()
    if hold is None:
        (manifests / "walk.yaml").write_text(pod_manifest("walk"))
        await until_ready(pods)
    else:
        await asyncio.sleep(hold)
    return time.monotonic() - started


def only_with_pod(with_pod: set[Function], idle: list[set[Function]]) -> Result:
    functions = with_pod - set().union(*idle)
    return Result(functions, {f for f, _ in functions})


# -- nodelet: a profiler in its process ----------------------------------------------------------


class Calls:
    """Every nodelet function called while installed, in any thread started after it was.
    Comprehensions, lambdas and module bodies are code objects of their own in Python but
    not functions in Go's count: they are left out."""

    def __init__(self) -> None:
        self.functions: set[Function] = set()

    def __call__(self, frame: FrameType, event: str, _arg: object) -> None:
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(SRC) \
                and not code.co_name.startswith("<"):
            self.functions.add((code.co_filename[len(SRC):], code.co_qualname))


async def nodelet_run(runtime: common.Runtime, dirs: list[Path],
                      hold: float | None) -> tuple[set[Function], float]:
    s = common.agent_settings(runtime, dirs, prefix="wk", node_name="walk")
    assert s.manifests_dir is not None
    manifests = s.manifests_dir
    calls = Calls()
    # A fresh executor: its threads start after the profiler, so `threading.setprofile` has them.
    asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor())
    threading.setprofile(calls)
    sys.setprofile(calls)
    agent = app.Agent(s)
    try:
        await agent.start()
        took = await exercise(common.pods_reader(agent.server_port), manifests, hold)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        for path in manifests.iterdir():
            path.unlink()
        await agent.stop()
        await remove_pods(runtime)
    return calls.functions, took


async def nodelet_walk(runtime: common.Runtime, dirs: list[Path], idle_runs: int) -> Result:
    with_pod, took = await nodelet_run(runtime, dirs, None)
    idle = [(await nodelet_run(runtime, dirs, took))[0] for _ in range(idle_runs)]
    result = only_with_pod(with_pod, idle)
    result.acting = {f for f in result.files if not f.startswith(("model/", "helpers/"))}
    return result


# -- the kubelet: Go's coverage counters ---------------------------------------------------------


def kubelet_cover() -> Path:
    subprocess.run([str(REPO / "kube" / "build.sh"), "kubelet-cover"], check=True)
    return kubeletpeer.kubelet_binary().with_name("kubelet-cover")


def covered(directory: Path) -> set[Function]:
    """The functions with a count above 0 (`go tool covdata func`: file:line: name percent)."""
    out = subprocess.run(["go", "tool", "covdata", "func", f"-i={directory}"], check=True,
                         capture_output=True, text=True).stdout
    functions: set[Function] = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[-1].endswith("%") and float(fields[-1][:-1]) > 0:
            functions.add((fields[0].rsplit(":", 2)[0], fields[1]))
    return functions


async def kubelet_run(runtime: common.Runtime, binary: Path, dirs: list[Path],
                      hold: float | None) -> tuple[set[Function], float]:
    manifests = Path(tempfile.mkdtemp(prefix="wk-k-", dir="/tmp"))
    counters = Path(tempfile.mkdtemp(prefix="wk-c-", dir="/tmp"))
    dirs += [manifests, counters]
    peer = await kubeletpeer.KubeletPeer.start(
        endpoint=runtime.runner.endpoint, manifests=manifests, node_name="walk",
        client=runtime.client, binary=binary, env={"GOCOVERDIR": str(counters)})
    try:
        took = await exercise(peer.pods, manifests, hold)
        # Its counters are written when it exits: stopped by PID (SIGTERM) before its pod is
        # removed, so stopping the pod is not counted.
        await kubeletpeer.stop_by_pid(peer.process)
        if peer.process.returncode != 0:
            raise common.BenchError(f"kubelet-cover exited {peer.process.returncode}: "
                                    f"{peer.tail()}")
    finally:
        for path in manifests.iterdir():
            path.unlink()
        await peer.kill()  # its sandboxes, mounts, directories and cgroups
        await remove_pods(runtime)
    return covered(counters), took


async def kubelet_walk(runtime: common.Runtime, dirs: list[Path], idle_runs: int) -> Result:
    binary = kubelet_cover()
    with_pod, took = await kubelet_run(runtime, binary, dirs, None)
    idle = [(await kubelet_run(runtime, binary, dirs, took))[0] for _ in range(idle_runs)]
    return only_with_pod(with_pod, idle)


async def remove_pods(runtime: common.Runtime) -> None:
    """What one run left in the runtime goes before the next starts."""
    for sandbox in await runtime.client.list_pod_sandboxes():
        await runtime.client.stop_pod_sandbox(sandbox.id)
        await runtime.client.remove_pod_sandbox(sandbox.id)


def report(results: dict[str, Result], listing: bool) -> None:
    print(f"\n{'run because of one pod':36}{'functions':>10}{'files':>8}")
    for agent, result in results.items():
        print(f"{agent:36}{len(result.functions):>10}{len(result.files):>8}")
        if result.acting is not None:
            print(f"{agent + ' without model/ and helpers/':36}{'':>10}{len(result.acting):>8}")
    if len(results) == 2:
        ours, theirs = results["nodelet"], results["kubelet"]
        print(f"{'nodelet / kubelet':36}{len(ours.functions) / len(theirs.functions):>10.2f}"
              f"{len(ours.files) / len(theirs.files):>8.2f}")
    if listing:
        for agent, result in results.items():
            print(f"\n{agent}:")
            for name in sorted(result.files):
                print(f"  {sum(1 for f, _ in result.functions if f == name):4}  {name}")


async def bench(args: argparse.Namespace) -> None:
    runtime = await common.start_runtime(prefix="wk")
    print(f"runtime: {runtime.version}; kubelet: {kubeletpeer.kube_version()} "
          f"(with coverage counters); idle runs: {args.idle_runs}", flush=True)
    results: dict[str, Result] = {}
    dirs: list[Path] = []
    try:
        results["nodelet"] = await nodelet_walk(runtime, dirs, args.idle_runs)
        results["kubelet"] = await kubelet_walk(runtime, dirs, args.idle_runs)
    finally:
        await common.teardown_runtime(runtime, dirs)
    report(results, args.list)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-runs", type=int, default=2,
                        help="runs without a pod whose functions are not counted")
    parser.add_argument("--list", action="store_true", help="print the files")
    parser.add_argument("--verbose", action="store_true")
    return common.run("bench/walk.py", bench, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
