"""KEP-3085's termination SLI: deletion request → the sandbox condition False, as the pure
helpers, the timeline (text and web) and the metric measure it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nodelet.adapters.web import svg
from nodelet.model.core import pods, terminations
from nodelet.model.core import status as st
from nodelet.model.reports import analysis, analysis_report
from nodelet.model.reports import timeline as tl
from nodelet.services.serving import metrics

T0 = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
NOW = T0 + timedelta(seconds=60)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def condition(status_: st.ConditionStatus, when: datetime,
              type_: str = st.POD_READY_TO_START_CONTAINERS) -> st.PodCondition:
    return st.PodCondition(type=type_, status=status_, last_transition_time=when)


@pytest.mark.parametrize(("deletion", "grace", "expected"), [
    (None, None, None),
    (at(30), 30, at(0)),
    (at(0), None, at(0)),
    (at(5), 0, at(5)),
])
def test_requested_at(deletion: datetime | None, grace: int | None,
                      expected: datetime | None) -> None:
    assert terminations.requested_at(deletion, grace) == expected


@pytest.mark.parametrize(("requested", "cond", "expected"), [
    (at(0), condition("False", at(1.5)), at(1.5)),
    (None, condition("False", at(1.5)), None),
    (at(0), condition("True", at(1.5)), None),
    (at(0), None, None),
    # False since before the deletion (stuck on a volume): no transition to measure.
    (at(10), condition("False", at(2)), None),
    # The API's whole-second request time is compared at its second.
    (at(1.7), condition("False", at(1.2)), at(1.2)),
    (at(0), condition("False", at(0.5), st.POD_HAS_NETWORK), at(0.5)),
])
def test_stopped_after(requested: datetime | None, cond: st.PodCondition | None,
                       expected: datetime | None) -> None:
    assert terminations.stopped_after(requested, cond) == expected


def make_pod(grace: int = 30) -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),),
                        termination_grace_period_seconds=grace)
    return pods.Pod(uid=pods.PodUID("u1"), name="web", namespace="default", spec=spec)


def test_mark_deleted_like_the_api_server() -> None:
    marked = terminations.mark_deleted(make_pod(grace=2), at(3), 2)
    assert marked.deletion_timestamp == at(5)
    assert marked.deletion_grace_period_seconds == 2
    assert terminations.mark_deleted(marked, at(9), 30) == marked
    assert terminations.requested_at(marked.deletion_timestamp,
                                     marked.deletion_grace_period_seconds) == at(3)


def stopped_status(when: datetime) -> st.PodStatus:
    return st.PodStatus(phase="Running", conditions=(
        st.PodCondition(type=st.POD_SCHEDULED, status="True", last_transition_time=at(-10)),
        condition("False", when)))


def test_latency() -> None:
    deleted = terminations.mark_deleted(make_pod(), at(0), 30)
    assert terminations.latency(deleted, stopped_status(at(1.25))) == timedelta(seconds=1.25)
    assert terminations.latency(make_pod(), stopped_status(at(1.25))) is None


# --- timeline ----------------------------------------------------------------------------------


def pod_json(*, deleted: bool, stopped: datetime | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default", "uid": "u1"}
    if deleted:
        meta |= {"deletionTimestamp": st.format_precise(at(30)), "deletionGracePeriodSeconds": 30}
    sandbox = ({"type": st.POD_READY_TO_START_CONTAINERS, "status": "False",
                "lastTransitionTime": st.format_precise(stopped)} if stopped else
               {"type": st.POD_READY_TO_START_CONTAINERS, "status": "True",
                "lastTransitionTime": st.format_precise(at(-9))})
    return {"metadata": meta, "status": {"phase": "Running", "conditions": [
        {"type": st.POD_SCHEDULED, "status": "True",
         "lastTransitionTime": st.format_precise(at(-10))}, sandbox]}}


def test_timeline_termination_step() -> None:
    t = tl.build(pod_json(deleted=True, stopped=at(1.5)), None, NOW)
    assert t.termination == tl.Termination(requested=at(0), stopped=at(1.5))
    assert t.termination.latency == timedelta(seconds=1.5)
    text = tl.render_text(t)
    assert "Deleted → PodReadyToStartContainers=False  False" in text
    assert "PodReadyToStartContainers=False 1.500 s after deletion (termination SLI)" in text
    chart = svg.timeline(t)
    assert 'data-step="termination"' in chart and "1.500 s after deletion" in chart


def test_timeline_termination_pending_and_absent() -> None:
    pending = tl.build(pod_json(deleted=True, stopped=None), None, NOW)
    assert pending.termination is not None and pending.termination.stopped is None
    assert "waiting for PodReadyToStartContainers=False" in tl.render_text(pending)
    plain = tl.build(pod_json(deleted=False, stopped=None), None, NOW)
    assert plain.termination is None
    assert "Deleted" not in tl.render_text(plain)
    assert 'data-step="termination"' not in svg.timeline(plain)


# --- metric ------------------------------------------------------------------------------------


def histogram_count(m: metrics.Metrics) -> float:
    value = m.registry.get_sample_value("nodelet_pod_termination_duration_seconds_count")
    return value or 0.0


def test_metric_only_with_the_gate_and_once() -> None:
    deleted = terminations.mark_deleted(make_pod(), at(0), 30)
    on = metrics.Metrics(clock=lambda: T0, termination_sli=True)
    on.observe_status(deleted, stopped_status(at(0.75)))
    on.observe_status(deleted, stopped_status(at(0.75)))
    assert histogram_count(on) == 1
    assert on.registry.get_sample_value(
        "nodelet_pod_termination_duration_seconds_sum") == pytest.approx(0.75)
    off = metrics.Metrics(clock=lambda: T0)
    off.observe_status(deleted, stopped_status(at(0.75)))
    assert b"nodelet_pod_termination" not in off.render()[0]


def test_metric_waits_for_the_condition() -> None:
    deleted = replace(make_pod(), deletion_timestamp=at(30), deletion_grace_period_seconds=30)
    m = metrics.Metrics(clock=lambda: T0, termination_sli=True)
    running = st.PodStatus(phase="Running", conditions=(condition("True", at(-5)),))
    m.observe_status(deleted, running)
    assert histogram_count(m) == 0
    m.observe_status(deleted, stopped_status(at(2)))
    assert histogram_count(m) == 1


def test_saved_watch_keeps_the_last_copy() -> None:
    running = pod_json(deleted=True, stopped=None)
    final = pod_json(deleted=True, stopped=at(1.5))
    other = {"metadata": {"name": "db", "namespace": "default", "uid": "u2"}}
    text = "\n".join(json.dumps(d) for d in (running, other, final))
    saved = tl.pods_from_text(text)
    assert [p["metadata"]["name"] for p in saved["items"]] == ["web", "db"]
    assert saved["items"][0] == final
    assert tl.pods_from_text(json.dumps({"kind": "PodList", "items": [other]}))["items"] == [
        other]
    with pytest.raises(ValueError):
        tl.pods_from_text("{not json")


# --- analyze -----------------------------------------------------------------------------------


def test_analyze_termination_row_and_pod_field() -> None:
    deleted = pod_json(deleted=True, stopped=at(2))
    running = pod_json(deleted=False, stopped=None)
    running["metadata"] = {"name": "db", "namespace": "default", "uid": "u2"}
    result = analysis.analyze({"kind": "PodList", "items": [deleted, running]})
    assert result.termination.stats is not None and result.termination.stats.count == 1
    table = analysis_report.table(result)
    row = next(line for line in table.splitlines()
               if line.startswith(analysis_report.TERMINATION_LABEL))
    assert row.split()[-5:] == ["1", "2s", "2s", "2s", "2s"]
    pods_json = analysis_report.to_json(result, source="pods", events_source=None)["pods"]
    assert [p["termination"] for p in pods_json] == [2.0, None]
    assert analysis.termination_seconds(result.pods[1]) is None
