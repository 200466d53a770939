"""The pod's managed /etc/hosts: the kubelet's content, and which containers mount it."""

from __future__ import annotations

import pytest

from nodelet.model.core import etchosts, pods, runtime

LOCALHOST = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
HEADER = "# Kubernetes-managed hosts file.\n"
ALIASES = (
    pods.HostAlias("127.0.0.1", ("foo.local", "bar.local")),
    pods.HostAlias("10.1.2.3", ("foo.remote",)),
)
ALIAS_LINES = (
    "\n# Entries added by HostAliases.\n"
    "127.0.0.1\tfoo.local\tbar.local\n"
    "10.1.2.3\tfoo.remote\n"
)


def make_pod(*, hostname: str = "", subdomain: str = "", host_network: bool = False,
             aliases: tuple[pods.HostAlias, ...] = (), name: str = "web") -> pods.Pod:
    spec = pods.PodSpec(
        containers=(pods.Container(name="app", image="busybox"),),
        hostname=hostname, subdomain=subdomain, host_network=host_network, host_aliases=aliases,
    )
    return pods.Pod(uid=pods.PodUID("uid-1"), name=name, namespace="team", spec=spec)


CASES = [
    ("name only", make_pod(), ("10.0.0.5",), "", HEADER + LOCALHOST + "10.0.0.5\tweb\n"),
    ("spec hostname", make_pod(hostname="db"), ("10.0.0.5",), "",
     HEADER + LOCALHOST + "10.0.0.5\tdb\n"),
    ("dual stack", make_pod(), ("10.0.0.5", "fd00::5"), "",
     HEADER + LOCALHOST + "10.0.0.5\tweb\nfd00::5\tweb\n"),
    ("subdomain FQDN", make_pod(hostname="db", subdomain="sub"), ("10.0.0.5",), "cluster.local",
     HEADER + LOCALHOST + "10.0.0.5\tdb.sub.team.svc.cluster.local\tdb\n"),
    # A kubelet without --cluster-domain writes the same name, ending in "svc.".
    ("subdomain, no cluster domain", make_pod(subdomain="sub"), ("10.0.0.5",), "",
     HEADER + LOCALHOST + "10.0.0.5\tweb.sub.team.svc.\tweb\n"),
    ("aliases", make_pod(aliases=ALIASES), ("10.0.0.5",), "",
     HEADER + LOCALHOST + "10.0.0.5\tweb\n" + ALIAS_LINES),
    ("alias without hostnames", make_pod(aliases=(pods.HostAlias("10.9.9.9"),)), ("10.0.0.5",),
     "", HEADER + LOCALHOST + "10.0.0.5\tweb\n\n# Entries added by HostAliases.\n10.9.9.9\t\n"),
    ("long name truncated", make_pod(name="a" * 62 + "-bc"), ("10.0.0.5",), "",
     HEADER + LOCALHOST + "10.0.0.5\t" + "a" * 62 + "\n"),
]


@pytest.mark.parametrize(("pod", "ips", "domain", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_pod_network_content(pod: pods.Pod, ips: tuple[str, ...], domain: str,
                             expected: str) -> None:
    assert etchosts.content(pod, ips, node_hosts="unused", cluster_domain=domain) == expected


@pytest.mark.parametrize(
    ("aliases", "expected_tail"),
    [((), ""), (ALIASES, ALIAS_LINES)],
    ids=["no aliases", "aliases"],
)
def test_host_network_copies_the_node_file(aliases: tuple[pods.HostAlias, ...],
                                           expected_tail: str) -> None:
    node = "127.0.0.1\tlocalhost\n192.168.1.10\tnode-1\n"
    pod = make_pod(host_network=True, aliases=aliases, subdomain="sub")
    text = etchosts.content(pod, ("192.168.1.10",), node_hosts=node, cluster_domain="")
    assert text == "# Kubernetes-managed hosts file (host network).\n" + node + expected_tail


@pytest.mark.parametrize(
    ("paths", "needed"),
    [((), True), (("/data", "/etc/hostsx"), True), (("/data", "/etc/hosts"), False)],
    ids=["no mounts", "other paths", "own /etc/hosts"],
)
def test_containers_that_mount_etc_hosts_keep_their_own(paths: tuple[str, ...],
                                                        needed: bool) -> None:
    container = pods.Container(name="app", image="busybox", volume_mounts=tuple(
        pods.VolumeMount(name=f"v{i}", mount_path=p) for i, p in enumerate(paths)))
    assert etchosts.needs_hosts_file(container) is needed


def test_the_mount_is_writable_at_etc_hosts() -> None:
    assert etchosts.hosts_mount("/data/pods/uid-1/etc-hosts") == runtime.Mount(
        container_path="/etc/hosts", host_path="/data/pods/uid-1/etc-hosts", readonly=False)
