"""`nodelet analyze --watch`: what one pod's change tells, and the running histograms (pure).

`observe(pod)` reads one Pod object as the watch delivers it and says whether its sandbox just
became ready (with the KEP-3085 latency, scheduled → PodReadyToStartContainers, and end to end
when Ready), was re-created (not measured: its condition time is of a later sandbox), or is
stuck before it (the condition's reason and message). `Monitor` remembers which pods were
reported, so a relist after a dropped watch or a 410 reports nothing twice, keeps the running
samples, and renders them in the Prometheus text format (`exposition`): histograms with the
kubelet's pod-startup buckets, labelled by namespace, and the exact p50/p90/p99 over all pods
(clusterloader2's rule) as gauges.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodelet.model.reports import analysis as an
from nodelet.model.reports import analysis_input as ai

# kubelet_pod_start_sli_duration_seconds' buckets (pkg/kubelet/metrics), seconds.
BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600,
           900, 1200, 1800, 2700, 3600)
SANDBOX_METRIC = "nodelet_analyze_sandbox_ready_seconds"
READY_METRIC = "nodelet_analyze_scheduled_to_ready_seconds"


@dataclass(frozen=True)
class Observation:
    """What a pod's current state says: kind is `ready`, `recreated` or `stuck`."""

    kind: str
    pod: ai.PodRecord
    sandbox_ready: float | None = None  # seconds after scheduled (kind ready)
    ready: float | None = None  # scheduled → Ready, when the pod is Ready
    detail: str = ""  # the reason (recreated) or the condition's reason: message (stuck)

    def line(self) -> str:
        """One line for the terminal."""
        pod = self.pod
        head = f"{pod.namespace}/{pod.name} (node {pod.node})"
        if self.kind == "ready":
            at = pod.raw_times[ai.READY_TO_START]
            end = f", ready {an.human_seconds(self.ready)}" if self.ready is not None else ""
            return (f"{at}  {head}: sandbox ready {an.human_seconds(self.sandbox_ready)} after "
                    f"scheduled{end}")
        if self.kind == "recreated":
            return f"{pod.raw_times[ai.READY_TO_START]}  {head}: sandbox re-created ({self.detail})"
        since = pod.sandbox.since if pod.sandbox is not None else None
        return f"{since or '-'}  {head}: stuck before its sandbox: {self.detail}"


def observe(obj: Any, source: str = "watch") -> Observation | None:
    """The news in one Pod object, or None (not scheduled yet, no sandbox condition, finished
    or terminating). AnalysisError when it is malformed."""
    reader = ai.DumpReader()
    reader.add(obj, source)
    if not reader.pods:
        return None
    pod = reader.pods[0]
    if pod.sandbox is None:
        return None
    if an.is_stuck(pod, False):
        reason = pod.sandbox.reason or pod.sandbox.status
        message = f": {pod.sandbox.message}" if pod.sandbox.message else ""
        return Observation("stuck", pod, detail=reason + message)
    ready, scheduled = pod.times[ai.READY_TO_START], pod.times[ai.SCHEDULED]
    if ready is None or scheduled is None:
        return None
    why = an.recreation_reason(pod, ())
    if why is not None:
        return Observation("recreated", pod, detail=why)
    end = pod.times[ai.READY]
    return Observation("ready", pod, max(0.0, ready - scheduled),
                       None if end is None else max(0.0, end - scheduled))


@dataclass
class _Series:
    """One histogram per namespace, plus every sample (sorted) for the exact percentiles."""

    counts: dict[str, list[int]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)
    samples: list[float] = field(default_factory=list)

    def add(self, namespace: str, value: float) -> None:
        counts = self.counts.setdefault(namespace, [0] * (len(BUCKETS) + 1))
        counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.sums[namespace] = self.sums.get(namespace, 0.0) + value
        bisect.insort(self.samples, value)


