"""A pod's DNS resolver configuration as the kubelet builds it (pure; the kubelet's
pkg/kubelet/network/dns `GetPodDNS`).

`pod_dns(pod, node)` returns the CRI DNSConfig for the pod's sandbox (the runtime writes it as
the pod's /etc/resolv.conf) and the events the kubelet records while building it:

- the policy (`getPodDNSType`): `None` starts empty; `ClusterFirstWithHostNet`, and
  `ClusterFirst` on a pod that is not hostNetwork, use the cluster DNS; `Default`, and
  `ClusterFirst` on a hostNetwork pod, use the node's resolver (`--resolv-conf`);
- cluster DNS: the `--cluster-dns` servers only, the search list `<namespace>.svc.<domain>
  svc.<domain> <domain>` followed by the host's searches (duplicates dropped; the host's alone
  without `--cluster-domain`) and the option `ndots:5`;
- no `--cluster-dns`: the pod falls back to the node's resolver, with a Warning
  `MissingClusterDNS` on the Node and on the pod;
- `--resolv-conf ""` gives the node's resolver as `nameserver 127.0.0.1` (`::1` for an IPv6
  node IP) and `search .`;
- `spec.dnsConfig` is appended: nameservers and searches after the base ones (duplicates
  dropped), options merged by name with the pod's value winning;
- the limits: at most 3 nameservers, at most 32 search paths of at most 253 characters and
  2048 characters in all, each cut with a Warning `DNSConfigForming`.

One deviation: the kubelet orders merged options by Go map iteration (random); here they keep
the order in which their names first appear (the base ones, then the pod's).

Exceptions::

    ResolvConfError   the node's resolv.conf has a `nameserver` line without an address (the
                      kubelet then fails the pod's sandbox with this message)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from nodelet.helpers import errors
from nodelet.model.core import events as ev
from nodelet.model.core import pods, runtime

# The resolver's limits the kubelet applies (validation.MaxDNSNameservers, MaxDNSSearchPaths,
# MaxDNSSearchListChars; a search path longer than a DNS subdomain crashes glibc 2.28).
MAX_NAMESERVERS = 3
MAX_SEARCH_PATHS = 32
MAX_SEARCH_LIST_CHARS = 2048
MAX_SEARCH_PATH_LENGTH = 253
# The kubelet's options for cluster DNS: names with fewer dots are tried with the searches first.
CLUSTER_OPTIONS = ("ndots:5",)
MISSING_CLUSTER_DNS = "MissingClusterDNS"
DNS_CONFIG_FORMING = "DNSConfigForming"

DNSType = Literal["cluster", "host", "none"]


class ResolvConfError(errors.MessageError):
    """The node's resolv.conf cannot be used; `message` is the kubelet's text."""


@dataclass(frozen=True)
class NodeDNS:
    """What the node knows about DNS: `cluster_dns` (`--cluster-dns`), `cluster_domain`
    (`--cluster-domain`), `host` (the parsed `--resolv-conf`; None when it is "") and the
    node's IPs (only used with no resolv.conf)."""

    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = ""
    host: runtime.DNSConfig | None = field(default_factory=runtime.DNSConfig)
    node_ips: tuple[str, ...] = ()


@dataclass(frozen=True)
class DNSEvent:
    """An event to record; `on_node`: about the Node rather than the pod."""

    type: ev.EventType
    reason: str
    message: str
    on_node: bool = False


@dataclass(frozen=True)
class PodDNS:
    config: runtime.DNSConfig
    events: tuple[DNSEvent, ...] = ()


def parse_resolv_conf(text: str) -> runtime.DNSConfig:
    """The kubelet's parseResolvConf: `nameserver` lines accumulate; the last `search` and the
    last `options` line win; a search's trailing dot is dropped, but the root `.` alone is
    kept as it is (kubernetes#109441: systemd-resolved's stub file says `search .`, which
    would otherwise become an empty search, and an empty `search` line breaks resolvers);
    lines starting with `#` are comments (`domain` lines are ignored, as there). Raises
    ResolvConfError."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    problems = []
    for line in text.split("\n"):
        fields = line.strip().split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "nameserver":
            if len(fields) >= 2:
                servers.append(fields[1])
            else:
                problems.append("nameserver list is empty ")
        elif fields[0] == "search":
            searches = [search if search == "." else search.removesuffix(".")
                        for search in fields[1:]]
        elif fields[0] == "options":
            options = fields[1:]
    if problems:
        # utilerrors.NewAggregate's text: one error alone, several in brackets.
        raise ResolvConfError(problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]")
    return runtime.DNSConfig(tuple(servers), tuple(searches), tuple(options))


def dns_type(pod: pods.Pod) -> DNSType:
    """The kubelet's getPodDNSType (the API server refuses any other policy)."""
    policy = pod.spec.dns_policy
    if policy == "None":
        return "none"
    if policy == "ClusterFirstWithHostNet" or (policy == "ClusterFirst"
                                               and not pod.spec.host_network):
        return "cluster"
    return "host"


