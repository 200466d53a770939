"""API calls per pod and time to Ready under a tight QPS limit, PodReadyToStartContainers on/off.

Run as root from the checkout:  .venv/bin/python bench/apicalls.py [--pods 20] [--rounds 1]

The KEP-3085 review worried that the new condition costs one more pod status PATCH per pod and,
when the kubelet is starved of API QPS, slows pod startup. This measures it, in one run:

1. Starts the real control plane (tests/support/controlplane.py, from `make kube`'s binaries; its
   audit log at Metadata level) and an embedded containerd in a fresh data dir under /tmp (as
   tests/conftest.py does).
2. For each round, for the gate ON and OFF (alternating which goes first), a fresh in-process
   `Agent` joined by TLS bootstrap as a node of its own (`--kube-api-qps 5 --kube-api-burst 10`
   by default, every other cluster setting at its kubelet default) on that containerd. Once
   the node is Ready, N busybox pods bound to the node are created in a namespace of their own
   at once.
   - **time to Ready** = pod created in the API → a watch of the namespace first shows the pod
     with `Ready=True`;
   - **API calls per pod** = the node's requests in kube-apiserver's audit log from the
     creation of the pods until every pod is Ready in the API and the status sync has nothing
     left to send, divided by N: status PATCHes, and all verbs (node status, lease, watch,
     events included);
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
from nodelet import app
from nodelet import settings as settings_
from nodelet.adapters import kube
from nodelet.model.core import pods as pods_
from nodelet.model.core import status as st
from support import controlplane  # tests/support/controlplane.py: the real control plane

NODE = "bench-node"
READY_TIMEOUT = 120.0
REMOVE_TIMEOUT = 120.0


class Timer:
    """When each pod of a namespace first shows a True condition, from a watch of it."""

    def __init__(self, admin: controlplane.AdminClient, namespace: str) -> None:
        self.true_at: dict[tuple[str, str], float] = {}  # (pod name, condition) -> monotonic
        self._admin, self._namespace = admin, namespace

    async def run(self) -> None:
        client = self._admin.client
        path = controlplane.pod_path(self._namespace)
        while True:
            items, version = await client.list_objects(path)
            for pod in items:
                self._note(pod)
            try:
                async for event in client.watch(path, resource_version=version):
                    if event.type in ("ADDED", "MODIFIED"):
                        self._note(event.object)
            except (kube.Gone, kube.Unavailable):
                continue

    def _note(self, pod: dict[str, Any]) -> None:
        now = time.monotonic()
        name = pod["metadata"]["name"]
        for cond in pod.get("status", {}).get("conditions") or ():
            if cond.get("status") == "True":
                self.true_at.setdefault((name, cond.get("type")), now)


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


def agent_settings(runtime: common.Runtime, plane: controlplane.ControlPlane, work: Path, *,
                   node: str, gate: bool, qps: float, burst: int) -> settings_.Settings:
    base = settings_.Settings(data_dir=work / "data", node_name=node)
    return dataclasses.replace(
        base,
        runtime=dataclasses.replace(base.runtime, endpoint=runtime.runner.endpoint),
        gates=settings_.FeatureGates(pod_ready_to_start_containers=gate),
        server=dataclasses.replace(base.server, port=0),
        # Any free port: several benches (or a running nodelet) never collide on 10250.
        node_server=settings_.NodeServerSettings(address="0.0.0.0", port=0,
                                                 client_ca_file=plane.ca.cert),
        cluster=settings_.ClusterSettings(
            kubeconfig=work / "kubelet.conf", cert_dir=work / "pki",
            bootstrap_kubeconfig=plane.bootstrap_kubeconfig(work / "bootstrap.conf"),
            qps=qps, burst=burst),
    )


async def wait_for(check: Any, *, within: float, what: str) -> None:
    """Until `check()` (or, when it returns an awaitable, its result) is true."""
    deadline = time.monotonic() + within
    while True:
        seen = check()
        if asyncio.iscoroutine(seen):
            seen = await seen
        if seen:
            return
        if time.monotonic() > deadline:
            raise common.BenchError(f"{what} not seen within {within:.0f}s")
        await asyncio.sleep(0.01)


async def run_agent(runtime: common.Runtime, plane: controlplane.ControlPlane,
                    admin: controlplane.AdminClient, *, round_: int, gate: bool, pods: int,
                    qps: float, burst: int, host_network: bool) -> Result:
    work = Path(tempfile.mkdtemp(prefix="agent-", dir=runtime.data_dir))
    node = f"{NODE}-{round_}-{'on' if gate else 'off'}"
    namespace = node
    await admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    agent = app.Agent(agent_settings(runtime, plane, work, node=node, gate=gate, qps=qps,
                                     burst=burst))
    statuses: dict[pods_.PodUID, int] = {}

    def count(pod: pods_.Pod, _status: st.PodStatus) -> None:
        if pod.source == "api":
            statuses[pod.uid] = statuses.get(pod.uid, 0) + 1

    timer = Timer(admin, namespace)
    watching = asyncio.get_running_loop().create_task(timer.run(), name="bench-timer")
    try:
        await agent.start()
        agent.statuses.subscribe(count)
        await wait_for(lambda: node_ready(admin, node), within=READY_TIMEOUT,
                       what=f"node {node} Ready")
        # The service account's token (ServiceAccount admission's volume) and CA ConfigMap.
        await wait_for(lambda: admin.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/"
                                         "default"), within=READY_TIMEOUT,
                       what="the namespace's default ServiceAccount")
        return await measure(agent, plane, admin, timer, node=node, namespace=namespace,
                             gate=gate, pods=pods, host_network=host_network,
                             statuses=statuses)
    finally:
        await remove_pods(agent, admin, namespace)
        await agent.stop()
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await admin.delete(controlplane.node_path(node))
        await admin.delete(f"/api/v1/namespaces/{namespace}")
        shutil.rmtree(work, ignore_errors=True)


async def node_ready(admin: controlplane.AdminClient, node: str) -> bool:
    found = await admin.get(controlplane.node_path(node))
    return bool(controlplane.conditions(found).get("Ready", {}).get("status") == "True")


async def audit_until(plane: controlplane.ControlPlane, first: int,
                      end: datetime) -> list[dict[str, Any]]:
    """The audit events from index `first` received up to `end`; the log is written in
    batches (up to a second behind), so it is read until it holds a later one."""
    def stamp(e: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(e["requestReceivedTimestamp"].replace("Z", "+00:00"))

    deadline = time.monotonic() + 30
    while True:
        events = plane.audit_events()[first:]
        if events and stamp(events[-1]) > end:
            return [e for e in events if stamp(e) <= end]
        if time.monotonic() > deadline:
            raise common.BenchError("the audit log did not pass the end of the window")
        await asyncio.sleep(0.2)


def _calls(events: list[dict[str, Any]], node: str) -> dict[tuple[str, str], int]:
    calls: dict[tuple[str, str], int] = {}
    for e in controlplane.node_requests(events, node):
        if e.get("stage") != "ResponseComplete":
            continue
        ref = e.get("objectRef", {})
        resource = ref.get("resource", e.get("requestURI", ""))
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        calls[(e["verb"], resource)] = calls.get((e["verb"], resource), 0) + 1
    return calls


async def measure(agent: app.Agent, plane: controlplane.ControlPlane,
                  admin: controlplane.AdminClient, timer: Timer, *, node: str, namespace: str,
                  gate: bool, pods: int, host_network: bool,
                  statuses: dict[pods_.PodUID, int]) -> Result:
    cluster = agent.cluster
    assert cluster is not None
    names = [f"p{n:03d}" for n in range(pods)]
    first = len(plane.audit_events())
    start = time.monotonic()
    # No cluster DNS here: ClusterFirst would add a MissingClusterDNS event per pod.
    spec: dict[str, Any] = {"dnsPolicy": "Default"}
    if host_network:
        spec["hostNetwork"] = True
    uids = [(await admin.create(controlplane.pod_path(namespace), controlplane.pod(
        n, node=node, scheduler=False, **spec)))["metadata"]["uid"] for n in names]
    await wait_for(lambda: all((n, st.READY) in timer.true_at for n in names),
                   within=READY_TIMEOUT, what=f"{pods} pods Ready in the API")
    await wait_for(lambda: all(cluster.status_sync.in_sync(pods_.PodUID(u)) for u in uids),
                   within=READY_TIMEOUT, what="status sync idle")
    seconds = time.monotonic() - start
    calls = _calls(await audit_until(plane, first, datetime.now(UTC)), node)
    found = await admin.items(controlplane.pod_path(namespace))
    with_condition = sum(1 for p in found
                         if st.POD_READY_TO_START_CONTAINERS in controlplane.conditions(p))
    if with_condition != (pods if gate else 0):
        raise common.BenchError(f"gate {'on' if gate else 'off'}: {with_condition} of {pods} "
                                "pods have PodReadyToStartContainers in the API")
    sandbox = [timer.true_at[(n, st.POD_READY_TO_START_CONTAINERS)] - start for n in names
               if (n, st.POD_READY_TO_START_CONTAINERS) in timer.true_at]
    return Result(
        gate=gate, pods=pods, seconds=seconds,
        ready=[timer.true_at[(n, st.READY)] - start for n in names],
        sandbox_ready=sandbox, statuses=sum(statuses.values()),
        with_condition=with_condition, calls=calls,
        status_patches=calls.get(("patch", "pods/status"), 0))


async def remove_pods(agent: app.Agent, admin: controlplane.AdminClient,
                      namespace: str) -> None:
    """Graceful deletes in the API; nodelet terminates the pods and deletes them for good."""
    path = controlplane.pod_path(namespace)
    for pod in await admin.items(path):
        await admin.delete(controlplane.pod_path(namespace, pod["metadata"]["name"]))
    if agent.cluster is None:
        return

    async def gone() -> bool:
        return not await admin.items(path) and not agent.pods()

    await wait_for(gone, within=REMOVE_TIMEOUT, what="pods removed")


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
    plane = await asyncio.to_thread(controlplane.ControlPlane.start)
    runtime = await common.start_runtime(prefix="nla-")
    results: list[Result] = []
    try:
        async with plane.admin() as admin:
            await rounds(runtime, plane, admin, args, results)
    finally:
        await common.teardown_runtime(runtime)
        plane.stop()
    report(results, args, runtime)


async def rounds(runtime: common.Runtime, plane: controlplane.ControlPlane,
                 admin: controlplane.AdminClient, args: argparse.Namespace,
                 results: list[Result]) -> None:
    for round_ in range(args.rounds):
        order = (True, False) if round_ % 2 == 0 else (False, True)
        for gate in order:
            result = await run_agent(runtime, plane, admin, round_=round_, gate=gate,
                                     pods=args.pods, qps=args.qps, burst=args.burst,
                                     host_network=args.host_network)
            print(f"round {round_ + 1}, gate {'ON ' if gate else 'OFF'}: "
                  f"{result.status_patches} status PATCHes, {result.all_calls} calls, "
                  f"{result.statuses} statuses, {result.with_condition} pods with the "
                  f"condition, Ready p50 "
                  f"{common.percentile(result.ready, 50):.2f} s, all Ready "
                  f"{max(result.ready):.2f} s")
            results.append(result)


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
