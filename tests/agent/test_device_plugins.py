"""Device plugins with Kubernetes' own sample device plugin (tests/support/deviceplugins.py:
`example.com/resource`, devices Dev-1 and Dev-2, each a mount of an empty file /tmp/<ID>) and
the real containerd: it registers on nodelet's kubelet.sock, its devices become the node's
resource, a pod asking for both runs with both mounted, a second pod is refused at admission
with the kubelet's reason and words, and after a nodelet restart the plugin registers again
and the first pod still holds both devices (from the checkpoint). A plugin that stops leaves
its devices in capacity, none allocatable; after a node reboot (the pod's sandbox gone) a pod
whose plugin is not back is refused at its admission.

Device health in the pod status (ResourceHealthStatus), as the node e2e suite's "Device Plugin
Failures Pod Status" specs check it, with the kubelet's device plugin stub
(`test-device-plugin`, whose devices' health the test changes): a running pod and one whose
image never comes show their device Healthy in containerStatuses[].allocatedResourcesStatus,
then Unhealthy once the plugin says so; once the plugin stops, each status generated after
keeps the health of its last list (Unhealthy stays Unhealthy). The same stub made to exit
inside Allocate fails its pod at admission, and hands its device to no one but the next pod
once it is back."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import Instance
from nodelet.model.core import devices, status
from nodelet.services.devices.devicemanager import DeviceManager
from support import podresources
from support.deviceplugins import DEVICES, RESOURCE, health_plugin, sample_plugin
from support.harness import Harness, events_by, exec_in, pod_manifest, waiting_reason
from support.polling import eventually

pytestmark = pytest.mark.runtime

LIMITS = """\
resources:
  limits: {{example.com/resource: "{count}"}}
"""


def device_pod(name: str, count: int, command: str = "sleep 1000000") -> str:
    return pod_manifest(name, command=command, container_extra=LIMITS.format(count=count))


async def pod_resources(agent: Harness, *request: str) -> Any:
    """The pod resources API's answer to `request` (list, allocatable, get NS NAME), asked
    through the kubelet's own client."""
    return await podresources.answer(agent.settings.pod_resources_dir / "kubelet.sock",
                                      *request)


def held(answer: dict[str, Any], pod: str) -> dict[str, list[Any]]:
    """By container, the (resource, device IDs, topology) entries of `pod` in a List."""
    found_ = [p for p in answer.get("pod_resources", []) if p["name"] == pod]
    assert len(found_) == 1, f"{pod} not once in {answer}"
    [found] = found_
    assert found["namespace"] == "default", found
    return {c["name"]: [(d["resource_name"], d["device_ids"], d.get("topology"))
                        for d in c.get("devices", [])] for c in found["containers"]}


def node_counts(agent: Harness) -> tuple[dict[str, int], dict[str, int]]:
    manager = agent.agent_or_fail().device_manager
    assert manager is not None
    found = manager.node_resources()
    return dict(found.capacity), dict(found.allocatable)


