"""Containers under a real agent: probes, restarts, CrashLoopBackOff, run-to-completion pods."""

from __future__ import annotations

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, all_ready, cond, is_true, pod_manifest, waiting_reason
from support.polling import eventually

pytestmark = pytest.mark.runtime


async def test_failing_readiness_probe_keeps_pod_running_but_not_ready(agent: Harness) -> None:
    probe = "readinessProbe:\n  exec: {command: [cat, /tmp/ready]}\n  periodSeconds: 1\n"
    agent.write("unready.yaml", pod_manifest("unready", container_extra=probe))
    pod_status = await agent.wait_status(
        "unready", lambda s: s.phase == "Running" and is_true(s, st.POD_READY_TO_START_CONTAINERS)
        and bool(agent.events_of("unready")) and any(
            e.reason == "Unhealthy" for e in agent.events_of("unready")),
        what="Running with a failed readiness probe")
    containers_ready = cond(pod_status, st.CONTAINERS_READY)
    assert containers_ready is not None and containers_ready.status == "False"
    assert containers_ready.message == "containers with unready status: [main]"
    assert not is_true(pod_status, st.READY)
    unhealthy = [e for e in agent.events_of("unready") if e.reason == "Unhealthy"]
    assert unhealthy[0].message.startswith("Readiness probe failed")


async def test_readiness_probe_success_makes_pod_ready(agent: Harness) -> None:
    probe = "readinessProbe:\n  exec: {command: [cat, /tmp/ready]}\n  periodSeconds: 1\n"
    agent.write("later.yaml", pod_manifest("later", command="sleep 2; touch /tmp/ready; "
                                           "sleep 1000000", container_extra=probe))
    pod_status = await agent.wait_status("later", all_ready, what="Ready once the probe passes")
    ready_to_start = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
    ready = cond(pod_status, st.READY)
    assert ready_to_start and ready
    assert ready.last_transition_time > ready_to_start.last_transition_time  # type: ignore[operator]


async def test_liveness_failure_restarts_the_container(agent: Harness) -> None:
    probe = ("livenessProbe:\n  exec: {command: [cat, /tmp/alive]}\n  periodSeconds: 1\n"
             "  failureThreshold: 1\n")
    agent.write("lively.yaml", pod_manifest(
        "lively", command="touch /tmp/alive; sleep 2; rm /tmp/alive; sleep 1000000",
        container_extra=probe))
    pod_status = await agent.wait_status(
        "lively", lambda s: bool(s.container_statuses) and
        s.container_statuses[0].restart_count >= 1, within=40,
        what="a restart after the liveness probe failed")
    reasons = [e.reason for e in agent.events_of("lively")]
    assert "Unhealthy" in reasons and "Killing" in reasons
    assert any(e.message.startswith("Liveness probe failed") for e in agent.events_of("lively"))
    assert pod_status.container_statuses[0].last_state is not None


async def test_crashing_container_backs_off_longer_each_time(agent: Harness) -> None:
    agent.write("crash.yaml", pod_manifest("crash", command="exit 3"))
    messages: list[str] = []

    def backoff_seen() -> bool:
        pod_status = agent.status_of("crash")
        if pod_status is None or waiting_reason(pod_status) != "CrashLoopBackOff":
            return False
        state = pod_status.container_statuses[0].state
        assert isinstance(state, st.ContainerStateWaiting)
        if state.message not in messages:
            messages.append(state.message)
        return len(messages) >= 2

    await eventually(backoff_seen, within=40, what="two growing CrashLoopBackOff periods")
    # Short back-offs can pass before the relist even notices the exit, so which period is
    # seen first varies; what must hold is that each one seen is double the one before.
    periods = [int(m.split()[1].rstrip("s")) for m in messages]
    assert periods[1] == 2 * periods[0], messages
    assert all("restarting failed container=main pod=crash-testnode_default" in m
               for m in messages)
    pod_status = agent.status_of("crash")
    assert pod_status is not None and pod_status.phase == "Running"
    last = pod_status.container_statuses[0].last_state
    assert isinstance(last, st.ContainerStateTerminated) and last.exit_code == 3
    assert is_true(pod_status, st.POD_READY_TO_START_CONTAINERS)
    assert not is_true(pod_status, st.CONTAINERS_READY)


