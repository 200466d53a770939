"""The API pod source and the ConfigMap/Secret cache of cluster mode.

`ApiPodSource` lists and watches the pods bound to this node (`fieldSelector=spec.nodeName=`)
and tells `on_pods` the complete desired set after every change, converted with
`manifests.pod_from_object(..., source="api", strict=False)` (a pod the API accepted is never
rejected for a field nodelet does not know). What is desired:

- pods in a terminal phase (Succeeded/Failed) are not run, as the kubelet does not;
- a pod with a `deletionTimestamp` is passed once more, with its deletion grace period, and in
  the same breath left out: pod workers take the updated pod and then terminate it with
  `deletionGracePeriodSeconds` — no change to the workers is needed — and it stays out of the
  desired set until the API removes it. `ClusterMode.pod_gone` then issues the final delete;
- a pod that cannot be converted is logged once per resourceVersion and left out;
- mirror pods (annotation `kubernetes.io/config.mirror`: the API's copies of this node's
  static pods) are never run; `on_mirrors` hears them, by full name, after every change.

A converted pod carries no `status` and no `resourceVersion`/`managedFields` in `Pod.raw`, and
only the conditions of others in `Pod.api_conditions`: a status PATCH of nodelet's own yields an
equal Pod, so it does not wake the pod's worker, while a readiness gate flipped by a controller
does (and Ready is generated again).

`ObjectCache` answers the volume manager's synchronous `lookup(kind, namespace, name)` from a
cache: a miss returns None and fetches the object in the background, so a pod's sync first
awaits `fetched(keys)` for the objects it reads (then None means "absent"); every `ttl` the
cached objects are read again. `on_change` hears the keys whose value changed, so the pods
reading them can be woken at once.

Exceptions: none escape; API errors are logged and retried by the loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nodelet.adapters import kube
from nodelet.helpers import tasks
from nodelet.model.core import apijson, conditions, configs, pods
from nodelet.model.parsing import manifests

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str, str]  # (kind, namespace, name)

_TERMINAL = ("Succeeded", "Failed")


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
        self._converted: dict[pods.PodUID, tuple[str, pods.Pod | None]] = {}
        self._handed_off: set[pods.PodUID] = set()  # deleting pods already passed once
        self.reflector = kube.Reflector(
            client, path="/api/v1/pods", field_selector=f"spec.nodeName={node_name}",
            on_change=self._changed, name="pod-watch",
        )
        self.on_removed: Callable[[set[pods.PodUID]], None] = lambda uids: None
        self.on_mirrors: Callable[[Mapping[str, apijson.Obj]], None] = lambda mirrors: None
        self.desired: Mapping[pods.PodUID, pods.Pod] = {}

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
            if pod is None or (obj.get("status") or {}).get("phase") in _TERMINAL:
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
        self.desired = desired
        self._on_pods(desired)
        self.on_mirrors(mirrors)
        if removed:
            self.on_removed(removed)

    def _convert(self, uid: pods.PodUID, obj: apijson.Obj) -> pods.Pod | None:
        rv = kube.resource_version(obj)
        cached = self._converted.get(uid)
        if cached is not None and cached[0] == rv:
            return cached[1]
        try:
            pod: pods.Pod | None = dataclasses.replace(
                manifests.pod_from_object(_without_status(obj), node_name=self._node_name,
                                          source="api", strict=False),
                api_conditions=others_conditions(obj))
        except manifests.ManifestError as exc:
            meta = obj.get("metadata", {})
            log.error("cannot run pod %s/%s (%s) from the API: %s", meta.get("namespace"),
                      meta.get("name"), uid, exc)
            pod = None
        self._converted[uid] = (rv, pod)
        return pod


def is_mirror(obj: Mapping[str, Any]) -> bool:
    annotations = obj.get("metadata", {}).get("annotations") or {}
    return pods.ANNOTATION_CONFIG_MIRROR in annotations


def others_conditions(obj: Mapping[str, Any]) -> tuple[apijson.Obj, ...]:
    """The conditions of the pod's API status that nodelet does not write."""
    found = (obj.get("status") or {}).get("conditions") or ()
    return tuple(c for c in found
                 if isinstance(c, dict) and c.get("type") not in conditions.WRITTEN_TYPES)


