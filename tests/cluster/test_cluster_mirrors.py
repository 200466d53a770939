"""Mirror pods of static pods, and readiness gates written by others, on the real
kube-apiserver (cluster mode alone, through the fault proxy: `make_rig`): the mirror pod is
created (as NodeRestriction lets a node: owned by its Node) once the static pod's worker
started it (`static_pod_started`, which the agent's pod workers call), recreated, replaced and
deleted as the kubelet does, static pod statuses go to it, a mirror pod the API refuses holds
up no other, and an API pod's conditions of others reach the Pod value (only those)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.model.parsing import manifests
from support.controlplane import AdminClient, pod, pod_path
from support.faultproxy import FaultProxy
from support.polling import eventually

MIRROR = pods.ANNOTATION_CONFIG_MIRROR


def static_pod(name: str, *, node: str, command: str = "sleep 1000000",
               namespace: str = "default") -> pods.Pod:
    obj = pod(name, node=node, command=command)
    obj["spec"].pop("nodeSelector")
    obj["metadata"]["namespace"] = namespace
    return manifests.pod_from_object(obj, node_name=node, source="file")


def running(ready: bool = True) -> st.PodStatus:
    value: st.ConditionStatus = "True" if ready else "False"
    return st.PodStatus(
        phase="Running",
        conditions=tuple(st.PodCondition(t, value if t == st.READY else "True") for t in (
            st.POD_SCHEDULED, st.POD_READY_TO_START_CONTAINERS, st.INITIALIZED,
            st.CONTAINERS_READY, st.READY)),
        host_ip="192.0.2.10", pod_ips=("10.77.0.9",), start_time=datetime.now(UTC),
        qos_class="BestEffort",
        container_statuses=(st.ContainerStatus(
            "main", "busybox", st.ContainerStateRunning(datetime.now(UTC)), ready=True),),
    )


async def mirror_of(admin: AdminClient, static: pods.Pod) -> dict[str, Any] | None:
    found = await admin.get(pod_path(static.namespace, static.name))
    if found is None or found["metadata"].get("annotations", {}).get(MIRROR) != static.uid:
        return None
    return found


async def ready_in(admin: AdminClient, static: pods.Pod, value: str = "True") -> str | None:
    """The UID of `static`'s mirror pod once its API status has Ready=`value`."""
    found = await mirror_of(admin, static)
    conds = {c["type"]: c["status"] for c in (found or {}).get("status", {}).get("conditions", [])}
    return found["metadata"]["uid"] if found and conds.get(st.READY) == value else None


async def test_mirror_pod_is_created_gets_the_status_and_is_never_run(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy) -> None:
    started = make_rig()
    rig = started.rig
    static = static_pod("etcd", node=rig.node)
    # Set before the cluster is joined, as the agent does: static pods start first.
    rig.mode.set_static_pods({static.uid: static})
    rig.statuses.set_status(static, running())
    async with started:
        rig.mode.static_pod_started(static)  # as the agent says it after start()
        uid = await eventually(lambda: ready_in(admin, static), within=10,
                               what="mirror pod with the status")
        mirror = await admin.get(pod_path("default", f"etcd-{rig.node}"))
        assert mirror is not None
        meta = mirror["metadata"]
        assert meta["annotations"][pods.ANNOTATION_CONFIG_HASH] == static.uid
        assert meta["annotations"][pods.ANNOTATION_CONFIG_SOURCE] == "file"
        assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node",
                                            "name": rig.node, "uid": rig.mode.node.uid,
                                            "controller": True}]
        assert mirror["spec"]["nodeName"] == rig.node and meta["labels"] == {"test": "nodelet"}
        assert mirror["status"]["podIP"] == "10.77.0.9"
        # A mirror pod is never run, and the status went to it, not to a pod of its own UID.
        await eventually(lambda: rig.mode.source.reflector.store.get(uid), within=10,
                         what="mirror watched")
        assert uid not in rig.desired and static.uid not in rig.desired
        assert proxied.count(method="POST", path="/namespaces/default/pods$") == 1
        assert rig.mode.status_sync.in_sync(static.uid)


async def test_mirror_pod_deleted_by_someone_is_recreated_with_the_status(
        make_rig: Any, admin: AdminClient) -> None:
    async with make_rig() as rig:
        static = static_pod("proxy", node=rig.node)
        rig.mode.set_static_pods({static.uid: static})
        rig.mode.static_pod_started(static)
        rig.statuses.set_status(static, running())
        first = await eventually(lambda: ready_in(admin, static), within=10,
                                 what="first mirror pod")
        path = pod_path("default", f"proxy-{rig.node}")
        await admin.delete(path, gracePeriodSeconds=0)

        async def other(*old: str | None) -> str | None:
            uid = await ready_in(admin, static)
            return uid if uid not in old else None

        second = await eventually(lambda: other(None, first), within=10,
                                  what="recreated mirror pod with the status")
        # A graceful delete (deletionTimestamp) replaces it too: a static pod cannot be
        # deleted through the API.
        await admin.delete(path)
        await eventually(lambda: other(None, first, second), within=20,
                         what="mirror pod replaced after a graceful delete")


