"""The node's server (aiohttp over TLS): the kubelet's port 10250.

Routes, with the kubelet's paths and parameters (pkg/kubelet/server/server.go):

    GET       /healthz, /pods, /metrics, /metrics/resource, /metrics/probes
    GET       /configz                                         the running configuration
    GET       /stats/summary[?only_cpu_and_memory=true]       the Summary API
    GET       /containerLogs/{ns}/{pod}/{container}            follow, tailLines, sinceSeconds,
                                                               sinceTime, timestamps, previous,
                                                               limitBytes
    GET|POST  /exec/{ns}/{pod}[/{uid}]/{container}             command, input, output, error, tty
    GET|POST  /attach/{ns}/{pod}[/{uid}]/{container}           input, output, error, tty
    GET|POST  /portForward/{ns}/{pod}[/{uid}]                  port (WebSocket clients)
    POST      /run/{ns}/{pod}[/{uid}]/{container}?cmd=...      ExecSync, the combined output

exec, attach and portForward ask the runtime (CRI Exec/Attach/PortForward) for a session URL on
its streaming server (containerd's, on loopback) and proxy the client's connection to it, as the
kubelet does by default: the request goes upstream with its upgrade headers, the runtime's
answer comes back, and after a `101 Switching Protocols` bytes flow both ways untouched — SPDY/3.1
(kubectl) and WebSocket (`v4.channel.k8s.io`, `portforward.k8s.io`) alike.

TLS is done by `adapters.tlsfront` on a thread and event loop of its own, which also caps the
connections (in all and per client address) before any handshake: the agent's loop only
serves connections whose handshake finished, handed over as plain sockets with the client's
address and verified certificate chain. Its context comes from `adapters.servingtls`, which
makes it again when the serving pair or the client CA file changes (`NodeServerConfig.reload`,
as the kubelet's ReloadKubeletServerCertificateFile and ReloadKubeletClientCAFile gates).

Every request is authenticated (the client certificate, verified by TLS against the client CA
at the handshake and again at every request against the client CA served then, as the
kubelet's x509 authenticator: a CA taken out of the file or a certificate expired since is
refused on a connection already open; then the bearer token; anonymous only when allowed,
else 401) and authorized with the kubelet's attributes (`model.core.nodeauth`), else 403.
The authenticators and the authorizer are Protocols: standalone uses the token file and
`AllowAuthenticated`; cluster mode plugs in TokenReview and SubjectAccessReview.

Exceptions: `NodeServerError` (cannot listen, certificate unreadable).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import socket
import ssl
import struct
import termios
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlsplit

from aiohttp import web

from nodelet import settings as settings_
from nodelet.adapters import http_server, servingtls, tlsfront
from nodelet.adapters.servingtls import TlsFiles as TlsFiles
from nodelet.helpers import tasks
from nodelet.model.core import health as hm
from nodelet.model.core import nodeauth, podjson, servingfiles
from nodelet.model.core import noderequests as nr
from nodelet.model.core import pods as podmodel
from nodelet.model.core import status as st

if TYPE_CHECKING:  # loaded with a client CA only (adapters.servingtls)
    from nodelet.adapters.clientcas import ClientCAs

log = logging.getLogger(__name__)

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Headers never passed to the runtime's streaming server: the caller's own credentials, and
# the framing of the client's body. aiohttp has already de-chunked the body; forwarded with
# the client's `Transfer-Encoding: chunked` (or a `Content-Length` of its own) the runtime
# would read the raw bytes as chunks, and a body crafted as a chunk stream would smuggle a
# second request to it. The body goes with a `Content-Length` of its own (`_upstream_head`).
_NOT_FORWARDED = frozenset({"authorization", "host", "impersonate-user", "impersonate-group",
                            "impersonate-uid", "transfer-encoding", "content-length", "te",
                            "trailer", "keep-alive", "expect", "proxy-authorization",
                            "proxy-connection"})
# An upstream answer's head (status line and headers) larger than this is refused.
_MAX_HEAD = 64 * 1024
_CHUNK = 64 * 1024


class NodeServerError(Exception):
    """The node server cannot start; the message names the address or file."""


class NodeBackend(Protocol):
    """What the node server serves; implemented by `services.serving.nodeserving`."""

    def pods(self) -> list[tuple[podmodel.Pod, st.PodStatus | None]]: ...

    def health(self) -> list[hm.HealthCheck]: ...

    def metrics_text(self) -> tuple[bytes, str]: ...

    async def summary(self, *, only_cpu_and_memory: bool) -> dict[str, Any]: ...

    async def resource_metrics(self) -> bytes: ...

    async def probe_metrics(self) -> bytes: ...

    async def stream_url(self, request: nr.StreamRequest) -> str:
        """The runtime's URL for the session; raises NodeRequestError (404: no such pod or
        running container)."""
        ...

    async def run(self, pod: nr.PodRef, container: str, command: Sequence[str]) -> bytes:
        """ExecSync: the command's stdout and stderr."""
        ...

    async def open_logs(self, pod: nr.PodRef, container: str,
                        options: nr.LogOptions) -> AsyncIterator[bytes]:
        """The log's bytes; raises NodeRequestError before the first chunk when the log does
        not exist. While following, an idle poll yields b"" (so the server notices a client
        that went away)."""
        ...


