"""What to garbage-collect (pure): the kubelet's container GC policy, as values.

The kubelet's container garbage collector (kuberuntime_gc.go) removes, in this order:

- dead containers: those not running (exited, created, unknown) and created at least
  `min_age` seconds ago, grouped per (pod UID, container name) — an "evict unit" — except,
  unlike the kubelet, a created container that is its unit's newest instance: its pod's
  worker is starting it (see `being_started`). A pod whose
  content should be removed (deleted, or terminated when the eviction manager asks) loses all
  of them; every other unit keeps its newest `max_per_pod_container`; then, when more than
  `max_containers` are left on the node, each unit is cut to a fair share and the oldest go
  until the node is within the limit;
- dead sandboxes: a sandbox is active while READY or while any container (in any state) still
  names it. Of a pod whose content should be removed every inactive sandbox goes; otherwise
  the pod's newest sandbox is always kept (it carries the next attempt number) and the older
  inactive ones go, oldest first;
- the log directories (`<namespace>_<name>_<uid>`) of pods whose content should be removed;
- the links to container logs (/var/log/containers) whose log file is gone, but those of a
  container still alive.

The service (`services/nodehealth/containergc.py`) lists the runtime, asks these functions and only
executes the answer; a pod's worker applies `pod_policy` to its own pod after each sync.
Times: `now` is POSIX seconds; `created_at` is CRI's nanoseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace

from nodelet.model.core import crilogs, runtime

# A unit of eviction: (pod UID, container name).
Unit = tuple[str, str]


@dataclass(frozen=True)
class ContainerGCPolicy:
    """The kubelet's GCPolicy. A negative limit means "no limit"."""

    # Seconds since creation before a dead container may be removed
    # (--minimum-container-ttl-duration, 0).
    min_age: float = 0.0
    # Dead instances kept per container of a pod (--maximum-dead-containers-per-container, 1).
    max_per_pod_container: int = 1
    # Dead containers kept on the whole node (--maximum-dead-containers, -1).
    max_containers: int = -1


def pod_policy(policy: ContainerGCPolicy) -> ContainerGCPolicy:
    """The part of `policy` one pod's worker applies to its own pod: the node-wide limit
    needs every pod's containers, so only the collector enforces it."""
    return replace(policy, max_containers=-1)


def pod_uid(labels: Mapping[str, str]) -> str:
    """The pod UID a sandbox's or container's labels name ("" for none: not the agent's)."""
    return labels.get(runtime.LABEL_POD_UID, "")


# -- containers -------------------------------------------------------------------------------


def evict_units(
    containers: Iterable[runtime.ContainerInfo], *, now: float, min_age: float
) -> dict[Unit, list[runtime.ContainerInfo]]:
    """The evictable containers — not running, created at least `min_age` s before `now` —
    per (pod UID, container name), each list newest first. Containers without a pod UID
    label are not the agent's and never collected."""
    newest = int((now - min_age) * 1e9)
    units: dict[Unit, list[runtime.ContainerInfo]] = {}
    for container in containers:
        uid = pod_uid(container.labels)
        if not uid or container.state is runtime.ContainerState.RUNNING:
            continue
        if container.created_at > newest:
            continue
        units.setdefault((uid, container.name), []).append(container)
    for instances in units.values():
        instances.sort(key=_newest_first)
    return units


def containers_to_remove(
    containers: Iterable[runtime.ContainerInfo],
    policy: ContainerGCPolicy,
    *,
    now: float,
    removable: Set[str] = frozenset(),
) -> tuple[runtime.ContainerInfo, ...]:
    """The dead containers to remove, in removal order (the kubelet's evictContainers).

    `removable`: UIDs of pods whose content should be removed; all their evictable
    containers go first, whatever the limits."""
    containers = list(containers)
    units = evict_units(containers, now=now, min_age=policy.min_age)
    removed: list[runtime.ContainerInfo] = []
    for unit in [u for u in units if u[0] in removable]:
        removed += _oldest_first(units.pop(unit))
    starting = being_started(containers)
    for unit, instances in units.items():
        units[unit] = [c for c in instances if c.id not in starting]
    if policy.max_per_pod_container >= 0:
        removed += _trim_units(units, policy.max_per_pod_container)
    removed += _enforce_node_limit(units, policy.max_containers)
    return tuple(removed)


