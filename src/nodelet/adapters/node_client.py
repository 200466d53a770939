"""A client of the node server (port 10250) for nodelet's CLI: JSON reads, exec and attach
over SPDY/3.1 as kubectl's (`RemoteCommand`) or over WebSocket (`v4.channel.k8s.io`,
`Session`), port-forward over WebSocket.

Remote commands go over SPDY because only it can end the command's stdin: the runtime's
streaming server (behind the node server's byte proxy; containerd 1.6 and 2.4 alike) speaks
remote-command v1-v4, and v4 over WebSocket has no signal for the end of stdin (v5's CLOSE
is for the API server or the kubelet to translate into SPDY). Over SPDY each of stdin,
stdout, stderr, the error channel and resize is a stream of its own, and a FIN on stdin closes
the command's stdin. The error stream carries a v1 Status at the end (`command_exit`).

The WebSocket channel protocol (k8s.io/apiserver wsstream, served by containerd's streaming
server behind the node server's proxy): every binary message starts with its channel byte —
0 stdin, 1 stdout, 2 stderr, 3 error (a v1 Status in JSON when the command ends), 4 resize
(`{"Width": W, "Height": H}`). Port-forward uses channel 0 for data and 1 for errors of its one
port; each channel's first message from the server is the port number (2 bytes, little endian).

`RemoteCommand` is what `nodelet exec`/`attach` talk to: `send_stdin`, `close_stdin`,
`resize`, and `run` that waits for the end and returns the `Exit`. `Session` (WebSocket) has
`send_stdin`, `resize`, and `run` that copies the output to the given writers and returns the
exit code.

Exceptions: `NodeClientError` (cannot connect, TLS refused, HTTP error; the message names the
URL and the server's answer, or for a refused session the server's reason as kubectl shows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, quote, urlencode, urlsplit

import aiohttp

from nodelet.adapters import spdy

STDIN, STDOUT, STDERR, ERROR, RESIZE = range(5)
CHANNEL_PROTOCOL = "v4.channel.k8s.io"
# Asked for with `X-Stream-Protocol-Version` over SPDY: v4 ends with a v1 Status naming the
# exit code (v3 and older report a failure as bare text, without one).
REMOTE_COMMAND_PROTOCOL = "v4.channel.k8s.io"
# Seconds for a remote command's connection and TLS handshake, the server's answer to its
# upgrade, and each of its streams to be accepted (client-go waits 30 s for a stream).
CONNECT_TIMEOUT = 30.0
_CHUNK = 32 * 1024
# Seconds the end of a remote command's connection (TLS close_notify) may take.
CLOSE_TIMEOUT = 5.0
# The longest refusal (status line, headers, body) or final Status read from the server.
_MAX_ANSWER = 64 * 1024


UNAUTHORIZED_HINT = (
    " (no credential was accepted: run this as root on the node, which uses the agent's "
    "node-local token, or give --token-file, or --client-certificate and --client-key)")


class NodeClientError(Exception):
    """The node server could not be reached or refused the request."""


@dataclass(frozen=True)
class Credentials:
    token: str | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    # The server's CA (its self-signed certificate for a standalone node); None: system CAs.
    ca_file: Path | None = None
    insecure: bool = False


def _ssl(credentials: Credentials) -> ssl.SSLContext:
    context = ssl.create_default_context(
        cafile=str(credentials.ca_file) if credentials.ca_file else None)
    if credentials.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if credentials.client_cert is not None:
        context.load_cert_chain(credentials.client_cert, credentials.client_key)
    return context


def exit_code(status: dict[str, Any]) -> int:
    """The exit code a v1 Status from the error channel reports (0 for Success; 1 for a
    failure that names none)."""
    if status.get("status") == "Success":
        return 0
    for cause in status.get("details", {}).get("causes", []) or []:
        if cause.get("reason") == "ExitCode" and str(cause.get("message", "")).isdigit():
            return int(cause["message"])
    return 1


class NodeClient:
    """`async with NodeClient(server, credentials) as client: ...`"""

    def __init__(self, server: str, credentials: Credentials) -> None:
        self._server = server.rstrip("/")
        self._credentials = credentials
        self._session: aiohttp.ClientSession | None = None
        self._context: ssl.SSLContext | None = None

    async def __aenter__(self) -> NodeClient:
        try:
            context = _ssl(self._credentials)
        except (OSError, ssl.SSLError) as exc:
            raise NodeClientError(f"cannot load TLS files: {exc}") from exc
        self._context = context
        headers = {"Authorization": f"Bearer {self._credentials.token}"} \
            if self._credentials.token else {}
        self._session = aiohttp.ClientSession(
            headers=headers, connector=aiohttp.TCPConnector(ssl=context))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def _http(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use NodeClient in `async with`"
        return self._session

    def url(self, path: str, query: Sequence[tuple[str, str]] = ()) -> str:
        return self._server + path + (f"?{urlencode(list(query))}" if query else "")

    async def get_json(self, path: str, query: Sequence[tuple[str, str]] = ()) -> Any:
        url = self.url(path, query)
        try:
            async with self._http.get(url) as response:
                await _check(response, url)
                return await response.json(content_type=None)
        except aiohttp.ClientError as exc:
            raise NodeClientError(f"{url}: {exc}") from exc

    async def stream(self, path: str, query: Sequence[tuple[str, str]] = ()
                     ) -> AsyncIterator[bytes]:
        """The body as it arrives (followed logs)."""
        url = self.url(path, query)
        try:
            async with self._http.get(url, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                await _check(resp, url)
                async for chunk in resp.content.iter_any():
                    yield chunk
        except aiohttp.ClientError as exc:
            raise NodeClientError(f"{url}: {exc}") from exc

    @contextlib.asynccontextmanager
    async def channels(self, path: str, query: Sequence[tuple[str, str]] = ()
                       ) -> AsyncIterator[Session]:
        """A WebSocket channel session on exec, attach or portForward."""
        url = self.url(path, query)
        try:
            ws = await self._http.ws_connect(url, protocols=(CHANNEL_PROTOCOL,),
                                             autoping=True, max_msg_size=0)
        except aiohttp.WSServerHandshakeError as exc:
            raise NodeClientError(f"{url}: {exc.status} {exc.message}") from exc
        except aiohttp.ClientError as exc:
            raise NodeClientError(f"{url}: {exc}") from exc
        try:
            yield Session(ws)
        finally:
            await ws.close()

    @contextlib.asynccontextmanager
    async def remote_command(self, path: str, options: CommandOptions,
                             write: Callable[[int, bytes], Any]) -> AsyncIterator[RemoteCommand]:
        """An exec or attach session over SPDY/3.1, open as kubectl opens it: its streams made
        and accepted, the terminal's size sent. Output goes to `write(STDOUT|STDERR, data)`
        as it arrives. Raises NodeClientError when the server refuses it, with the server's
        reason (kubectl's `unable to upgrade connection: ...`)."""
        url = self.url(path, options.query())
        reader, writer = await self._upgrade(url)
        session = RemoteCommand(reader, writer, write)
        try:
            await session.open(options)
            yield session
        finally:
            await session.close()

    async def _upgrade(self, url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection upgraded to SPDY/3.1 with remote-command v4."""
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                parts.hostname, parts.port or (443 if tls else 80),
                ssl=self._context if tls else None, limit=_MAX_ANSWER), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise NodeClientError(f"{url}: cannot connect: {exc}") from exc
        try:
            writer.write(self._upgrade_head(parts))
            status, reason, headers, body = await asyncio.wait_for(_answer(reader),
                                                                   CONNECT_TIMEOUT)
            if status != 101:
                raise NodeClientError(_refusal(url, status, reason, body))
            chosen = headers.get("x-stream-protocol-version", "")
            if chosen != REMOTE_COMMAND_PROTOCOL:
                raise NodeClientError(f"{url}: the server speaks remote-command protocol "
                                      f"{chosen or 'v1'}, not {REMOTE_COMMAND_PROTOCOL}")
        except (OSError, TimeoutError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError) as exc:
            writer.close()
            raise NodeClientError(f"{url}: no valid answer to the upgrade: {exc!r}") from exc
        except NodeClientError:
            writer.close()
            raise
        return reader, writer

    def _upgrade_head(self, parts: SplitResult) -> bytes:
        # POST, as kubectl (the node server asks the verb `create` for any method).
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        lines = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc}", "Connection: Upgrade",
                 "Upgrade: SPDY/3.1", f"X-Stream-Protocol-Version: {REMOTE_COMMAND_PROTOCOL}",
                 "Content-Length: 0"]
        if self._credentials.token:
            lines.append(f"Authorization: Bearer {self._credentials.token}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _check(response: aiohttp.ClientResponse, url: str) -> None:
    if response.status >= 400:
        text = (await response.text()).strip()
        hint = UNAUTHORIZED_HINT if response.status == 401 else ""
        raise NodeClientError(f"{url}: {response.status} {response.reason}: {text}{hint}")


class Session:
    """One WebSocket channel session."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws

    async def send(self, channel: int, data: bytes) -> None:
        await self._ws.send_bytes(bytes([channel]) + data)

    async def send_stdin(self, data: bytes) -> None:
        await self.send(STDIN, data)

    async def resize(self, width: int, height: int) -> None:
        await self.send(RESIZE, json.dumps({"Width": width, "Height": height}).encode())

    async def run(self, write: Callable[[int, bytes], Any]) -> int:
        """Pass every output message to `write(channel, data)` until the server closes;
        the exit code from the error channel (0 when it reported none)."""
        code = 0
        async for message in self._ws:
            if message.type is not aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel == ERROR and data:
                try:
                    code = exit_code(json.loads(data))
                except ValueError:
                    write(STDERR, data)
                    code = 1
            elif data:
                write(channel, data)
        return code

    async def messages(self) -> AsyncIterator[tuple[int, bytes]]:
        async for message in self._ws:
            if message.type is aiohttp.WSMsgType.BINARY and message.data:
                yield message.data[0], message.data[1:]


def pod_path(kind: str, namespace: str, pod: str, container: str = "") -> str:
    parts = [kind, namespace, pod] + ([container] if container else [])
    return "/" + "/".join(quote(p, safe="") for p in parts)


async def forward_connection(client: NodeClient, path: str, port: int,
                             reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Carry one local TCP connection to `port` of the pod over its own WebSocket session."""
    try:
        async with client.channels(path, [("port", str(port))]) as session:
            pump = asyncio.create_task(_pump_local(reader, session), name=f"forward:{port}")
            try:
                await _pump_remote(session, writer)
            finally:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
    finally:
        writer.close()


async def _pump_local(reader: asyncio.StreamReader, session: Session) -> None:
    while data := await reader.read(_CHUNK):
        await session.send(0, data)


async def _pump_remote(session: Session, writer: asyncio.StreamWriter) -> None:
    seen: set[int] = set()
    async for channel, data in session.messages():
        if channel not in seen:  # the port number, first on each channel
            seen.add(channel)
            data = data[2:]
        if not data:
            continue
        if channel == 0:
            writer.write(data)
            await writer.drain()
        else:
            raise NodeClientError(f"port-forward: {data.decode(errors='replace')}")


# -- remote commands over SPDY/3.1 ----------------------------------------------------------------


@dataclass(frozen=True)
class CommandOptions:
    """An exec or attach session's parameters (the kubelet's `command`, `input`, `output`,
    `error`, `tty`): stdout always; stderr apart unless on a terminal, which merges it."""

    command: tuple[str, ...] = ()
    stdin: bool = False
    tty: bool = False
    # The terminal's (columns, rows), sent as the session opens.
    size: tuple[int, int] | None = None

    def query(self) -> list[tuple[str, str]]:
        query = [("command", c) for c in self.command] + [("output", "1")]
        query += [("input", "1")] if self.stdin else []
        return query + ([("tty", "1")] if self.tty else [("error", "1")])

    def streams(self) -> list[str]:
        """The streams to make, in order (the server starts the command once it has all of
        them). Resize comes right after error, so that the size is with the runtime before
        it starts the command; client-go makes it last."""
        return ["error", *(["resize"] if self.tty else []), *(["stdin"] if self.stdin else []),
                "stdout", *([] if self.tty else ["stderr"])]


@dataclass(frozen=True)
class Exit:
    """How a remote command ended: its exit code, and `message`, the server's reason when the
    command could not run or failed without an exit code (kubectl prints it as an error)."""

    code: int
    message: str = ""


def command_exit(error_stream: bytes) -> Exit:
    """The `Exit` reported by the error stream of remote-command v4 (client-go's
    errorDecoderV4): nothing or a Success Status is 0, `NonZeroExitCode` its code, any other
    failure 1 with its message."""
    text = error_stream.decode(errors="replace").strip()
    if not text:
        return Exit(0)
    try:
        status = json.loads(text)
    except ValueError:
        return Exit(1, f"error stream protocol error: {text}")
    if not isinstance(status, dict):
        return Exit(1, f"error stream protocol error: {text}")
    if status.get("status") == "Success" or status.get("reason") == "NonZeroExitCode":
        return Exit(exit_code(status))
    return Exit(exit_code(status), str(status.get("message") or text))


async def _answer(reader: asyncio.StreamReader) -> tuple[int, str, dict[str, str], bytes]:
    """The server's answer to an upgrade: status, reason, headers (lower-case names), and for
    anything but a 101 its body (at most _MAX_ANSWER bytes)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    fields = status_line.split(" ", 2)
    status = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    headers = {k.strip().lower(): v.strip()
               for k, _, v in (line.partition(":") for line in lines if line)}
    if status == 101:
        return status, "", headers, b""
    length = headers.get("content-length", "")
    body = await (reader.readexactly(int(length)) if length.isdigit()
                  and int(length) <= _MAX_ANSWER else reader.read(_MAX_ANSWER))
    return status, fields[2] if len(fields) > 2 else "", headers, body


def _refusal(url: str, status: int, reason: str, body: bytes) -> str:
    """A refused upgrade as kubectl shows it (client-go's SPDY round tripper): a v1 Status's
    message, else `unable to upgrade connection: <the body>`; a 401 says which credentials to
    give."""
    text = body.decode(errors="replace").strip() or f"{status} {reason}".strip()
    if status == 401:
        return f"{url}: 401 Unauthorized: {text}{UNAUTHORIZED_HINT}"
    with contextlib.suppress(ValueError):
        found = json.loads(text)
        if isinstance(found, dict) and found.get("kind") == "Status" and found.get("message"):
            return str(found["message"])
    return f"unable to upgrade connection: {text}"


class RemoteCommand:
    """One exec or attach session over SPDY/3.1 (`NodeClient.remote_command`). Frames from
    the server are read by a task of its own from the start (the streams' replies come before
    any output); `run` waits for the connection's end, which the server brings once the
    command ended and its Status was sent."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 write: Callable[[int, bytes], Any]) -> None:
        self._reader, self._writer, self._write = reader, writer, write
        self._framer = spdy.Framer()
        self._ids: dict[str, int] = {}  # stream type → stream ID
        self._types: dict[int, str] = {}
        self._replies: dict[int, asyncio.Future[None]] = {}
        self._error = bytearray()
        self._reading = asyncio.get_running_loop().create_task(self._read(),
                                                               name="remote-command-read")

    async def open(self, options: CommandOptions) -> None:
        for stream_type in options.streams():
            await self._open_stream(stream_type)
            if stream_type == "resize" and options.size is not None:
                await self.resize(*options.size)

    async def _open_stream(self, stream_type: str) -> None:
        """Make a stream and wait for the server to accept it: moby/spdystream drops data
        on a stream it has not replied to yet."""
        stream_id = 2 * len(self._ids) + 1  # a client's streams are odd, in order
        self._ids[stream_type], self._types[stream_id] = stream_id, stream_type
        reply = self._replies[stream_id] = asyncio.get_running_loop().create_future()
        await self._send(self._framer.syn_stream(stream_id, {"streamtype": stream_type}))
        try:
            await asyncio.wait_for(reply, CONNECT_TIMEOUT)
        except TimeoutError as exc:
            raise NodeClientError(f"the server did not accept the {stream_type} stream "
                                  f"within {CONNECT_TIMEOUT:g} s") from exc

    async def send_stdin(self, data: bytes) -> None:
        await self._send(spdy.data_frame(self._ids["stdin"], data))

    async def close_stdin(self) -> None:
        """The end of stdin: the runtime closes the command's stdin (kubectl does this when
        its own stdin ends)."""
        await self._send(spdy.data_frame(self._ids["stdin"], b"", fin=True))

    async def resize(self, width: int, height: int) -> None:
        """The terminal's size, as client-go's JSON encoder writes it (no-op without a
        terminal)."""
        if "resize" in self._ids:
            size = json.dumps({"Width": width, "Height": height}).encode() + b"\n"
            await self._send(spdy.data_frame(self._ids["resize"], size))

    async def run(self) -> Exit:
        """Wait for the session's end: how the command ended."""
        await self._reading
        return command_exit(bytes(self._error))

    async def close(self) -> None:
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        self._writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(self._writer.wait_closed(), CLOSE_TIMEOUT)

    async def _send(self, frame: bytes) -> None:
        # Once the connection is over nothing reaches the command: what is left is dropped.
        if self._writer.is_closing():
            return
        self._writer.write(frame)
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    async def _read(self) -> None:
        try:
            while (frame := await spdy.read_frame(self._reader)) is not None:
                self._on_frame(*frame)
        finally:
            for reply in self._replies.values():
                if not reply.done():
                    reply.set_exception(NodeClientError(
                        "the server ended the session before it began"))

    def _on_frame(self, kind: int | None, stream_id: int, flags: int, payload: bytes) -> None:
        if kind is None:
            self._on_data(stream_id, payload)
        elif kind in (spdy.SYN_STREAM, spdy.SYN_REPLY, spdy.HEADERS):
            # Every header block goes through the connection's one zlib stream, in order,
            # even those whose headers are not needed.
            try:
                self._framer.read_headers(payload[10 if kind == spdy.SYN_STREAM else 4:])
            except spdy.FramingError as exc:
                raise NodeClientError(str(exc)) from exc
            reply = self._replies.get(stream_id)
            if kind == spdy.SYN_REPLY and reply is not None and not reply.done():
                reply.set_result(None)
        elif kind == spdy.RST_STREAM:
            reply = self._replies.get(stream_id)
            if reply is not None and not reply.done():
                reply.set_exception(NodeClientError(
                    f"the server refused the {self._types.get(stream_id)} stream"))
        elif kind == spdy.PING:
            self._writer.write(spdy.control(spdy.PING, 0, payload))  # the same ID back

    def _on_data(self, stream_id: int, payload: bytes) -> None:
        stream_type = self._types.get(stream_id)
        if stream_type == "error":  # a Status: a few hundred bytes
            self._error += payload[:_MAX_ANSWER - len(self._error)]
        elif payload and stream_type in ("stdout", "stderr"):
            self._write(STDOUT if stream_type == "stdout" else STDERR, payload)
