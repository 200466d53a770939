"""A CRI proxy for fault injection: a real gRPC server on a unix socket that forwards every call,
as raw bytes, to a real runtime, except the methods told to fail, which answer with the gRPC
status and description given. nodelet talks to it as to any CRI endpoint.

    async with CriProxy(upstream="unix:///…/containerd.sock", socket=path) as proxy:
        proxy.fail("RunPodSandbox", grpc.StatusCode.UNAVAILABLE, "shutting down")
        ... proxy.endpoint ...
        proxy.heal("RunPodSandbox")

`hold(method)` delays the answer (not the call) of the next call of `method` until the hold is
released: a read that the runtime answered at once but that reaches nodelet late.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc


def _same(value: bytes) -> bytes:
    return value


@dataclass
class Hold:
    """A held call: `answered` is set once the runtime answered it, and the answer is passed
    on once `release` is set."""

    answered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


class CriProxy:
    def __init__(self, *, upstream: str, socket: Path) -> None:
        self._upstream = upstream
        self._socket = socket
        self._faults: dict[str, tuple[grpc.StatusCode, str]] = {}
        self._holds: dict[str, Hold] = {}
        self.calls: dict[str, int] = {}
        self._channel: grpc.aio.Channel | None = None
        self._server: grpc.aio.Server | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self._socket}"

    def fail(self, method: str, code: grpc.StatusCode, details: str) -> None:
        """Calls of `method` (e.g. "RunPodSandbox") answer `code` with `details`."""
        self._faults[method] = (code, details)

    def heal(self, method: str) -> None:
        self._faults.pop(method, None)

    def hold(self, method: str) -> Hold:
        """The next call of `method` is answered by the runtime at once, but the answer is
        passed on only once the hold is released."""
        held = self._holds[method] = Hold()
        return held

    async def __aenter__(self) -> CriProxy:
        self._channel = grpc.aio.insecure_channel(self._upstream)
        self._server = grpc.aio.server()
        self._server.add_generic_rpc_handlers((_Handler(self),))
        self._server.add_insecure_port(self.endpoint)
        await self._server.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
        if self._channel is not None:
            await self._channel.close()
        self._socket.unlink(missing_ok=True)

    async def _counted(self, full_method: str,
                       context: grpc.aio.ServicerContext[Any, Any]) -> str:
        """Count the call of `full_method` and answer its injected fault, if any; its name."""
        name = full_method.rsplit("/", 1)[1]
        self.calls[name] = self.calls.get(name, 0) + 1
        fault = self._faults.get(name)
        if fault is not None:
            await context.abort(*fault)
        return name

    async def forward(self, full_method: str, request: bytes,
                      context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        name = await self._counted(full_method, context)
        assert self._channel is not None
        call = self._channel.unary_unary(full_method, request_serializer=_same,
                                         response_deserializer=_same)
        try:
            response: bytes = await call(request, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        held = self._holds.pop(name, None)
        if held is not None:
            held.answered.set()
            await held.release.wait()
        return response


    async def forward_stream(self, full_method: str, request: bytes,
                             context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        """A server stream (GetContainerEvents, Subscribe), passed on message by message."""
        await self._counted(full_method, context)
        assert self._channel is not None
        call = self._channel.unary_stream(full_method, request_serializer=_same,
                                          response_deserializer=_same)(request)
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        finally:
            call.cancel()


# The server-streaming methods, CRI's and containerd's own event stream (the rest are unary).
_STREAMS = ("/runtime.v1.RuntimeService/GetContainerEvents",
            "/containerd.services.events.v1.Events/Subscribe")


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, proxy: CriProxy) -> None:
        self._proxy = proxy

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method  # type: ignore[attr-defined]
        if method in _STREAMS:
            # An async generator function itself: grpc.aio streams only what such a
            # function yields (a plain function returning a generator fails the call).
            async def stream(request: bytes,
                             context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
                async for response in self._proxy.forward_stream(method, request, context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=_same, response_serializer=_same)

        async def handle(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            return await self._proxy.forward(method, request, context)

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=_same, response_serializer=_same)
