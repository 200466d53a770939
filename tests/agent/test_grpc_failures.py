"""How a failed call of a plugin client reads (adapters/grpcfailures.py), over a real gRPC
server on a unix socket: a call in flight when nodelet closes the plugin's channel (its stream
ended first) fails as Unavailable in grpc-go's words, instead of a CancelledError that would
end the pod worker awaiting it; the awaiting task's own cancellation still goes on as it came.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from nodelet.adapters.deviceplugin import plugins
from nodelet.adapters.deviceplugin.gen import deviceplugin_pb2 as pb
from nodelet.adapters.deviceplugin.gen import deviceplugin_pb2_grpc as pb_grpc


class _Stalling(pb_grpc.DevicePluginServicer):
    """A plugin whose Allocate never answers; `called` is set when one is in."""

    def __init__(self) -> None:
        self.called = asyncio.Event()

    async def Allocate(self, request: pb.AllocateRequest,
                       context: object) -> pb.AllocateResponse:
        self.called.set()
        await asyncio.sleep(3600)
        return pb.AllocateResponse()


@pytest.fixture
async def stalling(tmp_path: Path) -> AsyncIterator[tuple[_Stalling, plugins.PluginClient]]:
    socket = tmp_path / "plugin.sock"
    servicer = _Stalling()
    server = grpc.aio.server()
    pb_grpc.add_DevicePluginServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    client = plugins.PluginClient(socket, timeout=30)
    try:
        await client.connect()
        yield servicer, client
    finally:
        await client.close()
        await server.stop(None)


async def test_a_call_whose_channel_is_closed_under_it_fails_as_unavailable(
        stalling: tuple[_Stalling, plugins.PluginClient]) -> None:
    servicer, client = stalling
    call = asyncio.ensure_future(client.allocate(["dev-a"]))
    await asyncio.wait_for(servicer.called.wait(), 10)
    await client.close()
    with pytest.raises(plugins.PluginError) as failed:
        await call
    assert failed.value.code == "UNAVAILABLE"
    assert failed.value.message == (
        "rpc error: code = Unavailable desc = the plugin's connection was closed")


async def test_a_call_on_a_channel_closed_before_fails_the_same(
        stalling: tuple[_Stalling, plugins.PluginClient]) -> None:
    _, client = stalling
    await client.close()
    with pytest.raises(plugins.PluginError) as failed:
        await client.allocate(["dev-a"])
    assert failed.value.code == "UNAVAILABLE"
    assert failed.value.message == (
        "rpc error: code = Unavailable desc = the plugin's connection was closed")


async def test_the_callers_own_cancellation_stays_a_cancellation(
        stalling: tuple[_Stalling, plugins.PluginClient]) -> None:
    servicer, client = stalling
    call = asyncio.ensure_future(client.allocate(["dev-a"]))
    await asyncio.wait_for(servicer.called.wait(), 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
