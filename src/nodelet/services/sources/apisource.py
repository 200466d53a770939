"""The API pod source of cluster mode (ConfigMaps and Secrets: `objectwatches`).

`ApiPodSource` lists and watches the pods bound to this node (`fieldSelector=spec.nodeName=`)
and tells `on_pods` the complete desired set after every change to it, converted with
`manifests.pod_from_object(..., source="api", strict=False)` (a pod the API accepted is never
rejected for a field nodelet does not know). What is desired:

- pods in a terminal phase (Succeeded/Failed) stay in the desired set, marked
  `terminal_in_api`: as in the kubelet they are never run again, but their exited containers
  and logs are kept until the pod is deleted (`kubectl logs` of a finished Job's pod);
- a pod with a `deletionTimestamp` is passed once more, with its deletion grace period, and in
  the same breath left out: pod workers take the updated pod and then terminate it with
  `deletionGracePeriodSeconds` — no change to the workers is needed — and it stays out of the
  desired set until the API removes it. `ClusterMode.pod_gone` then issues the final delete;
- a pod that cannot be converted (a volume type nodelet does not run, a value its parser
  refuses) is not left out, which would leave it `Pending` for ever with the reason only in
  this log: it is passed as `apipods.unreadable` makes it, a Pod without containers that
  admission refuses (`Failed`, `UnsupportedPodSpec`, a Warning event), as every pod nodelet
  cannot run. An update that cannot be converted of a pod read before is not run: the pod
  keeps the version read last (its containers run on), and `on_unreadable_update` hears why,
  once per resourceVersion (cluster mode records a Warning event);
- mirror pods (annotation `kubernetes.io/config.mirror`: the API's copies of this node's
  static pods) are never run; `on_mirrors` hears them, by full name, after every change.

A converted pod carries no `status` and no `resourceVersion`/`managedFields` in `Pod.raw`, and
only the conditions of others in `Pod.api_conditions`: a status PATCH of nodelet's own yields an
equal Pod, so it does not wake the pod's worker, while a readiness gate flipped by a controller
does (and Ready is generated again). Such an object is not even parsed again: when what
`pod_from_object` reads is equal to the previous version's, the previous Pod itself is kept
(the same object, so consumers can tell "unchanged" by identity), and when every Pod of the
desired set is the same object as in the set last told, `on_pods` is not called at all.

Exceptions: none escape; API errors are logged and retried by the loops.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodelet.adapters import kube
from nodelet.model.core import apijson, conditions, pods
from nodelet.model.parsing import apipods, manifests

log = logging.getLogger(__name__)

_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class _Converted:
    """One pod object as converted last: its resourceVersion, what `pod_from_object` read
    from it, and the result (None: it could not be converted); `stand_in`: the result only
    stands for a pod that could not be read (`apipods.unreadable`)."""

    rv: str
    source: apijson.Obj
    pod: pods.Pod | None
    stand_in: bool = False


class ApiPodSource:
    def __init__(
        self,
        *,
        client: kube.KubeClient,
        node_name: str,
        on_pods: Callable[[Mapping[pods.PodUID, pods.Pod]], None],
    ) -> None:
        self._node_name = node_name
        self._on_pods = on_pods
        self._converted: dict[pods.PodUID, _Converted] = {}
        self._handed_off: set[pods.PodUID] = set()  # deleting pods already passed once
        self.reflector = kube.Reflector(
            client, path="/api/v1/pods", field_selector=f"spec.nodeName={node_name}",
            on_change=self._changed, name="pod-watch",
        )
        self.on_removed: Callable[[set[pods.PodUID]], None] = lambda uids: None
        self.on_mirrors: Callable[[Mapping[str, apijson.Obj]], None] = lambda mirrors: None
        # (the pod as read last, why its update cannot be run)
        self.on_unreadable_update: Callable[[pods.Pod, str], None] = lambda pod, why: None
        self.desired: Mapping[pods.PodUID, pods.Pod] = {}
        self._announced: Mapping[pods.PodUID, pods.Pod] | None = None  # last told `on_pods`

    async def run(self) -> None:
        await self.reflector.run()

    @property
    def synced(self) -> bool:
        return self.reflector.synced

    def api_object(self, uid: pods.PodUID) -> apijson.Obj | None:
        """The pod as the watch last saw it (None: not in the API, or not bound here)."""
        return self.reflector.store.get(uid)

    def _changed(self, store: Mapping[str, apijson.Obj]) -> None:
        desired: dict[pods.PodUID, pods.Pod] = {}
        deleting: dict[pods.PodUID, pods.Pod] = {}
        mirrors: dict[str, apijson.Obj] = {}
        for raw_uid, obj in store.items():
            uid = pods.PodUID(raw_uid)
            if is_mirror(obj):
                meta = obj.get("metadata", {})
                mirrors[f"{meta.get('namespace')}/{meta.get('name')}"] = obj
                continue
            pod = self._convert(uid, obj)
            if pod is None:
                continue
            (deleting if pod.deletion_timestamp is not None else desired)[uid] = pod
        removed = {uid for uid in self._converted if uid not in store}
        for uid in removed:
            self._converted.pop(uid, None)
            self._handed_off.discard(uid)
        fresh = {uid: p for uid, p in deleting.items() if uid not in self._handed_off}
        if fresh:
            # Workers keep the pod with its deletion grace period, then terminate it.
            self._on_pods({**desired, **fresh})
            self._handed_off |= set(fresh)
        # Most events are status writes, which leave every Pod the same object (`_convert`):
        # the consumers then hear nothing, rather than going over every pod again each time.
        if fresh or self._announced is None or not _same_pods(desired, self._announced):
            self._on_pods(desired)
            self._announced = desired
        self.desired = desired
        self.on_mirrors(mirrors)
        if removed:
            self.on_removed(removed)

    def _convert(self, uid: pods.PodUID, obj: apijson.Obj) -> pods.Pod | None:
        rv = kube.resource_version(obj)
        cached = self._converted.get(uid)
        if cached is not None and cached.rv == rv:
            return cached.pod
        source = _without_status(obj)
        api_conditions = others_conditions(obj)
        terminal = (obj.get("status") or {}).get("phase") in _TERMINAL
        claim_statuses = _claim_statuses(obj)
        pod: pods.Pod | None
        if cached is not None and cached.pod is not None and cached.source == source:
            # Most watch events of a pod are status writes (nodelet's own PATCHes: 4 per pod
            # in a Deployment's life). Equal input, equal Pod: the rest is not parsed again
            # (~140 µs for a Deployment's pod; comparing the dicts ~2 µs), and keeping the
            # same object lets every consumer see "unchanged" by identity.
            pod, stand_in = cached.pod, cached.stand_in
        else:
            read = cached.pod if cached is not None and not cached.stand_in else None
            pod, stand_in = self._parse(uid, source, read)
        if pod is not None and (pod.api_conditions != api_conditions
                                or pod.terminal_in_api != terminal
                                or pod.resource_claim_statuses != claim_statuses):
            pod = dataclasses.replace(pod, api_conditions=api_conditions,
                                      terminal_in_api=terminal,
                                      resource_claim_statuses=claim_statuses)
        self._converted[uid] = _Converted(rv, source, pod, stand_in)
        return pod

    def _parse(self, uid: pods.PodUID, source: apijson.Obj,
               read: pods.Pod | None) -> tuple[pods.Pod | None, bool]:
        """(Pod, whether it stands in): `pod_from_object` of `source`. When that cannot be
        converted: `read` (the version read last, None: none) if there is one, else the Pod
        that admission refuses."""
        try:
            return manifests.pod_from_object(source, node_name=self._node_name, source="api",
                                             strict=False), False
        except manifests.ManifestError as exc:
            path, why = exc.path, exc.message
        except Exception:  # a bug in nodelet must not hide the pod from its user
            log.exception("unexpected error reading pod %s from the API", _name(source, uid))
            path, why = "", ("nodelet cannot read this pod (a bug in nodelet; the node's log "
                             "has the details)")
        return self._instead(uid, source, path, why, read)

    def _instead(self, uid: pods.PodUID, source: apijson.Obj, path: str, why: str,
                 read: pods.Pod | None) -> tuple[pods.Pod | None, bool]:
        """What runs instead of `source`, which cannot be read (`apipods.instead`), said."""
        try:
            found = apipods.instead(source, path=path, why=why, read=read)
        except manifests.ManifestError as exc:  # not an object a real API server serves
            log.error("cannot refuse pod %s from the API: %s", _name(source, uid), exc)
            return None, True
        if found.stand_in:
            log.warning("refusing pod %s from the API: %s", _name(source, uid), found.problem)
        else:
            log.warning("cannot run the update of pod %s from the API; it runs on as it was: "
                        "%s", _name(source, uid), found.problem)
            self.on_unreadable_update(found.pod, found.problem)
        return found.pod, found.stand_in


def _name(obj: apijson.Obj, uid: pods.PodUID) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')} ({uid})"


def _same_pods(new: Mapping[pods.PodUID, pods.Pod], old: Mapping[pods.PodUID, pods.Pod]) -> bool:
    """The same pods, each the same object."""
    return len(new) == len(old) and all(old.get(uid) is pod for uid, pod in new.items())


def is_mirror(obj: Mapping[str, Any]) -> bool:
    annotations = obj.get("metadata", {}).get("annotations") or {}
    return pods.ANNOTATION_CONFIG_MIRROR in annotations


def others_conditions(obj: Mapping[str, Any]) -> tuple[apijson.Obj, ...]:
    """The conditions of the pod's API status that nodelet does not write."""
    found = (obj.get("status") or {}).get("conditions") or ()
    return tuple(c for c in found
                 if isinstance(c, dict) and c.get("type") not in conditions.WRITTEN_TYPES)


def _claim_statuses(obj: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """status.resourceClaimStatuses: the claims made from the pod's templates."""
    found = (obj.get("status") or {}).get("resourceClaimStatuses") or ()
    return tuple((str(c.get("name", "")), str(c.get("resourceClaimName") or ""))
                 for c in found if isinstance(c, dict))


def _without_status(obj: apijson.Obj) -> apijson.Obj:
    """What nodelet runs from: the object minus what every status write changes. Items of a
    list carry no kind/apiVersion (the list has them)."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields")}
    body = {k: v for k, v in obj.items() if k != "status"}
    return {**body, "metadata": meta, "apiVersion": "v1", "kind": "Pod"}
