"""API calls per pod and time to Ready under a tight QPS limit, PodReadyToStartContainers on/off.

Run as root from the checkout:  .venv/bin/python bench/apicalls.py [--pods 20] [--rounds 1]

The KEP-3085 review worried that the new condition costs one more pod status PATCH per pod and,
when the kubelet is starved of API QPS, slows pod startup. This measures it, in one run:

1. Starts an embedded containerd in a fresh data dir under /tmp (as tests/conftest.py does).
2. For each round, for the gate ON and OFF (alternating which goes first), a fresh test API
   server (`tests/kubeapi.py`, with a request log) and a fresh in-process `Agent` joined to it
   (`--kube-api-qps 5 --kube-api-burst 10` by default, every other cluster setting at its
   kubelet default) on that containerd. Once the node is registered, N busybox pods bound to
   the node are created in the API at once.
   - **time to Ready** = pod created in the API → the API object first shows `Ready=True`
     (recorded inside the server when it stores the write);
   - **API calls per pod** = requests in the server's log from the creation of the pods until
     every pod is Ready in the API and the status sync has nothing left to send, divided by N:
     status PATCHes, and all verbs (node status, lease, watch, events included);
   - **statuses per pod** = statuses the status manager produced for the pods (each a PATCH
     without coalescing).
   `--host-network` runs hostNetwork pods, whose IP is known from the first status: for them
   the condition turning True is the only news when the sandbox is ready.
3. Deletes the pods in the API (graceful), waits until nodelet terminated and deleted them,
   stops the agent; at the end resets the containerd instance and fails if anything leaked.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import common  # bench/common.py: the runtime, its leak check, main
from kubeapi import KubeApiServer, pod_object  # the tests' API server
from nodelet import app
from nodelet import settings as settings_
from nodelet.model.core import pods as pods_
from nodelet.model.core import status as st

NODE = "bench-node"
READY_TIMEOUT = 120.0
REMOVE_TIMEOUT = 120.0


class TimedApiServer(KubeApiServer):
    """The test API server, noting when each pod's stored status first has a True condition."""

    def __init__(self) -> None:
        super().__init__(bookmark_interval=1.0)
        self.true_at: dict[tuple[str, str], float] = {}  # (pod name, condition) -> monotonic

    def _commit(self, plural: str, type_: str, old: Any, new: Any) -> Any:
        answer = super()._commit(plural, type_, old, new)
        if plural == "pods" and type_ != "DELETED":
            name = new["metadata"]["name"]
            for cond in new.get("status", {}).get("conditions") or ():
                if cond.get("status") == "True":
                    self.true_at.setdefault((name, cond.get("type")), time.monotonic())
        return answer


# -- one agent ------------------------------------------------------------------------------------


@dataclass
class Result:
    gate: bool
    pods: int
    seconds: float
    ready: list[float]
    sandbox_ready: list[float]
    statuses: int
    with_condition: int  # pods whose API status has PodReadyToStartContainers at the end
    calls: dict[tuple[str, str], int] = field(default_factory=dict)  # (verb, resource) -> n
    status_patches: int = 0

    @property
    def all_calls(self) -> int:
        return sum(self.calls.values())


def agent_settings(runtime: common.Runtime, server: KubeApiServer, work: Path, *,
                   gate: bool, qps: float, burst: int) -> settings_.Settings:
    base = settings_.Settings(data_dir=work / "data", node_name=NODE)
    return dataclasses.replace(
        base,
        runtime=dataclasses.replace(base.runtime, endpoint=runtime.runner.endpoint),
        gates=settings_.FeatureGates(pod_ready_to_start_containers=gate),
        server=dataclasses.replace(base.server, port=0),
        # Any free port: several benches (or a running nodelet) never collide on 10250.
        node_server=settings_.NodeServerSettings(address="127.0.0.1", port=0),
        cluster=settings_.ClusterSettings(
            kubeconfig=server.write_kubeconfig(work / "kubeconfig"), qps=qps, burst=burst),
    )


