"""Each pod sandbox's DNS configuration: reads the node's resolv.conf and records the events
`model.core.dns.pod_dns` decides (MissingClusterDNS, DNSConfigForming).

As the kubelet, the node's `--resolv-conf` is read again for every sandbox, so a changed host
resolver reaches new pods without a restart.

Exceptions::

    DNSError   the node's resolv.conf cannot be read or parsed; the message is the error as
               the kubelet reports it (its sandbox then fails: FailedCreatePodSandBox)
"""

from __future__ import annotations

import asyncio

from nodelet import settings as settings_mod
from nodelet.adapters import host
from nodelet.helpers import errors
from nodelet.model.core import dns, pods, runtime
from nodelet.services.status import recording


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