def _without_status(obj: apijson.Obj) -> apijson.Obj:
    """What nodelet runs from: the object minus what every status write changes. Items of a
    list carry no kind/apiVersion (the list has them)."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields")}
    body = {k: v for k, v in obj.items() if k != "status"}
    return {**body, "metadata": meta, "apiVersion": "v1", "kind": "Pod"}


class ObjectCache:
    """ConfigMaps and Secrets read from the API for volumes (see the module docstring)."""

    def __init__(
        self,
        *,
        client: kube.KubeClient,
        on_change: Callable[[set[ObjectKey]], None],
        ttl: float = 30.0,
        retry: float = 2.0,
    ) -> None:
        self._client = client
        self._on_change = on_change
        self._ttl = ttl
        self._retry = retry
        # key -> (object or None when it does not exist, monotonic time fetched)
        self._cache: dict[ObjectKey, tuple[configs.ConfigObject | None, float]] = {}
        self._wanted: set[ObjectKey] = set()
        self._used: dict[ObjectKey, float] = {}
        self._wake = asyncio.Event()
        self._refreshed = asyncio.Event()
        self.fetches = 0

    def lookup(self, kind: str, namespace: str, name: str) -> configs.ConfigObject | None:
        key = (kind, namespace, name)
        self._used[key] = time.monotonic()
        cached = self._cache.get(key)
        if cached is None:
            self._wanted.add(key)
            self._wake.set()
            return None
        return cached[0]

    async def fetched(self, keys: Iterable[ObjectKey], *, within: float) -> None:
        """Wait (at most `within` s) until each object was read from the API once, found or
        not: a lookup then means "absent" rather than "not fetched yet" (the kubelet's object
        managers wait for their first read too)."""
        missing = [key for key in keys if key not in self._cache]
        for key in missing:
            self.lookup(*key)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while any(key not in self._cache for key in missing):
                    self._refreshed.clear()
                    await self._refreshed.wait()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            await self._refresh()
            self._refreshed.set()
            await tasks.wait_event(self._wake, min(self._ttl, self._retry))

    async def _refresh(self) -> None:
        now = time.monotonic()
        stale = {k for k, (_, at) in self._cache.items() if now - at >= self._ttl}
        for key in [k for k, used in self._used.items() if now - used > 10 * self._ttl]:
            self._used.pop(key, None)
            self._cache.pop(key, None)
            stale.discard(key)
        todo, self._wanted = self._wanted | stale, set()
        changed: set[ObjectKey] = set()
        for key in sorted(todo):
            try:
                value = await self._fetch(key)
            except kube.KubeError as exc:
                log.warning("cannot read %s %s/%s: %s", *key, exc)
                self._wanted.add(key)
                continue
            previous = self._cache.get(key)
            self._cache[key] = (value, time.monotonic())
            if previous is None or previous[0] != value:
                changed.add(key)
        if changed:
            self._on_change(changed)

    async def _fetch(self, key: ObjectKey) -> configs.ConfigObject | None:
        kind, namespace, name = key
        self.fetches += 1
        try:
            if kind == "ConfigMap":
                obj = await self._client.get_config_map(namespace, name)
            else:
                obj = await self._client.get_secret(namespace, name)
        except kube.NotFound:
            return None
        try:
            return manifests.config_object_from_object(
                {"kind": kind, "apiVersion": "v1", **obj}, strict=False)
        except manifests.ManifestError as exc:
            log.error("cannot use %s %s/%s from the API: %s", kind, namespace, name, exc)
            return None
