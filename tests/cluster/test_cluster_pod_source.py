"""The API pod source against the real kube-apiserver: a write to the pod's status alone (what
nodelet's own status PATCHes are) hands on the very same Pod, not parsed again; a condition of
someone else's gives a new Pod that carries it, and a change to what nodelet runs from (a
label) is parsed again."""

from __future__ import annotations

from typing import Any

from nodelet.model.core import pods
from nodelet.model.core import status as st
from support.clusterfixtures import Rig
from support.controlplane import AdminClient, pod, pod_path
from support.polling import eventually

STRATEGIC = "application/strategic-merge-patch+json"


async def announced_after(rig: Rig, uid: str, answer: dict[str, Any]) -> pods.Pod:
    """The Pod announced once the pod watch has shown the write that answered `answer`."""
    rv = answer["metadata"]["resourceVersion"]

    def seen() -> str:
        found = rig.mode.source.api_object(pods.PodUID(uid)) or {}
        return str(found.get("metadata", {}).get("resourceVersion", ""))

    await eventually(seen, until=lambda have: have == rv, within=10,
                     what=f"resourceVersion {rv} watched")
    found: pods.Pod = rig.desired[uid]
    return found


async def test_a_status_write_hands_on_the_same_pod(
        make_rig: Any, admin: AdminClient, namespace: str) -> None:
    async with make_rig() as rig:
        created = await admin.create(pod_path(namespace),
                                     pod("web", node=rig.node, scheduler=False))
        uid = created["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="pod announced")
        first = rig.desired[uid]
        # Conditions nodelet writes itself, as its status PATCH sends them.
        own = await admin.patch(pod_path(namespace, "web", "status"), {"status": {
            "phase": "Pending", "conditions": [
                {"type": st.POD_READY_TO_START_CONTAINERS, "status": "True"},
                {"type": st.READY, "status": "False", "reason": "ContainersNotReady"}]}},
            content_type=STRATEGIC)
        assert await announced_after(rig, uid, own) is first
        # Someone else's condition: kept with the pod, the rest of it untouched.
        others = await admin.patch(pod_path(namespace, "web", "status"), {"status": {
            "conditions": [{"type": "DisruptionTarget", "status": "True"}]}},
            content_type=STRATEGIC)
        second = await announced_after(rig, uid, others)
        assert second != first
        assert [c["type"] for c in second.api_conditions] == ["DisruptionTarget"]
        assert second.spec is first.spec
        # A label: what the pod is run from changed, so it is read again.
        labelled = await admin.patch(pod_path(namespace, "web"),
                                     {"metadata": {"labels": {"tier": "front"}}})
        third = await announced_after(rig, uid, labelled)
        assert third.labels.get("tier") == "front"
        assert third.raw["metadata"]["labels"]["tier"] == "front"
        assert [c["type"] for c in third.api_conditions] == ["DisruptionTarget"]
