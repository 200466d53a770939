"""The node server's upgrade proxy (`node_server.open_upstream` + `splice`, which the test API
server's proxy to nodes uses too): bytes from a client that sends faster than the runtime's
streaming server reads are not piled up in the node's memory — the client is paused above the
high-water mark of the upstream's write buffer and resumed once it drained."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio
from aiohttp import web

from nodelet.adapters import node_server
from support.polling import eventually

SENT = 64 * 1024 * 1024  # far more than the kernel's socket buffers hold on loopback


class _Runtime:
    """A streaming server that answers the upgrade, then reads nothing until `release`."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.received = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\n"
                     b"Connection: Upgrade\r\n\r\n")
        await writer.drain()
        await self.release.wait()
        while chunk := await reader.read(1 << 20):
            self.received += len(chunk)
        writer.close()


@pytest_asyncio.fixture(loop_scope="session")
async def proxy() -> AsyncIterator[tuple[_Runtime, list[asyncio.StreamWriter], int]]:
    runtime = _Runtime()
    upstream = await asyncio.start_server(runtime.handle, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    writers: list[asyncio.StreamWriter] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        reader, writer = await node_server.open_upstream("127.0.0.1", port)
        writers.append(writer)
        writer.write(b"GET / HTTP/1.1\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101")
        try:
            return await node_server.splice(request, reader, writer, [("Upgrade", "test")])
        finally:
            writer.close()

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runtime, writers, int(runner.addresses[0][1])
    finally:
        runtime.release.set()
        await runner.cleanup()
        upstream.close()
        await upstream.wait_closed()


async def test_a_fast_client_is_paused_while_the_runtime_does_not_read(
        proxy: tuple[_Runtime, list[asyncio.StreamWriter], int]) -> None:
    runtime, writers, port = proxy
    reader, client = await asyncio.open_connection("127.0.0.1", port)
    client.write(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    client.write(b"x" * SENT)  # buffered on the client's side until the node reads it
    upstream = await eventually(lambda: writers[0] if writers else None, within=10,
                                what="the proxied session")
    protocol = upstream.transport.get_protocol()
    assert isinstance(protocol, node_server.UpstreamProtocol)

    def settled() -> bool:
        # Either the node paused the client, or (without flow control) it took everything.
        return protocol.paused > 0 or client.transport.get_write_buffer_size() == 0

    await eventually(settled, within=30, what="the client paused or fully read")
    assert protocol.paused > 0
    # What the node holds for the runtime stays near the mark, not the 64 MiB sent.
    assert upstream.transport.get_write_buffer_size() <= 2 * node_server.HIGH_WATER
    assert client.transport.get_write_buffer_size() > 0  # the rest waits at the client
    # Once the runtime reads, the client is resumed and every byte arrives.
    runtime.release.set()
    await eventually(lambda: runtime.received, until=lambda n: n == SENT, within=60,
                     what="every byte at the runtime")
    client.close()
    await client.wait_closed()
