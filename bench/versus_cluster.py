"""nodelet and the real kubelet as nodes of one real control plane: a Deployment to Ready and the
node's API requests per pod (from the audit log); nodelet / kubelet last.

Run as root from the checkout (after `make runtime kube`):
    .venv/bin/python bench/versus_cluster.py [--replicas 30] [--rounds 1] [--agents nodelet,kubelet]

1. One control plane for the whole run (tests/support/controlplane.py: etcd, kube-apiserver with the
   Node authorizer, NodeRestriction and an audit log at Metadata level, kube-controller-manager
   with the CSR approver, kube-scheduler).
2. Each agent in turn, the order alternating over `--rounds`, on an embedded containerd of its
   own (a fresh `common.start_runtime` per agent and round, with the pause and busybox images
   imported: the kubelet kills every running pod of its runtime that it does not know), joins
   by TLS bootstrap with the plane's bootstrap token as node `vsc-<agent>-<round>`:
   - **nodelet**: `nodelet run` as a subprocess with its defaults (its cluster settings are the
     kubelet's: qps 50 / burst 100, node status and Lease every 10 s), its own data dir, ports
     and cgroup root, the kubelet's default node-server authentication (webhook, cluster CA);
   - **kubelet**: `kubeletpeer.JoinedKubelet` (its defaults but what these machines force,
     `kubeletpeer.join_config_for`).
   Both are separate processes, measured the same way, one at a time.
3. Once its Node is Ready and untainted, and SETTLE seconds more (its registration's requests
   are not counted), a Deployment of `--replicas` busybox pods pinned to the node (nodeSelector
   kubernetes.io/hostname; imagePullPolicy IfNotPresent, the image already in its containerd)
   is created by the admin; its pods are listed every 0.2 s until every one is Ready; then it is
   scaled to 0 and listed until every pod is gone from the API.
4. From the audit log: every request of user `system:node:<node>` received from the creation
   until every pod was gone, counted once each (by auditID: a watch still open counts too), by
   verb and resource; the same up to all Ready; the answers that were errors (not 2xx, and not
   404/409, which a node gets in normal work). The agent's CPU seconds over that window.
5. The node removed: drained, the agent stopped by PID, its Node deleted, its runtime reset
   and checked for leftovers (the run fails on any).
6. Prints a table (nodelet | kubelet | nodelet/kubelet), the requests per pod by verb and
   resource, the error answers, and the ratios last; versions and load average in the header.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))

import common  # bench/common.py: the runtime, its leak check, main
import nodelet
import versus  # bench/versus.py: CPU seconds, the versions line, resetting nodelet
from support import (
    controlplane,  # tests/support/controlplane.py: the real control plane
    kubeletpeer,  # tests/support/kubeletpeer.py: the kubelet as a peer
)
from support.controlplane import AdminClient, ControlPlane

NODELET = Path(sys.executable).parent / "nodelet"
AGENTS = ("nodelet", "kubelet")
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
POLL = 0.2
# After the Node is Ready: its first status updates and image list are sent, then the window.
SETTLE = 5.0
# Deadlines only catch a hang (the first kubelet start, a CSR approval, 2 busy cores).
JOIN_WITHIN = 120.0
START_WITHIN = 60.0
PER_POD_WITHIN = 3.0
REMOVE_WITHIN = 120.0
FLUSH_WITHIN = 10.0  # the audit log is written in batches of up to 1 s
# Answers a node gets in normal work: an object that is gone (404) or changed meanwhile (409).
EXPECTED = (404, 409)
# The node's own upkeep (its Node status, its Lease): periodic, so it grows with the window.
UPKEEP = ("nodes", "nodes/status", "leases")
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


# -- the two agents as nodes --------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A joined agent: its node name and process, how to read its log and check it runs."""

    agent: str
    name: str
    pid: int
    tail: Callable[[], str]
    alive: Callable[[], None]


async def poll(check: Callable[[], Awaitable[bool]], within: float, what: str,
               node: Node | None = None) -> None:
    """Await `check()` every POLL s until it is true; BenchError (with the agent's log) after
    `within` s or once the agent has exited."""
    deadline = time.monotonic() + within
    while not await check():
        if node is not None:
            node.alive()
        if time.monotonic() > deadline:
            raise common.BenchError(f"{what} not within {within:g}s\n"
                                    f"{node.tail() if node else ''}")
        await asyncio.sleep(POLL)


