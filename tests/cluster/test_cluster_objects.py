"""ConfigMaps and Secrets by watch (cluster mode alone) on the real kube-apiserver, through
the fault proxy: one watch per object a pod reads, from its first reader to its last; created,
changed and deleted objects reach `lookup` and `on_objects` without any GET; errors and 410
Gone re-establish the watch; immutable objects stop being watched once seen. Every list and
watch is the node's own, allowed by the Node authorizer because a pod bound to the node reads
the object (`reader`)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from nodelet.model.core.pods import PodUID
from support.clusterfixtures import Rig
from support.controlplane import AdminClient, node_path, pod, pod_path
from support.faultproxy import FaultProxy
from support.polling import eventually

NAMES = ["conf", "other", "later", *(f"cm{n}" for n in range(150))]


@pytest_asyncio.fixture(loop_scope="session")
async def reader(make_rig: Any, admin: AdminClient, namespace: str) -> AsyncIterator[str]:
    """A pod bound to the rig's node that reads every object the tests watch: under the Node
    authorizer a node may list and watch only the ConfigMaps and Secrets of pods bound to it
    (the readers the tests announce are stand-ins for this pod). The namespace, for keys."""
    volumes: list[dict[str, Any]] = [{"name": f"v{n}", "configMap": {"name": name}}
                                     for n, name in enumerate(NAMES)]
    volumes.append({"name": "token", "secret": {"secretName": "token"}})
    await admin.create(pod_path(namespace), pod("reader", node=make_rig.node_name,
                                                scheduler=False, volumes=volumes))
    yield namespace


def key(namespace: str, name: str = "conf", kind: str = "ConfigMap") -> tuple[str, str, str]:
    return (kind, namespace, name)


def configmap(name: str = "conf", **extra: object) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"a": "1"}, **extra}


def changed(rig: Rig) -> set[Any]:
    return set().union(*rig.objects_changed)


def cm_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def watches(proxy: FaultProxy) -> list[str]:
    return proxy.open_watches("/configmaps$")


def lists(proxy: FaultProxy) -> int:
    return proxy.count(method="GET", path="/configmaps$", watch=False)


async def test_absent_object_is_fetched_then_created_by_watch(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, reader: str) -> None:
    conf = key(reader)
    async with make_rig() as rig:
        rig.mode.set_readers({PodUID("p1"): {conf}})
        await rig.mode.objects_fetched({conf})  # the first list answered: absent, not unknown
        assert rig.mode.lookup_object(*conf) is None
        assert not rig.objects_changed  # no one looked it up before: no one to wake
        await eventually(lambda: watches(proxied), within=5,
                         until=lambda w: w == ["metadata.name=conf"],
                         what="watched from the list on")
        rig.objects_changed.clear()
        await admin.create(cm_path(reader), configmap())
        await eventually(lambda: conf in changed(rig), within=5, what="creation noticed")
        found = rig.mode.lookup_object(*conf)
        assert found is not None and dict(found.data) == {"a": "1"}
        # Listed once, then followed by the watch: never read by GET, never listed again.
        assert proxied.count(method="GET", path="/configmaps/") == 0
        assert lists(proxied) == 1


async def test_a_lookup_before_the_first_list_is_answered_by_a_wake(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, reader: str) -> None:
    conf = key(reader)
    await admin.create(cm_path(reader), configmap())
    async with make_rig() as rig:
        proxied.inject(verb="list", path="/configmaps$", delay=0.5)
        rig.mode.set_readers({PodUID("p1"): {conf}})
        assert rig.mode.lookup_object(*conf) is None  # not listed yet
        await eventually(lambda: conf in changed(rig), within=5, what="woken once listed")
        assert rig.mode.lookup_object(*conf) is not None


async def test_changes_and_deletion_reach_lookup(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, reader: str) -> None:
    conf, secret_key = key(reader), key(reader, "token", "Secret")
    await admin.create(cm_path(reader), configmap())
    secrets_path = f"/api/v1/namespaces/{reader}/secrets"
    await admin.create(secrets_path, {"metadata": {"name": "token"},
                                      "data": {"t": base64.b64encode(b"one").decode()}})
    async with make_rig() as rig:
        rig.mode.set_readers({PodUID("p1"): {conf, secret_key}})
        await rig.mode.objects_fetched({conf, secret_key})
        found = rig.mode.lookup_object(*secret_key)
        assert found is not None and dict(found.data) == {"t": b"one"}
        rig.objects_changed.clear()
        await admin.patch(cm_path(reader, "conf"), {"data": {"a": "2"}})
        await admin.patch(f"{secrets_path}/token",
                          {"data": {"t": base64.b64encode(b"two").decode()}})
        await eventually(lambda: {conf, secret_key} <= changed(rig), within=5,
                         what="both changes noticed")
        assert dict(rig.mode.lookup_object(*conf).data) == {"a": "2"}  # type: ignore[union-attr]
        assert dict(rig.mode.lookup_object(*secret_key).data) == {  # type: ignore[union-attr]
            "t": b"two"}
        await admin.delete(cm_path(reader, "conf"))
        await eventually(lambda: rig.mode.lookup_object(*conf) is None, within=5,
                         what="deletion noticed")
        # No GET of ConfigMaps or Secrets.
        assert proxied.count(method="GET", path="/(configmaps|secrets)/") == 0


async def test_one_watch_per_object_dropped_with_its_last_reader(
        make_rig: Any, proxied: FaultProxy, reader: str) -> None:
    conf, other = key(reader), key(reader, "other")
    async with make_rig() as rig:
        rig.mode.set_readers({PodUID("p1"): {conf}, PodUID("p2"): {conf, other}})
        await eventually(lambda: watches(proxied), within=5,
                         until=lambda w: w == ["metadata.name=conf", "metadata.name=other"],
                         what="one watch per object")
        rig.mode.set_readers({PodUID("p1"): {conf}})  # p2 gone: "other" has no reader
        await eventually(lambda: watches(proxied), within=5,
                         until=lambda w: w == ["metadata.name=conf"],
                         what="the watch of 'other' closed")
        rig.mode.set_readers({PodUID("p1"): {conf}, PodUID("p3"): {conf}})  # another reader
        rig.mode.set_readers({PodUID("p3"): {conf}})  # the first goes: one reader left
        assert rig.mode.objects is not None and rig.mode.objects.watched() == {conf}
        rig.mode.set_readers({})
        await eventually(lambda: watches(proxied), within=5, until=lambda w: w == [],
                         what="every watch closed")
        assert rig.mode.lookup_object(*conf) is None  # and its value forgotten
        assert lists(proxied) == 2  # conf once, other once


async def test_watch_errors_and_410_reestablish_the_watch(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, reader: str) -> None:
    conf = key(reader)
    async with make_rig() as rig:
        rig.mode.set_readers({PodUID("p1"): {conf}})
        await rig.mode.objects_fetched({conf})
        failing = proxied.inject(verb="watch", path="/configmaps$", status=500, times=2)
        proxied.drop_watches()
        await admin.create(cm_path(reader), configmap())
        await eventually(lambda: rig.mode.lookup_object(*conf), within=10,
                         what="created while the watch was failing")
        gone = proxied.inject(verb="watch", path="/configmaps$", gone=True, times=1)
        proxied.drop_watches()
        await admin.patch(cm_path(reader, "conf"), {"data": {"a": "3"}})
        await eventually(lambda: rig.mode.lookup_object(*conf), within=10,
                         until=lambda found: dict(found.data) == {"a": "3"},
                         what="changed while the watch was gone (410: relisted)")
        assert failing.hits == 2 and gone.hits == 1
        assert lists(proxied) == 2
        await eventually(lambda: watches(proxied), within=5,
                         until=lambda w: w == ["metadata.name=conf"], what="watching again")


async def test_immutable_object_is_not_watched_once_seen(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, reader: str) -> None:
    conf, absent = key(reader), key(reader, "later")
    await admin.create(cm_path(reader), configmap(immutable=True))
    async with make_rig() as rig:
        rig.mode.set_readers({PodUID("p1"): {conf, absent}})
        await rig.mode.objects_fetched({conf, absent})
        found = rig.mode.lookup_object(*conf)
        assert found is not None and found.immutable
        await eventually(lambda: watches(proxied), within=5,
                         until=lambda w: w == ["metadata.name=later"],
                         what="only the absent one still watched")
        assert rig.mode.objects is not None and rig.mode.objects.watched() == {absent}
        assert rig.mode.lookup_object(*conf) is found  # kept while read
        await admin.create(cm_path(reader), configmap("later", immutable=True))
        await eventually(lambda: watches(proxied), within=5, until=lambda w: w == [],
                         what="created immutable: no longer watched")
        assert rig.mode.lookup_object(*absent) is not None


async def test_many_watched_objects_leave_room_for_other_calls(
        make_rig: Any, proxied: FaultProxy, reader: str) -> None:
    """Each watch holds an HTTP/1.1 connection (no HTTP/2 multiplexing here): 150 of them
    must not use up the client's connection pool and stall status writes and the like."""
    keys = {key(reader, f"cm{n}") for n in range(150)}
    async with make_rig(qps=0) as rig:
        rig.mode.set_readers({PodUID("p1"): keys})
        await eventually(lambda: watches(proxied), within=30,
                         until=lambda w: len(w) == len(keys), what="150 watches open")
        node = await rig.mode.client.request("GET", node_path(rig.node))
        assert node["metadata"]["name"] == rig.node
