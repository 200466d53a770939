"""In-place resize and pod-level resources, the pure rules (model.core.resize, resources,
specs, parsing): what is allocated, in which order the cgroups change, what the status says."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nodelet.model.core import fields, pods, resize, resources, runtime, specs
from nodelet.model.parsing import manifests

Mi = 2**20


def _pod(containers: list[dict[str, Any]], pod_resources: dict[str, Any] | None = None,
         init: list[dict[str, Any]] | None = None) -> pods.Pod:
    spec: dict[str, Any] = {"containers": containers, **({"initContainers": init} if init else {})}
    if pod_resources is not None:
        spec["resources"] = pod_resources
    return manifests.pod_from_object({"apiVersion": "v1", "kind": "Pod",
                                      "metadata": {"name": "p", "namespace": "default"},
                                      "spec": spec}, node_name="n")


def _ctr(name: str, res: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **({"resources": res} if res else {}), **more}


def test_pod_level_resources_are_parsed_defaulted_and_decide_the_qos_class() -> None:
    pod = _pod([_ctr("a")], {"limits": {"cpu": "200m", "memory": "128Mi"}})
    level = pod.spec.resources
    assert level is not None
    assert (level.cpu_request_milli, level.cpu_limit_milli) == (200, 200)
    assert level.written == {"limits": {"cpu": "200m", "memory": "128Mi"},
                             "requests": {"cpu": "200m", "memory": "128Mi"}}
    assert resources.qos_class(pod) == "Guaranteed"
    # Requests default to what the containers ask together, when they ask.
    pod = _pod([_ctr("a", {"requests": {"cpu": "50m"}}), _ctr("b", {"requests": {"cpu": "30m"}})],
               {"limits": {"cpu": "200m"}})
    assert pod.spec.resources is not None
    assert pod.spec.resources.cpu_request_milli == 80
    assert resources.qos_class(pod) == "Burstable"
    # Memory only at pod level: cpu is BestEffort, memory Guaranteed, so Burstable.
    assert resources.qos_class(_pod([_ctr("a")], {"limits": {"memory": "35Mi"}})) == "Burstable"


def test_pod_level_requests_count_init_containers_and_sidecars_as_the_api_server_does() -> None:
    """AggregateContainerRequests: max(app + sidecars, each init container + the sidecars
    before it); here the init container's 300m is the peak, the sidecar's 100m runs along."""
    init = [_ctr("side", {"requests": {"cpu": "100m", "memory": "16Mi"}}, restartPolicy="Always"),
            _ctr("setup", {"requests": {"cpu": "300m"}})]
    pod = _pod([_ctr("a", {"requests": {"cpu": "50m", "memory": "32Mi"}})],
               {"limits": {"cpu": "1", "memory": "128Mi"}}, init=init)
    assert pod.spec.resources is not None
    assert (pod.spec.resources.cpu_request_milli, pod.spec.resources.memory_request) == (
        400, 48 * Mi)
    assert pod.spec.resources.written["requests"] == {"cpu": "400m", "memory": "48Mi"}
    with pytest.raises(fields.ManifestError,
                       match="aggregate container requests of 400m"):
        _pod([_ctr("a", {"requests": {"cpu": "50m"}})], {"requests": {"cpu": "200m"}},
             init=init)


@pytest.mark.parametrize("pod_resources, containers, message", [
    ({"limits": {"ephemeral-storage": "1Gi"}}, [_ctr("a")], 'Unsupported value: "ephemeral'),
    ({"requests": {"cpu": "100m"}}, [_ctr("a", {"requests": {"cpu": "150m"}})],
     "must be greater than or equal to aggregate container requests of 150m"),
    ({"limits": {"memory": "64Mi"}}, [_ctr("a", {"limits": {"memory": "128Mi"}})],
     "must be less than or equal to pod limits of 64Mi"),
])
def test_pod_level_resources_the_api_server_would_refuse_are_refused(
        pod_resources: dict[str, Any], containers: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(fields.ManifestError, match=message):
        _pod(containers, pod_resources)


def test_the_pod_cgroup_and_containers_without_limits_take_the_pod_level_ones() -> None:
    pod = _pod([_ctr("a"), _ctr("b", {"limits": {"cpu": "50m", "memory": "32Mi"}})],
               {"limits": {"cpu": "200m", "memory": "128Mi"}})
    # The pod's cpu request defaults to what its containers ask (b's 50m), not to its limit.
    assert specs.pod_cgroup(pod) == specs.PodCgroup(cpu_shares=51, cpu_quota_us=20000,
                                                    memory_limit=128 * Mi)
    a, b = pod.spec.containers
    assert specs.linux_resources(specs.effective_resources(pod, a)) == runtime.LinuxResources(
        cpu_period=100000, cpu_quota=20000, cpu_shares=204, memory_limit_in_bytes=128 * Mi)
    assert specs.effective_resources(pod, b) == b.resources  # its own limits stay
    # Without pod-level resources a burstable pod's cgroup has no quota unless all have one.
    plain = _pod([_ctr("a", {"requests": {"cpu": "100m"}}),
                  _ctr("b", {"limits": {"cpu": "100m"}})])
    assert specs.pod_cgroup(plain).cpu_quota_us is None


def _running(pod: pods.Pod, name: str, cid: str) -> resize.Running:
    container = next(c for c in pod.spec.containers if c.name == name)
    return resize.Running(container, runtime.ContainerID(cid),
                          specs.effective_resources(pod, container))


def test_the_plan_grows_the_pod_first_and_shrinks_it_last_memory_before_cpu() -> None:
    old = _pod([_ctr("a", {"limits": {"cpu": "100m", "memory": "64Mi"}}),
                _ctr("b", {"limits": {"cpu": "100m", "memory": "64Mi"}})])
    new = _pod([_ctr("a", {"limits": {"cpu": "200m", "memory": "32Mi"}}),
                _ctr("b", {"limits": {"cpu": "50m", "memory": "96Mi"}})])
    running = [_running(old, "a", "ca"), _running(old, "b", "cb")]
    wanted = {c.name: specs.effective_resources(new, c) for c in new.spec.containers}
    steps = resize.plan(specs.pod_cgroup(old), specs.pod_cgroup(new), running, wanted)
    shown = [(s.resource, "pod") if isinstance(s, resize.PodWrite)
             else (s.name, s.resources.cpu_limit_milli, s.resources.memory_limit // Mi)
             for s in steps]
    assert shown == [
        # memory: the pod's total is unchanged (128Mi): a shrinks before b grows
        ("a", 100, 32), ("b", 100, 96),
        # cpu: the pod's quota grows (250m > 200m) before the containers; b shrinks first
        ("cpu", "pod"), ("b", 50, 96), ("a", 200, 32),
    ]


def test_memory_below_use_is_refused_with_the_kubelets_words() -> None:
    assert resize.usage_error(10 * 1024, 5 * Mi, {}) == (
        "cannot decrease memory limits: attempting to set pod memory limit (10240) below "
        f"current usage ({5 * Mi})")
    both = resize.usage_error(10, 20, {runtime.ContainerID("c"): ("main", 10, 30)})
    assert both.startswith("cannot decrease memory limits: [attempting to set pod memory")
    assert 'container "main" memory limit (10) below current usage (30)]' in both
    assert resize.usage_error(None, None, {runtime.ContainerID("c"): ("main", 10, 5)}) == ""


def test_restart_policy_applies_only_to_the_resources_that_change() -> None:
    container = dataclasses.replace(_pod([_ctr("a")]).spec.containers[0],
                                    restart_on_resize=frozenset({"memory"}))
    now = pods.Resources(cpu_limit_milli=100, memory_limit=64 * Mi)
    assert not resize.needs_restart(container, now, dataclasses.replace(now,
                                                                        cpu_limit_milli=200))
    assert resize.needs_restart(container, now, dataclasses.replace(now, memory_limit=Mi))


def test_status_echoes_the_quantities_as_written() -> None:
    pod = _pod([_ctr("a")], {"requests": {"cpu": "4m", "memory": "10m"}})
    assert resize.pod_allocated(pod) == {"cpu": "4m", "memory": "10m"}
    plain = _pod([_ctr("a", {"requests": {"cpu": "100m", "memory": "64Mi"}}),
                  _ctr("b", {"requests": {"memory": "64Mi"}})])
    assert resize.pod_allocated(plain) == {"cpu": "100m", "memory": "128Mi"}
    message = resize.event_message("Pod resize completed", plain, 2)
    assert message == ('Pod resize completed: {"containers":[{"name":"a","resources":'
                       '{"requests":{"cpu":"100m","memory":"64Mi"}}},{"name":"b","resources":'
                       '{"requests":{"memory":"64Mi"}}}],"generation":2}')


@pytest.mark.parametrize("containers, pod_resources, expected", [
    ([_ctr("a", {"limits": {"cpu": "1", "memory": "1Gi"}})], None, [-997]),
    ([_ctr("a")], None, [1000]),
    # Burstable: 1000 - 1000 * request / capacity (8 GiB here), within 3..999.
    ([_ctr("a", {"requests": {"memory": "1Gi"}})], None, [875]),
    ([_ctr("a", {"requests": {"cpu": "1m"}})], None, [999]),
    ([_ctr("a", {"requests": {"memory": "9Gi"}, "limits": {"memory": "10Gi"}})], None, [3]),
    # Pod-level memory beyond the containers' is shared out among them: (2Gi - 0) / 2 each.
    ([_ctr("a"), _ctr("b")], {"requests": {"memory": "2Gi"}, "limits": {"memory": "4Gi"}},
     [875, 875]),
])
def test_oom_score_adj_follows_the_kubelets_policy(
        containers: list[dict[str, Any]], pod_resources: dict[str, Any] | None,
        expected: list[int]) -> None:
    pod = _pod(containers, pod_resources)
    assert [specs.oom_score_adj(pod, c, 8 * 2**30) for c in pod.spec.containers] == expected
