"""The CSI drivers registered with this node (the kubelet's csi plugin's RegistrationHandler
and its drivers store): each with its Node service client and what NodeGetInfo and
NodeGetCapabilities said at registration, for the volume manager (`services.podwork`) and the
node's CSINode object (`services.cluster.csinode`, told through `on_change`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from nodelet.adapters.csi import client as csi

log = logging.getLogger(__name__)


class NotRegistered(csi.CsiError):
    """A volume names a driver that has not registered (yet)."""


@dataclass(frozen=True)
class Driver:
    name: str
    endpoint: str
    node_id: str
    max_volumes: int = 0
    topology: Mapping[str, str] = field(default_factory=dict)
    capabilities: frozenset[str] = frozenset()


def _major(version: str) -> int | None:
    head = version.lstrip("v").split(".")[0]
    return int(head) if head.isdigit() else None


class CsiDrivers:
    """The CSIPlugin handler of the plugin watcher, and the drivers it took."""

    # `call_timeout`: seconds a Node service call may take (settings.PluginSettings), also
    # for a stage or publish that hangs (then DeadlineExceeded, and the sync tries again).
    def __init__(self, *, call_timeout: float = 120.0,
                 on_change: Callable[[], Awaitable[None]] | None = None) -> None:
        self._timeout = call_timeout
        self._on_change = on_change
        self._drivers: dict[str, Driver] = {}
        self._clients: dict[str, csi.NodeClient] = {}
        self._retired: list[csi.NodeClient] = []

    async def register(self, name: str, endpoint: str, versions: tuple[str, ...]) -> None:
        """ValidatePlugin and RegisterPlugin: a v1 driver, asked for its node facts."""
        if not name:
            raise csi.CsiError("the plugin gave no driver name")
        if not any(_major(v) == 1 for v in versions):
            raise csi.CsiError(f"none of the CSI versions reported by this driver are "
                               f"supported: {', '.join(versions) or 'none'} (nodelet speaks v1)")
        old = self._clients.get(name)
        same = old is not None and self._drivers[name].endpoint == endpoint
        node = old if same and old is not None else csi.NodeClient(endpoint,
                                                                  timeout=self._timeout)
        try:
            info = await node.info()
            capabilities = await node.capabilities()
        except csi.CsiError:
            if node is not old:
                await node.close()
            raise
        if old is not None and node is not old:
            self._retire(old)
        self._clients[name] = node
        self._drivers[name] = Driver(name, endpoint, info.node_id, info.max_volumes,
                                     info.topology, capabilities)
        log.info("CSI driver %s: node ID %s, capabilities %s", name, info.node_id,
                 ", ".join(sorted(capabilities)) or "none")
        await self._changed()

    async def deregister(self, name: str, endpoint: str) -> None:
        driver = self._drivers.get(name)
        if driver is not None and driver.endpoint != endpoint:
            return  # registered again at another endpoint since: that one stays
        node = self._clients.pop(name, None)
        self._drivers.pop(name, None)
        if node is not None:
            self._retire(node)
        await self._changed()

    def _retire(self, node: csi.NodeClient) -> None:
        """A client no longer handed out: closed at shutdown, not now, as closing a channel
        cancels the calls a pod worker may still be waiting for."""
        self._retired.append(node)

    async def _changed(self) -> None:
        if self._on_change is not None:
            try:
                await self._on_change()
            except Exception:  # the CSINode is brought up to date again at the next change
                log.exception("updating the node's CSI drivers failed")

    def drivers(self) -> list[Driver]:
        return [self._drivers[name] for name in sorted(self._drivers)]

    def get(self, name: str) -> tuple[Driver, csi.NodeClient]:
        """The driver and its client; raises NotRegistered with the kubelet's words."""
        if name not in self._drivers:
            raise NotRegistered(f"driver name {name} not found in the list of registered CSI "
                                "drivers")
        return self._drivers[name], self._clients[name]

    async def close(self) -> None:
        """Close every client (at shutdown)."""
        for node in (*self._clients.values(), *self._retired):
            await node.close()
        self._clients.clear()
        self._retired.clear()
