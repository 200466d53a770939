"""What the runtime benchmarks share: an embedded containerd to measure on, its leak check, `main`.

`bench/startup.py` and `bench/apicalls.py` import this as a sibling module (each script's
directory is first on `sys.path`). Not named `harness`: apicalls puts `tests/` in front of
`sys.path`, and `tests/support/harness.py` would shadow it. Errors: a benchmark that could
not measure raises `BenchError`; `run` prints it and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from nodelet import settings as settings_
from nodelet.adapters import cni, containerd, mounts
from nodelet.adapters.cri import client as cri
from nodelet.services.nodehealth import resetting


class BenchError(Exception):
    """The benchmark could not measure (a pod failed, a deadline passed, something leaked)."""


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); with 20-30 samples p99 is close to the max."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (containerd's own CPU; shims and runc are separate)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# -- the runtime under test ---------------------------------------------------------------------


@dataclass
class Runtime:
    data_dir: Path
    settings: settings_.Settings
    runner: containerd.EmbeddedContainerd
    client: cri.RuntimeClient
    version: str = ""  # "containerd v1.7.x", from the CRI Version call
    # Network namespaces of sandboxes the benchmark removed itself: checked again at teardown.
    netns_seen: set[str] = field(default_factory=set)


# `--runtimes`: which containerd the benchmark measures on, in one run, one after the other.
RUNTIME_CHOICES = ("built", "system")


def add_runtimes_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtimes", default="built,system",
        help="comma-separated: 'built' (containerd 2.x of `make runtime`) and/or 'system' "
             "(the containerd on PATH, e.g. Debian's 1.6); each is measured in turn "
             "(default: built,system)")


def runtimes(args: argparse.Namespace) -> list[tuple[str, Path | None]]:
    """(label, runtime_bin_dir) of each `--runtimes` entry; BenchError when one is missing."""
    chosen = []
    for name in filter(None, (n.strip() for n in args.runtimes.split(","))):
        if name not in RUNTIME_CHOICES:
            raise BenchError(f"--runtimes: {name!r} is not one of {', '.join(RUNTIME_CHOICES)}")
        bin_dir = settings_.built_runtime_dir() if name == "built" else None
        if name == "built" and bin_dir is None:
            raise BenchError("--runtimes built: containerd 2.x is not built (run `make runtime`)")
        chosen.append((name, bin_dir))
    if not chosen:
        raise BenchError("--runtimes: name at least one runtime")
    return chosen


async def start_runtime(*, prefix: str, pod_cidr: str | None = None, pod_prefix_len: int = 24,
                        bin_dir: Path | str | None = "default") -> Runtime:
    """An embedded containerd in a fresh, short data dir /tmp/<prefix>… (as tests/conftest.py),
    its pods in `pod_cidr` (default: the /24 derived from the data dir, or the network of
    `pod_prefix_len` bits around it, e.g. 22 for more than 250 pods), its programs from
    `bin_dir` (None: PATH; "default": the settings' default, the checkout's build)."""
    data_dir = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base = settings_.RuntimeSettings()
    derived = ipaddress.ip_network(cni.default_pod_cidr(data_dir))
    if pod_prefix_len < derived.prefixlen:
        derived = derived.supernet(new_prefix=pod_prefix_len)
    runtime = dataclasses.replace(
        base,
        runtime_bin_dir=base.runtime_bin_dir if isinstance(bin_dir, str) else bin_dir,
        pod_cidrs=(pod_cidr or str(derived),),
        ready_timeout=30.0,
        timeouts=settings_.CriTimeouts(default=30.0, run_sandbox=60.0, connect=5.0),
    )
    settings = settings_.Settings(data_dir=data_dir, runtime=runtime)
    runner = containerd.EmbeddedContainerd(data_dir=data_dir, settings=runtime)
    try:
        await runner.start()
        client = await cri.RuntimeClient.connect(runner.endpoint, timeouts=runtime.timeouts)
        await runner.wait_ready(client)
        version = await client.version()
    except BaseException:
        await runner.detach()
        await resetting.reset(settings)
        raise
    return Runtime(data_dir, settings, runner, client,
                   f"{version.runtime_name} {version.runtime_version}")


def agent_settings(runtime: Runtime, dirs: list[Path], *, prefix: str,
                   node_name: str) -> settings_.Settings:
    """An in-process agent's settings on `runtime`, its defaults otherwise: fresh manifest and
    data dirs under /tmp (added to `dirs`, which the teardown removes), the HTTP API and the
    node server on free loopback ports (`Agent.server_port` once started)."""
    manifests = Path(tempfile.mkdtemp(prefix=f"{prefix}-m-", dir="/tmp"))
    data = Path(tempfile.mkdtemp(prefix=f"{prefix}-d-", dir="/tmp"))
    dirs += [manifests, data]
    base = settings_.Settings(data_dir=data, manifests_dir=manifests, node_name=node_name)
    return dataclasses.replace(
        base,
        runtime=dataclasses.replace(runtime.settings.runtime, endpoint=runtime.runner.endpoint),
        server=dataclasses.replace(base.server, port=0),
        node_server=dataclasses.replace(base.node_server, address="127.0.0.1", port=0))


def pods_reader(port: int) -> Callable[[], Coroutine[Any, Any, list[dict[str, Any]]]]:
    """Reads the items of an agent's `/pods` on `port`."""
    url = f"http://127.0.0.1:{port}/pods"

    async def pods() -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            items: list[dict[str, Any]] = (await response.json()).get("items") or []
            return items
    return pods