@pytest.mark.parametrize(("code", "phase", "reason"),
                         [(0, "Succeeded", "PodCompleted"), (1, "Failed", "PodFailed")])
async def test_run_to_completion_pods_end_in_a_terminal_phase(
    agent: Harness, code: int, phase: str, reason: str
) -> None:
    name = f"job{code}"
    agent.write(f"{name}.yaml", pod_manifest(name, command=f"exit {code}",
                                             restart_policy="Never"))
    pod_status = await agent.wait_status(name, lambda s: s.phase == phase,
                                         what=f"phase {phase}")
    ready = cond(pod_status, st.READY)
    assert ready is not None and ready.status == "False" and ready.reason == reason
    terminated = pod_status.container_statuses[0].state
    assert isinstance(terminated, st.ContainerStateTerminated)
    assert terminated.exit_code == code
    pod, _ = agent.find(name)  # type: ignore[misc]
    state = await agent.agent_or_fail().relister.refresh_pod(pod.uid)
    assert len([c for c in state.containers if c.name == "main"]) == 1, "never restarted"


async def test_failing_init_container_is_retried_until_it_succeeds(agent: Harness) -> None:
    marks = agent.root / "init-marks"
    volume = (f"volumes:\n  - name: marks\n    hostPath: {{path: {marks}, "
              "type: DirectoryOrCreate}\n")
    text = pod_manifest("retry", init="test -f /marks/ok || { touch /marks/ok; exit 1; }",
                        extra_spec=volume)
    text = text.replace("      command: [\"sh\", \"-c\", 'test -f",
                        "      volumeMounts: [{name: marks, mountPath: /marks}]\n"
                        "      command: [\"sh\", \"-c\", 'test -f")
    agent.write("retry.yaml", text)
    pod_status = await agent.wait_status("retry", all_ready, what="Ready after an init retry")
    init = pod_status.init_container_statuses[0]
    assert init.restart_count >= 1
    assert isinstance(init.state, st.ContainerStateTerminated) and init.state.exit_code == 0


async def test_sidecar_init_container_keeps_running(agent: Harness) -> None:
    text = pod_manifest("sidecar", init="sleep 1000000")
    text = text.replace("    - name: init\n", "    - name: init\n      restartPolicy: Always\n")
    agent.write("sidecar.yaml", text)
    pod_status = await agent.wait_status("sidecar", all_ready, what="Ready with a sidecar")
    sidecar = pod_status.init_container_statuses[0]
    assert isinstance(sidecar.state, st.ContainerStateRunning) and sidecar.started
    assert is_true(pod_status, st.INITIALIZED)


async def test_restarted_container_does_not_inherit_readiness(agent: Harness) -> None:
    """Each instance is probed afresh: never ready before its own initialDelaySeconds."""
    import time as time_mod

    probe = ("readinessProbe:\n  exec: {command: [\"true\"]}\n  periodSeconds: 1\n"
             "  initialDelaySeconds: 3\n")
    agent.write("flappy.yaml", pod_manifest("flappy", command="sleep 6; exit 1",
                                            container_extra=probe))
    too_early: list[str] = []

    def watch(pod: object, pod_status: st.PodStatus) -> None:
        for c in pod_status.container_statuses:
            if c.ready and isinstance(c.state, st.ContainerStateRunning) and c.state.started_at:
                age = time_mod.time() - c.state.started_at.timestamp()
                if age < 2.5:  # 3 s delay, less scheduling slack
                    too_early.append(f"ready {age:.2f}s after start, restarts {c.restart_count}")

    agent.agent_or_fail().statuses.subscribe(watch)  # type: ignore[arg-type]
    await agent.wait_status("flappy", lambda s: bool(s.container_statuses)
                            and s.container_statuses[0].restart_count >= 1
                            and s.container_statuses[0].ready, within=40,
                            what="the restarted instance Ready after its own probe")
    assert too_early == []
