"""Network probe attempts: httpGet (aiohttp), tcpSocket (asyncio), grpc (grpc.aio health check).

Each function makes one attempt, bounded by `timeout_s` seconds, and never raises for what the
target does (refused, reset, slow, bad status): it returns a `probes.Attempt` whose output is
worded like the kubelet's probers (`pkg/probe/{http,tcp,grpc}`), so `Unhealthy` events read the
same. Nothing is kept open between attempts (the kubelet disables keep-alive for probes too).

httpGet follows redirects as the kubelet's prober does (pkg/probe/http): to the same host, at
most 10 of them (then a failure, Go's "stopped after 10 redirects"); a redirect to another host
is not followed and counts as a success whose output is "Probe terminated redirects, Response
body: ..." (the kubelet's probe.Warning, which it reports as a ProbeWarning event).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from urllib.parse import urljoin, urlsplit

import aiohttp
import grpc

import nodelet
from nodelet.model.core import probes

# Servers that special-case probes look for this prefix (the kubelet sends kube-probe/<ver>).
USER_AGENT = f"kube-probe/nodelet-{nodelet.__version__}"
# The kubelet reads at most 10 KiB of a probe response body.
_MAX_BODY = 10 * 1024
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
# Go's http.Client default, which the kubelet's probe redirect checker keeps.
_MAX_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def host_port(host: str, port: int) -> str:
    """`host:port`, with IPv6 addresses in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _failure(output: str) -> probes.Attempt:
    return probes.Attempt("failure", output)


# --- httpGet ---------------------------------------------------------------------------------


def _request_headers(headers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The kubelet's defaults, overridden by the probe's httpHeaders (names case-insensitive)."""
    out = {"User-Agent": USER_AGENT, "Accept": "*/*"}
    for name, value in headers:
        for existing in [k for k in out if k.lower() == name.lower()]:
            del out[existing]
        out[name] = value
    return out


async def http_get(
    url: str, *, headers: tuple[tuple[str, str], ...] = (), timeout_s: float
) -> probes.Attempt:
    """GET `url`, following same-host redirects (see the module docstring); success for a
    final status of 200-399."""
    connector = aiohttp.TCPConnector(ssl=False, force_close=True)  # probes skip TLS checks
    first, current = urlsplit(url).hostname, url
    try:
        async with aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            for hops in range(_MAX_REDIRECTS + 1):
                status, body, location = await _get_once(session, current, headers)
                target = urljoin(current, location) if location else ""
                if status not in _REDIRECTS or not target:
                    break
                if urlsplit(target).hostname != first:
                    return probes.Attempt("warning", "Probe terminated redirects, Response "
                                          f"body: {body.decode(errors='replace')}")
                if hops == _MAX_REDIRECTS:
                    return _failure(f'Get "{target}": stopped after 10 redirects')
                current = target
    except TimeoutError:
        return _failure(f'Get "{current}": context deadline exceeded '
                        "(Client.Timeout exceeded while awaiting headers)")
    except aiohttp.ClientConnectorError as exc:
        return _failure(f'Get "{current}": {_dial_error(exc)}')
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return _failure(f'Get "{current}": {exc}')
    if 200 <= status < 400:
        return probes.Attempt("success", body.decode(errors="replace"))
    return _failure(f"HTTP probe failed with statuscode: {status}")


def _dial_error(exc: aiohttp.ClientConnectorError) -> str:
    """A refused or unreachable connection in Go's words, as the kubelet's probe says it
    (`dial tcp 10.1.2.3:8080: connect: connection refused`), not aiohttp's."""
    errno = exc.os_error.errno
    if not errno:
        return str(exc)
    return f"dial tcp {host_port(exc.host, exc.port or 0)}: connect: {os.strerror(errno).lower()}"


async def _get_once(session: aiohttp.ClientSession, url: str,
                    headers: tuple[tuple[str, str], ...]) -> tuple[int, bytes, str]:
    """(status, the first 10 KiB of the body, Location) of one GET, not following."""
    async with session.get(url, headers=_request_headers(headers),
                           allow_redirects=False) as resp:
        return resp.status, await resp.content.read(_MAX_BODY), resp.headers.get("Location", "")


# --- tcpSocket -------------------------------------------------------------------------------


async def tcp_socket(host: str, port: int, *, timeout_s: float) -> probes.Attempt:
    """Open (and at once close) a TCP connection."""
    address = host_port(host, port)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except TimeoutError:
        return _failure(f"dial tcp {address}: i/o timeout")
    except OSError as exc:
        # asyncio words it "Connect call failed (addr)"; the errno's text is what Go prints.
        reason = (os.strerror(exc.errno) if exc.errno else str(exc)).lower()
        return _failure(f"dial tcp {address}: connect: {reason}")
    except ValueError as exc:  # a host name no resolver takes: too long a label, a NUL
        return _failure(f"dial tcp {address}: lookup {host}: {exc}")
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return probes.Attempt("success")


# --- grpc ------------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def encode_health_request(service: str) -> bytes:
    """grpc.health.v1.HealthCheckRequest: `string service = 1` (omitted when empty)."""
    raw = service.encode()
    return b"\x0a" + _varint(len(raw)) + raw if raw else b""


def decode_health_status(data: bytes) -> int:
    """grpc.health.v1.HealthCheckResponse's `ServingStatus status = 1`; other fields skipped."""
    status, pos = 0, 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            status = value if field == 1 else status
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return status


def _rpc_failure(exc: grpc.aio.AioRpcError, timeout_s: float) -> probes.Attempt:
    code = exc.code()
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return _failure("this server does not implement the grpc health protocol "
                        f"(grpc.health.v1.Health): {exc.details()}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return _failure(f"timeout: health rpc did not complete within {timeout_s:g}s")
    return _failure(f"error: health rpc probe failed: {code.name}: {exc.details()}")


async def grpc_health(host: str, port: int, service: str, *, timeout_s: float) -> probes.Attempt:
    """grpc.health.v1.Health/Check over plain text; success when the answer is SERVING."""
    target = host_port(host, port)
    deadline = time.monotonic() + timeout_s
    options = [("grpc.primary_user_agent", USER_AGENT)]
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout_s)
        except TimeoutError:
            # The kubelet's words, its dial's error included.
            return _failure(f'timeout: failed to connect service "{target}" within '
                            f"{timeout_s:g}s: context deadline exceeded")
        # No (de)serializers: the request and the answer are raw bytes.
        check = channel.unary_unary(_HEALTH_CHECK, None, None)
        try:
            answer = await check(
                encode_health_request(service), timeout=max(deadline - time.monotonic(), 0.001)
            )
            status = decode_health_status(answer)
        except grpc.aio.AioRpcError as exc:
            return _rpc_failure(exc, timeout_s)
        except ValueError as exc:
            return _failure(f"error: health rpc probe failed: bad response: {exc}")
    name = _SERVING_STATUS.get(status, str(status))
    if name == "SERVING":
        return probes.Attempt("success")
    return _failure(f'service unhealthy (responded with "{name}")')
