"""containerd runtime events: decoding envelopes (adapters.events) and what an event means for
a pod (model.core.runtimeevents), without containerd."""

from __future__ import annotations

import pytest
from google.protobuf import any_pb2, empty_pb2

from nodelet.adapters.events import client as events_client
from nodelet.adapters.events.gen import events_pb2, payloads_pb2
from nodelet.model.core import pods, runtime
from nodelet.model.core import runtimeevents as rev

CID = "c" * 64
SID = "s" * 64


def envelope(topic: str, payload: object, *, prefix: str = "") -> bytes:
    """An Envelope as containerd sends it, serialised (so decoding starts from wire bytes)."""
    event = any_pb2.Any()
    event.Pack(payload, type_url_prefix=prefix)  # type: ignore[arg-type]
    if not prefix:  # containerd 1.6 sends the bare message name as the type URL
        event.type_url = event.type_url.lstrip("/")
    message = events_pb2.Envelope(namespace="k8s.io", topic=topic, event=event)
    message.timestamp.FromNanoseconds(1_700_000_000_250_000_000)
    return message.SerializeToString()


def decode(raw: bytes) -> rev.RuntimeEvent | None:
    return events_client.decode(events_pb2.Envelope.FromString(raw))


def test_task_exit_is_decoded_with_process_and_status() -> None:
    exit_ = payloads_pb2.TaskExit(container_id=CID, id=CID, pid=42, exit_status=137)
    exit_.exited_at.FromNanoseconds(1_700_000_000_000_000_000)
    assert decode(envelope("/tasks/exit", exit_)) == rev.RuntimeEvent(
        rev.Kind.TASK_EXIT, CID, process_id=CID, exit_status=137, exited_at=1_700_000_000.0,
        timestamp=1_700_000_000.25)


@pytest.mark.parametrize("prefix", ["", "types.containerd.io"])
def test_oom_and_delete_are_decoded_whatever_the_type_url_prefix(prefix: str) -> None:
    oom = decode(envelope("/tasks/oom", payloads_pb2.TaskOOM(container_id=CID), prefix=prefix))
    gone = decode(envelope("/containers/delete", payloads_pb2.ContainerDelete(id=SID),
                           prefix=prefix))
    assert (oom and oom.kind, oom and oom.object_id) == (rev.Kind.TASK_OOM, CID)
    assert (gone and gone.kind, gone and gone.object_id) == (rev.Kind.CONTAINER_DELETE, SID)


@pytest.mark.parametrize(("topic", "payload"), [
    ("/tasks/start", empty_pb2.Empty()),  # a topic nodelet does not subscribe to
    ("/nodelet/subscribed/abc", empty_pb2.Empty()),  # the subscription probe
    ("/tasks/exit", payloads_pb2.TaskOOM(container_id=CID)),  # payload of another topic
])
def test_other_topics_and_mismatched_payloads_are_skipped(topic: str, payload: object) -> None:
    assert decode(envelope(topic, payload)) is None


def test_filters_name_the_namespace_and_each_topic() -> None:
    assert rev.subscription_filters("k8s.io", ("/tasks/exit", "/tasks/oom")) == [
        'namespace=="k8s.io",topic=="/tasks/exit"', 'namespace=="k8s.io",topic=="/tasks/oom"']


@pytest.mark.parametrize(("event", "concerns"), [
    (rev.RuntimeEvent(rev.Kind.TASK_EXIT, CID, process_id=CID), True),  # init process
    (rev.RuntimeEvent(rev.Kind.TASK_EXIT, CID, process_id="exec-1"), False),  # exec probe
    (rev.RuntimeEvent(rev.Kind.TASK_OOM, CID), True),
    (rev.RuntimeEvent(rev.Kind.CONTAINER_DELETE, SID), True),
    (rev.RuntimeEvent(rev.Kind.TASK_OOM, ""), False),
])
def test_only_init_exits_ooms_and_deletions_concern_a_pod(
    event: rev.RuntimeEvent, concerns: bool
) -> None:
    assert rev.concerns_pod(event) is concerns


