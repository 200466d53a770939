"""Issue acceptance on real containerd + CNI: the sandbox lifecycle and its condition."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

from nodelet.adapters import cni
from nodelet.model.core import status as st
from support.harness import Harness, all_ready, cond, is_true, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

ORDER_NO_INIT = (st.POD_SCHEDULED, st.INITIALIZED, st.POD_READY_TO_START_CONTAINERS,
                 st.CONTAINERS_READY, st.READY)
ORDER_WITH_INIT = (st.POD_SCHEDULED, st.POD_READY_TO_START_CONTAINERS, st.INITIALIZED,
                   st.CONTAINERS_READY, st.READY)


def transition_times(pod_status: st.PodStatus, order: tuple[str, ...]) -> list[object]:
    times = []
    for type_ in order:
        c = cond(pod_status, type_)
        assert c is not None and c.status == "True", f"{type_}: {c}"
        times.append(c.last_transition_time)
    return times


async def test_pod_without_init_containers_reports_all_conditions_in_order(
    agent: Harness, runtime: object
) -> None:
    agent.write("web.yaml", pod_manifest("web", command="exec httpd -f -p 8080"))
    pod_status = await agent.wait_status("web", all_ready, what="web Ready")
    assert pod_status.phase == "Running"
    times = transition_times(pod_status, ORDER_NO_INIT)
    assert times == sorted(times), dict(zip(ORDER_NO_INIT, times, strict=True))
    cidr = ipaddress.ip_network(runtime.settings.runtime.pod_cidrs[0])  # type: ignore[attr-defined]
    assert ipaddress.ip_address(pod_status.pod_ip) in cidr
    ready = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
    assert ready is not None and ready.reason == "" and ready.message == ""


async def test_pod_with_init_container_orders_sandbox_before_initialized(agent: Harness) -> None:
    agent.write("init.yaml", pod_manifest("init", init="sleep 2"))
    pod_status = await agent.wait_status("init", all_ready, what="init pod Ready")
    times = transition_times(pod_status, ORDER_WITH_INIT)
    assert times == sorted(times), dict(zip(ORDER_WITH_INIT, times, strict=True))
    ready_to_start = times[1]
    initialized = times[2]
    # The init container sleeps 2 s after the sandbox is up: Initialized comes strictly later.
    assert (initialized - ready_to_start).total_seconds() >= 1.5  # type: ignore[operator]


async def test_host_network_pod_has_node_ip(agent: Harness) -> None:
    agent.write("host.yaml", pod_manifest("host", extra_spec="hostNetwork: true\n"))
    pod_status = await agent.wait_status("host", all_ready, what="hostNetwork pod Ready")
    assert pod_status.pod_ip == pod_status.host_ip != ""


def pause_pid(netns_path: str) -> int:
    """The pause process whose network namespace is the sandbox's."""
    target = os.stat(netns_path).st_ino
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cmdline").read_bytes().split(b"\0")[0] != b"/pause":
                continue
            if os.stat(proc / "ns" / "net").st_ino == target:
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"no pause process in {netns_path}")


async def kill_pause(agent: Harness, name: str) -> tuple[str, str]:
    agent_ = agent.agent_or_fail()
    pod, _ = agent.find(name) or (None, None)
    assert pod is not None
    state = await agent_.relister.refresh_pod(pod.uid)
    sandbox = state.sandboxes[0]
    client = agent_.syncer._client  # the adapter the agent uses; reading only
    netns = await client.sandbox_netns_path(sandbox.id)
    os.kill(pause_pid(netns), 9)
    return sandbox.id, netns


async def test_killed_pause_gets_new_sandbox_with_next_attempt(agent: Harness) -> None:
    agent.write("phoenix.yaml", pod_manifest("phoenix"))
    first = await agent.wait_status("phoenix", all_ready, what="phoenix Ready")
    first_true = cond(first, st.POD_READY_TO_START_CONTAINERS)
    assert first_true is not None
    old_sandbox, old_netns = await kill_pause(agent, "phoenix")

    await agent.wait_status("phoenix", lambda s: not is_true(s, st.POD_READY_TO_START_CONTAINERS),
                            what="condition False after the pause process died")
    again = await agent.wait_status(
        "phoenix",
        lambda s: all_ready(s) and cond(s, st.POD_READY_TO_START_CONTAINERS)
        .last_transition_time != first_true.last_transition_time,  # type: ignore[union-attr]
        what="condition True again on a new sandbox")
    assert again.condition(st.POD_READY_TO_START_CONTAINERS).last_transition_time \
        > first_true.last_transition_time  # type: ignore[union-attr,operator]
    reasons = [e.reason for e in agent.events_of("phoenix")]
    assert "SandboxChanged" in reasons
    pod, _ = agent.find("phoenix")  # type: ignore[misc]
    state = await agent.agent_or_fail().relister.refresh_pod(pod.uid)
    newest = state.sandboxes[0]
    assert newest.id != old_sandbox and newest.attempt == 1
    # The dead sandbox was stopped, so its network namespace and IP were released.
    assert not os.path.exists(old_netns)


