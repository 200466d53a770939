"""Conditions written by others in the API (readiness gates, DisruptionTarget) in status
generation: the API's copy wins for types nodelet does not write; Ready honours the gates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nodelet import settings
from nodelet.model.core import generation, pods, runtime, status
from nodelet.model.core.status import PodCondition

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GATE = "example.com/lb"


def api_pod(*conds: dict[str, Any], gates: tuple[str, ...] = (GATE,),
            source: str = "api") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),),
                        readiness_gates=gates)
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default", spec=spec,
                    source=source, api_conditions=tuple(conds))


def c(type_: str, status_: status.ConditionStatus, reason: str = "") -> PodCondition:
    return PodCondition(type=type_, status=status_, reason=reason)


def kinds(conditions: tuple[PodCondition, ...]) -> list[tuple[str, str]]:
    return [(x.type, x.status) for x in conditions]


@pytest.mark.parametrize(
    ("api", "old", "expected"),
    [
        pytest.param((), (), [], id="nothing"),
        pytest.param(({"type": GATE, "status": "True"},), (), [(GATE, "True")],
                     id="gate from the API"),
        pytest.param(({"type": GATE, "status": "False"},),
                     (c(GATE, "True"), c(status.READY, "True")),
                     [(GATE, "False"), (status.READY, "True")], id="the API's copy wins"),
        pytest.param((), (c(GATE, "True"), c(status.READY, "True")),
                     [(status.READY, "True")], id="removed in the API: dropped"),
        pytest.param(({"type": status.READY, "status": "False"},
                      {"type": status.DISRUPTION_TARGET, "status": "True"}),
                     (c(status.READY, "True"),),
                     [(status.READY, "True"), (status.DISRUPTION_TARGET, "True")],
                     id="nodelet's own types are never taken from the API"),
        pytest.param(({"type": GATE, "status": "bogus", "lastTransitionTime": "nonsense"},
                      {"status": "True"}),
                     (), [(GATE, "Unknown")], id="lenient about others' values"),
    ],
)
def test_with_api_conditions(api: tuple[dict[str, Any], ...], old: tuple[PodCondition, ...],
                             expected: list[tuple[str, str]]) -> None:
    assert kinds(generation.with_api_conditions(api_pod(*api), old)) == expected


def test_static_pods_keep_their_old_conditions() -> None:
    old = (c(GATE, "True"),)
    pod = api_pod({"type": GATE, "status": "False"}, source="file")
    assert generation.with_api_conditions(pod, old) == old


def _generate(pod: pods.Pod, old: status.PodStatus | None = None) -> status.PodStatus:
    sandbox = runtime.SandboxInfo(
        id=runtime.SandboxID("sb"), name="p", namespace="default", uid="u", attempt=0,
        state=runtime.SandboxState.READY, created_at=1, ip="10.0.0.5")
    container = runtime.ContainerInfo(
        id=runtime.ContainerID("c1"), name="app", sandbox_id=runtime.SandboxID("sb"),
        image="busybox", image_ref="busybox",
        state=runtime.ContainerState.RUNNING, created_at=1, started_at=1, attempt=0)
    return generation.generate_status(
        pod, sandboxes=[sandbox], containers=[container], old=old, last_sandbox_error=None,
        waiting={}, host_ip="192.0.2.1", now=NOW, gates=settings.FeatureGates(),
        ready={"app": True})


def test_ready_follows_the_gate_written_in_the_api() -> None:
    missing = _generate(api_pod())
    ready = missing.condition(status.READY)
    assert ready is not None and ready.status == "False"
    assert ready.reason == status.REASON_READINESS_GATES_NOT_READY
    opened = _generate(api_pod({"type": GATE, "status": "True",
                                "lastTransitionTime": "2026-01-01T00:00:05Z"}), missing)
    assert opened.condition(status.READY) == c(status.READY, "True")
    gate = opened.condition(GATE)
    assert gate is not None and gate.last_transition_time == NOW.replace(second=5)
    closed = _generate(api_pod({"type": GATE, "status": "False"}), opened)
    ready = closed.condition(status.READY)
    assert ready is not None and ready.status == "False"
    assert ready.reason == status.REASON_READINESS_GATES_NOT_READY
    assert "is not \"True\", but False" in ready.message
    assert kinds(closed.conditions)[0] == (GATE, "False")