async def test_sample_plugin_devices_reach_a_pod_and_survive_a_restart(
        agent: Harness, runtime: Instance, tmp_path: Path) -> None:
    directory = agent.settings.device_plugins_dir
    assert (directory / "kubelet.sock").is_socket()
    async with sample_plugin(directory, log=tmp_path / "sample-device-plugin.log") as plugin:
        both = ({RESOURCE: 2}, {RESOURCE: 2})
        await eventually(lambda: node_counts(agent), until=lambda c: c == both, within=30,
                         what="the sample plugin's two devices registered",
                         seen=lambda c: f"{c}; plugin: {plugin.tail()}")

        agent.write("dev-a.yaml", device_pod("dev-a", 2))
        running = await agent.wait_status("dev-a", lambda s: s.phase == "Running",
                                          what="dev-a running with both devices")
        client = runtime.client
        listed = await exec_in(client, running, "ls /tmp/Dev-1 /tmp/Dev-2")
        assert listed.exit_code == 0, listed
        found = agent.find("dev-a")
        assert found is not None
        uid = found[0].uid
        manager = agent.agent_or_fail().device_manager
        assert manager is not None
        assert manager.devices_of(uid, "main") == {RESOURCE: frozenset(DEVICES)}

        # The pod resources API, asked by the kubelet's client: each device an entry of its
        # own (the sample plugin names no NUMA node: no topology), both allocatable.
        each = [(RESOURCE, [d], None) for d in sorted(DEVICES)]
        assert held(await pod_resources(agent, "list"), "dev-a-testnode") == {"main": each}
        got = await pod_resources(agent, "get", "default", "dev-a-testnode")
        assert held({"pod_resources": [got["pod_resources"]]}, "dev-a-testnode") == {
            "main": each}
        allocatable = await pod_resources(agent, "allocatable")
        assert [(d["resource_name"], d["device_ids"]) for d in allocatable["devices"]] == [
            (RESOURCE, [d]) for d in sorted(DEVICES)]
        missing = await podresources.ask(agent.settings.pod_resources_dir / "kubelet.sock",
                                         "get", "default", "nope")
        assert (missing.returncode, missing.stderr.strip()) == (1, (
            "rpc error: code = Unknown desc = pod nope in namespace default not found"))
        # Its metrics, in the kubelet's names (no `_total` suffix but on the first).
        text = agent.agent_or_fail().metrics_text()[0].decode()
        counted = {}
        for name in ("requests_total", "requests_list", "requests_get_allocatable",
                     "requests_get", "errors_get"):
            line = f'kubelet_pod_resources_endpoint_{name}{{server_api_version="v1"}} '
            [counted[name]] = [int(x.removeprefix(line)) for x in text.splitlines()
                               if x.startswith(line)]
        assert counted == {"requests_total": 4, "requests_list": 1,
                           "requests_get_allocatable": 1, "requests_get": 2, "errors_get": 1}

        # No device left: refused at admission, the kubelet's reason and words.
        agent.write("dev-b.yaml", device_pod("dev-b", 1))
        refused = await agent.wait_status("dev-b", lambda s: s.phase == "Failed",
                                          what="dev-b refused")
        assert refused.reason == "UnexpectedAdmissionError"
        assert refused.message == (
            "Pod was rejected: Allocate failed due to requested number of devices unavailable "
            "for example.com/resource. Requested: 1, Available: 0, which is unexpected")

        # The checkpoint names the pod's devices, in the kubelet's layout.
        saved = json.loads((directory / devices.CHECKPOINT_NAME).read_bytes())
        entries = saved["Data"]["PodDeviceEntries"]
        assert [(e["PodUID"], e["ContainerName"], e["ResourceName"],
                 sorted(e["DeviceIDs"]["-1"])) for e in entries] == [
            (uid, "main", RESOURCE, list(DEVICES))]

        # A restart: the plugin sees kubelet.sock made again and registers again; the pod,
        # admitted again, keeps both devices (its container runs), and no other pod gets one.
        await agent.stop(terminate_pods=False)
        await agent.start()
        await eventually(lambda: node_counts(agent), until=lambda c: c == both, within=60,
                         what="the sample plugin registered again after the restart",
                         seen=lambda c: f"{c}; plugin: {plugin.tail()}")
        manager = agent.agent_or_fail().device_manager
        assert manager is not None
        assert manager.devices_of(uid, "main") == {RESOURCE: frozenset(DEVICES)}
        assert held(await pod_resources(agent, "list"), "dev-a-testnode") == {"main": each}
        agent.write("dev-c.yaml", device_pod("dev-c", 1))
        again = await agent.wait_status("dev-c", lambda s: s.phase == "Failed",
                                        what="dev-c refused after the restart")
        assert again.reason == "UnexpectedAdmissionError"

        # Once dev-a is gone its devices are free again.
        agent.remove("dev-a.yaml")
        agent.remove("dev-c.yaml")
        await eventually(lambda: agent.find("dev-a"), until=lambda f: f is None, within=60,
                         what="dev-a gone")
        agent.write("dev-d.yaml", device_pod("dev-d", 1))
        await agent.wait_status("dev-d", lambda s: s.phase == "Running",
                                what="dev-d running on a freed device")
        listed = await pod_resources(agent, "list")
        assert [p["name"] for p in listed["pod_resources"]] == ["dev-d-testnode"], listed
        [(resource, [device], topology)] = held(listed, "dev-d-testnode")["main"]
        assert (resource, topology) == (RESOURCE, None) and device in DEVICES

        # The plugin stops: its devices stay in capacity, none allocatable.
        plugin.stop()
        await eventually(lambda: node_counts(agent),
                         until=lambda c: c == ({RESOURCE: 2}, {RESOURCE: 0}), within=30,
                         what="capacity kept, allocatable 0 once the plugin stopped")

        # A node reboot while the plugin is not back: the pod's sandbox is gone when nodelet
        # starts, so it is admitted again without its devices (the node suite's "Does not
        # keep device plugin assignments across node reboots if fails admission").
        found = agent.find("dev-d")
        assert found is not None
        await agent.stop(terminate_pods=False)
        for sandbox in await client.list_pod_sandboxes():
            if sandbox.uid == found[0].uid:
                await client.stop_pod_sandbox(sandbox.id)
                await client.remove_pod_sandbox(sandbox.id)
        await agent.start()
        rebooted = await agent.wait_status("dev-d", lambda s: s.phase == "Failed",
                                           what="dev-d refused after the reboot")
        # The resource is known from the checkpoint, with no device until its plugin is
        # back (the kubelet's readCheckpoint): no healthy device to give again.
        assert (rebooted.reason, rebooted.message) == ("UnexpectedAdmissionError", (
            "Pod was rejected: Allocate failed due to no healthy devices present; cannot "
            "allocate unhealthy devices example.com/resource, which is unexpected"))
        await eventually(lambda: pod_resources(agent, "list"), within=30,
                         until=lambda a: not a.get("pod_resources"),
                         what="dev-d no longer in the pod resources List")