async def test_restart_policy_never_pod_gets_no_new_sandbox(agent: Harness) -> None:
    agent.write("once.yaml", pod_manifest("once", restart_policy="Never"))
    await agent.wait_status("once", all_ready, what="once Ready")
    _, netns = await kill_pause(agent, "once")
    final = await agent.wait_status(
        "once", lambda s: not is_true(s, st.POD_READY_TO_START_CONTAINERS) and s.phase == "Failed",
        what="Never pod: condition False and Failed")
    assert final.condition(st.POD_READY_TO_START_CONTAINERS).reason == "PodSandboxNotReady"  # type: ignore[union-attr]
    pod, _ = agent.find("once")  # type: ignore[misc]
    state = await agent.agent_or_fail().relister.refresh_pod(pod.uid)
    assert len(state.sandboxes) == 1, "a restartPolicy Never pod must not get a new sandbox"
    await eventually(lambda: not os.path.exists(netns),
                     within=30, what="the dead sandbox stopped: its network namespace released")


@pytest.mark.parametrize("grace", [1, 20])
async def test_removing_manifest_honours_sigterm_and_leaves_nothing(
    agent: Harness, runtime: object, grace: int
) -> None:
    # The container exits on SIGTERM by itself (after writing a marker as its termination
    # message); even a 1 s grace period gets a SIGTERM first (the kubelet's 2 s minimum).
    trap = ("trap 'echo got-sigterm > /dev/termination-log; exit 0' TERM; "
            "while true; do sleep 0.2; done")
    agent.write("polite.yaml", pod_manifest("polite", command=trap, grace=grace))
    await agent.wait_status("polite", all_ready, what="polite Ready")
    pod, _ = agent.find("polite")  # type: ignore[misc]
    agent_ = agent.agent_or_fail()
    published: list[st.PodStatus] = []
    agent_.statuses.subscribe(lambda p, s: published.append(s) if p.uid == pod.uid else None)
    sandbox = (await agent_.relister.refresh_pod(pod.uid)).sandboxes[0]
    netns = await agent_.syncer._client.sandbox_netns_path(sandbox.id)
    assert os.path.exists(netns)
    log_dir = agent.settings.data_dir / "logs" / f"default_{pod.name}_{pod.uid}"

    agent.remove("polite.yaml")
    await eventually(lambda: agent.find("polite") is None, within=15,
                     what="polite terminated well within its 20 s grace period")
    last = published[-1]
    assert last.phase != "Pending", "the last status shows the terminated containers"
    terminated = last.container_statuses[0].state
    assert isinstance(terminated, st.ContainerStateTerminated)
    assert (terminated.exit_code, terminated.message) == (0, "got-sigterm\n")
    assert not log_dir.exists(), "the pod's logs are deleted with it"
    assert cond(last, st.POD_READY_TO_START_CONTAINERS).status == "False"  # type: ignore[union-attr]
    state = await agent_.relister.refresh_pod(pod.uid)
    assert state.sandboxes == () and state.containers == ()
    assert not os.path.exists(netns), "the sandbox's network namespace is gone"
    data_dir = runtime.data_dir  # type: ignore[attr-defined]
    held = [p for p in cni.ipam_allocations(data_dir) if sandbox.id in p.read_text()]
    assert held == [], "the sandbox's IP is released"
    veths = await cni.bridge_ports(data_dir)
    assert len(veths) == len([p for p, _ in agent_.pods() if not p.spec.host_network])


async def test_grace_period_ends_in_sigkill(agent: Harness) -> None:
    stubborn = "trap '' TERM; while true; do sleep 0.2; done"
    agent.write("stubborn.yaml", pod_manifest("stubborn", command=stubborn, grace=2))
    await agent.wait_status("stubborn", all_ready, what="stubborn Ready")
    agent.remove("stubborn.yaml")
    await eventually(lambda: agent.find("stubborn") is None, within=20,
                     what="stubborn killed after its 2 s grace period")
    kills = [e for e in agent.events_of("stubborn") if e.reason == "Killing"]
    assert kills, "a Killing event is recorded"
