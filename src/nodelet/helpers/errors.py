"""The base of nodelet's errors that carry a message for people (an event, a status, a log)."""

from __future__ import annotations


class MessageError(ValueError):
    """An error whose `message` is shown as it is: it names the object and says what to fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
