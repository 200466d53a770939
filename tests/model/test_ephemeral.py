"""Ephemeral containers (`kubectl debug`): read from an API pod, started once each, never
restarted, in their target's PID namespace, reported in ephemeralContainerStatuses — tables
after the kubelet's computePodActions, generateLinuxContainerConfig and
convertToAPIContainerStatuses."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import phases, pods, runtime, status
from nodelet.model.core import podactions as pa
from nodelet.model.parsing import manifests

NOW = 1_000_000.0
SB = runtime.SandboxID("sb-1")
RUNNING, EXITED = runtime.ContainerState.RUNNING, runtime.ContainerState.EXITED


def api_pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}], **spec}}


DEBUGGER = {"name": "debugger", "image": "busybox", "stdin": True, "tty": True,
            "targetContainerName": "app"}


def test_read_from_an_api_pod_with_its_target() -> None:
    parsed = manifests.pod_from_object(api_pod(ephemeralContainers=[DEBUGGER]), node_name="n",
                                       source="api", strict=False)
    (debugger,) = parsed.spec.ephemeral_containers
    assert (debugger.name, debugger.target_container_name, debugger.tty) == (
        "debugger", "app", True)
    assert parsed.refused == ()


def test_a_manifest_cannot_set_them() -> None:
    with pytest.raises(manifests.ManifestError, match="cannot be set on create"):
        manifests.pod_from_object(api_pod(ephemeralContainers=[DEBUGGER]), node_name="n")


def pod(*, ephemeral: tuple[str, ...] = ("debugger",), target: str = "",
        init: tuple[str, ...] = (), share: bool = False) -> pods.Pod:
    spec = pods.PodSpec(
        containers=(pods.Container(name="app", image="busybox"),),
        init_containers=tuple(pods.Container(name=n, image="busybox") for n in init),
        ephemeral_containers=tuple(pods.Container(name=n, image="busybox",
                                                  target_container_name=target)
                                   for n in ephemeral),
        share_process_namespace=share)
    return pods.Pod(uid=pods.PodUID("u-1"), name="p", namespace="default", spec=spec)


def ctr(name: str, state: runtime.ContainerState = RUNNING, *, attempt: int = 0,
        sandbox: str = "sb-1") -> runtime.ContainerInfo:
    return runtime.ContainerInfo(
        id=runtime.ContainerID(f"{name}-{attempt}-{sandbox}"),
        sandbox_id=runtime.SandboxID(sandbox),
        name=name, attempt=attempt, image="busybox", image_ref="busybox", state=state,
        created_at=attempt + 1, started_at=int((NOW - 5) * 1e9), exit_code=0)


def actions(the_pod: pods.Pod, *containers: runtime.ContainerInfo) -> list[tuple[str, str]]:
    sandbox = runtime.SandboxInfo(id=SB, name="p", namespace="default", uid="u-1", attempt=0,
                                  state=runtime.SandboxState.READY, created_at=1, ip="10.0.0.5")
    state = runtime.PodRuntime(uid="u-1", sandboxes=(sandbox,), containers=containers)
    return [(type(a).__name__, f"{a.kind}:{a.container.name}")
            for a in pa.container_actions(the_pod, state, pa.ContainerFacts(SB, NOW))]


@pytest.mark.parametrize(("the_pod", "containers", "expected"), [
    (pod(), (ctr("app"),), [("Start", "ephemeral:debugger"), ("KeepRunning", "regular:app")]),
    # Never restarted: an exited one stays exited, in this sandbox or an older one.
    (pod(), (ctr("app"), ctr("debugger", EXITED)), [("KeepRunning", "regular:app")]),
    (pod(), (ctr("app"), ctr("debugger", EXITED, sandbox="sb-0")),
     [("KeepRunning", "regular:app")]),
    (pod(), (ctr("app"), ctr("debugger")), [("KeepRunning", "regular:app")]),
    # Started while an init container still runs (it cannot help initialization along).
    (pod(init=("i",)), (ctr("i"),), [("Start", "ephemeral:debugger"), ("KeepRunning", "init:i")]),
], ids=["added", "exited", "exited-in-an-old-sandbox", "running", "during-init"])
def test_started_once(the_pod: pods.Pod, containers: tuple[runtime.ContainerInfo, ...],
                      expected: list[tuple[str, str]]) -> None:
    assert actions(the_pod, *containers) == expected


def test_the_target_pid_namespace() -> None:
    options = runtime.NamespaceOptions()
    state = runtime.PodRuntime(uid="u-1", containers=(ctr("app", attempt=1), ctr("app")))
    (debugger,) = pod(target="app").spec.ephemeral_containers
    joined = pa.target_namespaces(options, debugger, state)
    assert (joined.pid, joined.target_id) == (runtime.NamespaceMode.TARGET, "app-1-sb-1")
    # A pod that shares one PID namespace keeps it; no target, no change.
    shared = runtime.NamespaceOptions(pid=runtime.NamespaceMode.POD)
    assert pa.target_namespaces(shared, debugger, state) == shared
    (untargeted,) = pod().spec.ephemeral_containers
    assert pa.target_namespaces(options, untargeted, state) == options
    with pytest.raises(LookupError, match="unable to find target container app"):
        pa.target_namespaces(options, debugger, runtime.PodRuntime(uid="u-1"))


def test_statuses_are_never_ready_and_carry_no_started() -> None:
    the_pod = pod(ephemeral=("debugger", "later"))
    running, later = phases.ephemeral_container_statuses(the_pod, [ctr("app"), ctr("debugger")])
    assert isinstance(running.state, status.ContainerStateRunning)
    assert (running.ready, running.started, running.restart_count) == (False, None, 0)
    assert isinstance(later.state, status.ContainerStateWaiting)
    assert later.state.reason == "ContainerCreating"
    api = status.to_api(status.PodStatus(ephemeral_container_statuses=(running,)))
    (entry,) = api["ephemeralContainerStatuses"]
    assert entry["name"] == "debugger" and entry["ready"] is False and "started" not in entry
    assert "ephemeralContainerStatuses" not in status.to_api(status.PodStatus())
