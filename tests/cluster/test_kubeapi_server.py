"""The test API server itself behaves like kube-apiserver where nodelet relies on it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio

from kubeapi import KubeApiServer, pod_object

H = {"Authorization": "Bearer admin-token"}  # system:masters: the tests act as the cluster
SMP = {**H, "Content-Type": "application/strategic-merge-patch+json"}
PODS = "/api/v1/namespaces/default/pods"


@pytest_asyncio.fixture(loop_scope="session")
async def api() -> AsyncIterator[tuple[KubeApiServer, aiohttp.ClientSession]]:
    server = KubeApiServer(bookmark_interval=0.1)
    await server.start()
    async with aiohttp.ClientSession(server.url) as session:
        yield server, session
    await server.stop()


async def call(session: aiohttp.ClientSession, method: str, path: str, body: object = None,
               headers: dict[str, str] | None = None) -> tuple[int, dict]:
    data = json.dumps(body) if body is not None else None
    headers = H if headers is None else headers
    async with session.request(method, path, data=data, headers=headers) as r:
        return r.status, await r.json()


async def test_create_assigns_identity_and_refuses_duplicates(api) -> None:
    _, s = api
    code, pod = await call(s, "POST", PODS, pod_object("a", node="n1"))
    assert code == 201
    meta = pod["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"] == "1"
    code, err = await call(s, "POST", PODS, pod_object("a", node="n1"))
    assert (code, err["reason"], err["kind"]) == (409, "AlreadyExists", "Status")
    code, err = await call(s, "GET", f"{PODS}/nope")
    assert (code, err["reason"]) == (404, "NotFound")
    code, _ = await call(s, "GET", PODS, headers={})
    assert code == 401


async def test_put_with_stale_resource_version_conflicts(api) -> None:
    _, s = api
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    _, lease = await call(s, "POST", path, {"metadata": {"name": "n1"}, "spec": {}})
    lease["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z"
    code, updated = await call(s, "PUT", f"{path}/n1", lease)
    assert code == 200 and updated["metadata"]["resourceVersion"] != lease["metadata"][
        "resourceVersion"]
    code, err = await call(s, "PUT", f"{path}/n1", lease)  # the old resourceVersion again
    assert (code, err["reason"]) == (409, "Conflict")


async def test_strategic_merge_of_pod_status(api) -> None:
    _, s = api
    _, pod = await call(s, "POST", PODS, pod_object("b", node="n1"))
    uid = pod["metadata"]["uid"]
    patch = {"metadata": {"uid": uid}, "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "Gate", "status": "True"}],
        "containerStatuses": [{"name": "main", "ready": False}],
        "podIPs": [{"ip": "10.0.0.1"}]}}
    code, out = await call(s, "PATCH", f"{PODS}/b/status", patch, SMP)
    assert code == 200
    types = [c["type"] for c in out["status"]["conditions"]]
    assert types == ["PodScheduled", "Ready", "Gate"]  # merged by type, others kept
    patch = {"metadata": {"uid": uid}, "status": {
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "Gate", "$patch": "delete"}],
        "containerStatuses": [{"name": "main", "ready": True}],
        "podIPs": [{"$patch": "replace"}, {"ip": "10.0.0.2"}]}}
    _, out = await call(s, "PATCH", f"{PODS}/b/status", patch, SMP)
    status = out["status"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("PodScheduled", "True"), ("Ready", "True")]
    assert status["containerStatuses"] == [{"name": "main", "ready": True}]
    assert status["podIPs"] == [{"ip": "10.0.0.2"}]
    rv = out["metadata"]["resourceVersion"]
    _, same = await call(s, "PATCH", f"{PODS}/b/status", patch, SMP)
    assert same["metadata"]["resourceVersion"] == rv  # a no-op patch is not a new version
    code, err = await call(s, "PATCH", f"{PODS}/b/status",
                           {"metadata": {"uid": "other"}, "status": {"phase": "Running"}}, SMP)
    assert (code, err["reason"]) == (409, "Conflict")
    _, spec_patch = await call(s, "PATCH", f"{PODS}/b", {"status": {"phase": "Failed"}}, SMP)
    assert spec_patch["status"]["phase"] == "Pending"  # status only through /status


async def test_graceful_pod_delete_then_grace_zero_with_uid_precondition(api) -> None:
    server, s = api
    _, pod = await call(s, "POST", PODS, pod_object("c", node="n1", grace=7))
    uid = pod["metadata"]["uid"]
    code, marked = await call(s, "DELETE", f"{PODS}/c", {})
    assert code == 200 and marked["metadata"]["deletionGracePeriodSeconds"] == 7
    assert marked["metadata"]["deletionTimestamp"]
    code, err = await call(s, "DELETE", f"{PODS}/c",
                           {"gracePeriodSeconds": 0, "preconditions": {"uid": "x"}})
    assert (code, err["reason"]) == (409, "Conflict")
    code, _ = await call(s, "DELETE", f"{PODS}/c",
                         {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
    assert code == 200 and server.get("pods", "default", "c") is None


async def read_events(response: aiohttp.ClientResponse, n: int) -> list[dict]:
    out = []
    while len(out) < n:
        line = await asyncio.wait_for(response.content.readline(), 5)
        assert line, f"stream ended after {out}"
        out.append(json.loads(line))
    return out


async def test_watch_from_resource_version_with_selector_and_bookmarks(api) -> None:
    server, s = api
    server.create("pods", pod_object("w1", node="n1"))
    start = server.rv
    server.create("pods", pod_object("w2", node="n1"))
    server.create("pods", pod_object("w3", node="other"))
    params = {"watch": "1", "resourceVersion": str(start), "fieldSelector": "spec.nodeName=n1",
              "allowWatchBookmarks": "true", "timeoutSeconds": "5"}
    async with s.get(PODS, params=params, headers=H) as r:
        first = await read_events(r, 1)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in first] == [("ADDED", "w2")]
        w1 = server.get("pods", "default", "w1")
        w1["spec"]["nodeName"] = "elsewhere"  # leaving the selector is a DELETED event
        server.update("pods", w1)
        events = await read_events(r, 2)
    assert events[0]["type"] == "DELETED" and events[0]["object"]["metadata"]["name"] == "w1"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["resourceVersion"] == str(server.rv)


async def test_watch_from_compacted_version_gets_410_in_stream(api) -> None:
    server, s = api
    server.create("pods", pod_object("g1", node="n1"))
    old = server.rv
    server.create("pods", pod_object("g2", node="n1"))
    server.compact()
    async with s.get(PODS, params={"watch": "1", "resourceVersion": str(old)},
                     headers=H) as r:
        assert r.status == 200
        (event,) = await read_events(r, 1)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410


async def test_injected_faults_and_request_log(api) -> None:
    server, s = api
    server.inject(method="GET", path=r"/pods$", status=429, retry_after=3, times=1)
    async with s.get(PODS, headers=H) as r:
        assert r.status == 429 and r.headers["Retry-After"] == "3"
    async with s.get(PODS, headers=H) as r:
        assert r.status == 200
    server.inject(path=r"/pods/slow", delay=0.3, fail=False)
    code, _ = await call(s, "GET", f"{PODS}/slow")
    assert code == 404  # delayed, then answered normally
    assert server.count(verb="list", resource="pods") >= 2
    assert server.requests[-1].verb == "get"
