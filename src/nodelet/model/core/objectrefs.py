"""Which ConfigMaps and Secrets cluster mode watches (pure): the kubelet's watch-based manager.

The kubelet keeps one watch per object a pod reads (`pkg/kubelet/util/manager/
watch_based_manager.go`): it is started when the first pod referencing the object is registered
and stopped when the last one goes (a reference count per object), and it is stopped for good
once the object is seen `immutable: true` — an immutable object cannot change, so its cached
copy stays valid. `services.sources.objectwatches` carries these decisions out.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from nodelet.model.core import configs, pods

ObjectKey = tuple[str, str, str]  # (kind "ConfigMap" | "Secret", namespace, name)

# The collection (plural) each kind is listed and watched in.
PLURALS: Mapping[str, str] = {"ConfigMap": "configmaps", "Secret": "secrets"}


@dataclass(frozen=True)
class WatchChanges:
    """What to do to the set of watches: start these, stop those."""

    start: frozenset[ObjectKey]
    stop: frozenset[ObjectKey]


def referenced(readers: Mapping[pods.PodUID, Set[ObjectKey]]) -> dict[ObjectKey, int]:
    """Each object read by at least one pod, with the number of pods reading it."""
    counts: dict[ObjectKey, int] = {}
    for keys in readers.values():
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
    return counts


def watch_changes(
    held: Set[ObjectKey], readers: Mapping[pods.PodUID, Set[ObjectKey]]
) -> WatchChanges:
    """The watches to start and stop so that exactly the objects some pod reads are held.

    `held`: the objects that have a watch (or, immutable, a cached copy) now. Objects of kinds
    other than ConfigMap and Secret are never watched."""
    wanted = {key for key in referenced(readers) if key[0] in PLURALS}
    return WatchChanges(start=frozenset(wanted - held), stop=frozenset(held - wanted))


def keeps_watching(value: configs.ConfigObject | None) -> bool:
    """Whether an object needs its watch after this value was seen: not once it is immutable
    (an absent object may still be created, so it is watched on)."""
    return value is None or not value.immutable


def field_selector(key: ObjectKey) -> str:
    """The list and watch of one object: its name in its namespace's collection."""
    return f"metadata.name={key[2]}"
