"""Event posting: the recorder's events, sent to the Kubernetes API as v1 Events.

`EventSink` subscribes to the event recorder (`recording.EventRecorder.subscribe(on_event)`) and
only reads what it is given: it never acts on pods. It works like client-go's event broadcaster
(`tools/record`): a first occurrence is created (POST), a repeat patches `count`,
`lastTimestamp` and `message`; updates of one event coalesce while it waits for its turn; the
queue is bounded (the oldest events are dropped first).

Exceptions: none escape `run()`. As client-go's `recordToSink`: an event the API server refused
(any status answer: 403 or 404 for a namespace being deleted, 422...) is dropped at once, not
retried; only a request the server did not answer (transport errors) or asked to come back for
(429) is retried with a back-off, and dropped after `attempts` tries (counted in `dropped`). Events
go one at a time, so retrying a refused one would hold back every later event: measured in
Kubernetes' e2e suite, one event of a deleted namespace delayed all others by minutes.
"""

from __future__ import annotations

import asyncio
import logging

from nodelet.adapters import kube
from nodelet.helpers import backoff
from nodelet.model.core import events as ev

log = logging.getLogger(__name__)


class EventSink:
    """Sends recorded events to the API: a first occurrence is created (POST), a repeat patches
    `count`, `lastTimestamp` and `message`, as client-go's event broadcaster does. Updates of
    one event coalesce while it waits for its turn; at most `max_pending` events wait (the
    oldest are dropped, like client-go's bounded queue)."""

    def __init__(self, *, client: kube.KubeClient, max_pending: int = 1000,
                 retry: float = 0.5, retry_max: float = 30.0, attempts: int = 12) -> None:
        self._client = client
        self._max_pending = max_pending
        self._pending: dict[str, ev.Event] = {}
        self._created: set[str] = set()
        self._wake = asyncio.Event()
        self._retry = backoff.Backoff(retry, retry_max)
        self._attempts = attempts
        self.sent = 0
        self.dropped = 0

    def on_event(self, event: ev.Event) -> None:
        """Recorder subscriber: queue `event`, replacing a queued older version of it."""
        self._pending.pop(event.name, None)
        self._pending[event.name] = event
        while len(self._pending) > self._max_pending:
            self._pending.pop(next(iter(self._pending)))
            self.dropped += 1
        self._wake.set()

    def idle(self) -> bool:
        """True when no event waits to be sent."""
        return not self._pending

    async def run(self) -> None:
        """Send queued events, oldest first, one at a time; run as a supervised task."""
        while True:
            self._wake.clear()
            while self._pending:
                name = next(iter(self._pending))
                event = self._pending.pop(name)
                await self._deliver(event)
            await self._wake.wait()

    async def _deliver(self, event: ev.Event) -> None:
        for _ in range(self._attempts):
            try:
                await self._send(event)
            except kube.KubeError as exc:
                if not _retryable(exc):
                    log.info("event %s refused, not retried: %s", event.name, exc)
                    self.dropped += 1
                    return
                delay = self._retry.next_delay()
                log.warning("cannot send event %s, retrying in %.1fs: %s", event.name, delay, exc)
                await asyncio.sleep(delay)
                newer = self._pending.pop(event.name, None)
                event = newer or event
                continue
            self._retry.reset()
            self.sent += 1
            return
        log.error("dropping event %s after %d attempts", event.name, self._attempts)
        self.dropped += 1

    async def _send(self, event: ev.Event) -> None:
        if event.name not in self._created and event.count == 1:
            try:
                await self._client.create_event(event.namespace, ev.event_to_api(event))
            except kube.AlreadyExists:
                await self._patch(event)
        else:
            try:
                await self._patch(event)
            except kube.NotFound:
                await self._client.create_event(event.namespace, ev.event_to_api(event))
        self._created.add(event.name)

    async def _patch(self, event: ev.Event) -> None:
        body = ev.event_to_api(event)
        patch = {k: body[k] for k in ("count", "lastTimestamp", "message")}
        await self._client.patch_event(event.namespace, event.name, patch)


def _retryable(exc: kube.KubeError) -> bool:
    """No answer (transport error), or 429: worth another try; any other status is final."""
    return exc.status == 0 or isinstance(exc, kube.TooManyRequests)
