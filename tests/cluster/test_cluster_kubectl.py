"""The real kubectl 1.37 reaches a pod on a nodelet node through the real kube-apiserver, which
dials the node's server with its kubelet client certificate: logs (`-f`, `--tail`,
`--previous`, `--timestamps`, of a completed pod), exec (WebSocket and SPDY from kubectl;
kube-apiserver speaks to the node itself), attach, cp, port-forward, and the Summary API through
`nodes/proxy`. The node server runs in cluster mode's default: client certificates of the
cluster CA, bearer tokens checked with the real TokenReview, every request authorized with the
real SubjectAccessReview.

One joined node and one pod serve the whole module, to keep the wall time small.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import ssl
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from conftest import Instance
from support.clusterfixtures import joined
from support.controlplane import AdminClient, Authority, ControlPlane, node_path, pod, pod_path
from support.harness import Harness, http_get
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "kubectl-node"
POD = "web"
# httpd in the background, five numbered lines, then a tick a second (for following).
MAIN = ("mkdir -p /www && echo hello-through-kubectl > /www/index.html && "
        "httpd -p 8080 -h /www && for i in 1 2 3 4 5; do echo line $i; done; "
        "while true; do sleep 1; echo tick; done")


@dataclass
class Node:
    plane: ControlPlane
    admin: AdminClient
    agent: Harness
    namespace: str
    node_url: str  # the node server, as the Node advertises it
    node_ca: Path  # its self-signed serving certificate
    root: Path

    async def kubectl(self, *args: str, **kwargs: Any) -> tuple[int, bytes, bytes]:
        return await self.plane.kubectl("-n", self.namespace, *args, **kwargs)

    async def container(self, name: str) -> dict[str, Any]:
        found = await self.admin.get(pod_path(self.namespace, POD)) or {}
        statuses = found.get("status", {}).get("containerStatuses") or []
        return next((s for s in statuses if s["name"] == name), {})


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def node(control_plane: ControlPlane, admin: AdminClient, runtime: Instance,
               tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Node]:
    namespace = "kubectl-tests"
    await admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    await eventually(lambda: admin.get(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/default"), within=30,
        what="the default ServiceAccount")
    try:
        async with joined(control_plane, admin, runtime, node=NODE) as agent:
            spec = pod(POD, node=NODE)
            spec["spec"]["containers"] = [
                {"name": "main", "image": "localhost/nodelet/busybox:latest",
                 "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", MAIN]},
                {"name": "flaky", "image": "localhost/nodelet/busybox:latest",
                 "imagePullPolicy": "IfNotPresent",
                 "command": ["sh", "-c", "echo flaky-run; sleep 1; exit 3"]}]
            await admin.create(pod_path(namespace), spec)
            found = await eventually(lambda: admin.get(node_path(NODE)), within=30,
                                     what="the Node")
            address = next(a["address"] for a in found["status"]["addresses"]
                           if a["type"] == "InternalIP")
            port = found["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
            state = Node(control_plane, admin, agent, namespace, f"https://{address}:{port}",
                         agent.settings.data_dir / "pki" / "nodelet.crt",
                         tmp_path_factory.mktemp("kubectl"))
            await eventually(lambda: state.container("main"), within=60,
                             until=lambda s: "running" in s.get("state", {}),
                             what="the main container running in the API")
            yield state
    finally:
        await admin.delete(f"/api/v1/namespaces/{namespace}")


# -- logs ----------------------------------------------------------------------------------------


async def test_kubectl_logs(node: Node) -> None:
    await eventually(lambda: node.kubectl("logs", POD, "-c", "main"), within=10,
                     until=lambda r: r[1].count(b"line ") == 5, what="five lines logged")
    code, out, err = await node.kubectl("logs", POD, "-c", "main")
    assert code == 0, err
    assert out.startswith(b"line 1\nline 2\nline 3\nline 4\nline 5\n"), out
    code, out, err = await node.kubectl("logs", POD, "-c", "main", "--tail=2", "--timestamps")
    assert code == 0, err
    lines = out.decode().splitlines()
    assert len(lines) == 2 and all(
        re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z (line \d|tick)$", x) for x in lines), out
    # --previous: no earlier run of main (the node's words, through the API server).
    code, out, err = await node.kubectl("logs", POD, "-c", "main", "--previous")
    assert code != 0 and b'previous terminated container "main"' in err, err
    await eventually(lambda: node.container("flaky"), within=30,
                     until=lambda s: s.get("restartCount", 0) >= 1, what="flaky restarted once")
    code, out, err = await node.kubectl("logs", POD, "-c", "flaky", "--previous")
    assert (code, out) == (0, b"flaky-run\n"), err
    # -f: the ticks logged after the request arrive while kubectl follows.
    follow = await asyncio.create_subprocess_exec(
        *node.plane.kubectl_args("-n", node.namespace, "logs", "-f", POD, "-c", "main",
                                 "--tail=0"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert follow.stdout is not None
        for _ in range(2):
            assert await asyncio.wait_for(follow.stdout.readline(), 15) == b"tick\n"
    finally:
        follow.terminate()
        await follow.communicate()


async def test_kubectl_logs_of_a_completed_pod(node: Node) -> None:
    """A finished pod keeps its exited container and its log until it is deleted, as the
    kubelet keeps them (the logs of a finished Job's pod); then they go."""
    done = pod("done", node=NODE, command="echo all-done", restartPolicy="Never")
    await node.admin.create(pod_path(node.namespace), done)
    finished = await eventually(lambda: node.admin.get(pod_path(node.namespace, "done")),
                                until=lambda p: (p or {}).get("status", {}).get("phase")
                                == "Succeeded", within=60, what="done Succeeded in the API")
    assert finished is not None
    uid = finished["metadata"]["uid"]
    code, out, err = await node.kubectl("logs", "done")
    assert (code, out) == (0, b"all-done\n"), err
    logs_dir = node.agent.settings.data_dir / "logs"
    assert list(logs_dir.glob(f"{node.namespace}_done_{uid}/main/*.log")), "log file gone"
    code, _, err = await node.kubectl("delete", "pod", "done", "--wait=true", "--timeout=60s",
                                      timeout=90)
    assert code == 0, err
    await eventually(lambda: list(logs_dir.glob(f"{node.namespace}_done_{uid}")),
                     until=lambda d: not d, within=30, what="the deleted pod's logs removed")


async def test_logs_over_websocket_read_whole_every_time(node: Node) -> None:
    """kube-apiserver serves a log to a WebSocket client (`binary.k8s.io`, what the
    [NodeConformance] websocket-logs test reads) by copying the node's answer message by
    message, and loses the last bytes when they come in the same TLS record as the end of
    the response: nodelet's TLS front sends them apart (node_server._taken_by_front). Before
    that, about every other read here had no log at all."""
    spec = pod("ws-logs", node=NODE, command="echo container is alive; sleep 1000000")
    await node.admin.create(pod_path(node.namespace), spec)
    await eventually(lambda: node.admin.get(pod_path(node.namespace, "ws-logs")), within=60,
                     until=lambda p: "running" in ((p or {}).get("status", {}).get(
                         "containerStatuses") or [{}])[0].get("state", {}),
                     what="ws-logs running in the API")
    url = (f"{node.plane.server}/api/v1/namespaces/{node.namespace}/pods/ws-logs/log"
           "?container=main")
    await eventually(lambda: _websocket_log(node, url), within=10,
                     until=lambda got: got == b"container is alive\n",
                     what="the line logged")
    reads = [await _websocket_log(node, url) for _ in range(12)]
    assert reads == [b"container is alive\n"] * 12, reads


async def _websocket_log(node: Node, url: str) -> bytes:
    async with aiohttp.ClientSession() as session, session.ws_connect(
            url, ssl=node.plane.admin_ssl(), protocols=["binary.k8s.io"]) as ws:
        return b"".join([msg.data async for msg in ws if msg.type == aiohttp.WSMsgType.BINARY])


# -- exec, attach, cp ---------------------------------------------------------------------------


@pytest.mark.parametrize("websockets", ["true", "false"], ids=["websocket", "spdy"])
async def test_kubectl_exec(node: Node, websockets: str) -> None:
    env = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": websockets}
    code, out, err = await node.kubectl(
        "exec", POD, "-c", "main", "--", "sh", "-c", "echo out; echo err >&2; exit 3", env=env)
    assert (code, out) == (3, b"out\n"), err
    assert b"err\n" in err
    # Piped stdin ends with its EOF.
    code, out, err = await node.kubectl("exec", "-i", POD, "-c", "main", "--", "cat",
                                        env=env, stdin=b"piped stdin\n")
    assert (code, out) == (0, b"piped stdin\n"), err


async def test_kubectl_attach(node: Node) -> None:
    attach = await asyncio.create_subprocess_exec(
        *node.plane.kubectl_args("-n", node.namespace, "attach", POD, "-c", "main"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert attach.stdout is not None
        # The main process's output as it prints it (kubectl's banner goes to stderr).
        assert await asyncio.wait_for(attach.stdout.readline(), 30) == b"tick\n"
    finally:
        attach.terminate()
        await attach.communicate()


async def test_kubectl_cp_both_ways(node: Node) -> None:
    local = node.root / "to-pod.txt"
    local.write_text("copied in\n")
    code, _, err = await node.kubectl("cp", str(local), f"{POD}:/tmp/in.txt", "-c", "main")
    assert code == 0, err
    code, out, err = await node.kubectl("exec", POD, "-c", "main", "--", "cat", "/tmp/in.txt")
    assert (code, out) == (0, b"copied in\n"), err
    back = node.root / "from-pod.txt"
    code, _, err = await node.kubectl("cp", f"{POD}:/www/index.html", str(back), "-c", "main")
    assert code == 0, err
    assert back.read_text() == "hello-through-kubectl\n"


async def test_kubectl_exec_interactive_through_tmux(node: Node) -> None:
    """`kubectl exec -it` in a real terminal: the shell's prompt, the terminal's size through
    the resize channel, and the shell's exit status back to kubectl."""
    if shutil.which("tmux") is None:
        pytest.fail("needs tmux (make setup installs it)")
    socket_name, session = f"nodelet-{uuid.uuid4().hex[:8]}", "kubectl"
    tmux = ("tmux", "-L", socket_name)
    kubectl = " ".join(node.plane.kubectl_args("-n", node.namespace))
    command = f"{kubectl} exec -it {POD} -c main -- sh; echo kubectl-exit=$?; sleep 60"

    async def run(*args: str) -> bytes:
        process = await asyncio.create_subprocess_exec(
            *tmux, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(process.communicate(), 20)
        assert process.returncode == 0, out
        return out

    async def screen() -> bytes:
        return await run("capture-pane", "-p", "-t", session)

    await run("new-session", "-d", "-s", session, "-x", "101", "-y", "33", command)
    try:
        await eventually(screen, within=30, until=lambda s: b"/ #" in s, what="the shell prompt")
        await run("send-keys", "-t", session, "stty size; echo $((6*7))", "Enter")
        await eventually(screen, within=20, until=lambda s: b"33 101" in s and b"\n42" in s,
                         what="the terminal's size and 42 on the screen")
        await run("send-keys", "-t", session, "exit 5", "Enter")
        await eventually(screen, within=20, until=lambda s: b"kubectl-exit=5" in s,
                         what="kubectl exiting with the shell's status")
    finally:
        with contextlib.suppress(AssertionError):
            await run("kill-server")


# -- port-forward ---------------------------------------------------------------------------------


@pytest.mark.parametrize("websockets", ["true", "false"], ids=["websocket", "spdy"])
async def test_kubectl_port_forward(node: Node, websockets: str) -> None:
    forward = await asyncio.create_subprocess_exec(
        *node.plane.kubectl_args("-n", node.namespace, "port-forward", f"pod/{POD}", ":8080"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "KUBECTL_PORT_FORWARD_WEBSOCKETS": websockets})
    try:
        assert forward.stdout is not None
        line = await asyncio.wait_for(forward.stdout.readline(), 30)
        match = re.match(rb"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", line)
        assert match, line
        for _ in range(2):  # two connections through one port-forward
            assert b"hello-through-kubectl" in await http_get(int(match.group(1)))
    finally:
        forward.terminate()
        await forward.communicate()


# -- stats through nodes/proxy, and the node server's own authentication -----------------------


async def test_kubectl_get_raw_stats_summary(node: Node) -> None:
    code, out, err = await node.plane.kubectl("get", "--raw",
                                              f"/api/v1/nodes/{NODE}/proxy/stats/summary")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["node"]["nodeName"] == NODE
    found = next(p for p in summary["pods"] if p["podRef"]["name"] == POD)
    container = next(c for c in found["containers"] if c["name"] == "main")
    assert container["cpu"]["usageCoreNanoSeconds"] > 0
    assert container["memory"]["workingSetBytes"] > 0


async def _node_get(n: Node, path: str, *, token: str | None = None,
                    cert: tuple[Path, Path] | None = None) -> int:
    context = ssl.create_default_context(cafile=str(n.node_ca))
    if cert is not None:
        context.load_cert_chain(*cert)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session, \
            session.get(n.node_url + path, headers=headers) as response:
        await response.read()
        return response.status


VIEWER_RBAC = """\
apiVersion: v1
kind: ServiceAccount
metadata: {{name: viewer, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-node-stats}}
rules: [{{apiGroups: [""], resources: [nodes/stats], verbs: [get]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-node-stats}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-node-stats}}
subjects: [{{kind: ServiceAccount, name: viewer, namespace: {ns}}}]
"""


async def test_node_server_token_review_and_subject_access_review(node: Node) -> None:
    logs = f"/containerLogs/{node.namespace}/{POD}/main"
    exec_ = f"/exec/{node.namespace}/{POD}/main?command=true&output=1"
    assert await _node_get(node, "/stats/summary") == 401  # no credentials
    assert await _node_get(node, "/stats/summary", token="nobody-knows-this") == 401
    await node.plane.apply(VIEWER_RBAC.format(ns=node.namespace))
    try:
        code, out, err = await node.kubectl("create", "token", "viewer")
        assert code == 0, err
        token = out.decode().strip()
        # The viewer may read stats (nodes/stats) but not logs or exec (nodes/proxy): 403,
        # as the real SubjectAccessReview decides.
        await eventually(lambda: _node_get(node, "/stats/summary", token=token), within=10,
                         until=lambda code: code == 200, what="stats for the viewer")
        assert await _node_get(node, logs, token=token) == 403
        assert await _node_get(node, exec_, token=token) == 403
        # Client certificates: of the cluster CA (the admin: system:masters), of another CA
        # refused at the TLS handshake.
        admin = (node.plane.root / "pki" / "admin.crt", node.plane.root / "pki" / "admin.key")
        assert await _node_get(node, logs, cert=admin) == 200
        stranger = Authority(node.root, "another").issue("mallory", "mallory",
                                                        orgs=("system:masters",))
        with pytest.raises(aiohttp.ClientError):
            await _node_get(node, "/pods", cert=(stranger.cert, stranger.key))
    finally:
        await node.plane.kubectl("delete", "clusterrole,clusterrolebinding",
                                 f"{node.namespace}-node-stats")
