"""Status assembly (pure): terminal phases and their reasons are kept."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodelet import settings
from nodelet.model.core import generation, pods, runtime
from nodelet.model.core import status as st

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POD = pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default",
               spec=pods.PodSpec(containers=(pods.Container(name="c", image="i"),)))


def generate(old: st.PodStatus | None, *, failure: tuple[str, str] | None = None
             ) -> st.PodStatus:
    return generation.generate_status(
        POD, sandboxes=(), containers=(), old=old, last_sandbox_error=None, waiting={},
        host_ip="10.0.0.1", now=NOW, gates=settings.FeatureGates(), failure=failure)


def test_deadline_exceeded_makes_the_pod_failed() -> None:
    status = generate(None, failure=(generation.DEADLINE_EXCEEDED, generation.DEADLINE_MESSAGE))
    assert (status.phase, status.reason) == ("Failed", generation.DEADLINE_EXCEEDED)
    assert status.message == generation.DEADLINE_MESSAGE


def test_a_rejected_pod_is_failed_with_the_admission_reason() -> None:
    status = generate(None, failure=("SysctlForbidden", "Pod was rejected: forbidden sysctl: x"))
    assert (status.phase, status.reason, status.message) == (
        "Failed", "SysctlForbidden", "Pod was rejected: forbidden sysctl: x")


def test_a_remembered_deadline_failure_stays_after_a_restart() -> None:
    remembered = st.PodStatus(phase="Failed", reason=generation.DEADLINE_EXCEEDED,
                              message=generation.DEADLINE_MESSAGE)
    status = generate(remembered)
    assert (status.phase, status.reason, status.message) == (
        "Failed", generation.DEADLINE_EXCEEDED, generation.DEADLINE_MESSAGE)


def test_without_history_a_pod_without_sandbox_is_pending() -> None:
    status = generate(None)
    assert (status.phase, status.reason) == ("Pending", "")


def test_a_rejected_pod_has_no_container_statuses_and_keeps_its_reason() -> None:
    rejected = ("SysctlForbidden", "Pod was rejected: forbidden sysctl: x")
    status = generate(None, failure=rejected)
    assert (status.container_statuses, status.init_container_statuses) == ((), ())
    again = generate(status)  # after an agent restart: no failure from admission any more
    assert (again.phase, again.reason, again.message) == ("Failed", *rejected)
    assert again.container_statuses == ()


def test_a_rejected_pod_has_none_of_the_kubelets_conditions() -> None:
    """As the kubelet's rejectPod (found by tests/differential, `unsafe-sysctl`)."""
    rejected = ("SysctlForbidden", "Pod was rejected: forbidden sysctl: x")
    assert generate(None, failure=rejected).conditions == ()
    assert generate(generate(None, failure=rejected)).conditions == ()
    assert generate(None, failure=(generation.DEADLINE_EXCEEDED,
                                   generation.DEADLINE_MESSAGE)).conditions != ()


def test_an_evicted_pod_is_a_disruption_target_a_refused_one_is_not() -> None:
    status = generate(None, failure=("Evicted", "The node was low on resource: memory. "))
    marks = [c for c in status.conditions if c.type == st.DISRUPTION_TARGET]
    assert [(c.status, c.reason, c.message) for c in marks] == [
        ("True", "TerminationByKubelet", "The node was low on resource: memory. ")]
    assert [c.type for c in generate(status).conditions].count(st.DISRUPTION_TARGET) == 1
    refused = generate(None, failure=(
        "Evicted", "Pod was rejected: The node had condition: [DiskPressure]. "))
    assert all(c.type != st.DISRUPTION_TARGET for c in refused.conditions)


def test_a_collected_container_keeps_its_last_terminated_status() -> None:
    ended = st.ContainerStatus("c", "i", st.ContainerStateTerminated(
        exit_code=137, reason="Error", started_at=NOW, finished_at=NOW), container_id="cid")
    before = st.PodStatus(phase="Failed", reason="Evicted", message="m",
                          container_statuses=(ended,))
    assert generate(before).container_statuses == (ended,)
    waiting = st.PodStatus(phase="Pending", container_statuses=(st.ContainerStatus(
        "c", "i", st.ContainerStateWaiting("ContainerCreating")),))
    assert generate(waiting).container_statuses[0].state == \
        st.ContainerStateWaiting("ContainerCreating")


def sandbox(state: runtime.SandboxState, ip: str = "") -> runtime.SandboxInfo:
    return runtime.SandboxInfo(id=runtime.SandboxID("s"), name="p", namespace="default", uid="u",
                               attempt=0, state=state, created_at=1, ip=ip)


@pytest.mark.parametrize(("sandboxes", "expected"), [
    pytest.param((), ("10.1.0.7",), id="sandbox-removed"),
    pytest.param((sandbox(runtime.SandboxState.NOTREADY),), ("10.1.0.7",), id="stopped"),
    pytest.param((sandbox(runtime.SandboxState.READY, "10.1.0.9"),), ("10.1.0.9",),
                 id="new-sandbox-ready"),
])
def test_without_a_ready_sandbox_the_pod_keeps_its_ips(
    sandboxes: tuple[runtime.SandboxInfo, ...], expected: tuple[str, ...]
) -> None:
    """As the kubelet's PLEG (getPodIPs): a finished pod, whose sandbox is stopped, still
    shows the IPs it had; a new ready sandbox's IPs replace them."""
    before = st.PodStatus(phase="Succeeded", pod_ips=("10.1.0.7",))
    status = generation.generate_status(
        POD, sandboxes=sandboxes, containers=(), old=before, last_sandbox_error=None,
        waiting={}, host_ip="10.0.0.1", now=NOW, gates=settings.FeatureGates())
    assert status.pod_ips == expected
