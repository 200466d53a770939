"""Pod workers: one supervised asyncio task per pod UID.

A worker sleeps until it is woken (the pod changed, its runtime state changed, a probe's
result changed, one of the pod's own timers expired — `PodWork.timers`, see docs/timing.md),
then runs one sync — so the syncs of one pod never overlap, while different pods
sync concurrently. When the pod leaves the desired set the worker terminates it (grace period,
sandbox removal, final status) and then ends; the pod is dropped from the status manager.

Static pods of one full name run one at a time, as the kubelet's pod workers allow them
(allowStaticPodStart): an edited manifest is a new pod (a new UID), which starts only once the
old one has terminated, so the two never hold the same host ports or names at once; several
waiting start in the order they came. `on_start(pod)` hears that a pod's worker started it,
right before its first sync (cluster mode makes a static pod's mirror pod then).

A failed sync is retried after `SyncSettings.retry_period` (jittered). The steps of a sync
record their own events (FailedCreatePodSandBox, FailedMount...); an error no step
recorded — the runtime could not be read, or a bug in nodelet — is a `FailedSync` Warning
event, as the kubelet's pod workers record one when a pod's status cannot be determined, so a
pod that waits says why in the API; each retry repeats it (the recorder counts the repeats).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from nodelet import settings as settings_mod
from nodelet.adapters.cri import client as cri
from nodelet.helpers import backoff, tasks
from nodelet.model.core import podactions, pods, terminations
from nodelet.services.podwork import syncing
from nodelet.services.status import recording

log = logging.getLogger(__name__)


class UnaskedCancellation(Exception):
    """A pod's sync ended in a cancellation that neither its termination nor the agent's
    shutdown asked for."""


# The kubelet's events.FailedSync.
FAILED_SYNC = "FailedSync"


@dataclass
class _Worker:
    pod: pods.Pod
    work: syncing.PodWork = field(default_factory=syncing.PodWork)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    terminating: bool = False
    task: asyncio.Task[None] | None = None
    # The sync in flight, if any: cancelled when the pod is to be terminated, so a deleted
    # pod does not wait for a long image pull or sandbox creation to finish.
    sync_task: asyncio.Task[float | None] | None = None
    last_sync: float = 0.0
    # Allowed to start (a static pod waits for the one of its full name before it).
    started: bool = False


class PodWorkers:
    def __init__(
        self,
        *,
        syncer: syncing.PodSyncer,
        recorder: recording.EventRecorder,
        group: tasks.TaskGroup,
        sync: settings_mod.SyncSettings,
        on_gone: Callable[[pods.PodUID], None],
        on_start: Callable[[pods.Pod], None] = lambda pod: None,
        deletion_clock: Callable[[], datetime] | None = None,
    ) -> None:
        """`deletion_clock` (the PodTerminationSLI gate): a pod that leaves the desired set
        without a deletionTimestamp (a static pod whose manifest went away) is marked deleted
        at its time, as the API server marks a graceful deletion."""
        self._deletion_clock = deletion_clock
        self._syncer = syncer
        self._recorder = recorder
        self._group = group
        self._sync = sync
        self._on_gone = on_gone
        self._on_start = on_start
        self._workers: dict[pods.PodUID, _Worker] = {}
        self._desired: dict[pods.PodUID, pods.Pod] = {}
        # Static pods by full name: the one started, and the ones waiting in arrival order.
        self._started_static: dict[str, pods.PodUID] = {}
        self._waiting_static: dict[str, list[pods.PodUID]] = {}

    # -- what the sources say ----------------------------------------------------------------

    def update(self, desired: Mapping[pods.PodUID, pods.Pod]) -> None:
        """The complete desired set of pods: start new ones, terminate the ones that left."""
        self._desired = dict(desired)
        for uid, pod in desired.items():
            worker = self._workers.get(uid)
            if worker is None:
                self._start(pod)
            # `is` first: an unchanged pod is the same object (ApiPodSource keeps it), and
            # comparing two equal Pods field by field costs ~4 µs.
            elif worker.terminating:
                # Back while terminating (a static pod's manifest removed and written
                # again): it starts again once terminated (`_run`), keeping its containers.
                worker.work.restart_requested = True
            elif worker.pod is not pod and worker.pod != pod:
                worker.pod = pod
                worker.wake.set()
        for uid, worker in self._workers.items():
            if uid not in desired and not worker.terminating:
                self._terminate(worker)

    def terminate_orphan(self, pod: pods.Pod) -> None:
        """A pod found in the runtime that no source wants (left from an earlier run)."""
        if pod.uid not in self._workers and pod.uid not in self._desired:
            log.info("terminating orphaned pod %s (%s)", pod.full_name, pod.uid)
            self._terminate(self._start(pod))

    def fail(self, uid: pods.PodUID, reason: str, message: str, *,
             grace: float | None = None) -> bool:
        """Fail the pod for good (eviction): it turns Failed with `reason` and `message` and is
        stopped, its containers getting `grace` seconds (None: the pod's own grace period).
        False when there is no such pod, or it is terminating or failed already."""
        worker = self._workers.get(uid)
        if worker is None or worker.terminating or worker.work.failure is not None:
            return False
        worker.work.failure = (reason, message)
        worker.work.grace_override = grace
        worker.wake.set()
        return True

    def wake(self, uid: pods.PodUID) -> None:
        worker = self._workers.get(uid)
        if worker is not None:
            worker.wake.set()

    def uids(self) -> set[pods.PodUID]:
        return set(self._workers)

    def unfinished(self) -> set[pods.PodUID]:
        """Pods whose containers may run though they are not admitted (or not again yet):
        those being terminated, and those not admitted nor refused since this agent started
        (after a restart, their containers run from before until their first sync). With the
        admitted pods, the kubelet's active pods as the device manager weighs them."""
        return {uid for uid, w in self._workers.items()
                if w.terminating or (not w.work.admitted and w.work.failure is None)}

    def started(self, uid: pods.PodUID) -> bool:
        """The worker of `uid` started the pod (a static pod may wait for another of its
        name) and has not finished."""
        worker = self._workers.get(uid)
        return worker is not None and worker.started

    def pod(self, uid: pods.PodUID) -> pods.Pod | None:
        worker = self._workers.get(uid)
        return worker.pod if worker else None

    def work(self, uid: pods.PodUID) -> syncing.PodWork | None:
        worker = self._workers.get(uid)
        return worker.work if worker else None

    # -- the loops ----------------------------------------------------------------------------

    def _start(self, pod: pods.Pod) -> _Worker:
        worker = _Worker(pod=pod)
        self._workers[pod.uid] = worker
        if pod.is_static:
            self._waiting_static.setdefault(pod.full_name, []).append(pod.uid)
        worker.task = self._group.spawn(f"pod-worker:{pod.full_name}:{pod.uid[:8]}",
                                        self._run(worker))
        worker.wake.set()
        return worker

    def _terminate(self, worker: _Worker) -> None:
        worker.terminating = True
        if self._deletion_clock is not None:
            worker.pod = terminations.mark_deleted(worker.pod, self._deletion_clock(),
                                                   podactions.grace_period(worker.pod))
        if worker.sync_task is not None and not worker.sync_task.done():
            worker.sync_task.cancel()
        worker.wake.set()

    async def _run(self, worker: _Worker) -> None:
        delay: float | None = None
        while True:
            await tasks.wait_event(worker.wake, delay)
            worker.wake.clear()
            if worker.terminating:
                if await self._attempt_termination(worker):
                    break
                delay = backoff.jittered(self._sync.retry_period, self._sync.retry_jitter)
                continue
            if not self._may_start(worker):
                delay = None  # woken when the pod of its full name has terminated
                continue
            delay = await self._attempt_sync(worker)
            # The pod's own wake-ups (a deadline, a back-off's end) hold after a failed sync
            # too: its retry must not postpone them.
            own = self._syncer.wake_in(worker.work)
            delay = delay if own is None else min(delay, own)
        self._workers.pop(worker.pod.uid, None)
        self._static_gone(worker.pod)
        self._on_gone(worker.pod.uid)
        # The same pod may have come back while we terminated it.
        again = self._desired.get(worker.pod.uid)
        if again is not None:
            self._start(again)

    def _may_start(self, worker: _Worker) -> bool:
        """Whether the pod may be synced: a static pod waits for its turn (`_static_turn`).
        The first time it may, `on_start` hears it."""
        if worker.started:
            return True
        if worker.pod.is_static and not self._static_turn(worker):
            return False
        worker.started = True
        self._on_start(worker.pod)
        return True

    def _static_turn(self, worker: _Worker) -> bool:
        """allowStaticPodStart: a static pod starts when no other pod of its full name has
        started (and not yet terminated), and it is the first of its name still waiting."""
        name, uid = worker.pod.full_name, worker.pod.uid
        started = self._started_static.get(name)
        if started is None:
            waiting = [u for u in self._waiting_static.get(name, ())
                       if (w := self._workers.get(u)) is not None and not w.terminating]
            self._waiting_static[name] = waiting
            if waiting and waiting[0] == uid:
                waiting.pop(0)
                self._started_static[name] = started = uid
        if started != uid:
            log.info("static pod %s (%s) waits until the pod of the same name (%s) has "
                     "terminated", name, uid, started or "queued before it")
            return False
        return True

    def _static_gone(self, pod: pods.Pod) -> None:
        """The worker of a static pod ended: the next pod of its full name may start."""
        if not pod.is_static:
            return
        name = pod.full_name
        if self._started_static.get(name) == pod.uid:
            del self._started_static[name]
        waiting = [u for u in self._waiting_static.get(name, ()) if u != pod.uid]
        if waiting:
            self._waiting_static[name] = waiting
            for uid in waiting:
                self.wake(uid)
        else:
            self._waiting_static.pop(name, None)

    async def _attempt_sync(self, worker: _Worker) -> float:
        pod = worker.pod
        worker.last_sync = time.monotonic()
        worker.sync_task = self._group.spawn(f"pod-sync:{pod.full_name}:{pod.uid[:8]}",
                                             self._syncer.sync(pod, worker.work), awaited=True)
        try:
            wake_in = await worker.sync_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the agent is shutting down (or the worker itself was cancelled)
            if worker.terminating:
                log.info("sync of pod %s (%s) cancelled: the pod is terminating",
                         pod.full_name, pod.uid)
                return 0.0
            # Nobody here cancelled it: something below let a cancellation of its own out (a
            # bug there). The worker lives on and tries again, as after any other failure.
            return self._sync_failed(pod, UnaskedCancellation(
                "the sync was cancelled although neither the pod nor the agent was stopping"))
        except Exception as exc:
            return self._sync_failed(pod, exc)
        # The resync is a safety net only: everything that depends on time schedules its
        # own wake-up (PodWork.timers), and changes arrive as events.
        resync = self._sync.resync_period
        return min(wake_in, resync) if wake_in is not None else resync

    def _sync_failed(self, pod: pods.Pod, exc: Exception) -> float:
        """Seconds until the failed sync of `pod` is tried again; the error is logged, and is
        a FailedSync event unless the step that failed recorded its own."""
        retry = backoff.jittered(self._sync.retry_period, self._sync.retry_jitter)
        if isinstance(exc, syncing.NetworkNotReady):  # recorded as NetworkNotReady
            log.warning("pod %s (%s) waits: %s", pod.full_name, pod.uid, exc)
            return self._sync.network_not_ready_retry
        if isinstance(exc, syncing.SyncError | cri.CriError):
            log.warning("error syncing pod %s (%s), will retry: %s", pod.full_name, pod.uid,
                        exc)
            if isinstance(exc, cri.CriError):  # no step said it: the pod's state was unread
                self._recorder.record(pod, "Warning", FAILED_SYNC,
                                      f"error determining status: {exc.rpc_error}")
            return retry
        log.error("unexpected error syncing pod %s (%s)", pod.full_name, pod.uid, exc_info=exc)
        self._recorder.record(pod, "Warning", FAILED_SYNC, (
            f"error syncing pod: {type(exc).__name__} (a bug in nodelet; the node's log has "
            "the details)"))
        return retry

    async def _attempt_termination(self, worker: _Worker) -> bool:
        pod = worker.pod
        try:
            await self._syncer.terminate(pod, worker.work)
        except (syncing.SyncError, cri.CriError) as exc:
            log.warning("error terminating pod %s (%s), will retry: %s", pod.full_name,
                        pod.uid, exc)
            return False
        except Exception:
            log.exception("unexpected error terminating pod %s (%s)", pod.full_name, pod.uid)
            return False
        log.info("pod %s (%s) terminated", pod.full_name, pod.uid)
        return True

    def alive(self) -> bool:
        """Every worker's task is running (a crashed worker would be gone from the group)."""
        return all(w.task is not None and not w.task.done() for w in self._workers.values())
