"""A subscription to containerd's event service, on the runtime's own socket, as model values.

`EventsClient.events()` subscribes to `containerd.services.events.v1.Events/Subscribe` with
filters for a namespace and topics, and yields `runtimeevents.RuntimeEvent`s until the stream
breaks. protobuf stays inside this package (`decode` translates).

Knowing when the subscription is live: containerd sends nothing on a new stream until the first
event, so "subscribed" cannot be read from the call. The client therefore publishes a probe
event on a topic of its own (`/nodelet/subscribed/<random>`) that only this subscription's
filters match, and calls `on_subscribed` when the probe comes back: from then on every event
reaches the stream, so a relist started in `on_subscribed` misses nothing (issue 13).

Exceptions (all raised `from` the gRPC error):

    EventsError             the subscription failed or ended; names the endpoint
    ├── EventsUnavailable   socket missing, runtime restarting, stream broken, probe not seen
    └── EventsUnsupported   the runtime has no containerd event service (UNIMPLEMENTED):
                            another CRI runtime, or containerd behind a CRI-only proxy
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable

import grpc
from google.protobuf import any_pb2, empty_pb2, message

from nodelet.adapters.events.gen import events_pb2 as pb
from nodelet.adapters.events.gen import events_pb2_grpc as pb_grpc
from nodelet.adapters.events.gen import payloads_pb2 as payloads
from nodelet.model.core import runtimeevents as rev

log = logging.getLogger(__name__)

# The topic prefix of the subscription probes (see the module docstring).
PROBE_TOPIC = "/nodelet/subscribed"
# containerd reads the namespace of a Publish call from this gRPC metadata key.
NAMESPACE_HEADER = "containerd-namespace"

# As the CRI client's channel: reconnect quickly after a runtime restart.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

_PAYLOADS: dict[rev.Kind, type[message.Message]] = {
    rev.Kind.TASK_EXIT: payloads.TaskExit,
    rev.Kind.TASK_OOM: payloads.TaskOOM,
    rev.Kind.CONTAINER_DELETE: payloads.ContainerDelete,
}


class EventsError(Exception):
    """The event subscription failed or ended."""

    def __init__(self, message: str, *, endpoint: str, code: str = "") -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.code = code


class EventsUnavailable(EventsError):
    """The runtime does not answer, or the stream broke: subscribe again after a back-off."""


class EventsUnsupported(EventsError):
    """The runtime does not offer containerd's event service."""


def _target(endpoint: str) -> str:
    """gRPC target for an endpoint; a bare absolute path means a unix socket."""
    return f"unix://{endpoint}" if endpoint.startswith("/") else endpoint


def _seconds(stamp: object) -> float:
    seconds = getattr(stamp, "seconds", 0)
    nanos = getattr(stamp, "nanos", 0)
    return float(seconds) + float(nanos) / 1e9


def decode(envelope: pb.Envelope) -> rev.RuntimeEvent | None:
    """The event an envelope carries; None for a topic or payload this adapter does not read."""
    try:
        kind = rev.Kind(envelope.topic)
    except ValueError:
        return None
    payload = _PAYLOADS[kind]()
    # containerd's type URL may carry a prefix (types.containerd.io/...): compare the name.
    if envelope.event.TypeName() != payload.DESCRIPTOR.full_name:
        log.debug("event %s: unexpected payload %s", envelope.topic, envelope.event.type_url)
        return None
    payload.ParseFromString(envelope.event.value)
    stamp = _seconds(envelope.timestamp)
    if isinstance(payload, payloads.TaskExit):
        return rev.RuntimeEvent(kind, payload.container_id, process_id=payload.id,
                                exit_status=payload.exit_status,
                                exited_at=_seconds(payload.exited_at), timestamp=stamp)
    if isinstance(payload, payloads.TaskOOM):
        return rev.RuntimeEvent(kind, payload.container_id, timestamp=stamp)
    assert isinstance(payload, payloads.ContainerDelete)
    return rev.RuntimeEvent(kind, payload.id, timestamp=stamp)


