"""ConfigMaps and Secrets by watch (cluster mode) against the test API server: one watch per
object a pod reads, from its first reader to its last; created, changed and deleted objects
reach `lookup` and `on_objects` without any GET; errors and 410 Gone re-establish the watch;
immutable objects stop being watched once seen."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kubeapi import ClusterRig, KubeApiServer, pod_object
from nodelet.model.core.pods import PodUID
from polling import eventually

CONF = ("ConfigMap", "default", "conf")
CM_WATCH = ("default", "metadata.name=conf")


def configmap(name: str = "conf", **extra: object) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"a": "1"}, **extra}


@pytest.fixture(autouse=True)
def reader(server: KubeApiServer) -> None:
    """A pod bound to n1 that reads every object the tests watch: under the Node authorizer a
    node may list and watch only the ConfigMaps and Secrets of pods bound to it (the readers
    the tests announce are stand-ins for this pod)."""
    names = ["conf", "other", "later", *(f"cm{n}" for n in range(150))]
    volumes = [{"name": f"v{n}", "configMap": {"name": name}} for n, name in enumerate(names)]
    volumes.append({"name": "token", "secret": {"secretName": "token"}})
    server.create("pods", pod_object("reader", node="n1", volumes=volumes))


def changed(rig: ClusterRig) -> set:
    return set().union(*rig.objects_changed)


async def test_absent_object_is_fetched_then_created_by_watch(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        rig.mode.set_readers({PodUID("p1"): {CONF}})
        await rig.mode.objects_fetched({CONF})  # the first list answered: absent, not unknown
        assert rig.mode.lookup_object(*CONF) is None
        assert not rig.objects_changed  # no one looked it up before: no one to wake
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: w == [CM_WATCH], what="watched from the list on")
        rig.objects_changed.clear()
        server.create("configmaps", configmap())
        await eventually(lambda: CONF in changed(rig), within=5, what="creation noticed")
        found = rig.mode.lookup_object(*CONF)
        assert found is not None and dict(found.data) == {"a": "1"}
        # Listed once, then followed by the watch: never read by GET, never listed again.
        assert server.count(verb="get", resource="configmaps") == 0
        assert server.count(verb="list", resource="configmaps") == 1


async def test_a_lookup_before_the_first_list_is_answered_by_a_wake(
        server: KubeApiServer, tmp_path: Path) -> None:
    server.create("configmaps", configmap())
    async with ClusterRig(server, tmp_path) as rig:
        server.inject(verb="list", path="/configmaps$", delay=0.5, fail=False)
        rig.mode.set_readers({PodUID("p1"): {CONF}})
        assert rig.mode.lookup_object(*CONF) is None  # not listed yet
        await eventually(lambda: CONF in changed(rig), within=5, what="woken once listed")
        assert rig.mode.lookup_object(*CONF) is not None


async def test_changes_and_deletion_reach_lookup(server: KubeApiServer, tmp_path: Path) -> None:
    server.create("configmaps", configmap())
    secret_key = ("Secret", "default", "token")
    server.create("secrets", {"metadata": {"name": "token", "namespace": "default"},
                              "data": {"t": base64.b64encode(b"one").decode()}})
    async with ClusterRig(server, tmp_path) as rig:
        rig.mode.set_readers({PodUID("p1"): {CONF, secret_key}})
        await rig.mode.objects_fetched({CONF, secret_key})
        assert dict(rig.mode.lookup_object(*secret_key).data) == {"t": b"one"}
        rig.objects_changed.clear()
        server.update("configmaps", {**configmap(), "data": {"a": "2"}})
        server.update("secrets", {"metadata": {"name": "token", "namespace": "default"},
                                  "data": {"t": base64.b64encode(b"two").decode()}})
        await eventually(lambda: {CONF, secret_key} <= changed(rig), within=5,
                         what="both changes noticed")
        assert dict(rig.mode.lookup_object(*CONF).data) == {"a": "2"}
        assert dict(rig.mode.lookup_object(*secret_key).data) == {"t": b"two"}
        server.delete("configmaps", "default", "conf")
        await eventually(lambda: rig.mode.lookup_object(*CONF) is None, within=5,
                         what="deletion noticed")
        assert server.count(verb="get") == server.count(verb="get", resource="nodes") + \
            server.count(verb="get", resource="leases")  # no GET of ConfigMaps or Secrets


async def test_one_watch_per_object_dropped_with_its_last_reader(
        server: KubeApiServer, tmp_path: Path) -> None:
    other = ("ConfigMap", "default", "other")
    async with ClusterRig(server, tmp_path) as rig:
        rig.mode.set_readers({PodUID("p1"): {CONF}, PodUID("p2"): {CONF, other}})
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: len(w) == 2, what="one watch per object")
        assert server.open_watches("configmaps") == [CM_WATCH, ("default", "metadata.name=other")]
        rig.mode.set_readers({PodUID("p1"): {CONF}})  # p2 gone: "other" has no reader
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: w == [CM_WATCH], what="the watch of 'other' closed")
        rig.mode.set_readers({PodUID("p1"): {CONF}, PodUID("p3"): {CONF}})  # another reader
        rig.mode.set_readers({PodUID("p3"): {CONF}})  # the first goes: one reader left
        assert rig.mode.objects is not None and rig.mode.objects.watched() == {CONF}
        rig.mode.set_readers({})
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: w == [], what="every watch closed")
        assert rig.mode.lookup_object(*CONF) is None  # and its value forgotten
        assert server.count(verb="list", resource="configmaps") == 2  # conf once, other once


async def test_watch_errors_and_410_reestablish_the_watch(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        rig.mode.set_readers({PodUID("p1"): {CONF}})
        await rig.mode.objects_fetched({CONF})
        server.inject(verb="watch", path="/configmaps$", status=500, times=2)
        server.drop_watches("configmaps")
        server.create("configmaps", configmap())
        await eventually(lambda: rig.mode.lookup_object(*CONF), within=5,
                         what="created while the watch was failing")
        server.compact()
        server.inject(verb="watch", path="/configmaps$", status=410, times=1)
        server.drop_watches("configmaps")
        server.update("configmaps", {**configmap(), "data": {"a": "3"}})
        await eventually(lambda: rig.mode.lookup_object(*CONF), within=5,
                         until=lambda found: dict(found.data) == {"a": "3"},
                         what="changed while the watch was gone (410: relisted)")
        assert server.count(verb="list", resource="configmaps") == 2
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: w == [CM_WATCH], what="watching again")


async def test_immutable_object_is_not_watched_once_seen(
        server: KubeApiServer, tmp_path: Path) -> None:
    server.create("configmaps", configmap(immutable=True))
    absent = ("ConfigMap", "default", "later")
    async with ClusterRig(server, tmp_path) as rig:
        rig.mode.set_readers({PodUID("p1"): {CONF, absent}})
        await rig.mode.objects_fetched({CONF, absent})
        found = rig.mode.lookup_object(*CONF)
        assert found is not None and found.immutable
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: w == [("default", "metadata.name=later")],
                         what="only the absent one still watched")
        assert rig.mode.objects is not None and rig.mode.objects.watched() == {absent}
        assert rig.mode.lookup_object(*CONF) is found  # kept while read
        server.create("configmaps", configmap("later", immutable=True))
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: w == [], what="created immutable: no longer watched")
        assert rig.mode.lookup_object(*absent) is not None


async def test_many_watched_objects_leave_room_for_other_calls(
        server: KubeApiServer, tmp_path: Path) -> None:
    """Each watch holds an HTTP/1.1 connection (no HTTP/2 multiplexing here): 150 of them
    must not use up the client's connection pool and stall status writes and the like."""
    keys = {("ConfigMap", "default", f"cm{n}") for n in range(150)}
    async with ClusterRig(server, tmp_path, qps=0) as rig:
        rig.mode.set_readers({PodUID("p1"): keys})
        await eventually(lambda: server.open_watches("configmaps"), within=20,
                         until=lambda w: len(w) == len(keys), what="150 watches open")
        node = await rig.mode.client.request("GET", "/api/v1/nodes/n1")
        assert node["metadata"]["name"] == "n1"
