"""Garbage collection of dead containers, dead sandboxes and orphaned pod log directories.

The kubelet's container GC (kuberuntime_gc.go): every `GCSettings.container_gc_period`
seconds `ContainerGC.collect` lists the runtime once, asks `model.core.gc` what to remove and
removes it — containers first (with their log files, which the runtime keeps, and the links
to them), then the sandboxes that are left without containers, then the log directories of
pods that are gone, then the links to container logs that are gone (adapters.loglinks: only
this instance's, those pointing into its pod log directory), then the pod cgroups of pods that
are gone and have nothing left in the runtime (the kubelet's housekeeping removes orphaned pod
cgroups too): a pod's worker removes its pod's cgroups when it terminates it, but a sandbox
whose RunPodSandbox was cancelled by the pod's removal may still be rolled back by the
runtime then, and leaves them behind.

Whose content may go is the agent's call (`removable`): a pod no source wants, judged only
after every source was read once, so nothing is removed because a manifest was not read yet.
Under disk pressure the eviction manager calls `collect(evict_terminated=True)`, which also
empties pods in a terminal phase (`terminated`). A pod's worker applies the per-pod part of
the same policy to its own pod after each sync (`collect_pod`), which keeps a crash-looping
container's dead instances bounded between two collections.

Failures are logged and counted in `GCResult.errors`, never raised: the next round retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path

from nodelet import settings as settings_mod
from nodelet.adapters import cgroups, loglinks
from nodelet.adapters.cri import client as cri
from nodelet.model.core import crilogs, gc, pods, runtime, terminations
from nodelet.services.nodehealth import logrotation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GCResult:
    """What one collection removed, and what it failed to remove (one line per failure)."""

    containers_removed: int = 0
    sandboxes_removed: int = 0
    log_directories_removed: int = 0
    errors: tuple[str, ...] = ()
    links_removed: int = 0
    pod_cgroups_removed: int = 0


@dataclass
class _Tally:
    containers: int = 0
    sandboxes: int = 0
    log_directories: int = 0
    errors: list[str] = field(default_factory=list)
    links: int = 0
    pod_cgroups: int = 0

    def result(self) -> GCResult:
        return GCResult(self.containers, self.sandboxes, self.log_directories,
                        tuple(self.errors), self.links, self.pod_cgroups)


def policy(settings: settings_mod.GCSettings) -> gc.ContainerGCPolicy:
    """The container GC policy the settings ask for."""
    return gc.ContainerGCPolicy(min_age=settings.min_age,
                                max_per_pod_container=settings.max_per_pod_container,
                                max_containers=settings.max_containers)


class ContainerGC:
    def __init__(
        self,
        *,
        client: cri.RuntimeClient,
        settings: settings_mod.GCSettings,
        logs_root: Path,
        removable: Callable[[pods.PodUID], bool],
        terminated: Callable[[pods.PodUID], bool],
        clock: Callable[[], float],
        links_dir: Path | None = None,
        cgroup_root: str | None = None,
    ) -> None:
        """`removable(uid)`: the pod's content should be removed (it is gone, and every source
        was read once); `terminated(uid)`: the pod is in a terminal phase; `clock`: POSIX
        seconds (dead containers younger than `min_age` are kept); `links_dir`: where the
        links to container logs are (None: none are made); `cgroup_root`: the one the pod
        cgroups are under (None: they are not looked at)."""
        self._client = client
        self._links_dir = links_dir
        self._cgroup_root = cgroup_root
        self._settings = settings
        self._policy = policy(settings)
        self._logs_root = logs_root
        self._removable = removable
        self._terminated = terminated
        self._clock = clock
        # The periodic loop and the eviction manager must not collect at the same time.
        self._lock = asyncio.Lock()
        self.last: GCResult | None = None

    async def run(self) -> None:
        """Collect now and then every `container_gc_period` s; a crash of one round is logged
        and the next round runs anyway."""
        while True:
            try:
                await self.collect()
            except Exception:
                log.exception("container garbage collection crashed")
            await asyncio.sleep(self._settings.container_gc_period)

    async def collect(self, *, evict_terminated: bool = False) -> GCResult:
        """One collection; with `evict_terminated`, pods in a terminal phase lose every dead
        container and inactive sandbox too (the eviction manager, under disk pressure)."""
        async with self._lock:
            tally = _Tally()
            await self._collect(tally, evict_terminated=evict_terminated)
            self.last = result = tally.result()
        if result.containers_removed or result.sandboxes_removed or \
                result.log_directories_removed or result.links_removed or \
                result.pod_cgroups_removed:
            log.info("container GC removed %d containers, %d sandboxes, %d pod log "
                     "directories, %d log links, %d pod cgroups (%d errors)",
                     result.containers_removed, result.sandboxes_removed,
                     result.log_directories_removed, result.links_removed,
                     result.pod_cgroups_removed, len(result.errors))
        return result

    async def _collect(self, tally: _Tally, *, evict_terminated: bool) -> None:
        try:
            # Containers before sandboxes, as the kubelet: a sandbox created after the
            # container list is READY, so it cannot be taken for an empty dead one.
            listed = await self._client.list_containers()
            sandboxes = await self._client.list_pod_sandboxes()
        except cri.CriError as exc:
            _failed(tally, "list the runtime for garbage collection", exc)
            return
        removable = frozenset(uid for uid in _uids(listed, sandboxes)
                              if self._to_empty(uid, evict_terminated))
        left = await _remove_dead(
            self._client, listed, sandboxes, policy=self._policy, now=self._clock(),
            removable=removable, tally=tally, links_dir=self._links_dir,
            # Asked again before each removal: a pod that came back meanwhile (a static
            # pod's manifest restored) keeps its things.
            still=lambda uid: self._to_empty(uid, evict_terminated))
        await self._remove_log_directories(left, tally)
        await self._remove_dangling_links(listed, tally)
        await self._remove_pod_cgroups(left, tally)

    def _to_empty(self, uid: str, evict_terminated: bool) -> bool:
        """Whether every dead container and inactive sandbox of the pod should go."""
        puid = pods.PodUID(uid)
        return self._removable(puid) or (evict_terminated and self._terminated(puid))

    async def _remove_log_directories(self, present: Set[str], tally: _Tally) -> None:
        """Log directories of pods that are gone and have nothing left in the runtime (those
        that do keep theirs until a later round removed the rest)."""
        names = await asyncio.to_thread(_directories, self._logs_root)
        gone = {uid for uid in map(gc.log_directory_uid, names)
                if uid and uid not in present and self._removable(pods.PodUID(uid))}
        for name in gc.log_directories_to_remove(names, removable=gone):
            try:
                await asyncio.to_thread(shutil.rmtree, self._logs_root / name)
            except OSError as exc:
                _failed(tally, f"remove pod log directory {name}", exc)
                continue
            tally.log_directories += 1

    async def _remove_dangling_links(self, listed: Iterable[runtime.ContainerInfo],
                                     tally: _Tally) -> None:
        """This instance's links whose log file is gone, but those of a live container
        (`gc.dangling_links_to_remove`; `listed` as before this round's removals, which
        only removed dead ones)."""
        if self._links_dir is None:
            return
        links = await asyncio.to_thread(loglinks.owned, self._links_dir, self._logs_root)
        for name in gc.dangling_links_to_remove([x.name for x in links if x.dangling], listed):
            try:
                await asyncio.to_thread(loglinks.remove, self._links_dir, name)
            except OSError as exc:
                _failed(tally, f"remove log link {name}", exc)
                continue
            tally.links += 1


    async def _remove_pod_cgroups(self, present: Set[str], tally: _Tally) -> None:
        """The pod cgroups of pods that are gone and have nothing left in the runtime, once no
        process is in them."""
        root = self._cgroup_root
        if root is None or root == "/":
            # Under the default root "/", shared with any other agent of the machine, a pod
            # cgroup this agent does not know may be another's, made before its sandbox (and
            # so without a process yet): only a root of the instance's own is swept.
            return
        found = await asyncio.to_thread(cgroups.pod_cgroup_uids, root)
        for uid in sorted(found - set(present)):
            if not self._removable(pods.PodUID(uid)):
                continue
            # Only idle ones: a process still in one is still being stopped.
            left = await asyncio.to_thread(cgroups.remove_idle_pod_cgroups, uid,
                                           cgroup_root=root)
            if left is None:
                continue
            if left:
                _failed(tally, f"remove the cgroups of pod {uid}", OSError(
                    f"busy: {', '.join(left)}"))
                continue
            tally.pod_cgroups += 1


async def collect_pod(
    client: cri.RuntimeClient, state: runtime.PodRuntime, policy: gc.ContainerGCPolicy, *,
    now: float, links_dir: Path | None = None,
) -> GCResult:
    """A pod worker's own collection: `policy`'s per-pod part (`gc.pod_policy`) on one pod
    that is still wanted. Failures are logged and returned, never raised."""
    tally = _Tally()
    await _remove_dead(client, state.containers, state.sandboxes, policy=gc.pod_policy(policy),
                      now=now, removable=frozenset(), tally=tally, links_dir=links_dir)
    return tally.result()


async def _remove_dead(
    client: cri.RuntimeClient,
    listed: Iterable[runtime.ContainerInfo],
    sandboxes: Iterable[runtime.SandboxInfo],
    *,
    policy: gc.ContainerGCPolicy,
    now: float,
    removable: Set[str],
    tally: _Tally,
    still: Callable[[str], bool] = lambda _uid: True,
    links_dir: Path | None = None,
) -> set[str]:
    """Remove what `gc` picks, containers first; a sandbox counts as empty only once its
    containers were really removed. Returns the pod UIDs that still have something in the
    runtime."""
    listed, sandboxes = list(listed), list(sandboxes)
    removed: set[str] = set()
    for container in gc.containers_to_remove(listed, policy, now=now, removable=removable):
        if not _skip(container.labels, removable, still) and await _attempt(
                tally, f"remove container {container.id}",
                remove_container(client, container, links_dir=links_dir)):
            removed.add(container.id)
    left = [c for c in listed if c.id not in removed]
    gone: set[str] = set()
    for sandbox in gc.sandboxes_to_remove(sandboxes, left, removable=removable):
        if not _skip(sandbox.labels, removable, still) and await _attempt(
                tally, f"remove sandbox {sandbox.id}", remove_sandbox(client, sandbox.id)):
            gone.add(sandbox.id)
    tally.containers += len(removed)
    tally.sandboxes += len(gone)
    return _uids(left, [s for s in sandboxes if s.id not in gone])


def _uids(containers: Iterable[runtime.ContainerInfo],
          sandboxes: Iterable[runtime.SandboxInfo]) -> set[str]:
    """The pod UIDs these containers and sandboxes belong to."""
    labels = [c.labels for c in containers] + [s.labels for s in sandboxes]
    return {gc.pod_uid(x) for x in labels} - {""}


def _skip(labels: Mapping[str, str], removable: Set[str], still: Callable[[str], bool]
          ) -> bool:
    """A removable pod's thing whose pod is no longer removable."""
    uid = gc.pod_uid(labels)
    return uid in removable and not still(uid)


