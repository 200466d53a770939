"""The CRI adapter's exception tree.

    CriError                  any failed CRI call; names the operation, object and endpoint
    ├── RuntimeUnavailable    socket missing, connect timeout, gRPC UNAVAILABLE
    ├── DeadlineExceeded      the call's deadline (settings.CriTimeouts) passed
    ├── NotFound              the sandbox, container or image does not exist
    ├── AlreadyExists         e.g. a sandbox name reused with the same attempt
    ├── InvalidArgument       the runtime rejected the request
    └── Cancelled             the call was cancelled

Every CriError is raised `from` the gRPC error (or OSError) that caused it, and carries the
gRPC status code name in `code` ("" when there was none), so callers can log the cause.
"""

from __future__ import annotations

import grpc


class CriError(Exception):
    """A CRI call failed. `operation` is the RPC name, `endpoint` the runtime's address."""

    def __init__(
        self, message: str, *, operation: str, endpoint: str, code: str = "", detail: str = "",
        description: str = "",
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.endpoint = endpoint
        self.code = code
        # The runtime's own words with gRPC's code (`rpc error: code = Unknown desc = …`),
        # as the kubelet prints a CRI error (FailedCreatePodSandBox); the whole message
        # when there were none.
        self.detail = detail or message
        # The description alone, as the kubelet shows it where it reads grpc status'
        # Message(): a container's create and start errors, in its status and events.
        self.description = description or self.detail

    @property
    def rpc_error(self) -> str:
        """The error as the kubelet prints a CRI error (`rpc error: code = Unavailable desc =
        …`), without nodelet's hint (which names the runtime's socket)."""
        if not self.code:
            return self.detail
        code = self.code.title().replace("_", "")
        return f"rpc error: code = {code} desc = {self.description}"

    @property
    def pull_words(self) -> str:
        """How the kubelet's CRI client words a failed PullImage: an Unknown code's
        description alone (it strips the code, which adds nothing), any other code kept."""
        return self.description if self.code == "UNKNOWN" else self.detail


class RuntimeUnavailable(CriError):
    """The runtime does not answer on its endpoint."""


class DeadlineExceeded(CriError):
    """The call did not finish within its deadline."""


class NotFound(CriError):
    """The object named in the call does not exist."""


class AlreadyExists(CriError):
    """The object to create exists already."""


class InvalidArgument(CriError):
    """The runtime rejected the request as invalid."""


class Cancelled(CriError):
    """The call was cancelled."""


_BY_CODE: dict[grpc.StatusCode, type[CriError]] = {
    grpc.StatusCode.UNAVAILABLE: RuntimeUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.CANCELLED: Cancelled,
}


def unavailable_message(endpoint: str) -> str:
    """What to tell a user whose runtime does not answer."""
    return (
        f"container runtime at {endpoint} is not reachable: check that containerd is running "
        f"and listening on that socket (nodelet starts its own unless --runtime-endpoint is given)"
    )


def from_rpc_error(
    error: grpc.aio.AioRpcError, *, operation: str, target: str, endpoint: str
) -> CriError:
    """Map a failed gRPC call onto the exception tree (the caller raises it `from` error)."""
    code = error.code()
    cls = _BY_CODE.get(code, CriError)
    # The runtime's own words first, as the kubelet shows them; nodelet's hint after them.
    words = f"rpc error: code = {code.name.title().replace('_', '')} desc = {error.details()}"
    detail = f"{words} ({unavailable_message(endpoint)})" if cls is RuntimeUnavailable else words
    what = f"{operation} {target}".rstrip()
    return cls(
        f"{what} failed: runtime at {endpoint} answered: {detail}",
        operation=operation,
        endpoint=endpoint,
        code=code.name,
        detail=detail,
        description=error.details() or "",
    )
