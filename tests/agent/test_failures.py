"""Sandboxes that cannot be created, bad manifests, feature gates — on real containerd + CNI."""

from __future__ import annotations

import ipaddress

import pytest

from nodelet import settings
from nodelet.model.core import status as st
from support.harness import Harness, all_ready, cond, is_true, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime


def _small_cidr(data_dir: object) -> str:
    """A /29 inside the instance's own /24 (derived from its data dir, so unique)."""
    from nodelet.adapters import cni

    base = ipaddress.ip_network(cni.default_pod_cidr(data_dir))  # type: ignore[arg-type]
    return str(next(base.subnets(new_prefix=29)))


async def test_exhausted_ip_range_keeps_pods_pending_until_ips_are_freed(
    instances: object, make_agent: object
) -> None:
    import tempfile
    from pathlib import Path

    # A private containerd whose CNI range is a /29: five usable pod IPs.
    cidr_dir = Path(tempfile.mkdtemp(prefix="nl-cidr-", dir="/tmp"))
    cidr = _small_cidr(cidr_dir)
    cidr_dir.rmdir()
    instance = await instances(pod_cidrs=(cidr,))  # type: ignore[operator]
    agent: Harness = await make_agent(endpoint=instance.containerd.endpoint)  # type: ignore[operator]
    names = [f"p{i}" for i in range(7)]
    for name in names:
        agent.write(f"{name}.yaml", pod_manifest(name))

    def settled() -> list[str] | None:
        statuses = {n: agent.status_of(n) for n in names}
        up = [n for n, s in statuses.items() if s is not None and all_ready(s)]
        stuck = [n for n, s in statuses.items() if s is not None and s.condition(
            st.POD_READY_TO_START_CONTAINERS) is not None and not is_true(
            s, st.POD_READY_TO_START_CONTAINERS) and "no IP addresses available" in
            s.condition(st.POD_READY_TO_START_CONTAINERS).message]  # type: ignore[union-attr]
        return stuck if len(up) == 5 and len(stuck) == 2 else None

    stuck = await eventually(settled, within=60, what="5 pods up and 2 stuck without an IP")
    for name in stuck:
        pod_status = agent.status_of(name)
        assert pod_status is not None and pod_status.phase == "Pending"
        condition = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
        assert condition is not None and condition.reason == "PodSandboxNotReady"
        assert condition.message.startswith("no pod sandbox exists")
    # Every retry's error names its own sandbox ID; like client-go, after 10 distinct messages
    # the retries are combined into one event with a growing count.
    def combined() -> list[object]:
        return [e for e in agent.events_of(stuck[0]) if e.reason == "FailedCreatePodSandBox"
                and e.message.startswith("(combined from similar events): ") and e.count >= 2]

    await eventually(combined, within=60, what="combined FailedCreatePodSandBox events")
    failed = [e for e in agent.events_of(stuck[0]) if e.reason == "FailedCreatePodSandBox"]
    assert all(e.type == "Warning" and "Failed to create pod sandbox: " in e.message
               and "no IP addresses available" in e.message for e in failed)
    assert len(failed) <= 11

    up = [n for n in names if n not in stuck]
    for name in up[:2]:
        agent.remove(f"{name}.yaml")
    for name in stuck:
        await agent.wait_status(name, all_ready, within=60,
                                what=f"{name} up once IPs were freed")


async def test_unknown_runtime_handler_reports_why_the_sandbox_failed(agent: Harness) -> None:
    agent.write("vm.yaml", pod_manifest("vm", extra_spec="runtimeClassName: gvisor\n"))
    pod_status = await agent.wait_status(
        "vm", lambda s: "gvisor" in (cond(s, st.POD_READY_TO_START_CONTAINERS) or
                                     st.PodCondition("x", "False")).message,
        what="condition message naming the missing handler")
    condition = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
    assert condition is not None and condition.status == "False"
    assert is_true(pod_status, st.POD_SCHEDULED) and is_true(pod_status, st.INITIALIZED)
    assert not is_true(pod_status, st.CONTAINERS_READY) and not is_true(pod_status, st.READY)


async def test_invalid_manifests_are_reported_and_do_not_disturb_running_pods(
    agent: Harness,
) -> None:
    agent.write("good.yaml", pod_manifest("good"))
    await agent.wait_status("good", all_ready, what="good Ready")
    good_uid = agent.find("good")[0].uid  # type: ignore[index]
    bad = {
        "syntax.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n",
        "kind.yaml": "apiVersion: v1\nkind: Deployment\nmetadata: {name: d}\n",
        "empty.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: e}\nspec: {containers: []}\n",
        "name.yaml": pod_manifest("Bad_Name"),
        "types.yaml": pod_manifest("types").replace('command: ["sh", "-c",', 'command: "sh" #'),
        "multi.yaml": pod_manifest("multi-ok") + "---\n" + "kind: Pod\napiVersion: v1\n",
    }
    for filename, text in bad.items():
        agent.write(filename, text)

    def reports() -> dict[str, list[object]] | None:
        found: dict[str, list[object]] = {}
        for r in agent.agent_or_fail().manifests():
            if not r.ok:
                found.setdefault(r.file.rsplit("/", 1)[-1], []).append(r)
        return found if set(found) == set(bad) else None

    problems = await eventually(reports, within=10, what="a problem report per broken file")
    assert problems["multi.yaml"][0].document == 1  # type: ignore[attr-defined]
    assert "Deployment" in problems["kind.yaml"][0].error  # type: ignore[attr-defined]
    assert "containers" in problems["empty.yaml"][0].error  # type: ignore[attr-defined]
    assert "command" in problems["types.yaml"][0].error  # type: ignore[attr-defined]
    # The valid document of multi.yaml runs; the good pod was never touched.
    await agent.wait_status("multi-ok", all_ready, what="multi-ok Ready")
    found = agent.find("good")
    assert found is not None and found[0].uid == good_uid and all_ready(found[1])  # type: ignore[arg-type]
    state = await agent.agent_or_fail().relister.refresh_pod(good_uid)
    assert len(state.sandboxes) == 1 and state.sandboxes[0].attempt == 0


