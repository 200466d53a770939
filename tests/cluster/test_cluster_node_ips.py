"""The Node's addresses as the kubelet reports them, with and without `--node-ip`, on the real
control plane. A host with a second interface (a veth pair whose one end carries an IPv4 and
an IPv6 address, made for the test: these kernels have no dummy links): `--node-ip <v4>,<v6>`
makes both the Node's InternalIPs, the primary first, then the Hostname; kube-apiserver
reaches the node server at the primary for `kubectl logs`; pods get both as hostIPs (the
primary as hostIP), a host-network pod both as its podIPs.
Without the flag the node reports the address of the default route's interface. An address
the host does not have is refused at start with the kubelet's words, before anything starts.
"""

from __future__ import annotations

import dataclasses
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Instance
from nodelet.services.serving import preflight
from support.controlplane import AdminClient, ControlPlane, host_address, node_path, pod, pod_path
from support.harness import Harness
from support.polling import eventually

pytestmark = pytest.mark.runtime

V4, V6 = "198.51.100.7", "fd00:77::7"  # documentation / unique-local ranges, on the veth


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def second_interface() -> Iterator[str]:
    """A veth pair, V4 and V6 on its first end, removed (both ends) at the end."""
    name = f"nlip{secrets.token_hex(3)}"
    ip("link", "add", name, "type", "veth", "peer", "name", f"{name}p")
    try:
        ip("address", "add", f"{V4}/32", "dev", name)
        ip("-6", "address", "add", f"{V6}/128", "dev", name, "nodad")
        ip("link", "set", f"{name}p", "up")
        ip("link", "set", name, "up")
        yield name
    finally:
        ip("link", "del", name)


async def addresses(admin: AdminClient, node: str) -> list[dict[str, str]]:
    found = await admin.get(node_path(node))
    return list((found or {}).get("status", {}).get("addresses") or [])


async def test_node_ip_pair_is_reported_and_used(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str,
        second_interface: str) -> None:
    node = "node-ip-pair"
    async with join(node, start=False) as harness:
        harness.settings = dataclasses.replace(harness.settings, node_ips=(V4, V6))
        await harness.start()
        expected = [{"type": "InternalIP", "address": V4}, {"type": "InternalIP", "address": V6},
                    {"type": "Hostname", "address": node}]
        await eventually(lambda: addresses(admin, node), within=30,
                         until=lambda a: a == expected, what="the Node's addresses")
        await admin.create(pod_path(namespace), pod("hello", node=node, command="echo hi; "
                                                    "sleep 1000000"))
        found = await eventually(lambda: admin.get(pod_path(namespace, "hello")), within=60,
                                 until=lambda p: (p or {}).get("status", {}).get("phase")
                                 == "Running", what="the pod running")
        assert found is not None and found["status"]["hostIP"] == V4, found["status"]
        assert found["status"]["hostIPs"] == [{"ip": V4}, {"ip": V6}], found["status"]
        # A host-network pod has both node IPs as its pod IPs, as under the kubelet.
        await admin.create(pod_path(namespace), pod("on-host", node=node, hostNetwork=True))
        on_host = await eventually(lambda: admin.get(pod_path(namespace, "on-host")),
                                   within=60, until=lambda p: (p or {}).get("status", {})
                                   .get("phase") == "Running", what="the host-network pod")
        assert on_host is not None
        assert on_host["status"]["podIPs"] == [{"ip": V4}, {"ip": V6}], on_host["status"]
        # kube-apiserver dials the node's first InternalIP (its preferred address type).
        code, out, err = await control_plane.kubectl("logs", "hello", "-n", namespace)
        assert (code, out) == (0, b"hi\n"), err


async def test_without_node_ip_the_default_routes_address(
        join: Any, admin: AdminClient) -> None:
    node = "node-ip-default"
    async with join(node):
        await eventually(lambda: addresses(admin, node), within=30,
                         until=lambda a: a == [{"type": "InternalIP", "address": host_address()},
                                               {"type": "Hostname", "address": node}],
                         what="the Node's addresses")


@pytest.mark.parametrize(("node_ips", "words"), [
    (("203.0.113.9",), 'failed to validate nodeIP: node IP: "203.0.113.9" not found in the '
                       "host's network interfaces"),
    (("127.0.0.1",), "failed to validate nodeIP: nodeIP can't be loopback address"),
])
async def test_an_address_the_host_lacks_is_refused_at_start(
        runtime: Instance, node_ips: tuple[str, ...], words: str) -> None:
    harness = Harness(endpoint=runtime.containerd.endpoint, node_name="node-ip-refused")
    harness.settings = dataclasses.replace(harness.settings, node_ips=node_ips)
    try:
        with pytest.raises(preflight.StartupError, match=f"--node-ip: {words}"):
            await harness.start()
        harness.agent = None  # a failed start stopped what it had started
    finally:
        harness.cleanup()


def test_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from nodelet import cli, settings

    def parsed(*flags: str) -> tuple[str, ...]:
        return cli.settings_from_args(cli.build_parser().parse_args(["run", *flags])).node_ips

    assert parsed() == ()
    assert parsed("--node-ip", f"{V6},{V4}") == (V6, V4)
    assert parsed("--node-ip", f"{V4},bogus") == (V4,)
    assert "could not parse --node-ip bogus: ignored" in capsys.readouterr().err
    with pytest.raises(settings.SettingsError, match="a single IP or a dual-stack pair"):
        parsed("--node-ip", f"{V4},192.0.2.2")