def pod_description(pod: pods.Pod) -> str:
    """The kubelet's format.Pod: `<name>_<namespace>(<uid>)`."""
    return f"{pod.name}_{pod.namespace}({pod.uid})"


def missing_cluster_dns_message() -> str:
    return ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
            '"ClusterFirst" policy. Falling back to "Default" policy.')


def pod_dns(pod: pods.Pod, node: NodeDNS) -> PodDNS:
    """The pod's DNSConfig and the events to record (see the module docstring)."""
    kind = dns_type(pod)
    events: list[DNSEvent] = []
    if kind == "none":
        config = runtime.DNSConfig()
    elif kind == "cluster" and node.cluster_dns:
        host = node.host or runtime.DNSConfig()
        config = runtime.DNSConfig(
            servers=node.cluster_dns,
            searches=cluster_searches(host.searches, pod.namespace, node.cluster_domain),
            options=CLUSTER_OPTIONS)
    else:
        if kind == "cluster":
            message = missing_cluster_dns_message()
            events += [DNSEvent("Warning", MISSING_CLUSTER_DNS, message, on_node=True),
                       DNSEvent("Warning", MISSING_CLUSTER_DNS,
                                f'pod: "{pod_description(pod)}". {message}')]
        config = node.host if node.host is not None else _no_resolver(node.node_ips)
    if pod.spec.dns_config is not None:
        config = append_pod_config(config, pod.spec.dns_config)
    servers, problem = fit_nameservers(config.servers)
    events += [DNSEvent("Warning", DNS_CONFIG_FORMING, problem)] if problem else []
    searches, problem = fit_searches(config.searches)
    events += [DNSEvent("Warning", DNS_CONFIG_FORMING, problem)] if problem else []
    return PodDNS(runtime.DNSConfig(servers, searches, config.options), tuple(events))


def cluster_searches(host_searches: Iterable[str], namespace: str, domain: str) -> tuple[str, ...]:
    """generateSearchesForDNSClusterFirst: the cluster's three searches before the host's."""
    if not domain:
        return tuple(host_searches)
    return _unique((f"{namespace}.svc.{domain}", f"svc.{domain}", domain, *host_searches))


def _no_resolver(node_ips: Iterable[str]) -> runtime.DNSConfig:
    """`--resolv-conf ""`: the local machine's resolver ("use the nameserver on the local
    machine" when none is named), one loopback per node IP, and the root as the search."""
    servers = tuple("::1" if _is_ipv6(ip) else "127.0.0.1" for ip in node_ips)
    return runtime.DNSConfig(servers=servers or ("127.0.0.1",), searches=(".",))


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def append_pod_config(base: runtime.DNSConfig, extra: pods.PodDNSConfig) -> runtime.DNSConfig:
    """appendDNSConfig: the pod's nameservers and searches after the base's, duplicates
    dropped; options merged by name (the pod's win)."""
    return runtime.DNSConfig(
        servers=_unique((*base.servers, *extra.nameservers)),
        searches=_unique((*base.searches, *extra.searches)),
        options=merge_options(base.options, extra.options),
    )


def merge_options(base: Iterable[str], overrides: Iterable[str]) -> tuple[str, ...]:
    """mergeDNSOptions over `name` / `name:value` strings; an empty value is written as the
    name alone. Order: first appearance of each name (the kubelet's is random)."""
    merged: dict[str, str] = {}
    for option in (*base, *overrides):
        name, _, value = option.partition(":")
        merged[name] = value
    return tuple(f"{name}:{value}" if value else name for name, value in merged.items())


def fit_nameservers(servers: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """formDNSNameserversFitsLimits: the first 3, and the event message when some were cut."""
    if len(servers) <= MAX_NAMESERVERS:
        return servers, ""
    kept = servers[:MAX_NAMESERVERS]
    return kept, ("Nameserver limits were exceeded, some nameservers have been omitted, the "
                  f"applied nameserver line is: {' '.join(kept)}")


def fit_searches(searches: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """formDNSSearchFitsLimits: at most 32 paths, none longer than 253 characters, the line at
    most 2048 characters (cut from the end); the event message when anything was cut."""
    kept = [search for search in searches[:MAX_SEARCH_PATHS]
            if len(search) <= MAX_SEARCH_PATH_LENGTH]
    exceeded = len(kept) != len(searches)
    while kept and len(" ".join(kept)) > MAX_SEARCH_LIST_CHARS:
        kept.pop()
        exceeded = True
    if not exceeded:
        return searches, ""
    return tuple(kept), ("Search Line limits were exceeded, some search paths have been "
                         f"omitted, the applied search line is: {' '.join(kept)}")


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
