"""Prometheus metrics: the kubelet's names where the meaning is the same, plus nodelet's own.

One `CollectorRegistry` per agent (no global registry), served at `/metrics`. Labels are
bounded: no pod names or UIDs. Sandbox failures are counted by an error class derived from the
runtime's error (`model.core.sandboxerrors.classify_sandbox_error`, pure).

What feeds it:
- `observe_operation`: the CRI client's `OperationObserver` (every RPC, kubelet operation names);
- the `observers.SyncObserver` hooks (sandbox creation, volume failures);
- `observe_status`: a status manager subscriber (condition latencies, pod start SLI, status
  update latency, and with the PodTerminationSLI gate the KEP's termination SLI);
- `observe_event`: an event recorder subscriber (image pull times and failures);
- `runtime_changed`: the relist saw a pod's runtime state change (status update latency);
- `forget`: the pod is gone (per-pod bookkeeping is dropped);
- `observe_checkpoint_write`: the checkpoint writer's observer (after every write attempt).

What reads it: `render` (the `/metrics` text) and `sandbox_metrics` (the web UI's node page, as
`model.reports.histograms` values: prometheus_client stays inside this module).

Latencies measured from condition transition times only count transitions made while this
agent runs: a pod adopted after a restart is not observed again with its old times.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import prometheus_client as prom

from nodelet.adapters import checkpoint as cp
from nodelet.adapters.cri import client as cri
from nodelet.model.core import events as ev
from nodelet.model.core import pods, runtime, sandboxerrors, status, summary, terminations
from nodelet.model.reports import histograms as hg

# Sandbox creation is 0.1-0.5 s here, slower under load; the kubelet's buckets start at 5 ms.
_SANDBOX_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_DETECTION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
# The kubelet's runtime operation buckets: exponential from 5 ms by 2.5, 14 of them.
_OPERATION_BUCKETS = tuple(0.005 * 2.5**i for i in range(14))
# The kubelet's pod start SLI buckets, with two below 0.5 s: pods here start in well under 1 s.
_POD_START_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240,
                      300, 360, 480, 600, 900, 1200, 1800, 2700, 3600)
_STATUS_UPDATE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

def _condition_true(pod_status: status.PodStatus) -> status.PodCondition | None:
    for type_ in (status.POD_READY_TO_START_CONTAINERS, status.POD_HAS_NETWORK):
        cond = pod_status.condition(type_)
        if cond is not None and cond.status == "True":
            return cond
    return None


def _all_running(pod: pods.Pod, pod_status: status.PodStatus) -> bool:
    """Every app container is running (the kubelet's "pod started" for its SLI)."""
    wanted = {c.name for c in pod.spec.containers}
    running = {c.name for c in pod_status.container_statuses
               if isinstance(c.state, status.ContainerStateRunning)}
    return bool(wanted) and wanted <= running


def status_inputs(state: runtime.PodRuntime) -> tuple[object, ...]:
    """The part of a pod's runtime state its status shows: the newest sandbox's state and the
    newest instance of each container. Removing an old exited instance changes none of it."""
    sandbox = (state.sandboxes[0].id, state.sandboxes[0].state) if state.sandboxes else None
    newest: dict[str, tuple[object, ...]] = {}
    for container in state.containers:  # newest first
        newest.setdefault(container.name, (container.id, container.state))
    return sandbox, tuple(sorted(newest.items()))


@dataclass
class _PodTrack:
    """Per-pod bookkeeping (dropped by `forget`)."""

    status_seen: bool = False
    sandbox_ready_seen: bool = False
    ready_seen: bool = False
    started_seen: bool = False  # all containers running, already measured (or adopted so)
    termination_seen: bool = False  # the termination SLI, already measured
    pull_started: datetime | None = None  # first Pulling event
    pull_finished: datetime | None = None  # last Pulled event
    change_seen: float | None = None  # monotonic time the relist saw an unreflected change
    reflected: tuple[object, ...] | None = None  # status_inputs behind the last stored status


class Metrics:
    """The node's Prometheus metrics; also the workers' `observers.SyncObserver`."""

    def __init__(self, *, clock: Callable[[], datetime] | None = None,
                 termination_sli: bool = False) -> None:
        """`termination_sli`: the PodTerminationSLI gate (the termination histogram)."""
        self._clock = clock or (lambda: datetime.now(UTC))
        self._since = self._clock()
        self._pods: dict[pods.PodUID, _PodTrack] = {}
        self._runtime: Callable[[pods.PodUID], runtime.PodRuntime] | None = None
        self.registry = prom.CollectorRegistry()
        self._kubelet_metrics()
        self._nodelet_metrics()
        self.termination: prom.Histogram | None = None
        if termination_sli:
            self.termination = prom.Histogram(
                "nodelet_pod_termination_duration_seconds",
                "KEP-3085's termination SLI: time from a pod's deletion request "
                "(deletionTimestamp minus deletionGracePeriodSeconds; for a static pod, its "
                "manifest going away) to PodReadyToStartContainers turning False.",
                buckets=_POD_START_BUCKETS, registry=self.registry)

    def _kubelet_metrics(self) -> None:
        r = self.registry
        self.run_sandbox_duration = prom.Histogram(
            "kubelet_run_podsandbox_duration_seconds",
            "Duration in seconds of the run_podsandbox operations.",
            ["runtime_handler"], buckets=_SANDBOX_BUCKETS, registry=r)
        self.run_sandbox_errors = prom.Counter(
            "kubelet_run_podsandbox_errors_total",
            "Cumulative number of the run_podsandbox operation errors by RuntimeClass.",
            ["runtime_handler"], registry=r)
        self.started_pods = prom.Counter(
            "kubelet_started_pods_total", "Cumulative number of pods started", registry=r)
        self.started_pods_errors = prom.Counter(
            "kubelet_started_pods_errors_total",
            "Cumulative number of errors when starting pods", registry=r)
        self.operations = prom.Counter(
            "kubelet_runtime_operations_total",
            "Cumulative number of runtime operations by operation type.",
            ["operation_type"], registry=r)
        self.operation_duration = prom.Histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            ["operation_type"], buckets=_OPERATION_BUCKETS, registry=r)
        self.operation_errors = prom.Counter(
            "kubelet_runtime_operations_errors_total",
            "Cumulative number of runtime operation errors by operation type.",
            ["operation_type"], registry=r)
        self.pod_start_sli = prom.Histogram(
            "kubelet_pod_start_sli_duration_seconds",
            "Duration in seconds to start a pod, excluding time to pull images, measured from "
            "the pod being first seen (its creationTimestamp) to the first status in which all "
            "its containers are running. Pull time is the span from the pod's first Pulling to "
            "its last Pulled event, as the kubelet's pod startup latency tracker measures it.",
            buckets=_POD_START_BUCKETS, registry=r)

        # The kubelet's volume stats collector: each claim's volume by its figures.
        self.volume_stats = {
            key: prom.Gauge(f"kubelet_volume_stats_{key}", help_, ["namespace",
                            "persistentvolumeclaim"], registry=r)
            for key, help_ in (
                ("capacity_bytes", "Capacity in bytes of the volume"),
                ("available_bytes", "Number of available bytes in the volume"),
                ("used_bytes", "Number of used bytes in the volume"),
                ("inodes", "Maximum number of inodes in the volume"),
                ("inodes_free", "Number of free inodes in the volume"),
                ("inodes_used", "Number of used inodes in the volume"),
            )}

    def set_volume_stats(self, volumes: list[tuple[str, str, summary.Fs]]) -> None:
        """The claims' volumes as last measured ((namespace, claim, figures)); the claims
        not in the list are dropped. A figure the volume did not say is left out."""
        for gauge in self.volume_stats.values():
            gauge.clear()
        for namespace, claim, fs in volumes:
            for key, value in (("capacity_bytes", fs.capacity), ("available_bytes", fs.available),
                               ("used_bytes", fs.used), ("inodes", fs.inodes),
                               ("inodes_free", fs.inodes_free), ("inodes_used", fs.inodes_used)):
                if value is not None:
                    self.volume_stats[key].labels(namespace, claim).set(value)

    def _nodelet_metrics(self) -> None:
        r = self.registry
        self.sandbox_failures = prom.Counter(
            "nodelet_sandbox_failures_total",
            "Failures that keep a pod's sandbox or containers from starting, by error class: "
            "RunPodSandbox errors, volume setup errors (volume_missing) and image pull errors "
            "(image_pull).", ["error_class"], registry=r)
        self.sandbox_ready_latency = prom.Histogram(
            "nodelet_pod_sandbox_ready_duration_seconds",
            "Time from PodScheduled to the first PodReadyToStartContainers=True.",
            buckets=_SANDBOX_BUCKETS, registry=r)
        self.ready_after_sandbox = prom.Histogram(
            "nodelet_pod_ready_after_sandbox_seconds",
            "Time from PodReadyToStartContainers=True to the first Ready=True of a pod "
            "(image pulls, init containers, container starts and readiness probes).",
            buckets=_POD_START_BUCKETS, registry=r)
        self.status_update = prom.Histogram(
            "nodelet_pod_status_update_duration_seconds",
            "Time from the relist seeing a change in a pod's runtime state that its status "
            "shows (the newest sandbox's state, or the newest instance of a container changing "
            "state or being replaced) to the status manager storing the pod's next status.",
            buckets=_STATUS_UPDATE_BUCKETS, registry=r)
        self.detection = prom.Histogram(
            "nodelet_sandbox_ready_detection_seconds",
            "Time from RunPodSandbox returning to the condition being True in the status cache.",
            buckets=_DETECTION_BUCKETS, registry=r)
        self.checkpoint_write_failures = prom.Counter(
            "nodelet_checkpoint_write_failures_total",
            "Failed attempts to write the checkpoint (disk full, locked longer than the busy "
            "timeout...); what they held stays pending and is retried.", registry=r)
        self.checkpoint_pending = prom.Gauge(
            "nodelet_checkpoint_pending_writes",
            "Checkpoint entries (pod statuses, events) not written yet, as of the last write "
            "attempt.", registry=r)

    def _track(self, uid: pods.PodUID) -> _PodTrack:
        return self._pods.setdefault(uid, _PodTrack())

    def watch_runtime(self, lookup: Callable[[pods.PodUID], runtime.PodRuntime]) -> None:
        """Where to read a pod's cached runtime state (the relister's), for status updates."""
        self._runtime = lookup

    def forget(self, uid: pods.PodUID) -> None:
        self._pods.pop(uid, None)

    # -- CRI client observer ----------------------------------------------------------------

    def observe_operation(self, operation: str, seconds: float, error: cri.CriError | None) -> None:
        self.operations.labels(operation_type=operation).inc()
        self.operation_duration.labels(operation_type=operation).observe(seconds)
        if error is not None:
            self.operation_errors.labels(operation_type=operation).inc()

    # -- SyncObserver -----------------------------------------------------------------------

    def sandbox_starting(self, pod: pods.Pod) -> None:
        self.started_pods.inc()

    def sandbox_created(self, pod: pods.Pod, seconds: float) -> None:
        self.run_sandbox_duration.labels(runtime_handler=pod.spec.runtime_class_name).observe(seconds)

    def sandbox_failed(self, pod: pods.Pod, message: str, code: str, seconds: float) -> None:
        self.run_sandbox_duration.labels(runtime_handler=pod.spec.runtime_class_name).observe(seconds)
        self.run_sandbox_errors.labels(runtime_handler=pod.spec.runtime_class_name).inc()
        self.started_pods_errors.inc()
        error_class = sandboxerrors.classify_sandbox_error(message, code=code)
        self.sandbox_failures.labels(error_class=error_class).inc()

    def sandbox_ready(self, pod: pods.Pod, returned_at: float | None) -> None:
        if returned_at is not None:
            self.detection.observe(time.monotonic() - returned_at)

    def volume_failed(self, pod: pods.Pod, message: str) -> None:
        self.sandbox_failures.labels(error_class="volume_missing").inc()

    # -- relist -----------------------------------------------------------------------------

    def runtime_changed(self, uid: pods.PodUID) -> None:
        """The relist saw the pod's runtime state change (before its worker is woken)."""
        track = self._pods.get(uid)
        if self._runtime is None or track is None or track.reflected is None:
            return  # no status stored yet: the first one is not an update
        if status_inputs(self._runtime(uid)) == track.reflected:
            return  # nothing the status shows: no new status will follow
        if track.change_seen is None:
            track.change_seen = time.monotonic()

    # -- status subscriber ------------------------------------------------------------------

    def observe_status(self, pod: pods.Pod, pod_status: status.PodStatus) -> None:
        track = self._track(pod.uid)
        first, track.status_seen = not track.status_seen, True
        if track.change_seen is not None:
            self.status_update.observe(time.monotonic() - track.change_seen)
            track.change_seen = None
        if self._runtime is not None:
            track.reflected = status_inputs(self._runtime(pod.uid))
        self._observe_sandbox_ready(pod_status, track)
        self._observe_ready(pod_status, track)
        self._observe_started(pod, pod_status, track, adopted=first)
        self._observe_termination(pod, pod_status, track)

    def _recent(self, when: datetime | None) -> bool:
        return when is not None and when >= self._since

    def _observe_sandbox_ready(self, pod_status: status.PodStatus, track: _PodTrack) -> None:
        ready = _condition_true(pod_status)
        if ready is None or track.sandbox_ready_seen:
            return
        track.sandbox_ready_seen = True
        scheduled = pod_status.condition(status.POD_SCHEDULED)
        if self._recent(ready.last_transition_time) and scheduled \
                and scheduled.last_transition_time and ready.last_transition_time:
            elapsed = ready.last_transition_time - scheduled.last_transition_time
            self.sandbox_ready_latency.observe(max(elapsed.total_seconds(), 0.0))

    def _observe_ready(self, pod_status: status.PodStatus, track: _PodTrack) -> None:
        ready = pod_status.condition(status.READY)
        if ready is None or ready.status != "True" or track.ready_seen:
            return
        track.ready_seen = True
        sandbox = _condition_true(pod_status)
        if sandbox is not None and sandbox.last_transition_time \
                and self._recent(ready.last_transition_time) and ready.last_transition_time:
            elapsed = ready.last_transition_time - sandbox.last_transition_time
            self.ready_after_sandbox.observe(max(elapsed.total_seconds(), 0.0))

    def _observe_started(
        self, pod: pods.Pod, pod_status: status.PodStatus, track: _PodTrack, *, adopted: bool
    ) -> None:
        if track.started_seen or not _all_running(pod, pod_status):
            return
        track.started_seen = True
        created = pod.creation_timestamp
        # Running at first sight: adopted from an earlier run, its start was not watched.
        if adopted or not self._recent(created) or created is None:
            return
        elapsed = (self._clock() - created).total_seconds()
        if track.pull_started is not None and track.pull_finished is not None:
            elapsed -= max((track.pull_finished - track.pull_started).total_seconds(), 0.0)
        self.pod_start_sli.observe(max(elapsed, 0.0))

    def _observe_termination(self, pod: pods.Pod, pod_status: status.PodStatus,
                             track: _PodTrack) -> None:
        if self.termination is None or track.termination_seen:
            return
        elapsed = terminations.latency(pod, pod_status)
        if elapsed is not None:
            track.termination_seen = True
            self.termination.observe(elapsed.total_seconds())

    # -- checkpoint writer ------------------------------------------------------------------

    def observe_checkpoint_write(self, pending: int, error: cp.CheckpointError | None) -> None:
        self.checkpoint_pending.set(pending)
        if error is not None:
            self.checkpoint_write_failures.inc()

    # -- event subscriber -------------------------------------------------------------------

    def observe_event(self, event: ev.Event) -> None:
        if event.reason == ev.PULLING:
            track = self._track(event.pod_uid)
            track.pull_started = track.pull_started or event.last_timestamp
        elif event.reason == ev.PULLED:
            self._track(event.pod_uid).pull_finished = event.last_timestamp
        elif event.reason == "ErrImageNeverPull" or (
                event.reason == ev.FAILED and "Failed to pull image" in event.message):
            self.sandbox_failures.labels(error_class="image_pull").inc()

    def render(self) -> tuple[bytes, str]:
        return prom.generate_latest(self.registry), prom.CONTENT_TYPE_LATEST

    # -- values for the web UI --------------------------------------------------------------

    def sandbox_metrics(self) -> hg.SandboxMetrics:
        """The sandbox-ready latency and RunPodSandbox duration histograms (all runtime
        handlers added up) and the sandbox failures by error class, as model values."""
        return hg.SandboxMetrics(
            ready_latency=_histogram(self.sandbox_ready_latency, _SANDBOX_BUCKETS),
            run_duration=_histogram(self.run_sandbox_duration, _SANDBOX_BUCKETS),
            failures=_by_label(self.sandbox_failures, "error_class"))


def _histogram(metric: prom.Histogram, buckets: tuple[float, ...]) -> hg.Histogram:
    """`metric` with its series added up. Every bucket is there even before the first
    observation: a labelled histogram has no series until then."""
    (family,) = metric.collect()
    cumulative = [(le, 0.0) for le in (*buckets, math.inf)]
    total = 0.0
    for sample in family.samples:
        if sample.name.endswith("_bucket"):
            cumulative.append((float(sample.labels["le"]), sample.value))
        elif sample.name.endswith("_sum"):
            total += sample.value
    return hg.from_cumulative(family.name, cumulative, total)


def _by_label(metric: prom.Counter, label: str) -> tuple[tuple[str, float], ...]:
    """The counter per value of `label` (other labels added up), sorted by that value."""
    (family,) = metric.collect()
    counts: dict[str, float] = {}
    for sample in family.samples:
        if sample.name.endswith("_total") and label in sample.labels:
            key = sample.labels[label]
            counts[key] = counts.get(key, 0.0) + sample.value
    return tuple(sorted(counts.items()))
