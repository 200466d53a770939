"""Runtime events: the runtime's event stream wakes a pod's worker the moment a process exits.

`RuntimeEvents.run` keeps one subscription: to CRI's GetContainerEvents where the runtime
offers it (adapters.cri.events; containerd 1.7+), else to containerd's own event service for
the `k8s.io` namespace (adapters.events; containerd 1.6) — `FirstSupported` picks. What the
events mean and why only some count: `model.core.runtimeevents`. For every event about a pod's
sandbox or container it

1. finds the pod: the relister's cache maps the ID to the pod UID; an exit of an ID the cache
   does not know yet (created a moment ago) is looked up in CRI by its labels;
2. refreshes the pod (`Relister.refresh_pod`), again with a short back-off until CRI shows the
   event (containerd's CRI plugin learns about the exit from the same stream, tens of ms later;
   `event_settle_timeout` bounds this);
3. wakes the pod's worker (`on_change`), and for an OOM kill tells `on_oom` (a Warning event).

Events of one pod are handled one batch at a time; events arriving meanwhile join the next batch.

The relist stays as the safety net. Its period (`period()`) is `SyncSettings.relist_period`
(300 s, as the kubelet's with Evented PLEG) while the subscription is live, and
`polling_relist_period` (1 s) otherwise and while the runtime reports its network not ready
(the relist reads the runtime's status; no event says when the CNI config appears). After
every new subscription, and when one is lost, the relister is kicked: a full relist then
catches whatever changed while no events came (a containerd restart, the back-off). A lost
subscription is re-established with a back-off (`events_backoff`, doubling to
`events_backoff_max`); a runtime without the event service (`EventsUnsupported`) is asked
again at the cap, and is polled meanwhile.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol

from nodelet import settings as settings_
from nodelet.adapters.cri import client as cri
from nodelet.adapters.events import client as events_client
from nodelet.helpers import backoff as backoff_mod
from nodelet.helpers import tasks
from nodelet.model.core import health, pods, runtime
from nodelet.model.core import runtimeevents as rev
from nodelet.services.pleg import relisting

log = logging.getLogger(__name__)

# First delay of the settle back-off (doubling, capped at _SETTLE_MAX_DELAY).
_SETTLE_FIRST_DELAY = 0.01
_SETTLE_MAX_DELAY = 0.5


class EventSource(Protocol):
    """The seam to containerd's event service (adapters.events.client.EventsClient)."""

    def events(
        self, *, namespace: str, topics: tuple[str, ...], confirm_timeout: float,
        on_subscribed: Callable[[], None],
    ) -> AsyncIterator[rev.RuntimeEvent]: ...


class FirstSupported:
    """The first of `sources` the runtime offers (an EventSource): CRI's GetContainerEvents,
    else containerd's own event service. A source that answers EventsUnsupported is dropped
    for good; the last one's errors are the caller's."""

    def __init__(self, *sources: tuple[str, EventSource]) -> None:
        self._sources = list(sources)

    @property
    def name(self) -> str:
        """The source in use (or tried first): "cri" or "containerd"."""
        return self._sources[0][0]

    async def events(
        self, *, namespace: str, topics: tuple[str, ...], confirm_timeout: float,
        on_subscribed: Callable[[], None],
    ) -> AsyncIterator[rev.RuntimeEvent]:
        while True:
            name, source = self._sources[0]
            try:
                async for event in source.events(namespace=namespace, topics=topics,
                                                 confirm_timeout=confirm_timeout,
                                                 on_subscribed=on_subscribed):
                    yield event
            except events_client.EventsUnsupported as exc:
                if len(self._sources) == 1:
                    raise
                self._sources.pop(0)
                log.info("runtime events: %s events not offered (%s); using %s's", name, exc,
                         self.name)


class LabelReader(Protocol):
    """The seam to CRI for IDs the relister's cache does not know (cri.RuntimeClient)."""

    async def labels_of(self, object_id: str) -> Mapping[str, str] | None: ...


class State(enum.Enum):
    CONNECTING = "connecting"
    LIVE = "live"
    DOWN = "down"
    UNSUPPORTED = "unsupported"


