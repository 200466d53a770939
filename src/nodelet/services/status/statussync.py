"""Status sync: keeps the API copy of every API pod's status equal to the status manager's.

It subscribes to the status manager and works like the kubelet's status manager sync
(`pkg/kubelet/status/status_manager.go`), with fewer calls:

- **coalescing**: per pod only the newest status is kept; a newer one replaces an unsent one.
  A sender first takes a rate-limiter token (`KubeClient.reserve`) and only then reads the
  newest status, so the time spent waiting for QPS is time in which updates merge;
- **no GET when the cache is current**: the API copy is the newer (by resourceVersion) of the
  pod watch's object and the last PATCH answer; a GET only happens when there is none or after
  a conflict;
- **only what changed**: `model.core.statuspatch.status_patch` (pure) builds a strategic merge patch
  of the fields that differ from the API copy, owned conditions only, and no call at all is made
  when nothing does;
- **retries** after failures with a per-pod doubling back-off (429: the server's Retry-After);
  a 409 (UID precondition) re-reads the pod and drops it when it was replaced;
- **reconciliation**: every `resync_period` the API copies are compared with the statuses sent
  and pods that drifted (someone else wrote them) are sent again;
- a pod whose API phase is terminal (Succeeded/Failed) is never moved back to a running phase
  (`status_patch` returns no patch);
- **static pods** go to their mirror pod, as the kubelet's status manager translates a static
  pod's UID to its mirror pod's (`mirror_uid`); without a mirror pod the status waits, and
  `retarget(uid)` (the mirror pod was created or replaced) sends it again in full.

Exceptions: none escape; API errors are logged and retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nodelet.adapters import kube
from nodelet.helpers import backoff, tasks
from nodelet.model.core import apijson, pods, statuspatch
from nodelet.model.core import status as st

log = logging.getLogger(__name__)



def _rv(obj: apijson.Obj | None) -> int:
    raw = kube.resource_version(obj) if obj is not None else ""
    # resourceVersions are opaque to clients, but every server we talk to (etcd revisions and
    # the test server) uses integers; a non-integer never counts as newer.
    return int(raw) if raw.isdigit() else -1


@dataclass(frozen=True)
class StatusSyncSettings:
    """Timing of the status sync (seconds)."""

    # Compare API copies with what was sent and resend drifted ones (kubelet: 10 s).
    resync_period: float = 10.0
    # Per-pod retry back-off after a failed PATCH: initial and cap.
    retry: float = 0.5
    retry_max: float = 30.0
    # PATCHes in flight at once (one per pod at most).
    senders: int = 4


@dataclass
class _PodState:
    pod: pods.Pod
    status: st.PodStatus
    version: int = 0
    sent: int = 0  # version last confirmed by the API
    retry: backoff.Backoff = field(default_factory=lambda: backoff.Backoff(0.5, 30.0))
    not_before: float = 0.0  # monotonic


class StatusSync:
    """Subscribe `on_status` to the status manager; run `run()` as a supervised task."""

    def __init__(
        self,
        *,
        client: kube.KubeClient,
        api_object: Callable[[pods.PodUID], apijson.Obj | None],
        settings: StatusSyncSettings | None = None,
        mirror_uid: Callable[[pods.Pod], str | None] | None = None,
    ) -> None:
        """`api_object(uid)`: the pod as the watch saw it; `mirror_uid(pod)`: the API UID of
        a static pod's mirror pod, None while it has none (without `mirror_uid` static pods
        are not synced at all)."""
        self._client = client
        self._api_object = api_object
        self._mirror_uid = mirror_uid
        self._settings = settings or StatusSyncSettings()
        self._pods: dict[pods.PodUID, _PodState] = {}
        self._removed: set[pods.PodUID] = set()  # deleted from the API, worker not done
        self._answers: dict[pods.PodUID, apijson.Obj] = {}  # last PATCH/GET answer per pod
        self._dirty: dict[pods.PodUID, None] = {}  # ordered set: oldest first
        self._inflight: set[pods.PodUID] = set()
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()  # set whenever a send ends or a pod is forgotten
        self.patches = 0
        self.gets = 0
        self.dropped = 0  # statuses replaced before they were sent (coalesced)

    # -- inputs -----------------------------------------------------------------------------

    def on_status(self, pod: pods.Pod, status: st.PodStatus) -> None:
        """Status manager subscriber: remember the newest status of an API or static pod."""
        if pod.source != "api" and (self._mirror_uid is None or not pod.is_static):
            return
        if pod.uid in self._removed:
            return  # its API object is gone: a GET or PATCH would only be refused
        state = self._pods.get(pod.uid)
        if state is None:
            s = self._settings
            state = self._pods[pod.uid] = _PodState(
                pod, status, retry=backoff.Backoff(s.retry, s.retry_max))
        elif state.version > state.sent and pod.uid not in self._inflight:
            self.dropped += 1
        state.pod, state.status = pod, status
        state.version += 1
        self._mark(pod.uid)

    def removed(self, uid: pods.PodUID) -> None:
        """The pod was deleted from the API (its watch said so): stop syncing it, and ignore
        the statuses its worker still makes while it finishes, until `done(uid)`. (Sent, they
        would cost a GET that the Node authorizer refuses, 403, for a pod it no longer has.)"""
        if uid in self._pods:
            self._removed.add(uid)
        self.forget(uid)

    def done(self, uid: pods.PodUID) -> None:
        """The pod's worker is done: no more statuses come for `uid`."""
        self._removed.discard(uid)

    def forget(self, uid: pods.PodUID) -> None:
        """The pod is gone from the API: stop syncing it."""
        self._pods.pop(uid, None)
        self._answers.pop(uid, None)
        self._dirty.pop(uid, None)
        self._progress.set()

    def retarget(self, uid: pods.PodUID) -> None:
        """The API object that pod `uid`'s status goes to was created or replaced (a mirror
        pod): send the newest status again, whole and at once."""
        state = self._pods.get(uid)
        if state is None:
            return
        self._answers.pop(uid, None)
        state.sent = min(state.sent, state.version - 1)
        state.not_before = 0.0
        state.retry.reset()
        self._mark(uid)

    def in_sync(self, uid: pods.PodUID) -> bool:
        """True when the newest status of `uid` reached the API (or there is none)."""
        state = self._pods.get(uid)
        return state is None or (state.sent >= state.version and uid not in self._inflight)

    def api_phase(self, uid: pods.PodUID) -> str | None:
        """The phase of API pod `uid` as last seen (watch or PATCH answer); None: unknown."""
        found = self._api_copy(uid, uid)
        return None if found is None else (found.get("status") or {}).get("phase")

    async def wait_in_sync(self, uid: pods.PodUID) -> None:
        """Return once `in_sync(uid)` (bound it with `asyncio.timeout`)."""
        while not self.in_sync(uid):
            self._progress.clear()
            await self._progress.wait()

    def pending(self) -> int:
        return sum(1 for s in self._pods.values() if s.sent < s.version)

    def _mark(self, uid: pods.PodUID) -> None:
        self._dirty[uid] = None
        self._wake.set()

    # -- the loops --------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        senders = [loop.create_task(self._sender(), name=f"status-sender-{n}")
                   for n in range(self._settings.senders)]
        try:
            while True:
                await asyncio.sleep(self._settings.resync_period)
                self.reconcile()
        finally:
            for task in senders:
                task.cancel()
            await asyncio.gather(*senders, return_exceptions=True)

    def reconcile(self) -> int:
        """Mark pods whose API copy differs from the last status sent; returns how many."""
        drifted = 0
        for uid, state in self._pods.items():
            target = self._target(state.pod)
            if uid in self._dirty or uid in self._inflight or target is None:
                continue
            api = self._api_copy(uid, target)
            if api is not None and self._patch_for(state, api) is not None:
                log.info("status of pod %s drifted in the API; sending it again",
                         state.pod.full_name)
                state.sent = min(state.sent, state.version - 1)
                self._mark(uid)
                drifted += 1
        return drifted

    async def _sender(self) -> None:
        while True:
            uid = await self._next()
            # Token first, then the newest status: the wait is when updates coalesce.
            await self._client.reserve()
            state = self._pods.get(uid)
            if state is None:
                continue
            self._inflight.add(uid)
            try:
                await self._send(uid, state)
            except Exception:  # a sender must outlive any one pod's trouble
                log.exception("unexpected error syncing the status of pod %s", state.pod.full_name)
                self._retry_later(state, state.retry.next_delay())
            finally:
                self._inflight.discard(uid)
                self._progress.set()
                if uid in self._pods and self._pods[uid].sent < self._pods[uid].version:
                    self._mark(uid)

    async def _next(self) -> pods.PodUID:
        while True:
            now = time.monotonic()
            soonest: float | None = None
            for uid in list(self._dirty):
                state = self._pods.get(uid)
                if state is None or state.sent >= state.version or self._target(state.pod) is None:
                    self._dirty.pop(uid, None)  # (no mirror pod yet: `retarget` marks it again)
                    continue
                if uid in self._inflight:
                    continue
                if state.not_before <= now:
                    self._dirty.pop(uid, None)
                    return uid
                soonest = min(soonest or state.not_before, state.not_before)
            self._wake.clear()
            await tasks.wait_event(self._wake,
                                   None if soonest is None else max(0.0, soonest - now))

    def _target(self, pod: pods.Pod) -> str | None:
        """The API UID that `pod`'s status is written to: its own, or its mirror pod's."""
        if pod.source == "api":
            return pod.uid
        return self._mirror_uid(pod) if self._mirror_uid is not None else None

    def _api_copy(self, uid: pods.PodUID, target: str) -> apijson.Obj | None:
        watched, answered = self._api_object(pods.PodUID(target)), self._answers.get(uid)
        if answered is not None and answered.get("metadata", {}).get("uid") != target:
            answered = None
        return answered if _rv(answered) > _rv(watched) else watched

    def _patch_for(self, state: _PodState, api: apijson.Obj) -> apijson.Obj | None:
        return statuspatch.status_patch(api.get("status") or {}, st.to_api(state.status))

    async def _send(self, uid: pods.PodUID, state: _PodState) -> None:
        version, pod = state.version, state.pod
        target = self._target(pod)
        if target is None:
            return  # a static pod without a mirror pod yet
        try:
            api = self._api_copy(uid, target)
            if api is None or api.get("metadata", {}).get("uid") != target:
                api = await self._get(state, target)
                if api is None:
                    return
            patch = self._patch_for(state, api)
            if patch is not None:
                answer = await self._client.patch_pod_status(pod.namespace, pod.name, target,
                                                             patch)
                self.patches += 1
                self._answers[uid] = answer
        except kube.Conflict:
            # The UID precondition failed or the object moved: read it again and retry.
            self._answers.pop(uid, None)
            try:
                if await self._get(state, target) is not None:
                    self._retry_later(state, 0.0)
            except kube.KubeError as exc:
                self._retry_later(state, state.retry.next_delay())
                log.warning("cannot read pod %s after a conflict: %s", pod.full_name, exc)
            return
        except kube.NotFound:
            self._lost(state)
            return
        except kube.KubeError as exc:
            delay = exc.retry_after if isinstance(exc, kube.TooManyRequests) and \
                exc.retry_after else state.retry.next_delay()
            log.warning("cannot update status of pod %s, retrying in %.1fs: %s",
                        pod.full_name, delay, exc)
            self._retry_later(state, delay)
            return
        state.sent = max(state.sent, version)
        state.retry.reset()

    def _retry_later(self, state: _PodState, delay: float) -> None:
        state.not_before = time.monotonic() + delay

    async def _get(self, state: _PodState, target: str) -> apijson.Obj | None:
        """The pod as the API has it now; None when it is gone or replaced (`_lost`)."""
        pod = state.pod
        self.gets += 1
        try:
            current = await self._client.get_pod(pod.namespace, pod.name)
        except kube.NotFound:
            current = None
        if current is None or current.get("metadata", {}).get("uid") != target:
            self._lost(state)
            return None
        self._answers[pod.uid] = current
        return current

    def _lost(self, state: _PodState) -> None:
        """The API object is gone or replaced. An API pod's status is dropped for good; a
        static pod's waits for its new mirror pod (`retarget`), re-checked after a back-off."""
        pod = state.pod
        self._answers.pop(pod.uid, None)
        if pod.source == "api":
            log.info("pod %s (%s) was deleted or replaced in the API; dropping its status",
                     pod.full_name, pod.uid)
            self.forget(pod.uid)
            return
        log.info("the mirror pod of static pod %s is gone or replaced; its status waits for "
                 "the new one", pod.full_name)
        self._retry_later(state, state.retry.next_delay())