async def wait_schedulable(admin: AdminClient, node: Node) -> None:
    """Its Node Ready and without the not-ready taint (the node-lifecycle controller removes it
    a moment later): pods can be placed on it."""
    async def ready() -> bool:
        found = await admin.get(controlplane.node_path(node.name))
        taints = (found or {}).get("spec", {}).get("taints") or []
        return kubeletpeer.node_ready(found) and not any(
            t.get("key") == NOT_READY_TAINT for t in taints)

    await poll(ready, JOIN_WITHIN, f"{node.agent}: node {node.name} Ready", node)


@contextlib.asynccontextmanager
async def kubelet_node(plane: ControlPlane, admin: AdminClient, runtime: common.Runtime,
                       work: Path, name: str) -> AsyncIterator[Node]:
    """The kubelet joined as node `name`; on leaving, drained, stopped, its Node deleted and
    what it left removed (`JoinedKubelet.stop`); BenchError on leftovers."""
    peer = await kubeletpeer.JoinedKubelet.join(
        endpoint=runtime.runner.endpoint, client_ca=plane.ca.cert, node_name=name,
        bootstrap_kubeconfig=plane.bootstrap_kubeconfig(work / f"{name}-bootstrap.conf"),
        client=runtime.client)
    try:
        await peer.wait_ready(admin, within=JOIN_WITHIN)
        yield Node("kubelet", name, peer.process.pid, peer.tail, peer.alive)
    finally:
        await peer.stop(admin, within=REMOVE_WITHIN)
    left = await peer.leftovers(admin)
    if any(left.values()):
        raise common.BenchError(f"the kubelet left: {left}")


def nodelet_argv(plane: ControlPlane, top: Path, endpoint: str, name: str,
                 cgroup_root: str) -> list[str]:
    """`nodelet run` joined to `plane`, with its defaults but for its own dirs, ports and
    cgroup root, and the kubelet's default node-server authentication (as the kubelet peer)."""
    return [str(NODELET), "run", "--data-dir", str(top / "data"), "--node-name", name,
            "--runtime-endpoint", endpoint,
            "--bootstrap-kubeconfig", str(plane.bootstrap_kubeconfig(top / "bootstrap.conf")),
            "--kubeconfig", str(top / "kubelet.conf"), "--cert-dir", str(top / "pki"),
            "--port", str(kubeletpeer.free_port()), "--address", "0.0.0.0",
            "--client-ca-file", str(plane.ca.cert), "--authorization-mode", "Webhook",
            "--authentication-token-webhook",
            "--listen", f"127.0.0.1:{kubeletpeer.free_port()}", "--cgroup-root", cgroup_root,
            "--progress", "never"]


@contextlib.asynccontextmanager
async def nodelet_node(plane: ControlPlane, admin: AdminClient, runtime: common.Runtime,
                       work: Path, name: str) -> AsyncIterator[Node]:
    """`nodelet run` joined as node `name`; on leaving, drained, stopped by PID, its Node
    deleted and its instance reset (`nodelet reset`'s code); BenchError on leftovers."""
    top = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    cgroup_root, log = f"/nodelet-{top.name}", top / "log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            *nodelet_argv(plane, top, runtime.runner.endpoint, name, cgroup_root),
            stdout=out, stderr=out, start_new_session=True)

    def tail() -> str:
        return versus.tail_of(log)

    def alive() -> None:
        if process.returncode is not None:
            raise common.BenchError(f"nodelet exited {process.returncode}\n{tail()}")

    try:
        yield Node("nodelet", name, process.pid, tail, alive)
    finally:
        try:
            await kubeletpeer.drain(admin, name, within=REMOVE_WITHIN, alive=alive)
        finally:
            await kubeletpeer.stop_by_pid(process, 30.0)
            await admin.delete(controlplane.node_path(name))
            await versus.reset_nodelet(runtime, top, cgroup_root)


STARTERS = {"kubelet": kubelet_node, "nodelet": nodelet_node}


# -- one agent's Deployment ---------------------------------------------------------------------