async def wait_for(check: Any, *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise common.BenchError(f"{what} not seen within {within:.0f}s")
        await asyncio.sleep(0.01)


async def run_agent(runtime: common.Runtime, *, gate: bool, pods: int, qps: float,
                    burst: int, host_network: bool) -> Result:
    work = Path(tempfile.mkdtemp(prefix="agent-", dir=runtime.data_dir))
    server = TimedApiServer(node=NODE)
    await server.start()
    agent = app.Agent(agent_settings(runtime, server, work, gate=gate, qps=qps, burst=burst))
    statuses: dict[pods_.PodUID, int] = {}

    def count(pod: pods_.Pod, _status: st.PodStatus) -> None:
        if pod.source == "api":
            statuses[pod.uid] = statuses.get(pod.uid, 0) + 1

    try:
        await agent.start()
        agent.statuses.subscribe(count)
        return await measure(agent, server, gate=gate, pods=pods, host_network=host_network,
                             statuses=statuses)
    finally:
        await remove_pods(agent, server)
        await agent.stop()
        await server.stop()
        shutil.rmtree(work, ignore_errors=True)


async def measure(agent: app.Agent, server: TimedApiServer, *, gate: bool, pods: int,
                  host_network: bool, statuses: dict[pods_.PodUID, int]) -> Result:
    cluster = agent.cluster
    assert cluster is not None
    names = [f"p{n:03d}" for n in range(pods)]
    first = len(server.requests)
    start = time.monotonic()
    spec = {"hostNetwork": True} if host_network else {}
    uids = [server.create("pods", pod_object(n, node=NODE, grace=1, **spec))["metadata"]["uid"]
            for n in names]
    await wait_for(lambda: all((n, st.READY) in server.true_at for n in names),
                   within=READY_TIMEOUT, what=f"{pods} pods Ready in the API")
    await wait_for(lambda: all(cluster.status_sync.in_sync(pods_.PodUID(u)) for u in uids),
                   within=READY_TIMEOUT, what="status sync idle")
    seconds = time.monotonic() - start
    window = server.requests[first:]
    calls: dict[tuple[str, str], int] = {}
    for r in window:
        key = (r.verb, f"{r.resource}/{r.subresource}" if r.subresource else r.resource)
        calls[key] = calls.get(key, 0) + 1
    with_condition = sum(
        1 for n in names
        if any(c.get("type") == st.POD_READY_TO_START_CONTAINERS for c in (
            server.get("pods", "default", n) or {}).get("status", {}).get("conditions", [])))
    if with_condition != (pods if gate else 0):
        raise common.BenchError(f"gate {'on' if gate else 'off'}: {with_condition} of {pods} "
                                "pods have PodReadyToStartContainers in the API")
    sandbox = [server.true_at[(n, st.POD_READY_TO_START_CONTAINERS)] - start for n in names
               if (n, st.POD_READY_TO_START_CONTAINERS) in server.true_at]
    return Result(
        gate=gate, pods=pods, seconds=seconds,
        ready=[server.true_at[(n, st.READY)] - start for n in names],
        sandbox_ready=sandbox, statuses=sum(statuses.values()),
        with_condition=with_condition, calls=calls,
        status_patches=calls.get(("patch", "pods/status"), 0))


async def remove_pods(agent: app.Agent, server: KubeApiServer) -> None:
    """Graceful deletes in the API; nodelet terminates the pods and deletes them for good."""
    for pod in server.list_objects("pods"):
        server.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
    if agent.cluster is None:
        return
    await wait_for(lambda: not server.list_objects("pods") and not agent.pods(),
                   within=REMOVE_TIMEOUT, what="pods removed")


# -- the report -----------------------------------------------------------------------------------


def merged(results: Sequence[Result], gate: bool) -> Result:
    mine = [r for r in results if r.gate == gate]
    calls: dict[tuple[str, str], int] = {}
    for r in mine:
        for key, n in r.calls.items():
            calls[key] = calls.get(key, 0) + n
    return Result(gate=gate, pods=sum(r.pods for r in mine), seconds=sum(r.seconds for r in mine),
                  ready=[x for r in mine for x in r.ready],
                  sandbox_ready=[x for r in mine for x in r.sandbox_ready],
                  statuses=sum(r.statuses for r in mine),
                  with_condition=sum(r.with_condition for r in mine), calls=calls,
                  status_patches=sum(r.status_patches for r in mine))


def report(results: Sequence[Result], args: argparse.Namespace,
           runtime: common.Runtime) -> None:
    on, off = merged(results, True), merged(results, False)
    kind = "hostNetwork " if args.host_network else ""
    print(f"\nbench/apicalls: {args.pods} {kind}pods x {args.rounds} round(s) per side, QPS "
          f"{args.qps:g} / burst {args.burst}, {os.cpu_count()} cores, {runtime.version}, "
          f"{platform.python_implementation()} {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d}")
    rows: list[tuple[str, float, float]] = [
        ("status PATCHes per pod", on.status_patches / on.pods, off.status_patches / off.pods),
        ("all API calls per pod", on.all_calls / on.pods, off.all_calls / off.pods),
        ("statuses generated per pod", on.statuses / on.pods, off.statuses / off.pods),
        ("time to Ready p50 (s)",
         common.percentile(on.ready, 50), common.percentile(off.ready, 50)),
        ("time to Ready p99 (s)",
         common.percentile(on.ready, 99), common.percentile(off.ready, 99)),
        ("all Ready (s)", max(on.ready), max(off.ready)),
    ]
    print(f"{'':30} {'gate ON':>10} {'gate OFF':>10} {'ON/OFF':>8}")
    for label, a, b in rows:
        print(f"{label:30} {a:10.2f} {b:10.2f} {a / b if b else float('nan'):8.2f}")
    if on.sandbox_ready:
        p50 = common.percentile(on.sandbox_ready, 50)
        print(f"{'PodReadyToStartContainers p50':30} {p50:10.2f}"
              f" (s after creation, gate ON only)")
    print("\ncalls in the window (verb resource: ON / OFF):")
    for key in sorted(set(on.calls) | set(off.calls)):
        print(f"  {key[0]:7} {key[1]:22} {on.calls.get(key, 0):5} / {off.calls.get(key, 0)}")


async def bench(args: argparse.Namespace) -> None:
    runtime = await common.start_runtime(prefix="nla-")
    results: list[Result] = []
    try:
        for round_ in range(args.rounds):
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for gate in order:
                result = await run_agent(runtime, gate=gate, pods=args.pods, qps=args.qps,
                                         burst=args.burst, host_network=args.host_network)
                print(f"round {round_ + 1}, gate {'ON ' if gate else 'OFF'}: "
                      f"{result.status_patches} status PATCHes, {result.all_calls} calls, "
                      f"{result.statuses} statuses, {result.with_condition} pods with the "
                      f"condition, Ready p50 "
                      f"{common.percentile(result.ready, 50):.2f} s, all Ready "
                      f"{max(result.ready):.2f} s")
                results.append(result)
    finally:
        await common.teardown_runtime(runtime)
    report(results, args, runtime)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=20, help="pods per agent (1-200)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="ON/OFF pairs, alternating which goes first")
    parser.add_argument("--qps", type=float, default=5.0, help="--kube-api-qps of the agents")
    parser.add_argument("--burst", type=int, default=10, help="--kube-api-burst of the agents")
    parser.add_argument("--host-network", action="store_true",
                        help="hostNetwork pods: their IP is known before the sandbox, so the "
                        "condition is the only news when the sandbox is ready")
    parser.add_argument("-v", "--verbose", action="store_true", help="nodelet's INFO logs")
    args = parser.parse_args(argv)
    if not 1 <= args.pods <= 200:
        parser.error("--pods must be 1-200 (the pod CIDR is a /24)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return common.run("bench/apicalls.py", bench, args)


if __name__ == "__main__":
    sys.exit(main())
