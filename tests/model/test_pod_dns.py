"""The kubelet's resolv.conf rules (pkg/kubelet/network/dns): every dnsPolicy, hostNetwork or not,
cluster DNS set or not, dnsConfig merging, `--resolv-conf ""`, the limits and their events."""

from __future__ import annotations

import pytest

from nodelet.model.core import dns, pods, runtime, specs

HOST = runtime.DNSConfig(servers=("192.0.2.53",), searches=("corp.example", "example"),
                         options=("timeout:2", "rotate"))
CLUSTER = ("10.96.0.10",)
DOMAIN = "cluster.local"
CLUSTER_SEARCHES = ("ns1.svc.cluster.local", "svc.cluster.local", "cluster.local")
MISSING = ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
           '"ClusterFirst" policy. Falling back to "Default" policy.')


def make_pod(policy: str = "ClusterFirst", *, host_network: bool = False,
             config: pods.PodDNSConfig | None = None, namespace: str = "ns1") -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="c", image="busybox"),),
                        dns_policy=policy, host_network=host_network, dns_config=config)
    return pods.Pod(uid=pods.PodUID("u-1"), name="web", namespace=namespace, spec=spec,
                    source="api")


def node(cluster: bool, *, domain: str = DOMAIN,
         host: runtime.DNSConfig | None = HOST) -> dns.NodeDNS:
    return dns.NodeDNS(cluster_dns=CLUSTER if cluster else (), cluster_domain=domain,
                       host=host, node_ips=("10.0.0.5",))


CLUSTER_CONFIG = runtime.DNSConfig(servers=CLUSTER, searches=(*CLUSTER_SEARCHES, *HOST.searches),
                                   options=("ndots:5",))
NONE = runtime.DNSConfig()


@pytest.mark.parametrize(
    ("policy", "host_network", "cluster", "expected", "missing"),
    [
        ("ClusterFirst", False, True, CLUSTER_CONFIG, False),
        ("ClusterFirst", False, False, HOST, True),
        ("ClusterFirst", True, True, HOST, False),  # hostNetwork: Default, no event
        ("ClusterFirst", True, False, HOST, False),
        ("ClusterFirstWithHostNet", False, True, CLUSTER_CONFIG, False),
        ("ClusterFirstWithHostNet", False, False, HOST, True),
        ("ClusterFirstWithHostNet", True, True, CLUSTER_CONFIG, False),
        ("ClusterFirstWithHostNet", True, False, HOST, True),
        ("Default", False, True, HOST, False),
        ("Default", False, False, HOST, False),
        ("Default", True, True, HOST, False),
        ("Default", True, False, HOST, False),
        ("None", False, True, NONE, False),
        ("None", False, False, NONE, False),
        ("None", True, True, NONE, False),
        ("None", True, False, NONE, False),
    ],
)
def test_every_policy(policy: str, host_network: bool, cluster: bool,
                      expected: runtime.DNSConfig, missing: bool) -> None:
    result = dns.pod_dns(make_pod(policy, host_network=host_network), node(cluster))
    assert result.config == expected
    events = [dns.DNSEvent("Warning", "MissingClusterDNS", MISSING, on_node=True),
              dns.DNSEvent("Warning", "MissingClusterDNS", f'pod: "web_ns1(u-1)". {MISSING}')]
    assert result.events == (tuple(events) if missing else ())


def test_cluster_dns_without_a_domain_keeps_the_host_searches_only() -> None:
    result = dns.pod_dns(make_pod(), node(True, domain=""))
    assert result.config == runtime.DNSConfig(servers=CLUSTER, searches=HOST.searches,
                                              options=("ndots:5",))


def test_cluster_searches_drop_duplicates_of_the_host() -> None:
    host = runtime.DNSConfig(servers=("192.0.2.53",), searches=("cluster.local", "example"))
    result = dns.pod_dns(make_pod(), node(True, host=host))
    assert result.config.searches == (*CLUSTER_SEARCHES, "example")