class RuntimeEvents:
    """The subscription and the reactions to its events; one instance for the agent."""

    def __init__(
        self,
        *,
        source: EventSource,
        client: LabelReader,
        relister: relisting.Relister,
        group: tasks.TaskGroup,
        settings: settings_.SyncSettings,
        on_change: Callable[[pods.PodUID], None],
        on_oom: Callable[[pods.PodUID, str], None],
    ) -> None:
        self._source = source
        self._client = client
        self._relister = relister
        self._group = group
        self._settings = settings
        self._on_change = on_change
        self._on_oom = on_oom
        self._backoff = backoff_mod.Backoff(settings.events_backoff, settings.events_backoff_max)
        self._queued: dict[pods.PodUID, list[rev.RuntimeEvent]] = {}
        self.state = State.CONNECTING
        self.error = ""
        self.subscriptions = 0  # how many subscriptions went live (1 + re-subscriptions)

    @property
    def live(self) -> bool:
        return self.state is State.LIVE

    @property
    def source_name(self) -> str:
        """Whose events: "cri" (GetContainerEvents) or "containerd" (its event service)."""
        return str(getattr(self._source, "name", "runtime"))

    def period(self) -> float:
        """The relist period now: long while events arrive, polling otherwise — and while the
        runtime's network is not ready, which no event reports (the relist reads it)."""
        s = self._settings
        if self.live and not self._relister.network_problem:
            return s.relist_period
        return s.polling_relist_period

    def health(self) -> health.HealthCheck:
        """Live, being subscribed for the first time, or a runtime without the service
        (polled: healthy, and said so); down after a subscription was lost, with the
        reason."""
        if self.state is State.UNSUPPORTED:
            return health.HealthCheck("runtime-events", True, f"not offered by the runtime, "
                                      f"polling every {self.period():g}s: {self.error}")
        if self.live:
            return health.HealthCheck("runtime-events", True, "")
        if not self.error:  # the first subscription is being made: polled meanwhile
            return health.HealthCheck("runtime-events", True, f"subscribing, polling every "
                                      f"{self.period():g}s meanwhile")
        return health.HealthCheck("runtime-events", False, self.error)

    async def run(self) -> None:
        """Subscribe, react, and subscribe again after a back-off, forever."""
        while True:
            try:
                async for event in self._source.events(
                        namespace=rev.CRI_NAMESPACE, topics=rev.TOPICS,
                        confirm_timeout=self._settings.events_confirm_timeout,
                        on_subscribed=self._subscribed):
                    self._accept(event)
            except events_client.EventsError as exc:
                self._lost(exc)
            await asyncio.sleep(self._retry_delay())

    def _subscribed(self) -> None:
        self.state, self.error = State.LIVE, ""
        self.subscriptions += 1
        self._backoff.reset()
        log.info("runtime events: subscribed (%d) to %s events; relisting once, then every "
                 "%gs", self.subscriptions, self.source_name, self.period())
        self._relister.kick()  # whatever changed before the subscription was live

    def _lost(self, exc: events_client.EventsError) -> None:
        was_live = self.live
        unsupported = isinstance(exc, events_client.EventsUnsupported)
        self.state = State.UNSUPPORTED if unsupported else State.DOWN
        self.error = str(exc)
        if was_live or self.subscriptions == 0:
            log.warning("runtime events: %s; relisting every %gs meanwhile", exc, self.period())
        if was_live:
            self._relister.kick()  # poll now, not at the end of the long period

    def _retry_delay(self) -> float:
        if self.state is State.UNSUPPORTED:
            return self._backoff.cap
        return self._backoff.next_delay()

    # -- reacting to one event ----------------------------------------------------------------

    def _accept(self, event: rev.RuntimeEvent) -> None:
        if rev.concerns_pod(event):
            self._group.spawn(f"runtime-event:{event.object_id[:12]}", self._react(event))

    async def _react(self, event: rev.RuntimeEvent) -> None:
        try:
            uid = await self._owner(event)
        except cri.CriError as exc:  # the next relist finds the change
            log.warning("runtime event %s for %s: pod unknown: %s", event.kind.value,
                        event.object_id, exc)
            return
        if uid is None:
            return
        if event.kind is rev.Kind.TASK_OOM:
            await self._report_oom(uid, event)
        queued = self._queued.setdefault(uid, [])
        queued.append(event)
        if len(queued) == 1:  # else the pod's running reaction takes it in its next batch
            await self._react_for(uid, queued)

    async def _report_oom(self, uid: pods.PodUID, event: rev.RuntimeEvent) -> None:
        """Tell `on_oom`, naming the container (a container that OOMs at once may not be in
        the cache yet: then the pod is read first); not for a sandbox (see `rev.is_sandbox`)."""
        state = self._relister.pod(uid)
        if not rev.container_name(event, state) and not rev.is_sandbox(event, state):
            try:
                state = await self._relister.refresh_pod(uid)
            except cri.CriError as exc:
                log.warning("OOM in pod %s: cannot read the pod: %s", uid, exc)
        if not rev.is_sandbox(event, state):
            self._on_oom(uid, rev.container_name(event, state))

    async def _owner(self, event: rev.RuntimeEvent) -> pods.PodUID | None:
        uid = self._relister.owner(event.object_id)
        if uid is not None or event.kind is rev.Kind.CONTAINER_DELETE:
            return uid  # a deletion of an ID the cache does not hold changes nothing it holds
        labels = await self._client.labels_of(event.object_id)
        value = (labels or {}).get(runtime.LABEL_POD_UID, "")
        return pods.PodUID(value) if value else None

    async def _react_for(self, uid: pods.PodUID, queued: list[rev.RuntimeEvent]) -> None:
        """Refresh the pod until it shows every queued event, then wake its worker."""
        try:
            while queued:
                batch = list(queued)
                await self._refresh_until_settled(uid, batch)
                del queued[:len(batch)]
                log.debug("runtime events %s: waking pod %s",
                          [e.kind.value for e in batch], uid)
                self._on_change(uid)
        except cri.CriError as exc:  # the next relist (kicked or periodic) finds the change
            log.warning("runtime event for pod %s: refresh failed: %s", uid, exc)
            self._on_change(uid)
        finally:
            self._queued.pop(uid, None)

    async def _refresh_until_settled(
        self, uid: pods.PodUID, batch: list[rev.RuntimeEvent]
    ) -> None:
        deadline = time.monotonic() + self._settings.event_settle_timeout
        delay = _SETTLE_FIRST_DELAY
        while True:
            state = await self._relister.refresh_pod(uid)
            if all(rev.settled(e, state) for e in batch) or time.monotonic() >= deadline:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, _SETTLE_MAX_DELAY)