async def test_changed_manifest_replaces_the_pod(agent: Harness) -> None:
    agent.write("change.yaml", pod_manifest("change"))
    await agent.wait_status("change", all_ready, what="change Ready")
    old_uid = agent.find("change")[0].uid  # type: ignore[index]
    agent.write("change.yaml", pod_manifest("change", command="sleep 999999"))
    await eventually(lambda: (f := agent.find("change")) is not None and f[0].uid != old_uid
                     and f[1] is not None and all_ready(f[1]),
                     within=30, what="the pod replaced under a new UID and Ready")
    state = await agent.agent_or_fail().relister.refresh_pod(old_uid)
    await eventually(lambda: old_uid not in {p.uid for p, _ in agent.agent_or_fail().pods()},
                     within=30, what="the old pod gone")
    assert state.sandboxes == () or all(
        s.state.name == "NOTREADY" for s in state.sandboxes)


@pytest.mark.parametrize(
    ("gates", "present", "absent"),
    [
        (settings.FeatureGates(pod_ready_to_start_containers=False), None,
         (st.POD_READY_TO_START_CONTAINERS, st.POD_HAS_NETWORK)),
        (settings.FeatureGates(pod_has_network=True), st.POD_HAS_NETWORK,
         (st.POD_READY_TO_START_CONTAINERS,)),
    ],
    ids=["gate-off", "old-name"],
)
async def test_feature_gates(make_agent: object, gates: settings.FeatureGates,
                             present: str | None, absent: tuple[str, ...]) -> None:
    agent: Harness = await make_agent(gates=gates)  # type: ignore[operator]
    agent.write("gated.yaml", pod_manifest("gated"))
    pod_status = await agent.wait_status(
        "gated", lambda s: is_true(s, st.READY), what="gated Ready")
    types = {c.type for c in pod_status.conditions}
    assert not types & set(absent), types
    if present is not None:
        assert is_true(pod_status, present)


async def test_network_not_ready_holds_sandboxes_until_cni_is_configured(
    instances: object, make_agent: object
) -> None:
    from nodelet.adapters import cni

    instance = await instances()  # type: ignore[operator]
    conf = cni.conf_dir(instance.data_dir)
    saved = {p.name: p.read_bytes() for p in conf.iterdir()}
    for path in conf.iterdir():
        path.unlink()

    async def network_down() -> bool:
        return not (await instance.client.status()).network_ready

    await eventually(network_down, within=30, what="containerd reporting NetworkReady=false")
    agent: Harness = await make_agent(endpoint=instance.containerd.endpoint)  # type: ignore[operator]
    agent.write("waiting.yaml", pod_manifest("waiting"))
    agent.write("hostnet.yaml", pod_manifest("hostnet", extra_spec="hostNetwork: true\n"))
    await eventually(lambda: any(e.reason == "NetworkNotReady" and "network is not ready" in
                                 e.message for e in agent.events_of("waiting")),
                     within=30, what="NetworkNotReady event")
    pod_status = agent.status_of("waiting")
    assert pod_status is not None and not is_true(pod_status, st.POD_READY_TO_START_CONTAINERS)
    # hostNetwork pods do not need the pod network.
    await agent.wait_status("hostnet", all_ready, what="hostNetwork pod Ready meanwhile")

    for name, data in saved.items():
        (conf / name).write_bytes(data)
    await agent.wait_status("waiting", all_ready, within=40,
                            what="pod Ready once the CNI config is back")


@pytest.mark.parametrize("command", ["/no-such-file", "/etc/hosts"],
                         ids=["missing", "not executable"])
async def test_a_command_that_cannot_start_fails_the_pod_and_stops_its_sandbox(
    agent: Harness, command: str,
) -> None:
    """As the kubelet 1.37 shows it (restartPolicy Never): the pod Failed with its sandbox
    stopped (PodReadyToStartContainers False, `pod sandbox is not ready`), the container
    terminated with the runtime's StartError (exit code 128) and no last state, and a Failed
    event on the container with the runtime's description, without gRPC's prefix."""
    manifest = pod_manifest("nostart", restart_policy="Never").replace(
        f'command: ["sh", "-c", {"sleep 1000000"!r}]', f"command: [{command}]")
    agent.write("nostart.yaml", manifest)

    def stopped(s: st.PodStatus) -> bool:
        ready = cond(s, st.POD_READY_TO_START_CONTAINERS)
        return s.phase == "Failed" and ready is not None and ready.status == "False"

    pod_status = await agent.wait_status("nostart", stopped, within=60,
                                         what="Failed with the sandbox stopped")
    ready = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
    assert ready is not None
    assert (ready.reason, ready.message) == ("PodSandboxNotReady", "pod sandbox is not ready")
    (container,) = pod_status.container_statuses
    assert isinstance(container.state, st.ContainerStateTerminated), container
    assert (container.state.reason, container.state.exit_code) == ("StartError", 128)
    assert container.last_state is None
    failed = [e for e in agent.events_of("nostart") if e.reason == "Failed"]
    assert failed and failed[0].field_path == "spec.containers{main}"
    assert failed[0].message.startswith("Error: ") and "rpc error" not in failed[0].message
    assert command in failed[0].message
