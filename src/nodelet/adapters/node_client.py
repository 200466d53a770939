"""A client of the node server (port 10250) for nodelet's CLI: JSON reads, exec and attach
over WebSocket (`v4.channel.k8s.io`), port-forward over WebSocket.

The WebSocket channel protocol (k8s.io/apiserver wsstream, served by containerd's streaming
server behind the node server's proxy): every binary message starts with its channel byte —
0 stdin, 1 stdout, 2 stderr, 3 error (a v1 Status in JSON when the command ends), 4 resize
(`{"Width": W, "Height": H}`). Port-forward uses channel 0 for data and 1 for errors of its one
port; each channel's first message from the server is the port number (2 bytes, little endian).

`Session` is what exec/attach talk to: `send_stdin`, `resize`, and `run` that copies the output
to the given writers and returns the exit code.

Exceptions: `NodeClientError` (cannot connect, TLS refused, HTTP error; the message names the
URL and the server's answer).
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
from urllib.parse import quote, urlencode

import aiohttp

STDIN, STDOUT, STDERR, ERROR, RESIZE = range(5)
CHANNEL_PROTOCOL = "v4.channel.k8s.io"
_CHUNK = 32 * 1024


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

    async def __aenter__(self) -> NodeClient:
        try:
            context = _ssl(self._credentials)
        except (OSError, ssl.SSLError) as exc:
            raise NodeClientError(f"cannot load TLS files: {exc}") from exc
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