async def teardown_runtime(runtime: Runtime, extra_dirs: Sequence[Path] = ()) -> None:
    """Reset the instance (every pod, containerd, network, data dir), remove `extra_dirs` and
    raise `BenchError` when anything of it is left on the host."""
    await runtime.client.close()
    await runtime.runner.detach()
    report = await resetting.reset(runtime.settings)
    for directory in extra_dirs:
        # An agent's shared bind of its pods dir outlives it (as `nodelet run`'s does).
        for point in mounts.mounts_under(directory):
            mounts.detach(point)
        shutil.rmtree(directory, ignore_errors=True)
    left = await leftovers(runtime, extra_dirs)
    print(f"reset: removed {len(report.containers)} containers, {len(report.sandboxes)} "
          f"sandboxes; leftovers: {left}")
    if report.errors or any(left.values()):
        raise BenchError(f"instance {runtime.data_dir} leaked: {left}; errors {report.errors}")


async def leftovers(runtime: Runtime, extra_dirs: Sequence[Path]) -> dict[str, object]:
    """What of the instance still exists on the host (all empty/False when clean)."""
    netns = [p for p in runtime.netns_seen if os.path.exists(p)]
    netns += await cni.instance_netns(runtime.data_dir)
    return {
        "netns": netns,
        "veths": await cni.bridge_ports(runtime.data_dir),
        "bridge": await cni.bridge_exists(runtime.data_dir),
        "mounts": mounts.mounts_under(runtime.data_dir),
        "processes": processes_mentioning(runtime.data_dir),
        "dirs": [str(d) for d in (runtime.data_dir, *extra_dirs) if d.exists()],
    }


def processes_mentioning(path: Path) -> list[int]:
    """PIDs whose command line names `path` (containerd, shims): none after a reset."""
    found = []
    needle = str(path).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


# -- main ---------------------------------------------------------------------------------------


def run(
    script: str,
    bench: Callable[[argparse.Namespace], Coroutine[Any, Any, None]],
    args: argparse.Namespace,
) -> int:
    """Run `bench(args)` as root with logging set up (`args.verbose`: nodelet's INFO logs).

    Exit status: 0 measured, 1 `BenchError` (printed), 2 not root."""
    if os.geteuid() != 0:
        print(f"{script} needs root (containerd, runc and CNI plugins)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(bench(args))
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[list[int]]:
    """`count` processes that spin on a CPU each (a bench's `--load`) for the whole run, so
    that everything is measured on a loaded machine; their PIDs are printed, and they are
    stopped by PID at the end."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                for _ in range(count)]
    pids = [p.pid for p in spinners]
    if pids:
        print(f"load: {len(pids)} busy processes (pids {' '.join(map(str, pids))})",
              flush=True)
    try:
        yield pids
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait(timeout=10)
