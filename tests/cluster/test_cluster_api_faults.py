"""Cluster mode alone (no containers) against the real kube-apiserver, through the fault proxy
(tests/support/faultproxy.py) where a test needs the API to fail: the pod source keeps one pod
per UID across dropped watches, an in-stream 410 Gone and 500s on the watch; a pod deleted in
the API is handed to its worker once with its grace period and deleted for good only once the
API has its terminal phase, even while the status PATCH fails; events are created (after a 429)
and then counted; a claim refused while the Node authorizer's graph lags is asked again. The
node joins by TLS bootstrap through the proxy, so every request is the node's own, judged by
the Node authorizer and NodeRestriction.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.helpers import errors
from nodelet.model.core import events as ev
from nodelet.model.core import status as st
from support.controlplane import AdminClient, pod, pod_path
from support.faultproxy import FaultProxy
from support.polling import eventually

# What a pod's worker leaves when it terminated a pod deleted in the API (TerminatePod).
FAILED = st.PodStatus(phase="Failed", conditions=(
    st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "False"),
    st.PodCondition(st.READY, "False", "PodFailed")))


def bound(name: str, node: str, **spec: Any) -> dict[str, Any]:
    return pod(name, node=node, scheduler=False, **spec)


async def test_only_pods_bound_here_are_desired_finished_ones_marked(
        make_rig: Any, admin: AdminClient, namespace: str) -> None:
    rig_ = make_rig()
    node = rig_.rig.node
    await admin.create(pod_path(namespace), bound("before", node))
    async with rig_ as rig:
        assert rig.names() == {"before"}  # the first list is in before start() returns
        await admin.create(pod_path(namespace), bound("elsewhere", "another-node"))
        await admin.create(pod_path(namespace), bound("later", node))
        await admin.create(pod_path(namespace), bound("done", node))
        await admin.patch(pod_path(namespace, "done", "status"),
                          {"status": {"phase": "Succeeded"}})
        await eventually(lambda: "later" in rig.names(), within=10, what="later announced")

        def finished() -> bool:
            return any(p.name == "done" and p.terminal_in_api for p in rig.desired.values())

        # A finished pod stays, marked: never run again, its containers kept until deleted.
        await eventually(finished, within=10, what="done marked terminal once Succeeded",
                         seen=lambda _: repr(rig.names()))
        assert rig.names() == {"before", "later", "done"}  # not the other node's
        found = next(p for p in rig.desired.values() if p.name == "later")
        assert found.source == "api" and found.spec.node_name == node


async def test_watch_drops_410_and_500s_keep_one_pod_per_uid(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    async with make_rig() as rig:
        await admin.create(pod_path(namespace), bound("a", rig.node))
        await eventually(lambda: rig.names() == {"a"}, within=10, what="a")
        proxied.drop_watches()
        await admin.create(pod_path(namespace), bound("b", rig.node))
        await eventually(lambda: rig.names() == {"a", "b"}, within=10,
                         what="b after a reconnect")
        lists = rig.mode.source.reflector.lists
        gone = proxied.inject(verb="watch", path="^/api/v1/pods$", gone=True, times=1)
        proxied.drop_watches()
        await admin.create(pod_path(namespace), bound("c", rig.node))
        await eventually(lambda: rig.names() == {"a", "b", "c"}, within=10,
                         what="c after the relist")
        assert gone.hits == 1 and rig.mode.source.reflector.lists == lists + 1
        failing = proxied.inject(verb="watch", path="^/api/v1/pods$", status=500, times=2)
        proxied.drop_watches()
        await admin.delete(pod_path(namespace, "a"), gracePeriodSeconds=0)
        await eventually(lambda: rig.names() == {"b", "c"}, within=10,
                         what="a deleted after the errors")
        assert failing.hits == 2
        for desired in rig.announced:
            assert len({p.name for p in desired.values()}) == len(desired)  # never two of one


async def test_deleted_pod_is_handed_off_with_its_grace_then_deleted(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    async with make_rig() as rig:
        created = await admin.create(pod_path(namespace), bound("victim", rig.node, grace=20))
        uid = created["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="announced")
        seen = len(rig.announced)
        await admin.delete(pod_path(namespace, "victim"), gracePeriodSeconds=7)
        await eventually(lambda: uid not in rig.desired, within=10, what="left the desired set")
        # Passed once with its deletion grace period, then left out: workers terminate it.
        handed = [d[uid] for d in rig.announced[seen:] if uid in d]
        assert len(handed) == 1 and handed[0].deletion_grace_period_seconds == 7
        assert await admin.get(pod_path(namespace, "victim")) is not None  # waits for it
        rig.statuses.set_status(handed[0], FAILED)
        rig.mode.pod_gone(uid)
        await eventually(lambda: admin.get(pod_path(namespace, "victim")), within=10,
                         until=lambda p: p is None, what="deleted")
        assert proxied.count(method="DELETE", path="/pods/victim$", status=200) == 1


async def test_a_pod_is_not_deleted_before_the_api_has_its_terminal_phase(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    """The kubelet's canBeDeleted: while the terminal status PATCH keeps failing, nodelet
    waits (and the status sync retries) past `delete_status_wait` instead of deleting a pod
    whose API phase is still Pending."""
    async with make_rig(delete_status_wait=0.2) as rig:
        created = await admin.create(pod_path(namespace), bound("slow", rig.node, grace=20))
        uid = created["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="announced")
        handed = rig.desired[uid]
        await admin.delete(pod_path(namespace, "slow"), gracePeriodSeconds=7)
        await eventually(lambda: uid not in rig.desired, within=10, what="left the desired set")
        refused = proxied.inject(method="PATCH", path="/pods/slow/status$", status=500, times=8)
        rig.statuses.set_status(handed, FAILED)
        rig.mode.pod_gone(uid)
        await eventually(lambda: admin.get(pod_path(namespace, "slow")), within=20,
                         until=lambda p: p is None,
                         what="deleted once the API had the terminal phase")
        assert refused.hits == 8  # every refusal was met before the delete
        order = [(r.method, r.status) for r in proxied.requests
                 if r.path.endswith("/pods/slow/status") or r.path.endswith("/pods/slow")]
        first_delete = order.index(("DELETE", 200))
        assert ("PATCH", 200) in order[:first_delete], order  # the phase went first


async def test_events_are_created_then_counted(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    async with make_rig() as rig:
        created = await admin.create(pod_path(namespace), bound("ev", rig.node))
        uid = created["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="announced")
        target = rig.desired[uid]
        # A 429 is retried (client-go's recordToSink; other refusals drop the event).
        proxied.inject(method="POST", path="/events$", status=429, times=1)
        event = rig.recorder.record(target, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                                    "Failed to create pod sandbox: boom")
        path = f"/api/v1/namespaces/{namespace}/events/{event.name}"
        stored = await eventually(lambda: admin.get(path), within=30, what="event created")
        assert stored is not None
        assert stored["involvedObject"]["uid"] == uid and stored["count"] == 1
        for _ in range(2):
            rig.recorder.record(target, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                                "Failed to create pod sandbox: boom")
        await eventually(lambda: admin.get(path), within=10,
                         until=lambda e: (e or {}).get("count") == 3, what="count 3")
        assert proxied.count(method="POST", path="/events$") == 2  # one refused, one created


async def test_a_claim_refused_while_the_node_graph_lags_is_asked_again(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    """The Node authorizer lets a node GET a claim only once its graph has a pod of the node
    using it; the graph, fed by an informer, can lag a pod just bound. Its refusal is asked
    again (ClusterSettings.lag_retry); any other refusal fails at once, in the API's words."""
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    await admin.create(claims, {"metadata": {"name": "held"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "none",
        "resources": {"requests": {"storage": "1Gi"}}}})
    async with make_rig() as rig:
        await admin.create(pod_path(namespace), bound("user", rig.node, volumes=[
            {"name": "store", "persistentVolumeClaim": {"claimName": "held"}}]))
        await eventually(lambda: "user" in rig.names(), within=10, what="user announced")
        await rig.mode.claim(namespace, "held")  # the graph has the pod now
        before = proxied.count(method="GET", path="/persistentvolumeclaims/held$")
        lag = (f'persistentvolumeclaims "held" is forbidden: User "system:node:{rig.node}" '
               f"cannot get resource \"persistentvolumeclaims\" in API group \"\" in the "
               f"namespace \"{namespace}\": node: no relationship found between node "
               f"'{rig.node}' and this object")
        lagging = proxied.inject(method="GET", path="/persistentvolumeclaims/held$",
                                 status=403, message=lag, times=2)
        claim = await rig.mode.claim(namespace, "held")
        assert claim["metadata"]["name"] == "held" and lagging.hits == 2
        assert proxied.count(method="GET", path="/persistentvolumeclaims/held$") == before + 3
        proxied.inject(method="GET", path="/persistentvolumeclaims/held$", status=403,
                       message="forbidden for another reason", times=1)
        with pytest.raises(errors.MessageError, match="forbidden for another reason"):
            await rig.mode.claim(namespace, "held")
        assert proxied.count(method="GET", path="/persistentvolumeclaims/held$") == before + 4
