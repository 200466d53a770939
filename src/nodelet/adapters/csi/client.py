"""A small client of a CSI driver's Node service and of a plugin's Registration service, over
`grpc.aio` on unix sockets, in plain values.

Every call has a deadline (`timeout`, seconds). A failure raises `CsiError`, whose message is
the kubelet's rendering of a gRPC error (`rpc error: code = Internal desc = ...`), so events
read as the kubelet's.

Exceptions::

    CsiError        a call failed; `.code` is the gRPC code's name (`UNAVAILABLE`...)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import grpc

from nodelet.adapters import grpcfailures
from nodelet.adapters.csi.gen import csi_pb2 as pb
from nodelet.adapters.csi.gen import csi_pb2_grpc as pb_grpc
from nodelet.adapters.csi.gen import pluginregistration_pb2 as reg
from nodelet.adapters.csi.gen import pluginregistration_pb2_grpc as reg_grpc
from nodelet.helpers import errors

T = TypeVar("T")


class CsiError(errors.MessageError):
    """A CSI or registration call that failed."""

    def __init__(self, message: str, *, code: str = "") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    max_volumes: int = 0
    topology: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PluginInfo:
    """What a plugin's registration socket says of it."""

    type: str
    name: str
    endpoint: str
    versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Capability:
    """How a volume is used: a file system of `fs_type` mounted with `mount_flags` (CSI
    block volumes are not used by nodelet); `access_mode` is the CSI mode's name
    (SINGLE_NODE_WRITER...); `volume_mount_group` the group the driver gives it."""

    fs_type: str = ""
    mount_flags: tuple[str, ...] = ()
    access_mode: str = "SINGLE_NODE_WRITER"
    volume_mount_group: str = ""


def _target(socket: str) -> str:
    return socket if socket.startswith("unix:") else f"unix://{socket}"


def _failed(message: str, code: str) -> CsiError:
    return CsiError(message, code=code)


async def _call(call: Callable[[], Awaitable[T]]) -> T:
    with grpcfailures.failures_as(_failed, "the driver"):
        return await call()


def _capability(cap: Capability) -> pb.VolumeCapability:
    mode = pb.VolumeCapability.AccessMode(
        mode=pb.VolumeCapability.AccessMode.Mode.Value(cap.access_mode))
    return pb.VolumeCapability(mount=pb.VolumeCapability.MountVolume(
        fs_type=cap.fs_type, mount_flags=list(cap.mount_flags),
        volume_mount_group=cap.volume_mount_group), access_mode=mode)


class NodeClient:
    """The Node service of one CSI driver at `endpoint`. Close it with `close()`."""

    def __init__(self, endpoint: str, *, timeout: float) -> None:
        self._channel = grpc.aio.insecure_channel(_target(endpoint))
        self._stub = pb_grpc.NodeStub(self._channel)
        self._timeout = timeout

    async def close(self) -> None:
        await self._channel.close(None)

    async def info(self) -> NodeInfo:
        answer = await _call(lambda: self._stub.NodeGetInfo(
            pb.NodeGetInfoRequest(), timeout=self._timeout))
        return NodeInfo(answer.node_id, answer.max_volumes_per_node,
                        dict(answer.accessible_topology.segments))

    async def capabilities(self) -> frozenset[str]:
        answer = await _call(lambda: self._stub.NodeGetCapabilities(
            pb.NodeGetCapabilitiesRequest(), timeout=self._timeout))
        return frozenset(pb.NodeServiceCapability.RPC.Type.Name(c.rpc.type)
                         for c in answer.capabilities if c.HasField("rpc"))

    async def stage(self, volume_id: str, *, staging_path: str, capability: Capability,
                    publish_context: Mapping[str, str], volume_context: Mapping[str, str],
                    secrets: Mapping[str, str]) -> None:
        await _call(lambda: self._stub.NodeStageVolume(
            pb.NodeStageVolumeRequest(
                volume_id=volume_id, publish_context=dict(publish_context),
                staging_target_path=staging_path, volume_capability=_capability(capability),
                secrets=dict(secrets), volume_context=dict(volume_context)),
            timeout=self._timeout))

    async def unstage(self, volume_id: str, *, staging_path: str) -> None:
        await _call(lambda: self._stub.NodeUnstageVolume(
            pb.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging_path),
            timeout=self._timeout))

    async def publish(self, volume_id: str, *, staging_path: str, target_path: str,
                      capability: Capability, read_only: bool,
                      publish_context: Mapping[str, str], volume_context: Mapping[str, str],
                      secrets: Mapping[str, str]) -> None:
        await _call(lambda: self._stub.NodePublishVolume(
            pb.NodePublishVolumeRequest(
                volume_id=volume_id, publish_context=dict(publish_context),
                staging_target_path=staging_path, target_path=target_path,
                volume_capability=_capability(capability), readonly=read_only,
                secrets=dict(secrets), volume_context=dict(volume_context)),
            timeout=self._timeout))

    async def unpublish(self, volume_id: str, *, target_path: str) -> None:
        await _call(lambda: self._stub.NodeUnpublishVolume(
            pb.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target_path),
            timeout=self._timeout))

    async def expand(self, volume_id: str, *, volume_path: str, staging_path: str,
                     required_bytes: int, capability: Capability) -> int:
        """NodeExpandVolume to at least `required_bytes`; the capacity the driver reports
        (0: it did not say)."""
        answer = await _call(lambda: self._stub.NodeExpandVolume(
            pb.NodeExpandVolumeRequest(
                volume_id=volume_id, volume_path=volume_path, staging_target_path=staging_path,
                capacity_range=pb.CapacityRange(required_bytes=required_bytes),
                volume_capability=_capability(capability)),
            timeout=self._timeout))
        return int(answer.capacity_bytes)

    async def stats(self, volume_id: str, *, volume_path: str,
                    limit: float) -> dict[str, tuple[int, int, int]]:
        """Usage by unit ("BYTES", "INODES"): (used, total, available); a deadline of its
        own (`limit` seconds)."""
        answer = await _call(lambda: self._stub.NodeGetVolumeStats(
            pb.NodeGetVolumeStatsRequest(volume_id=volume_id, volume_path=volume_path),
            timeout=limit))
        return {pb.VolumeUsage.Unit.Name(u.unit): (u.used, u.total, u.available)
                for u in answer.usage}


async def plugin_info(socket: str, *, limit: float) -> PluginInfo:
    """GetInfo of the registration socket `socket` (a deadline of `limit` seconds)."""
    async with grpc.aio.insecure_channel(_target(socket)) as channel:
        stub = reg_grpc.RegistrationStub(channel)
        info = await _call(lambda: stub.GetInfo(reg.InfoRequest(), timeout=limit))
    return PluginInfo(info.type, info.name, info.endpoint, tuple(info.supported_versions))


async def notify_registration(socket: str, *, registered: bool, error: str,
                              limit: float) -> None:
    """NotifyRegistrationStatus: tell the plugin whether it was registered, and why not."""
    async with grpc.aio.insecure_channel(_target(socket)) as channel:
        stub = reg_grpc.RegistrationStub(channel)
        await _call(lambda: stub.NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=registered, error=error),
            timeout=limit))
