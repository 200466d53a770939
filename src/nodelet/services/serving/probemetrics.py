"""`prober_probe_total`, the kubelet's `/metrics/probes`: probe attempts by type and result.

Its own registry (the kubelet serves it apart from `/metrics`), labelled as the kubelet's
(`probe_type` Liveness/Readiness/Startup, `result` successful/failed/unknown, `container`,
`pod`, `namespace`, `pod_uid`); a pod's series go when the pod does.
"""

from __future__ import annotations

import prometheus_client as prom

from nodelet.model.core import pods, probes

_TYPES = {"liveness": "Liveness", "readiness": "Readiness", "startup": "Startup"}
# An attempt that could not run (an error) is the kubelet's Unknown result.
_RESULTS = {"success": "successful", "warning": "successful", "failure": "failed",
            "error": "unknown"}


class ProbeMetrics:
    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
        self._total = prom.Counter(
            "prober_probe_total", "[ALPHA] Cumulative number of a liveness, readiness or "
            "startup probe for a container by result.",
            ["probe_type", "result", "container", "pod", "namespace", "pod_uid"],
            registry=self.registry)
        self._series: dict[pods.PodUID, set[tuple[str, ...]]] = {}

    def observe(self, pod: pods.Pod, container: str, kind: probes.ProbeKind,
                outcome: str) -> None:
        """One attempt of a probe (the probe manager calls it)."""
        labels = (_TYPES[kind], _RESULTS.get(outcome, "unknown"), container, pod.name,
                  pod.namespace, str(pod.uid))
        self._total.labels(*labels).inc()
        self._series.setdefault(pod.uid, set()).add(labels)

    def forget(self, uid: pods.PodUID) -> None:
        for labels in self._series.pop(uid, set()):
            self._total.remove(*labels)

    def render(self) -> bytes:
        return prom.generate_latest(self.registry)