@pytest.mark.parametrize(
    ("policy", "node_ips", "servers"),
    [
        ("Default", ("10.0.0.5",), ("127.0.0.1",)),
        ("Default", ("fd00::5",), ("::1",)),
        ("Default", ("10.0.0.5", "fd00::5"), ("127.0.0.1", "::1")),
        ("Default", (), ("127.0.0.1",)),
        ("ClusterFirst", ("10.0.0.5",), ("127.0.0.1",)),  # no cluster DNS → Default
    ],
)
def test_no_resolv_conf(policy: str, node_ips: tuple[str, ...],
                        servers: tuple[str, ...]) -> None:
    """`--resolv-conf ""`: the local resolver per node IP family, searching only the root."""
    node_dns = dns.NodeDNS(host=None, node_ips=node_ips)
    config = dns.pod_dns(make_pod(policy), node_dns).config
    assert config == runtime.DNSConfig(servers=servers, searches=(".",))


def test_no_resolv_conf_with_cluster_dns_has_only_the_cluster_searches() -> None:
    config = dns.pod_dns(make_pod(), node(True, host=None)).config
    assert config == runtime.DNSConfig(servers=CLUSTER, searches=CLUSTER_SEARCHES,
                                       options=("ndots:5",))


def test_dns_config_is_appended_and_options_merged_by_name() -> None:
    extra = pods.PodDNSConfig(nameservers=("10.96.0.10", "1.1.1.1"),
                              searches=("svc.cluster.local", "my.example"),
                              options=("ndots:2", "edns0", "timeout:5"))
    config = dns.pod_dns(make_pod(config=extra), node(True)).config
    assert config.servers == ("10.96.0.10", "1.1.1.1")
    assert config.searches == (*CLUSTER_SEARCHES, *HOST.searches, "my.example")
    assert config.options == ("ndots:2", "edns0", "timeout:5")


def test_dns_config_on_default_overrides_host_options() -> None:
    extra = pods.PodDNSConfig(options=("timeout:9", "single-request"))
    config = dns.pod_dns(make_pod("Default", config=extra), node(False)).config
    assert config.options == ("timeout:9", "rotate", "single-request")


def test_none_takes_only_the_dns_config() -> None:
    extra = pods.PodDNSConfig(nameservers=("1.1.1.1",), searches=("a.example",),
                              options=("ndots:1",))
    result = dns.pod_dns(make_pod("None", config=extra), node(True))
    assert result == dns.PodDNS(runtime.DNSConfig(("1.1.1.1",), ("a.example",), ("ndots:1",)))


def test_nameserver_limit() -> None:
    extra = pods.PodDNSConfig(nameservers=("1.1.1.1", "8.8.8.8", "9.9.9.9"))
    result = dns.pod_dns(make_pod(config=extra), node(True))
    assert result.config.servers == ("10.96.0.10", "1.1.1.1", "8.8.8.8")
    assert result.events == (dns.DNSEvent(
        "Warning", "DNSConfigForming",
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
        "nameserver line is: 10.96.0.10 1.1.1.1 8.8.8.8"),)


LONG = tuple(f"{i:02d}" + "x" * 251 for i in range(7))


def _search_event(kept: tuple[str, ...]) -> dns.DNSEvent:
    return dns.DNSEvent("Warning", "DNSConfigForming",
                        "Search Line limits were exceeded, some search paths have been omitted, "
                        f"the applied search line is: {' '.join(kept)}")


@pytest.mark.parametrize(
    ("searches", "kept"),
    [
        # 32 paths fit; the 33rd and later are cut.
        (tuple(f"s{i}.example" for i in range(29)), None),
        (tuple(f"s{i}.example" for i in range(31)), tuple(f"s{i}.example" for i in range(29))),
        # A path longer than 253 characters is left out, wherever it is.
        (("a" * 254, "ok.example"), ("ok.example",)),
        (("b" * 253,), None),
        # 2048 characters in all: cut from the end.
        # The cluster's three take 53 characters; 7 * (253 + 1) + (1 + 216) is exactly 2048.
        ((*LONG, "y" * 216), None),
        ((*LONG, "y" * 217), LONG),
        (tuple(f"{i:02d}" + "x" * 251 for i in range(9)),
         tuple(f"{i:02d}" + "x" * 251 for i in range(7))),
    ],
)
def test_search_limits(searches: tuple[str, ...], kept: tuple[str, ...] | None) -> None:
    pod = make_pod(config=pods.PodDNSConfig(searches=searches))
    result = dns.pod_dns(pod, node(True, host=runtime.DNSConfig()))
    if kept is None:
        assert result.config.searches == (*CLUSTER_SEARCHES, *searches)
        assert result.events == ()
    else:
        assert result.config.searches == (*CLUSTER_SEARCHES, *kept)
        assert result.events == (_search_event((*CLUSTER_SEARCHES, *kept)),)
    assert len(" ".join(result.config.searches)) <= dns.MAX_SEARCH_LIST_CHARS