async def test_a_terminating_pod_keeps_its_devices_until_it_is_gone(
        agent: Harness, tmp_path: Path) -> None:
    """As the kubelet's active pods: a deleted pod whose container still runs (it ignores
    SIGTERM, 10 s of grace) holds its devices, so a pod admitted meanwhile is refused rather
    than given a device in use, and the pod resources API lists it; once the first is gone, a
    new pod gets them."""
    async with sample_plugin(agent.settings.device_plugins_dir,
                             log=tmp_path / "sample-device-plugin.log") as plugin:
        await eventually(lambda: node_counts(agent),
                         until=lambda c: c == ({RESOURCE: 2}, {RESOURCE: 2}), within=30,
                         what="the sample plugin's two devices registered",
                         seen=lambda c: f"{c}; plugin: {plugin.tail()}")
        agent.write("holder.yaml", pod_manifest("holder", grace=10,
                                                container_extra=LIMITS.format(count=2)))
        await agent.wait_status("holder", lambda s: s.phase == "Running",
                                what="holder running with both devices")
        agent.remove("holder.yaml")
        await eventually(lambda: events_by(agent, "holder", "Killing"), within=30,
                         what="holder being stopped")
        agent.write("late.yaml", device_pod("late", 1))
        refused = await agent.wait_status("late", lambda s: s.phase == "Failed",
                                          what="late refused while holder terminates")
        assert refused.reason == "UnexpectedAdmissionError", refused
        # Still active: the pod resources API lists it with its devices.
        listed = await pod_resources(agent, "list")
        assert agent.find("holder") is not None, "holder was gone before late was judged"
        entries = held(listed, f"holder-{agent.settings.node_name}")["main"]
        assert sorted(d for name, ids, _ in entries if name == RESOURCE for d in ids) == \
            sorted(DEVICES), listed
        await eventually(lambda: agent.find("holder"), until=lambda f: f is None, within=60,
                         what="holder gone")
        agent.write("after.yaml", device_pod("after", 2))
        await agent.wait_status("after", lambda s: s.phase == "Running",
                                what="after running on the freed devices")


