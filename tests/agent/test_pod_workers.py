"""The pod workers' loop (services/podwork/workers.py) around a syncer of the test's own: a
sync that ends in a cancellation nobody asked for (a call below it let one out) is a failed
sync, recorded and tried again; the worker goes on. The agent's shutdown still ends it."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from nodelet import settings
from nodelet.helpers import tasks
from nodelet.model.core import pods
from nodelet.model.parsing import manifests
from nodelet.services.podwork import syncing, workers
from nodelet.services.status import recording
from support.polling import eventually


class _Syncer:
    """Its first sync ends in a stray cancellation, every later one succeeds."""

    def __init__(self) -> None:
        self.syncs = 0

    async def sync(self, pod: pods.Pod, work: syncing.PodWork) -> float | None:
        self.syncs += 1
        if self.syncs == 1:
            raise asyncio.CancelledError  # as a grpc.aio call cancelled under it raises
        return None

    async def terminate(self, pod: pods.Pod, work: syncing.PodWork) -> None:
        return None

    def wake_in(self, work: syncing.PodWork) -> float | None:
        return None


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(self, pod: pods.Pod, type_: str, reason: str, message: str,
               **_: Any) -> None:
        self.events.append((type_, reason, message))


def _pod() -> pods.Pod:
    return manifests.pod_from_object({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, node_name="node")


async def test_a_stray_cancellation_is_a_failed_sync_tried_again() -> None:
    group = tasks.TaskGroup()
    syncer, recorder = _Syncer(), _Recorder()
    pod_workers = workers.PodWorkers(
        syncer=cast(syncing.PodSyncer, syncer),
        recorder=cast(recording.EventRecorder, recorder), group=group,
        sync=settings.SyncSettings(retry_period=0.05, retry_jitter=0.0),
        on_gone=lambda uid: None)
    pod = _pod()
    try:
        pod_workers.update({pod.uid: pod})
        await eventually(lambda: syncer.syncs, within=10, until=lambda n: n >= 2,
                         what="the sync tried again after the stray cancellation")
        assert pod_workers.alive()
        assert [(t, r) for t, r, _ in recorder.events] == [("Warning", workers.FAILED_SYNC)]
        assert "UnaskedCancellation" in recorder.events[0][2], recorder.events
    finally:
        await group.close()
