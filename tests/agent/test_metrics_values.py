"""`Metrics.sandbox_metrics`: the web UI's values, read from the same prometheus_client objects
that `/metrics` exposes (series of other labels added up), checked against the registry."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.model.reports import histograms as hg
from nodelet.services.serving import metrics

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
RUN = "kubelet_run_podsandbox_duration_seconds"
GVISOR = 'failed to get sandbox runtime: no runtime for "gvisor" is configured'
FULL = "plugin type=\"bridge\" failed (add): no IP addresses available in range set: 10.88.0.1"


def pod(name: str, handler: str = "") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),),
                        runtime_class_name=handler)
    return pods.Pod(uid=pods.PodUID(name), name=name, namespace="default", spec=spec)


def sandbox_ready(after: float) -> st.PodStatus:
    return st.PodStatus(conditions=(
        st.PodCondition(st.POD_SCHEDULED, "True", last_transition_time=T0),
        st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "True",
                        last_transition_time=T0 + timedelta(seconds=after))))


def registry_cumulative(m: metrics.Metrics, handlers: list[str]) -> list[tuple[float, float]]:
    """(le, observations <= le) as `/metrics` exposes them, added up over `handlers`."""
    bounds = [*m.sandbox_metrics().run_duration.bounds]
    return [(le, sum(m.registry.get_sample_value(
        f"{RUN}_bucket", {"runtime_handler": h, "le": "+Inf" if math.isinf(le) else str(float(le))})
        or 0.0 for h in handlers)) for le in bounds]


def test_before_any_observation_every_bucket_is_there_and_empty() -> None:
    values = metrics.Metrics(clock=lambda: T0).sandbox_metrics()
    for h in (values.ready_latency, values.run_duration):
        assert h.bounds[-1] == math.inf and len(h.bounds) > 10
        assert (h.count, h.total, h.mean, h.quantile(0.5)) == (0.0, 0.0, None, None)
    assert values.run_duration.name == RUN
    assert values.ready_latency.name == "nodelet_pod_sandbox_ready_duration_seconds"
    assert values.failures == ()


def test_sandbox_metrics_add_up_runtime_handlers_as_the_exposition_shows() -> None:
    m = metrics.Metrics(clock=lambda: T0)
    m.sandbox_created(pod("a"), 0.2)
    m.sandbox_created(pod("b", "runc"), 0.3)
    m.sandbox_failed(pod("c", "gvisor"), GVISOR, "UNKNOWN", 0.004)
    m.sandbox_failed(pod("d"), FULL, "", 200.0)
    m.volume_failed(pod("e"), "configmap not found")
    m.observe_status(pod("a"), sandbox_ready(0.3))
    m.observe_status(pod("b"), sandbox_ready(2.0))

    values = m.sandbox_metrics()
    run = values.run_duration
    assert run.count == 4 and run.total == pytest.approx(200.504)
    assert [(b.upper, b.count) for b in run.buckets() if b.count] == [
        (0.005, 1.0), (0.25, 1.0), (0.5, 1.0), (math.inf, 1.0)]
    cumulative = [(b.upper, sum(x.count for x in run.buckets() if x.upper <= b.upper))
                  for b in run.buckets()]
    assert cumulative == registry_cumulative(m, ["", "runc", "gvisor"])
    latency = values.ready_latency
    assert (latency.count, latency.total) == (2.0, pytest.approx(2.3))
    assert values.failures == (("ip_exhausted", 1.0), ("other", 1.0), ("volume_missing", 1.0))


def test_failures_only_list_classes_seen() -> None:
    m = metrics.Metrics(clock=lambda: T0)
    for _ in range(3):
        m.sandbox_failed(pod("c", "gvisor"), GVISOR, "UNKNOWN", 0.01)
    assert m.sandbox_metrics().failures == (("other", 3.0),)
    assert isinstance(m.sandbox_metrics().ready_latency, hg.Histogram)
