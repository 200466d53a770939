"""The last status of a terminated pod (kubelet 1.27+): a terminal phase before the delete."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_phases import ERR, OK, RUNNING, WAITING, cs, make_pod

from nodelet.model.core import generation, phases, pods, status

KILLED = status.ContainerStateTerminated(exit_code=137, reason="Error")
STATIC = make_pod()  # pods from manifests (the default source)


def api_pod(*args: Any, **kwargs: Any) -> pods.Pod:
    return dataclasses.replace(make_pod(*args, **kwargs), source="api")


@pytest.mark.parametrize(
    ("pod", "regular", "expected"),
    [
        pytest.param(api_pod(), [cs("app", OK)], "Succeeded", id="always, exit 0"),
        pytest.param(api_pod(), [cs("app", KILLED)], "Failed", id="always, killed"),
        pytest.param(api_pod(("a", "b")), [cs("a", OK), cs("b", ERR)], "Failed",
                     id="one failed"),
        pytest.param(api_pod(policy="OnFailure"), [cs("app", ERR)], "Failed",
                     id="onfailure, no restart"),
        pytest.param(STATIC, [cs("app", KILLED)], "Running", id="static pods excepted"),
        pytest.param(api_pod(), [cs("app", RUNNING)], "Running", id="still running"),
    ],
)
def test_phase_of_a_terminated_pod(
    pod: pods.Pod, regular: list[status.ContainerStatus], expected: status.PodPhase
) -> None:
    assert phases.pod_phase(pod, [], regular, terminal=True) == expected


def test_without_terminal_restart_policy_decides() -> None:
    assert phases.pod_phase(api_pod(), [], [cs("app", KILLED)]) == "Running"


UNKNOWN = status.ContainerStateTerminated(
    exit_code=137, reason="ContainerStatusUnknown",
    message="The container could not be located when the pod was terminated")


@pytest.mark.parametrize(
    ("phase", "inits", "regular", "want_phase", "want_inits", "want_regular"),
    [
        pytest.param("Succeeded", [], [cs("a", OK)], "Succeeded", [], [OK], id="kept"),
        pytest.param("Running", [], [cs("a", RUNNING)], "Failed", [], [UNKNOWN],
                     id="running → Failed, unknown container"),
        pytest.param("Pending", [], [cs("a", WAITING)], "Failed", [], [UNKNOWN],
                     id="never created, no init containers"),
        pytest.param("Pending", [cs("i1", OK), cs("i2", RUNNING), cs("i3", WAITING)],
                     [cs("a", WAITING)], "Failed", [OK, UNKNOWN, WAITING], [WAITING],
                     id="not initialized: regular ones stay waiting"),
        pytest.param("Running", [cs("i", OK)], [cs("a", KILLED), cs("b", WAITING)], "Failed",
                     [OK], [KILLED, UNKNOWN], id="initialized"),
    ],
)
def test_terminal_status(
    phase: status.PodPhase, inits: list[status.ContainerStatus],
    regular: list[status.ContainerStatus], want_phase: status.PodPhase,
    want_inits: list[status.ContainerStateValue], want_regular: list[status.ContainerStateValue],
) -> None:
    got_phase, got_inits, got_regular = generation.terminal_status(
        phase, tuple(inits), tuple(regular))
    assert got_phase == want_phase
    assert [s.state for s in got_inits] == want_inits
    assert [s.state for s in got_regular] == want_regular
    assert not any(s.ready for s in got_regular if s.state == UNKNOWN)
