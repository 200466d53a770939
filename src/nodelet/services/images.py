"""Image pulls with the kubelet's policies, events and back-off (ErrImagePull → ImagePullBackOff).

`ImagePuller.ensure` is called before a container is created. It returns None when the image is
there (pulled now if the policy says so), or the seconds until another attempt makes sense; in
that case the container's waiting reason is set: `ErrImagePull` right after a failed pull,
`ImagePullBackOff` while the back-off (10 s doubling to 300 s per pod and image) runs,
`ErrImageNeverPull` for a missing image with policy Never.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping

from nodelet import settings as settings_mod
from nodelet.adapters.cri import client as cri
from nodelet.helpers import backoff
from nodelet.model import events as ev
from nodelet.model import pods
from nodelet.services import recording

Waiting = MutableMapping[str, tuple[str, str]]


class ImagePuller:
    def __init__(
        self,
        *,
        client: cri.RuntimeClient,
        recorder: recording.EventRecorder,
        sync: settings_mod.SyncSettings,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._sync = sync
        # (pod uid, image) -> back-off and the monotonic time before which no pull is tried.
        self._backoffs: dict[tuple[str, str], tuple[backoff.Backoff, float]] = {}

    async def ensure(
        self, pod: pods.Pod, container: pods.Container, waiting: Waiting
    ) -> float | None:
        image = container.image
        policy = container.image_pull_policy
        if policy != "Always" and await self._client.image_status(image) is not None:
            return None
        if policy == "Never":
            message = f'Container image "{image}" is not present with pull policy of Never'
            waiting[container.name] = ("ErrImageNeverPull", message)
            self._recorder.record(pod, "Warning", "ErrImageNeverPull", message)
            return self._sync.image_backoff  # look again soon: the image may be imported
        key = (str(pod.uid), image)
        left = self._backoff_left(key)
        if left > 0:
            message = f'Back-off pulling image "{image}"'
            waiting[container.name] = ("ImagePullBackOff", message)
            self._recorder.record(pod, "Normal", ev.BACK_OFF, message)
            return left
        return await self._pull(pod, container, key, waiting)

    def _backoff_left(self, key: tuple[str, str]) -> float:
        entry = self._backoffs.get(key)
        return entry[1] - time.monotonic() if entry else 0.0

    async def _pull(
        self, pod: pods.Pod, container: pods.Container, key: tuple[str, str], waiting: Waiting
    ) -> float | None:
        image = container.image
        self._recorder.record(pod, "Normal", ev.PULLING, f'Pulling image "{image}"')
        started = time.monotonic()
        try:
            await self._client.pull_image(image)
        except cri.CriError as exc:
            waiting[container.name] = ("ErrImagePull", exc.detail)
            self._recorder.record(
                pod, "Warning", ev.FAILED, f'Failed to pull image "{image}": {exc.detail}'
            )
            entry = self._backoffs.get(key)
            delays = entry[0] if entry else backoff.Backoff(
                self._sync.image_backoff, self._sync.image_backoff_max)
            delay = delays.next_delay()
            self._backoffs[key] = (delays, time.monotonic() + delay)
            return delay
        self._backoffs.pop(key, None)
        took = time.monotonic() - started
        self._recorder.record(
            pod, "Normal", ev.PULLED, f'Successfully pulled image "{image}" in {took:.3f}s'
        )
        return None

    def forget_pod(self, uid: pods.PodUID) -> None:
        for key in [k for k in self._backoffs if k[0] == uid]:
            del self._backoffs[key]
