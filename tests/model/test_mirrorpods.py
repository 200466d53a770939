"""Mirror pods: the object made from a static pod, and the kubelet's create/delete decision."""

from __future__ import annotations

from typing import Any

from nodelet.model.core import mirrorpods, pods
from nodelet.model.parsing import manifests

MIRROR = pods.ANNOTATION_CONFIG_MIRROR


def static_pod(name: str, *, command: str = "sleep 1000000") -> pods.Pod:
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "labels": {"test": "nodelet"}},
           "spec": {"containers": [{"name": "main", "image": "busybox",
                                    "command": ["sh", "-c", command]}]}}
    return manifests.pod_from_object(obj, node_name="n1", source="file")


def test_mirror_object_is_the_static_pod_owned_by_the_node() -> None:
    pod = static_pod("etcd")
    obj = mirrorpods.mirror_object(pod, node_name="n1", node_uid="node-uid")
    meta = obj["metadata"]
    assert (meta["name"], meta["namespace"], meta["labels"]) == (
        "etcd-n1", "default", {"test": "nodelet"})
    assert meta["annotations"][MIRROR] == mirrorpods.pod_hash(pod)
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                                        "uid": "node-uid", "controller": True}]
    assert "uid" not in meta and obj["spec"]["nodeName"] == "n1"
    unowned = mirrorpods.mirror_object(pod, node_name="n1", node_uid=None)
    assert "ownerReferences" not in unowned["metadata"]


def test_a_mirror_is_live_only_with_the_current_hash_and_no_deletion() -> None:
    pod = static_pod("etcd")
    live: dict[str, Any] = mirrorpods.mirror_object(pod, node_name="n1", node_uid=None)
    assert mirrorpods.is_mirror_of(live, pod) and mirrorpods.is_mirror(live)
    assert not mirrorpods.is_mirror_of(live, static_pod("etcd", command="sleep 2"))
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not mirrorpods.is_mirror_of(live, pod) and mirrorpods.is_mirror(live)
    assert not mirrorpods.is_mirror({"metadata": {"name": "someone-elses"}})
    assert mirrorpods.uid_of({"metadata": {"uid": "u"}}) == "u"
    assert mirrorpods.uid_of(None) == mirrorpods.uid_of({}) == ""


def test_plan_is_the_kubelets_decision() -> None:
    a, b = static_pod("a"), static_pod("b")
    live = mirrorpods.mirror_object(a, node_name="n1", node_uid="node-uid")
    live["metadata"]["uid"] = "m-a"
    stale = mirrorpods.mirror_object(b, node_name="n1", node_uid=None)
    stale["metadata"].update(uid="m-b", annotations={MIRROR: "old-hash"})
    orphan = {"metadata": {"namespace": "default", "name": "c-n1", "uid": "m-c",
                           "annotations": {MIRROR: "h"}}}
    actions = mirrorpods.plan({a.full_name: a, b.full_name: b},
                              {a.full_name: live, b.full_name: stale, "default/c-n1": orphan},
                              terminating=set(), started={a.uid, b.uid})
    assert actions == [
        mirrorpods.Delete("default", "b-n1", "m-b", "outdated"), mirrorpods.Create(b),
        mirrorpods.Delete("default", "c-n1", "m-c", "its static pod is gone")]
    assert [a.full_name for a in actions] == ["default/b-n1", "default/b-n1", "default/c-n1"]
    assert mirrorpods.plan({}, {"default/c-n1": orphan}, terminating={"default/c-n1"},
                           started=set()) == []


def test_only_a_started_static_pod_gets_or_replaces_its_mirror() -> None:
    """As the kubelet's tryReconcileMirrorPods runs in the static pod's own sync: the new
    version of an edited manifest, waiting for the old one to terminate, leaves the old mirror
    pod alone (it is no orphan either: a static pod of its name is wanted)."""
    old, new = static_pod("a"), static_pod("a", command="sleep 2")
    mirror = mirrorpods.mirror_object(old, node_name="n1", node_uid=None)
    mirror["metadata"]["uid"] = "m-a"
    assert new.full_name == old.full_name and new.uid != old.uid
    waiting = mirrorpods.plan({new.full_name: new}, {old.full_name: mirror},
                              terminating={old.full_name}, started={old.uid})
    assert waiting == []
    assert mirrorpods.plan({new.full_name: new}, {}, terminating=set(), started=set()) == []
    assert mirrorpods.plan({new.full_name: new}, {old.full_name: mirror}, terminating=set(),
                           started={new.uid}) == [
        mirrorpods.Delete("default", "a-n1", "m-a", "outdated"), mirrorpods.Create(new)]


def test_a_mirror_being_deleted_is_replaced() -> None:
    a = static_pod("a")
    deleted = mirrorpods.mirror_object(a, node_name="n1", node_uid=None)
    deleted["metadata"].update(uid="m-a", deletionTimestamp="2026-01-01T00:00:00Z")
    assert mirrorpods.plan({a.full_name: a}, {a.full_name: deleted}, terminating=set(),
                           started={a.uid}) == [
        mirrorpods.Delete("default", "a-n1", "m-a", "being deleted"), mirrorpods.Create(a)]