@dataclass(frozen=True)
class NodeServerConfig:
    address: str
    port: int
    node_name: str
    tls: TlsFiles
    authenticators: Sequence[nodeauth.Authenticator] = ()
    authorizer: nodeauth.Authorizer = field(default_factory=nodeauth.AllowAuthenticated)
    anonymous: bool = False
    stream_connect_timeout: float = 10.0
    # Seconds for a client's TLS handshake, then for each request's headers.
    header_timeout: float = 10.0
    # Connections held at once, in all and from one address (`tlsfront.Limits`).
    max_connections: int = 1024
    max_connections_per_source: int = 256
    # The body of GET /configz (`model.core.configz`): {"kubeletconfig": {...}}.
    configz: Mapping[str, Any] = field(default_factory=dict)
    # The TLS files read again when they change, checked every `reload_period` seconds.
    reload: servingfiles.Watch = field(default_factory=servingfiles.Watch)
    reload_period: float = settings_.NodeServerSettings.tls_files_check_period


class NodeServer:
    """`await start()`, then `await stop()` (idempotent)."""

    def __init__(self, backend: NodeBackend, config: NodeServerConfig) -> None:
        self._backend = backend
        self._config = config
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._guards = http_server.ConnectionGuards(config.header_timeout)
        self._front: tlsfront.TlsFront | None = None
        self._reloader: servingtls.Reloader | None = None
        # The client CA set served now: every request's client certificate is verified
        # against it (replaced by the reloader, on its thread: one reference, swapped whole).
        self._client_cas: ClientCAs | None = None
        self._tasks = tasks.TaskGroup()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Connections handed over by the front, being connected to aiohttp on this loop.
        self._adopting: set[asyncio.Task[None]] = set()

    @property
    def front(self) -> tlsfront.TlsFront | None:
        """The TLS front (its counters, the connections it holds); None when stopped."""
        return self._front

    @property
    def reloader(self) -> servingtls.Reloader | None:
        """What reloads the TLS files (its counters, the failure it keeps); None when no file
        is watched."""
        return self._reloader

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("NodeServer is not started")
        return self._port

    async def start(self) -> None:
        c = self._config
        try:
            served = servingtls.load(c.tls)
        except servingtls.TlsFilesError as exc:
            raise NodeServerError(str(exc)) from exc
        self._client_cas = served.client_cas
        # Slow clients (a handshake or headers trickling in) are cut off, as on the read-only
        # API; open streams and followed logs are cut at shutdown after 1 s.
        runner = web.AppRunner(self._app(self._guards), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        self._runner, self._loop = runner, asyncio.get_running_loop()
        front = tlsfront.TlsFront(context=served.context, deliver=self._deliver,
                                  limits=tlsfront.Limits(
            max_total=c.max_connections, max_per_source=c.max_connections_per_source,
            handshake_timeout=c.header_timeout))
        try:
            self._port = await asyncio.to_thread(front.start, c.address, c.port)
        except OSError as exc:
            self._runner = None
            await runner.cleanup()
            raise NodeServerError(f"cannot listen on {c.address}:{c.port}: {exc}") from exc
        self._front = front
        if c.reload.any:
            self._reloader = servingtls.Reloader(files=c.tls, served=served, watch=c.reload,
                                                 use=self._use, period=c.reload_period)
            self._tasks.spawn("node-server-tls-reload", self._reloader.run())
        log.info("node server listening on https://%s:%d (client CA: %s, anonymous: %s, "
                 "connections: %d, %d per address, TLS files reloaded: %s)", c.address,
                 self._port, c.tls.client_ca, c.anonymous, c.max_connections,
                 c.max_connections_per_source,
                 ", ".join(str(p) for p in self._reloader.paths()) if self._reloader else "none")

    async def stop(self) -> None:
        await self._tasks.close()
        front, self._front = self._front, None
        if front is not None:
            await asyncio.to_thread(front.stop)  # no connection is handed over after this
        if self._adopting:
            await asyncio.wait(self._adopting)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def _use(self, served: servingtls.Served) -> None:
        """What the reloader made (on its thread): requests from now on are verified against
        its client CA set, on every connection; handshakes from now on use its context. The
        CA set first, so a connection of the new context is never checked against the old
        one."""
        self._client_cas = served.client_cas
        if self._front is not None:
            self._front.use_context(served.context)

    def _deliver(self, sock: socket.socket, peer: tlsfront.Peer) -> None:
        """A connection from the front (on its thread): served on this loop. Raises
        RuntimeError when this loop is closed (the front then closes the connection)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._adopt, sock, peer)

    def _adopt(self, sock: socket.socket, peer: tlsfront.Peer) -> None:
        if self._runner is None:
            sock.close()  # stopping
            return
        # One short task per connection, to connect it to aiohttp (no synchronous way to make
        # a transport); tracked, and awaited by `stop`.
        task = asyncio.get_running_loop().create_task(self._connect(sock, peer),
                                                      name=f"node-server-accept:{peer.address}")
        self._adopting.add(task)
        task.add_done_callback(self._adopting.discard)

    async def _connect(self, sock: socket.socket, peer: tlsfront.Peer) -> None:
        runner = self._runner
        server = runner.server if runner is not None else None
        if server is None:
            sock.close()
            return
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: self._guards.protocol(server(), peer), sock=sock)
        except OSError as exc:
            log.debug("cannot serve a connection from %s: %s", peer.address, exc)
            sock.close()

    def _app(self, guards: http_server.ConnectionGuards) -> web.Application:
        app = web.Application(middlewares=[guards.middleware, self._errors, self._auth])
        r = _Routes(self._backend, self._config)
        add = app.router.add_route
        for path, handler in (("/healthz", r.healthz), ("/pods", r.pods), ("/pods/", r.pods),
                              ("/metrics", r.metrics), ("/metrics/resource", r.resource),
                              ("/metrics/probes", r.probes), ("/stats/summary", r.summary),
                              ("/stats/summary/", r.summary), ("/configz", r.configz),
                              ("/containerLogs/{ns}/{pod}/{container}", r.logs)):
            add("GET", path, handler)
        for kind in ("exec", "attach"):
            for path in (f"/{kind}/{{ns}}/{{pod}}/{{container}}",
                         f"/{kind}/{{ns}}/{{pod}}/{{uid}}/{{container}}"):
                add("GET", path, r.stream)
                add("POST", path, r.stream)
        for path in ("/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"):
            add("GET", path, r.stream)
            add("POST", path, r.stream)
        for path in ("/run/{ns}/{pod}/{container}", "/run/{ns}/{pod}/{uid}/{container}"):
            add("POST", path, r.run)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except nr.NodeRequestError as exc:
            return web.Response(status=exc.status, text=f"{exc}\n")

    @web.middleware
    async def _auth(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        try:
            refusal = await self._refusal(request)
        except nodeauth.Overloaded as exc:
            # Too many reviews in flight (a flood of unknown tokens): the client is asked to
            # come back rather than queued.
            return web.Response(status=429, text=f"Too many requests: {exc}\n",
                                headers={"Retry-After": str(exc.retry_after)})
        return refusal if refusal is not None else await handler(request)

    async def _refusal(self, request: web.Request) -> web.Response | None:
        """401, 403 or 500 for a request that may not go on; None when it may."""
        c = self._config
        peer = self._guards.peer_of(request)
        credentials = _credentials(request, peer if isinstance(peer, tlsfront.Peer) else None,
                                   self._client_cas)
        user = await nodeauth.authenticate(c.authenticators, credentials, anonymous=c.anonymous)
        if user is None:
            return web.Response(status=401, text="Unauthorized\n")
        attributes = nodeauth.request_attributes(user, request.method, request.path,
                                                 c.node_name)
        decision, asked = await nodeauth.authorize(c.authorizer, attributes)
        if decision.allowed:
            return None
        # The kubelet's messages, naming what was checked.
        if decision.error:
            return web.Response(status=500, text=(
                f"Authorization error (user={user.name}, verb={asked.verb}, "
                f"resource={asked.resource}, subresource={asked.subresource})\n"))
        subresources = " ".join(a.subresource for a in attributes)
        return web.Response(status=403, text=(
            f"Forbidden (user={user.name}, verb={asked.verb}, resource={asked.resource}, "
            f"subresource(s)=[{subresources}])\n"))


def _credentials(request: web.Request, peer: tlsfront.Peer | None,
                 client_cas: ClientCAs | None) -> nodeauth.Credentials:
    """The request's bearer token, and from the TLS front the client's address and the
    subject of the certificate its handshake verified, when its chain verifies now against
    `client_cas` (the client CA served now), as the kubelet's x509 authenticator verifies the
    peer's certificates at every request."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    subject: list[tuple[str, str]] = []
    certificate = peer.certificate if peer is not None else None
    presented = bool(certificate) or (peer is not None and bool(peer.chain))
    if peer is not None and certificate and _verifies_now(peer, client_cas):
        for rdn in certificate.get("subject", ()):
            subject.extend((str(k), str(v)) for k, v in rdn)
    return nodeauth.Credentials(
        token=token.strip() if scheme.lower() == "bearer" and token.strip() else None,
        certificate_subject=tuple(subject), certificate_presented=presented,
        source=peer.address if peer is not None else "")


def _verifies_now(peer: tlsfront.Peer, client_cas: ClientCAs | None) -> bool:
    """Whether the chain `peer`'s handshake verified still does, against `client_cas` now."""
    refusal = "no client CA is served" if client_cas is None else \
        "its handshake kept no certificate chain" if not peer.chain else \
        client_cas.refusal(peer.chain, datetime.now(UTC))
    if refusal is not None:
        log.debug("the client certificate of %s:%d is refused: %s", peer.address, peer.port,
                  refusal)
    return refusal is None


def _query(request: web.Request) -> nr.Query:
    return {key: request.query.getall(key) for key in request.query}


def _pod(request: web.Request) -> nr.PodRef:
    info = request.match_info
    return nr.PodRef(namespace=info["ns"], name=info["pod"], uid=info.get("uid", ""))


class _Routes:
    def __init__(self, backend: NodeBackend, config: NodeServerConfig) -> None:
        self._backend = backend
        self._config = config
        self._pod_list = podjson.PodListEncoder()

    async def healthz(self, request: web.Request) -> web.Response:
        checks = self._backend.health()
        return web.Response(status=200 if hm.healthy(checks) else 500,
                            text=hm.healthz_text(checks, verbose="verbose" in request.query))

    async def pods(self, request: web.Request) -> web.Response:
        return web.Response(body=self._pod_list.encode(self._backend.pods()),
                            content_type="application/json")

    async def configz(self, request: web.Request) -> web.Response:
        return _json(dict(self._config.configz))

    async def metrics(self, request: web.Request) -> web.Response:
        body, content_type = self._backend.metrics_text()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def resource(self, request: web.Request) -> web.Response:
        return _prometheus(await self._backend.resource_metrics())

    async def probes(self, request: web.Request) -> web.Response:
        return _prometheus(await self._backend.probe_metrics())

    async def summary(self, request: web.Request) -> web.Response:
        only = request.query.get("only_cpu_and_memory", "").lower() == "true"
        return _json(await self._backend.summary(only_cpu_and_memory=only))

    async def run(self, request: web.Request) -> web.Response:
        command = nr.run_command(_query(request))
        output = await self._backend.run(_pod(request), request.match_info["container"],
                                         command)
        return web.Response(body=output, content_type="text/plain")

    async def logs(self, request: web.Request) -> web.StreamResponse:
        options = nr.log_options(_query(request), datetime.now(UTC))
        chunks = await self._backend.open_logs(_pod(request), request.match_info["container"],
                                               options)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        try:
            await self._send_logs(request, response, chunks, options.limit_bytes)
        finally:
            await cast(Any, chunks).aclose()
        return response

    async def _send_logs(self, request: web.Request, response: web.StreamResponse,
                         chunks: AsyncIterator[bytes], limit: int | None) -> None:
        prepared, left = False, limit
        async for chunk in chunks:
            if not prepared:
                await response.prepare(request)
                prepared = True
            if request.transport is None or request.transport.is_closing():
                return  # the client went away while we followed
            if left is not None:
                chunk, left = chunk[:left], left - len(chunk[:left])
            if chunk:
                with contextlib.suppress(ConnectionResetError):
                    await response.write(chunk)
            if left == 0:
                break
        if not prepared:
            await response.prepare(request)
        elif request.transport is not None:
            await _taken_by_front(request.transport)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        kind = {"exec": nr.StreamKind.EXEC, "attach": nr.StreamKind.ATTACH,
                "portForward": nr.StreamKind.PORT_FORWARD}[request.path.split("/")[1]]
        stream = nr.stream_request(kind, _pod(request), request.match_info.get("container", ""),
                                   _query(request))
        url = await self._backend.stream_url(stream)
        return await _proxy(request, url, self._config.stream_connect_timeout)


# How long the end of a log response may wait for the TLS front to take its last bytes.
FRONT_TAKES_WITHIN = 1.0


async def _taken_by_front(transport: asyncio.BaseTransport) -> None:
    """Wait until the TLS front has read everything written on this connection (its
    socketpair end has nothing unread: SIOCOUTQ), so the response's end goes out in a TLS
    record of its own. Why: kube-apiserver streams a log to a WebSocket client with
    wsstream's messageCopy, which drops the bytes of a Read that also returns io.EOF, and Go's
    chunked reader returns the last data with EOF when the terminating chunk is already in the
    same record (the kubelet's Go TLS writes every flush as records of its own). The front
    reads the socketpair in whole buffers: written together, the last log line and the
    terminator would be one record, and `kubectl logs` over WebSocket — Kubernetes'
    conformance test of it — would see no log at all. Only connections handed over by the
    front (Unix sockets) wait; at most FRONT_TAKES_WITHIN."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family != socket.AF_UNIX:
        return
    loop = asyncio.get_running_loop()
    give_up = loop.time() + FRONT_TAKES_WITHIN
    while loop.time() < give_up and not transport.is_closing():
        if cast(asyncio.WriteTransport, transport).get_write_buffer_size() == 0 \
                and _unread(sock.fileno()) == 0:
            return
        await asyncio.sleep(0.001)


def _unread(fd: int) -> int:
    """Bytes written on a Unix socket that its peer has not read yet (SIOCOUTQ)."""
    try:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0" * 4))[0])
    except OSError:
        return 0


def _json(body: Any) -> web.Response:
    return web.Response(text=json.dumps(body), content_type="application/json")


def _prometheus(body: bytes) -> web.Response:
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})


# -- the upgrade-aware proxy -----------------------------------------------------------------------


# Bytes of the client's that may wait in the runtime connection's write buffer before the
# client's connection stops being read (then resumed once the buffer drained to a quarter).
HIGH_WATER = 256 * 1024


class UpstreamProtocol(asyncio.StreamReaderProtocol):
    """The runtime connection's protocol: its transport's flow control (pause_writing above
    the high-water mark, resume_writing once drained) also pauses and resumes reading from the
    client, so a client that sends faster than the runtime takes never grows the node's
    memory."""

    client: asyncio.BaseTransport | None = None
    paused = 0  # times the client was paused (tests)

    def pause_writing(self) -> None:
        super().pause_writing()
        if isinstance(self.client, asyncio.ReadTransport) and not self.client.is_closing():
            self.paused += 1
            self.client.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if isinstance(self.client, asyncio.ReadTransport) and not self.client.is_closing():
            self.client.resume_reading()


async def open_upstream(host: str, port: int, *, context: ssl.SSLContext | None = None,
                        limit: int = _MAX_HEAD) -> tuple[asyncio.StreamReader,
                                                         asyncio.StreamWriter]:
    """A connection for `splice`, as `asyncio.open_connection` (`context`: TLS; `limit`: the
    longest line `readuntil` accepts) but with the flow control `splice` needs. Raises
    OSError."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    protocol = UpstreamProtocol(reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, host, port, ssl=context)
    transport.set_write_buffer_limits(high=HIGH_WATER)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


class _ToUpstream:
    """Takes aiohttp's place as the connection's payload parser after the upgrade: every byte
    the client sends goes to the runtime; the client's EOF closes the upstream connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if not self._writer.is_closing():
            self._writer.write(data)  # above HIGH_WATER, UpstreamProtocol pauses the client
        return False, b""

    def feed_eof(self) -> None:
        self._writer.close()


def _upstream_head(request: web.Request, url: str, body: bytes) -> bytes:
    parts = urlsplit(url)
    # The client's query goes along when the runtime's URL has none (the kubelet's
    # upgrade-aware proxy does the same): a WebSocket port-forward names its ports there.
    query = parts.query or request.rel_url.raw_query_string
    target = parts.path + (f"?{query}" if query else "")
    lines = [f"{request.method} {target} HTTP/1.1", f"Host: {parts.netloc}"]
    lines += [f"{k}: {v}" for k, v in request.headers.items()
              if k.lower() not in _NOT_FORWARDED]
    if body or request.body_exists or "Content-Length" in request.headers:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, list[tuple[str, str]]]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise nr.NodeRequestError("the runtime's streaming server gave no valid answer") from exc
    status_line, *header_lines = raw.decode("latin-1").split("\r\n")
    fields = status_line.split(" ", 2)
    if len(fields) < 2 or not fields[1].isdigit():
        raise nr.NodeRequestError(f"the runtime's streaming server answered {status_line!r}")
    headers = [(k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in header_lines if h)]
    return int(fields[1]), headers


async def _proxy(request: web.Request, url: str, connect_s: float) -> web.StreamResponse:
    parts = urlsplit(url)
    try:
        reader, writer = await asyncio.wait_for(
            open_upstream(parts.hostname or "", parts.port or 80), connect_s)
    except (OSError, TimeoutError) as exc:
        raise nr.NodeRequestError(f"cannot reach the runtime's streaming server: {exc}") from exc
    try:
        # aiohttp bounds the body (client_max_size, 1 MiB: 413 beyond); upgrades have none.
        body = await request.read() if request.can_read_body else b""
        writer.write(_upstream_head(request, url, body) + body)
        status, headers = await asyncio.wait_for(_read_head(reader), connect_s)
        if status != 101:
            body = await asyncio.wait_for(reader.read(_MAX_HEAD), connect_s)
            return web.Response(status=status, body=body, headers=[
                (k, v) for k, v in headers if k.lower() == "content-type"])
        return await splice(request, reader, writer, headers)
    finally:
        writer.close()


async def splice(request: web.Request, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter,
                 headers: list[tuple[str, str]]) -> web.StreamResponse:
    """Answers `request` with the upstream's 101 and `headers`, then carries bytes both ways
    until either side closes. `reader`/`writer` come from `open_upstream`: the client is
    paused while the upstream's write buffer is full. (Public for
    tests/agent/test_node_server_proxy.py, which checks the back-pressure through it.)"""
    response = web.StreamResponse(status=101)
    for key, value in headers:
        if key.lower() not in ("date", "server", "content-length"):
            response.headers.add(key, value)
    response.force_close()  # the connection ends with the session
    protocol = writer.transport.get_protocol()
    if isinstance(protocol, UpstreamProtocol):
        protocol.client = request.transport
    # Before the 101 goes out, so no byte the client sends after it can reach aiohttp's HTTP
    # parser: aiohttp only treats `Upgrade: websocket` as an upgrade, and would parse the
    # frames that follow an `Upgrade: SPDY/3.1` as the next request.
    request.protocol.set_parser(cast(Any, _ToUpstream(writer)))
    await response.prepare(request)
    try:
        while chunk := await reader.read(_CHUNK):
            await response.write(chunk)  # waits while the client's buffer is full
    except (OSError, RuntimeError):
        pass  # either side went away (a reset, a TLS error): the session is over
    return response
