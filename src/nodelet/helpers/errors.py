"""The base of nodelet's errors that carry a message for people (an event, a status, a log)."""

from __future__ import annotations


class MessageError(ValueError):
    """An error whose `message` is shown as it is: it names the object and says what to fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def grpc_go_words(code: str, details: str) -> str:
    """A failed gRPC call as grpc-go renders it, which the kubelet's messages carry
    (`rpc error: code = DeadlineExceeded desc = ...`): `code` is the status code's name
    (`DEADLINE_EXCEEDED`); a deadline of the caller's own reads in Go's words."""
    if code == "DEADLINE_EXCEEDED" and details == "Deadline Exceeded":
        details = "context deadline exceeded"
    go_code = "".join(part.capitalize() for part in code.split("_")) if code != "OK" else "OK"
    return f"rpc error: code = {go_code} desc = {details}"
