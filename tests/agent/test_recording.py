"""EventRecorder over a real SQLite checkpoint: aggregation, bound, persistence, logging."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodelet.adapters import checkpoint as cp
from nodelet.model.core import events as ev
from nodelet.model.core import pods
from nodelet.services.status import recording
from support.clocks import FakeClock

T0 = datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)


def make_pod(name: str = "web", uid: str = "uid-1", namespace: str = "default") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    return pods.Pod(uid=pods.PodUID(uid), name=name, namespace=namespace, spec=spec)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def recorder_for(
    checkpoint: cp.Checkpoint, clock: FakeClock, max_events: int = 100
) -> recording.EventRecorder:
    recorder = recording.EventRecorder(
        checkpoint=checkpoint, node_name="node-a", clock=clock, max_events=max_events
    )
    recorder.restore()
    return recorder


SANDBOX_ERROR = "Failed to create pod sandbox: no IP addresses available in range set"


def test_identical_events_are_aggregated(checkpoint: cp.Checkpoint, clock: FakeClock) -> None:
    recorder = recorder_for(checkpoint, clock)
    pod = make_pod()
    first = recorder.record(pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR)
    clock.advance(10)
    recorder.record(pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR)
    last = clock.advance(10)
    third = recorder.record(pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR)
    assert (third.count, third.first_timestamp, third.last_timestamp) == (3, T0, last)
    assert third.name == first.name
    assert recorder.events() == [third]


@pytest.mark.parametrize(
    ("pod", "type_", "reason", "message"),
    [
        pytest.param(
            make_pod(uid="uid-2"), "Warning", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR, id="uid"
        ),
        pytest.param(make_pod(), "Normal", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR, id="type"),
        pytest.param(make_pod(), "Warning", ev.FAILED_MOUNT, SANDBOX_ERROR, id="reason"),
        pytest.param(make_pod(), "Warning", ev.FAILED_CREATE_POD_SANDBOX, "other", id="message"),
    ],
)
def test_different_events_are_not_aggregated(
    checkpoint: cp.Checkpoint,
    clock: FakeClock,
    pod: pods.Pod,
    type_: ev.EventType,
    reason: str,
    message: str,
) -> None:
    recorder = recorder_for(checkpoint, clock)
    a = recorder.record(make_pod(), "Warning", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR)
    b = recorder.record(pod, type_, reason, message)
    assert (a.count, b.count) == (1, 1)
    assert a.name != b.name  # same clock instant, still distinct names
    assert len(recorder.events()) == 2


def test_event_fields(checkpoint: cp.Checkpoint, clock: FakeClock) -> None:
    recorder = recorder_for(checkpoint, clock)
    event = recorder.record(make_pod(), "Normal", ev.PULLING, 'Pulling image "busybox"')
    assert event.name.startswith("web.")
    assert (event.namespace, event.pod_name, event.pod_uid) == ("default", "web", "uid-1")
    assert (event.host, event.component) == ("node-a", "kubelet")


def test_filter_by_pod_and_namespace(checkpoint: cp.Checkpoint, clock: FakeClock) -> None:
    recorder = recorder_for(checkpoint, clock)
    recorder.record(make_pod("web"), "Normal", ev.PULLING, "p")
    clock.advance(1)
    recorder.record(make_pod("db", uid="uid-2"), "Normal", ev.PULLING, "p")
    clock.advance(1)
    recorder.record(make_pod("web", uid="uid-3", namespace="prod"), "Normal", ev.PULLING, "p")
    assert [e.pod_uid for e in recorder.events()] == ["uid-1", "uid-2", "uid-3"]
    assert [e.pod_uid for e in recorder.events("web")] == ["uid-1", "uid-3"]
    assert [e.pod_uid for e in recorder.events("web", "prod")] == ["uid-3"]
    assert [e.pod_uid for e in recorder.events(namespace="default")] == ["uid-1", "uid-2"]


def test_history_is_bounded_by_last_seen(checkpoint: cp.Checkpoint, clock: FakeClock) -> None:
    recorder = recorder_for(checkpoint, clock, max_events=3)
    pod = make_pod()
    for i in range(3):
        recorder.record(pod, "Normal", ev.PULLED, f"m{i}")
        clock.advance(1)
    recorder.record(pod, "Normal", ev.PULLED, "m0")  # m0 seen again: now the newest
    clock.advance(1)
    recorder.record(pod, "Normal", ev.PULLED, "m3")  # evicts m1, seen longest ago
    assert sorted(e.message for e in recorder.events()) == ["m0", "m2", "m3"]
    assert sorted(e.message for e in checkpoint.load_events()) == ["m0", "m2", "m3"]


def test_events_survive_a_restart(checkpoint: cp.Checkpoint, clock: FakeClock) -> None:
    recorder = recorder_for(checkpoint, clock)
    pod = make_pod()
    recorder.record(pod, "Warning", ev.BACK_OFF, "Back-off restarting failed container")
    clock.advance(30)
    before = recorder.record(pod, "Warning", ev.BACK_OFF, "Back-off restarting failed container")

    restarted = recorder_for(checkpoint, clock)
    assert restarted.events() == [before]
    clock.advance(30)
    after = restarted.record(pod, "Warning", ev.BACK_OFF, "Back-off restarting failed container")
    assert (after.count, after.first_timestamp, after.name) == (3, T0, before.name)


def test_restore_applies_a_smaller_bound(checkpoint: cp.Checkpoint, clock: FakeClock) -> None:
    recorder = recorder_for(checkpoint, clock)
    for i in range(5):
        recorder.record(make_pod(), "Normal", ev.STARTED, f"m{i}")
        clock.advance(1)
    assert [e.message for e in recorder_for(checkpoint, clock, max_events=2).events()] == [
        "m3",
        "m4",
    ]


def test_events_are_logged_and_published(
    checkpoint: cp.Checkpoint, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = recorder_for(checkpoint, clock)
    published: list[ev.Event] = []
    unsubscribe = recorder.subscribe(published.append)
    with caplog.at_level(logging.INFO, logger=recording.__name__):
        event = recorder.record(make_pod(), "Warning", ev.FAILED_MOUNT, "boom")
    unsubscribe()
    recorder.record(make_pod(), "Warning", ev.FAILED_MOUNT, "boom")
    assert published == [event]
    log_record = caplog.records[0]
    assert log_record.levelno == logging.WARNING
    assert (log_record.__dict__["pod"], log_record.__dict__["reason"]) == (
        "default/web",
        "FailedMount",
    )


def test_event_to_api_shape(checkpoint: cp.Checkpoint, clock: FakeClock) -> None:
    recorder = recorder_for(checkpoint, clock)
    recorder.record(make_pod(), "Warning", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR)
    clock.advance(20)
    event = recorder.record(make_pod(), "Warning", ev.FAILED_CREATE_POD_SANDBOX, SANDBOX_ERROR)
    body = ev.event_to_api(event)
    assert body["involvedObject"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "web",
        "uid": "uid-1",
        "apiVersion": "v1",
    }
    assert body["metadata"]["name"] == event.name
    assert (body["firstTimestamp"], body["lastTimestamp"]) == (
        "2024-05-01T12:00:00Z",
        "2024-05-01T12:00:20Z",
    )
    assert (body["count"], body["type"], body["reason"]) == (2, "Warning", "FailedCreatePodSandBox")
    assert body["source"] == {"component": "kubelet", "host": "node-a"}


def test_similar_events_with_different_messages_are_combined_after_ten() -> None:
    """client-go's aggregator: the 11th distinct message of one reason joins a combined event."""
    import tempfile

    from nodelet.adapters import checkpoint as cp
    from nodelet.model.core import pods as pods_model
    from nodelet.services.status import recording as rec

    clock_values = iter(datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC) for i in range(60))
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = cp.Checkpoint.open(Path(tmp) / "c.db")
        recorder = rec.EventRecorder(checkpoint=checkpoint, node_name="n",
                                     clock=lambda: next(clock_values), max_events=100)
        pod = pods_model.Pod(uid=pods_model.PodUID("u1"), name="p", namespace="default",
                             spec=pods_model.PodSpec(containers=()))
        for i in range(14):
            recorder.record(pod, "Warning", "FailedCreatePodSandBox", f"sandbox {i} failed")
        events = recorder.events()
        checkpoint.close()
    plain = [e for e in events if not e.message.startswith(rec.COMBINED_PREFIX)]
    combined = [e for e in events if e.message.startswith(rec.COMBINED_PREFIX)]
    assert len(plain) == 10
    assert len(combined) == 1
    assert combined[0].count == 4
    assert combined[0].message == rec.COMBINED_PREFIX + "sandbox 13 failed"


