"""The pod status PATCH body: minimal, owned conditions only, terminal phases final."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nodelet.model.core import status as st
from nodelet.model.core import statuspatch

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def status(ready: bool, *, phase: st.PodPhase | None = None) -> st.PodStatus:
    value: st.ConditionStatus = "True" if ready else "False"
    reason = "" if ready else st.REASON_CONTAINERS_NOT_READY
    return st.PodStatus(
        phase=phase or ("Running" if ready else "Pending"),
        conditions=(
            st.PodCondition(st.POD_SCHEDULED, "True"),
            st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "True"),
            st.PodCondition(st.INITIALIZED, "True"),
            st.PodCondition(st.CONTAINERS_READY, value, reason),
            st.PodCondition(st.READY, value, reason),
        ),
        host_ip="192.0.2.10", pod_ips=("10.77.0.5",), start_time=T0,
        container_statuses=(st.ContainerStatus(
            "main", "busybox", st.ContainerStateTerminated(exit_code=0, reason="Completed")
            if phase in statuspatch.TERMINAL_PHASES else st.ContainerStateRunning(T0),
            ready=ready),),
    )


def test_status_patch_is_minimal_and_owns_only_its_conditions() -> None:
    desired = st.to_api(status(True))
    api = {"phase": "Running", "conditions": [
        {"type": "PodHasNetwork", "status": "True"},
        {"type": "example.com/gate", "status": "False"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
    ]}
    patch = statuspatch.status_patch(api, desired)
    assert patch is not None
    types = [c["type"] for c in patch["conditions"]]
    assert "example.com/gate" not in types and "PodScheduled" not in types
    assert {"type": "PodHasNetwork", "$patch": "delete"} in patch["conditions"]
    assert "phase" not in patch
    applied = dict(api, **{k: v for k, v in patch.items() if k != "conditions"})
    applied["conditions"] = list(desired["conditions"])
    for cond in applied["conditions"]:
        if cond["type"] == "PodScheduled":
            cond["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    applied["podIPs"] = desired["podIPs"]
    applied["hostIPs"] = desired["hostIPs"]
    assert statuspatch.status_patch(applied, desired) is None


@pytest.mark.parametrize(("api_phase", "desired_phase", "patched"), [
    ("Succeeded", "Running", False),  # a terminal phase is final (the kubelet refuses it)
    ("Failed", "Pending", False),
    ("Succeeded", "Failed", True),  # terminal to terminal is not moving back
    ("Running", "Succeeded", True),
    ("Pending", "Running", True),
])
def test_terminal_api_phase_is_never_reverted(
        api_phase: str, desired_phase: st.PodPhase, patched: bool) -> None:
    desired = st.to_api(status(False, phase=desired_phase))
    patch = statuspatch.status_patch({"phase": api_phase}, desired)
    assert (patch is not None) is patched
    assert patch is None or patch["phase"] == desired_phase


def test_a_reason_that_went_away_is_cleared_in_the_patch() -> None:
    api = {"conditions": [{"type": st.READY, "status": "False", "reason": "ContainersNotReady",
                           "message": "containers with unready status: [main]"}]}
    desired = {"conditions": [{"type": st.READY, "status": "True"}]}
    patch = statuspatch.status_patch(api, desired)
    assert patch is not None
    assert patch["conditions"] == [{"type": st.READY, "status": "True", "reason": None,
                                    "message": None}]


def test_the_stored_qos_class_is_never_changed() -> None:
    """kube-apiserver sets qosClass at creation (counting pod-level resources, which nodelet
    refuses) and answers 422 to a change: found by the [NodeConformance] PLR tests, whose
    refused pods' status PATCHes were all rejected. One not yet set is written."""
    desired = {"phase": "Failed", "qosClass": "BestEffort"}
    patch = statuspatch.status_patch({"phase": "Pending", "qosClass": "Burstable"}, desired)
    assert patch == {"phase": "Failed"}
    assert statuspatch.status_patch({"phase": "Pending"}, desired) == desired


@pytest.mark.parametrize(("api_cond", "expected"), [
    # Same status: the API's transition time stands, so nothing differs.
    ({"status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}, None),
    # Status changed: the new transition time is sent.
    ({"status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
     {"status": "True", "lastTransitionTime": "2026-02-02T00:00:00Z"}),
    # Not in the API yet: sent whole.
    (None, {"status": "True", "lastTransitionTime": "2026-02-02T00:00:00Z"}),
])
def test_transition_time_moves_only_with_the_status(
        api_cond: dict[str, Any] | None, expected: dict[str, Any] | None) -> None:
    desired = {"conditions": [{"type": st.INITIALIZED, "status": "True",
                               "lastTransitionTime": "2026-02-02T00:00:00Z"}]}
    api = {"conditions": [{"type": st.INITIALIZED, **api_cond}] if api_cond else []}
    patch = statuspatch.status_patch(api, desired)
    want = None if expected is None else {"conditions": [{"type": st.INITIALIZED, **expected}]}
    assert patch == want


def test_a_removed_pod_scheduled_is_not_deleted_but_other_owned_ones_are() -> None:
    api = {"conditions": [{"type": st.POD_SCHEDULED, "status": "True"},
                          {"type": st.POD_HAS_NETWORK, "status": "True"}]}
    patch = statuspatch.status_patch(api, {"conditions": []})
    assert patch == {"conditions": [{"type": st.POD_HAS_NETWORK, "$patch": "delete"}]}


def test_ip_lists_are_replaced_whole() -> None:
    patch = statuspatch.status_patch({"podIPs": [{"ip": "10.0.0.1"}]},
                                     {"podIPs": [{"ip": "10.0.0.2"}]})
    assert patch == {"podIPs": [{"$patch": "replace"}, {"ip": "10.0.0.2"}]}


def test_an_eviction_sends_disruption_target_but_never_removes_one() -> None:
    evicted = st.PodStatus(phase="Failed", reason="Evicted", message="low on disk",
                           conditions=(st.PodCondition(
                               st.DISRUPTION_TARGET, "True", "TerminationByKubelet",
                               "low on disk", last_transition_time=T0),))
    patch = statuspatch.status_patch({"phase": "Running"}, st.to_api(evicted))
    assert patch is not None and patch["phase"] == "Failed"
    assert [c["type"] for c in patch["conditions"]] == ["DisruptionTarget"]
    assert patch["conditions"][0]["reason"] == "TerminationByKubelet"
    # One written by someone else (the taint manager) and not in nodelet's status stays.
    api = {"phase": "Running", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}
    kept = statuspatch.status_patch(api, st.to_api(status(True)))
    assert kept is not None
    assert all(c["type"] != "DisruptionTarget" for c in kept.get("conditions", []))


def test_a_terminal_phase_waits_until_no_container_runs() -> None:
    """The kubelet's mergePodStatus: DeadlineExceeded is reported once the container was
    killed, not while it still runs."""
    api = st.to_api(status(True))
    failing = st.to_api(status(True)) | {"phase": "Failed", "reason": "DeadlineExceeded",
                                         "message": "Pod was active too long"}
    patch = statuspatch.status_patch(api, failing)
    assert patch is None or not {"phase", "reason", "message"} & set(patch)
    stopped = failing | {"containerStatuses": [{
        "name": "main", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}
    patch = statuspatch.status_patch(api, stopped)
    assert patch is not None
    assert (patch["phase"], patch["reason"]) == ("Failed", "DeadlineExceeded")
