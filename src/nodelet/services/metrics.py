"""Prometheus metrics: the kubelet's names where the meaning is the same, plus nodelet's own.

Labels are bounded: no pod names or UIDs. Sandbox failures are counted by an error class
derived from the runtime's message (`classify_sandbox_error`).
"""

from __future__ import annotations

import time

import prometheus_client as prom

from nodelet.adapters.cri import client as cri
from nodelet.model import pods, status
from nodelet.services import syncing, volumes

# Sandbox creation is 0.1-0.5 s here, slower under load; the kubelet's buckets start at 5 ms.
_SANDBOX_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_DETECTION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)

ERROR_CLASSES = ("ip_exhausted", "cni_plugin", "runtime_unavailable", "volume_missing",
                 "image_pull", "other")


def classify_sandbox_error(message: str) -> str:
    text = message.lower()
    if "no ip addresses available" in text or "range is full" in text:
        return "ip_exhausted"
    if "cni" in text or "plugin type=" in text or "failed to setup network" in text:
        return "cni_plugin"
    if "unavailable" in text or "connection refused" in text or "no such file" in text:
        return "runtime_unavailable"
    return "other"


def _condition_true(pod_status: status.PodStatus) -> status.PodCondition | None:
    for type_ in (status.POD_READY_TO_START_CONTAINERS, status.POD_HAS_NETWORK):
        cond = pod_status.condition(type_)
        if cond is not None and cond.status == "True":
            return cond
    return None


class Metrics(syncing.SyncObserver):
    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
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
        self.sandbox_failures = prom.Counter(
            "nodelet_sandbox_failures_total",
            "Failed sandbox creations by error class.", ["error_class"], registry=r)
        self.sandbox_ready_latency = prom.Histogram(
            "nodelet_pod_sandbox_ready_duration_seconds",
            "Time from PodScheduled to the first PodReadyToStartContainers=True.",
            buckets=_SANDBOX_BUCKETS, registry=r)
        self.detection = prom.Histogram(
            "nodelet_sandbox_ready_detection_seconds",
            "Time from RunPodSandbox returning to the condition being True in the status cache.",
            buckets=_DETECTION_BUCKETS, registry=r)
        self._seen_ready: set[pods.PodUID] = set()

    # -- SyncObserver -----------------------------------------------------------------------

    def sandbox_starting(self, pod: pods.Pod) -> None:
        self.started_pods.inc()

    def sandbox_created(self, pod: pods.Pod, seconds: float) -> None:
        self.run_sandbox_duration.labels(runtime_handler=pod.spec.runtime_class_name).observe(seconds)

    def sandbox_failed(self, pod: pods.Pod, error: cri.CriError, seconds: float) -> None:
        self.run_sandbox_duration.labels(runtime_handler=pod.spec.runtime_class_name).observe(seconds)
        self.run_sandbox_errors.labels(runtime_handler=pod.spec.runtime_class_name).inc()
        self.started_pods_errors.inc()
        self.sandbox_failures.labels(error_class=classify_sandbox_error(str(error))).inc()

    def sandbox_ready(self, pod: pods.Pod, work: syncing.PodWork) -> None:
        if work.sandbox_returned_at is not None:
            self.detection.observe(time.monotonic() - work.sandbox_returned_at)

    # -- status subscriber ------------------------------------------------------------------

    def observe_status(self, pod: pods.Pod, pod_status: status.PodStatus) -> None:
        ready = _condition_true(pod_status)
        if ready is None or pod.uid in self._seen_ready:
            return
        self._seen_ready.add(pod.uid)
        scheduled = pod_status.condition(status.POD_SCHEDULED)
        if ready.last_transition_time and scheduled and scheduled.last_transition_time:
            elapsed = ready.last_transition_time - scheduled.last_transition_time
            self.sandbox_ready_latency.observe(max(elapsed.total_seconds(), 0.0))

    def volume_failed(self, pod: pods.Pod, error: volumes.VolumeError) -> None:
        self.sandbox_failures.labels(error_class="volume_missing").inc()

    def render(self) -> tuple[bytes, str]:
        return prom.generate_latest(self.registry), prom.CONTENT_TYPE_LATEST
