"""A CSI Node service written for the tests, for inline (ephemeral) CSI volumes only.

Why not the real thing: no driver that publishes inline volumes can run here. The mock driver
the tests build (tests/support/csipeers.py, the e2e suite's at v1.37.2) dereferences a nil
volume in NodePublishVolume for an ephemeral request (node.go:195) and exits; the hostpath
driver's module is not served. This one speaks the same protocol (CSI spec v1.14.0's Node
service, our generated stubs) and does what a driver of inline volumes does on disk:
NodePublishVolume makes the target directory (its parent is the node's) and writes the
volume context into it as `context.json`; NodeUnpublishVolume removes the target. Every
request is kept in `calls` (method, request as a dict).

    async with FakeCsiNode(socket, node_id="n1") as driver:
        ...; driver.calls
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
from google.protobuf import json_format

from nodelet.adapters.csi.gen import csi_pb2 as pb
from nodelet.adapters.csi.gen import csi_pb2_grpc as pb_grpc
from support.csiregistrar import serve_on, stop_serving


class _Node(pb_grpc.NodeServicer):
    def __init__(self, fake: FakeCsiNode) -> None:
        self._fake = fake

    def _record(self, method: str, request: Any) -> None:
        self._fake.calls.append((method, json_format.MessageToDict(
            request, preserving_proto_field_name=True)))

    async def NodeGetInfo(self, request: pb.NodeGetInfoRequest,
                          context: grpc.aio.ServicerContext) -> pb.NodeGetInfoResponse:
        self._record("NodeGetInfo", request)
        return pb.NodeGetInfoResponse(node_id=self._fake.node_id)

    async def NodeGetCapabilities(
            self, request: pb.NodeGetCapabilitiesRequest,
            context: grpc.aio.ServicerContext) -> pb.NodeGetCapabilitiesResponse:
        self._record("NodeGetCapabilities", request)
        return pb.NodeGetCapabilitiesResponse()

    async def NodePublishVolume(
            self, request: pb.NodePublishVolumeRequest,
            context: grpc.aio.ServicerContext) -> pb.NodePublishVolumeResponse:
        self._record("NodePublishVolume", request)
        target = Path(request.target_path)
        if not target.parent.is_dir():
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                f"parent of {target} does not exist")
        target.mkdir(exist_ok=True)
        (target / "context.json").write_text(json.dumps(dict(request.volume_context)))
        return pb.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(
            self, request: pb.NodeUnpublishVolumeRequest,
            context: grpc.aio.ServicerContext) -> pb.NodeUnpublishVolumeResponse:
        self._record("NodeUnpublishVolume", request)
        shutil.rmtree(request.target_path, ignore_errors=True)
        return pb.NodeUnpublishVolumeResponse()


class FakeCsiNode:
    """The Node service on the unix socket `socket`."""

    def __init__(self, socket: Path, *, node_id: str) -> None:
        self.socket = socket
        self.node_id = node_id
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._server: grpc.aio.Server | None = None

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [request for name, request in self.calls if name == method]

    async def __aenter__(self) -> FakeCsiNode:
        self._server = await serve_on(self.socket, lambda server: (
            pb_grpc.add_NodeServicer_to_server(_Node(self), server)))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await stop_serving(self._server, self.socket)
