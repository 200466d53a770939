"""Mirror pods: the API's copies of this node's static pods, kept as the kubelet keeps them
(`pkg/kubelet/pod/mirror_client.go`, the static-pod part of `syncPod`, and
`deleteOrphanedMirrorPods`).

A mirror pod is never run (`apisource` leaves mirror pods out); it only shows the static pod,
and its status, to the cluster. What a mirror pod looks like and when one is created or
deleted is decided by `model.core.mirrorpods` (pure: `mirror_object`, `plan`); `MirrorPods.run()`
carries the plan out, re-planning after every change of the static pods, of the ones their
pod workers started (`pod_started`: the kubelet makes a mirror pod in the pod's own sync, so an
edited manifest's new version, which waits for the old one to terminate, keeps the old mirror
pod until then) or of the mirror pods the pod watch sees. Deletes use grace 0 and a UID
precondition; a static pod that left the manifests keeps its mirror pod until its worker
finished terminating it (`pod_gone`), so the last status reaches the mirror first.
API errors are retried with a back-off per full name: a mirror pod the API refuses (its
namespace is being deleted: 403) holds up no other, as the kubelet's syncs of other pods go on.
The status sync writes a static pod's status to its mirror pod: `mirror_uid(pod)` is the
translation (the kubelet's `TranslatePodUID`), and `on_retarget(uid)` says it changed.

Exceptions: none escape `run()`; API errors are logged and retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from nodelet.adapters import kube
from nodelet.helpers import backoff, tasks
from nodelet.model.core import apijson, pods
from nodelet.model.core import mirrorpods as mp

log = logging.getLogger(__name__)


class MirrorPods:
    """Call `set_static_pods`, `pod_started`, `set_mirrors` (from the pod watch) and
    `pod_gone`; run `run()`."""

    def __init__(
        self,
        *,
        client: kube.KubeClient,
        node_name: str,
        node_uid: Callable[[], str | None],
        on_retarget: Callable[[pods.PodUID], None] = lambda uid: None,
        retry: float = 0.5,
        retry_max: float = 30.0,
        resync: float = 60.0,
    ) -> None:
        """`retry`/`retry_max`: back-off after API errors, per full name; every `resync`
        seconds the plan is made again from the watch's view alone (seconds)."""
        self._client = client
        self._node_name = node_name
        self._node_uid = node_uid
        self._on_retarget = on_retarget
        self._retry = retry
        self._retry_max = retry_max
        self._resync = resync
        self._static: dict[str, pods.Pod] = {}
        self._started: set[pods.PodUID] = set()  # static pods their workers started
        self._terminating: dict[pods.PodUID, pods.Pod] = {}
        self._mirrors: dict[str, apijson.Obj] = {}  # as the pod watch sees them
        self._created: dict[str, apijson.Obj] = {}  # create answers the watch has not shown yet
        self._deleted: set[str] = set()  # UIDs deleted that the watch still shows
        self._targets: dict[pods.PodUID, str | None] = {}
        # Full names taken by a pod that is not our mirror pod: not created until the resync.
        self._blocked: set[str] = set()
        # Full names whose last API call failed: their back-off, and when to try again
        # (time.monotonic()).
        self._backoffs: dict[str, backoff.Backoff] = {}
        self._retry_at: dict[str, float] = {}
        self._wake = asyncio.Event()
        self.creates = 0
        self.deletes = 0

    # -- inputs -----------------------------------------------------------------------------

    def set_static_pods(self, desired: Mapping[pods.PodUID, pods.Pod]) -> None:
        """The complete set of static pods to run (others in `desired` are ignored)."""
        new = {p.full_name: p for p in desired.values() if p.is_static}
        kept = {p.uid for p in new.values()}
        for pod in self._static.values():
            if pod.uid not in kept:
                self._terminating[pod.uid] = pod
        for uid in kept:
            self._terminating.pop(uid, None)
        # One that left is started again by its worker if it comes back (a new worker).
        self._started &= kept
        self._static = new
        self._blocked &= set(new)
        self._retarget()
        self._wake.set()

    def set_mirrors(self, mirrors: Mapping[str, apijson.Obj]) -> None:
        """The mirror pods bound to this node, by full name, as the pod watch has them."""
        self._mirrors = dict(mirrors)
        self._blocked -= set(mirrors)  # a name taken by our own mirror pod, seen late
        uids = {mp.uid_of(m) for m in mirrors.values()}
        self._deleted &= uids
        self._created = {k: v for k, v in self._created.items()
                         if mp.uid_of(mirrors.get(k)) != mp.uid_of(v)
                         and mp.uid_of(v) not in self._deleted}
        self._retarget()
        self._wake.set()

    def pod_started(self, pod: pods.Pod) -> None:
        """The pod worker of static pod `pod` started it (its first sync): its mirror pod is
        made or replaced now, at once (a back-off of its name is forgotten)."""
        if not pod.is_static:
            return
        self._started.add(pod.uid)
        self._backoffs.pop(pod.full_name, None)
        self._retry_at.pop(pod.full_name, None)
        self._wake.set()

    def pod_gone(self, uid: pods.PodUID) -> None:
        """A pod worker finished: a static pod that left the manifests may lose its mirror."""
        self._started.discard(uid)
        if self._terminating.pop(uid, None) is not None:
            self._targets.pop(uid, None)
            self._wake.set()

    def mirror_uid(self, pod: pods.Pod) -> str | None:
        """The API UID of static pod `pod`'s live mirror pod, as the watch sees it."""
        mirror = self._mirrors.get(pod.full_name)
        if mirror is None or not mp.is_mirror_of(mirror, pod):
            return None
        uid = mp.uid_of(mirror)
        return uid if uid and uid not in self._deleted else None

    def _retarget(self) -> None:
        for pod in [*self._static.values(), *self._terminating.values()]:
            target = self.mirror_uid(pod)
            if self._targets.get(pod.uid) != target:
                self._targets[pod.uid] = target
                if target is not None:
                    self._on_retarget(pod.uid)

    # -- the loop ---------------------------------------------------------------------------

    def _view(self) -> dict[str, apijson.Obj]:
        view = {k: v for k, v in self._mirrors.items() if mp.uid_of(v) not in self._deleted}
        for full_name, obj in self._created.items():
            view.setdefault(full_name, obj)
        return view

    def pending(self) -> list[mp.Action]:
        terminating = {p.full_name for p in self._terminating.values()}
        static = {k: p for k, p in self._static.items() if k not in self._blocked}
        return mp.plan(static, self._view(), terminating, self._started)

    async def run(self) -> None:
        resync_at = time.monotonic() + self._resync
        while True:
            self._wake.clear()
            await self._apply_pending()
            now = time.monotonic()
            if now >= resync_at:
                self._blocked.clear()
                self._created.clear()
                resync_at = now + self._resync
                continue
            due = min([resync_at, *self._retry_at.values()])
            await tasks.wait_event(self._wake, max(0.0, due - now))

    async def _apply_pending(self) -> None:
        """Carry out the plan; a full name whose call failed waits for its back-off, the
        others go on."""
        actions = self.pending()
        names = {a.full_name for a in actions}
        for name in set(self._backoffs) - names:  # nothing to do there any more
            self._backoffs.pop(name, None)
            self._retry_at.pop(name, None)
        failed: set[str] = set()
        done: set[str] = set()
        for action in actions:
            name = action.full_name
            if name in failed or self._retry_at.get(name, 0.0) > time.monotonic():
                continue
            try:
                await self._apply(action)
            except kube.KubeError as exc:
                failed.add(name)
                delay = self._backoffs.setdefault(
                    name, backoff.Backoff(self._retry, self._retry_max)).next_delay()
                self._retry_at[name] = time.monotonic() + delay
                log.warning("cannot update mirror pod %s, retrying in %.1fs: %s", name, delay,
                            exc)
            else:
                done.add(name)
        for name in done - failed:  # every call of the name went through
            self._backoffs.pop(name, None)
            self._retry_at.pop(name, None)

    async def _apply(self, action: mp.Action) -> None:
        if isinstance(action, mp.Delete):
            log.info("deleting mirror pod %s/%s (%s)", action.namespace, action.name, action.why)
            try:
                await self._client.delete_pod(action.namespace, action.name, uid=action.uid,
                                              grace=0)
                self.deletes += 1
            except (kube.NotFound, kube.Conflict):
                pass  # gone already, or replaced
            self._deleted.add(action.uid)
            self._created = {k: v for k, v in self._created.items() if mp.uid_of(v) != action.uid}
            return
        pod = action.pod
        body = mp.mirror_object(pod, node_name=self._node_name, node_uid=self._node_uid())
        try:
            created = await self._client.create_pod(pod.namespace, body)
        except kube.AlreadyExists:
            self._taken(pod)
            return
        self.creates += 1
        log.info("created mirror pod %s (%s)", pod.full_name, mp.uid_of(created))
        self._created[pod.full_name] = created

    def _taken(self, pod: pods.Pod) -> None:
        """Create found the name taken: our mirror pod the watch has not shown yet, or a pod
        of someone else's, which is left alone (the kubelet does the same). Not read with a
        GET: the Node authorizer refuses (403) a pod not bound to this node, and the pod watch
        shows every pod that is. The name waits until the watch shows a mirror pod of that
        name (ours, late: `set_mirrors`) or the next resync."""
        if pod.full_name in self._mirrors:
            return  # the watch has it: the next plan decides on it
        log.warning("cannot create the mirror pod of static pod %s: a pod of that name that is "
                    "not this node's mirror pod exists in the API; delete it to see the static "
                    "pod there", pod.full_name)
        self._blocked.add(pod.full_name)