def _error(exc: grpc.aio.AioRpcError, endpoint: str, what: str) -> EventsError:
    code = exc.code()
    kind = EventsUnsupported if code == grpc.StatusCode.UNIMPLEMENTED else EventsUnavailable
    detail = exc.details() or code.name
    return kind(f"{what} at {endpoint}: {code.name}: {detail}", endpoint=endpoint,
                code=code.name)


class EventsClient:
    """One gRPC channel to containerd for events. Create with `open`, release with `close`."""

    def __init__(self, *, channel: grpc.aio.Channel, endpoint: str) -> None:
        self._channel = channel
        self._endpoint = endpoint
        self._stub = pb_grpc.EventsStub(channel)

    @classmethod
    def open(cls, endpoint: str) -> EventsClient:
        """A client for `endpoint` (the CRI socket of containerd); connects on first use."""
        channel = grpc.aio.insecure_channel(_target(endpoint), options=_CHANNEL_OPTIONS)
        return cls(channel=channel, endpoint=endpoint)

    @property
    def endpoint(self) -> str:
        return self._endpoint

    async def close(self) -> None:
        await self._channel.close(None)

    async def events(
        self,
        *,
        namespace: str,
        topics: tuple[str, ...],
        confirm_timeout: float,
        on_subscribed: Callable[[], None],
    ) -> AsyncIterator[rev.RuntimeEvent]:
        """Events of `topics` in `namespace`, until the stream breaks (raises EventsError;
        it never returns). `on_subscribed` is called once the subscription is live; an
        EventsUnavailable is raised if that is not confirmed within `confirm_timeout`."""
        probe = f"{PROBE_TOPIC}/{os.urandom(8).hex()}"
        filters = rev.subscription_filters(namespace, (*topics, probe))
        call = self._stub.Subscribe(pb.SubscribeRequest(filters=filters))
        try:
            await self._confirm(call, namespace, probe, confirm_timeout)
            on_subscribed()
            while True:
                envelope = await self._read(call)
                event = decode(envelope)
                if event is not None:
                    yield event
        except grpc.aio.AioRpcError as exc:
            raise _error(exc, self._endpoint, "event subscription") from exc
        finally:
            call.cancel()

    async def _confirm(
        self, call: grpc.aio.UnaryStreamCall[pb.SubscribeRequest, pb.Envelope],
        namespace: str, probe: str, within: float,
    ) -> None:
        """Read until the probe comes back, publishing it meanwhile with a back-off (the
        Subscribe request may reach containerd after a first Publish; containerd answers the
        subscription only with its first event, so its arrival cannot be awaited). Events
        before the probe are dropped: they were published before the subscription was known to
        be live, and the relist that follows `on_subscribed` reads their outcome anyway."""
        publisher = asyncio.get_running_loop().create_task(
            self._publish_probes(namespace, probe, within), name=f"events-probe:{probe}")
        try:
            async with asyncio.timeout(within):
                while (await self._read(call)).topic != probe:
                    pass
        except TimeoutError as exc:
            raise EventsUnavailable(
                f"event subscription at {self._endpoint} not confirmed within {within:g}s",
                endpoint=self._endpoint) from exc
        finally:
            publisher.cancel()
            await asyncio.gather(publisher, return_exceptions=True)

    async def _publish_probes(self, namespace: str, topic: str, deadline: float) -> None:
        """Publish the probe every 20 ms doubling to 1 s until cancelled (by `_confirm`)."""
        event = any_pb2.Any()
        event.Pack(empty_pb2.Empty())  # containerd forwards the payload without reading it
        request = pb.PublishRequest(topic=topic, event=event)
        delay = 0.02
        while True:
            await self._stub.Publish(request, metadata=((NAMESPACE_HEADER, namespace),),
                                     timeout=deadline)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _read(
        self, call: grpc.aio.UnaryStreamCall[pb.SubscribeRequest, pb.Envelope]
    ) -> pb.Envelope:
        envelope = await call.read()
        if not isinstance(envelope, pb.Envelope):  # grpc.aio.EOF: containerd closed the stream
            raise EventsUnavailable(f"event stream at {self._endpoint} ended",
                                    endpoint=self._endpoint)
        return envelope

