"""Pod status sync against the test API server: ownership, coalescing, faults, drift."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubeapi import ClusterRig, KubeApiServer, pod_object
from nodelet.model.core import pods
from nodelet.model.core import status as st
from polling import eventually

OWN = (st.POD_SCHEDULED, st.POD_READY_TO_START_CONTAINERS, st.INITIALIZED,
       st.CONTAINERS_READY, st.READY)


def status(ready: bool, *, message: str = "", ip: str = "10.77.0.5") -> st.PodStatus:
    value: st.ConditionStatus = "True" if ready else "False"
    reason = "" if ready else st.REASON_CONTAINERS_NOT_READY
    return st.PodStatus(
        phase="Running" if ready else "Pending",
        conditions=(
            st.PodCondition(st.POD_SCHEDULED, "True"),
            st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "True"),
            st.PodCondition(st.INITIALIZED, "True"),
            st.PodCondition(st.CONTAINERS_READY, value, reason, message),
            st.PodCondition(st.READY, value, reason, message),
        ),
        host_ip="192.0.2.10", pod_ips=(ip,), start_time=datetime.now(UTC),
        container_statuses=(st.ContainerStatus(
            "main", "busybox", st.ContainerStateRunning(datetime.now(UTC)), ready=ready),),
    )


async def admitted(rig: ClusterRig, server: KubeApiServer, obj: dict[str, Any]) -> pods.Pod:
    created = server.create("pods", obj)
    uid = created["metadata"]["uid"]
    await eventually(lambda: uid in rig.desired, within=10, what=f"pod {uid} announced")
    pod: pods.Pod = rig.desired[uid]
    return pod


def api_status(server: KubeApiServer, name: str) -> dict[str, Any]:
    found = server.get("pods", "default", name)
    assert found is not None, f"pod {name} gone"
    return found["status"]


def conditions(server: KubeApiServer, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api_status(server, name).get("conditions", [])}


def synced(server: KubeApiServer, name: str, want: st.PodStatus) -> bool:
    have = conditions(server, name)
    return all(have.get(c.type, {}).get("status") == c.status and
               (have.get(c.type, {}).get("message") or "") == c.message
               for c in want.conditions) and api_status(server, name)["phase"] == want.phase


async def test_status_reaches_the_api_and_others_conditions_are_kept(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        obj = pod_object("web", node="n1", readinessGates=[{"conditionType": "example.com/gate"}])
        obj["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:00Z"
        obj["status"]["conditions"].append({"type": "example.com/gate", "status": "True",
                                            "lastTransitionTime": "2026-01-01T00:00:01Z"})
        pod = await admitted(rig, server, obj)
        want = status(True)
        rig.statuses.set_status(pod, want)
        await eventually(lambda: synced(server, "web", want), within=10, what="status in the API")
        have = conditions(server, "web")
        assert set(have) == {*OWN, "example.com/gate"}
        assert have["example.com/gate"]["lastTransitionTime"] == "2026-01-01T00:00:01Z"
        # PodScheduled keeps the scheduler's time; nodelet's own times are whole seconds.
        assert have[st.POD_SCHEDULED]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
        assert have[st.READY]["lastTransitionTime"].endswith("Z")
        assert api_status(server, "web")["podIPs"] == [{"ip": "10.77.0.5"}]
        # Someone else adds DisruptionTarget; nodelet's next update leaves it alone.
        current = server.get("pods", "default", "web")
        current["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True"})
        server.update_status("pods", current)
        later = status(False, message="containers with unready status: [main]", ip="10.77.0.6")
        rig.statuses.set_status(pod, later)
        await eventually(lambda: synced(server, "web", later), within=10,
                         what="second status in the API")
        assert {"DisruptionTarget", "example.com/gate"} <= set(conditions(server, "web"))
        assert api_status(server, "web")["podIPs"] == [{"ip": "10.77.0.6"}]
        # Nothing changed: no call at all, not even a GET.
        calls = len(server.requests)
        assert rig.mode.status_sync.reconcile() == 0
        assert rig.mode.status_sync.gets == 0
        assert len([r for r in server.requests[calls:] if r.resource == "pods"
                    and r.verb != "watch"]) == 0


async def test_updates_coalesce_under_a_tight_qps_limit(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path, qps=4.0, burst=1) as rig:
        names = [f"p{i}" for i in range(5)]
        admitted_pods = [await admitted(rig, server, pod_object(n, node="n1")) for n in names]
        before = server.count(verb="patch", resource="pods")
        for round_ in range(10):
            for pod in admitted_pods:
                rig.statuses.set_status(pod, status(False, message=f"round {round_}"))
        final = status(True)
        for pod in admitted_pods:
            rig.statuses.set_status(pod, final)
        for name in names:
            await eventually(lambda n=name: synced(server, n, final), within=15,
                             what=f"{name} synced")
        patches = server.count(verb="patch", resource="pods") - before
        # 55 statuses per... 11 per pod: each pod is sent at most twice (one that was already
        # waiting for its token, then the newest).
        assert patches <= 2 * len(names), patches
        assert rig.mode.status_sync.dropped >= 40


async def test_injected_faults_lose_no_status(server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path, request_timeout=0.5) as rig:
        pod = await admitted(rig, server, pod_object("flaky", node="n1"))
        server.inject(method="PATCH", path="/status$", status=500, times=2)
        server.inject(method="PATCH", path="/status$", status=429, retry_after=1, times=1)
        server.inject(method="PATCH", path="/status$", status=409, times=1)
        server.inject(method="PATCH", path="/status$", delay=1.0, fail=False, times=1)
        for n in range(5):
            rig.statuses.set_status(pod, status(False, message=f"try {n}"))
        final = status(True)
        rig.statuses.set_status(pod, final)
        await eventually(lambda: synced(server, "flaky", final), within=15, what="final status")
        assert all(f.hits == f.times for f in server.faults)
        assert rig.mode.status_sync.pending() == 0


async def test_drifted_api_status_is_repaired(server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        pod = await admitted(rig, server, pod_object("drift", node="n1"))
        want = status(True)
        rig.statuses.set_status(pod, want)
        await eventually(lambda: synced(server, "drift", want), within=10, what="status in the API")
        current = server.get("pods", "default", "drift")
        for cond in current["status"]["conditions"]:
            if cond["type"] == st.READY:
                cond["status"] = "False"
        server.update_status("pods", current)
        await eventually(lambda: synced(server, "drift", want), within=5, what="status repaired")


async def test_a_replaced_pod_never_gets_the_old_pods_status(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path, qps=2.0, burst=1, lease_renew_period=5.0,
                          node_status_period=5.0) as rig:
        pod = await admitted(rig, server, pod_object("same", node="n1"))
        await rig.mode.client.reserve()  # the bucket is now empty: the next PATCH waits ~0.5 s
        rig.statuses.set_status(pod, status(True))
        server.delete("pods", "default", "same", grace=0)
        fresh = server.create("pods", pod_object("same", node="n1"))
        await eventually(lambda: rig.mode.status_sync.in_sync(pod.uid), within=5,
                         what="old dropped")
        assert server.get("pods", "default", "same")["metadata"]["uid"] == \
            fresh["metadata"]["uid"]
        assert st.READY not in conditions(server, "same")
