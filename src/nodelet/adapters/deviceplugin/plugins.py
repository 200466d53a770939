"""The Registration server nodelet offers device plugins, and a client of one plugin's
DevicePlugin service, over `grpc.aio` on unix sockets, in plain values
(`model.core.devices`).

A failed call raises `PluginError`, whose message is grpc-go's rendering of the error
(`rpc error: code = Unknown desc = ...`), as the kubelet's messages carry it. A refused
registration is answered with code Unknown and the handler's words, as the kubelet's Go
handler returning an error is.

Exceptions::

    PluginError     a call to a plugin failed; `.code` is the gRPC code's name
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc

from nodelet.adapters import grpcfailures
from nodelet.adapters.deviceplugin.gen import deviceplugin_pb2 as pb
from nodelet.adapters.deviceplugin.gen import deviceplugin_pb2_grpc as pb_grpc
from nodelet.helpers import errors
from nodelet.model.core import devices

T = TypeVar("T")


class PluginError(errors.MessageError):
    """A call to a device plugin that failed."""

    def __init__(self, message: str, *, code: str = "") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Registration:
    """A plugin's Register request."""

    version: str
    endpoint: str
    resource_name: str
    pre_start_required: bool = False
    preferred_allocation: bool = False


@dataclass(frozen=True)
class Options:
    """GetDevicePluginOptions' answer."""

    pre_start_required: bool = False
    preferred_allocation: bool = False


def _failed(message: str, code: str) -> PluginError:
    return PluginError(message, code=code)


async def _call(call: Callable[[], Awaitable[T]]) -> T:
    with grpcfailures.failures_as(_failed, "the plugin"):
        return await call()


class _Registration(pb_grpc.RegistrationServicer):
    def __init__(self, handler: Callable[[Registration], Awaitable[str | None]]) -> None:
        self._handler = handler

    async def Register(self, request: pb.RegisterRequest,
                       context: grpc.aio.ServicerContext[pb.RegisterRequest, pb.Empty],
                       ) -> pb.Empty:
        error = await self._handler(Registration(
            request.version, request.endpoint, request.resource_name,
            request.options.pre_start_required,
            request.options.get_preferred_allocation_available))
        if error:
            await context.abort(grpc.StatusCode.UNKNOWN, error)
        return pb.Empty()


class RegistrationServer:
    """The Registration service on the unix socket `socket` (a stale one replaced); each
    request goes to `handler`, whose error message (None: taken) refuses it."""

    def __init__(self, socket: Path,
                 handler: Callable[[Registration], Awaitable[str | None]]) -> None:
        self.socket = socket
        self._handler = handler
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(_Registration(self._handler), server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()


def _device(d: pb.Device) -> devices.Device:
    return devices.Device(d.ID, d.health, tuple(int(n.ID) for n in d.topology.nodes))


def _allocation(r: pb.ContainerAllocateResponse) -> devices.Allocation:
    return devices.Allocation(
        envs=dict(r.envs),
        mounts=tuple(devices.Mount(m.container_path, m.host_path, m.read_only)
                     for m in r.mounts),
        devices=tuple(devices.DeviceSpec(d.container_path, d.host_path, d.permissions)
                      for d in r.devices),
        annotations=dict(r.annotations),
        cdi_devices=tuple(c.name for c in r.cdi_devices))


class PluginClient:
    """The DevicePlugin service of one plugin at `socket`. `connect()` first, `close()` at
    the end. Calls have a deadline of `timeout` seconds, but the stream of ListAndWatch."""

    def __init__(self, socket: Path, *, timeout: float) -> None:
        self.socket = socket
        self._timeout = timeout
        self._channel = grpc.aio.insecure_channel(f"unix://{socket}")
        self._stub = pb_grpc.DevicePluginStub(self._channel)

    async def connect(self) -> None:
        """Wait until the plugin's socket answers (the kubelet's dial, blocking up to 10 s);
        PluginError in the kubelet's words when it does not."""
        try:
            await _wait_ready(self._channel, self._timeout)
        except TimeoutError as exc:
            raise PluginError("failed to dial device plugin: context deadline exceeded",
                              code="DEADLINE_EXCEEDED") from exc

    async def close(self) -> None:
        await self._channel.close(None)

    async def options(self) -> Options:
        answer = await _call(lambda: self._stub.GetDevicePluginOptions(
            pb.Empty(), timeout=self._timeout))
        return Options(answer.pre_start_required, answer.get_preferred_allocation_available)

    async def list_and_watch(self) -> AsyncIterator[tuple[devices.Device, ...]]:
        """Every list the plugin sends, until its stream ends (PluginError: how)."""
        stream = self._stub.ListAndWatch(pb.Empty())
        try:
            with grpcfailures.failures_as(_failed, "the plugin"):
                async for answer in stream:
                    yield tuple(_device(d) for d in answer.devices)
        finally:
            stream.cancel()
        raise PluginError("rpc error: code = Unavailable desc = the stream ended",
                          code="UNAVAILABLE")

    async def preferred(self, available: Sequence[str], must_include: Sequence[str],
                        size: int) -> tuple[str, ...]:
        answer = await _call(lambda: self._stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available),
                    must_include_deviceIDs=list(must_include), allocation_size=size)]),
            timeout=self._timeout))
        responses = answer.container_responses
        return tuple(responses[0].deviceIDs) if responses else ()

    async def allocate(self, ids: Sequence[str]) -> devices.Allocation | None:
        """The plugin's answer for one container; None when it answered for none."""
        answer = await _call(lambda: self._stub.Allocate(
            pb.AllocateRequest(container_requests=[
                pb.ContainerAllocateRequest(devices_ids=list(ids))]),
            timeout=self._timeout))
        responses = answer.container_responses
        return _allocation(responses[0]) if responses else None

    async def pre_start(self, ids: Sequence[str], *, limit: float) -> None:
        await _call(lambda: self._stub.PreStartContainer(
            pb.PreStartContainerRequest(devices_ids=list(ids)), timeout=limit))


async def _wait_ready(channel: grpc.aio.Channel, limit: float) -> None:
    await asyncio.wait_for(channel.channel_ready(), limit)
