"""`nodelet analyze --kubeconfig` on a live cluster: the real control plane with a nodelet node
running a Deployment and a pod stuck before its sandbox (a Secret it mounts does not exist).
The report from the live list (in pages, as kubectl) agrees with the report from `kubectl get
-o json`; `--watch` prints a new pod's sandbox-ready time as it happens; a node's identity may
not list events cluster-wide (kube-apiserver's 403, one line, exit 2).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import textwrap
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from support.controlplane import BUSYBOX, AdminClient, ControlPlane, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "analyze-node"
ANALYZE = [sys.executable, "-m", "nodelet.cli", "analyze"]


async def run(*args: str | Path, stdin: bytes = b"") -> tuple[int, bytes, str]:
    proc = await asyncio.create_subprocess_exec(
        *map(str, args), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out, err.decode()


def deployment(namespace: str, replicas: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: web, namespace: {namespace}}}
        spec:
          replicas: {replicas}
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec:
              nodeSelector: {{kubernetes.io/hostname: {NODE}}}
              terminationGracePeriodSeconds: 1
              containers:
                - name: main
                  image: {BUSYBOX}
                  imagePullPolicy: IfNotPresent
                  command: ["sh", "-c", "sleep 1000000"]
        """)


async def test_live_analysis_watch_and_a_nodes_refusal(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    admin_conf = control_plane.admin_kubeconfig
    # The test's own list with the node's identity, below, is refused: that one is expected.
    async with join(NODE, expected_refusals=("list /api/v1/pods?limit=500:",)) as harness:
        await control_plane.apply(deployment(namespace, 3))
        stuck = pod("stuck", node=NODE, volumes=[{"name": "s", "secret": {"secretName": "no"}}])
        await admin.create(pod_path(namespace), stuck)
        code, out, err = await control_plane.kubectl(
            "rollout", "status", "deployment/web", "-n", namespace, "--timeout=90s", timeout=100)
        assert code == 0, err
        await eventually(lambda: admin.items(f"/api/v1/namespaces/{namespace}/events"),
                         within=30, until=lambda es: any(e["reason"] == "FailedMount" for e in es),
                         what="the stuck pod's FailedMount event")

        start = len(control_plane.audit_events())
        code, live, err = await run(*ANALYZE, "--kubeconfig", admin_conf, "-n", namespace,
                                    "--chunk-size", "2", "-o", "json")
        assert code == 0, err
        doc = json.loads(live)
        assert doc["summary"]["pods"] == 4 and doc["summary"]["stuck"] == 1, doc["summary"]
        assert [s["name"] for s in doc["stuck"]] == ["stuck"], doc["stuck"]
        # Listed in pages of 2, as kubectl's --chunk-size: the real server's continue tokens.
        pages = await eventually(
            lambda: [urllib.parse.unquote(e["requestURI"])
                     for e in control_plane.audit_events()[start:]
                     if e.get("user", {}).get("username") == "kubernetes-admin"
                     and e["verb"] == "list" and e["objectRef"].get("resource") == "pods"
                     and e["stage"] == "ResponseComplete"], within=10,
            until=lambda p: len(p) == 2, what="two pages of pods listed")
        assert all("limit=2" in p for p in pages) and "continue=" in pages[1], pages
        # The same analysis from what kubectl writes.
        code, dump, err_ = await control_plane.kubectl("get", "pods,events", "-n", namespace,
                                                       "-o", "json")
        assert code == 0, err_
        code, out, err = await run(*ANALYZE, "-", "-o", "json", stdin=dump)
        assert code == 0, err
        assert json.loads(out)["summary"] == doc["summary"]

        # --watch: a pod started now is reported with its sandbox-ready time.
        proc = await asyncio.create_subprocess_exec(
            *ANALYZE, "--kubeconfig", str(admin_conf), "-n", namespace, "--watch",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        lines: list[str] = []

        async def read_lines() -> None:
            assert proc.stdout is not None
            while line := await proc.stdout.readline():
                lines.append(line.decode().rstrip("\n"))

        reader = asyncio.get_running_loop().create_task(read_lines(), name="watch-output")
        try:
            await eventually(lambda: [ln for ln in lines if ln.startswith("# watching")],
                             within=30, what="the first list", seen=lambda _: repr(lines))
            await control_plane.apply(deployment(namespace, 4))
            await eventually(
                lambda: [ln for ln in lines if " sandbox ready " in ln
                         and ln.split()[0:1] != ["#"]], within=60,
                until=lambda found: len(found) >= 4,
                what="the fourth replica's sandbox-ready time", seen=lambda _: repr(lines[-6:]))
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 30)
            await reader
        assert code == 0

        # A node's own identity (its kubeconfig from TLS bootstrap) may not list every
        # namespace's events.
        node_conf = harness.settings.cluster.kubeconfig  # type: ignore[union-attr]
        code, out, err = await run(*ANALYZE, "--kubeconfig", node_conf, "-A")
        assert (code, out) == (2, b"") and err.count("\n") == 1, err
        assert "403 Forbidden" in err and "system:node:" in err, err
