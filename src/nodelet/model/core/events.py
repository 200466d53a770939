"""Kubernetes events about pods (and the node), as plain values, and their v1 `Event` form
(pure, no I/O).

An `Event` is one aggregated event: identical occurrences (same pod UID, type, reason and
message) share one value whose `count` grows and whose `last_timestamp` moves, as client-go's
event correlator does. Times are precise, timezone-aware datetimes; `event_to_api` serialises
them as Kubernetes does (RFC 3339, whole seconds), or with microseconds when asked to be
precise. This module raises no exceptions of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from nodelet.model.core import pods
from nodelet.model.core import status as st

EventType = Literal["Normal", "Warning"]
# What an event is about (its involvedObject's kind).
InvolvedKind = Literal["Pod", "Node"]

# The reporting component, as `source.component` and `reportingComponent`: the kubelet's
# name, as tools that read a node agent's events select them by it (`kubectl get events
# --field-selector source=kubelet`, `describe`'s From column); the node's name is the host.
COMPONENT = "kubelet"

# Reasons the kubelet uses (pkg/kubelet/events/event.go); DESIGN.md §3 gives the messages.
FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"
FAILED_PREPARE_DYNAMIC_RESOURCES = "FailedPrepareDynamicResources"
SANDBOX_CHANGED = "SandboxChanged"
FAILED_POD_SANDBOX_STATUS = "FailedPodSandBoxStatus"
FAILED_MOUNT = "FailedMount"
FAILED_KILL_POD = "FailedKillPod"
PULLING = "Pulling"
PULLED = "Pulled"
CREATED = "Created"
STARTED = "Started"
KILLING = "Killing"
BACK_OFF = "BackOff"
UNHEALTHY = "Unhealthy"
PROBE_WARNING = "ProbeWarning"
FAILED = "Failed"
# A container's OOM kill (containerd's /tasks/oom). Not a kubelet reason: the kubelet leaves a
# container's OOM kill to its status (reason OOMKilled, from CRI) and records only system OOMs,
# on the Node ("SystemOOM", pkg/kubelet/oom). OOMKilling is node-problem-detector's reason
# for a kernel OOM kill, the Warning operators know from clusters that run it.
OOM_KILLING = "OOMKilling"

EventKey = tuple[str, str, str, str, str]

# Where events about the node go (client-go: cluster-scoped objects' events go to "default").
NODE_EVENT_NAMESPACE = "default"


@dataclass(frozen=True)
class Event:
    """One (aggregated) event about a pod, or about the node when `kind` is "Node".

    `name` is the object name (`<pod>.<hex>`, unique per aggregated event); `host` is the node.
    A node event has the node's name as `pod_name` and `pod_uid` (the kubelet's node reference
    uses the name as UID) and lives in the `default` namespace, as client-go puts events about
    cluster-scoped objects.
    """

    name: str
    namespace: str
    pod_name: str
    pod_uid: pods.PodUID
    type: EventType
    reason: str
    message: str
    count: int
    first_timestamp: datetime
    last_timestamp: datetime
    host: str
    component: str = COMPONENT
    kind: InvolvedKind = "Pod"
    # The container it is about, as the kubelet's container references say it
    # (`spec.containers{main}`: `container_field_path`); "": the pod itself.
    field_path: str = ""

    @property
    def key(self) -> EventKey:
        """What identical events share: pod UID, type, reason, message, field path."""
        return event_key(self.pod_uid, self.type, self.reason, self.message, self.field_path)

    def repeated(self, at: datetime) -> Event:
        """This event seen once more at `at`: count + 1, last timestamp moved."""
        return dataclasses.replace(self, count=self.count + 1, last_timestamp=at)


def event_key(uid: pods.PodUID, type_: EventType, reason: str, message: str,
              field_path: str = "") -> EventKey:
    """The aggregation key of an event (client-go's correlator keys on the involved object's
    field path too: the same words about two containers are two events)."""
    return (str(uid), type_, reason, message, field_path)


def container_field_path(pod: pods.Pod, name: str) -> str:
    """Where `name` sits in the pod's spec, as the kubelet's GenerateContainerRef writes it:
    `spec.containers{main}`, `spec.initContainers{init}`, `spec.ephemeralContainers{debug}`;
    a name the spec lacks is an implicit container (`implicitly required container main`)."""
    for field, listed in (("containers", pod.spec.containers),
                          ("initContainers", pod.spec.init_containers),
                          ("ephemeralContainers", pod.spec.ephemeral_containers)):
        if any(c.name == name for c in listed):
            return f"spec.{field}{{{name}}}"
    return f"implicitly required container {name}"


def event_name(pod_name: str, at: datetime) -> str:
    """`<pod>.<hex nanoseconds>`, as client-go names events."""
    nanos = int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000
    return f"{pod_name}.{nanos:x}"


def new_event(
    pod: pods.Pod, type_: EventType, reason: str, message: str, *, at: datetime, host: str,
    field_path: str = "",
) -> Event:
    """A first occurrence (count 1) of an event about `pod` (`field_path`: one of its
    containers, `container_field_path`)."""
    return Event(
        name=event_name(pod.name, at),
        namespace=pod.namespace,
        pod_name=pod.name,
        pod_uid=pod.uid,
        type=type_,
        reason=reason,
        message=message,
        count=1,
        first_timestamp=at,
        last_timestamp=at,
        host=host,
        field_path=field_path,
    )


def new_node_event(
    node_name: str, type_: EventType, reason: str, message: str, *, at: datetime
) -> Event:
    """A first occurrence (count 1) of an event about the node itself."""
    return Event(
        name=event_name(node_name, at),
        namespace=NODE_EVENT_NAMESPACE,
        pod_name=node_name,
        pod_uid=pods.PodUID(node_name),
        type=type_,
        reason=reason,
        message=message,
        count=1,
        first_timestamp=at,
        last_timestamp=at,
        host=node_name,
        kind="Node",
    )


def involved_object(event: Event) -> dict[str, Any]:
    """The v1 ObjectReference of what the event is about (a Node has no namespace)."""
    if event.kind == "Node":
        return {"kind": "Node", "name": event.pod_name, "uid": event.pod_uid, "apiVersion": "v1"}
    ref = {"kind": "Pod", "namespace": event.namespace, "name": event.pod_name,
           "uid": event.pod_uid, "apiVersion": "v1"}
    if event.field_path:
        ref["fieldPath"] = event.field_path
    return ref


def event_to_api(event: Event, *, precise: bool = False) -> dict[str, Any]:
    """The v1 Event object, shaped as the kubelet's (core/v1, legacy fields filled); `precise`
    writes firstTimestamp and lastTimestamp with microseconds (nodelet's own timelines)."""
    stamp = st.format_precise if precise else st.format_time
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": event.name,
            "namespace": event.namespace,
            "creationTimestamp": st.format_time(event.first_timestamp),
        },
        "involvedObject": involved_object(event),
        "reason": event.reason,
        "message": event.message,
        "source": {"component": event.component, "host": event.host},
        "firstTimestamp": stamp(event.first_timestamp),
        "lastTimestamp": stamp(event.last_timestamp),
        "count": event.count,
        "type": event.type,
        "eventTime": None,
        "reportingComponent": event.component,
        "reportingInstance": event.host,
    }


def event_list_to_api(events: list[Event], *, precise: bool = False) -> dict[str, Any]:
    """A v1 EventList of `events`, in the given order (`precise`: as `event_to_api`)."""
    return {
        "kind": "EventList",
        "apiVersion": "v1",
        "metadata": {},
        "items": [event_to_api(e, precise=precise) for e in events],
    }
