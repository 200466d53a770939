"""Events the API server refuses are dropped at once, as client-go's recordToSink drops them.

Found by Kubernetes' e2e suite ([NodeConformance] "Security Context ... should not run with an
explicit root user ID" waits for a Failed event): an event for a namespace being deleted (403,
then 404) was retried with a back-off up to 30 s for 12 attempts, and every later event of the
node waited behind it for minutes.

On the real kube-apiserver: the refusal is its own (a namespace held in Terminating by a
finalizer: 403 "is being terminated"); the 429 comes from the fault proxy in front of it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest_asyncio

from nodelet.adapters import kube, kubeconfig
from nodelet.model.core import events as ev
from nodelet.model.core import pods
from nodelet.services.status import eventposting
from support.controlplane import AdminClient, ControlPlane, Pair, kubeconfig_text
from support.faultproxy import FaultProxy
from support.polling import eventually

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
# A finalizer only the test removes: the namespace stays Terminating.
HOLD = "nodelet.test/hold"


def event(name: str, namespace: str) -> ev.Event:
    return ev.Event(name=f"{name}.18ee0000000000{len(name):02d}", namespace=namespace,
                    pod_name=name, pod_uid=pods.PodUID(f"uid-{name}"), type="Warning",
                    reason="Failed", message="Error: boom", count=1, first_timestamp=T0,
                    last_timestamp=T0, host="n1")


def event_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/events/{event(name, namespace).name}"


@pytest_asyncio.fixture(loop_scope="session")
async def api(control_plane: ControlPlane,
              tmp_path: Path) -> AsyncIterator[tuple[FaultProxy, kube.KubeClient]]:
    """An admin client of the real server through a fault proxy (the admin's certificate)."""
    admin = control_plane.root / "pki" / "admin"
    pair = Pair(Path(f"{admin}.crt"), Path(f"{admin}.key"))
    async with FaultProxy(control_plane, tmp_path, credentials=lambda: pair) as proxy:
        path = tmp_path / "kubeconfig"
        path.write_text(kubeconfig_text(proxy.url, control_plane.ca.cert, user="admin",
                                        cert=pair))
        client = kube.KubeClient(kubeconfig.load(path))
        try:
            yield proxy, client
        finally:
            await client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def terminating(admin: AdminClient) -> AsyncIterator[str]:
    """A namespace being deleted, held in Terminating by a finalizer until the end."""
    name = f"gone-{secrets.token_hex(3)}"
    path = f"/api/v1/namespaces/{name}"
    await admin.create("/api/v1/namespaces", {"metadata": {"name": name, "finalizers": [HOLD]}})
    await admin.delete(path)
    try:
        yield name
    finally:
        await admin.patch(path, {"metadata": {"finalizers": None}})


async def test_a_refused_event_does_not_hold_back_the_next(
        api: tuple[FaultProxy, kube.KubeClient], admin: AdminClient, namespace: str,
        terminating: str) -> None:
    proxy, client = api
    sink = eventposting.EventSink(client=client, retry=5.0, retry_max=30.0)
    task = asyncio.create_task(sink.run(), name="event-sink-under-test")
    try:
        sink.on_event(event("refused", terminating))
        sink.on_event(event("wanted", namespace))
        # Well before the 5 s a retry of the refused one would have waited.
        await eventually(lambda: admin.get(event_path(namespace, "wanted")),
                         within=3, what="the second event in the API")
        assert sink.dropped == 1
        # Refused by kube-apiserver itself, once: not retried.
        posts = [r for r in proxy.requests
                 if r.method == "POST" and f"/namespaces/{terminating}/" in r.path]
        assert [r.status for r in posts] == [403], posts
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_unanswered_request_is_retried(
        api: tuple[FaultProxy, kube.KubeClient], admin: AdminClient, namespace: str) -> None:
    proxy, client = api
    proxy.inject(method="POST", path=f"namespaces/{namespace}/events", status=429, times=1,
                 retry_after=0)
    sink = eventposting.EventSink(client=client, retry=0.05, retry_max=0.1)
    task = asyncio.create_task(sink.run(), name="event-sink-under-test")
    try:
        sink.on_event(event("later", namespace))
        await eventually(lambda: admin.get(event_path(namespace, "later")),
                         within=5, what="the event after a 429")
        assert sink.dropped == 0
        assert proxy.count(method="POST", path=f"/namespaces/{namespace}/events", status=429) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
