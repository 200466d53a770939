"""How a failed call of nodelet's gRPC clients of plugins (device plugins, CSI drivers, DRA
drivers) reads: one rule for all of them.

A failed call is told in grpc-go's words (`rpc error: code = Unavailable desc = ...`), as the
kubelet's messages carry it, with the status code's name beside it. A call whose channel was
closed under it counts as Unavailable: nodelet closes a plugin's channel when the plugin went
away (its stream ended, it registered again), and a call in flight then fails as it would have
on the dead socket. `grpc.aio` cancels such a call, which raises CancelledError into the task
that awaits it although nobody cancelled that task; that is told apart from the task's own
cancellation, which goes on as it came.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

import grpc

from nodelet.helpers import errors


@contextlib.contextmanager
def failures_as(error: Callable[[str, str], Exception], peer: str) -> Iterator[None]:
    """Raise `error(message, code)` for a call in the block that failed; `peer` names the
    other end in the words of a closed channel ("the plugin")."""
    try:
        yield
    except grpc.aio.AioRpcError as exc:
        code = exc.code().name if exc.code() is not None else "UNKNOWN"
        raise error(errors.grpc_go_words(code, exc.details() or ""), code) from exc
    except grpc.aio.UsageError as exc:  # the channel was closed before the call
        raise error(closed_words(peer), "UNAVAILABLE") from exc
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise error(closed_words(peer), "UNAVAILABLE") from None


def closed_words(peer: str) -> str:
    return errors.grpc_go_words("UNAVAILABLE", f"{peer}'s connection was closed")
