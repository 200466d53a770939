"""The pod's managed /etc/hosts (pure): the kubelet's content, and which containers get it.

The kubelet writes one hosts file per pod (`<pod dir>/etc-hosts`) before each container start
and bind-mounts it, writable, at /etc/hosts into every container that does not mount a volume
there itself. containerd then leaves out its own copy of the node's /etc/hosts: a CRI mount
at /etc/hosts wins over the sandbox's file.

- A pod on the pod network gets a fresh file: localhost entries, its IPs with its hostname
  (and FQDN with `spec.subdomain`), then `spec.hostAliases`.
- A hostNetwork pod gets the node's /etc/hosts with the aliases appended.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodelet.model.core import pods, runtime, specs

HOSTS_PATH = "/etc/hosts"
# The file's name in the pod's directory (the kubelet's getEtcHostsPath).
FILE_NAME = "etc-hosts"

_HEADER = "# Kubernetes-managed hosts file.\n"
_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
_LOCALHOST = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


def alias_entries(aliases: Sequence[pods.HostAlias]) -> str:
    """One line per alias, its hostnames tab-separated, after a blank line and a comment."""
    if not aliases:
        return ""
    # An alias without hostnames still gets its line ("<ip>\t"), as in the kubelet.
    lines = (alias.ip + "\t" + "\t".join(alias.hostnames) + "\n" for alias in aliases)
    return "\n# Entries added by HostAliases.\n" + "".join(lines)


def managed_content(
    ips: Sequence[str], hostname: str, domain: str, aliases: Sequence[pods.HostAlias]
) -> str:
    """The file of a pod on the pod network; every IP of the pod (dual-stack) names it."""
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    own = "".join(f"{ip}\t{names}\n" for ip in ips)
    return _HEADER + _LOCALHOST + own + alias_entries(aliases)


def host_network_content(node_hosts: str, aliases: Sequence[pods.HostAlias]) -> str:
    """The file of a hostNetwork pod: the node's /etc/hosts as it is, then the aliases."""
    return _HEADER_HOST_NETWORK + node_hosts + alias_entries(aliases)


def host_domain(pod: pods.Pod, cluster_domain: str) -> str:
    """`<subdomain>.<namespace>.svc.<cluster domain>`, empty without a subdomain or with
    hostnameOverride (the kubelet's GeneratePodHostNameAndDomain). Like the kubelet, an unset
    cluster domain leaves the name ending in "svc."."""
    if not pod.spec.subdomain or pod.spec.hostname_override:
        return ""
    return f"{pod.spec.subdomain}.{pod.namespace}.svc.{cluster_domain}"


def content(pod: pods.Pod, ips: Sequence[str], *, node_hosts: str, cluster_domain: str) -> str:
    """The pod's hosts file; `node_hosts` (the node's /etc/hosts) is read for hostNetwork only."""
    if pod.spec.host_network:
        return host_network_content(node_hosts, pod.spec.host_aliases)
    hostname = specs.hostname(pod)
    return managed_content(ips, hostname, host_domain(pod, cluster_domain), pod.spec.host_aliases)


def needs_hosts_file(container: pods.Container) -> bool:
    """False when the container mounts a volume at /etc/hosts itself (the kubelet's rule)."""
    return all(mount.mount_path != HOSTS_PATH for mount in container.volume_mounts)


def hosts_mount(host_path: str) -> runtime.Mount:
    # Writable, as the kubelet mounts it (its contents are rewritten on a container start).
    return runtime.Mount(container_path=HOSTS_PATH, host_path=host_path)
