"""Image pulls with the kubelet's policies, credentials, events and back-off (ErrImagePull →
ImagePullBackOff).

`ImagePuller.ensure` is called before a container is created. It returns None when the image is
there (pulled now if the policy says so), or the seconds until the pod should be synced again;
in that case the container's waiting reason is set: `ErrImagePull` right after a failed pull,
`ImagePullBackOff` while the back-off (10 s doubling to 300 s per pod and image) runs,
`ErrImageNeverPull` for a missing image with policy Never, `InvalidImageName` (and no pull)
for a reference the kubelet cannot parse (`model.core.imagerefs`). The pod is synced again as
the kubelet re-queues a failed sync (`sync.retry_period`, 10 s stretched by up to 50 %), or at
the back-off's end if that comes first: so `ImagePullBackOff` shows in the status during the
back-off, as the kubelet's does, and the pull is retried the moment the back-off ends.

Credentials (`model.core.credentials`) come from the pod's `imagePullSecrets`, read through the
volume manager's `lookup` (so in cluster mode they are fetched from the API like volume
Secrets), then from the node's docker config file. As the kubelet does, every credential that
matches the image is tried in order until a pull succeeds, and the image is pulled anonymously
only when none matches; the error of a pull that failed with several is the kubelet's
aggregate (`[e1, e2]`). A pull secret that does not exist gives a
`FailedToRetrieveImagePullSecret` warning and the pull goes on; one whose docker config is
broken fails the pull (as in the kubelet); one of another type is skipped with an
`InvalidImagePullSecret` warning. Beyond the kubelet: new credentials for an image (a pull
secret that appeared or changed) end its back-off at once.

Images already present (KubeletEnsureSecretPulledImages, on by default): with a `pull_records`
manager (`pullmanager`), a pod may use a present image under IfNotPresent or Never only when
the records say so (`model.core.pullrecords`): then the `Pulled` event says the kubelet's
`... already present on machine and can be accessed by the pod`. Otherwise the image is pulled
again with the pod's own credentials (IfNotPresent), so a pod without the registry's
credentials fails as if the image were not there (ErrImagePull, then ImagePullBackOff); under
Never it is refused with the words of a missing image (ErrImageNeverPull), as the kubelet does
so as not to tell the pod the image exists. Every pull is recorded with the credential that
worked (a pull Secret, or none: anonymous or the node's config, which any pod may then use).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from nodelet import settings as settings_mod
from nodelet.adapters.cri import client as cri
from nodelet.helpers import backoff
from nodelet.model.core import credentials, durations, imagerefs, pods, pullrecords
from nodelet.model.core import events as ev
from nodelet.model.core import runtime as rt
from nodelet.model.core import volumes as vol
from nodelet.services.podwork import pullmanager
from nodelet.services.status import recording

log = logging.getLogger(__name__)

Waiting = MutableMapping[str, tuple[str, str]]
# What a pull was tried with: the credentials in order (empty: anonymous), or the error that
# kept it from being tried (a broken pull secret).
Tried = tuple[credentials.Credential, ...] | str


@dataclass
class _Failure:
    backoff: backoff.Backoff
    not_before: float  # monotonic time before which the same pull is not tried again
    tried: Tried
    error: str = ""  # the last pull's error, which the back-off's message repeats


class ImagePuller:
    def __init__(
        self,
        *,
        client: cri.RuntimeClient,
        recorder: recording.EventRecorder,
        sync: settings_mod.SyncSettings,
        lookup: vol.Lookup | None = None,
        node_config: Path | None = None,
        pull_records: pullmanager.PullManager | None = None,
    ) -> None:
        """`pull_records`: the node's pulled-image records; None (the feature gate off): any
        pod uses any image present."""
        self._client = client
        self._records = pull_records
        self._recorder = recorder
        self._sync = sync
        self._lookup = lookup or vol.no_objects
        self._node_config = node_config
        # (pod uid, image) -> the back-off of its failed pulls.
        self._failures: dict[tuple[str, str], _Failure] = {}

    def check_pull_secrets(self, pod: pods.Pod) -> None:
        """Look the pod's pull secrets up in every sync, as the kubelet does: a missing one is
        reported even when no pull is needed, so a typo shows at once."""
        _, missing = credentials.pull_secrets(pod, self._lookup)
        if missing:
            self._recorder.record(pod, "Warning", credentials.FAILED_TO_RETRIEVE,
                                  credentials.missing_message(missing))

    async def ensure(
        self, pod: pods.Pod, container: pods.Container, waiting: Waiting
    ) -> float | rt.ImageInfo | None:
        """Make the container's image present as its pull policy says: the image (what the
        runtime says of it, which the caller reads instead of asking again), or seconds to
        wait before trying again (`waiting[container.name]` says why). None: pulled, but the
        runtime does not show it. A nameless `container` stands for the pod (an image
        volume's pull): the events are about the pod, none about a container's start."""
        image = container.image
        problem = imagerefs.invalid(image)
        if problem is not None:  # the kubelet's first check: no status asked, no pull tried
            message = f'Failed to apply default image tag "{image}": {problem}'
            waiting[container.name] = ("InvalidImageName", message)
            self._recorder.record(pod, "Warning", "InspectFailed", message,
                                  container=container.name)
            self._start_failed(pod, container, "InvalidImageName")
            return self._requeue()
        policy = container.image_pull_policy
        present = await self._client.image_status(image) if policy != "Always" else None
        pod_credentials = _Once(lambda: self._credentials(pod, image))
        if present is not None and await self._usable(pod, container, present,
                                                      pod_credentials):
            return present
        if policy == "Never":  # not present, or present but not for this pod
            message = f'Container image "{image}" is not present with pull policy of Never'
            waiting[container.name] = ("ErrImageNeverPull", message)
            self._recorder.record(pod, "Warning", "ErrImageNeverPull", message,
                                  container=container.name)
            self._start_failed(pod, container, "ErrImageNeverPull")
            return self._requeue()  # look again: the image may be imported meanwhile
        key = (str(pod.uid), image)
        tried = await pod_credentials.get()
        left = self._backoff_left(key, tried)
        if left > 0:
            message = f'Back-off pulling image "{image}"'
            self._recorder.record(pod, "Normal", ev.BACK_OFF, message, container=container.name)
            # As the kubelet's: the Waiting message repeats the last pull's error.
            failure = self._failures.get(key)
            if failure is not None and failure.error:
                message = f"{message}: ErrImagePull: {failure.error}"
            waiting[container.name] = ("ImagePullBackOff", message)
            self._start_failed(pod, container, "ImagePullBackOff")
            return self._requeue(left)
        return await self._pull(pod, container, key, waiting, tried)

    async def _usable(self, pod: pods.Pod, container: pods.Container,
                      present: rt.ImageInfo, pod_credentials: _Once) -> bool:
        """Whether the pod may use the present image without pulling it, with its event."""
        image, message = container.image, f'Container image "{container.image}" already present'
        if self._records is None:
            message += " on machine"
        else:
            decision = await self._records.must_pull(
                image, present.id, lambda: _pod_secrets(pod_credentials))
            if decision.pull:
                log.info("pod %s: image %s is present but was not pulled with credentials the "
                         "pod has: pulling it with the pod's own", pod.full_name, image)
                return False
            message += " on machine and can be accessed by the pod"
        self._recorder.record(pod, "Normal", ev.PULLED, message, container=container.name)
        return True

    def retry_delay(self) -> float:
        """Seconds until an image step that failed without a back-off of its own is tried
        again: the kubelet's retry of a failed sync."""
        return self._requeue()

    def _requeue(self, backoff_left: float | None = None) -> float:
        """Seconds until the pod's next sync after its image step failed: the kubelet's retry
        of a failed sync, or the back-off's end if sooner."""
        retry = backoff.jittered(self._sync.retry_period, self._sync.retry_jitter)
        return retry if backoff_left is None else min(retry, backoff_left)

    def _backoff_left(self, key: tuple[str, str], tried: Tried) -> float:
        failure = self._failures.get(key)
        if failure is None or failure.tried != tried:
            return 0.0
        return failure.not_before - time.monotonic()

    async def _credentials(self, pod: pods.Pod, image: str) -> Tried:
        """The credentials to try for `image`, with the events about the pod's pull secrets."""
        secrets, _ = credentials.pull_secrets(pod, self._lookup)
        try:
            ring, unusable = credentials.secrets_keyring(secrets)
        except credentials.CredentialsError as exc:
            return exc.message
        for message in unusable:
            self._recorder.record(pod, "Warning", credentials.INVALID_PULL_SECRET, message)
        node = await asyncio.to_thread(self._node_keyring)
        return credentials.credentials_for(image, (ring, node))

    def _node_keyring(self) -> credentials.Keyring:
        """The node's docker config file, read at each pull; missing or broken: no credentials
        (the kubelet logs a broken one and goes on)."""
        path = self._node_config
        if path is None:
            return credentials.Keyring()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return credentials.Keyring()
        except OSError as exc:
            log.warning("cannot read the node's registry credentials %s: %s", path, exc)
            return credentials.Keyring()
        try:
            return credentials.keyring(
                credentials.parse_config(data, wrapped=True, source=f"registry config {path}"))
        except credentials.CredentialsError as exc:
            log.warning("ignoring the node's registry credentials: %s", exc.message)
            return credentials.Keyring()

    async def _pull(
        self,
        pod: pods.Pod,
        container: pods.Container,
        key: tuple[str, str],
        waiting: Waiting,
        tried: Tried,
    ) -> float | rt.ImageInfo | None:
        """Pull the image: what the runtime then says of it (None: it does not show it), or
        seconds until a retry."""
        image = container.image
        self._recorder.record(pod, "Normal", ev.PULLING, f'Pulling image "{image}"',
                              container=container.name)
        started = time.monotonic()
        if self._records is not None:
            try:
                await self._records.pulling(image)
            except OSError as exc:  # the kubelet's words; no pull without the intent
                message = f'Failed to record image pull intent for container image "{image}": {exc}'
                return self._failed(pod, container, key, waiting, message, tried)
        error, used, image_ref = await self._pull_with(image, tried)
        if error is not None:
            if self._records is not None:
                await self._records.pull_failed(image)
            return self._failed(pod, container, key, waiting, error, tried)
        if self._records is not None:
            await self._records.pulled(image, image_ref, _pull_secret(used))
        self._failures.pop(key, None)
        # The kubelet's words, its durations truncated to milliseconds; nodelet's pulls do
        # not queue, so the pull and the pull with its wait take the same time.
        took = durations.go_duration(math.floor((time.monotonic() - started) * 1000) / 1000)
        present = await self._client.image_status(image)
        size = present.size if present is not None else 0
        self._recorder.record(
            pod, "Normal", ev.PULLED, f'Successfully pulled image "{image}" in {took} ({took} '
            f"including waiting). Image size: {size} bytes.", container=container.name)
        return present

    async def _pull_with(self, image: str, tried: Tried
                         ) -> tuple[str | None, credentials.Credential | None, str]:
        """Pull with each credential in turn until one works (anonymously when there are
        none): (None, the credential that worked, the image's reference), or the runtime's
        words when no pull worked."""
        if isinstance(tried, str):
            return tried, None, ""
        errors: list[str] = []
        for credential in tried or (None,):
            try:
                image_ref = await self._client.pull_image(
                    image, credential.auth if credential else None)
            except cri.CriError as exc:
                errors.append(exc.pull_words)  # the kubelet's CRI client's words
            else:
                if credential is not None:
                    log.info("pulled %s with credentials of %s", image, credential.source)
                return None, credential, image_ref
        return _aggregate(errors), None, ""

    def _failed(
        self,
        pod: pods.Pod,
        container: pods.Container,
        key: tuple[str, str],
        waiting: Waiting,
        error: str,
        tried: Tried,
    ) -> float:
        waiting[container.name] = ("ErrImagePull", error)
        self._recorder.record(
            pod, "Warning", ev.FAILED, f'Failed to pull image "{container.image}": {error}',
            container=container.name)
        self._start_failed(pod, container, "ErrImagePull")
        failure = self._failures.get(key)
        delays = failure.backoff if failure else backoff.Backoff(
            self._sync.image_backoff, self._sync.image_backoff_max)
        delay = delays.next_delay()
        self._failures[key] = _Failure(delays, time.monotonic() + delay, tried, error)
        return self._requeue(delay)

    def _start_failed(self, pod: pods.Pod, container: pods.Container, reason: str) -> None:
        """The kubelet's `Failed` event of a container start that stopped at its image
        (kuberuntime startContainer: `Error: <reason>`); none for an image volume's pull
        (a nameless container: the container that mounts it says so when it starts)."""
        if container.name:
            self._recorder.record(pod, "Warning", ev.FAILED, f"Error: {reason}",
                                  container=container.name)

    def forget_pod(self, uid: pods.PodUID) -> None:
        for key in [k for k in self._failures if k[0] == uid]:
            del self._failures[key]


def _aggregate(errors: list[str]) -> str:
    """One error as it is, several as `[e1, e2]` (each once): the kubelet's aggregate error."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"


class _Once:
    """The pod's credentials for an image, looked up at most once per `ensure` (the lookup
    records events about its pull secrets)."""

    def __init__(self, lookup: Callable[[], Awaitable[Tried]]) -> None:
        self._lookup = lookup
        self._found: Tried | None = None

    async def get(self) -> Tried:
        if self._found is None:
            self._found = await self._lookup()
        return self._found


def _pull_secret(credential: credentials.Credential | None) -> pullrecords.PullSecret | None:
    """The pull Secret that gave `credential`; None for the node's own or no credential."""
    if credential is None or credential.secret is None:
        return None
    namespace, name, uid = credential.secret
    return pullrecords.PullSecret(namespace, name, uid, credential.hash)


async def _pod_secrets(pod_credentials: _Once) -> list[pullrecords.PullSecret]:
    """The pod's pull Secrets that hold a credential for the image (none when one of them
    cannot be read: the pod then pulls, and that pull reports it)."""
    tried = await pod_credentials.get()
    if isinstance(tried, str):
        return []
    return [s for s in map(_pull_secret, tried) if s is not None]