def pod_state(*, sandbox: runtime.SandboxState | None = None,
              container: runtime.ContainerState | None = None) -> runtime.PodRuntime:
    sandboxes = () if sandbox is None else (runtime.SandboxInfo(
        id=runtime.SandboxID(SID), name="p", namespace="default", uid="u", attempt=0,
        state=sandbox, created_at=1),)
    containers = () if container is None else (runtime.ContainerInfo(
        id=runtime.ContainerID(CID), sandbox_id=runtime.SandboxID(SID), name="main", attempt=0,
        image="", image_ref="", state=container, created_at=1),)
    return runtime.PodRuntime(pods.PodUID("u"), sandboxes=sandboxes, containers=containers)


EXIT_C = rev.RuntimeEvent(rev.Kind.TASK_EXIT, CID, process_id=CID)
EXIT_S = rev.RuntimeEvent(rev.Kind.TASK_EXIT, SID, process_id=SID)
DELETE_C = rev.RuntimeEvent(rev.Kind.CONTAINER_DELETE, CID)
RUNNING, EXITED = runtime.ContainerState.RUNNING, runtime.ContainerState.EXITED
READY, NOTREADY = runtime.SandboxState.READY, runtime.SandboxState.NOTREADY


@pytest.mark.parametrize(("event", "state", "settled"), [
    (EXIT_C, pod_state(container=RUNNING), False),  # CRI has not caught up yet
    (EXIT_C, pod_state(container=EXITED), True),
    (EXIT_C, pod_state(), True),  # gone already
    (EXIT_S, pod_state(sandbox=READY, container=EXITED), False),
    (EXIT_S, pod_state(sandbox=NOTREADY), True),
    (DELETE_C, pod_state(container=EXITED), False),
    (DELETE_C, pod_state(sandbox=READY), True),
    (rev.RuntimeEvent(rev.Kind.TASK_OOM, CID), pod_state(container=RUNNING), True),
])
def test_settled_when_cri_shows_the_event(
    event: rev.RuntimeEvent, state: runtime.PodRuntime, settled: bool
) -> None:
    assert rev.settled(event, state) is settled


def test_oom_message_names_the_container() -> None:
    assert rev.container_name(EXIT_C, pod_state(container=RUNNING)) == "main"
    assert rev.oom_message("main") == "Memory cgroup out of memory: killed container main"
    assert rev.container_name(EXIT_S, pod_state(sandbox=READY)) == ""


def test_an_oom_of_the_pause_task_is_told_apart() -> None:
    oom_s = rev.RuntimeEvent(rev.Kind.TASK_OOM, SID)
    assert rev.is_sandbox(oom_s, pod_state(sandbox=READY, container=RUNNING))
    assert not rev.is_sandbox(rev.RuntimeEvent(rev.Kind.TASK_OOM, CID),
                              pod_state(sandbox=READY, container=RUNNING))


@pytest.mark.parametrize(("event_type", "reason", "kinds"), [
    ("CONTAINER_STOPPED_EVENT", "Error", [rev.Kind.TASK_EXIT]),
    ("CONTAINER_STOPPED_EVENT", "OOMKilled", [rev.Kind.TASK_OOM, rev.Kind.TASK_EXIT]),
    ("CONTAINER_DELETED_EVENT", "", [rev.Kind.CONTAINER_DELETE]),
    ("CONTAINER_CREATED_EVENT", "", []),  # the agent's own actions
    ("CONTAINER_STARTED_EVENT", "", []),
])
def test_cri_events_mean_what_containerds_do(event_type: str, reason: str,
                                             kinds: list[rev.Kind]) -> None:
    events = rev.from_cri(event_type, "c1", exit_code=137, reason=reason, at=5.0)
    assert [e.kind for e in events] == kinds
    assert all(e.object_id == "c1" and rev.concerns_pod(e) for e in events)
    exits = [e for e in events if e.kind is rev.Kind.TASK_EXIT]
    assert all(e.exit_status == 137 and e.process_id == "c1" for e in exits)