class Monitor:
    """The watch's memory: pods reported (by uid and state), running samples, stuck pods."""

    def __init__(self) -> None:
        self._reported: dict[str, tuple[str, str]] = {}  # uid -> (kind, detail) printed
        # uid -> the object looked at last. The reflector replaces an object when it changes,
        # so an identity check skips the unchanged ones: it is told the whole store per event.
        self._seen: dict[str, Any] = {}
        self.sandbox = _Series()
        self.ready = _Series()
        self.recreated = 0
        self.stuck: dict[str, str] = {}  # uid -> namespace/name, stuck now
        self.relists = 0
        self._ready_counted: set[str] = set()

    def update(self, store: Mapping[str, Any]) -> list[Observation]:
        """The news in the reflector's store: pods new or changed since the last call."""
        news = []
        seen_before = self._seen.get
        for uid, obj in store.items():
            if seen_before(uid) is obj:
                continue
            self._seen[uid] = obj
            seen = observe(obj)
            if seen is not None and self._take(uid, seen):
                news.append(seen)
        if len(self._seen) > len(store):  # pods deleted since
            for uid in [u for u in self._seen if u not in store]:
                self._forget(uid)
        return news

    def update_one(self, uid: str, obj: Any | None) -> list[Observation]:
        """The news of the one pod a watch event changed (`obj` None: deleted): what `update`
        would find, without looking at every other pod of the store."""
        if obj is None:
            self._forget(uid)
            return []
        if self._seen.get(uid) is obj:
            return []
        self._seen[uid] = obj
        seen = observe(obj)
        return [seen] if seen is not None and self._take(uid, seen) else []

    def _forget(self, uid: str) -> None:
        self._seen.pop(uid, None)
        self.stuck.pop(uid, None)
        self._reported.pop(uid, None)
        self._ready_counted.discard(uid)

    def _take(self, uid: str, seen: Observation) -> bool:
        """Record `seen`; False when there is nothing new to print (a relist, a change that
        is not about the sandbox)."""
        before = self._reported.get(uid)
        started = before is not None and before[0] != "stuck"
        if seen.kind == "ready" and started:
            self._count_ready(uid, seen)  # Ready may come after the sandbox
            return False
        key = (seen.kind, seen.detail if seen.kind == "stuck" else "")
        if before == key or (seen.kind == "recreated" and started):
            return False
        self._reported[uid] = key
        pod = seen.pod
        if seen.kind == "stuck":
            self.stuck[uid] = f"{pod.namespace}/{pod.name}"
            return True
        self.stuck.pop(uid, None)
        if seen.kind == "recreated":
            self.recreated += 1
        elif seen.sandbox_ready is not None:
            self.sandbox.add(pod.namespace, seen.sandbox_ready)
            self._count_ready(uid, seen)
        return True

    def _count_ready(self, uid: str, seen: Observation) -> None:
        if seen.ready is not None and uid not in self._ready_counted:
            self._ready_counted.add(uid)
            self.ready.add(seen.pod.namespace, seen.ready)

    def exposition(self) -> str:
        """The Prometheus text format (version 0.0.4) of the running numbers."""
        lines = [*_histogram(SANDBOX_METRIC, "Scheduled to PodReadyToStartContainers=True "
                             "(KEP-3085 sandbox-ready SLI), first starts seen by the watch.",
                             self.sandbox),
                 *_histogram(READY_METRIC, "Scheduled to Ready, first starts seen by the watch.",
                             self.ready)]
        for metric, series in ((SANDBOX_METRIC, self.sandbox), (READY_METRIC, self.ready)):
            name = metric.removesuffix("_seconds") + "_percentile_seconds"
            lines += [f"# HELP {name} Exact percentile (clusterloader2's rule) of {metric}.",
                      f"# TYPE {name} gauge"]
            lines += [f'{name}{{quantile="{p / 100:g}"}} {an.percentile(series.samples, p):g}'
                      for p in an.PERCENTILES if series.samples]
        lines += _single("nodelet_analyze_pods_stuck", "gauge",
                         "Pods stuck before their sandbox now.", len(self.stuck))
        lines += _single("nodelet_analyze_sandboxes_recreated_total", "counter",
                         "Pods seen with a re-created sandbox (not measured).", self.recreated)
        lines += _single("nodelet_analyze_relists_total", "counter",
                         "Full lists of the pods (start, dropped watch, 410 Gone).",
                         self.relists)
        return "\n".join(lines) + "\n"


def _single(name: str, kind: str, help_text: str, value: float) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value:g}"]


def _histogram(name: str, help_text: str, series: _Series) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for namespace in sorted(series.counts):
        label = namespace.replace("\\", "\\\\").replace('"', '\\"')
        below = 0
        for bound, count in zip((*BUCKETS, float("inf")), series.counts[namespace],
                                strict=True):
            below += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            lines.append(f'{name}_bucket{{namespace="{label}",le="{le}"}} {below}')
        lines.append(f'{name}_sum{{namespace="{label}"}} {series.sums[namespace]:g}')
        lines.append(f'{name}_count{{namespace="{label}"}} {below}')
    return lines