def being_started(containers: Iterable[runtime.ContainerInfo]) -> frozenset[str]:
    """IDs of the created (not yet started) containers that are the newest instance of their
    (pod UID, container name).

    A pod worker creates a container, then starts it. A collection that lists the runtime
    between the two calls must not count the new instance as the newest dead one: it would
    keep it and remove the dead instance before it — the one that carries the container's
    lastState and `--previous` logs — and then that instance's sandbox. An older created
    container (a start that never came, e.g. the agent stopped in between) is dead like any
    other, and a pod whose content should be removed loses it too."""
    newest: dict[Unit, runtime.ContainerInfo] = {}
    for container in containers:
        uid = pod_uid(container.labels)
        unit = (uid, container.name)
        if uid and (unit not in newest or _newest_first(container) < _newest_first(newest[unit])):
            newest[unit] = container
    return frozenset(c.id for c in newest.values() if c.state is runtime.ContainerState.CREATED)


def _enforce_node_limit(
    units: dict[Unit, list[runtime.ContainerInfo]], limit: int
) -> list[runtime.ContainerInfo]:
    """Above `limit` dead containers on the node: first leave every unit an equal share (at
    least 1), so one crash-looping container cannot push out everyone's last instance; then
    remove the oldest of all until within the limit."""
    if limit < 0 or _count(units) <= limit:
        return []
    removed = _trim_units(units, max(1, limit // len(units)))
    left = sorted((c for instances in units.values() for c in instances), key=_newest_first)
    return removed + _oldest_first(left[limit:])


def _trim_units(
    units: dict[Unit, list[runtime.ContainerInfo]], keep: int
) -> list[runtime.ContainerInfo]:
    """Cut every unit to its newest `keep` (in place); returns what was cut, oldest first."""
    removed: list[runtime.ContainerInfo] = []
    for unit, instances in units.items():
        removed += _oldest_first(instances[keep:])
        units[unit] = instances[:keep]
    return removed


def _count(units: dict[Unit, list[runtime.ContainerInfo]]) -> int:
    return sum(len(instances) for instances in units.values())


def _newest_first(container: runtime.ContainerInfo) -> tuple[int, str]:
    # The ID breaks ties, so equal creation times still give one order.
    return (-container.created_at, container.id)


def _oldest_first(containers: Sequence[runtime.ContainerInfo]) -> list[runtime.ContainerInfo]:
    return sorted(containers, key=_newest_first, reverse=True)


# -- sandboxes --------------------------------------------------------------------------------


def sandboxes_to_remove(
    sandboxes: Iterable[runtime.SandboxInfo],
    containers: Iterable[runtime.ContainerInfo],
    *,
    removable: Set[str] = frozenset(),
) -> tuple[runtime.SandboxInfo, ...]:
    """The inactive sandboxes to remove, oldest first (the kubelet's evictSandboxes).

    `containers` are those still in the runtime (after this round's container removals):
    a sandbox any of them names is active, as is a READY one. A pod in `removable` loses
    every inactive sandbox; any other pod keeps its newest sandbox, active or not."""
    referenced = {c.sandbox_id for c in containers}
    by_pod: dict[str, list[runtime.SandboxInfo]] = {}
    for sandbox in sandboxes:
        uid = pod_uid(sandbox.labels)
        if uid:
            by_pod.setdefault(uid, []).append(sandbox)
    removed: list[runtime.SandboxInfo] = []
    for uid, own in by_pod.items():
        own.sort(key=lambda s: (-s.created_at, s.id))
        candidates = own if uid in removable else own[1:]
        removed += [s for s in candidates
                    if s.state is not runtime.SandboxState.READY and s.id not in referenced]
    return tuple(sorted(removed, key=lambda s: (s.created_at, s.id)))


# -- pod log directories ----------------------------------------------------------------------


def log_directory_uid(name: str) -> str:
    """The pod UID of a pod log directory `<namespace>_<name>_<uid>` (namespaces and names
    cannot hold "_", so the UID is what follows the last one); "" when it has no "_"."""
    _, sep, uid = name.rpartition("_")
    return uid if sep else ""


def log_directories_to_remove(names: Iterable[str], *, removable: Set[str]) -> tuple[str, ...]:
    """The pod log directories (by name) whose pod's content should be removed."""
    return tuple(sorted(n for n in names if log_directory_uid(n) in removable))


# -- the links to container logs --------------------------------------------------------------


def dangling_links_to_remove(dangling: Iterable[str],
                             containers: Iterable[runtime.ContainerInfo]) -> tuple[str, ...]:
    """Of the links (by name, `crilogs.link_name`) whose log file is gone, those to remove,
    as the kubelet's container GC judges them: every one but those of a container the
    runtime still has and that has not exited (a running container's log is missing only
    for a moment while it is rotated). A name cut to 255 bytes ends with the start of its
    container's ID."""
    alive = [c.id for c in containers if c.state is not runtime.ContainerState.EXITED]
    out = []
    for name in dangling:
        found = crilogs.link_container_id(name)
        if found is None or not any(cid.startswith(found) for cid in alive):
            out.append(name)
    return tuple(sorted(out))
