"""Issue 13 acceptance on real containerd: runtime events, not the relist, wake the pod worker.

Every agent here runs with the relist period (evented and polling) and the worker's resync
period at an hour, so only the runtime's event stream can explain a reaction within a test:
CRI's GetContainerEvents on containerd 2.x, containerd's own events on 1.6 (`events_live`
checks which one the agent listens to).
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import grpc
import pytest
from test_sandbox_lifecycle import kill_pause

from conftest import runtime_programs_for_tests
from nodelet.model.core import events as ev
from nodelet.model.core import status as st
from nodelet.services.pleg import runtimeevents
from support.criproxy import CriProxy
from support.harness import Harness, all_ready, cond, events_by, is_true, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

HOUR = 3600.0
# Only events can explain a reaction (see the module docstring).
EVENTS_ONLY = {"relist_period": HOUR, "polling_relist_period": HOUR, "resync_period": HOUR}


def restarts(pod_status: st.PodStatus) -> int:
    return pod_status.container_statuses[0].restart_count if pod_status.container_statuses else 0


def kill_process(argv: list[str]) -> int:
    """SIGKILL the host process running exactly `argv` (a container's main process)."""
    wanted = b"\0".join(a.encode() for a in argv) + b"\0"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cmdline").read_bytes() == wanted:
                os.kill(int(proc.name), signal.SIGKILL)
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"no process {argv}")


async def events_live(agent: Harness, *, subscriptions: int = 1) -> runtimeevents.RuntimeEvents:
    """The agent's event subscription once it is live (for the `subscriptions`th time)."""
    events = agent.agent_or_fail().runtime_events
    assert events is not None
    await eventually(lambda: events.live and events.subscriptions >= subscriptions, within=30,
                     what=f"runtime events live (subscription {subscriptions})",
                     seen=lambda ok: f"state {events.state}, error {events.error!r}")
    programs = runtime_programs_for_tests()
    expected = "cri" if programs.major >= 2 else "containerd"  # 1.6 has no CRI events
    assert events.source_name == expected, (programs.describe(), events.source_name)
    return events


async def restarted_after_kill(agent: Harness, name: str, argv: list[str]) -> st.PodStatus:
    """Kill the pod's container process and wait for the restarted container."""
    before = await agent.wait_status(name, all_ready, what=f"{name} Ready")
    kill_process(argv)
    return await agent.wait_status(
        name, lambda s: restarts(s) > restarts(before) and all_ready(s),
        what=f"{name} restarted after its container was killed")


async def test_killed_container_is_restarted_by_its_exit_event(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent: Harness = await make_agent(sync_settings=EVENTS_ONLY)
    await events_live(agent)
    agent.write("victim.yaml", pod_manifest("victim", command="exec sleep 1000001"))
    again = await restarted_after_kill(agent, "victim", ["sleep", "1000001"])
    last = again.container_statuses[0].last_state
    assert isinstance(last, st.ContainerStateTerminated) and last.exit_code == 137, last
    health = {c.name: c for c in agent.agent_or_fail().health()}
    assert health["runtime-events"].ok, health


async def test_cri_events_alone_see_a_kill_with_containerds_event_api_off(
        make_agent, runtime) -> None:  # type: ignore[no-untyped-def]
    """containerd's own event API answers UNIMPLEMENTED (a CRI proxy in front of the real
    containerd refuses Subscribe): CRI's GetContainerEvents alone wakes the worker."""
    if runtime_programs_for_tests().major < 2:
        pytest.skip("containerd 1.6 has no CRI events; its own event API is its only source")
    socket = Path(tempfile.mkdtemp(prefix="nle-", dir="/tmp")) / "cri.sock"
    try:
        async with CriProxy(upstream=runtime.containerd.endpoint, socket=socket) as proxy:
            proxy.fail("Subscribe", grpc.StatusCode.UNIMPLEMENTED, "unknown service "
                       "containerd.services.events.v1.Events")
            agent: Harness = await make_agent(endpoint=proxy.endpoint, sync_settings=EVENTS_ONLY)
            events = await events_live(agent)
            agent.write("lonely.yaml", pod_manifest("lonely", command="exec sleep 1000005"))
            again = await restarted_after_kill(agent, "lonely", ["sleep", "1000005"])
            assert restarts(again) == 1 and events.source_name == "cri"
            assert proxy.calls.get("GetContainerEvents", 0) >= 1, proxy.calls
            assert proxy.calls.get("Subscribe", 0) == 0, proxy.calls  # never needed
            await agent.stop()
    finally:
        socket.unlink(missing_ok=True)
        socket.parent.rmdir()


async def test_killed_pause_gets_new_sandbox_by_its_exit_event(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent: Harness = await make_agent(sync_settings=EVENTS_ONLY)
    await events_live(agent)
    agent.write("phoenix.yaml", pod_manifest("phoenix"))
    first = await agent.wait_status("phoenix", all_ready, what="phoenix Ready")
    first_true = cond(first, st.POD_READY_TO_START_CONTAINERS)
    assert first_true is not None
    old_sandbox, _ = await kill_pause(agent, "phoenix")
    await agent.wait_status(
        "phoenix", lambda s: all_ready(s) and cond(s, st.POD_READY_TO_START_CONTAINERS)
        .last_transition_time != first_true.last_transition_time,  # type: ignore[union-attr]
        what="condition True again on a new sandbox")
    assert events_by(agent, "phoenix", ev.SANDBOX_CHANGED)
    pod, _ = agent.find("phoenix")  # type: ignore[misc]
    state = await agent.agent_or_fail().relister.refresh_pod(pod.uid)
    assert state.sandboxes[0].id != old_sandbox and state.sandboxes[0].attempt == 1


async def test_oom_killed_container_reports_oomkilled_and_a_warning(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent: Harness = await make_agent(sync_settings=EVENTS_ONLY)
    await events_live(agent)
    agent.write("hog.yaml", pod_manifest(
        "hog", command="exec tail /dev/zero", restart_policy="Never",
        container_extra="resources:\n  limits: {memory: 16Mi}\n"))

    def oom_killed(pod_status: st.PodStatus) -> bool:
        state = pod_status.container_statuses[0].state if pod_status.container_statuses else None
        return isinstance(state, st.ContainerStateTerminated) and state.reason == "OOMKilled"

    done = await agent.wait_status("hog", oom_killed, what="hog terminated with OOMKilled")
    assert done.phase == "Failed", done
    warnings = await eventually(
        lambda: events_by(agent, "hog", ev.OOM_KILLING), within=10, what="OOMKilling event",
        seen=lambda _: repr(agent.events_of("hog")))
    assert warnings[0].type == "Warning" and "container main" in warnings[0].message, warnings


async def test_restarted_containerd_is_resubscribed_and_still_heard(instances, make_agent) -> None:  # type: ignore[no-untyped-def]
    instance = await instances()
    agent: Harness = await make_agent(endpoint=instance.containerd.endpoint,
                                      sync_settings=EVENTS_ONLY)
    events = await events_live(agent)
    agent.write("survivor.yaml", pod_manifest("survivor", command="exec sleep 1000002"))
    await agent.wait_status("survivor", all_ready, what="survivor Ready")

    old_pid = instance.containerd.pid
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    await eventually(lambda: instance.containerd.restarts >= 1, within=30,
                     what="containerd restarted by its supervisor")
    await events_live(agent, subscriptions=2)
    assert events.live and is_true(agent.status_of("survivor"), st.READY)

    again = await restarted_after_kill(agent, "survivor", ["sleep", "1000002"])
    assert restarts(again) == 1, again
