"""A container writing its log as fast as it can, on nodelet and on the real kubelet: disk used.

Run as root from the checkout (after `make kube`, which builds the kubelet):
    .venv/bin/python bench/logflood.py [--seconds 60] [--no-kubelet]

1. Starts ONE embedded containerd in a fresh data dir under /tmp (`common.start_runtime`).
2. For each agent in turn — nodelet (an in-process `Agent` with its defaults: 10Mi, 5 files,
   checked every 10 s) and then the kubelet (`tests/support/kubeletpeer.py`, standalone with its
   defaults but for what these machines force; the same log defaults) — on that containerd:
   one pod whose container runs `yes` with a 200-byte line, unthrottled. From the moment
   its container is seen running, `--seconds` later: the disk used by its log directory
   (allocated blocks of every file in it), its mean and largest over samples every 0.5 s,
   and the files. Then the pod is deleted and, once the agent no longer serves it: what is left of
   its logs, and how long until nothing is (at most 120 s).
3. Prints both, resets containerd and fails if anything leaked.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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
from nodelet import settings as settings_
from support import kubeletpeer  # tests/support/kubeletpeer.py: the kubelet as a peer

BUSYBOX = "localhost/nodelet/busybox:latest"
NAME = "flood"
MANIFEST = f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {NAME}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: {BUSYBOX}
      imagePullPolicy: IfNotPresent
      command: [sh, -c, 'exec yes $(printf %0200d 7)']
"""
SAMPLE = 0.5
# How long, after the pod left /pods, its logs may take to go (the kubelet's GC runs each minute).
CLEARED_WITHIN = 120.0
Pods = Callable[[], Awaitable[list[dict[str, Any]]]]


def used(directory: Path) -> tuple[int, list[str]]:
    """Bytes allocated to the files under `directory`, and their names."""
    total, names = 0, []
    for path in sorted(directory.rglob("*")) if directory.exists() else ():
        try:
            if path.is_file():
                total += path.stat().st_blocks * 512
                names.append(f"{path.name} ({path.stat().st_size / 2**20:.1f} MiB)")
        except FileNotFoundError:
            continue
    return total, names


async def _pod(pods: Pods) -> dict[str, Any] | None:
    try:
        found = [p for p in await pods() if p["metadata"]["name"].startswith(NAME)]
    except (aiohttp.ClientError, OSError):
        return None
    return found[0] if found else None


async def until(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise common.BenchError(f"{what} not seen within {within}s")
        await asyncio.sleep(0.1)


async def flood(agent: str, pods: Pods, manifests: Path, logs: Path,
                seconds: float) -> dict[str, Any]:
    (manifests / f"{NAME}.yaml").write_text(MANIFEST)

    async def running() -> bool:
        pod = await _pod(pods)
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
        return "running" in (statuses[0].get("state") or {})

    await until(running, 60, f"{agent}: flood running")
    began, samples = time.monotonic(), []
    while time.monotonic() - began < seconds:
        samples.append(used(logs)[0])
        await asyncio.sleep(SAMPLE)
    after, files = used(logs)
    samples.append(after)
    peak, mean = max(samples), sum(samples) / len(samples)
    (manifests / f"{NAME}.yaml").unlink()

    async def gone() -> bool:
        return await _pod(pods) is None

    await until(gone, 60, f"{agent}: flood deleted")
    deleted = time.monotonic()
    left, left_files = used(logs)
    while used(logs)[0] and time.monotonic() - deleted < CLEARED_WITHIN:
        await asyncio.sleep(SAMPLE)
    cleared = time.monotonic() - deleted if not used(logs)[0] else float("nan")
    return {"after": after, "peak": peak, "mean": mean, "files": files, "left": left,
            "left_files": left_files, "cleared": cleared}


async def on_nodelet(runtime: common.Runtime, seconds: float,
                     dirs: list[Path]) -> dict[str, Any]:
    manifests = Path(tempfile.mkdtemp(prefix="lf-m-", dir="/tmp"))
    data = Path(tempfile.mkdtemp(prefix="lf-d-", dir="/tmp"))
    dirs += [manifests, data]
    s = dataclasses.replace(
        settings_.Settings(data_dir=data, manifests_dir=manifests, node_name="bench"),
        runtime=dataclasses.replace(runtime.settings.runtime, endpoint=runtime.runner.endpoint),
        server=dataclasses.replace(settings_.Settings().server, port=kubeletpeer.free_port()),
        node_server=dataclasses.replace(settings_.Settings().node_server, address="127.0.0.1",
                                        port=0))
    agent = app.Agent(s)
    await agent.start()
    url = f"http://127.0.0.1:{agent.server_port}/pods"

    async def pods() -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return list((await response.json()).get("items") or [])

    try:
        return await flood("nodelet", pods, manifests, data / "logs", seconds)
    finally:
        await agent.stop()


async def on_kubelet(runtime: common.Runtime, seconds: float,
                     dirs: list[Path]) -> dict[str, Any]:
    manifests = Path(tempfile.mkdtemp(prefix="lf-k-", dir="/tmp"))
    dirs.append(manifests)
    peer = await kubeletpeer.KubeletPeer.start(endpoint=runtime.runner.endpoint,
                                               manifests=manifests, client=runtime.client)
    try:
        return await flood("kubelet", peer.pods, manifests, peer.root / "logs", seconds)
    finally:
        await peer.stop()


def report(results: dict[str, dict[str, Any]], seconds: float) -> None:
    mib = 2**20
    print(f"\n{'':34}" + "".join(f"{a:>14}" for a in results))
    for key, label in (("after", f"log disk used after {seconds:g} s (MiB)"),
                       ("mean", "mean of the 0.5 s samples (MiB)"),
                       ("peak", "the most at any sample (MiB)"),
                       ("left", "left after the pod was deleted (MiB)")):
        print(f"{label:34}" + "".join(f"{r[key] / mib:14.1f}" for r in results.values()))
    print(f"{'s after deletion until none left':34}"
          + "".join(f"{r['cleared']:14.1f}" for r in results.values()))
    for agent, r in results.items():
        print(f"  {agent} files after {seconds:g} s: {', '.join(r['files'])}")
        print(f"  {agent} left after deletion: {', '.join(r['left_files']) or 'nothing'}")
    if len(results) == 2:
        n, k = results["nodelet"]["after"], results["kubelet"]["after"]
        print(f"nodelet / kubelet disk used after {seconds:g} s: {n / k:.2f}; mean "
              f"{results['nodelet']['mean'] / results['kubelet']['mean']:.2f}")


async def bench(args: argparse.Namespace) -> None:
    runtime = await common.start_runtime(prefix="lf")
    print(f"runtime: {runtime.version}; kubelet: "
          f"{'not run' if args.no_kubelet else kubeletpeer.kube_version()}; "
          f"flood: {args.seconds:g} s", flush=True)
    results: dict[str, dict[str, Any]] = {}
    dirs: list[Path] = []
    try:
        results["nodelet"] = await on_nodelet(runtime, args.seconds, dirs)
        if not args.no_kubelet:
            results["kubelet"] = await on_kubelet(runtime, args.seconds, dirs)
    finally:
        await common.teardown_runtime(runtime, dirs)
    report(results, args.seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--no-kubelet", action="store_true",
                        help="nodelet only (no kubelet built)")
    parser.add_argument("--verbose", action="store_true")
    return common.run("bench/logflood.py", bench, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
