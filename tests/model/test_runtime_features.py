"""What containerd 2.x adds, as pure decisions: supplementalGroupsPolicy Strict and
`containerStatuses[].user`, and lifecycle.stopSignal (ContainerStopSignals) — parsed as the API
server validates them, sent to CRI, reported, and refused at admission where the node cannot."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodelet.adapters.cri import convert
from nodelet.adapters.cri.gen import api_pb2 as pb
from nodelet.model.core import admission, nodes, pods, security, specs, status
from nodelet.model.core import runtime as rt
from nodelet.model.parsing import hookspecs, manifests

NODE = "n1"


def pod(spec: dict[str, Any] | None = None, container: dict[str, Any] | None = None) -> pods.Pod:
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "busybox", **(container or {})}],
                 **(spec or {})},
    }
    return manifests.pod_from_object(copy.deepcopy(obj), node_name=NODE)


def node(**facts: Any) -> admission.Node:
    return admission.Node(labels={"kubernetes.io/os": "linux"}, name=NODE, **facts)


# -- supplementalGroupsPolicy ---------------------------------------------------------------------


@pytest.mark.parametrize(("given", "sent"), [(None, "Merge"), ("Merge", "Merge"),
                                             ("Strict", "Strict")])
def test_the_policy_reaches_cri_in_the_sandbox_and_every_container(given: str | None,
                                                                    sent: str) -> None:
    sc: dict[str, Any] = {"supplementalGroups": [6000], "fsGroup": 7000}
    if given is not None:
        sc["supplementalGroupsPolicy"] = given
    p = pod({"securityContext": sc})
    sandbox = security.sandbox_security(p)
    container = security.container_security(p, p.spec.containers[0], security.ROOT,
                                            security.Options())
    assert (sandbox.supplemental_groups_policy, container.supplemental_groups_policy) == \
        (sent, sent)
    assert container.supplemental_groups == (7000, 6000)
    assert convert._container_security_to_pb(container).supplemental_groups_policy == \
        pb.SupplementalGroupsPolicy.Value(sent)
    assert convert._sandbox_security_to_pb(sandbox).supplemental_groups_policy == \
        pb.SupplementalGroupsPolicy.Value(sent)


def test_strict_is_admitted_only_where_the_runtime_says_it_can() -> None:
    strict = pod({"securityContext": {"supplementalGroupsPolicy": "Strict"}})
    refused = admission.admit(strict, node())
    assert refused is not None and refused.reason == "SupplementalGroupsPolicyNotSupported"
    assert refused.message == "SupplementalGroupsPolicy=Strict is not supported in this node"
    assert admission.admit(strict, node(supplemental_groups_strict=True)) is None
    merge = pod({"securityContext": {"supplementalGroupsPolicy": "Merge"}})
    assert admission.admit(merge, node()) is None


def test_the_runtimes_features_and_the_containers_user_are_read_from_cri() -> None:
    answer = pb.StatusResponse(features=pb.RuntimeFeatures(supplemental_groups_policy=True))
    assert convert.runtime_status_from_pb(answer).supplemental_groups_policy
    assert not convert.runtime_status_from_pb(pb.StatusResponse()).supplemental_groups_policy
    reported = pb.ContainerStatus(id="c1", user=pb.ContainerUser(linux=pb.LinuxContainerUser(
        uid=1000, gid=1000, supplemental_groups=[1000, 6000])))
    info = convert.container_status_from_pb(reported, "s1")
    assert info.user == rt.ContainerUser(1000, 1000, (1000, 6000))
    assert convert.container_status_from_pb(pb.ContainerStatus(id="c1"), "s1").user is None


def test_the_user_in_the_pods_status_as_the_kubelet_writes_it() -> None:
    waiting = status.ContainerStateWaiting(reason="x")
    with_groups = status.ContainerStatus("c", "busybox", waiting,
                                         user=rt.ContainerUser(1000, 1000, (1000, 6000)))
    api = status.to_api(status.PodStatus(container_statuses=(with_groups,)))
    assert api["containerStatuses"][0]["user"] == {
        "linux": {"uid": 1000, "gid": 1000, "supplementalGroups": [1000, 6000]}}
    bare = status.ContainerStatus("c", "busybox", waiting, user=rt.ContainerUser(0, 0))
    api = status.to_api(status.PodStatus(container_statuses=(bare,)))
    assert api["containerStatuses"][0]["user"] == {"linux": {"uid": 0, "gid": 0}}
    none = status.ContainerStatus("c", "busybox", waiting)
    assert "user" not in status.to_api(
        status.PodStatus(container_statuses=(none,)))["containerStatuses"][0]


def test_the_node_reports_the_feature_as_the_kubelet() -> None:
    spec = nodes.NodeSpec(name=NODE, host_ip="192.0.2.1", machine=nodes.MachineFacts(
        cpus=1, memory_bytes=1, machine_id="m", boot_id="b", kernel_version="6",
        os_image="Debian", architecture="amd64"), max_pods=10)
    ready = nodes.ready_condition(rt.RuntimeStatus(()))
    features = rt.RuntimeStatus((), supplemental_groups_policy=True)
    out = nodes.node_status(spec, None, ready, previous=None, now=status.parse_time(
        "2026-01-01T00:00:00Z"), features=features)  # type: ignore[arg-type]
    assert out["features"] == {"supplementalGroupsPolicy": True}
    assert "runtimeHandlers" not in out  # the runtime names no handlers (containerd 1.6)
    handlers = rt.RuntimeStatus((), handlers=(
        rt.HandlerFeatures("", recursive_read_only_mounts=True, user_namespaces=True),
        rt.HandlerFeatures("runc", recursive_read_only_mounts=True)))
    named = nodes.node_status(spec, None, ready, previous=None, now=status.parse_time(
        "2026-01-01T00:00:00Z"), features=handlers)  # type: ignore[arg-type]
    assert named["runtimeHandlers"] == [  # the kubelet's RuntimeHandlers setter
        {"name": "", "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}},
        {"name": "runc", "features": {"recursiveReadOnlyMounts": True,
                                      "userNamespaces": False}}]
    unanswered = nodes.node_status(spec, None, ready, previous=None, now=status.parse_time(
        "2026-01-01T00:00:00Z"))  # type: ignore[arg-type]
    assert "features" not in unanswered


# -- lifecycle.stopSignal -------------------------------------------------------------------------


def test_every_linux_stop_signal_has_a_cri_value_and_back() -> None:
    assert len(hookspecs.LINUX_STOP_SIGNALS) == 65 == len(set(hookspecs.LINUX_STOP_SIGNALS))
    for name in hookspecs.LINUX_STOP_SIGNALS:
        assert convert.signal_from_pb(convert.signal_to_pb(name)) == name
    assert convert.signal_to_pb("SIGRTMIN+3") == pb.SIGNAL_SIGRTMINPLUS3
    assert convert.signal_to_pb("SIGRTMAX-1") == pb.SIGNAL_SIGRTMAXMINUS1
    assert convert.signal_to_pb("") == pb.SIGNAL_RUNTIME_DEFAULT
    assert convert.signal_from_pb(pb.SIGNAL_RUNTIME_DEFAULT) == ""


def test_a_stop_signal_is_parsed_and_sent_to_cri() -> None:
    p = pod({"os": {"name": "linux"}}, {"lifecycle": {"stopSignal": "SIGUSR1"}})
    assert p.spec.containers[0].lifecycle.stop_signal == "SIGUSR1"
    config = specs.container_config(p, p.spec.containers[0], attempt=0, kind="regular")
    assert convert.container_config_to_pb(config).stop_signal == pb.SIGNAL_SIGUSR1
    plain = pod()
    config = specs.container_config(plain, plain.spec.containers[0], attempt=0, kind="regular")
    assert convert.container_config_to_pb(config).stop_signal == pb.SIGNAL_RUNTIME_DEFAULT


@pytest.mark.parametrize(("spec", "signal", "words"), [
    ({}, "SIGUSR1", "may not be set for containers with empty `spec.os.name`"),
    ({"os": {"name": "linux"}}, "SIGNOPE", 'unsupported value "SIGNOPE"'),
    ({"os": {"name": "linux"}}, "SIGRTMIN+16", 'unsupported value "SIGRTMIN+16"'),
    ({"os": {"name": "windows"}}, "SIGUSR1", 'unsupported value "SIGUSR1"'),
])
def test_stop_signals_the_api_server_rejects(spec: dict[str, Any], signal: str,
                                             words: str) -> None:
    with pytest.raises(manifests.ManifestError, match="stopSignal") as info:
        pod(spec, {"lifecycle": {"stopSignal": signal}})
    assert words in str(info.value)


def test_a_stop_signal_needs_the_gate_and_a_runtime_that_applies_it() -> None:
    p = pod({"os": {"name": "linux"}}, {"lifecycle": {"stopSignal": "SIGUSR1"}})
    off = admission.admit(p, node(stop_signals=True))
    assert off is not None and off.reason == "ContainerStopSignalsNotSupported"
    assert "--feature-gates=ContainerStopSignals=true" in off.message
    old = admission.admit(p, node(stop_signals_gate=True))
    assert old is not None and old.reason == "ContainerStopSignalsNotSupported"
    assert "containerd 2.3 or later" in old.message
    assert admission.admit(p, node(stop_signals_gate=True, stop_signals=True)) is None
    assert admission.admit(pod(), node()) is None  # no stop signal: nothing to ask


@pytest.mark.parametrize(("name", "version", "applies"), [
    ("containerd", "v2.4.2", True), ("containerd", "2.3.4", True),
    ("containerd", "v2.2.9", False), ("containerd", "1.6.20", False),
    ("cri-o", "1.33.0", True),
])
def test_which_runtimes_apply_stop_signals(name: str, version: str, applies: bool) -> None:
    assert admission.applies_stop_signals(rt.VersionInfo(name, version, "v1")) is applies


def test_the_runtimes_stop_signal_is_read_from_its_status() -> None:
    reported = pb.ContainerStatus(id="c1", stop_signal=pb.SIGNAL_SIGRTMINPLUS3)
    assert convert.container_status_from_pb(reported, "s1").stop_signal == "SIGRTMIN+3"
    assert convert.container_status_from_pb(pb.ContainerStatus(id="c1"), "s1").stop_signal == ""
