"""CRI's container event stream (`GetContainerEvents`) as model values.

`CriEventsClient.events()` has the signature of the containerd event client
(`adapters.events.client.EventsClient.events`), so `services.pleg.runtimeevents` takes either: it
streams `RuntimeService/GetContainerEvents` and yields `runtimeevents.RuntimeEvent`s
(`runtimeevents.from_cri` decides what each CRI event means) until the stream breaks.
`namespace` and `topics` are containerd's notions and not used: CRI sends every container
and sandbox event of the runtime.

Knowing when the stream is live: the runtime sends nothing until the first event, and a
runtime without the call answers UNIMPLEMENTED at once. The stream counts as live when it
has neither failed nor ended within `confirm_timeout` (containerd registers the subscriber as
its handler starts, well within that on one host); `on_subscribed` is called then, and the
relist it starts reads whatever changed before.

Exceptions: those of `adapters.events.client` — `EventsUnsupported` for a runtime without
GetContainerEvents (containerd 1.6), `EventsUnavailable` when the stream fails or ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import grpc

from nodelet.adapters.cri.gen import api_pb2 as pb
from nodelet.adapters.cri.gen import api_pb2_grpc as pb_grpc
from nodelet.adapters.events import client as events_client
from nodelet.model.core import runtimeevents as rev

# As the CRI client's channel: reconnect quickly after a runtime restart.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
]

Call = grpc.aio.UnaryStreamCall[pb.GetEventsRequest, pb.ContainerEventResponse]


def decode(response: pb.ContainerEventResponse) -> tuple[rev.RuntimeEvent, ...]:
    """The events one CRI event means (the container's exit code and reason from the
    statuses the runtime sends along)."""
    status = next((c for c in response.containers_statuses if c.id == response.container_id),
                  None)
    return rev.from_cri(
        pb.ContainerEventType.Name(response.container_event_type), response.container_id,
        exit_code=status.exit_code if status is not None else 0,
        reason=status.reason if status is not None else "", at=response.created_at / 1e9)


class CriEventsClient:
    """One gRPC channel to the CRI runtime for its event stream; `open`, then `close`."""

    def __init__(self, *, channel: grpc.aio.Channel, endpoint: str) -> None:
        self._channel = channel
        self._endpoint = endpoint
        self._stub = pb_grpc.RuntimeServiceStub(channel)

    @classmethod
    def open(cls, endpoint: str) -> CriEventsClient:
        target = f"unix://{endpoint}" if endpoint.startswith("/") else endpoint
        return cls(channel=grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS),
                   endpoint=endpoint)

    async def close(self) -> None:
        await self._channel.close(None)

    async def events(
        self, *, namespace: str, topics: tuple[str, ...], confirm_timeout: float,
        on_subscribed: Callable[[], None],
    ) -> AsyncIterator[rev.RuntimeEvent]:
        """Events until the stream breaks (raises an EventsError; never returns)."""
        del namespace, topics  # containerd's notions: CRI streams every event
        call: Call = self._stub.GetContainerEvents(pb.GetEventsRequest())
        # The read stays pending across the confirmation (cancelling it would end the call).
        pending = asyncio.ensure_future(self._read(call))
        try:
            await asyncio.wait({pending}, timeout=confirm_timeout)
            if pending.done():
                pending.result()  # UNIMPLEMENTED comes at once; an event is kept for below
            on_subscribed()
            while True:
                for event in decode(await pending):
                    yield event
                pending = asyncio.ensure_future(self._read(call))
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc) from exc
        finally:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
            call.cancel()

    async def _read(self, call: Call) -> pb.ContainerEventResponse:
        response = await call.read()
        if not isinstance(response, pb.ContainerEventResponse):  # EOF: the runtime closed it
            raise events_client.EventsUnavailable(
                f"CRI event stream at {self._endpoint} ended", endpoint=self._endpoint)
        return response

    def _error(self, exc: grpc.aio.AioRpcError) -> events_client.EventsError:
        code = exc.code()
        what = f"CRI GetContainerEvents at {self._endpoint}: {code.name}: {exc.details()}"
        if code is grpc.StatusCode.UNIMPLEMENTED:
            return events_client.EventsUnsupported(what, endpoint=self._endpoint,
                                                   code=code.name)
        return events_client.EventsUnavailable(what, endpoint=self._endpoint, code=code.name)
