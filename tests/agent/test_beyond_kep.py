"""The alpha gates beyond KEP-3085 on real containerd (issue 17, docs/kep3085.md "Beyond the
KEP"): per-family network conditions and the stricter PodReadyToStartContainers on a dual-stack
CNI and on one that serves only IPv4 while the node claims both, the volumes condition with a
missing ConfigMap, Initialized after the sandbox, and the termination SLI after a deletion.

The IPv4-only case is an external runtime with its own CNI config: the session's containerd
(one IPv4 /24) used through `--runtime-endpoint` by agents told `--pod-cidr` IPv4 and IPv6.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from conftest import AgentFactory, Instance, InstanceFactory
from nodelet import cli, settings
from nodelet.model.core import extraconditions as xc
from nodelet.model.core import podjson, pods
from nodelet.model.core import status as st
from nodelet.model.reports import timeline as tl
from support.harness import Harness, all_ready, cond, events_by, is_true, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

V6_CLAIMED = "fd42:17::/64"  # claimed by the agents on the session containerd, never served
NO_V6 = "pod sandbox has no IPv6 address (the node serves IPv4 and IPv6)"
CM = "cm-beyond-kep"
ORDER = (st.POD_SCHEDULED, st.POD_READY_TO_START_CONTAINERS, st.INITIALIZED,
         st.CONTAINERS_READY, st.READY)


def gates(**on: bool) -> settings.FeatureGates:
    return settings.FeatureGates(**on)


async def claiming_both(make_agent: AgentFactory, runtime: Instance,
                        feature_gates: settings.FeatureGates) -> Harness:
    """An agent on the session containerd (IPv4 only) whose node claims IPv4 and IPv6."""
    return await make_agent(gates=feature_gates, runtime_settings={
        "pod_cidrs": (*runtime.settings.runtime.pod_cidrs, V6_CLAIMED)})


def transition(pod_status: st.PodStatus, type_: str) -> datetime:
    c = pod_status.condition(type_)
    assert c is not None and c.last_transition_time is not None, (type_, pod_status)
    return c.last_transition_time


def assert_order(pod_status: st.PodStatus, order: tuple[str, ...]) -> None:
    times = [transition(pod_status, t) for t in order]
    assert times == sorted(times), list(zip(order, times, strict=True))


def volume_pod(name: str) -> str:
    extra = f"volumes:\n  - name: vol\n    configMap:\n      name: {CM}\n"
    mounts = "volumeMounts:\n  - name: vol\n    mountPath: /config\n"
    return pod_manifest(name, extra_spec=extra, container_extra=mounts)


async def test_ipv4_only_runtime_volumes_initialized_and_termination(
    make_agent: AgentFactory, runtime: Instance, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = await claiming_both(make_agent, runtime, gates(
        pod_ip_family_conditions=True, pod_volumes_condition=True,
        pod_initialized_after_sandbox=True, pod_termination_sli=True))
    agent.write("web.yaml", pod_manifest("web"))
    agent.write("cm-pod.yaml", volume_pod("blocked"))

    web = await agent.wait_status("web", all_ready, what="web Ready")
    assert cond(web, xc.IPV4_READY) == st.PodCondition(
        type=xc.IPV4_READY, status="True", last_transition_time=transition(web, xc.IPV4_READY))
    v6 = cond(web, xc.IPV6_READY)
    assert v6 is not None and (v6.status, v6.reason, v6.message) == (
        "False", "PodSandboxNoIPv6Address", NO_V6)
    assert is_true(web, xc.VOLUMES_READY)
    # Initialized after the sandbox: the KEP's order with init containers, for every pod.
    assert_order(web, ORDER)

    # Blocked on a missing ConfigMap: the volumes condition says so, the network ones do not.
    await eventually(lambda: events_by(agent, "blocked", "FailedMount"), within=30,
                     what="FailedMount event")
    blocked = await agent.wait_status(
        "blocked", lambda s: (c := s.condition(xc.VOLUMES_READY)) is not None
        and c.reason == "FailedMount", what="VolumesReady=False/FailedMount")
    volumes = cond(blocked, xc.VOLUMES_READY)
    assert volumes is not None and volumes.status == "False"
    assert volumes.message == (
        f'MountVolume.SetUp failed for volume "vol" : configmap "{CM}" not found')
    for family in (xc.IPV4_READY, xc.IPV6_READY):
        network = cond(blocked, family)
        assert network is not None and network.status == "False"
        assert network.message.endswith(": no pod sandbox exists"), network
    initialized = cond(blocked, st.INITIALIZED)
    assert initialized is not None and (initialized.status, initialized.reason) == (
        "False", "PodSandboxNotReady")
    agent.write("cm.yaml", f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {CM}\n"
                           "data:\n  key: value\n")
    unblocked = await agent.wait_status("blocked", all_ready,
                                        what="Ready once the ConfigMap exists")
    assert is_true(unblocked, xc.VOLUMES_READY) and is_true(unblocked, xc.IPV4_READY)
    assert transition(unblocked, xc.VOLUMES_READY) <= transition(
        unblocked, st.POD_READY_TO_START_CONTAINERS)

    # The termination SLI: the last status of the deleted pod, as `nodelet timeline` reads it.
    last: list[dict[str, object]] = []

    def keep(pod: pods.Pod, pod_status: st.PodStatus) -> None:
        if pod.name.startswith("web-") and pod.deletion_timestamp is not None:
            last.append(podjson.pod_to_api(pod, pod_status, precise=True))

    unsubscribe = agent.agent_or_fail().statuses.subscribe(keep)
    try:
        agent.remove("web.yaml")
        text = await eventually(
            lambda: agent.agent_or_fail().metrics_text()[0].decode(),
            until=lambda t: re.search(r"^nodelet_pod_termination_duration_seconds_count 1\.0$",
                                      t, re.M),
            within=30, what="one termination observed")
    finally:
        unsubscribe()
    assert "nodelet_pod_termination_duration_seconds_bucket" in text
    # The deleted pod's copies as a watch saved them, read back by `nodelet timeline --file`.
    saved = tmp_path / "watch.json"
    saved.write_text("\n".join(json.dumps(copy) for copy in last))
    assert cli.main(["timeline", "web", "--file", str(saved)]) == 0
    rendered = capsys.readouterr().out
    assert re.search(r"^Deleted → PodReadyToStartContainers=False +False ", rendered, re.M)
    assert re.search(r"PodReadyToStartContainers=False [0-9.]+ m?s after deletion "
                     r"\(termination SLI\)", rendered), rendered
    timeline = tl.build(last[-1], None, datetime.now(UTC))
    assert timeline.termination is not None and timeline.termination.latency is not None
    # ... and by `nodelet analyze` (the percentile table's termination row, one pod).
    assert cli.main(["analyze", str(saved)]) == 0
    report = capsys.readouterr().out
    assert re.search(r"^deletion requested → sandbox not ready \(termination SLI\) +1 ",
                     report, re.M), report


async def test_stricter_ready_to_start_on_ipv4_only_runtime(
    make_agent: AgentFactory, runtime: Instance
) -> None:
    agent = await claiming_both(make_agent, runtime, gates(
        pod_ip_family_conditions=True, pod_ready_needs_all_ip_families=True))
    agent.write("web.yaml", pod_manifest("strict"))
    # The containers use the IPv4-only sandbox as the kubelet would; only the condition waits.
    found = await agent.wait_status("strict", lambda s: is_true(s, st.CONTAINERS_READY),
                                    what="containers ready")
    ready = cond(found, st.POD_READY_TO_START_CONTAINERS)
    assert ready is not None and (ready.status, ready.reason, ready.message) == (
        "False", "PodSandboxNoIPv6Address", NO_V6)
    assert is_true(found, xc.IPV4_READY) and not is_true(found, xc.IPV6_READY)
    assert cond(found, xc.VOLUMES_READY) is None  # its gate is off
    assert len(found.pod_ips) == 1 and ":" not in found.pod_ips[0]

    # The gates show in /healthz?verbose and on the web UI's node page.
    url = f"http://127.0.0.1:{agent.agent_or_fail().server_port}"
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/healthz?verbose") as response:
            healthz = await response.text()
        async with session.get(url + "/ui/node") as response:
            node_page = await response.text()
    assert "feature-gate PodReadyToStartContainersAllIPFamilies=true\n" in healthz
    assert "feature-gate PodVolumesCondition=false\n" in healthz
    assert healthz.endswith("healthz check passed\n")
    assert ('<tr data-gate="PodIPFamilyConditions" data-enabled="true">' in node_page)
    assert ('<tr data-gate="PodTerminationSLI" data-enabled="false">' in node_page)


async def test_dual_stack_runtime_has_every_family(
    instances: InstanceFactory, make_agent: AgentFactory
) -> None:
    r = os.urandom(3)
    cidrs = (f"10.{200 + r[0] % 50}.{r[1]}.0/24", f"fd42:18:{r[2]:x}::/64")
    dual = await instances(pod_cidrs=cidrs)
    agent = await make_agent(endpoint=dual.containerd.endpoint, runtime_settings={
        "pod_cidrs": cidrs}, gates=gates(pod_ip_family_conditions=True,
                                         pod_ready_needs_all_ip_families=True))
    agent.write("web.yaml", pod_manifest("dual"))
    found = await agent.wait_status("dual", all_ready, what="dual-stack pod Ready")
    assert {":" in ip for ip in found.pod_ips} == {False, True}, found.pod_ips
    for type_ in (xc.IPV4_READY, xc.IPV6_READY, st.POD_READY_TO_START_CONTAINERS):
        c = cond(found, type_)
        assert c is not None and (c.status, c.reason, c.message) == ("True", "", ""), c
    # The Initialized gate is off: the kubelet's order, Initialized before the sandbox.
    assert_order(found, (st.POD_SCHEDULED, st.INITIALIZED, st.POD_READY_TO_START_CONTAINERS,
                         st.CONTAINERS_READY, st.READY))
    await agent.stop()  # its pods go before the private containerd does