def deployment(name: str, node: str, replicas: int) -> dict[str, Any]:
    """auditcalls' Deployment: busybox sleeping, pinned to `node` by its hostname label."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": controlplane.BUSYBOX,
                                    "imagePullPolicy": "IfNotPresent",
                                    "command": ["sh", "-c", "sleep 1000000"]}]}}}}


@dataclass(frozen=True)
class Request:
    """One request of the node, from the audit log."""

    when: float  # requestReceivedTimestamp, epoch seconds
    verb: str
    resource: str  # "pods/status"; a non-resource request's path
    code: int | None  # None: still open (a watch)
    line: str  # for the error listing

    @property
    def error(self) -> bool:
        return self.code is not None and not 200 <= self.code < 300 \
            and self.code not in EXPECTED


@dataclass(frozen=True)
class Measured:
    """One agent's Deployment in one round."""

    agent: str
    round: int
    node: str
    replicas: int
    ready_each: tuple[float, ...]  # per pod: creation -> first list showing it Ready, s
    ready_seconds: float  # creation -> every pod Ready
    gone_seconds: float  # scaled to 0 -> every pod gone
    window: tuple[float, float, float]  # epoch seconds: created, all Ready, all gone
    cpu: float  # the agent's CPU seconds over the window
    load: tuple[float, float]  # 1-minute load average at the creation, at all gone
    runtime: str = ""  # "containerd v2.4.2", from CRI
    requests: tuple[Request, ...] = ()

    def count(self, *, until_ready: bool = False, verb: str = "", resource: str = "",
              upkeep: bool = True) -> float:
        """Requests per pod, in the whole window or up to all Ready."""
        end = self.window[1] if until_ready else math.inf
        return sum(1 for r in self.requests if r.when <= end
                   and (not verb or r.verb == verb) and (not resource or r.resource == resource)
                   and (upkeep or r.resource not in UPKEEP)) / self.replicas


async def pods_of(admin: AdminClient, name: str) -> list[dict[str, Any]]:
    return await admin.items(controlplane.pod_path("default"), labelSelector=f"app={name}")


async def until_ready(admin: AdminClient, node: Node, name: str, replicas: int,
                      created: float) -> dict[str, float]:
    """List the Deployment's pods every POLL s until all `replicas` are Ready; seconds after
    `created` (monotonic) of the first list showing each one Ready."""
    seen: dict[str, float] = {}
    within = START_WITHIN + PER_POD_WITHIN * replicas

    async def all_ready() -> bool:
        for pod in await pods_of(admin, name):
            ready = controlplane.conditions(pod).get("Ready", {}).get("status") == "True"
            if ready:
                seen.setdefault(pod["metadata"]["name"], time.monotonic() - created)
        return len(seen) >= replicas

    await poll(all_ready, within, f"{node.agent}: {replicas} pods Ready", node)
    return seen


async def measure(admin: AdminClient, node: Node, replicas: int) -> Measured:
    """Create the Deployment, wait until every pod is Ready, scale it to 0, wait until every
    pod is gone, delete it."""
    name = f"bench-{node.name}"
    cpu_before = versus.process_cpu(node.pid)
    created_at, created = time.time(), time.monotonic()
    load_before = os.getloadavg()[0]
    await admin.create(DEPLOYMENTS, deployment(name, node.name, replicas))
    seen = await until_ready(admin, node, name, replicas, created)
    ready_at, ready = time.time(), time.monotonic()
    await admin.patch(f"{DEPLOYMENTS}/{name}", {"spec": {"replicas": 0}})

    async def gone() -> bool:
        return not await pods_of(admin, name)

    await poll(gone, REMOVE_WITHIN, f"{node.agent}: every pod deleted", node)
    gone_at, cpu = time.time(), versus.process_cpu(node.pid) - cpu_before
    gone_seconds = time.monotonic() - ready
    await admin.delete(f"{DEPLOYMENTS}/{name}")
    return Measured(node.agent, 0, node.name, replicas, tuple(sorted(seen.values())),
                    ready - created, gone_seconds, (created_at, ready_at, gone_at), cpu,
                    (load_before, os.getloadavg()[0]))


# -- the audit log ------------------------------------------------------------------------------


def received(event: dict[str, Any]) -> float:
    stamp = str(event.get("requestReceivedTimestamp", ""))
    return datetime.fromisoformat(stamp).timestamp() if stamp else math.nan


