"""Requests per pod that a nodelet node sends to the real kube-apiserver, read from its audit log.

Run as root from the checkout:  .venv/bin/python bench/auditcalls.py [--pods 20]
(needs `make kube`: the control plane of tests/support/controlplane.py, from kube/versions.env)

1. Starts the real control plane (etcd, kube-apiserver with the Node authorizer and an audit
   log at Metadata level, controller-manager, scheduler) and an embedded containerd.
2. Joins an in-process nodelet `Agent` by TLS bootstrap, every cluster setting at its kubelet
   default (qps 50 / burst 100, node status every 10 s, Lease every 10 s).
3. Once the Node is Ready, applies a Deployment of N busybox replicas (placed on the node by
   the scheduler), waits until every pod is Ready in the API and the agent's status sync has
   nothing left to send, scales it to 0 and waits until every pod is gone.
4. Prints the node's requests (user `system:node:<node>`) in that window from the audit log,
   per pod, by verb and resource, and the answers that were errors (404/409 are expected;
   anything else is a defect). The same count for the kubelet on the same control plane is
   the baseline to compare with (issue 23).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import common  # bench/common.py: the runtime, its leak check, main
from nodelet import app
from nodelet import settings as settings_
from nodelet.model.core import pods as pods_
from support import controlplane  # tests/support/controlplane.py: the real control plane

NODE = "bench-audit-node"
WITHIN = 180.0


async def wait_for(check: Callable[[], Awaitable[bool]], *, what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not await check():
        if time.monotonic() > deadline:
            raise common.BenchError(f"{what} not within {WITHIN} s")
        await asyncio.sleep(0.2)


def agent_settings(runtime: common.Runtime, plane: controlplane.ControlPlane,
                   work: Path) -> settings_.Settings:
    base = settings_.Settings(data_dir=work / "data", node_name=NODE)
    return dataclasses.replace(
        base,
        runtime=dataclasses.replace(base.runtime, endpoint=runtime.runner.endpoint),
        server=dataclasses.replace(base.server, port=0),
        node_server=settings_.NodeServerSettings(address="0.0.0.0", port=0,
                                                 client_ca_file=plane.ca.cert),
        cluster=settings_.ClusterSettings(
            kubeconfig=work / "kubelet.conf", cert_dir=work / "pki",
            bootstrap_kubeconfig=plane.bootstrap_kubeconfig(work / "bootstrap.conf")),
    )


def deployment(replicas: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: bench, namespace: default}}
        spec:
          replicas: {replicas}
          selector: {{matchLabels: {{app: bench}}}}
          template:
            metadata: {{labels: {{app: bench}}}}
            spec:
              nodeSelector: {{kubernetes.io/hostname: {NODE}}}
              terminationGracePeriodSeconds: 1
              containers:
                - name: main
                  image: {controlplane.BUSYBOX}
                  imagePullPolicy: IfNotPresent
                  command: ["sh", "-c", "sleep 1000000"]
        """)


async def measure(agent: app.Agent, plane: controlplane.ControlPlane,
                  api: controlplane.AdminClient, pods: int) -> tuple[list[dict[str, Any]], float]:
    async def ready() -> bool:
        items = await api.items(controlplane.pod_path("default"), labelSelector="app=bench")
        return len(items) == pods and all(
            controlplane.conditions(p).get("Ready", {}).get("status") == "True" for p in items)

    async def gone() -> bool:
        return not await api.items(controlplane.pod_path("default"), labelSelector="app=bench")

    cluster = agent.cluster
    assert cluster is not None
    start_line = len(plane.audit_events())
    started = time.monotonic()
    await plane.apply(deployment(pods))
    await wait_for(ready, what=f"{pods} pods Ready")
    uids = [p.uid for p, _ in agent.pods()]

    async def synced() -> bool:
        return all(cluster.status_sync.in_sync(pods_.PodUID(u)) for u in uids)

    await wait_for(synced, what="the status sync idle")
    ready_s = time.monotonic() - started
    code, _, err = await plane.kubectl("scale", "deployment/bench", "--replicas=0")
    if code != 0:
        raise common.BenchError(err.decode())
    await wait_for(gone, what="every pod deleted")
    await asyncio.sleep(1.5)  # the audit log is written in batches of up to 1 s
    return plane.audit_events()[start_line:], ready_s


def report(events: list[dict[str, Any]], pods: int, ready_s: float) -> None:
    mine = [e for e in controlplane.node_requests(events, NODE)
            if e.get("stage") == "ResponseComplete"]
    by_kind: Counter[tuple[str, str]] = Counter()
    for e in mine:
        ref = e.get("objectRef", {})
        resource = ref.get("resource", "?") + (f"/{ref['subresource']}"
                                               if ref.get("subresource") else "")
        by_kind[(e["verb"], resource)] += 1
    errors = Counter(f"{e['responseStatus']['code']} {e['verb']} {e['objectRef'].get('resource')}"
                     for e in mine if e["responseStatus"].get("code", 0) >= 400)
    print(f"\n{pods} pods: Ready (and status sync idle) {ready_s:.1f} s after the apply; "
          f"node requests in the window (apply → all deleted): {len(mine)}, "
          f"{len(mine) / pods:.2f} per pod")
    print(f"{'verb':<8} {'resource':<28} {'count':>6} {'per pod':>8}")
    for (verb, resource), n in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"{verb:<8} {resource:<28} {n:>6} {n / pods:>8.2f}")
    print("error answers:", dict(errors) or "none")
    unexpected = controlplane.refused(events, NODE)
    lagged = controlplane.lagged(events, NODE)
    print(f"requests refused while a cache of kube-apiserver lagged (asked again and "
          f"allowed): {len(lagged)}")
    if unexpected:
        raise common.BenchError(f"requests refused by kube-apiserver: {unexpected[:10]}")


async def bench(args: argparse.Namespace) -> None:
    v = controlplane.versions()
    plane = controlplane.ControlPlane.start()
    runtime = await common.start_runtime(prefix="nlbench-")
    work = Path(tempfile.mkdtemp(prefix="nlba-", dir="/tmp"))
    print(f"Kubernetes {v['KUBE_VERSION']}, etcd {v['ETCD_VERSION']}, {runtime.version}")
    agent = app.Agent(agent_settings(runtime, plane, work))
    try:
        async with plane.admin() as api:
            await agent.start()

            async def node_ready() -> bool:
                node = await api.get(controlplane.node_path(NODE))
                return controlplane.conditions(node).get("Ready", {}).get("status") == "True"

            await wait_for(node_ready, what="the node Ready")
            events, ready_s = await measure(agent, plane, api, args.pods)
            report(events, args.pods, ready_s)
            await plane.kubectl("delete", "deployment/bench")
    finally:
        await agent.stop()
        plane.stop()
        await common.teardown_runtime(runtime, extra_dirs=[work])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--verbose", action="store_true", help="nodelet's INFO logs")
    return common.run("bench/auditcalls.py", bench, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
