"""The API pod source, pod deletion, events and volume objects against the test API server."""

from __future__ import annotations

from pathlib import Path

from kubeapi import ClusterRig, KubeApiServer, pod_object
from nodelet.model.core import events as ev
from nodelet.model.core import status as st
from polling import eventually

# What a pod's worker leaves when it terminated a pod deleted in the API (TerminatePod).
FAILED = st.PodStatus(phase="Failed", conditions=(
    st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "False"),
    st.PodCondition(st.READY, "False", "PodFailed")))


def names(desired: dict) -> set[str]:
    return {p.name for p in desired.values()}


async def test_the_pods_bound_here_are_desired(
        server: KubeApiServer, tmp_path: Path) -> None:
    server.create("pods", pod_object("before", node="n1"))
    async with ClusterRig(server, tmp_path) as rig:
        assert names(rig.desired) == {"before"}  # the first list is in before start() returns
        server.create("pods", pod_object("elsewhere", node="n2"))
        server.create("pods", pod_object("later", node="n1"))
        done = pod_object("done", node="n1")
        done["status"]["phase"] = "Succeeded"
        server.create("pods", done)
        broken = pod_object("broken", node="n1")
        broken["spec"]["containers"] = []
        server.create("pods", broken)
        await eventually(lambda: "later" in names(rig.desired), within=10, what="later announced")
        # A finished pod stays known (never run again): its containers and logs are kept
        # until it is deleted, as the kubelet keeps them.
        assert names(rig.desired) == {"before", "later", "done"}
        terminal = {p.name: p.terminal_in_api for p in rig.desired.values()}
        assert terminal == {"before": False, "later": False, "done": True}
        pod = next(p for p in rig.desired.values() if p.name == "later")
        assert pod.source == "api" and pod.spec.node_name == "n1" and pod.name == "later"


async def test_watch_disconnects_and_410_relist_keep_one_pod_per_uid(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        server.create("pods", pod_object("a", node="n1"))
        await eventually(lambda: names(rig.desired) == {"a"}, within=10, what="a")
        server.drop_watches()
        server.create("pods", pod_object("b", node="n1"))
        await eventually(lambda: names(rig.desired) == {"a", "b"}, within=10,
                         what="b after a reconnect")
        server.compact()
        server.inject(verb="watch", path="/pods$", status=410, times=1)  # not the Services
        server.drop_watches()
        server.create("pods", pod_object("c", node="n1"))
        await eventually(lambda: names(rig.desired) == {"a", "b", "c"}, within=10,
                         what="c after relist")
        assert rig.mode.source.reflector.lists == 2
        server.inject(verb="watch", path="/pods$", status=500, times=2)
        server.drop_watches()
        server.delete("pods", "default", "a", grace=0)
        await eventually(lambda: names(rig.desired) == {"b", "c"}, within=10,
                         what="a deleted after errors")
        for desired in rig.announced:
            assert len(names(desired)) == len(desired)  # never two pods of one name


async def test_deleted_pod_is_terminated_with_its_grace_then_removed(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        uid = server.create("pods", pod_object("victim", node="n1", grace=20))["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="announced")
        seen = len(rig.announced)
        server.delete("pods", "default", "victim", grace=7)
        await eventually(lambda: uid not in rig.desired, within=10, what="left the desired set")
        # Passed once with its deletion grace period, then left out: workers terminate it.
        handed = [d[uid] for d in rig.announced[seen:] if uid in d]
        assert len(handed) == 1 and handed[0].deletion_grace_period_seconds == 7
        assert server.get("pods", "default", "victim") is not None  # waits for the worker
        rig.statuses.set_status(handed[0], FAILED)
        rig.mode.pod_gone(uid)
        await eventually(lambda: server.get("pods", "default", "victim") is None, within=10,
                         what="deleted")
        delete = [r for r in server.requests if r.verb == "delete"][-1]
        assert delete.path.endswith("/pods/victim") and delete.status == 200


async def test_a_pod_is_not_deleted_before_the_api_has_its_terminal_phase(
        server: KubeApiServer, tmp_path: Path) -> None:
    """The kubelet's canBeDeleted: while the terminal status PATCH keeps failing, nodelet
    waits (and the status sync retries) past `delete_status_wait` instead of deleting a pod
    whose API phase is still Pending."""
    async with ClusterRig(server, tmp_path, delete_status_wait=0.2) as rig:
        uid = server.create("pods", pod_object("slow", node="n1", grace=20))["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="announced")
        pod = rig.desired[uid]
        server.delete("pods", "default", "slow", grace=7)
        await eventually(lambda: uid not in rig.desired, within=10, what="left the desired set")
        refused = server.inject(method="PATCH", path="/pods/slow/status$", status=500, times=8)
        rig.statuses.set_status(pod, FAILED)
        rig.mode.pod_gone(uid)
        await eventually(lambda: server.get("pods", "default", "slow") is None, within=20,
                         what="deleted once the API had the terminal phase")
        assert refused.hits == 8  # every refusal was met before the delete
        deleted = [c for c in server.history if c.type == "DELETED"
                   and c.new["metadata"]["uid"] == uid]
        assert len(deleted) == 1 and deleted[0].new["status"]["phase"] == "Failed", deleted


async def test_events_are_created_then_counted(server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        pod = rig.desired.get("x")  # no pod needed: events name their object
        assert pod is None
        obj = server.create("pods", pod_object("ev", node="n1"))
        uid = obj["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="announced")
        target = rig.desired[uid]
        server.inject(method="POST", path="/events$", status=500, times=1)
        event = rig.recorder.record(target, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                                    "Failed to create pod sandbox: boom")

        def stored() -> dict | None:
            return server.get("events", "default", event.name)

        created = await eventually(stored, within=5, what="event created")
        assert created["involvedObject"]["uid"] == uid and created["count"] == 1
        rig.recorder.record(target, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                            "Failed to create pod sandbox: boom")
        rig.recorder.record(target, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                            "Failed to create pod sandbox: boom")
        await eventually(lambda: (stored() or {}).get("count") == 3, within=5, what="count 3")
        assert server.count(verb="create", resource="events") == 2  # one failed, one created