async def test_changed_manifest_replaces_the_mirror_once_the_old_pod_is_gone(
        make_rig: Any, admin: AdminClient) -> None:
    """The kubelet's order: the new version of an edited manifest waits for the old one to
    terminate (allowStaticPodStart), and its mirror pod is made in its own sync, so the old
    mirror pod, with the old pod's status, stays through the old pod's grace period."""
    async with make_rig() as rig:
        old = static_pod("api", node=rig.node)
        rig.mode.set_static_pods({old.uid: old})
        rig.mode.static_pod_started(old)
        rig.statuses.set_status(old, running())
        first = await eventually(lambda: ready_in(admin, old), within=10,
                                 what="mirror of the first version")
        new = static_pod("api", node=rig.node, command="sleep 2000000")
        assert new.uid != old.uid and new.full_name == old.full_name
        rig.mode.set_static_pods({new.uid: new})  # the old one terminates, the new one waits
        rig.statuses.set_status(old, running(ready=False))
        assert await eventually(lambda: ready_in(admin, old, "False"), within=10,
                                what="the terminating pod's status on its mirror") == first
        assert rig.mode.mirrors is not None and rig.mode.mirrors.pending() == []
        rig.mode.pod_gone(old.uid)  # the old version finished terminating ...
        assert rig.mode.mirrors.pending() == []  # ... and the new one has not started yet
        assert await mirror_of(admin, old) is not None
        rig.mode.static_pod_started(new)
        rig.statuses.set_status(new, running(ready=False))
        second = await eventually(lambda: ready_in(admin, new, "False"), within=10,
                                  what="mirror of the new version")
        assert second != first
        # The manifest is removed: the mirror pod stays while the pod terminates ...
        rig.mode.set_static_pods({})
        assert rig.mode.mirrors.pending() == []
        assert await mirror_of(admin, new) is not None
        rig.mode.pod_gone(new.uid)
        # ... and goes once it is gone (grace 0, UID precondition).
        await eventually(lambda: admin.get(pod_path("default", f"api-{rig.node}")),
                         until=lambda p: p is None, within=10, what="mirror pod deleted")
        assert not rig.mode.status_sync.pending()


async def test_a_refused_mirror_pod_holds_up_no_other(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    """The API refuses one static pod's mirror pod (as it refuses any pod in a namespace
    being deleted: 403): it is tried again with a back-off of its own, while the mirror pods
    of the others are made (the kubelet makes each in that pod's own sync)."""
    async with make_rig() as rig:
        refused = static_pod("doomed", node=rig.node, namespace=namespace)
        fault = proxied.inject(method="POST", path=f"/namespaces/{namespace}/pods$",
                               status=403, times=1000)
        rig.mode.set_static_pods({refused.uid: refused})
        rig.mode.static_pod_started(refused)
        await eventually(lambda: fault.hits >= 2, within=10, what="the refusal tried again")
        later = [static_pod(name, node=rig.node) for name in ("one", "two")]
        rig.mode.set_static_pods({p.uid: p for p in [refused, *later]})
        for static in later:
            rig.mode.static_pod_started(static)
            rig.statuses.set_status(static, running())
        for static in later:
            await eventually(functools.partial(ready_in, admin, static), within=10,
                             what=f"mirror of {static.name} despite the refused one")
        assert await mirror_of(admin, refused) is None
        fault.times = 0  # the namespace is usable again: the back-off ends in a create
        await eventually(lambda: mirror_of(admin, refused), within=10,
                         what="the refused mirror pod made at last")


async def test_a_pod_of_someone_else_with_the_static_pods_name_is_left_alone(
        make_rig: Any, admin: AdminClient) -> None:
    started = make_rig()
    rig = started.rig
    taken = pod(f"dns-{rig.node}", node="another-node", scheduler=False)
    await admin.create(pod_path("default"), taken)
    try:
        async with started:
            static = static_pod("dns", node=rig.node)
            rig.mode.set_static_pods({static.uid: static})
            rig.mode.static_pod_started(static)
            assert rig.mode.mirrors is not None
            await eventually(lambda: f"default/dns-{rig.node}" in rig.mode.mirrors._blocked,
                             within=10, what="blocked")
            found = await admin.get(pod_path("default", f"dns-{rig.node}"))
            assert found is not None and MIRROR not in found["metadata"].get("annotations", {})
    finally:
        await admin.delete(pod_path("default", f"dns-{rig.node}"), gracePeriodSeconds=0)


async def test_own_status_patches_leave_the_pod_equal_and_gates_reach_it(
        make_rig: Any, admin: AdminClient, namespace: str) -> None:
    async with make_rig() as rig:
        created = await admin.create(pod_path(namespace), pod(
            "gated", node=rig.node, scheduler=False,
            readinessGates=[{"conditionType": "example.com/lb"}]))
        uid = pods.PodUID(created["metadata"]["uid"])
        found = await eventually(lambda: rig.desired.get(uid), within=10, what="pod announced")
        assert found.api_conditions == () and "status" not in found.raw
        rig.statuses.set_status(found, running(ready=False))
        await eventually(lambda: rig.mode.status_sync.in_sync(uid), within=10, what="status sent")
        current = await admin.get(pod_path(namespace, "gated")) or {}
        rv = int(current["metadata"]["resourceVersion"])
        await eventually(lambda: int(rig.mode.source.reflector.resource_version) >= rv,
                         within=10, what="our PATCH watched")
        assert rig.desired[uid] == found  # our own PATCH: no new Pod value, no wake-up
        await admin.patch(pod_path(namespace, "gated", "status"), {"status": {"conditions": [
            {"type": "example.com/lb", "status": "True"}]}},
            content_type="application/strategic-merge-patch+json")
        changed = await eventually(lambda: rig.desired[uid] != found and rig.desired[uid],
                                   within=10, what="the gate in the Pod value")
        assert [c["type"] for c in changed.api_conditions] == ["example.com/lb"]