async def test_a_second_plugin_of_a_resource_serves_beside_the_first_until_it_goes(
        agent: Harness, tmp_path: Path) -> None:
    """As the kubelet since 1.37: a second plugin of the same resource (a rollout) registers
    beside the first, which keeps serving; when the second goes, the first still does, and
    the resource stays allocatable."""
    manager = agent.agent_or_fail().device_manager
    assert manager is not None
    directory = agent.settings.device_plugins_dir
    async with sample_plugin(directory, log=tmp_path / "dp1.log") as first:
        await eventually(lambda: node_counts(agent),
                         until=lambda c: c == ({RESOURCE: 2}, {RESOURCE: 2}), within=30,
                         what="the first plugin's devices",
                         seen=lambda c: f"{c}; plugin: {first.tail()}")
        # The sample plugin names its socket `dp.<unix time>`: the second one's must differ.
        socket_second = int(time.time())
        await eventually(lambda: int(time.time()) > socket_second, within=5,
                         what="the next second")
        async with sample_plugin(directory, log=tmp_path / "dp2.log") as second:
            await eventually(lambda: len(manager._endpoints.get(RESOURCE, ())), within=30,
                             until=lambda n: n == 2, what="both plugins registered",
                             seen=lambda n: f"{n}; second: {second.tail()}")
        await eventually(lambda: len(manager._endpoints.get(RESOURCE, ())), within=30,
                         until=lambda n: n == 1, what="the second plugin gone")
        assert node_counts(agent) == ({RESOURCE: 2}, {RESOURCE: 2})
        agent.write("user.yaml", device_pod("user", 2))
        await agent.wait_status("user", lambda s: s.phase == "Running",
                                what="a pod given both devices by the first plugin")


def _one_device(name: str, command: str, policy: str = "") -> str:
    restart = f"\n    restartPolicy: {policy}" if policy else ""
    return (f"  - name: {name}\n    image: localhost/nodelet/busybox:latest\n"
            f"    imagePullPolicy: IfNotPresent\n    command: [sh, -c, {command!r}]{restart}\n"
            "    resources: {limits: {example.com/resource: '1'}}\n")


SIDECAR_POD = ("apiVersion: v1\nkind: Pod\nmetadata: {name: shared}\nspec:\n"
               "  terminationGracePeriodSeconds: 1\n  initContainers:\n"
               + _one_device("init-1", "true")
               + _one_device("sidecar", "sleep 1000000", "Always")
               + "  containers:\n" + _one_device("app", "sleep 1000000"))


async def test_a_sidecar_keeps_the_device_it_took_from_an_init_container(
        agent: Harness, tmp_path: Path) -> None:
    """The node suite's "Can schedule a pod with a restartable init container": the init
    container's device goes to the sidecar after it (the kubelet's devicesToReuse), and the
    app container, since the sidecar keeps running, gets the other one."""
    async with sample_plugin(agent.settings.device_plugins_dir,
                             log=tmp_path / "sample-device-plugin.log") as plugin:
        await eventually(lambda: node_counts(agent),
                         until=lambda c: c == ({RESOURCE: 2}, {RESOURCE: 2}), within=30,
                         what="the sample plugin's two devices registered",
                         seen=lambda c: f"{c}; plugin: {plugin.tail()}")
        agent.write("shared.yaml", SIDECAR_POD)
        await agent.wait_status("shared", lambda s: s.phase == "Running",
                                what="shared running")
        # The API lists the sidecar and the app container (not the init container).
        listed = held(await pod_resources(agent, "list"), "shared-testnode")
        ids = {name: [d for _, [d], _ in entries] for name, entries in listed.items()}
        [[sidecar], [app]] = [ids["sidecar"], ids["app"]]
        assert sidecar != app and set(ids) == {"sidecar", "app"}, ids
        manager = agent.agent_or_fail().device_manager
        found = agent.find("shared")
        assert manager is not None and found is not None
        assert manager.devices_of(found[0].uid, "init-1") == {RESOURCE: frozenset([sidecar])}


HEALTH_RESOURCE = "test.device/health"
ONE_DEVICE = """\
resources:
  limits: {test.device/health: "1"}
"""
NEVER_PULLED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: health-pull}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: localhost/nodelet/no-such-image:v0
      imagePullPolicy: Never
      resources:
        limits: {test.device/health: "1"}