def test_container_events_name_their_container(checkpoint: cp.Checkpoint,
                                               clock: FakeClock) -> None:
    """As the kubelet's container references: involvedObject.fieldPath says which container
    (spec.containers{app}, spec.initContainers{init}, spec.ephemeralContainers{debug}), the
    same words about two containers are two events, and the field path survives a restart."""
    recorder = recorder_for(checkpoint, clock)
    base = make_pod()
    pod = pods.Pod(uid=base.uid, name=base.name, namespace=base.namespace, spec=pods.PodSpec(
        containers=base.spec.containers,
        init_containers=(pods.Container(name="init", image="busybox"),),
        ephemeral_containers=(pods.Container(name="debug", image="busybox"),)))
    for name in ("app", "init", "debug", "app"):
        recorder.record(pod, "Normal", ev.CREATED, "Container created", container=name)
        clock.advance(1)
    recorder.record(pod, "Normal", ev.SANDBOX_CHANGED, "changed")
    events = recorder.events()
    assert [(e.field_path, e.count) for e in events] == [
        ("spec.containers{app}", 2), ("spec.initContainers{init}", 1),
        ("spec.ephemeralContainers{debug}", 1), ("", 1)]
    api = ev.event_to_api(events[0])
    assert api["involvedObject"]["fieldPath"] == "spec.containers{app}"
    assert "fieldPath" not in ev.event_to_api(events[-1])["involvedObject"]
    assert (api["source"], api["reportingComponent"], api["reportingInstance"]) == (
        {"component": "kubelet", "host": "node-a"}, "kubelet", "node-a")
    restored = recorder_for(checkpoint, clock).events()
    assert [e.field_path for e in restored] == [e.field_path for e in events]
