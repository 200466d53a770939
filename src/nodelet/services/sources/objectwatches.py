"""The ConfigMaps and Secrets of cluster mode, kept current by one watch per object.

This is the kubelet's default change-detection strategy (`Watch`, its watch-based manager;
`model.core.objectrefs` holds the decisions):

- `set_readers(readers)` takes the complete map pod UID → objects the pod reads (volumes, env
  vars, pull secrets). An object that a pod reads and no watch holds gets one: a
  `kube.Reflector` that lists just that object (`fieldSelector=metadata.name=<name>` in its
  namespace's collection) and watches from the list's resourceVersion — with the Reflector's
  bookmarks, inactivity timeout, relist on 410 Gone and reconnect back-off. An object no pod
  reads any more loses its watch and its cached value.
- `lookup(kind, namespace, name)` answers from the cache: None when the object does not exist,
  is not listed yet, or no pod reads it; `listed(kind, namespace, name)` tells the first of
  these from the second.
- `fetched(keys, within=...)` returns once each watched object of `keys` was listed once, so
  that None from `lookup` then means "absent", never "not read yet" (the kubelet's Get waits
  for its reflector's first list too). A watch also says when an absent object is created.
- `on_change(keys)` hears the objects whose value changed — created, changed, deleted, and
  first listed after a lookup found it not listed yet — so the pods reading them are woken at
  once.
- An object seen with `immutable: true` cannot change: its watch stops and its value is kept
  until no pod reads it (as the kubelet's objectCache does).

Exceptions: none escape; list and watch errors are logged and retried by each Reflector.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Set

from nodelet.adapters import kube
from nodelet.helpers import tasks
from nodelet.model.core import apijson, configs, objectrefs, pods
from nodelet.model.parsing import manifests

log = logging.getLogger(__name__)

ObjectKey = objectrefs.ObjectKey


@dataclasses.dataclass(eq=False)
class _Watch:
    """One watched object: its reflector, its task (None once stopped for being immutable)
    and its value as last seen (valid once `listed`); `missed`: looked up before it was
    listed, so that lookup's None was "not read yet"."""

    key: ObjectKey
    reflector: kube.Reflector
    task: asyncio.Task[None] | None = None
    value: configs.ConfigObject | None = None
    listed: bool = False
    missed: bool = False


class ObjectWatches:
    """ConfigMaps and Secrets pods read, by watch (see the module docstring)."""

    def __init__(
        self,
        *,
        client: kube.KubeClient,
        group: tasks.TaskGroup,
        on_change: Callable[[set[ObjectKey]], None],
    ) -> None:
        self._client = client
        self._group = group
        self._on_change = on_change
        self._watches: dict[ObjectKey, _Watch] = {}

    def set_readers(self, readers: Mapping[pods.PodUID, Set[ObjectKey]]) -> None:
        """The complete set of pods and what each reads: watch exactly those objects."""
        changes = objectrefs.watch_changes(self._watches.keys(), readers)
        for key in changes.stop:
            self._drop(key)
        for key in sorted(changes.start):
            self._start(key)

    def lookup(self, kind: str, namespace: str, name: str) -> configs.ConfigObject | None:
        watch = self._watches.get((kind, namespace, name))
        if watch is None:
            return None
        watch.missed = watch.missed or not watch.listed
        return watch.value

    def listed(self, kind: str, namespace: str, name: str) -> bool:
        """Whether None from `lookup` is the API's word (its watch listed the object once);
        True for an object no watch holds."""
        watch = self._watches.get((kind, namespace, name))
        return watch is None or watch.listed

    async def fetched(self, keys: Iterable[ObjectKey], *, within: float) -> None:
        """Wait (at most `within` s) until each watched object of `keys` was listed once."""
        waiting = [w.reflector.listed for key in keys
                   if (w := self._watches.get(key)) is not None and not w.listed]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                for listed in waiting:
                    await listed.wait()

    def watched(self) -> set[ObjectKey]:
        """The objects with a running watch (immutable ones held without one are not)."""
        return {key for key, w in self._watches.items() if w.task is not None}

    # -- the watches ----------------------------------------------------------------------------

    def _start(self, key: ObjectKey) -> None:
        kind, namespace, name = key
        reflector = kube.Reflector(
            self._client, path=kube.core_path(objectrefs.PLURALS[kind], namespace),
            field_selector=objectrefs.field_selector(key),
            on_change=lambda store: self._changed(watch, store),
            name=f"{kind} {namespace}/{name} watch")
        watch = _Watch(key, reflector)
        watch.task = self._group.spawn(f"object-watch:{kind}:{namespace}/{name}",
                                       reflector.run())
        self._watches[key] = watch

    def _drop(self, key: ObjectKey) -> None:
        watch = self._watches.pop(key)
        if watch.task is not None:
            watch.task.cancel()

    def _changed(self, watch: _Watch, store: Mapping[str, apijson.Obj]) -> None:
        """The reflector's store of one object changed (listed, watched or relisted)."""
        if self._watches.get(watch.key) is not watch:
            return  # dropped meanwhile
        value = _value(watch.key, next(iter(store.values()), None))
        first, watch.listed = not watch.listed, True
        # The first list is news only to a reader that looked it up too early (it waited for
        # `fetched` in vain): waking the others would cost each pod one more sync.
        news = watch.missed if first else value != watch.value
        watch.value = value
        if news:
            self._on_change({watch.key})
        if not objectrefs.keeps_watching(value) and watch.task is not None:
            log.info("%s %s/%s is immutable: no longer watched", *watch.key)
            # This runs in the watch's own task: the cancellation ends it at its next await.
            watch.task.cancel()
            watch.task = None


def _value(key: ObjectKey, obj: apijson.Obj | None) -> configs.ConfigObject | None:
    """The object as nodelet uses it; None when absent or unusable (logged)."""
    if obj is None:
        return None
    kind, namespace, name = key
    try:
        return manifests.config_object_from_object(
            {**obj, "kind": kind, "apiVersion": "v1"}, strict=False)
    except manifests.ManifestError as exc:
        log.error("cannot use %s %s/%s from the API: %s", kind, namespace, name, exc)
        return None