"""


async def pod_statuses(agent: Harness) -> dict[str, dict[str, Any]]:
    """The read-only API's /pods: each pod's status by name."""
    url = f"http://127.0.0.1:{agent.agent_or_fail().server_port}/pods"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        listed = await response.json()
    return {p["metadata"]["name"]: p["status"] for p in listed["items"]}


def device_health(statuses: dict[str, dict[str, Any]], pod: str) -> Any:
    found = statuses.get(pod, {}).get("containerStatuses") or [{}]
    return found[0].get("allocatedResourcesStatus")


def expected(device: str, health: str) -> list[dict[str, Any]]:
    return [{"name": HEALTH_RESOURCE, "resources": [{"resourceID": device, "health": health}]}]


def count_generations(manager: DeviceManager, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many statuses of each pod (by UID) are generated from now on: generating one reads
    the pod's device health from the device manager once (`resource_statuses`)."""
    counts: Counter[str] = Counter()
    read = manager.resource_statuses

    def counted(pod_uid: str) -> dict[str, tuple[status.ResourceStatus, ...]]:
        counts[pod_uid] += 1
        return read(pod_uid)

    monkeypatch.setattr(manager, "resource_statuses", counted)
    return counts


async def test_device_health_reaches_the_pod_status(agent: Harness, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    directory = agent.settings.device_plugins_dir
    node = agent.settings.node_name
    run, pull = f"health-run-{node}", f"health-pull-{node}"
    first = {"dev-a": "Healthy", "dev-b": "Healthy"}
    async with health_plugin(directory, HEALTH_RESOURCE, first,
                             log=tmp_path / "test-device-plugin.log") as plugin:
        await eventually(lambda: node_counts(agent), within=30,
                         until=lambda c: c == ({HEALTH_RESOURCE: 2}, {HEALTH_RESOURCE: 2}),
                         what="the test plugin's two devices registered",
                         seen=lambda c: f"{c}; plugin: {plugin.tail()}")
        agent.write("health-run.yaml", pod_manifest(
            "health-run", container_extra=ONE_DEVICE))
        await agent.wait_status("health-run", lambda s: s.phase == "Running",
                                what="health-run running with a device")
        found = agent.find("health-run")
        manager = agent.agent_or_fail().device_manager
        assert found is not None and manager is not None
        (held,) = manager.devices_of(found[0].uid, "main")[HEALTH_RESOURCE]
        other = ({"dev-a", "dev-b"} - {held}).pop()
        # A container that never starts holds its device too (the suite's second spec: an
        # image that cannot be pulled).
        agent.write("health-pull.yaml", NEVER_PULLED_POD)
        await agent.wait_status("health-pull",
                                lambda s: waiting_reason(s) == "ErrImageNeverPull",
                                what="health-pull waiting for its image")

        healthy = {run: expected(held, "Healthy"), pull: expected(other, "Healthy")}
        await eventually(lambda: pod_statuses(agent), every=0.2, within=30,
                         until=lambda s: {p: device_health(s, p) for p in healthy} == healthy,
                         what="both pods' devices Healthy in /pods")

        # The plugin marks the running pod's device unhealthy: its status says so without
        # waiting for a resync (60 s), the other pod's stays.
        plugin.update({held: "Unhealthy", other: "Healthy"})
        sick = {run: expected(held, "Unhealthy"), pull: expected(other, "Healthy")}
        await eventually(lambda: pod_statuses(agent), every=0.2, within=20,
                         until=lambda s: {p: device_health(s, p) for p in sick} == sick,
                         what="health-run's device Unhealthy in /pods",
                         seen=lambda s: f"{[device_health(s, p) for p in sick]}; "
                                        f"plugin: {plugin.tail()}")
        assert node_counts(agent) == ({HEALTH_RESOURCE: 2}, {HEALTH_RESOURCE: 1})
        plugin.update({held: "Unhealthy", other: "Unhealthy"})
        await agent.wait_status(
            "health-pull", lambda s: [h.health for r in s.container_statuses[0]
                                      .allocated_resources_status for h in r.resources]
            == ["Unhealthy"], within=20, what="health-pull's device Unhealthy")
        # The init containers' statuses carry none (the kubelet fills containerStatuses).
        statuses = await pod_statuses(agent)
        assert "initContainerStatuses" not in statuses[pull]

        # health-pull's device Healthy again, health-run's still Unhealthy; then the plugin
        # goes away: the kubelet keeps the last health it was told (its allDevices), while the
        # devices leave allocatable. A device no list names is Healthy, so the Unhealthy one
        # shows the last list is kept; the Healthy one, that a stop marks nothing Unhealthy.
        plugin.update({held: "Unhealthy", other: "Healthy"})
        await eventually(lambda: pod_statuses(agent), every=0.2, within=20,
                         until=lambda s: {p: device_health(s, p) for p in sick} == sick,
                         what="health-pull's device Healthy again, health-run's Unhealthy")
        plugin.stop()
        await eventually(lambda: node_counts(agent), within=30,
                         until=lambda c: c == ({HEALTH_RESOURCE: 2}, {HEALTH_RESOURCE: 0}),
                         what="allocatable 0 once the plugin stopped")
        # Nothing wakes the pods at the stop: each is synced again, as a resync would, and
        # every status generated after still says what the last list said.
        found_pull = agent.find("health-pull")
        assert found_pull is not None
        uids = (found[0].uid, found_pull[0].uid)
        generated = count_generations(manager, monkeypatch)
        workers = agent.agent_or_fail().workers
        for _ in range(3):
            before = {uid: generated[uid] for uid in uids}
            for uid in uids:
                workers.wake(uid)
            await eventually(lambda: {uid: generated[uid] for uid in uids}, within=20,
                             until=lambda g, b=before: all(g[u] > b[u] for u in uids),
                             what="both pods' statuses generated again")
            statuses = await pod_statuses(agent)
            assert {p: device_health(statuses, p) for p in sick} == sick, statuses


async def test_a_plugin_that_dies_inside_allocate_fails_the_pod_and_hands_out_nothing(
        agent: Harness, tmp_path: Path) -> None:
    """The plugin exits in the middle of Allocate, its answer never sent: the pod is refused
    at admission with the kubelet's reason and the call's words, it holds nothing, and the
    resource has nothing allocatable once the plugin's stream ended. When the plugin is back,
    the device goes to the next pod, the only one the checkpoint names."""
    directory = agent.settings.device_plugins_dir
    manager = agent.agent_or_fail().device_manager
    assert manager is not None
    async with health_plugin(directory, HEALTH_RESOURCE, {"dev-a": "Healthy"},
                             log=tmp_path / "dying-plugin.log", exit_on_allocate=True) as dying:
        await eventually(lambda: node_counts(agent), within=30,
                         until=lambda c: c == ({HEALTH_RESOURCE: 1}, {HEALTH_RESOURCE: 1}),
                         what="the plugin's device registered",
                         seen=lambda c: f"{c}; plugin: {dying.tail()}")
        agent.write("victim.yaml", pod_manifest("victim", container_extra=ONE_DEVICE))
        refused = await agent.wait_status("victim", lambda s: s.phase == "Failed",
                                          what="victim refused")
        assert refused.reason == "UnexpectedAdmissionError", refused
        assert refused.message.startswith(
            "Pod was rejected: Allocate failed due to rpc error: code = Unavailable desc = "), \
            refused.message
        assert refused.message.endswith(", which is unexpected"), refused.message
        assert not dying.alive(), dying.tail()
        found = agent.find("victim")
        assert found is not None
        assert manager.devices_of(found[0].uid, "main") == {}
        await eventually(lambda: node_counts(agent), within=30,
                         until=lambda c: c[1].get(HEALTH_RESOURCE) == 0,
                         what="nothing allocatable once the plugin's stream ended")
    async with health_plugin(directory, HEALTH_RESOURCE, {"dev-a": "Healthy"},
                             log=tmp_path / "plugin-again.log") as again:
        await eventually(lambda: node_counts(agent), within=30,
                         until=lambda c: c == ({HEALTH_RESOURCE: 1}, {HEALTH_RESOURCE: 1}),
                         what="the plugin's device registered again",
                         seen=lambda c: f"{c}; plugin: {again.tail()}")
        agent.write("next.yaml", pod_manifest("next", container_extra=ONE_DEVICE))
        await agent.wait_status("next", lambda s: s.phase == "Running",
                                what="next running with the device")
        found = agent.find("next")
        assert found is not None
        assert manager.devices_of(found[0].uid, "main") == {HEALTH_RESOURCE: frozenset({"dev-a"})}
        saved = json.loads((directory / devices.CHECKPOINT_NAME).read_bytes())
        assert [(e["PodUID"], e["ResourceName"], sorted(e["DeviceIDs"]["-1"]))
                for e in saved["Data"]["PodDeviceEntries"]] == [
            (found[0].uid, HEALTH_RESOURCE, ["dev-a"])]