def resource_of(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    if not ref:
        return str(event.get("requestURI", "?")).split("?")[0]
    sub = ref.get("subresource")
    return str(ref.get("resource", "?")) + (f"/{sub}" if sub else "")


def node_requests(events: list[dict[str, Any]], node: str,
                  start: float, end: float) -> tuple[Request, ...]:
    """The requests of user system:node:<node> received in [start, end], once each (the
    ResponseComplete event, or ResponseStarted for a watch still open)."""
    user = f"system:node:{node}"
    by_id: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.get("user", {}).get("username") != user \
                or not start <= received(event) <= end:
            continue
        if event.get("stage") == "ResponseComplete" or event["auditID"] not in by_id:
            by_id[event["auditID"]] = event
    found = []
    for e in by_id.values():
        code = e.get("responseStatus", {}).get("code") \
            if e.get("stage") == "ResponseComplete" else None
        line = (f"{e.get('requestReceivedTimestamp', '')} {code} {e['verb']} "
                f"{e.get('requestURI', '')}: {e.get('responseStatus', {}).get('message', '')}")
        found.append(Request(received(e), e["verb"], resource_of(e), code, line))
    return tuple(sorted(found, key=lambda r: r.when))


async def flushed(plane: ControlPlane, admin: AdminClient) -> list[dict[str, Any]]:
    """The audit log once everything before now is in it: a marker request of the admin is
    made, and the log read until it shows (batches of up to 1 s, written in order)."""
    marker = f"vsc-marker-{secrets.token_hex(4)}"
    await admin.items("/api/v1/namespaces/default/configmaps", labelSelector=marker)

    async def written() -> bool:
        return marker in plane.audit_log.read_text(errors="replace")

    await poll(written, FLUSH_WITHIN, "the audit log flushed")
    return plane.audit_events()


# -- one run ------------------------------------------------------------------------------------


async def run_one(agent: str, round_: int, plane: ControlPlane, admin: AdminClient,
                  work: Path, replicas: int) -> Measured:
    """`agent` joined on a containerd of its own, its Deployment measured, the node removed,
    the runtime reset (BenchError on leftovers); its requests from the audit log."""
    name = f"vsc-{agent}-{round_ + 1}"
    runtime = await common.start_runtime(prefix="vsc-")
    try:
        async with STARTERS[agent](plane, admin, runtime, work, name) as node:
            await wait_schedulable(admin, node)
            # A quiet interval, not a wait for state: the node's start-up traffic (its first
            # status updates with the runtime's images) stays out of the window.
            await asyncio.sleep(SETTLE)
            result = await measure(admin, node, replicas)
    except kubeletpeer.PeerError as exc:
        raise common.BenchError(f"the kubelet: {exc}") from exc
    finally:
        await common.teardown_runtime(runtime)
    start, _, end = result.window
    events = await flushed(plane, admin)
    result = dataclasses.replace(result, round=round_, runtime=runtime.version,
                                 requests=node_requests(events, name, start, end))
    print(f"round {round_ + 1}: {agent:8} {replicas} pods Ready in {result.ready_seconds:.2f} s, "
          f"gone {result.gone_seconds:.2f} s after the scale to 0; {len(result.requests)} "
          f"requests ({result.count():.2f} per pod), "
          f"{sum(r.error for r in result.requests)} errors; agent {result.cpu:.2f} CPU-s; "
          f"load {result.load[0]:.2f} -> {result.load[1]:.2f}", flush=True)
    return result


# -- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    values: dict[str, float]  # by agent
    digits: int = 2

    @property
    def ratio(self) -> float:
        kubelet, node = self.values.get("kubelet", math.nan), self.values.get("nodelet", math.nan)
        return node / kubelet if kubelet and not math.isnan(kubelet) else math.nan


def cell(value: float, digits: int) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def median(values: Sequence[float]) -> float:
    return common.percentile(values, 50) if values else math.nan


def rows(by: dict[str, list[Measured]]) -> list[Row]:
    def med(get: Callable[[Measured], float], label: str, digits: int = 2) -> Row:
        return Row(label, {a: median([get(m) for m in ms]) for a, ms in by.items()}, digits)

    return [
        med(lambda m: m.ready_seconds, "creation -> all Ready, s"),
        med(lambda m: median(m.ready_each), "creation -> pod Ready p50, s"),
        med(lambda m: m.gone_seconds, "scale to 0 -> all pods gone, s"),
        med(lambda m: m.window[2] - m.window[0], "window (creation -> all gone), s", 1),
        med(lambda m: m.count(until_ready=True), "requests per pod, creation -> all Ready"),
        med(lambda m: m.count(until_ready=True, verb="patch", resource="pods/status"),
            "PATCH pods/status per pod, -> all Ready"),
        med(lambda m: m.count(), "requests per pod, creation -> all gone"),
        med(lambda m: m.count(upkeep=False), "  without Node/Lease upkeep"),
        med(lambda m: m.count(verb="patch", resource="pods/status"),
            "PATCH pods/status per pod, -> all gone"),
        med(lambda m: sum(r.error for r in m.requests), "error answers (not 2xx/404/409)", 0),
        med(lambda m: 1000 * m.cpu / m.replicas, "agent CPU per pod over the window, ms", 1),
    ]


def print_table(title: str, table: Sequence[Row], agents: Sequence[str]) -> None:
    print(f"\n{title}")
    print(f"{'':44}" + "".join(f"{a:>10}" for a in agents) + f"{'nodelet/kubelet':>17}")
    for row in table:
        print(f"{row.label:44}" + "".join(
            f"{cell(row.values.get(a, math.nan), row.digits):>10}" for a in agents)
            + f"{cell(row.ratio, 2):>17}")


def breakdown(by: dict[str, list[Measured]]) -> list[Row]:
    """Requests per pod by verb and resource over the whole window, all rounds pooled."""
    counts = {a: Counter((r.verb, r.resource) for m in ms for r in m.requests)
              for a, ms in by.items()}
    pods = {a: sum(m.replicas for m in ms) for a, ms in by.items()}
    keys = sorted({k for c in counts.values() for k in c},
                  key=lambda k: (-sum(c[k] for c in counts.values()), k))
    return [Row(f"{verb} {resource}", {a: counts[a][(verb, resource)] / pods[a] for a in by})
            for verb, resource in keys]


def print_errors(by: dict[str, list[Measured]]) -> None:
    print("\nerror answers (not 2xx, 404 or 409):")
    for agent, ms in by.items():
        errors = [r.line for m in ms for r in m.requests if r.error]
        print(f"  {agent}: {len(errors) or 'none'}")
        for line in errors[:10]:
            print(f"    {line}")


def print_report(args: argparse.Namespace, load: tuple[tuple[float, ...], tuple[float, ...]],
                 by: dict[str, list[Measured]]) -> None:
    agents = [a for a in AGENTS if a in by]
    print(f"\nversus_cluster: nodelet {nodelet.__version__} | kubelet "
          f"{kubeletpeer.kube_version()} as nodes of one control plane, each on its own "
          f"{by[agents[0]][0].runtime}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"versions (kube/versions.env): {versus.versions()}")
    print(f"machine: {os.cpu_count()} CPUs; load average at start "
          f"{' '.join(f'{v:.2f}' for v in load[0])}, at end "
          f"{' '.join(f'{v:.2f}' for v in load[1])}")
    print(f"run: --replicas {args.replicas} --rounds {args.rounds}; values are medians of "
          "rounds; requests = those of user system:node:<node> in the audit log")
    table = rows(by)
    print_table("Deployment: creation -> all Ready -> scaled to 0 -> all gone", table, agents)
    print_table("requests per pod by verb and resource, creation -> all gone (rounds pooled)",
                breakdown(by), agents)
    print_errors(by)
    print("\nnodelet / kubelet:")
    for row in table:
        if not math.isnan(row.ratio):
            print(f"  {row.label:44}{row.ratio:8.2f}")


# -- main ---------------------------------------------------------------------------------------


def order(agents: Sequence[str], round_: int) -> list[str]:
    """The agents, reversed every other round: each goes first as often as the other."""
    return list(agents) if round_ % 2 == 0 else list(reversed(agents))


async def bench(args: argparse.Namespace) -> None:
    load_start = os.getloadavg()
    plane = ControlPlane.start()
    work = Path(tempfile.mkdtemp(prefix="vsc-work-", dir="/tmp"))
    by: dict[str, list[Measured]] = {a: [] for a in args.agents}
    failed = True
    try:
        print(f"control plane {plane.server} (logs {plane.logs}); kubelet "
              f"{kubeletpeer.kube_version()}", flush=True)
        async with plane.admin() as admin:
            for round_ in range(args.rounds):
                for agent in order(args.agents, round_):
                    by[agent].append(await run_one(agent, round_, plane, admin, work,
                                                   args.replicas))
        failed = False
    finally:
        plane.stop(keep=failed)
        shutil.rmtree(work, ignore_errors=True)
        if failed:
            print(f"control plane logs kept in {plane.logs}", file=sys.stderr)
    print_report(args, (load_start, os.getloadavg()), by)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--replicas", type=int, default=30, help="Deployment replicas (30)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds, the agents' order alternating (1)")
    parser.add_argument("--agents", default=",".join(AGENTS),
                        help="comma-separated subset of nodelet,kubelet (both)")
    parser.add_argument("-v", "--verbose", action="store_true", help="nodelet's INFO logs")
    args = parser.parse_args(argv)
    args.agents = [a for a in AGENTS if a in args.agents.split(",")]
    if not 1 <= args.replicas <= 100 or args.rounds < 1 or not args.agents:
        parser.error("need 1 <= --replicas <= 100 (maxPods 110), --rounds >= 1 and at least "
                     "one of nodelet,kubelet")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return common.run("bench/versus_cluster.py", bench, args)


if __name__ == "__main__":
    sys.exit(main())
