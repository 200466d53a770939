"""Device plugins with Kubernetes' own sample device plugin (tests/support/deviceplugins.py:
`example.com/resource`, devices Dev-1 and Dev-2, each a mount of an empty file /tmp/<ID>) and
the real containerd: it registers on nodelet's kubelet.sock, its devices become the node's
resource, a pod asking for both runs with both mounted, a second pod is refused at admission
with the kubelet's reason and words, and after a nodelet restart the plugin registers again
and the first pod still holds both devices (from the checkpoint). A plugin that stops leaves
its devices in capacity, none allocatable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Instance
from nodelet.model.core import devices
from support.deviceplugins import DEVICES, RESOURCE, sample_plugin
from support.harness import Harness, exec_in, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

LIMITS = """\
resources:
  limits: {{example.com/resource: "{count}"}}
"""


def device_pod(name: str, count: int, command: str = "sleep 1000000") -> str:
    return pod_manifest(name, command=command, container_extra=LIMITS.format(count=count))


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

        # A restart: the plugin sees kubelet.sock made again and registers again; the pod
        # keeps both devices (it is not admitted again), and no other pod gets one.
        await agent.stop(terminate_pods=False)
        await agent.start()
        await eventually(lambda: node_counts(agent), until=lambda c: c == both, within=60,
                         what="the sample plugin registered again after the restart",
                         seen=lambda c: f"{c}; plugin: {plugin.tail()}")
        manager = agent.agent_or_fail().device_manager
        assert manager is not None
        assert manager.devices_of(uid, "main") == {RESOURCE: frozenset(DEVICES)}
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

        # The plugin stops: its devices stay in capacity, none allocatable.
        plugin.stop()
        await eventually(lambda: node_counts(agent),
                         until=lambda c: c == ({RESOURCE: 2}, {RESOURCE: 0}), within=30,
                         what="capacity kept, allocatable 0 once the plugin stopped")
