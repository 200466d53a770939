"""`/metrics` after real pods start and fail, scraped over HTTP and parsed as Prometheus text
(the error classes themselves: tests/model/test_sandboxerrors.py)."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest
from prometheus_client import parser

from conftest import Instance
from nodelet.model.core import runtime as rt
from nodelet.model.core import status as st
from support.harness import Harness, all_ready, is_true, pod_manifest
from support.polling import eventually

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

# Every label nodelet's metrics may carry: all bounded (no pod names, UIDs or messages).
# driver_name: the DRA drivers registered here and "<any>" (dra_resource_claims_in_use).
BOUNDED_LABELS = {"operation_type", "runtime_handler", "error_class", "le", "driver_name"}

CONFIGMAP_POD = pod_manifest(
    "cm", extra_spec="volumes:\n  - name: vol\n    configMap:\n      name: not-there\n",
    container_extra="volumeMounts:\n  - name: vol\n    mountPath: /config\n")
# Nothing listens on port 9 of the loopback: the pull fails at once (connection refused).
UNPULLABLE_POD = pod_manifest("pull").replace(
    "localhost/nodelet/busybox:latest", "127.0.0.1:9/nodelet/missing:1")


async def scrape(agent: Harness) -> Samples:
    url = f"http://127.0.0.1:{agent.agent_or_fail().server_port}/metrics"

    def get() -> str:
        with urllib.request.urlopen(url, timeout=10) as response:
            body: bytes = response.read()
            return body.decode()

    text = await asyncio.to_thread(get)
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in parser.text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def nonzero(samples: Samples) -> str:
    """What moved in /metrics: the non-zero samples, buckets left out."""
    moved = {k: v for k, v in samples.items() if v and not k[0].endswith("_bucket")}
    return f"non-zero samples: {moved}"


@pytest.mark.runtime
async def test_metrics_move_as_pods_start_and_fail(agent: Harness, runtime: Instance) -> None:
    agent.write("web.yaml", pod_manifest("web"))
    agent.write("vm.yaml", pod_manifest("vm", extra_spec="runtimeClassName: gvisor\n"))
    agent.write("cm.yaml", CONFIGMAP_POD)
    agent.write("pull.yaml", UNPULLABLE_POD)
    await agent.wait_status("web", all_ready, what="web Ready")
    await eventually(lambda: [e for e in agent.events_of("vm")
                              if e.reason == "FailedCreatePodSandBox"],
                     within=30, what="vm sandbox error")
    await eventually(lambda: [e for e in agent.events_of("cm") if e.reason == "FailedMount"],
                     within=30, what="cm FailedMount")
    await eventually(lambda: [e for e in agent.events_of("pull")
                              if e.message.startswith("Failed to pull image")],
                     within=30, what="pull ErrImagePull")

    samples = await eventually(
        lambda: scrape(agent),
        until=lambda s: value(s, "kubelet_pod_start_sli_duration_seconds_count") >= 1,
        within=30, every=0.2, what="the pod start SLI of web in /metrics", seen=nonzero)
    op = "kubelet_runtime_operations"
    # web, pull: created; vm: failed (each retry is another attempt and another error).
    assert value(samples, f"{op}_total", operation_type="run_podsandbox") >= 3
    assert value(samples, f"{op}_duration_seconds_count", operation_type="run_podsandbox") >= 3
    assert value(samples, f"{op}_errors_total", operation_type="run_podsandbox") >= 1
    assert value(samples, f"{op}_errors_total", operation_type="pull_image") >= 1
    for operation in ("list_podsandbox", "list_containers",
                      "podsandbox_status", "create_container", "start_container",
                      "image_status", "pull_image"):
        assert value(samples, f"{op}_total", operation_type=operation) >= 1, operation
    assert value(samples, f"{op}_errors_total", operation_type="start_container") == 0

    assert value(samples, "kubelet_run_podsandbox_errors_total", runtime_handler="gvisor") >= 1
    assert value(samples, "kubelet_run_podsandbox_errors_total", runtime_handler="") == 0
    assert value(samples, "kubelet_run_podsandbox_duration_seconds_count",
                 runtime_handler="") >= 2
    assert value(samples, "kubelet_started_pods_total") >= 3
    assert value(samples, "kubelet_started_pods_errors_total") >= 1

    # Only web became ready: one observation each, however often the others retried.
    assert value(samples, "nodelet_pod_sandbox_ready_duration_seconds_count") == 2  # web, pull
    assert value(samples, "nodelet_pod_ready_after_sandbox_seconds_count") == 1
    assert value(samples, "kubelet_pod_start_sli_duration_seconds_count") == 1
    sli = value(samples, "kubelet_pod_start_sli_duration_seconds_sum")
    assert 0 < sli < 30

    failures = "nodelet_sandbox_failures_total"
    assert value(samples, failures, error_class="other") >= 1  # no runtime for "gvisor"
    assert value(samples, failures, error_class="volume_missing") >= 1
    assert value(samples, failures, error_class="image_pull") >= 1
    for error_class in ("ip_exhausted", "cni_plugin", "runtime_unavailable"):
        assert value(samples, failures, error_class=error_class) == 0, error_class

    unbounded = {name: dict(labels) for name, labels in samples
                 if {k for k, _ in labels} - BOUNDED_LABELS}
    assert not unbounded, f"metrics with unbounded labels: {unbounded}"


@pytest.mark.runtime
async def test_status_update_latency_after_a_container_dies(
    agent: Harness, runtime: Instance
) -> None:
    agent.write("web.yaml", pod_manifest("web"))
    await agent.wait_status("web", all_ready, what="web Ready")
    before = await scrape(agent)
    assert value(before, "nodelet_pod_status_update_duration_seconds_count") == 0

    found = agent.find("web")
    assert found is not None
    listed = await runtime.client.list_containers(labels={rt.LABEL_POD_UID: found[0].uid})
    running = [c for c in listed if c.state is rt.ContainerState.RUNNING]
    assert len(running) == 1
    await runtime.client.stop_container(running[0].id, 0)  # behind the agent's back

    # The first restart has no back-off, so the pod can be Ready again before a poll sees it
    # not ready: the exit shows either as not ready or as a restart.
    await agent.wait_status(
        "web", lambda s: not is_true(s, st.CONTAINERS_READY)
        or any(c.restart_count >= 1 for c in s.container_statuses),
        what="the container's exit in the status")
    samples = await eventually(
        lambda: scrape(agent),
        until=lambda s: value(s, "nodelet_pod_status_update_duration_seconds_count") >= 1,
        within=30, every=0.2, what="a status update latency in /metrics", seen=nonzero)
    # Seen by the relist, then stored by the woken worker: well within a few relist periods.
    assert 0 <= value(samples, "nodelet_pod_status_update_duration_seconds_sum") < 10
