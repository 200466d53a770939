"""The local HTTP API on a real aiohttp server (127.0.0.1:0), read with real HTTP clients."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from nodelet.adapters import api_client, http_server
from nodelet.model.core import events as ev
from nodelet.model.core import health as hm
from nodelet.model.core import pods
from nodelet.model.core import status as st

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
TOKEN = "s3cret-token"


def make_pod(name: str, uid: str) -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    raw = {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }
    return pods.Pod(uid=pods.PodUID(uid), name=name, namespace="default", spec=spec, raw=raw)


WEB = make_pod("web", "uid-web")
DB = make_pod("db", "uid-db")
WEB_STATUS = st.PodStatus(
    phase="Running",
    conditions=(
        st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "True", last_transition_time=T0),
    ),
    pod_ips=("10.88.0.5",),
    start_time=T0,
)


def make_event(pod: pods.Pod, reason: str) -> ev.Event:
    return ev.new_event(pod, "Normal", reason, f"{reason} {pod.name}", at=T0, host="node-a")


@dataclass
class FakeView:
    checks: list[hm.HealthCheck] = field(default_factory=lambda: [hm.HealthCheck("runtime", True)])

    def pods(self) -> list[tuple[pods.Pod, st.PodStatus | None]]:
        return [(WEB, WEB_STATUS), (DB, None)]

    def events(self, pod: str | None, namespace: str | None) -> list[ev.Event]:
        events = [make_event(WEB, ev.PULLING), make_event(DB, ev.STARTED)]
        return [e for e in events if pod in (None, e.pod_name) and namespace in (None, e.namespace)]

    def health(self) -> list[hm.HealthCheck]:
        return self.checks

    def manifests(self) -> list[hm.ManifestReport]:
        return [
            hm.ManifestReport("/m/web.yaml", 0, "default/web", True),
            hm.ManifestReport("/m/bad.yaml", None, None, False, "not YAML"),
        ]

    def metrics_text(self) -> tuple[bytes, str]:
        return b"kubelet_started_pods_total 2.0\n", "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Running:
    server: http_server.HttpServer
    view: FakeView
    session: aiohttp.ClientSession

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    async def get(self, path: str, **headers: str) -> tuple[int, str, str]:
        async with self.session.get(self.url + path, headers=headers) as response:
            return response.status, response.headers.get("Content-Type", ""), await response.text()

    async def get_json(self, path: str) -> Any:
        async with self.session.get(self.url + path) as response:
            assert response.status == 200
            return await response.json()


async def start(token: str | None = None) -> tuple[http_server.HttpServer, FakeView]:
    view = FakeView()
    server = http_server.HttpServer(view)
    await server.start("127.0.0.1", 0, token)
    return server, view


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    server, view = await start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Running(server, view, session)
    finally:
        await server.stop()


async def test_pods_is_a_kubelet_pod_list(running: Running) -> None:
    body = await running.get_json("/pods")
    assert (body["kind"], body["apiVersion"], body["metadata"]) == ("PodList", "v1", {})
    web, db = body["items"]
    assert (web["kind"], web["apiVersion"]) == ("Pod", "v1")
    assert web["metadata"]["uid"] == "uid-web"
    assert web["metadata"]["labels"] == {"app": "web"}
    assert web["status"]["podIP"] == "10.88.0.5"
    [condition] = web["status"]["conditions"]
    assert condition["type"] == "PodReadyToStartContainers"
    assert condition["lastTransitionTime"] == "2024-05-01T12:00:00Z"
    assert db["status"]["phase"] == "Pending"
    assert "conditions" not in db["status"]  # empty: left out, as the API server does


async def test_pods_precise_times(running: Running) -> None:
    body = await running.get_json("/pods?precise=true")
    condition = body["items"][0]["status"]["conditions"][0]
    assert condition["lastTransitionTime"] == "2024-05-01T12:00:00.123456Z"
    assert body["items"][0]["status"]["startTime"] == "2024-05-01T12:00:00.123456Z"


@pytest.mark.parametrize(
    ("query", "pods_seen"),
    [
        ("", ["web", "db"]),
        ("?pod=web", ["web"]),
        ("?pod=db&namespace=default", ["db"]),
        ("?namespace=x", []),
    ],
)
async def test_events_is_an_event_list(running: Running, query: str, pods_seen: list[str]) -> None:
    body = await running.get_json("/events" + query)
    assert (body["kind"], body["apiVersion"]) == ("EventList", "v1")
    assert [e["involvedObject"]["name"] for e in body["items"]] == pods_seen


async def test_healthz_ok(running: Running) -> None:
    assert await running.get("/healthz") == (200, "text/plain; charset=utf-8", "ok")
    status, _, text = await running.get("/healthz?verbose")
    assert (status, text) == (200, "[+]runtime ok\nhealthz check passed\n")


async def test_healthz_failure_lists_checks(running: Running) -> None:
    running.view.checks = [
        hm.HealthCheck("runtime", False, "no successful relist recently"),
        hm.HealthCheck("pod-workers", True),
    ]
    status, _, text = await running.get("/healthz")
    assert status == 500
    assert text == (
        "[-]runtime failed: no successful relist recently\n"
        "[+]pod-workers ok\n"
        "healthz check failed\n"
    )


async def test_manifests(running: Running) -> None:
    assert await running.get_json("/manifests") == [
        {"file": "/m/web.yaml", "document": 0, "pod": "default/web", "ok": True, "error": ""},
        {"file": "/m/bad.yaml", "document": None, "pod": None, "ok": False, "error": "not YAML"},
    ]


async def test_metrics(running: Running) -> None:
    status, content_type, text = await running.get("/metrics")
    assert (status, text) == (200, "kubelet_started_pods_total 2.0\n")
    assert content_type.startswith("text/plain; version=0.0.4")


async def test_unknown_route_is_404(running: Running) -> None:
    status, _, _ = await running.get("/nope")
    assert status == 404


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": TOKEN}, 401),
        ({"Authorization": f"Bearer {TOKEN}"}, 200),
    ],
)
async def test_token_auth(headers: dict[str, str], status: int) -> None:
    server, _ = await start(TOKEN)
    try:
        async with aiohttp.ClientSession() as session:
            for path in ("/pods", "/events", "/healthz", "/manifests", "/metrics"):
                url = f"http://127.0.0.1:{server.port}{path}"
                async with session.get(url, headers=headers) as response:
                    assert (path, response.status) == (path, status)
    finally:
        await server.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
async def test_refuses_non_loopback_without_token(host: str) -> None:
    server = http_server.HttpServer(FakeView())
    with pytest.raises(
        http_server.InsecureBindError, match=f"binding {host} requires --auth-token-file"
    ):
        await server.start(host, 0, None)
    await server.stop()


async def test_non_loopback_with_token_is_allowed() -> None:
    server, _ = await start(TOKEN)
    await server.stop()
    guarded = http_server.HttpServer(FakeView())
    await guarded.start("0.0.0.0", 0, TOKEN)
    try:
        assert guarded.port > 0
    finally:
        await guarded.stop()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert http_server.is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("host", "loopback", "answered"),
    [
        ("localhost", True, True), ("LOCALHOST:10255", True, True), ("127.0.0.1", True, True),
        ("127.0.0.1:10255", True, True), ("127.1.2.3:80", True, True), ("[::1]", True, True),
        ("[::1]:10255", True, True),
        # An address cannot be rebound: the node e2e suite reads the read-only port at the
        # `address` /configz gives (0.0.0.0), others at the node's own address.
        ("0.0.0.0:10255", False, True), ("10.0.0.5:10255", False, True),
        ("[::2]:10255", False, True), ("[::]", False, True),
        # DNS rebinding: a page's own name resolved to 127.0.0.1 comes with its own name.
        ("evil.example", False, False), ("evil.example:10255", False, False),
        ("localhost.evil.example", False, False), ("127.0.0.1.nip.io", False, False),
        ("::1", False, False), ("[::1]x", False, False), ("127.0.0.1:port", False, False),
        ("10.0.0.5:port", False, False), ("[10.0.0.5]", False, False), ("", False, False),
    ],
)
async def test_without_a_token_only_localhost_and_addresses_are_answered(
        running: Running, host: str, loopback: bool, answered: bool) -> None:
    assert http_server.loopback_host(host) is loopback
    assert (loopback or http_server.address_host(host)) is answered
    for path in ("/pods", "/ui", "/healthz"):
        status, _, text = await running.get(path, Host=host)
        assert (status == 200) is answered, (host, path, status, text)
        if not answered:
            assert status == 403 and "neither localhost nor an IP address" in text


@dataclass
class FakeStats:
    asked: list[bool] = field(default_factory=list)

    async def summary(self, *, only_cpu_and_memory: bool) -> dict[str, Any]:
        self.asked.append(only_cpu_and_memory)
        return {"node": {"nodeName": "node-a"}, "pods": []}

    async def resource_metrics(self) -> bytes:
        return b"node_cpu_usage_seconds_total 1.5 1714564800123\n"

    async def probe_metrics(self) -> bytes:
        return b"prober_probe_total 3\n"


async def test_the_node_stats_are_served_as_on_the_kubelets_read_only_port() -> None:
    """/stats/summary (the node e2e suite reads it at `address:readOnlyPort`, with the Host
    0.0.0.0 and no credentials), the resource and probe metrics; none without stats."""
    stats = FakeStats()
    server = http_server.HttpServer(FakeView(), stats=stats)
    bare = http_server.HttpServer(FakeView())
    await server.start("127.0.0.1", 0, None)
    await bare.start("127.0.0.1", 0, None)
    try:
        async with aiohttp.ClientSession() as session:
            running = Running(server, FakeView(), session)
            status, kind, text = await running.get("/stats/summary",
                                                   Host=f"0.0.0.0:{server.port}")
            assert (status, kind.split(";")[0]) == (200, "application/json"), text
            assert json.loads(text) == {"node": {"nodeName": "node-a"}, "pods": []}
            assert (await running.get("/stats/summary/?only_cpu_and_memory=true"))[0] == 200
            assert stats.asked == [False, True]
            status, kind, text = await running.get("/metrics/resource")
            assert (status, kind.split(";")[0], text) == (200, "text/plain",
                                            "node_cpu_usage_seconds_total 1.5 1714564800123\n")
            assert (await running.get("/metrics/probes"))[2] == "prober_probe_total 3\n"
            without = Running(bare, FakeView(), session)
            for path in ("/stats/summary", "/metrics/resource", "/metrics/probes"):
                assert (await without.get(path))[0] == 404, path
            # Not served, and a scraper that parses the body anyway finds no sample in it.
            status, _, text = await running.get("/metrics/cadvisor")
            assert status == 404 and all(line.startswith("#") for line in text.splitlines())
    finally:
        await server.stop()
        await bare.stop()


async def test_with_a_token_any_host_is_answered() -> None:
    server, _ = await start(TOKEN)
    try:
        async with aiohttp.ClientSession() as session, session.get(
                f"http://127.0.0.1:{server.port}/pods",
                headers={"Host": "node-1.example:10255",
                         "Authorization": f"Bearer {TOKEN}"}) as response:
            assert response.status == 200
    finally:
        await server.stop()


async def test_port_in_use_is_a_server_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = http_server.HttpServer(FakeView())
        with pytest.raises(http_server.ServerError, match=f"127.0.0.1:{port}"):
            await server.start("127.0.0.1", port, None)


# --- the CLI's urllib client against the same real server


async def test_api_client_takes_a_server_without_a_scheme(running: Running) -> None:
    """`--server 127.0.0.1:PORT`, as kubectl takes it: plain HTTP."""
    bare = running.url.removeprefix("http://")
    pod_list = await asyncio.to_thread(api_client.ApiClient(bare).pods)
    assert [p["metadata"]["name"] for p in pod_list["items"]] == ["web", "db"]


async def test_api_client_reads_every_route(running: Running) -> None:
    client = api_client.ApiClient(running.url)
    pod_list = await asyncio.to_thread(client.pods, precise=True)
    assert [p["metadata"]["name"] for p in pod_list["items"]] == ["web", "db"]
    events = await asyncio.to_thread(client.events, pod="db")
    assert [e["reason"] for e in events["items"]] == ["Started"]
    assert len(await asyncio.to_thread(client.manifests)) == 2
    assert await asyncio.to_thread(client.healthz) == (True, "ok")
    running.view.checks = [hm.HealthCheck("runtime", False, "down")]
    healthy, text = await asyncio.to_thread(client.healthz)
    assert not healthy and "[-]runtime failed: down" in text


async def test_api_client_token() -> None:
    server, _ = await start(TOKEN)
    try:
        url = f"http://127.0.0.1:{server.port}"
        good = api_client.ApiClient(url, token=TOKEN)
        assert (await asyncio.to_thread(good.pods))["kind"] == "PodList"
        with pytest.raises(api_client.ApiClientError, match="401 Unauthorized"):
            await asyncio.to_thread(api_client.ApiClient(url).pods)
    finally:
        await server.stop()


def test_api_client_unreachable() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    expected = f"cannot reach nodelet at {url}: connection refused — is `nodelet run` running?"
    with pytest.raises(api_client.ApiClientError) as caught:
        api_client.ApiClient(url).pods()
    assert str(caught.value) == expected
