"""What a pod is told about names: its sandbox's DNS configuration, its managed /etc/hosts and
its containers' service variables — the kubelet's pkg/kubelet/network/dns and the hosts file
and service links of kubelet_pods.go. The rules are pure (`model.core.dns`, `etchosts`,
`servicelinks`); this module reads and writes the files and waits for the Services.

DNS (`PodDNS`): as the kubelet, the node's `--resolv-conf` is read again for every sandbox,
so a changed host resolver reaches new pods without a restart; the events `dns.pod_dns`
decides (MissingClusterDNS, DNSConfigForming) are recorded.

/etc/hosts (`hosts_mount`): `<pods root>/<pod uid>/etc-hosts`, written, as by the kubelet,
before each container start, and mounted at /etc/hosts into the containers that do not mount
a volume there. The file is rewritten in place and only when its content differs: running
containers have its inode bind-mounted, so a rename would leave them with the old file. It
goes with the pod's directory when the pod is terminated.

Service variables (`service_env`, `enableServiceLinks`) come from a `ServiceSource`: cluster
mode's `servicewatch.ServiceWatch`; standalone there is none, and containers get no service
variables (so a standalone agent imports no Kubernetes API client for this, issue 26). As in
the kubelet, a pod from the API (not a static pod) must not start its containers before the
Services were listed once — its `KUBERNETES_SERVICE_HOST` would be missing; here it waits
for the first list, at most the source's own timeout (the watch's `wait_timeout`), and then
fails with the kubelet's CreateContainerConfigError message
(`servicelinks.NOT_SYNCED_MESSAGE`), retried on the next sync.

Exceptions::

    DNSError             the node's resolv.conf cannot be read or parsed; the message is the
                         error as the kubelet reports it (its sandbox then fails:
                         FailedCreatePodSandBox)
    OSError              `hosts_mount`: the file system's; the caller turns it into a
                         container error
    envvars.ConfigError  `service_env`: the Services were never listed
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from nodelet import settings as settings_mod
from nodelet.adapters import host, hostdirs
from nodelet.helpers import errors
from nodelet.model.core import dns, envvars, etchosts, pods, runtime, servicelinks
from nodelet.services.status import recording

# -- DNS ------------------------------------------------------------------------------------

class DNSError(errors.MessageError):
    """The pod's DNS configuration cannot be built."""


class PodDNS:
    def __init__(
        self,
        *,
        settings: settings_mod.DNSSettings,
        node_ips: tuple[str, ...],
        recorder: recording.EventRecorder,
    ) -> None:
        self._settings = settings
        self._node_ips = node_ips
        self._recorder = recorder

    async def config(self, pod: pods.Pod) -> runtime.DNSConfig:
        """The DNSConfig of the pod's next sandbox, its events recorded; raises DNSError."""
        result = dns.pod_dns(pod, await self.node())
        for event in result.events:
            if event.on_node:
                self._recorder.record_node(event.type, event.reason, event.message)
            else:
                self._recorder.record(pod, event.type, event.reason, event.message)
        return result.config

    async def node(self) -> dns.NodeDNS:
        """The node's DNS facts, with its resolv.conf read now; raises DNSError."""
        path = self._settings.resolv_conf
        resolver: runtime.DNSConfig | None = None
        if path is not None:
            try:
                resolver = dns.parse_resolv_conf(
                    await asyncio.to_thread(host.read_resolv_conf, path))
            except OSError as exc:
                # Go's words: "open /etc/resolv.conf: no such file or directory".
                text = f"open {path}: {exc.strerror.lower()}" if exc.strerror else str(exc)
                raise DNSError(text) from exc
            except dns.ResolvConfError as exc:
                raise DNSError(exc.message) from exc
        return dns.NodeDNS(cluster_dns=self._settings.cluster_dns,
                           cluster_domain=self._settings.cluster_domain, host=resolver,
                           node_ips=self._node_ips)


# -- /etc/hosts ------------------------------------------------------------------------------

NODE_HOSTS = Path("/etc/hosts")
_MODE = 0o644


async def hosts_mount(
    pods_root: Path, pod: pods.Pod, pod_ips: Sequence[str], *, node_hosts: Path = NODE_HOSTS,
    cluster_domain: str = "",
) -> runtime.Mount | None:
    """Write the pod's hosts file and return its mount; None while the pod has no IP (the
    kubelet does not mount the file then, and the runtime's own copy stays).
    `cluster_domain` (`--cluster-domain`) ends the FQDN of a pod with a subdomain."""
    if not pod_ips:
        return None
    path = pods_root / pod.uid / etchosts.FILE_NAME
    await asyncio.to_thread(hostdirs.pod_dir, pods_root, pod.uid)
    await asyncio.to_thread(_ensure, path, pod, tuple(pod_ips), node_hosts, cluster_domain)
    return etchosts.hosts_mount(str(path))


def _ensure(path: Path, pod: pods.Pod, ips: tuple[str, ...], node_hosts: Path,
            cluster_domain: str) -> None:
    node = _read(node_hosts) if pod.spec.host_network else ""
    text = etchosts.content(pod, ips, node_hosts=node, cluster_domain=cluster_domain)
    data = text.encode(errors="surrogateescape")
    path.parent.mkdir(parents=True, exist_ok=True)
    # The container may write to its /etc/hosts: compare the size before reading it back.
    if path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    with path.open("wb") as handle:  # truncates the same inode
        handle.write(data)
    path.chmod(_MODE)


def _read(path: Path) -> str:
    # The node's file as bytes, kept byte for byte whatever its encoding.
    return path.read_bytes().decode(errors="surrogateescape")


# -- service variables --------------------------------------------------------------------

class ServiceSource(Protocol):
    def current(self) -> tuple[servicelinks.Service, ...] | None:
        """The Services now; None until they were listed once."""

    async def wait_listed(self) -> None:
        """Return once the Services were listed, or after the source's own timeout."""


async def service_env(
    pod: pods.Pod, source: ServiceSource | None
) -> tuple[tuple[str, str], ...]:
    """The service variables of the pod's containers; raises envvars.ConfigError while the
    Services were never listed (not for static pods, which the kubelet lets through)."""
    if source is None:
        return ()
    services = source.current()
    if services is None and not pod.is_static:
        await source.wait_listed()
        services = source.current()
        if services is None:
            raise envvars.ConfigError(servicelinks.NOT_SYNCED_MESSAGE)
    return servicelinks.service_env(services or (), pod.namespace,
                                    enable_links=pod.spec.enable_service_links)