async def remove_container(client: cri.RuntimeClient, container: runtime.ContainerInfo, *,
                           links_dir: Path | None = None) -> None:
    """Remove a dead container and then its log files (the runtime keeps them: the kubelet's
    removeContainerLog) and the link to them in `links_dir`. One in UNKNOWN state may still
    run: it is stopped first. Raises CriError (a container already gone is not an error) or
    OSError."""
    log_path = container.log_path or await _log_path(client, container.id)
    if container.state is runtime.ContainerState.UNKNOWN:
        await client.stop_container(container.id, terminations.MIN_GRACE_SECONDS)
    # The collector and the pod's worker may pick the same container at once.
    with contextlib.suppress(cri.NotFound):
        await client.remove_container(container.id)
    await asyncio.to_thread(logrotation.remove_logs, log_path)
    if links_dir is not None:
        await asyncio.to_thread(loglinks.remove, links_dir, log_link_name(container))


def log_link_name(container: runtime.ContainerInfo) -> str:
    """The name of the link to the container's log, from its pod's labels."""
    labels = container.labels
    return crilogs.link_name(labels.get(runtime.LABEL_POD_NAME, ""),
                             labels.get(runtime.LABEL_POD_NAMESPACE, ""), container.name,
                             container.id)


async def remove_sandbox(client: cri.RuntimeClient, sandbox_id: runtime.SandboxID) -> None:
    """Stop, then remove a sandbox: a NOTREADY sandbox keeps its network namespace and IP
    until it is stopped (StopPodSandbox is idempotent). Raises CriError."""
    await client.stop_pod_sandbox(sandbox_id)
    await client.remove_pod_sandbox(sandbox_id)


async def _log_path(client: cri.RuntimeClient, container_id: runtime.ContainerID) -> str:
    """A listed container's log path (ListContainers does not carry it)."""
    try:
        return (await client.container_status(container_id)).log_path
    except cri.NotFound:
        return ""


async def _attempt(tally: _Tally, what: str, action: Awaitable[None]) -> bool:
    try:
        await action
    except (cri.CriError, OSError) as exc:
        _failed(tally, what, exc)
        return False
    return True


def _failed(tally: _Tally, what: str, exc: Exception) -> None:
    log.warning("container GC: %s: %s", what, exc)
    tally.errors.append(f"{what}: {exc}")


def _directories(root: Path) -> list[str]:
    """Names of the directories under `root` (none when it does not exist)."""
    try:
        with os.scandir(root) as entries:
            return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
