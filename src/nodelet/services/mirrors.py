"""Mirror pods: the API's copies of this node's static pods, kept as the kubelet keeps them
(`pkg/kubelet/pod/mirror_client.go`, the static-pod part of `syncPod`, and
`deleteOrphanedMirrorPods`).

A mirror pod is the static pod as written (name `<name>-<node>`, namespace, labels, annotations,
spec) plus the annotation `kubernetes.io/config.mirror` = the static pod's config hash, and the
Node as its controlling owner. It is never run (`apisource` leaves mirror pods out); it only shows
the static pod, and its status, to the cluster. What nodelet does, like the kubelet:

- a static pod without a mirror pod gets one (POST);
- a mirror pod whose hash is not its static pod's (the manifest changed), or that someone
  deleted (it has a `deletionTimestamp`: a static pod cannot be deleted through the API), is
  deleted with grace 0 and a UID precondition and created again;
- a mirror pod whose static pod left the manifests is deleted once the pod worker finished
  terminating that pod (`pod_gone`), so the last status reaches the mirror first.

`plan()` is the pure decision; `MirrorPods.run()` carries it out, re-planning after every change
of the static pods or of the mirror pods the pod watch sees, retrying API errors with a back-off.
The status sync writes a static pod's status to its mirror pod: `mirror_uid(pod)` is the
translation (the kubelet's `TranslatePodUID`), and `on_retarget(uid)` says it changed.

Exceptions: none escape `run()`; API errors are logged and retried.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodelet.adapters import kube
from nodelet.helpers import backoff
from nodelet.model import pods

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# Metadata the API server assigns: never sent on create.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "managedFields", "generation", "ownerReferences")


def pod_hash(pod: pods.Pod) -> str:
    """The static pod's config hash (its UID, as the kubelet's)."""
    return pod.annotations.get(pods.ANNOTATION_CONFIG_HASH) or str(pod.uid)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def is_mirror_of(mirror: Mapping[str, Any], pod: pods.Pod) -> bool:
    """True when `mirror` is the current, live mirror pod of static pod `pod`."""
    meta = _meta(mirror)
    annotations = meta.get("annotations") or {}
    return (annotations.get(pods.ANNOTATION_CONFIG_MIRROR) == pod_hash(pod)
            and not meta.get("deletionTimestamp"))


def mirror_object(pod: pods.Pod, *, node_name: str, node_uid: str | None) -> Obj:
    """The mirror pod to create for static pod `pod` (pure)."""
    raw = copy.deepcopy(dict(pod.raw))
    meta = {k: v for k, v in dict(raw.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
    meta.update(name=pod.name, namespace=pod.namespace, labels=dict(pod.labels),
                annotations={**pod.annotations, pods.ANNOTATION_CONFIG_MIRROR: pod_hash(pod)})
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                    "uid": node_uid, "controller": True}]
    spec = dict(raw.get("spec") or {})
    spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@dataclass(frozen=True)
class Create:
    pod: pods.Pod


@dataclass(frozen=True)
class Delete:
    namespace: str
    name: str
    uid: str
    why: str


Action = Create | Delete


def plan(static: Mapping[str, pods.Pod], mirrors: Mapping[str, Mapping[str, Any]],
         terminating: set[str]) -> list[Action]:
    """What to do, by full name (`namespace/name`): `static` are the static pods to run,
    `mirrors` the mirror pods in the API, `terminating` static pods still being terminated."""
    actions: list[Action] = []
    for full_name, pod in static.items():
        mirror = mirrors.get(full_name)
        if mirror is not None and not is_mirror_of(mirror, pod):
            why = "being deleted" if _meta(mirror).get("deletionTimestamp") else "outdated"
            actions.append(_delete(mirror, why))
            mirror = None
        if mirror is None:
            actions.append(Create(pod))
    for full_name, mirror in mirrors.items():
        if full_name not in static and full_name not in terminating:
            actions.append(_delete(mirror, "its static pod is gone"))
    return actions


def _delete(mirror: Mapping[str, Any], why: str) -> Delete:
    meta = _meta(mirror)
    return Delete(str(meta.get("namespace", "")), str(meta.get("name", "")),
                  str(meta.get("uid", "")), why)


class MirrorPods:
    """Call `set_static_pods`, `set_mirrors` (from the pod watch) and `pod_gone`; run `run()`."""

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
        """`retry`/`retry_max`: back-off after API errors; every `resync` seconds the plan is
        made again from the watch's view alone (seconds)."""
        self._client = client
        self._node_name = node_name
        self._node_uid = node_uid
        self._on_retarget = on_retarget
        self._retry = backoff.Backoff(retry, retry_max)
        self._resync = resync
        self._static: dict[str, pods.Pod] = {}
        self._terminating: dict[pods.PodUID, pods.Pod] = {}
        self._mirrors: dict[str, Obj] = {}  # as the pod watch sees them
        self._created: dict[str, Obj] = {}  # create answers the watch has not shown yet
        self._deleted: set[str] = set()  # UIDs deleted that the watch still shows
        self._targets: dict[pods.PodUID, str | None] = {}
        # Full names taken by a pod that is not our mirror pod: not created until the resync.
        self._blocked: set[str] = set()
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
        self._static = new
        self._blocked &= set(new)
        self._retarget()
        self._wake.set()

    def set_mirrors(self, mirrors: Mapping[str, Obj]) -> None:
        """The mirror pods bound to this node, by full name, as the pod watch has them."""
        self._mirrors = dict(mirrors)
        uids = {_uid(m) for m in mirrors.values()}
        self._deleted &= uids
        self._created = {k: v for k, v in self._created.items()
                         if _uid(mirrors.get(k)) != _uid(v) and _uid(v) not in self._deleted}
        self._retarget()
        self._wake.set()

    def pod_gone(self, uid: pods.PodUID) -> None:
        """A pod worker finished: a static pod that left the manifests may lose its mirror."""
        if self._terminating.pop(uid, None) is not None:
            self._targets.pop(uid, None)
            self._wake.set()

    def mirror_uid(self, pod: pods.Pod) -> str | None:
        """The API UID of static pod `pod`'s live mirror pod, as the watch sees it."""
        mirror = self._mirrors.get(pod.full_name)
        if mirror is None or not is_mirror_of(mirror, pod):
            return None
        uid = _uid(mirror)
        return uid if uid and uid not in self._deleted else None

    def _retarget(self) -> None:
        for pod in [*self._static.values(), *self._terminating.values()]:
            target = self.mirror_uid(pod)
            if self._targets.get(pod.uid) != target:
                self._targets[pod.uid] = target
                if target is not None:
                    self._on_retarget(pod.uid)

    # -- the loop ---------------------------------------------------------------------------

    def _view(self) -> dict[str, Obj]:
        view = {k: v for k, v in self._mirrors.items() if _uid(v) not in self._deleted}
        for full_name, obj in self._created.items():
            view.setdefault(full_name, obj)
        return view

    def pending(self) -> list[Action]:
        terminating = {p.full_name for p in self._terminating.values()}
        static = {k: p for k, p in self._static.items() if k not in self._blocked}
        return plan(static, self._view(), terminating)

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                for action in self.pending():
                    await self._apply(action)
            except kube.KubeError as exc:
                delay = self._retry.next_delay()
                log.warning("cannot update mirror pods, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                continue
            self._retry.reset()
            try:
                await asyncio.wait_for(self._wake.wait(), self._resync)
            except TimeoutError:
                self._blocked.clear()
                self._created.clear()

    async def _apply(self, action: Action) -> None:
        if isinstance(action, Delete):
            log.info("deleting mirror pod %s/%s (%s)", action.namespace, action.name, action.why)
            try:
                await self._client.delete_pod(action.namespace, action.name, uid=action.uid,
                                              grace=0)
                self.deletes += 1
            except (kube.NotFound, kube.Conflict):
                pass  # gone already, or replaced
            self._deleted.add(action.uid)
            self._created = {k: v for k, v in self._created.items() if _uid(v) != action.uid}
            return
        pod = action.pod
        body = mirror_object(pod, node_name=self._node_name, node_uid=self._node_uid())
        try:
            created = await self._client.create_pod(pod.namespace, body)
        except kube.AlreadyExists:
            await self._taken(pod)
            return
        self.creates += 1
        log.info("created mirror pod %s (%s)", pod.full_name, _meta(created).get("uid"))
        self._created[pod.full_name] = created

    async def _taken(self, pod: pods.Pod) -> None:
        """Create found the name taken: our mirror pod the watch has not shown yet, or a pod
        of someone else's, which is left alone (the kubelet does the same)."""
        existing = await self._client.get_pod(pod.namespace, pod.name)
        annotations = _meta(existing).get("annotations") or {}
        if pods.ANNOTATION_CONFIG_MIRROR in annotations:
            self._created[pod.full_name] = existing  # the next plan decides on it
            return
        log.warning("cannot create the mirror pod of static pod %s: a pod of that name that is "
                    "not a mirror pod exists in the API; delete it to see the static pod there",
                    pod.full_name)
        self._blocked.add(pod.full_name)


def _uid(obj: Mapping[str, Any] | None) -> str:
    return str(_meta(obj).get("uid") or "") if obj is not None else ""
