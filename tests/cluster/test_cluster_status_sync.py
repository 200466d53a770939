"""Pod status sync against the real kube-apiserver (through the fault proxy where the API must
fail): nodelet's conditions reach the API while others' are kept, PodScheduled keeps the
scheduler's time, nothing is sent when nothing changed, updates coalesce under a tight QPS
limit, 500/429/409/timeouts lose no status, drift is repaired, a replaced pod never gets the
old pod's status.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodelet.model.core import pods
from nodelet.model.core import status as st
from support.clusterfixtures import Rig
from support.controlplane import AdminClient, pod, pod_path
from support.faultproxy import FaultProxy
from support.polling import eventually

OWN = (st.POD_SCHEDULED, st.POD_READY_TO_START_CONTAINERS, st.INITIALIZED,
       st.CONTAINERS_READY, st.READY)
STRATEGIC = "application/strategic-merge-patch+json"


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
        # As status generation sets it, and as kube-apiserver set it at creation: a status
        # without it would differ from the API's at every resync.
        qos_class="BestEffort",
        container_statuses=(st.ContainerStatus(
            "main", "busybox", st.ContainerStateRunning(datetime.now(UTC)), ready=ready),),
    )


async def admitted(rig: Rig, admin: AdminClient, namespace: str, name: str,
                   **spec: Any) -> pods.Pod:
    created = await admin.create(pod_path(namespace), pod(name, node=rig.node,
                                                         scheduler=False, **spec))
    uid = created["metadata"]["uid"]
    await eventually(lambda: uid in rig.desired, within=10, what=f"pod {name} announced")
    found: pods.Pod = rig.desired[uid]
    return found


async def api_status(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    found = await admin.get(pod_path(namespace, name))
    assert found is not None, f"pod {name} gone"
    return dict(found["status"])


async def conditions(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    have = await api_status(admin, namespace, name)
    return {c["type"]: c for c in have.get("conditions", [])}


async def synced(admin: AdminClient, namespace: str, name: str, want: st.PodStatus) -> bool:
    have = await api_status(admin, namespace, name)
    conds = {c["type"]: c for c in have.get("conditions", [])}
    return all(conds.get(c.type, {}).get("status") == c.status and
               (conds.get(c.type, {}).get("message") or "") == c.message
               for c in want.conditions) and have.get("phase") == want.phase


async def test_status_reaches_the_api_and_others_conditions_are_kept(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    async with make_rig() as rig:
        gate = "example.com/gate"
        found = await admitted(rig, admin, namespace, "web",
                               readinessGates=[{"conditionType": gate}])
        # The scheduler's PodScheduled and a controller's gate, as they would write them.
        await admin.patch(pod_path(namespace, "web", "status"), {"status": {"conditions": [
            {"type": st.POD_SCHEDULED, "status": "True",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": gate, "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}},
            content_type=STRATEGIC)
        await eventually(lambda: gate in rig.mode.source.api_object(found.uid)["status"].get(
            "conditions", [{}])[-1].get("type", ""), within=10, what="the gate watched")
        want = status(True)
        rig.statuses.set_status(found, want)
        await eventually(lambda: synced(admin, namespace, "web", want), within=10,
                         what="status in the API")
        have = await conditions(admin, namespace, "web")
        assert set(have) == {*OWN, gate}
        assert have[gate]["lastTransitionTime"] == "2026-01-01T00:00:01Z"
        # PodScheduled keeps the scheduler's time; nodelet's own times are whole seconds.
        assert have[st.POD_SCHEDULED]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
        assert have[st.READY]["lastTransitionTime"].endswith("Z")
        assert (await api_status(admin, namespace, "web"))["podIPs"] == [{"ip": "10.77.0.5"}]
        # Someone else adds DisruptionTarget; nodelet's next update leaves it alone.
        await admin.patch(pod_path(namespace, "web", "status"), {"status": {"conditions": [
            {"type": "DisruptionTarget", "status": "True"}]}}, content_type=STRATEGIC)
        later = status(False, message="containers with unready status: [main]", ip="10.77.0.6")
        rig.statuses.set_status(found, later)
        await eventually(lambda: synced(admin, namespace, "web", later), within=10,
                         what="second status in the API")
        assert {"DisruptionTarget", gate} <= set(await conditions(admin, namespace, "web"))
        assert (await api_status(admin, namespace, "web"))["podIPs"] == [{"ip": "10.77.0.6"}]
        # Nothing changed: no call at all, not even a GET.
        calls = len(proxied.requests)
        assert rig.mode.status_sync.reconcile() == 0
        assert rig.mode.status_sync.gets == 0
        assert [r for r in proxied.requests[calls:] if "/pods" in r.path and not r.watch] == []


async def test_updates_coalesce_under_a_tight_qps_limit(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    async with make_rig(qps=4.0, burst=1) as rig:
        names = [f"p{i}" for i in range(5)]
        admitted_pods = [await admitted(rig, admin, namespace, n) for n in names]
        before = proxied.count(method="PATCH", path="/pods/[^/]+/status$")
        for round_ in range(10):
            for found in admitted_pods:
                rig.statuses.set_status(found, status(False, message=f"round {round_}"))
        final = status(True)
        for found in admitted_pods:
            rig.statuses.set_status(found, final)
        for name in names:
            await eventually(lambda n=name: synced(admin, namespace, n, final), within=20,
                             what=f"{name} synced")
        patches = proxied.count(method="PATCH", path="/pods/[^/]+/status$") - before
        # 11 statuses per pod: each pod is sent at most twice (one that was already waiting
        # for its token, then the newest).
        assert patches <= 2 * len(names), patches
        assert rig.mode.status_sync.dropped >= 40


async def test_injected_faults_lose_no_status(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy, namespace: str) -> None:
    async with make_rig(request_timeout=0.5) as rig:
        found = await admitted(rig, admin, namespace, "flaky")
        faults = [
            proxied.inject(method="PATCH", path="/pods/flaky/status$", status=500, times=2),
            proxied.inject(method="PATCH", path="/pods/flaky/status$", status=429,
                           retry_after=1, times=1),
            proxied.inject(method="PATCH", path="/pods/flaky/status$", status=409, times=1),
            # Held past the client's request timeout, then passed on.
            proxied.inject(method="PATCH", path="/pods/flaky/status$", delay=1.0, times=1),
        ]
        for n in range(5):
            rig.statuses.set_status(found, status(False, message=f"try {n}"))
        final = status(True)
        rig.statuses.set_status(found, final)
        await eventually(lambda: synced(admin, namespace, "flaky", final), within=20,
                         what="final status")
        assert [f.hits for f in faults] == [f.times for f in faults]
        # The delayed PATCH reaches the API after the client gave up on it, so the API can show
        # the final status while the sync still has it to send again: the queue drains after.
        await eventually(lambda: rig.mode.status_sync.pending() == 0, within=10,
                         what="nothing left to send")


async def test_drifted_api_status_is_repaired(
        make_rig: Any, admin: AdminClient, namespace: str) -> None:
    async with make_rig() as rig:
        found = await admitted(rig, admin, namespace, "drift")
        want = status(True)
        rig.statuses.set_status(found, want)
        await eventually(lambda: synced(admin, namespace, "drift", want), within=10,
                         what="status in the API")
        await admin.patch(pod_path(namespace, "drift", "status"), {"status": {"conditions": [
            {"type": st.READY, "status": "False"}]}}, content_type=STRATEGIC)
        await eventually(lambda: synced(admin, namespace, "drift", want), within=10,
                         what="status repaired")


async def test_a_replaced_pod_never_gets_the_old_pods_status(
        make_rig: Any, admin: AdminClient, namespace: str) -> None:
    async with make_rig(qps=2.0, burst=1, lease_renew_period=5.0,
                        node_status_period=5.0) as rig:
        old = await admitted(rig, admin, namespace, "same")
        await rig.mode.client.reserve()  # the bucket is now empty: the next PATCH waits ~0.5 s
        rig.statuses.set_status(old, status(True))
        await admin.delete(pod_path(namespace, "same"), gracePeriodSeconds=0)
        fresh = await admin.create(pod_path(namespace), pod("same", node=rig.node,
                                                           scheduler=False))
        await eventually(lambda: rig.mode.status_sync.in_sync(old.uid), within=10,
                         what="the old pod's status dropped")
        now = await admin.get(pod_path(namespace, "same"))
        assert now is not None and now["metadata"]["uid"] == fresh["metadata"]["uid"]
        assert st.READY not in await conditions(admin, namespace, "same")
