"""Node registration and node status, as the kubelet's `kubelet_node_status.go` does them.

`NodeReporter.register()` creates the Node (`POST /api/v1/nodes`); when it exists already
(a restart) it is kept and its labels and status are brought up to date. Then every
`update_period` (kubelet: `nodeStatusUpdateFrequency` 10 s) the status is computed — capacity
(cpu, memory, pods) from the machine, addresses, nodeInfo from the CRI Version, the Ready
condition from CRI Status (RuntimeReady and NetworkReady), the pressure conditions from the
eviction manager — and PATCHed only when it changed
or `report_period` passed (kubelet: `nodeStatusReportFrequency` 5 min; the Lease is the
heartbeat in between). A condition's `lastTransitionTime` moves only when its status does.

What the Node and its status say is decided by `model.core.nodes` (pure); facts about the machine
(`nodes.MachineFacts`) are read by the host adapter, once, by the caller. This module only does
the API and CRI calls.

Exceptions: `register()` and `update()` raise `kube.KubeError` when the API refuses (the
caller's loop logs it and tries again); a runtime that does not answer makes the node NotReady.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from nodelet.adapters import kube
from nodelet.model.core import apijson, nodes
from nodelet.model.core import runtime as rt

log = logging.getLogger(__name__)



class RuntimeInfo(Protocol):
    """What the node status needs from the container runtime (`cri.RuntimeClient` fits)."""

    async def version(self) -> rt.VersionInfo: ...

    async def status(self) -> rt.RuntimeStatus: ...


@dataclass(frozen=True)
class NodeViews:
    """What the Node's status reads from the node: the runtime (CRI Version and Status), the
    pressure conditions that are True (the eviction manager's), and the runtime's images (CRI
    ListImages, reported as `status.images`; None reports none)."""

    runtime: RuntimeInfo
    pressure: Callable[[], frozenset[str]] = frozenset
    images: Callable[[], Awaitable[Sequence[rt.ImageInfo]]] | None = None
    # The attachable volumes in use (`status.volumesInUse`; None: not reported).
    volumes_in_use: Callable[[], list[str]] | None = None
    # The device plugins' resources, (capacity, allocatable) counts by name (None: none).
    extended: Callable[[], tuple[Mapping[str, int], Mapping[str, int]]] | None = None
    # Whether the node is new to its device manager (no checkpoint when it started): a Node
    # adopted then has every extended resource it showed set to 0, once, in its first status
    # (the kubelet's reconcileExtendedResource); a plugin's list, or an admin, sets them after.
    reset_extended: Callable[[], bool] = lambda: False


class NodeReporter:
    """Registers the Node (`register()`), then keeps its status (`update()`, called by the
    caller's loop every `update_period` seconds)."""

    def __init__(
        self,
        *,
        client: kube.KubeClient,
        spec: nodes.NodeSpec,
        views: NodeViews,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float],
        update_period: float = 10.0,
        report_period: float = 300.0,
    ) -> None:
        """`views`: what the status reads from the node (`NodeViews`)."""
        self._client = client
        self._images = views.images
        self._last_images: list[apijson.Obj] | None = None
        self._spec = spec
        self._runtime = views.runtime
        self._clock = clock
        self._monotonic = monotonic
        self._pressure = views.pressure
        self._volumes_in_use = views.volumes_in_use
        self._extended = views.extended
        self._reset_extended = views.reset_extended
        # The extended resources an adopted Node had, at 0, for its first status only.
        self._zeroed: dict[str, int] = {}
        self.update_period = update_period
        self.report_period = report_period
        self.node: apijson.Obj | None = None
        self._reported: apijson.Obj | None = None
        self._reported_at = 0.0
        self.registered = False
        self.reports = 0

    @property
    def uid(self) -> str | None:
        return self.node["metadata"].get("uid") if self.node else None

    async def register(self) -> None:
        """Create the Node (or adopt the existing one), then report its status."""
        try:
            self.node = await self._client.create_node(nodes.node_object(self._spec))
            log.info("registered node %s", self._spec.name)
        except kube.AlreadyExists:
            self.node = await self._client.patch_node(
                self._spec.name, {"metadata": nodes.node_metadata(self._spec)})
            log.info("node %s was registered before; adopted it", self._spec.name)
            if self._reset_extended():
                self._zeroed = nodes.extended_at_zero(self.node.get("status") or {})
                if self._zeroed:
                    log.info("node %s: no device checkpoint, so its extended resources %s "
                             "are set to 0", self._spec.name, ", ".join(sorted(self._zeroed)))
        self.registered = True
        await self.update(force=True)

    async def update(self, *, force: bool = False) -> bool:
        """Compute the status and PATCH it if it changed (or is due); True if sent."""
        version, ready, features = await self._runtime_state()
        previous = (self.node or {}).get("status")
        status = nodes.node_status(self._spec, version, ready, previous=previous,
                                   now=self._clock(), pressure=self._pressure(),
                                   images=await self._node_images(), features=features,
                                   volumes_in_use=self._volumes_in_use()
                                   if self._volumes_in_use is not None else None,
                                   extended=self._extended_now())
        due = self._monotonic() - self._reported_at >= self.report_period
        if not force and not due and not nodes.status_changed(self._reported, status):
            return False
        self.node = await self._client.patch_node_status(self._spec.name, {"status": status})
        self._reported, self._reported_at = status, self._monotonic()
        self._zeroed = {}
        self.reports += 1
        return True

    def _extended_now(self) -> tuple[Mapping[str, int], Mapping[str, int]] | None:
        """The device plugins' resources, over the adopted Node's zeroed ones until they
        were sent."""
        capacity, allocatable = self._extended() if self._extended else ({}, {})
        if not self._zeroed:
            return (capacity, allocatable) if self._extended else None
        return {**self._zeroed, **capacity}, {**self._zeroed, **allocatable}

    async def _node_images(self) -> list[apijson.Obj] | None:
        """The images to report; the last list when the runtime does not answer (the kubelet
        reports its image cache, refreshed in the background, the same way)."""
        if self._images is None:
            return None
        try:
            self._last_images = nodes.node_images(await self._images())
        except Exception as exc:  # the runtime's failure is reported by Ready, not here
            log.debug("cannot list images for the node status: %s", exc)
        return self._last_images

    async def _runtime_state(
            self) -> tuple[rt.VersionInfo | None, nodes.ConditionValue, rt.RuntimeStatus | None]:
        try:
            version = await self._runtime.version()
            status = await self._runtime.status()
        except Exception as exc:  # any runtime failure makes the node NotReady, not crash it
            return None, nodes.ready_condition(None, str(exc)), None
        return version, nodes.ready_condition(status), status
