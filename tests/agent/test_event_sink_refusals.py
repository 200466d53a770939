"""Events the API server refuses are dropped at once, as client-go's recordToSink drops them.

Found by Kubernetes' e2e suite ([NodeConformance] "Security Context ... should not run with an
explicit root user ID" waits for a Failed event): an event for a namespace being deleted (403,
then 404) was retried with a back-off up to 30 s for 12 attempts, and every later event of the
node waited behind it for minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest_asyncio

from kubeapi import KubeApiServer
from nodelet.adapters import kube, kubeconfig
from nodelet.model.core import events as ev
from nodelet.model.core import pods
from nodelet.services import eventposting
from polling import eventually

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def event(name: str, namespace: str) -> ev.Event:
    return ev.Event(name=f"{name}.18ee0000000000{len(name):02d}", namespace=namespace,
                    pod_name=name, pod_uid=pods.PodUID(f"uid-{name}"), type="Warning",
                    reason="Failed", message="Error: boom", count=1, first_timestamp=T0,
                    last_timestamp=T0, host="n1")


@pytest_asyncio.fixture(loop_scope="session")
async def api(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, kube.KubeClient]]:
    server = KubeApiServer(node="n1")
    await server.start()
    client = kube.KubeClient(kubeconfig.load(server.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        yield server, client
    finally:
        await client.close()
        await server.stop()


async def test_a_refused_event_does_not_hold_back_the_next(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    # The first event's namespace is going away: refused (403, as for a terminating one).
    server.inject(method="POST", path="namespaces/gone/events", status=403, times=None)
    sink = eventposting.EventSink(client=client, retry=5.0, retry_max=30.0)
    task = asyncio.create_task(sink.run(), name="event-sink-under-test")
    try:
        sink.on_event(event("refused", "gone"))
        sink.on_event(event("wanted", "default"))
        # Well before the 5 s a retry of the refused one would have waited.
        await eventually(lambda: server.get("events", "default", event("wanted", "x").name),
                         within=3, what="the second event in the API")
        assert sink.dropped == 1
        posts = [r for r in server.requests if r.method == "POST" and "/gone/" in r.path]
        assert len(posts) == 1  # not retried
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_unanswered_request_is_retried(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    server.inject(method="POST", path="namespaces/default/events", status=429, times=1,
                  retry_after=0)
    sink = eventposting.EventSink(client=client, retry=0.05, retry_max=0.1)
    task = asyncio.create_task(sink.run(), name="event-sink-under-test")
    try:
        sink.on_event(event("later", "default"))
        await eventually(lambda: server.get("events", "default", event("later", "x").name),
                         within=5, what="the event after a 429")
        assert sink.dropped == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
