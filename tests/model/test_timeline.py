"""A pod's start-up timeline from its v1 JSON and events: milestones, steps, attempts, text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nodelet.model.core import events as ev
from nodelet.model.core import podjson, pods
from nodelet.model.core import status as st
from nodelet.model.reports import timeline as tl

T0 = datetime(2024, 5, 1, 12, 0, 0, 100000, tzinfo=UTC)
NOW = T0 + timedelta(seconds=30)
GVISOR = ('no pod sandbox exists: failed to create pod sandbox: rpc error: code = Unknown '
          'desc = failed to get sandbox runtime: no runtime for "gvisor" is configured')


def ms(n: float) -> timedelta:
    return timedelta(milliseconds=n)


def cond(type_: str, status: str, at: datetime | None, reason: str = "",
         message: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": type_, "status": status,
                           "lastTransitionTime": st.format_precise(at)}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def pod(*conditions: dict[str, Any], name: str = "web", uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": uid},
            "status": {"phase": "Running", "conditions": list(conditions)}}


def event(reason: str, first: datetime, last: datetime | None = None, count: int = 1,
          name: str = "web", uid: str = "u1", message: str = "") -> dict[str, Any]:
    return {"reason": reason, "type": "Warning", "count": count, "message": message or reason,
            "firstTimestamp": st.format_precise(first),
            "lastTimestamp": st.format_precise(last or first),
            "involvedObject": {"kind": "Pod", "name": name, "namespace": "default", "uid": uid}}


def events(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "EventList", "items": list(items)}


HEALTHY = pod(
    cond(st.POD_SCHEDULED, "True", T0),
    cond(st.INITIALIZED, "True", T0),
    cond(st.POD_READY_TO_START_CONTAINERS, "True", T0 + ms(352)),
    cond(st.CONTAINERS_READY, "True", T0 + ms(1200)),
    cond(st.READY, "True", T0 + ms(1200)),
)
WITH_INIT = pod(
    cond(st.POD_SCHEDULED, "True", T0),
    cond(st.POD_READY_TO_START_CONTAINERS, "True", T0 + ms(200)),
    cond(st.INITIALIZED, "True", T0 + ms(900)),
    cond(st.CONTAINERS_READY, "True", T0 + ms(1500)),
    cond(st.READY, "True", T0 + ms(1600)),
)
OLD_NAME = pod(
    cond(st.POD_SCHEDULED, "True", T0),
    cond(st.POD_HAS_NETWORK, "True", T0 + ms(500)),
)
STUCK = pod(
    cond(st.POD_SCHEDULED, "True", T0),
    cond(st.INITIALIZED, "True", T0),
    cond(st.POD_READY_TO_START_CONTAINERS, "False", T0, "PodSandboxNotReady", GVISOR),
    cond(st.CONTAINERS_READY, "False", T0, "ContainersNotReady"),
    cond(st.READY, "False", T0, "ContainersNotReady"),
)

# (pod, expected per milestone: (type, status, +start ms or None, step ms or None, step_from))
MILESTONE_CASES = [
    pytest.param(HEALTHY, [
        (st.POD_SCHEDULED, "True", 0, None, ""),
        (st.POD_READY_TO_START_CONTAINERS, "True", 352, 352, st.INITIALIZED),
        (st.INITIALIZED, "True", 0, 0, st.POD_SCHEDULED),
        (st.CONTAINERS_READY, "True", 1200, 848, st.POD_READY_TO_START_CONTAINERS),
        (st.READY, "True", 1200, 0, st.CONTAINERS_READY),
    ], id="no-init-containers: Initialized before the sandbox"),
    pytest.param(WITH_INIT, [
        (st.POD_SCHEDULED, "True", 0, None, ""),
        (st.POD_READY_TO_START_CONTAINERS, "True", 200, 200, st.POD_SCHEDULED),
        (st.INITIALIZED, "True", 900, 700, st.POD_READY_TO_START_CONTAINERS),
        (st.CONTAINERS_READY, "True", 1500, 600, st.INITIALIZED),
        (st.READY, "True", 1600, 100, st.CONTAINERS_READY),
    ], id="init-containers: sandbox before Initialized"),
    pytest.param(OLD_NAME, [
        (st.POD_SCHEDULED, "True", 0, None, ""),
        (st.POD_HAS_NETWORK, "True", 500, 500, st.POD_SCHEDULED),
        (st.INITIALIZED, "", None, None, ""),
        (st.CONTAINERS_READY, "", None, None, ""),
        (st.READY, "", None, None, ""),
    ], id="PodHasNetwork fills the sandbox slot"),
    pytest.param(STUCK, [
        (st.POD_SCHEDULED, "True", 0, None, ""),
        (st.POD_READY_TO_START_CONTAINERS, "False", None, None, ""),
        (st.INITIALIZED, "True", 0, 0, st.POD_SCHEDULED),
        (st.CONTAINERS_READY, "False", None, None, ""),
        (st.READY, "False", None, None, ""),
    ], id="stuck before its sandbox"),
    pytest.param(pod(), [
        (st.POD_SCHEDULED, "", None, None, ""),
        (st.POD_READY_TO_START_CONTAINERS, "", None, None, ""),
        (st.INITIALIZED, "", None, None, ""),
        (st.CONTAINERS_READY, "", None, None, ""),
        (st.READY, "", None, None, ""),
    ], id="no conditions yet"),
]


def _ms(delta: timedelta | None) -> float | None:
    return None if delta is None else round(delta.total_seconds() * 1000, 3)


@pytest.mark.parametrize(("pod_json", "expected"), MILESTONE_CASES)
def test_milestones(pod_json: dict[str, Any], expected: list[tuple[Any, ...]]) -> None:
    t = tl.build(pod_json, None, NOW)
    got = [(m.type, m.status, _ms(m.since_start), _ms(m.step), m.step_from) for m in t.milestones]
    assert got == expected


@pytest.mark.parametrize(
    ("pod_json", "latency_ms", "error", "start", "end"),
    [
        (HEALTHY, 352, "", T0, T0 + ms(1200)),
        (WITH_INIT, 200, "", T0, T0 + ms(1600)),
        (OLD_NAME, 500, "", T0, NOW),  # pending milestones: the timeline runs until now
        (STUCK, None, GVISOR, T0, NOW),
        (pod(), None, "", None, None),
    ],
)
def test_summary(pod_json: dict[str, Any], latency_ms: float | None, error: str,
                 start: datetime | None, end: datetime | None) -> None:
    t = tl.build(pod_json, None, NOW)
    assert _ms(t.sandbox_ready_latency) == latency_ms
    assert t.sandbox_error == error
    assert (t.start, t.end) == (start, end)


def test_sandbox_attempts_from_events() -> None:
    listed = events(
        event("FailedCreatePodSandBox", T0 + ms(50), T0 + ms(20050), count=3, message="boom"),
        event("SandboxChanged", T0 + ms(25000)),
        event("FailedMount", T0 + ms(10)),
        event("Pulling", T0 + ms(30)),  # not about the sandbox
        event("FailedCreatePodSandBox", T0, name="other"),  # another pod
        event("FailedCreatePodSandBox", T0, uid="old-uid"),  # an earlier pod of the same name
    )
    t = tl.build(STUCK, listed, NOW)
    assert [(a.kind, a.reason, a.count, a.first, a.last) for a in t.attempts] == [
        ("blocked", "FailedMount", 1, T0 + ms(10), T0 + ms(10)),
        ("failed", "FailedCreatePodSandBox", 3, T0 + ms(50), T0 + ms(20050)),
        ("changed", "SandboxChanged", 1, T0 + ms(25000), T0 + ms(25000)),
    ]
    assert t.failed_attempts == 3
    assert t.attempts[1].message == "boom"


def test_attempts_widen_a_timeline_without_conditions() -> None:
    t = tl.build(pod(), events(event("FailedCreatePodSandBox", T0, T0 + ms(4000), count=2)), NOW)
    assert (t.start, t.end) == (T0, NOW)


@pytest.mark.parametrize(
    "pod_json",
    [
        {},
        {"metadata": "x", "status": []},
        {"status": {"conditions": "nope"}},
        {"status": {"conditions": [{"type": "Ready", "status": "True",
                                    "lastTransitionTime": "not a time"}, 7]}},
    ],
)
def test_malformed_input_gives_an_empty_timeline(pod_json: dict[str, Any]) -> None:
    t = tl.build(pod_json, {"items": [{"reason": "FailedCreatePodSandBox"}, "x"]}, NOW)
    assert not any(m.reached for m in t.milestones)
    assert t.attempts == ()
    assert t.span == timedelta(0)
    assert tl.render_text(t)  # still renders


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (None, "-"),
        (timedelta(0), "0 ms"),
        (ms(0.4), "0 ms"),
        (ms(352), "352 ms"),
        (ms(999.4), "999 ms"),
        (ms(1234.5), "1.234 s"),
        (ms(59_940), "59.9 s"),
        (timedelta(seconds=123), "2m03s"),
        (timedelta(hours=1, minutes=5, seconds=9), "1h05m"),
        (-ms(250), "-250 ms"),
    ],
)
def test_format_duration(delta: timedelta | None, text: str) -> None:
    assert tl.format_duration(delta) == text


@pytest.mark.parametrize(
    ("at", "fraction"),
    [(T0 - ms(500), 0.0), (T0, 0.0), (T0 + ms(600), 0.5), (T0 + ms(1200), 1.0),
     (T0 + ms(9000), 1.0)],
)
def test_offset_is_clamped(at: datetime, fraction: float) -> None:
    assert tl.offset(tl.build(HEALTHY, None, NOW), at) == pytest.approx(fraction)


@pytest.mark.parametrize(
    ("pod_json", "index", "expected"),
    [
        (HEALTHY, 1, (0.0, 352 / 1200)),  # the step from Initialized (at T0) to the sandbox
        (HEALTHY, 3, (352 / 1200, 1.0)),
        (HEALTHY, 0, (0.0, 0.0)),
        (STUCK, 1, (0.0, 1.0)),  # waiting since the last reached milestone, until now
    ],
)
def test_bars(pod_json: dict[str, Any], index: int, expected: tuple[float, float]) -> None:
    t = tl.build(pod_json, None, NOW)
    assert tl.bar(t, t.milestones[index]) == pytest.approx(expected)


def test_render_text_healthy() -> None:
    text = tl.render_text(tl.build(HEALTHY, None, NOW), width=12)
    lines = text.splitlines()
    assert lines[0] == ("Pod default/web (Running), scheduled 2024-05-01T12:00:00.100000Z, "
                        "span 1.200 s")
    assert lines[1].split() == ["CONDITION", "STATUS", "TRUE", "SINCE", "+START", "STEP"]
    row = lines[3]
    assert row.startswith("PodReadyToStartContainers  True    2024-05-01T12:00:00.452000Z")
    assert "|████········|" in row and row.endswith("352 ms   352 ms")
    assert lines[6].startswith("Ready ") and "|···········█|" in lines[6]
    assert lines[6].endswith("1.200 s  0 ms")
    assert "Sandbox ready after 352 ms (PodScheduled → PodReadyToStartContainers)" in text
    assert "Sandbox error" not in text


def test_render_text_stuck() -> None:
    listed = events(event("FailedCreatePodSandBox", T0 + ms(50), T0 + ms(20050), count=3,
                          message="Failed to create pod sandbox: boom"))
    text = tl.render_text(tl.build(STUCK, listed, NOW), width=10)
    assert "PodReadyToStartContainers  False" in text
    assert "|░░░░░░░░░░|" in text
    sandbox_row = next(line for line in text.splitlines() if "PodReadyToStart" in line)
    assert sandbox_row.endswith("waiting 30.0 s")  # since PodScheduled/Initialized at T0
    assert ("  2024-05-01T12:00:00.150000Z  FailedCreatePodSandBox x3 until "
            "2024-05-01T12:00:20.150000Z: Failed to create pod sandbox: boom") in text
    assert "Sandbox attempts (3 failed):" in text
    assert text.endswith(f"Sandbox error: {GVISOR}\n")
    assert "Sandbox ready after" not in text


# --- the agent's own pods: typed values through the API's serialisers


def typed_pod(uid: str = "u1") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    return pods.Pod(uid=pods.PodUID(uid), name="web", namespace="default", spec=spec)


def test_of_pod_keeps_microseconds_and_only_this_pods_events() -> None:
    status = st.PodStatus(phase="Pending", conditions=(
        st.PodCondition(st.POD_SCHEDULED, "True", last_transition_time=T0),
        st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "False", "PodSandboxNotReady", GVISOR,
                        last_transition_time=T0 + ms(1.5)),
    ))
    failed = ev.new_event(typed_pod(), "Warning", ev.FAILED_CREATE_POD_SANDBOX, "boom",
                          at=T0 + ms(20.25), host="n").repeated(T0 + ms(1500.5))
    earlier = ev.new_event(typed_pod("u0"), "Warning", ev.FAILED_CREATE_POD_SANDBOX, "old",
                           at=T0, host="n")
    t = tl.of_pod(typed_pod(), status, [failed, earlier], NOW)
    assert (t.namespace, t.name, t.phase, t.sandbox_error) == ("default", "web", "Pending", GVISOR)
    assert t.sandbox_ready.last_transition == T0 + ms(1.5)
    assert [(a.kind, a.count, a.first, a.last) for a in t.attempts] == [
        ("failed", 2, T0 + ms(20.25), T0 + ms(1500.5))]
    assert tl.render_text(t) == tl.render_text(tl.build(
        podjson.pod_to_api(typed_pod(), status, precise=True),
        ev.event_list_to_api([failed, earlier], precise=True), NOW))


def test_of_pod_without_a_status_is_a_pending_pod() -> None:
    t = tl.of_pod(typed_pod(), None, [], NOW)
    assert t.phase == "Pending" and not any(m.status for m in t.milestones)
