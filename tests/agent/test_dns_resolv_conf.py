"""Each dnsPolicy on real containerd: the /etc/resolv.conf a running container reads is exactly
what the kubelet's DNSConfig makes containerd write (search, nameserver lines, options), with
`--cluster-dns`/`--cluster-domain`/`--resolv-conf` set and unset, and the kubelet's events;
a setHostnameAsFQDN pod's hostname and /etc/hosts carry the cluster domain."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from conftest import Instance
from nodelet import settings
from nodelet.model.core import status as st
from support.harness import Harness, all_ready, cond, events_by, exec_in, pod_manifest

pytestmark = pytest.mark.runtime

NODE_RESOLV_CONF = """\
# the node's resolver
nameserver 192.0.2.53
nameserver 192.0.2.54
search corp.example example.
options timeout:2 rotate
"""
NODE_TEXT = ("search corp.example example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"
             "options timeout:2 rotate\n")
CLUSTER_TEXT = ("search default.svc.cluster.local svc.cluster.local cluster.local corp.example "
                "example\nnameserver 10.96.0.10\noptions ndots:5\n")

CLUSTER_DNS_PODS = {
    "dns-cf": ("", CLUSTER_TEXT),
    "dns-cf-config": (
        "dnsConfig:\n  searches: [x.example]\n  options: [{name: ndots, value: '2'}]\n",
        "search default.svc.cluster.local svc.cluster.local cluster.local corp.example "
        "example x.example\nnameserver 10.96.0.10\noptions ndots:2\n"),
    "dns-cf-hostnet": ("hostNetwork: true\n", NODE_TEXT),  # ClusterFirst → Default
    "dns-cfwhn": ("hostNetwork: true\ndnsPolicy: ClusterFirstWithHostNet\n", CLUSTER_TEXT),
    "dns-default": ("dnsPolicy: Default\n", NODE_TEXT),
    "dns-none": ("dnsPolicy: None\ndnsConfig:\n  nameservers: [1.1.1.1]\n"
                 "  searches: [a.example]\n  options: [{name: ndots, value: '1'}, {name: edns0}]\n",
                 "search a.example\nnameserver 1.1.1.1\noptions ndots:1 edns0\n"),
}


@asynccontextmanager
async def dns_agent(runtime: Instance, dns: settings.DNSSettings) -> AsyncIterator[Harness]:
    harness = Harness(endpoint=runtime.containerd.endpoint)
    harness.settings = dataclasses.replace(harness.settings, dns=dns)
    try:
        await harness.start()
        yield harness
    finally:
        try:
            await harness.stop()
        finally:
            harness.cleanup()


async def resolv_conf(runtime: Instance, harness: Harness, name: str) -> str:
    pod_status = await harness.wait_status(name, all_ready, within=60, what=f"{name} ready")
    result = await exec_in(runtime.client, pod_status, "cat /etc/resolv.conf")
    assert result.exit_code == 0, result
    return result.stdout.decode()


async def test_every_policy_with_cluster_dns(runtime: Instance, tmp_path: Path) -> None:
    node_file = tmp_path / "resolv.conf"
    node_file.write_text(NODE_RESOLV_CONF)
    dns = settings.DNSSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local",
                               resolv_conf=node_file)
    async with dns_agent(runtime, dns) as harness:
        for name, (spec, _) in CLUSTER_DNS_PODS.items():
            harness.write(f"{name}.yaml", pod_manifest(name, extra_spec=spec))
        harness.write("fqdn.yaml", pod_manifest("fqdn", extra_spec=(
            "hostname: h\nsubdomain: sub\nsetHostnameAsFQDN: true\n")))
        for name, (_, expected) in CLUSTER_DNS_PODS.items():
            assert await resolv_conf(runtime, harness, name) == expected, name
        # --cluster-domain completes a setHostnameAsFQDN hostname and the /etc/hosts entry.
        pod_status = await harness.wait_status("fqdn", all_ready, within=60, what="fqdn ready")
        result = await exec_in(runtime.client, pod_status, "hostname; grep sub /etc/hosts")
        assert result.stdout.decode().split() == [
            "h.sub.default.svc.cluster.local", pod_status.pod_ip,
            "h.sub.default.svc.cluster.local", "h"]
        every = [e for name in CLUSTER_DNS_PODS for e in harness.events_of(name)]
        assert not [e for e in every if e.type == "Warning"], every


async def test_no_cluster_dns_and_no_resolv_conf(runtime: Instance) -> None:
    dns = settings.DNSSettings(resolv_conf=None)
    async with dns_agent(runtime, dns) as harness:
        harness.write("fallback.yaml", pod_manifest("fallback"))
        harness.write("limits.yaml", pod_manifest("limits", extra_spec=(
            "dnsPolicy: Default\ndnsConfig:\n  nameservers: [1.1.1.1, 1.0.0.1, 8.8.8.8]\n")))
        assert await resolv_conf(runtime, harness, "fallback") == \
            "search .\nnameserver 127.0.0.1\n"
        assert await resolv_conf(runtime, harness, "limits") == \
            "search .\nnameserver 127.0.0.1\nnameserver 1.1.1.1\nnameserver 1.0.0.1\n"

        pod = harness.find("fallback")
        assert pod is not None
        missing = ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
                   '"ClusterFirst" policy. Falling back to "Default" policy.')
        reasons = {(e.reason, e.message) for e in harness.events_of("fallback")}
        assert ("MissingClusterDNS",
                f'pod: "fallback-testnode_default({pod[0].uid})". {missing}') in reasons
        node_events = [e for e in harness.agent_or_fail().events()
                       if e.reason == "MissingClusterDNS" and e.message == missing]
        assert node_events and node_events[0].kind == "Node"
        assert ("DNSConfigForming",
                "Nameserver limits were exceeded, some nameservers have been omitted, the "
                "applied nameserver line is: 127.0.0.1 1.1.1.1 1.0.0.1") in \
            {(e.reason, e.message) for e in harness.events_of("limits")}


async def test_an_unreadable_resolv_conf_fails_the_sandbox(runtime: Instance,
                                                           tmp_path: Path) -> None:
    """As the kubelet's generatePodSandboxConfig: no sandbox without the node's resolver file;
    the reason is in the event and the PodReadyToStartContainers message."""
    missing = tmp_path / "no-resolv.conf"
    async with dns_agent(runtime, settings.DNSSettings(resolv_conf=missing)) as harness:
        harness.write("nofile.yaml", pod_manifest("nofile", extra_spec="dnsPolicy: Default\n"))
        text = f"open {missing}: no such file or directory"

        def failed(pod_status: st.PodStatus) -> bool:
            condition = cond(pod_status, "PodReadyToStartContainers")
            return condition is not None and text in condition.message

        await harness.wait_status("nofile", failed, what="the sandbox's failure in the condition")
        assert f"Failed to create pod sandbox: {text}" in \
            {e.message for e in events_by(harness, "nofile", "FailedCreatePodSandBox")}
        found = harness.find("nofile")
        assert found is not None
        assert not await runtime.client.list_pod_sandboxes({"io.kubernetes.pod.uid": found[0].uid})