def test_both_limits_give_two_events_nameservers_first() -> None:
    extra = pods.PodDNSConfig(nameservers=("1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"),
                              searches=("c" * 300,))
    result = dns.pod_dns(make_pod("None", config=extra), node(True))
    assert [e.message.split(" ")[0] for e in result.events] == ["Nameserver", "Search"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch a.example b.example.\n"
         "options ndots:2 timeout:1\n",
         runtime.DNSConfig(("10.0.0.2", "10.0.0.3"), ("a.example", "b.example"),
                           ("ndots:2", "timeout:1"))),
        # The last search and options lines win; `domain` and comments are ignored.
        ("search one.example\nsearch two.example\ndomain x.example\n# nameserver 9.9.9.9\n"
         "  options rotate\noptions edns0\nnameserver 1.1.1.1 # local\n",
         runtime.DNSConfig(("1.1.1.1",), ("two.example",), ("edns0",))),
        ("", runtime.DNSConfig()),
        # The root domain alone stays `.` (kubernetes#109441), never an empty search: it is
        # systemd-resolved's stub file without search domains.
        ("# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).\n"
         "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n",
         runtime.DNSConfig(("127.0.0.53",), (".",), ("edns0", "trust-ad"))),
        ("search example.com. .\n", runtime.DNSConfig((), ("example.com", "."), ())),
        ("search a..\n", runtime.DNSConfig((), ("a.",), ())),
    ],
)
def test_parse_resolv_conf(text: str, expected: runtime.DNSConfig) -> None:
    assert dns.parse_resolv_conf(text) == expected


def test_parse_resolv_conf_refuses_an_empty_nameserver() -> None:
    with pytest.raises(dns.ResolvConfError) as info:
        dns.parse_resolv_conf("nameserver\nnameserver 1.1.1.1\n")
    assert info.value.message == "nameserver list is empty "


# -- setHostnameAsFQDN (the kubelet's GetNodenameForKernel) --------------------------------


def fqdn_pod(*, fqdn: bool = True, subdomain: str = "sub", hostname: str = "h",
             host_network: bool = False) -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="c", image="busybox"),),
                        hostname=hostname, subdomain=subdomain, set_hostname_as_fqdn=fqdn,
                        host_network=host_network)
    return pods.Pod(uid=pods.PodUID("u-1"), name="web", namespace="ns1", spec=spec)


@pytest.mark.parametrize(
    ("pod", "domain", "expected"),
    [
        (fqdn_pod(), "cluster.local", "h.sub.ns1.svc.cluster.local"),
        (fqdn_pod(), "", "h.sub.ns1.svc."),  # as the kubelet without --cluster-domain
        (fqdn_pod(fqdn=False), "cluster.local", "h"),
        (fqdn_pod(subdomain=""), "cluster.local", "h"),
        (fqdn_pod(hostname=""), "cluster.local", "web.sub.ns1.svc.cluster.local"),
        (fqdn_pod(host_network=True), "cluster.local", ""),
        (fqdn_pod(hostname="x" * 38), "cluster.local", "x" * 38 + ".sub.ns1.svc.cluster.local"),
    ],
)
def test_kernel_hostname(pod: pods.Pod, domain: str, expected: str) -> None:
    assert specs.kernel_hostname(pod, domain) == expected
    assert len(expected) <= specs.MAX_FQDN_LENGTH


def test_a_too_long_fqdn_is_the_kubelets_error() -> None:
    fqdn = "x" * 39 + ".sub.ns1.svc.cluster.local"
    with pytest.raises(specs.SandboxConfigError) as info:
        specs.kernel_hostname(fqdn_pod(hostname="x" * 39), "cluster.local")
    assert info.value.message == (
        f"failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too "
        "long (64 characters is the max, 65 characters requested)")
