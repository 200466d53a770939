"""`/metrics` after real pods start and fail, scraped over HTTP and parsed as Prometheus text;
and the sandbox error classes against containerd's own wording."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client import parser

from conftest import Instance
from harness import Harness, all_ready, is_true, pod_manifest
from nodelet.model import runtime as rt
from nodelet.model import status as st
from nodelet.services import metrics

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

# Every label nodelet's metrics may carry: all bounded (no pod names, UIDs or messages).
BOUNDED_LABELS = {"operation_type", "runtime_handler", "error_class", "le"}

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


async def scrape_until(agent: Harness, check: Callable[[Samples], bool], what: str) -> Samples:
    last: Samples = {}

    async def probe() -> bool:
        nonlocal last
        last = await scrape(agent)
        return check(last)

    deadline = asyncio.get_running_loop().time() + 30
    while asyncio.get_running_loop().time() < deadline:
        if await probe():
            return last
        await asyncio.sleep(0.2)
    moved = {k: v for k, v in last.items() if v and not k[0].endswith("_bucket")}
    pytest.fail(f"{what} not seen in /metrics within 30s; non-zero samples: {moved}")


@pytest.mark.runtime
async def test_metrics_move_as_pods_start_and_fail(agent: Harness, runtime: Instance) -> None:
    agent.write("web.yaml", pod_manifest("web"))
    agent.write("vm.yaml", pod_manifest("vm", extra_spec="runtimeClassName: gvisor\n"))
    agent.write("cm.yaml", CONFIGMAP_POD)
    agent.write("pull.yaml", UNPULLABLE_POD)
    await agent.wait_status("web", all_ready, what="web Ready")
    await agent.wait(lambda: [e for e in agent.events_of("vm")
                              if e.reason == "FailedCreatePodSandBox"], what="vm sandbox error")
    await agent.wait(lambda: [e for e in agent.events_of("cm") if e.reason == "FailedMount"],
                     what="cm FailedMount")
    await agent.wait(lambda: [e for e in agent.events_of("pull")
                              if e.message.startswith("Failed to pull image")],
                     what="pull ErrImagePull")

    samples = await scrape_until(
        agent, lambda s: value(s, "kubelet_pod_start_sli_duration_seconds_count") >= 1,
        "the pod start SLI of web")
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

    await agent.wait_status("web", lambda s: not is_true(s, st.CONTAINERS_READY),
                            what="the container's exit in the status")
    samples = await scrape_until(
        agent, lambda s: value(s, "nodelet_pod_status_update_duration_seconds_count") >= 1,
        "a status update latency")
    # Seen by the relist, then stored by the woken worker: well within a few relist periods.
    assert 0 <= value(samples, "nodelet_pod_status_update_duration_seconds_sum") < 10


CONTAINERD_ERRORS = [
    ('failed to setup network for sandbox "4b1f": plugin type="bridge" failed (add): failed to '
     "allocate for range 0: no IP addresses available in range set: 10.88.0.1-10.88.0.6", "",
     "ip_exhausted"),
    ('failed to setup network for sandbox "4b1f": plugin type="bridge" name="nodelet" failed '
     '(add): failed to set bridge addr: could not add IP address to "nl1": permission denied', "",
     "cni_plugin"),
    ('failed to setup network for sandbox "4b1f": failed to find plugin "bridge" in path '
     "[/opt/cni/bin]", "", "cni_plugin"),
    ("rpc error: code = Unknown desc = failed to setup network for sandbox \"4b1f\": "
     "cni plugin not initialized", "UNKNOWN", "cni_plugin"),
    ('rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "gvisor" '
     "is configured", "UNKNOWN", "other"),
    ('failed to get sandbox image "registry.k8s.io/pause:3.6": failed to pull image '
     '"registry.k8s.io/pause:3.6": failed to resolve reference', "", "image_pull"),
    ("failed to create containerd task: failed to create shim task: OCI runtime create failed: "
     "failed to update /proc/self/oom_score_adj: Permission denied", "", "other"),
    ("RunPodSandbox default/web (attempt 0) failed: container runtime at /run/c.sock is not "
     "reachable: check that containerd is running", "UNAVAILABLE", "runtime_unavailable"),
    ("rpc error: code = DeadlineExceeded desc = context deadline exceeded", "DEADLINE_EXCEEDED",
     "runtime_unavailable"),
    ('connection error: desc = "transport: Error while dialing dial unix /run/c.sock: connect: '
     'connection refused"', "", "runtime_unavailable"),
    ('rpc error: code = Unknown desc = failed to reserve sandbox name "web_default_1_0": name '
     "is reserved", "UNKNOWN", "other"),
    # A path that mentions "cni" only as part of a word is not a CNI error.
    ("open /var/lib/technician/x: no such file or directory", "", "other"),
]


@pytest.mark.parametrize(("message", "code", "expected"), CONTAINERD_ERRORS)
def test_classify_sandbox_error(message: str, code: str, expected: str) -> None:
    assert metrics.classify_sandbox_error(message, code=code) == expected
    assert expected in metrics.ERROR_CLASSES
