"""The eviction manager: watches the node's pressure signals and evicts pods to relieve it, as
the kubelet's (pkg/kubelet/eviction/eviction_manager.go, `synchronize`).

Every `monitoring_period` seconds one pass:
1. observe memory.available (the root memory cgroup's working set against MemTotal),
   nodefs.* (the data dir's filesystem), imagefs.* (the runtime's image filesystem, CRI
   ImageFsInfo) and pid.available;
2. update the node's pressure conditions (read by node status and by admission);
3. evict every pod over a local storage limit (a disk-backed emptyDir over its sizeLimit,
   containers over their ephemeral-storage limits), whatever the node's state;
4. for a threshold met (a soft one for its grace period): on disk, first reclaim what the
   node holds — dead containers and sandboxes (also those of terminated pods), unused
   images — and observe again (when the images have a filesystem of their own, nodefs
   pressure reclaims nothing there, as in the kubelet); if the pressure stays, evict ONE
   pod, the first in the kubelet's ranking, then wait for the next pass to see the effect.

An evicted pod is Failed with reason `Evicted`, the kubelet's message, a DisruptionTarget
condition (TerminationByKubelet) and a Warning `Evicted` event; its containers are stopped
with no grace period for a hard threshold (at most `max_pod_grace_period` for a soft one).
What is decided — thresholds, conditions, ranking, messages — is `model.core.eviction`; this
module measures and acts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nodelet import settings as settings_mod
from nodelet.adapters import host
from nodelet.adapters.cri import client as cri
from nodelet.model.core import eviction, pods, runtime, specs, volumes
from nodelet.services.status import recording

log = logging.getLogger(__name__)

# How long a pass waits for an evicted pod to give its resources back (podCleanupTimeout).
POD_CLEANUP_TIMEOUT = 30.0
_DISK_SIGNALS = frozenset({eviction.NODEFS_AVAILABLE, eviction.NODEFS_INODES_FREE,
                           eviction.IMAGEFS_AVAILABLE, eviction.IMAGEFS_INODES_FREE})


class Stats(Protocol):
    """What the manager reads from the runtime (`cri.RuntimeClient` fits)."""

    async def list_container_stats(
        self, labels: dict[str, str] | None = None) -> list[runtime.ContainerStats]: ...

    async def image_fs_info(self) -> list[runtime.FilesystemUsage]: ...


@dataclass(frozen=True)
class Reclaimers:
    """Node-level reclaim tried before evicting a pod under disk pressure: remove dead
    containers and sandboxes (also of terminated pods), and unused images."""

    containers: Callable[[], Awaitable[object]] | None = None
    images: Callable[[], Awaitable[int]] | None = None


@dataclass(frozen=True)
class Paths:
    """Where the node keeps what counts as a pod's ephemeral storage."""

    data_dir: Path  # nodefs: the filesystem of the data dir
    logs_root: Path
    volumes_dir: Callable[[pods.PodUID], Path]


@dataclass(frozen=True)
class Node:
    """What the manager observes: the runtime's stats, where pods keep their ephemeral
    storage, and the machine's memory (bytes; 0: unknown)."""

    stats: Stats
    paths: Paths
    memory_capacity: int = 0


@dataclass(frozen=True)
class PodControl:
    """The pods the manager weighs and how it evicts one: `active()` the pods admitted and not
    terminal; `evict(pod, message, grace)` fails one for good (False if it could not)."""

    active: Callable[[], Iterable[pods.Pod]]
    evict: Callable[[pods.Pod, str, float | None], bool]


