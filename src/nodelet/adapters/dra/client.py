"""A client of one DRA driver's DRAPlugin service (v1 or v1beta1) and its device health stream
(DRAResourceHealth v1 or v1alpha1), over one `grpc.aio` channel on its unix socket, in plain
values (`model.core.resourceclaims`, `model.core.drahealth`).

A call that fails raises `DriverError` with grpc-go's rendering of the error (`rpc error: code
= Unavailable desc = ...`), as the kubelet's messages carry it. A claim the driver failed is
not an error of the call: its answer carries the driver's words (`ClaimAnswer.error`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass

import grpc

from nodelet.adapters import grpcfailures
from nodelet.adapters.dra.gen import dra_pb2 as pb
from nodelet.adapters.dra.gen import health_pb2 as health_pb
from nodelet.helpers import errors
from nodelet.model.core import drahealth
from nodelet.model.core import resourceclaims as rc
from nodelet.model.core.status import ResourceHealthStatus

# The DRAPlugin services nodelet speaks, newest first, as drivers name them in their supported
# versions. Their messages are the same (v1beta1 has no share_id): one set serves both, the
# version is in the method paths (/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/...).
SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
_PACKAGE = "k8s.io.kubelet.pkg.apis.dra"
# The optional device health services, newest first: the same messages under two packages.
HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")
_HEALTH_NAMES: dict[int, ResourceHealthStatus] = {health_pb.HEALTHY: "Healthy",
                                                   health_pb.UNHEALTHY: "Unhealthy"}
# A driver's socket is local: a driver that restarts is dialled again within seconds, not
# after gRPC's default back-off of up to two minutes.
_CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 500),
                    ("grpc.min_reconnect_backoff_ms", 500),
                    ("grpc.max_reconnect_backoff_ms", 5000))


class DriverError(errors.MessageError):
    """A call to a DRA driver that failed; `code` is the gRPC status code's name."""

    def __init__(self, message: str, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ClaimAnswer:
    """A driver's answer for one claim: its prepared devices, or why not (`error`)."""

    devices: tuple[rc.PreparedDevice, ...] = ()
    error: str = ""


def _claims(claims: Sequence[rc.ClaimRef]) -> list[pb.Claim]:
    return [pb.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]


class DriverClient:
    """The DRAPlugin `service` (one of SERVICES) at `endpoint` (a unix socket path); calls
    have a deadline of `timeout` seconds. `close()` at the end."""

    def __init__(self, endpoint: str, *, timeout: float, service: str = SERVICES[0]) -> None:
        self.endpoint = endpoint
        self._timeout = timeout
        target = endpoint if endpoint.startswith("unix:") else f"unix://{endpoint}"
        self._channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
        self._prepare = self._channel.unary_unary(
            f"/{_PACKAGE}.{service}/NodePrepareResources",
            request_serializer=pb.NodePrepareResourcesRequest.SerializeToString,
            response_deserializer=pb.NodePrepareResourcesResponse.FromString)
        self._unprepare = self._channel.unary_unary(
            f"/{_PACKAGE}.{service}/NodeUnprepareResources",
            request_serializer=pb.NodeUnprepareResourcesRequest.SerializeToString,
            response_deserializer=pb.NodeUnprepareResourcesResponse.FromString)

    async def close(self, grace: float | None = None) -> None:
        """Close the channel; calls in flight get `grace` seconds to finish (None: none)."""
        await self._channel.close(grace)

    async def watch(self, changed: Callable[[bool], None]) -> None:
        """Tell `changed` whether the driver's socket is connected, now and at each change,
        until cancelled (the channel dials it, and dials it again when it goes)."""
        state = self._channel.get_state(try_to_connect=True)
        while True:
            changed(state == grpc.ChannelConnectivity.READY)
            await self._channel.wait_for_state_change(state)
            state = self._channel.get_state(try_to_connect=True)

    async def prepare(self, claims: Sequence[rc.ClaimRef]) -> dict[str, ClaimAnswer]:
        """NodePrepareResources: the driver's answer per claim UID."""
        with grpcfailures.failures_as(DriverError, "the driver"):
            answer: pb.NodePrepareResourcesResponse = await self._prepare(
                pb.NodePrepareResourcesRequest(claims=_claims(claims)), timeout=self._timeout)
        return {uid: ClaimAnswer(tuple(
            rc.PreparedDevice(request_names=tuple(d.request_names), pool=d.pool_name,
                              device=d.device_name, cdi_ids=tuple(d.cdi_device_ids))
            for d in result.devices), result.error) for uid, result in answer.claims.items()}

    async def unprepare(self, claims: Sequence[rc.ClaimRef]) -> dict[str, str]:
        """NodeUnprepareResources: per claim UID, the driver's error ("" when it succeeded)."""
        with grpcfailures.failures_as(DriverError, "the driver"):
            answer: pb.NodeUnprepareResourcesResponse = await self._unprepare(
                pb.NodeUnprepareResourcesRequest(claims=_claims(claims)),
                timeout=self._timeout)
        return {uid: result.error for uid, result in answer.claims.items()}

    async def watch_health(
            self, service: str) -> AsyncGenerator[list[drahealth.DeviceHealth], None]:
        """NodeWatchResources of `service` (one of HEALTH_SERVICES) on the same connection as
        the DRAPlugin calls: each report the driver sends, until the stream ends (returns) or
        fails (DriverError; `code` UNIMPLEMENTED: the driver does not report health)."""
        call = self._channel.unary_stream(
            f"/{service}/NodeWatchResources",
            request_serializer=health_pb.NodeWatchResourcesRequest.SerializeToString,
            response_deserializer=health_pb.NodeWatchResourcesResponse.FromString)
        with grpcfailures.failures_as(DriverError, "the driver"):
            async for answer in call(health_pb.NodeWatchResourcesRequest()):
                yield [drahealth.DeviceHealth(
                    pool=d.device.pool_name, device=d.device.device_name,
                    health=_HEALTH_NAMES.get(d.health, drahealth.UNKNOWN),
                    timeout=drahealth.timeout_of(d.health_check_timeout_seconds),
                    message=drahealth.truncated(d.message)) for d in answer.devices]
