"""Mirror pods of static pods, and readiness gates written by others, against the test API
server: the mirror pod is created, recreated, replaced and deleted as the kubelet does, static
pod statuses go to it, and an API pod's conditions of others reach the Pod value (only those)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubeapi import ClusterRig, KubeApiServer, pod_object
from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.model.parsing import manifests
from polling import eventually

MIRROR = pods.ANNOTATION_CONFIG_MIRROR


def static_pod(name: str, *, command: str = "sleep 1000000", node: str = "n1") -> pods.Pod:
    obj = pod_object(name, node="", command=command, scheduled=False)
    obj["spec"].pop("nodeName")
    return manifests.pod_from_object(obj, node_name=node, source="file")


def running(ready: bool = True) -> st.PodStatus:
    value: st.ConditionStatus = "True" if ready else "False"
    return st.PodStatus(
        phase="Running",
        conditions=tuple(st.PodCondition(t, value if t == st.READY else "True") for t in (
            st.POD_SCHEDULED, st.POD_READY_TO_START_CONTAINERS, st.INITIALIZED,
            st.CONTAINERS_READY, st.READY)),
        host_ip="192.0.2.10", pod_ips=("10.77.0.9",), start_time=datetime.now(UTC),
        container_statuses=(st.ContainerStatus(
            "main", "busybox", st.ContainerStateRunning(datetime.now(UTC)), ready=True),),
    )


def mirror_of(server: KubeApiServer, pod: pods.Pod) -> dict[str, Any] | None:
    found = server.get("pods", pod.namespace, pod.name)
    if found is None or found["metadata"].get("annotations", {}).get(MIRROR) != pod.uid:
        return None
    return found


def ready_in(server: KubeApiServer, pod: pods.Pod, value: str = "True") -> str | None:
    """The UID of `pod`'s mirror pod once its API status has Ready=`value`."""
    found = mirror_of(server, pod)
    conds = {c["type"]: c["status"] for c in (found or {}).get("status", {}).get("conditions", [])}
    return found["metadata"]["uid"] if found and conds.get(st.READY) == value else None


async def test_mirror_pod_is_created_gets_the_status_and_is_never_run(
        server: KubeApiServer, tmp_path: Path) -> None:
    rig = ClusterRig(server, tmp_path)
    pod = static_pod("etcd")
    # Set before the cluster is joined, as the agent does: static pods start first.
    rig.mode.set_static_pods({pod.uid: pod})
    rig.statuses.set_status(pod, running())
    async with rig:
        uid = await eventually(lambda: ready_in(server, pod), within=10,
                               what="mirror pod with the status")
        mirror = server.get("pods", "default", "etcd-n1")
        assert mirror is not None
        meta = mirror["metadata"]
        assert meta["annotations"][pods.ANNOTATION_CONFIG_HASH] == pod.uid
        assert meta["annotations"][pods.ANNOTATION_CONFIG_SOURCE] == "file"
        assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                                            "uid": rig.mode.node.uid, "controller": True}]
        assert mirror["spec"]["nodeName"] == "n1" and meta["labels"] == {"test": "nodelet"}
        assert mirror["status"]["podIP"] == "10.77.0.9"
        # A mirror pod is never run, and the status went to it, not to a pod of its own UID.
        await eventually(lambda: rig.mode.source.reflector.store.get(uid), within=10,
                         what="mirror watched")
        assert uid not in rig.desired and pod.uid not in rig.desired
        assert server.count(verb="create", resource="pods") == 1
        assert rig.mode.status_sync.in_sync(pod.uid)


async def test_mirror_pod_deleted_by_someone_is_recreated_with_the_status(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        pod = static_pod("proxy")
        rig.mode.set_static_pods({pod.uid: pod})
        rig.statuses.set_status(pod, running())
        first = await eventually(lambda: ready_in(server, pod), within=10, what="first mirror pod")
        server.delete("pods", "default", "proxy-n1", grace=0)
        second = await eventually(lambda: (u := ready_in(server, pod)) != first and u,
                                  within=10, what="recreated mirror pod with the status")
        # A graceful delete (deletionTimestamp) replaces it too: a static pod cannot be
        # deleted through the API.
        server.delete("pods", "default", "proxy-n1")
        await eventually(lambda: (u := ready_in(server, pod)) not in (first, second) and u,
                         within=10, what="mirror pod replaced after a graceful delete")


async def test_changed_manifest_replaces_the_mirror_and_a_removed_one_deletes_it(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        old = static_pod("api")
        rig.mode.set_static_pods({old.uid: old})
        rig.statuses.set_status(old, running())
        await eventually(lambda: ready_in(server, old), within=10,
                         what="mirror of the first version")
        new = static_pod("api", command="sleep 2000000")
        assert new.uid != old.uid and new.full_name == old.full_name
        rig.mode.set_static_pods({new.uid: new})
        rig.statuses.set_status(new, running(ready=False))
        await eventually(lambda: ready_in(server, new, "False"), within=10,
                         what="mirror of the new version")
        rig.mode.pod_gone(old.uid)  # the old version finished terminating
        # The manifest is removed: the mirror pod stays while the pod terminates ...
        rig.mode.set_static_pods({})
        assert rig.mode.mirrors is not None and rig.mode.mirrors.pending() == []
        assert mirror_of(server, new) is not None
        rig.mode.pod_gone(new.uid)
        # ... and goes once it is gone (grace 0, UID precondition).
        await eventually(lambda: server.get("pods", "default", "api-n1") is None,
                         within=10, what="mirror pod deleted")
        assert not rig.mode.status_sync.pending()


async def test_a_pod_of_someone_else_with_the_static_pods_name_is_left_alone(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        server.create("pods", pod_object("dns-n1", node="n2"))
        pod = static_pod("dns")
        rig.mode.set_static_pods({pod.uid: pod})
        assert rig.mode.mirrors is not None
        await eventually(lambda: "default/dns-n1" in rig.mode.mirrors._blocked, within=10,
                         what="blocked")
        found = server.get("pods", "default", "dns-n1")
        assert found is not None and MIRROR not in found["metadata"].get("annotations", {})


async def test_own_status_patches_leave_the_pod_equal_and_gates_reach_it(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        obj = pod_object("gated", node="n1", readinessGates=[{"conditionType": "example.com/lb"}])
        created = server.create("pods", obj)
        uid = pods.PodUID(created["metadata"]["uid"])
        pod = await eventually(lambda: rig.desired.get(uid), within=10, what="pod announced")
        assert pod.api_conditions == () and "status" not in pod.raw
        rig.statuses.set_status(pod, running(ready=False))
        await eventually(lambda: rig.mode.status_sync.in_sync(uid), within=10, what="status sent")
        rv = int(server.get("pods", "default", "gated")["metadata"]["resourceVersion"])
        await eventually(lambda: int(rig.mode.source.reflector.resource_version) >= rv,
                         within=10, what="our PATCH watched")
        assert rig.desired[uid] == pod  # our own PATCH: no new Pod value, no wake-up
        current = server.get("pods", "default", "gated")
        current["status"]["conditions"].append({"type": "example.com/lb", "status": "True"})
        server.update_status("pods", current)
        changed = await eventually(lambda: rig.desired[uid] != pod and rig.desired[uid],
                                   within=10, what="the gate in the Pod value")
        assert [c["type"] for c in changed.api_conditions] == ["example.com/lb"]