class EvictionManager:
    def __init__(
        self,
        *,
        settings: settings_mod.EvictionSettings,
        thresholds: Sequence[eviction.Threshold],
        node: Node,
        control: PodControl,
        recorder: recording.EventRecorder,
        reclaimers: Reclaimers = Reclaimers(),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._thresholds = tuple(thresholds)
        self._stats = node.stats
        self._paths = node.paths
        self._active_pods = control.active
        self._evict = control.evict
        self._recorder = recorder
        self._reclaimers = reclaimers
        self._memory_capacity = node.memory_capacity
        self._monotonic = monotonic
        self._pressure = eviction.Pressure()
        self._conditions: frozenset[str] = frozenset()
        # The runtime's images are on another filesystem than the data dir.
        self._dedicated_imagefs = False
        # Pods evicted and not yet cleaned up → when to stop waiting (monotonic seconds).
        self._cleaning: dict[pods.PodUID, float] = {}
        self.observations: eviction.Observations = {}
        # Passes made and pods evicted, for tests and logs.
        self.passes = 0
        self.evicted = 0

    def conditions(self) -> frozenset[str]:
        """The node's pressure conditions now (MemoryPressure, DiskPressure, PIDPressure)."""
        return self._conditions

    async def run(self) -> None:
        while True:
            try:
                await self.synchronize()
            except Exception:  # a pass that fails must not end the manager
                log.exception("eviction manager: observing the node failed")
            await asyncio.sleep(self._settings.monitoring_period)

    # -- one pass ------------------------------------------------------------------------------

    async def synchronize(self) -> pods.Pod | None:
        """One pass; returns the pod evicted for node pressure, if any."""
        self.passes += 1
        now = self._monotonic()
        self.observations = await self._observe()
        self._pressure = eviction.step(
            self._pressure, eviction.met(self._thresholds, self.observations), now)
        self._set_conditions(eviction.conditions(
            self._pressure, now, self._settings.pressure_transition_period))
        if self._cleaning_up(now):
            return None
        active = [p for p in self._active_pods()
                  if not eviction.is_critical(p, static_pods_critical=self._critical_static)]
        if await self._local_storage_eviction(active):
            return None
        acting = _by_priority(eviction.past_grace(self._pressure, now))
        if not acting:
            return None
        threshold = acting[0]
        resource = eviction.RESOURCE_OF[threshold.signal]
        self._recorder.record_node("Warning", "EvictionThresholdMet",
                                   f"Attempting to reclaim {resource}")
        if threshold.signal in _DISK_SIGNALS and await self._reclaimed_node_level(threshold):
            return None
        return await self._evict_one(threshold, active)

    def _cleaning_up(self, now: float) -> bool:
        """Whether a pod evicted before is still giving its resources back (its volumes not
        yet torn down): no further pod is judged until it has, or for at most
        `POD_CLEANUP_TIMEOUT` seconds (the kubelet's waitForPodsCleanup), so one eviction is
        seen to work before another pod is chosen."""
        for uid, deadline in list(self._cleaning.items()):
            if now >= deadline or not self._paths.volumes_dir(uid).exists():
                del self._cleaning[uid]
        return bool(self._cleaning)

    @property
    def _critical_static(self) -> bool:
        return self._settings.static_pods_critical

    def _set_conditions(self, now: frozenset[str]) -> None:
        for name in sorted(now - self._conditions):
            log.warning("eviction manager: node has %s (thresholds met: %s)", name, ", ".join(
                t.written() for t in self._pressure.first_met
                if eviction.CONDITION_OF[t.signal] == name) or "within the transition period")
        for name in sorted(self._conditions - now):
            log.info("eviction manager: node no longer has %s", name)
        self._conditions = now

    async def _reclaimed_node_level(self, threshold: eviction.Threshold) -> bool:
        """Dead containers and unused images first; True when that relieved the pressure.
        As the kubelet: when the images have a filesystem of their own, nodefs pressure
        reclaims nothing there (removing images would not help it)."""
        if self._dedicated_imagefs and threshold.signal.startswith("nodefs."):
            return False
        if self._reclaimers.containers is not None:
            await self._reclaimers.containers()
        if self._reclaimers.images is not None:
            freed = await self._reclaimers.images()
            log.info("eviction manager: removed unused images, %d bytes freed", freed)
        self.observations = await self._observe()
        if not eviction.met([threshold], self.observations):
            log.info("eviction manager: %s relieved by reclaiming node-level resources",
                     threshold.signal)
            return True
        return False

    async def _evict_one(self, threshold: eviction.Threshold,
                         active: list[pods.Pod]) -> pods.Pod | None:
        resource = eviction.RESOURCE_OF[threshold.signal]
        seen = self.observations[threshold.signal]
        for usage in eviction.rank(resource, await self._usages(active)):
            message = eviction.eviction_message(threshold, seen, usage)
            if self._fail(usage.pod, message, self._grace(threshold, usage.pod)):
                return usage.pod
        log.error("eviction manager: unable to evict any pod to reclaim %s", resource)
        return None

    def _grace(self, threshold: eviction.Threshold, pod: pods.Pod) -> float:
        if threshold.hard:
            return 0.0
        limit = self._settings.max_pod_grace_period
        own = float(pod.spec.termination_grace_period_seconds)
        return min(own, limit) if limit > 0 else own

    async def _local_storage_eviction(self, active: list[pods.Pod]) -> bool:
        """Evict the pods over a local storage limit; True if any was."""
        limited = [p for p in active if _has_local_limits(p)]
        if not limited:
            return False
        evicted = False
        for usage in await self._usages(limited):
            message = eviction.local_storage_violation(usage)
            if message is not None and self._fail(usage.pod, message, 0.0):
                evicted = True
        return evicted

    def _fail(self, pod: pods.Pod, message: str, grace: float) -> bool:
        if not self._evict(pod, message, grace):
            return False
        self._cleaning[pod.uid] = self._monotonic() + POD_CLEANUP_TIMEOUT
        self.evicted += 1
        log.warning("eviction manager: evicting pod %s (%s): %s", pod.full_name, pod.uid,
                    message.strip())
        self._recorder.record(pod, "Warning", eviction.REASON, message)
        return True

    # -- measuring -----------------------------------------------------------------------------

    async def _observe(self) -> dict[str, eviction.Observation]:
        out: dict[str, eviction.Observation] = {}
        out.update(await asyncio.to_thread(self._observe_host))
        try:
            filesystems = await self._stats.image_fs_info()
        except cri.CriError as exc:
            log.warning("eviction manager: cannot read the image filesystem: %s", exc)
            filesystems = []
        if filesystems:
            imagefs = Path(filesystems[0].mountpoint)
            out.update(await asyncio.to_thread(_filesystem, imagefs, "imagefs"))
            self._dedicated_imagefs = not await asyncio.to_thread(
                _same_filesystem, imagefs, self._paths.data_dir)
        return out

    def _observe_host(self) -> dict[str, eviction.Observation]:
        out = _filesystem(self._paths.data_dir, "nodefs")
        if self._memory_capacity:
            try:
                used = host.memory_working_set()
                out[eviction.MEMORY_AVAILABLE] = eviction.Observation(
                    max(self._memory_capacity - used, 0), self._memory_capacity)
            except OSError as exc:
                log.warning("eviction manager: cannot read memory usage: %s", exc)
        try:
            most, running = host.pid_counts()
            out[eviction.PID_AVAILABLE] = eviction.Observation(max(most - running, 0), most)
        except (OSError, ValueError, IndexError) as exc:
            log.warning("eviction manager: cannot read the process count: %s", exc)
        return out

    async def _usages(self, active: Sequence[pods.Pod]) -> list[eviction.PodUsage]:
        """What each pod uses: its containers (memory, writable layer, logs), its disk-backed
        emptyDirs, its processes."""
        if not active:
            return []
        try:
            stats = await self._stats.list_container_stats()
        except cri.CriError as exc:
            log.warning("eviction manager: cannot read container stats: %s", exc)
            stats = []
        by_pod: dict[str, list[runtime.ContainerStats]] = {}
        for s in stats:
            by_pod.setdefault(s.pod_uid, []).append(s)
        return [await asyncio.to_thread(self._usage, pod, by_pod.get(pod.uid, []))
                for pod in active]

    def _usage(self, pod: pods.Pod, stats: list[runtime.ContainerStats]) -> eviction.PodUsage:
        log_dir = Path(specs.pod_log_directory(self._paths.logs_root, pod))
        containers = []
        for s in stats:
            logs, log_inodes = host.directory_usage(log_dir / s.name)
            containers.append(eviction.ContainerUsage(
                name=s.name, memory=s.memory_working_set or 0,
                ephemeral=(s.writable_layer_bytes or 0) + logs,
                inodes=(s.writable_layer_inodes or 0) + log_inodes))
        empty_dirs: dict[str, int] = {}
        empty_dir_inodes = 0
        volumes_dir = self._paths.volumes_dir(pod.uid) / volumes.PLUGIN_DIRS["emptyDir"]
        for volume in pod.spec.volumes:
            if volume.source_type == "emptyDir" and volume.source.get("medium") != "Memory":
                used, inodes = host.directory_usage(volumes_dir / volume.name)
                empty_dirs[volume.name] = used
                empty_dir_inodes += inodes
        return eviction.PodUsage(
            pod=pod, containers=tuple(containers), empty_dirs=empty_dirs,
            empty_dir_inodes=empty_dir_inodes,
            processes=host.cgroup_processes(specs.pod_cgroup_parent(pod)))


def _filesystem(path: Path, prefix: str) -> dict[str, eviction.Observation]:
    try:
        fs = host.filesystem_stats(path)
    except OSError as exc:
        log.warning("eviction manager: cannot read the filesystem of %s: %s", path, exc)
        return {}
    return {f"{prefix}.available": eviction.Observation(fs.available, fs.capacity),
            f"{prefix}.inodesFree": eviction.Observation(fs.inodes_free, fs.inodes)}


def _same_filesystem(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return True  # cannot tell: treat as one, so reclaim tries everything


def _by_priority(thresholds: Iterable[eviction.Threshold]) -> list[eviction.Threshold]:
    """Memory first, as the kubelet's byEvictionPriority; then disk, then PIDs."""
    order = {eviction.MEMORY_PRESSURE: 0, eviction.DISK_PRESSURE: 1, eviction.PID_PRESSURE: 2}
    return sorted(thresholds, key=lambda t: order[eviction.CONDITION_OF[t.signal]])


def _has_local_limits(pod: pods.Pod) -> bool:
    return any(c.resources.ephemeral_storage_limit for c in pod.spec.containers) or any(
        v.source_type == "emptyDir" and v.source.get("sizeLimit") for v in pod.spec.volumes)
