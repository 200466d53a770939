"""`nodelet analyze` on what the real `kubectl` of the same release writes, and on the live
cluster.

A cluster state written as the admin into a real control plane of this module's own (so that
`-A` sees only it): pods that started, a pod
whose sandbox was re-created 20 days later (restarts, an old container, SandboxChanged), pods
stuck before their sandbox with their events (IP exhaustion, a missing ConfigMap, a missing
RuntimeClass handler), a terminating pod, a Service and a ReplicaSet. kubectl dumps it every
way a user would (`get pods -A -o json|yaml`, `get pods,events,services -A -o json`,
`cluster-info dump` to a directory and to stdout), and every dump, alone, gzipped and together,
gives the same analysis in all three formats. Then `--kubeconfig` reads the same from the
server (in pages), and `--watch` follows it through a dropped watch and a 410 (both from a
fault proxy in front of the real server).

No kubelet runs these pods: their statuses are written through the status subresource, and
they name a scheduler that does not exist, so that nothing else changes them (the scheduler
would bind them, the pod GC delete pods of a node that does not exist). A pod that is not bound
is deleted at once, so the terminating one keeps a finalizer until the end.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import signal
import sys
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from nodelet import cli
from support.controlplane import AdminClient, Authority, ControlPlane, Pair, kubeconfig_text
from support.faultproxy import FaultProxy
from support.polling import eventually

NODELET = [sys.executable, "-m", "nodelet.cli", "analyze"]
T0 = datetime(2026, 11, 1, 8, 0, 0, tzinfo=UTC)
PRTSC = "PodReadyToStartContainers"


def stamp(seconds: float, base: datetime = T0) -> str:
    return (base + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(sandbox: float | None, ready: float | None, *, message: str = "",
               base: datetime = T0) -> list[dict[str, Any]]:
    out = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(0, base)},
           {"type": "Initialized", "status": "True", "lastTransitionTime": stamp(0, base)}]
    if sandbox is None:
        out.append({"type": PRTSC, "status": "False", "lastTransitionTime": stamp(1, base),
                    "reason": "PodSandboxNotReady", "message": message})
    else:
        out.append({"type": PRTSC, "status": "True", "lastTransitionTime": stamp(sandbox, base)})
    for type_ in ("ContainersReady", "Ready"):
        out.append({"type": type_, "status": "True" if ready is not None else "False",
                    "lastTransitionTime": stamp(ready if ready is not None else 1, base)})
    return out


def pod(name: str, ns: str, conds: list[dict[str, Any]], *, labels: dict[str, str] | None = None,
        runtime_class: str | None = None, volumes: list[Any] | None = None,
        container_statuses: list[Any] | None = None, phase: str = "Running") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "none",
                            "containers": [{"name": "main", "image": "busybox"}]}
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": name}},
            "spec": spec,
            "status": {"phase": phase, "startTime": stamp(0), "conditions": conds,
                       "containerStatuses": container_statuses or []}}


async def create(admin: AdminClient, obj: dict[str, Any]) -> dict[str, Any]:
    """Create a pod, then write its status (a create's status is the server's own)."""
    meta = obj["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods"
    await admin.create(path, obj)
    return await admin.patch(f"{path}/{meta['name']}/status", {"status": obj["status"]})


async def event(admin: AdminClient, name: str, ns: str, reason: str, message: str,
                count: int = 1) -> None:
    found = await admin.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert found is not None
    await admin.create(f"/api/v1/namespaces/{ns}/events", {
        "metadata": {"name": f"{name}.{reason.lower()}", "namespace": ns},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": name,
                           "uid": found["metadata"]["uid"], "apiVersion": "v1"},
        "reason": reason, "message": message, "count": count, "type": "Warning",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": stamp(1), "lastTimestamp": stamp(60)})


IP_EXHAUSTED = ('failed to setup network for sandbox "4f1d": plugin type="host-local" failed '
                "(add): failed to allocate for range 0: no IP addresses available in range set: "
                "10.88.0.1-10.88.0.6")
NO_HANDLER = 'no runtime for "kata" is configured'
NO_CONFIGMAP = 'MountVolume.SetUp failed for volume "cfg" : configmap "missing" not found'


HOLD = "nodelet.test/hold"  # keeps the deleted pod `leaving` until the end


async def populate(admin: AdminClient) -> None:
    await admin.create("/api/v1/namespaces", {"metadata": {"name": "team-a"}})
    for i, (sandbox, ready) in enumerate([(1, 3), (2, 4), (2, 5), (3, 9)]):
        await create(admin, pod(f"web-{i}", "default", conditions(sandbox, ready),
                                labels={"app": "web"}, container_statuses=[
                                    {"name": "main", "restartCount": 0, "ready": True,
                                     "image": "busybox", "imageID": "",
                                     "state": {"running": {"startedAt": stamp(ready)}}}]))
    # RKE2's kube-system: the node rebooted 20 days later, the sandbox was re-created.
    later = T0 + timedelta(days=20)
    await create(admin, pod("coredns-7d4b9c-x2x9z", "kube-system",
                            conditions(4, 6, base=later), container_statuses=[
                                {"name": "main", "restartCount": 7, "ready": True,
                                 "image": "busybox", "imageID": "",
                                 "state": {"running": {"startedAt": stamp(5, later)}},
                                 "lastState": {"terminated": {"startedAt": stamp(3),
                                                              "exitCode": 255}}}]))
    await event(admin, "coredns-7d4b9c-x2x9z", "kube-system", "SandboxChanged",
                "Pod sandbox changed, it will be killed and re-created.")
    stuck = [("ip-exhausted", None, f"Failed to create pod sandbox: {IP_EXHAUSTED}",
              "FailedCreatePodSandBox"),
             ("kata-pod", "kata", f"Failed to create pod sandbox: {NO_HANDLER}",
              "FailedCreatePodSandBox"),
             ("needs-config", None, NO_CONFIGMAP, "FailedMount")]
    await admin.create("/apis/node.k8s.io/v1/runtimeclasses", {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
        "handler": "kata"})
    for name, rc, message, reason in stuck:
        volumes = [{"name": "cfg", "configMap": {"name": "missing"}}] if reason == \
            "FailedMount" else None
        await create(admin, pod(name, "team-a", conditions(None, None, message=message),
                                runtime_class=rc, volumes=volumes, phase="Pending"))
        await event(admin, name, "team-a", reason, message, count=5)
    # A pod being deleted whose sandbox went down 3 s after the request.
    leaving = pod("leaving", "team-a", conditions(1, 2))
    leaving["metadata"]["finalizers"] = [HOLD]
    await create(admin, leaving)
    await admin.delete("/api/v1/namespaces/team-a/pods/leaving", gracePeriodSeconds=30)
    found = await admin.get("/api/v1/namespaces/team-a/pods/leaving")
    assert found is not None
    meta = found["metadata"]
    requested = datetime.strptime(meta["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=UTC) - timedelta(seconds=meta.get("deletionGracePeriodSeconds") or 0)
    conds = conditions(1, 2)
    conds[2] = {"type": PRTSC, "status": "False", "lastTransitionTime": stamp(3, requested)}
    await admin.patch("/api/v1/namespaces/team-a/pods/leaving/status",
                      {"status": {"conditions": conds}})
    await admin.create("/api/v1/namespaces/default/services", {
        "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    await admin.create("/apis/apps/v1/namespaces/default/replicasets", {
        "metadata": {"name": "web-7d4b9c"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"rs": "web-7d4b9c"}},
                 "template": {"metadata": {"labels": {"rs": "web-7d4b9c"}},
                              "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}})


async def run(*args: str | Path, stdin: bytes | None = None,
              timeout: float = 60) -> tuple[int, bytes, str]:
    proc = await asyncio.create_subprocess_exec(
        *map(str, args), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin or b""), timeout)
    assert proc.returncode is not None
    return proc.returncode, out, err.decode()


class Cluster:
    def __init__(self, plane: ControlPlane, proxy: FaultProxy, dumps: Path) -> None:
        self.plane, self.proxy, self.dumps = plane, proxy, dumps
        self.kubeconfig = plane.admin_kubeconfig
        # The admin's, through the fault proxy (for the watch's drops and 410).
        self.proxied = dumps / "proxied.kubeconfig"
        self.proxied.write_text(kubeconfig_text(proxy.url, plane.ca.cert, user="admin",
                                                cert=admin_pair(plane)))

    async def kubectl(self, *args: str) -> bytes:
        code, out, err = await self.plane.kubectl(*args)
        assert code == 0, err.decode()
        return out

    async def analyze(self, *args: str | Path) -> Any:
        """`nodelet analyze ... -o json` as a process (live: its own event loop)."""
        code, out, err = await run(*NODELET, *args, "-o", "json")
        assert code == 0 and err == "", err
        return json.loads(out)

    def analyze_files(self, *args: str | Path, output: str = "json") -> str:
        """The same on files, in this process (no interpreter start-up per case)."""
        report = self.dumps / f"report.{output}"
        assert cli.main(["analyze", *map(str, args), "-o", output, "--output-file",
                         str(report)]) == 0
        return report.read_text()


def admin_pair(plane: ControlPlane) -> Pair:
    admin = plane.root / "pki" / "admin"
    return Pair(Path(f"{admin}.crt"), Path(f"{admin}.key"))


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def cluster(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    root = tmp_path_factory.mktemp("analyze-kubectl")
    plane = await asyncio.to_thread(ControlPlane.start)
    failures = request.session.testsfailed
    failed = True
    try:
        async with plane.admin() as admin:
            await populate(admin)
        async with FaultProxy(plane, root, credentials=lambda: admin_pair(plane)) as proxy:
            c = Cluster(plane, proxy, root)
            (root / "pods.json").write_bytes(await c.kubectl("get", "pods", "-A", "-o", "json"))
            (root / "pods.yaml").write_bytes(await c.kubectl("get", "pods", "-A", "-o", "yaml"))
            (root / "events.yaml").write_bytes(
                await c.kubectl("get", "events", "-A", "-o", "yaml"))
            (root / "mixed.json").write_bytes(
                await c.kubectl("get", "pods,events,services", "-A", "-o", "json"))
            (root / "cluster-info.txt").write_bytes(
                await c.kubectl("cluster-info", "dump", "-A"))
            await c.kubectl("cluster-info", "dump", "-A", "--output-directory",
                            str(root / "tree"))
            (root / "pods.yaml.gz").write_bytes(
                gzip.compress((root / "pods.yaml").read_bytes()))
            yield c
        failed = request.session.testsfailed > failures
    finally:
        plane.stop(keep=failed)
        if failed:
            print(f"\ncontrol plane logs kept in {plane.logs}")


def essentials(doc: Any) -> tuple[Any, ...]:
    """What every shape of the same cluster must agree on."""
    return (doc["summary"]["pods"], doc["summary"]["stuck"], doc["summary"]["recreated"],
            doc["overall"]["scheduledToReadyToStart"],
            sorted((s["name"], tuple(e["reason"] for e in s["events"])) for s in doc["stuck"]),
            [r["name"] for r in doc["recreated"]])


EXPECTED = (
    9, 3, 1, {"count": 4, "p50": 2.0, "p90": 3.0, "p99": 3.0, "max": 3.0},
    [("ip-exhausted", ("FailedCreatePodSandBox",)), ("kata-pod", ("FailedCreatePodSandBox",)),
     ("needs-config", ("FailedMount",))],
    ["coredns-7d4b9c-x2x9z"],
)


@pytest.mark.parametrize(
    "inputs",
    [
        ["pods.json", "events.yaml"],
        ["pods.yaml", "events.yaml"],
        ["pods.yaml.gz", "events.yaml"],
        ["mixed.json"],
        ["cluster-info.txt"],
        ["tree"],
        ["tree", "pods.json", "mixed.json"],  # the same pods three times: counted once
    ],
    ids=["json", "yaml", "gzip", "mixed-list", "cluster-info-stdout", "cluster-info-tree",
         "all-together"],
)
async def test_every_kubectl_dump_gives_the_same_analysis(cluster: Cluster,
                                                          inputs: list[str]) -> None:
    doc = json.loads(cluster.analyze_files(*(cluster.dumps / name for name in inputs)))
    assert essentials(doc) == EXPECTED
    stuck = {s["name"]: s for s in doc["stuck"]}
    assert "no IP addresses available" in stuck["ip-exhausted"]["events"][0]["lastMessage"]
    assert stuck["kata-pod"]["runtimeClass"] == "kata"
    assert stuck["needs-config"]["condition"]["message"] == NO_CONFIGMAP
    assert doc["recreated"][0]["reason"].startswith("container main started at")
    assert doc["termination"]["deletionToNotReady"]["count"] == 1
    if len(inputs) > 1 and inputs[0] == "tree":
        assert any("appeared more than once" in n for n in doc["notes"])


@pytest.mark.parametrize("output", ["table", "html"])
async def test_table_and_html_from_a_cluster_info_tree(cluster: Cluster, output: str) -> None:
    text = cluster.analyze_files(cluster.dumps / "tree", output=output)
    if output == "table":
        assert text.startswith("At a glance\n  How fast: scheduled → ready-to-start-containers "
                               "p50 2s")
        assert max(map(len, text.splitlines())) <= 100
        assert "Skipped objects that are neither Pods nor Events:" in text
        assert "no IP addresses available in range set" in " ".join(
            text.split("\n\n")[0].split())
    else:
        assert "<h2>At a glance</h2>" in text and "Re-created sandboxes (1)" in text


async def test_live_list_in_pages_by_namespace_and_selector(cluster: Cluster) -> None:
    plane = cluster.plane
    before = len(plane.audit_events())
    doc = await cluster.analyze("--kubeconfig", cluster.kubeconfig, "-A", "--chunk-size", "2")
    assert essentials(doc) == EXPECTED
    pages = await eventually(
        lambda: [urllib.parse.unquote(e["requestURI"]) for e in plane.audit_events()[before:]
                 if e.get("user", {}).get("username") == "kubernetes-admin"
                 and e["verb"] == "list" and e["objectRef"].get("resource") == "pods"
                 and e["stage"] == "ResponseComplete"],
        within=10, until=lambda p: len(p) == 5, what="five pages of pods listed")
    assert all("limit=2" in p for p in pages), pages
    assert sum("continue=" in p for p in pages) == 4, pages
    team = await cluster.analyze("--kubeconfig", cluster.kubeconfig, "-n", "team-a")
    assert team["summary"]["pods"] == 4 and team["summary"]["stuck"] == 3
    web = await cluster.analyze("--kubeconfig", cluster.kubeconfig, "-A", "-l", "app=web")
    assert web["summary"]["pods"] == 4 and web["summary"]["stuck"] == 0
    # A node's identity may not list pods cluster-wide (the real Node authorizer refuses the
    # first list, of pods): one line, exit 2.
    pair = Authority.load(plane.ca, cluster.dumps).issue("node", "system:node:n1",
                                                         orgs=("system:nodes",))
    node = cluster.dumps / "node.kubeconfig"
    node.write_text(kubeconfig_text(plane.server, plane.ca.cert, user="n1", cert=pair))
    code, out, err = await run(*NODELET, "--kubeconfig", node, "-A")
    assert (code, out) == (2, b"") and err.count("\n") == 1, err
    assert err.startswith(f"Error: {plane.server}: GET /api/v1/pods: 403 Forbidden"), err
    assert 'User "system:node:n1" cannot list resource "pods"' in err, err


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()  # type: ignore[no-any-return]


async def test_watch_prints_sandbox_ready_times_and_survives_drops_and_410(
        cluster: Cluster) -> None:
    proxy = cluster.proxy
    proc = await asyncio.create_subprocess_exec(
        *NODELET, "--kubeconfig", str(cluster.proxied), "-A", "--watch",
        "--metrics-address", "127.0.0.1:0", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    lines: list[str] = []

    async def read_lines() -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            lines.append(line.decode().rstrip("\n"))

    reader = asyncio.get_running_loop().create_task(read_lines(), name="watch-output")
    try:
        await eventually(lambda: [ln for ln in lines if ln.startswith("# watching")],
                         within=30, what="the first list", seen=lambda _: repr(lines))
        port = int(next(ln for ln in lines if "serving metrics" in ln).rsplit(":", 1)[1]
                   .split("/")[0])
        assert sum(" sandbox ready " in ln for ln in lines) == 4
        assert sum("stuck before its sandbox" in ln for ln in lines) == 3
        assert sum("sandbox re-created" in ln for ln in lines) == 1

        async def start_pod(name: str) -> None:
            now = datetime.now(UTC)
            started = pod(name, "default", conditions(2, 3, base=now))
            started["status"]["startTime"] = stamp(0, now)
            async with cluster.plane.admin() as admin:
                await create(admin, started)

        async def reported(name: str) -> str:
            found = await eventually(
                lambda: [ln for ln in lines if f"default/{name} " in ln and "ready" in ln],
                within=30, what=f"{name} reported", seen=lambda _: repr(lines[-5:]))
            return found[0]

        await start_pod("new-1")
        assert "sandbox ready 2s after scheduled, ready 3s" in await reported("new-1")
        proxy.drop_watches()  # the client watches again from where it was
        await start_pod("new-2")
        await reported("new-2")
        # The next watch is answered 410 (its resourceVersion too old): list again.
        proxy.inject(verb="watch", path="/pods$", gone=True, times=1)
        proxy.drop_watches()
        await start_pod("new-3")
        await reported("new-3")
        text = await eventually(lambda: metrics(port), within=10, what="metrics",
                                until=lambda t: "nodelet_analyze_relists_total 2" in t)
        assert 'nodelet_analyze_sandbox_ready_seconds_count{namespace="default"} 7' in text
        assert 'nodelet_analyze_sandbox_ready_seconds_bucket{namespace="default",le="2"} 6' \
            in text
        assert "nodelet_analyze_pods_stuck 3" in text
        assert "nodelet_analyze_sandboxes_recreated_total 1" in text
        # Nothing reported twice across the relist.
        assert sum(" sandbox ready " in ln for ln in lines) == 7
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30)
        await reader
        stderr = await proc.stderr.read() if proc.stderr else b""
    assert code == 0, stderr.decode()
