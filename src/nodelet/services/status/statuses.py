"""The status manager: the only writer of pod status (kubelet `pkg/kubelet/status`).

Pod workers hand it freshly generated statuses; it settles the transition times against the
previous status (`transitions.merge_status`: a condition's `lastTransitionTime` moves only when
its `status` flips), drops statuses identical to the cached one, numbers the rest with a per-pod
version that only grows, remembers transition times and first-ready times in the checkpoint, and
tells subscribers (HTTP API, metrics, Kubernetes API sync) — sinks only read.

After a restart `restore()` reloads the checkpoint, so a pod whose conditions did not change
keeps its earlier `lastTransitionTime`s and first-ready times.

The checkpoint is a `checkpoint.Store`: in the agent, the write-behind writer
(`services.status.checkpointing`), whose writes never block and are retried until they succeed; in
tests and tools possibly a plain `checkpoint.Checkpoint`, written synchronously.

Exceptions: `restore()` lets `checkpoint.CheckpointError` through (the agent cannot keep its
promises about transition times without it). Write failures while running are logged, not
raised: a status must still be served when the disk is full. Subscriber exceptions are logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from nodelet.adapters import checkpoint as cp
from nodelet.model.core import pods as podmodel
from nodelet.model.core import status as st
from nodelet.model.core import transitions

log = logging.getLogger(__name__)

StatusCallback = Callable[[podmodel.Pod, st.PodStatus], None]


@dataclass(frozen=True)
class _Entry:
    pod: podmodel.Pod
    status: st.PodStatus
    version: int


@dataclass(frozen=True)
class _FirstReady:
    ready_to_start: datetime | None = None
    ready: datetime | None = None


class StatusManager:
    """Versioned cache of pod statuses with checkpointed transition times.

    Used from one thread (the event loop); every method is synchronous, and quick when the
    checkpoint is the write-behind writer.
    """

    def __init__(self, *, checkpoint: cp.Store, clock: Callable[[], datetime]) -> None:
        self._checkpoint = checkpoint
        self._clock = clock
        self._entries: dict[podmodel.PodUID, _Entry] = {}
        self._restored: dict[podmodel.PodUID, cp.StoredPodStatus] = {}
        self._first: dict[podmodel.PodUID, _FirstReady] = {}
        self._versions: dict[podmodel.PodUID, int] = {}
        self._subscribers: list[StatusCallback] = []

    def restore(self) -> None:
        """Reload remembered transition and first-ready times from the checkpoint.

        Call once at start, before the first `set_status`. Raises CheckpointError.
        """
        self._restored = self._checkpoint.load_pod_statuses()
        for uid, stored in self._restored.items():
            self._first[uid] = _FirstReady(stored.first_ready_to_start, stored.first_ready)
        log.info("restored statuses of %d pods from %s", len(self._restored), self._checkpoint.path)

    def restored_uids(self) -> set[podmodel.PodUID]:
        """UIDs remembered by the checkpoint and not yet seen again (candidates to `forget`)."""
        return set(self._restored) - set(self._entries)

    def set_status(self, pod: podmodel.Pod, status: st.PodStatus) -> bool:
        """Store `status` for `pod`; return False when it equals the cached one (dropped).

        Transition times and start time on `status` are settled by `merge_status` against the
        cached status (or the one restored from the checkpoint). A stored status gets version
        `version(uid) + 1` and is passed to every subscriber.
        """
        entry = self._entries.get(pod.uid)
        old = entry.status if entry is not None else self._restored_status(pod.uid)
        status = transitions.observed(status, pod.generation)
        merged = transitions.merge_status(old, status, now=self._clock())
        if entry is not None and transitions.statuses_equal(entry.status, merged):
            log.debug("ignoring same status for pod %s", pod.full_name)
            return False
        version = self._versions.get(pod.uid, 0) + 1
        self._versions[pod.uid] = version
        self._entries[pod.uid] = _Entry(pod, merged, version)
        self._note_first_ready(pod.uid, merged)
        if not transitions.transitions_equal(old, merged):
            self._persist(pod, merged)
        self._restored.pop(pod.uid, None)
        self._notify(pod, merged)
        return True

    def _restored_status(self, uid: podmodel.PodUID) -> st.PodStatus | None:
        stored = self._restored.get(uid)
        return stored.to_status() if stored is not None else None

    def _note_first_ready(self, uid: podmodel.PodUID, status: st.PodStatus) -> None:
        first = self._first.get(uid, _FirstReady())
        self._first[uid] = _FirstReady(
            ready_to_start=first.ready_to_start or transitions.ready_to_start_since(status),
            ready=first.ready or transitions.ready_since(status),
        )

    def _persist(self, pod: podmodel.Pod, status: st.PodStatus) -> None:
        try:
            self._checkpoint.save_pod_status(pod.uid, pod.name, pod.namespace, status)
        except cp.CheckpointError:
            log.exception("cannot checkpoint the status of pod %s", pod.full_name)

    def _notify(self, pod: podmodel.Pod, status: st.PodStatus) -> None:
        for callback in list(self._subscribers):
            try:
                callback(pod, status)
            except Exception:
                log.exception("status subscriber %r failed for pod %s", callback, pod.full_name)

    def get(self, uid: podmodel.PodUID) -> st.PodStatus | None:
        """The current status of pod `uid`, None if none was set since start."""
        entry = self._entries.get(uid)
        return entry.status if entry is not None else None

    def terminal(self, uid: podmodel.PodUID) -> bool:
        """Whether pod `uid`'s current status is in a terminal phase (Succeeded, Failed)."""
        current = self.get(uid)
        return current is not None and current.phase in ("Succeeded", "Failed")

    def last_known(self, uid: podmodel.PodUID) -> st.PodStatus | None:
        """The current status, or else what the checkpoint remembers of it (after a restart:
        conditions with their transition times, start time, phase, reason and message)."""
        return self.get(uid) or self._restored_status(uid)

    def version(self, uid: podmodel.PodUID) -> int:
        """How many statuses were stored for `uid` (0: none); never decreases, even on `forget`."""
        return self._versions.get(uid, 0)

    def first_ready_to_start(self, uid: podmodel.PodUID) -> datetime | None:
        """When PodReadyToStartContainers (or PodHasNetwork) first turned True for `uid`."""
        return self._first.get(uid, _FirstReady()).ready_to_start

    def first_ready(self, uid: podmodel.PodUID) -> datetime | None:
        """When Ready first turned True for `uid`."""
        return self._first.get(uid, _FirstReady()).ready

    def pods(self) -> list[tuple[podmodel.Pod, st.PodStatus]]:
        """Every pod with a status, in the order their first status was set."""
        return [(e.pod, e.status) for e in self._entries.values()]

    def forget(self, uid: podmodel.PodUID) -> None:
        """The pod is gone: drop its cached status, first-ready times and checkpoint row."""
        self._entries.pop(uid, None)
        self._restored.pop(uid, None)
        self._first.pop(uid, None)
        try:
            self._checkpoint.forget_pod(uid)
        except cp.CheckpointError:
            log.exception("cannot forget pod %s in the checkpoint", uid)

    def subscribe(self, callback: StatusCallback) -> Callable[[], None]:
        """Call `callback(pod, status)` after every stored status; returns the unsubscriber."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe
