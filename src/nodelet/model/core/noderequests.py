"""Requests to the node server, read from paths and query parameters (pure).

The kubelet's parameter names: exec/attach take `command` (repeated), `input`, `output`,
`error`, `tty` ("1" or "true"); port-forward takes `port` (repeated, optional for SPDY where
the client names ports per stream); `/run` takes `cmd` (split on spaces, as the kubelet does);
`/containerLogs` takes `follow`, `tailLines`, `sinceSeconds`, `sinceTime`, `timestamps`,
`previous`, `limitBytes` (corev1.PodLogOptions).

Exceptions (each with the HTTP status the server answers):

    NodeRequestError      400 — a parameter is malformed or missing
    └── NotFoundError     404 — no such pod, container or running container
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from nodelet.model.core import crilogs


class NodeRequestError(ValueError):
    """The request cannot be served; `status` is the HTTP status to answer with."""

    status = 400


class NotFoundError(NodeRequestError):
    status = 404


class StreamKind(enum.Enum):
    EXEC = "exec"
    ATTACH = "attach"
    PORT_FORWARD = "portforward"


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    # Set when the path names it (`/exec/NS/POD/UID/CONTAINER`): the pod must have this UID.
    uid: str = ""


@dataclass(frozen=True)
class StreamRequest:
    kind: StreamKind
    pod: PodRef
    container: str = ""
    command: tuple[str, ...] = ()
    stdin: bool = False
    stdout: bool = False
    stderr: bool = False
    tty: bool = False
    ports: tuple[int, ...] = ()


Query = Mapping[str, Sequence[str]]


def _flag(query: Query, name: str) -> bool:
    values = query.get(name, ())
    return bool(values) and values[-1].lower() in ("1", "true")


def stream_request(kind: StreamKind, pod: PodRef, container: str, query: Query) -> StreamRequest:
    """An exec, attach or port-forward request; raises NodeRequestError when it asks for
    nothing (the kubelet: "you must specify at least 1 of stdin, stdout, stderr")."""
    if kind is StreamKind.PORT_FORWARD:
        return StreamRequest(kind, pod, ports=_ports(query.get("port", ())))
    request = StreamRequest(
        kind, pod, container, command=tuple(query.get("command", ())),
        stdin=_flag(query, "input"), stdout=_flag(query, "output"),
        stderr=_flag(query, "error"), tty=_flag(query, "tty"))
    if kind is StreamKind.EXEC and not request.command:
        raise NodeRequestError("exec needs at least one command parameter")
    if not (request.stdin or request.stdout or request.stderr):
        raise NodeRequestError("you must specify at least 1 of stdin, stdout, stderr")
    return request


def _ports(values: Sequence[str]) -> tuple[int, ...]:
    ports = []
    for value in values:
        for item in value.split(","):
            if not item.strip().isdigit() or not 0 < int(item) < 65536:
                raise NodeRequestError(f"invalid port {item!r}: must be 1-65535")
            ports.append(int(item))
    return tuple(ports)


def run_command(query: Query) -> tuple[str, ...]:
    """`/run`'s command: the `cmd` parameter split on spaces, as the kubelet splits it."""
    text = (query.get("cmd") or [""])[-1]
    command = tuple(part for part in text.split(" ") if part)
    if not command:
        raise NodeRequestError("missing cmd parameter")
    return command


# -- container logs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogOptions:
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    # Only lines logged at or after this time (from sinceSeconds or sinceTime).
    since: datetime | None = None


# PodLogOptions' integers are int64: a larger one is refused as kube-apiserver refuses it.
INT64_MAX = 2**63 - 1


def _int(query: Query, name: str, minimum: int) -> int | None:
    values = query.get(name)
    if not values:
        return None
    try:
        value = int(values[-1])
    except ValueError as exc:
        raise NodeRequestError(f"{name}: {values[-1]!r} is not an integer") from exc
    if value < minimum:
        raise NodeRequestError(f"{name}: must be at least {minimum}")
    if value > INT64_MAX:
        raise NodeRequestError(f"{name}: {value} is out of range (at most {INT64_MAX})")
    return value


def _since_seconds(now: datetime, seconds: int) -> datetime:
    try:
        return now - timedelta(seconds=seconds)
    except OverflowError as exc:  # before year 1, or beyond timedelta's 999999999 days
        raise NodeRequestError(f"sinceSeconds: {seconds} reaches back before the first "
                               "representable time") from exc


def log_options(query: Query, now: datetime) -> LogOptions:
    """PodLogOptions from the query; sinceSeconds and sinceTime exclude each other."""
    since_seconds = _int(query, "sinceSeconds", 1)
    since_values = query.get("sinceTime")
    since_time = since_values[-1] if since_values else None
    if since_seconds is not None and since_time is not None:
        raise NodeRequestError("at most one of sinceTime or sinceSeconds may be specified")
    since = None
    if since_seconds is not None:
        since = _since_seconds(now, since_seconds)
    elif since_time is not None:
        since = parse_time(since_time)
        if since is None:
            raise NodeRequestError(f"sinceTime: {since_time!r} is not an RFC 3339 time")
    return LogOptions(follow=_flag(query, "follow"), previous=_flag(query, "previous"),
                      timestamps=_flag(query, "timestamps"),
                      tail_lines=_int(query, "tailLines", 0),
                      limit_bytes=_int(query, "limitBytes", 1), since=since)


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time with up to nanoseconds (CRI log times), as an aware datetime."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    main, dot, rest = value.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        value = f"{main}.{rest[:min(digits, 6)]}{rest[digits:]}" if digits else main + rest
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def line_wanted(line: crilogs.LogLine, since: datetime | None) -> bool:
    """Whether a log line passes `since` (lines without a time always do)."""
    if since is None or line.malformed:
        return True
    logged = parse_time(line.timestamp)
    return logged is None or logged >= since
