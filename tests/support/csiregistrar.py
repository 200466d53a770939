"""A node-driver-registrar of the project's own (the upstream sidecar's module is not served
here): it serves the kubelet's plugin registration protocol (`pluginregistration`,
Registration: GetInfo, NotifyRegistrationStatus) on `<registry>/<driver>-reg.sock`, as the
upstream registrar does, answering for a CSI driver whose Node service is at `endpoint`, and
keeps what the node told it.

    async with Registrar(registry_dir, driver="csi-mock", endpoint=socket) as registrar:
        await registrar.registered.wait()    # the node took it (or registrar.error says why)

Leaving the block stops the server and removes the socket, so the node deregisters the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import grpc

from nodelet.adapters.csi.gen import pluginregistration_pb2 as reg
from nodelet.adapters.csi.gen import pluginregistration_pb2_grpc as reg_grpc


class _Service(reg_grpc.RegistrationServicer):
    def __init__(self, registrar: Registrar) -> None:
        self._registrar = registrar

    async def GetInfo(self, request: reg.InfoRequest,
                      context: grpc.aio.ServicerContext) -> reg.PluginInfo:
        r = self._registrar
        r.asked += 1
        return reg.PluginInfo(type=r.plugin_type, name=r.driver, endpoint=r.endpoint,
                              supported_versions=list(r.versions))

    async def NotifyRegistrationStatus(
            self, request: reg.RegistrationStatus,
            context: grpc.aio.ServicerContext) -> reg.RegistrationStatusResponse:
        r = self._registrar
        if r.notify_failures > 0:
            r.notify_failures -= 1
            await context.abort(grpc.StatusCode.UNKNOWN,
                                "simulated NotifyRegistrationStatus failure")
        r.error = request.error
        (r.registered if request.plugin_registered else r.refused).set()
        return reg.RegistrationStatusResponse()


class Registrar:
    """The registration socket of one CSI driver (or, with `plugin_type`, a plugin of
    another type); its first `notify_failures` NotifyRegistrationStatus calls fail."""

    def __init__(self, registry: Path, *, driver: str, endpoint: str,
                 versions: tuple[str, ...] = ("1.0.0",), plugin_type: str = "CSIPlugin",
                 notify_failures: int = 0) -> None:
        self.plugin_type = plugin_type
        self.notify_failures = notify_failures
        self.socket = registry / f"{driver}-reg.sock"
        self.driver = driver
        self.endpoint = endpoint
        self.versions = versions
        self.asked = 0
        self.error = ""
        self.registered = asyncio.Event()
        self.refused = asyncio.Event()
        self._server: grpc.aio.Server | None = None

    async def __aenter__(self) -> Registrar:
        self._server = await serve_on(self.socket, lambda server: (
            reg_grpc.add_RegistrationServicer_to_server(_Service(self), server)))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await stop_serving(self._server, self.socket)


async def serve_on(socket: Path, add: Callable[[grpc.aio.Server], None]) -> grpc.aio.Server:
    """A gRPC server of the services `add` registers, on the unix socket `socket` (a stale
    socket file replaced)."""
    socket.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        socket.unlink()
    server = grpc.aio.server()
    add(server)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    return server


async def stop_serving(server: grpc.aio.Server | None, socket: Path) -> None:
    """Stop `serve_on`'s server and remove its socket."""
    if server is not None:
        await server.stop(grace=None)
    with contextlib.suppress(FileNotFoundError):
        socket.unlink()
