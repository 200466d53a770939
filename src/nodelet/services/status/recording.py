"""The event recorder: Kubernetes events about pods, aggregated, bounded and checkpointed.

`record()` is what the pod workers call for `FailedCreatePodSandBox`, `Pulling`, `BackOff`...
(DESIGN.md §3); `record_node()` records events about the node itself (involvedObject: the
Node), such as image GC's `FreeDiskSpaceFailed`, aggregated the same way but not checkpointed.
Identical events — same pod UID, type, reason and message — are aggregated the way client-go's
correlator does: one event whose `count` grows and whose `lastTimestamp` moves.
Similar events — same pod, type and reason, different messages (a sandbox error names the
sandbox ID, so every retry's message differs) — are combined like client-go's aggregator does:
after 10 distinct messages within 10 minutes, further ones update a single event whose message is
`(combined from similar events): <latest message>`.
The newest `max_events` events are kept (by `lastTimestamp`), in memory and in the checkpoint,
and restored on start. Every event is also logged, with the pod and reason as structured fields
(`extra`), and passed to subscribers (the cluster-mode Event sink).

The checkpoint is a `checkpoint.Store`: in the agent, the write-behind writer
(`services.status.checkpointing`), whose writes never block and are retried until they succeed.

Exceptions: `restore()` lets `checkpoint.CheckpointError` through; write failures while running
are logged, not raised (an event must never fail a pod sync). Subscriber exceptions are logged.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from nodelet.adapters import checkpoint as cp
from nodelet.model.core import events as ev
from nodelet.model.core import pods

log = logging.getLogger(__name__)

EventCallback = Callable[[ev.Event], None]

# client-go's EventAggregator defaults: distinct messages before combining, and the window.
SIMILAR_MAX = 10
SIMILAR_WINDOW = timedelta(minutes=10)
COMBINED_PREFIX = "(combined from similar events): "


@dataclasses.dataclass
class _Similar:
    messages: set[str]
    last: datetime


class EventRecorder:
    """Aggregating, bounded event history. Used from one thread; every method is quick."""

    def __init__(
        self,
        *,
        checkpoint: cp.Store,
        node_name: str,
        clock: Callable[[], datetime],
        max_events: int,
    ) -> None:
        self._checkpoint = checkpoint
        self._node_name = node_name
        self._clock = clock
        self._max_events = max_events
        # Insertion order is last-seen order: a repeated event moves to the end.
        self._events: dict[ev.EventKey, ev.Event] = {}
        # How many events in `_events` bear each name: a new event's name is checked against
        # it, not against a set of every name built anew (O(events) per event in a burst).
        self._names: collections.Counter[str] = collections.Counter()
        self._subscribers: list[EventCallback] = []
        self._similar: dict[tuple[str, str, str], _Similar] = {}

    def restore(self) -> None:
        """Reload the event history from the checkpoint. Raises CheckpointError."""
        for event in self._checkpoint.load_events():
            self._keep(event.key, event)
        self._evict()

    def record(self, pod: pods.Pod, type_: ev.EventType, reason: str, message: str, *,
               container: str = "") -> ev.Event:
        """Record one occurrence of an event about `pod`, or about its container named
        `container` (the event's involvedObject.fieldPath says which, as the kubelet's
        container events do); return the (aggregated) event."""
        path = ev.container_field_path(pod, container) if container else ""
        event = self._occur(str(pod.uid), type_, reason, message, lambda text, at: ev.new_event(
            pod, type_, reason, text, at=at, host=self._node_name, field_path=path),
            field_path=path)
        _log_event(event, {"pod": pod.full_name, "pod_uid": str(pod.uid)})
        self._persist(event, evicted=self._evict())
        self._notify(event)
        return event

    def record_node(self, type_: ev.EventType, reason: str, message: str) -> ev.Event:
        """Record one occurrence of an event about this node (image GC's FreeDiskSpaceFailed,
        node pressure...); aggregated and passed to subscribers like pod events, but kept in
        memory only: the checkpoint's events are pods'."""
        event = self._occur(self._node_name, type_, reason, message, lambda text, at: (
            ev.new_node_event(self._node_name, type_, reason, text, at=at)))
        _log_event(event, {"node": self._node_name})
        self._evict()
        self._notify(event)
        return event

    def _occur(self, uid: str, type_: ev.EventType, reason: str, message: str,
               new: Callable[[str, datetime], ev.Event], *, field_path: str = "") -> ev.Event:
        """Aggregate one occurrence into the history: a repeat of a known event, or `new`
        (message, time) with a unique name."""
        now = self._clock()
        message, key = self._aggregate(uid, type_, reason, message, now, field_path)
        previous = self._drop(key)
        if previous is not None:
            event = dataclasses.replace(previous.repeated(now), message=message)
        else:
            event = self._unique_name(new(message, now))
        self._keep(key, event)
        return event

    def _keep(self, key: ev.EventKey, event: ev.Event) -> None:
        self._drop(key)
        self._events[key] = event
        self._names[event.name] += 1

    def _drop(self, key: ev.EventKey) -> ev.Event | None:
        event = self._events.pop(key, None)
        if event is not None:
            self._names[event.name] -= 1
            if not self._names[event.name]:
                del self._names[event.name]
        return event

    def _aggregate(
        self, uid: str, type_: ev.EventType, reason: str, message: str, now: datetime,
        field_path: str,
    ) -> tuple[str, ev.EventKey]:
        """The message to record and the key to aggregate under (combining similar events:
        client-go's aggregator leaves the field path out of what makes events similar)."""
        similar_key = (uid, type_, reason)
        similar = self._similar.get(similar_key)
        if similar is None or now - similar.last > SIMILAR_WINDOW:
            similar = self._similar[similar_key] = _Similar(set(), now)
        similar.last = now
        if message in similar.messages or len(similar.messages) < SIMILAR_MAX:
            similar.messages.add(message)
            return message, ev.event_key(pods.PodUID(uid), type_, reason, message, field_path)
        combined = ev.event_key(pods.PodUID(uid), type_, reason, COMBINED_PREFIX, field_path)
        return COMBINED_PREFIX + message, combined

    def _unique_name(self, event: ev.Event) -> ev.Event:
        # Names are `<pod>.<hex nanoseconds>`; two events in the same microsecond (a fake clock,
        # or a coarse one) would collide, so bump the suffix until it is free.
        nanos = int(event.name.rsplit(".", 1)[1], 16)
        while event.name in self._names:
            nanos += 1
            event = dataclasses.replace(event, name=f"{event.pod_name}.{nanos:x}")
        return event

    def _evict(self) -> bool:
        """Drop the events seen longest ago beyond `max_events`; True if any were dropped."""
        excess = len(self._events) - self._max_events
        for key in list(self._events)[: max(excess, 0)]:
            self._drop(key)
        return excess > 0

    def _persist(self, event: ev.Event, *, evicted: bool) -> None:
        try:
            self._checkpoint.save_event(event)
            if evicted:
                self._checkpoint.prune_events(self._max_events)
        except cp.CheckpointError:
            log.exception("cannot checkpoint event %s", event.name)

    def _notify(self, event: ev.Event) -> None:
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:
                log.exception("event subscriber %r failed for event %s", callback, event.name)

    def events(self, pod_name: str | None = None, namespace: str | None = None) -> list[ev.Event]:
        """Events, oldest first by first occurrence, optionally of one pod name / namespace."""
        selected = [
            e
            for e in self._events.values()
            if (pod_name is None or e.pod_name == pod_name)
            and (namespace is None or e.namespace == namespace)
        ]
        return sorted(selected, key=lambda e: (e.first_timestamp, e.last_timestamp))

    def subscribe(self, callback: EventCallback) -> Callable[[], None]:
        """Call `callback(event)` after every recorded event; returns the unsubscriber."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe


def _log_event(event: ev.Event, about: dict[str, str]) -> None:
    """Log `event` with what it is about (`pod` and `pod_uid`, or `node`) as fields."""
    level = logging.WARNING if event.type == "Warning" else logging.INFO
    subject = f"pod {about['pod']}" if "pod" in about else f"node {about.get('node', '')}"
    log.log(
        level,
        "event %s %s for %s: %s (x%d)",
        event.type,
        event.reason,
        subject,
        event.message,
        event.count,
        extra={**about, "reason": event.reason, "event_type": event.type, "count": event.count},
    )
