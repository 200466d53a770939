"""The local, read-only HTTP API (aiohttp), kubelet-compatible where the kubelet has the route.

Routes (all GET):

    /pods        v1 PodList, as the kubelet's read-only port serves it; `?precise=true` writes
                 condition transition times and startTime with microseconds
    /events      v1 EventList; `?pod=NAME` and `?namespace=NS` filter by the involved pod;
                 `?precise=true` writes firstTimestamp/lastTimestamp with microseconds
    /healthz     200 `ok`, or 500 listing the checks (`?verbose` lists them always, then the
                 feature gates), as kube-apiserver does
    /manifests   JSON list: how each static pod manifest document was read
    /metrics     Prometheus text exposition
    /stats/summary[?only_cpu_and_memory=true], /metrics/resource, /metrics/probes
                 as the node server serves them (the kubelet's read-only port serves them
                 too, without credentials); only when the app gives the server a `NodeStats`
    /ui          the web UI (HTML, `adapters/web`): the pods with their condition badges;
    /ui/pods/NAMESPACE/NAME   one pod: start-up timeline, sandbox error, conditions, events;
    /ui/node     sandbox-ready latency histogram, sandbox failures by error class, feature gates;
    /ui/static/FILE           its stylesheet and script

The server only reads through an `AgentView`; the app wires one over the status manager, the
event recorder and the metrics. The UI renders the view's typed values (pods with their statuses,
events, `sandbox_metrics()`), not the JSON or the `/metrics` text.
The UI pages are sent with a Content-Security-Policy that allows only this origin's script and
stylesheet, so an unescaped value could not run code. Binding a non-loopback address requires a
bearer token; with a token every request, the UI's included, must carry
`Authorization: Bearer <token>` or gets 401. Without a token, a request is answered only when
its Host header is `localhost` or an IP address (`127.0.0.1`, `[::1]`, the `0.0.0.0` that the
node e2e suite reads the kubelet's read-only port at, the node's own address; each with or
without a port): a web page elsewhere that makes a browser on the node resolve its own name to
127.0.0.1 (DNS rebinding) sends its own name as the Host, and gets 403. An address cannot be
rebound: a page whose origin is an address is either this server's own or another host's.
The API can be turned off (`settings.ServerSettings.enabled`; the app then never starts it).

Exceptions:

    ServerError              the server cannot start (e.g. address in use)
        InsecureBindError    a non-loopback address without a token
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from nodelet.model.core import events as ev
from nodelet.model.core import health as hm
from nodelet.model.core import podjson
from nodelet.model.core import pods as podmodel
from nodelet.model.core import status as st
from nodelet.model.reports import histograms as hg

if TYPE_CHECKING:
    from nodelet.adapters.web import pages  # imported at the first UI request (_Routes.ui)

log = logging.getLogger(__name__)

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServerError(Exception):
    """The HTTP server cannot start; the message names the address."""


class InsecureBindError(ServerError):
    """A non-loopback address was asked for without an auth token."""


class AgentView(Protocol):
    """What the HTTP API reads. Every method is synchronous and quick (in-memory)."""

    def pods(self) -> list[tuple[podmodel.Pod, st.PodStatus | None]]:
        """Every pod nodelet runs, with its current status (None: not generated yet)."""
        ...

    def events(self, pod: str | None, namespace: str | None) -> list[ev.Event]:
        """Events, optionally only those about pods of that name / namespace."""
        ...

    def health(self) -> list[hm.HealthCheck]:
        """The health checks, evaluated now."""
        ...

    def manifests(self) -> list[hm.ManifestReport]:
        """How each static pod manifest document was last read."""
        ...

    def metrics_text(self) -> tuple[bytes, str]:
        """The Prometheus exposition and its content type."""
        ...

    def sandbox_metrics(self) -> hg.SandboxMetrics:
        """The sandbox histograms and failure counts, as values (the UI's node page)."""
        ...


class NodeStats(Protocol):
    """The node's stats as the node server serves them (`services.serving.nodeserving`):
    what the kubelet's read-only port serves besides /pods, /healthz and /metrics."""

    async def summary(self, *, only_cpu_and_memory: bool) -> dict[str, Any]: ...

    async def resource_metrics(self) -> bytes: ...

    async def probe_metrics(self) -> bytes: ...


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Timeouts:
    """Seconds a client may take to send a request's headers (from connecting, or from the
    end of its previous response), and may stay idle between requests on a kept-alive
    connection. A slow client that sends a header byte now and then is disconnected."""

    header: float = 10.0
    idle: float = 60.0


class _Guard(asyncio.Protocol):
    """Wraps aiohttp's protocol for one connection: closes it when a request's headers do not
    arrive within the header timeout (aiohttp itself has no such timeout)."""

    def __init__(self, inner: asyncio.Protocol, guards: _Guards, peer: object = None) -> None:
        self._inner = inner
        self._guards = guards
        # Who the connection is from when the transport cannot say (the node server's
        # connections arrive through a socketpair from its TLS front).
        self.peer = peer
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._guards.live[id(transport)] = self
        self.arm()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self._guards.live.pop(id(self._transport), None)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def arm(self) -> None:
        self.disarm()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._guards.header_timeout, self._expire)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        # A closing TLS transport (its shutdown still running) must not be asked again.
        if self._transport is not None and not self._transport.is_closing():
            log.info("closing a connection from %s: no complete request within %.0f s",
                     self.peer or self._transport.get_extra_info("peername"),
                     self._guards.header_timeout)
            self._transport.close()


class _Guards:
    """The live connections' guards; the middleware disarms a guard while its request runs."""

    def __init__(self, header_timeout: float) -> None:
        self.header_timeout = header_timeout
        self.live: dict[int, _Guard] = {}

    def protocol(self, inner: asyncio.Protocol, peer: object = None) -> asyncio.Protocol:
        """`inner` (aiohttp's protocol for one connection) under a guard; `peer`: what
        `peer_of` tells about the connection's requests."""
        return _Guard(inner, self, peer)

    def peer_of(self, request: web.Request) -> object:
        guard = self.live.get(id(request.transport))
        return guard.peer if guard is not None else None

    @web.middleware
    async def middleware(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        guard = self.live.get(id(request.transport))
        if guard is not None:
            guard.disarm()
        try:
            return await handler(request)
        finally:
            if guard is not None:
                guard.arm()  # the next request's headers are timed from here


class _GuardedSite(web.TCPSite):
    """A TCP site whose connections are wrapped in a `_Guard`."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, guards: _Guards) -> None:
        super().__init__(runner, host, port)
        self._guards = guards

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        guards = self._guards
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Guard(server(), guards), self._host, self._port,
            reuse_address=self._reuse_address, reuse_port=self._reuse_port)


# For the node server (adapters.node_server): the same guard over the connections its TLS
# front hands over (`protocol`, `peer_of`).
ConnectionGuards = _Guards


class HttpServer:
    """The API server over `view`. `await start(...)`, then `await stop()` (idempotent)."""

    def __init__(self, view: AgentView, timeouts: Timeouts | None = None, *,
                 feature_gates: Sequence[tuple[str, bool]] = (),
                 stats: NodeStats | None = None) -> None:
        """`feature_gates`: the agent's gates by name, shown by `/healthz?verbose` and the
        UI's node page; `stats`: the node's stats (None: no /stats/summary, /metrics/resource
        nor /metrics/probes)."""
        self._view = view
        self._stats = stats
        self._timeouts = timeouts or Timeouts()
        self._gates = tuple(feature_gates)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port (useful after binding port 0). Raises RuntimeError before `start`."""
        if self._port is None:
            raise RuntimeError("HttpServer is not started")
        return self._port

    async def start(self, host: str, port: int, token: str | None) -> None:
        """Listen on `host:port` (port 0: any free port, see `port`).

        Raises InsecureBindError for a non-loopback `host` without `token`, ServerError when
        the address cannot be bound.
        """
        if token is None and not is_loopback(host):
            raise InsecureBindError(
                f"binding {host} requires --auth-token-file (the API shows every pod and event); "
                f"bind 127.0.0.1 or pass a token file"
            )
        guards = _Guards(self._timeouts.header)
        runner = web.AppRunner(_make_app(self._view, token, guards, self._gates, self._stats),
                               access_log=None,
                               keepalive_timeout=self._timeouts.idle)
        await runner.setup()
        try:
            site = _GuardedSite(runner, host, port, guards)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ServerError(f"cannot listen on {host}:{port}: {exc}") from exc
        self._runner = runner
        self._port = _bound_port(runner)
        log.info("HTTP API listening on %s:%d (auth: %s)", host, self._port, token is not None)

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


class HealthzServer:
    """The kubelet's healthz server (healthzBindAddress:healthzPort, 127.0.0.1:10248 by
    default): `/healthz` alone, answering `ok` while the agent runs, without credentials and
    without checks, as the kubelet's (its checks are on the read-only API's `/healthz` and
    the node server's). `run` keeps it listening, trying again every `retry_every` s while the
    address cannot be bound, as the kubelet does (it never stops the agent)."""

    def __init__(self, *, retry_every: float = 5.0) -> None:
        self._retry_every = retry_every
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The bound port, or None while not listening."""
        return self._port

    async def run(self, host: str, port: int) -> None:
        """Listen on `host:port` until cancelled (port 0: any free port, see `port`)."""
        runner = await self._bind(host, port)
        try:
            await asyncio.Event().wait()
        finally:
            self._port = None
            await runner.cleanup()

    async def _bind(self, host: str, port: int) -> web.AppRunner:
        failing = False
        while True:
            app = web.Application()
            app.router.add_get("/healthz", _ok)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            try:
                await web.TCPSite(runner, host, port).start()
            except OSError as exc:
                await runner.cleanup()  # a fresh runner for each attempt: nothing piles up
                if not failing:
                    log.warning("healthz server: cannot listen on %s:%d (%s); trying again "
                                "every %.0f s", host, port, exc, self._retry_every)
                failing = True
                await asyncio.sleep(self._retry_every)
                continue
            self._port = _bound_port(runner)
            log.info("healthz server listening on %s:%d", host, self._port)
            return runner


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _bound_port(runner: web.AppRunner) -> int:
    address = runner.addresses[0]
    return int(address[1])


def _make_app(view: AgentView, token: str | None, guards: _Guards,
              gates: Sequence[tuple[str, bool]] = (),
              stats: NodeStats | None = None) -> web.Application:
    middlewares = [guards.middleware]
    middlewares += [_auth_middleware(token)] if token is not None else [_local_host]
    app = web.Application(middlewares=middlewares)
    routes = _Routes(view, gates=gates)
    app.router.add_get("/pods", routes.pods)
    app.router.add_get("/events", routes.events)
    app.router.add_get("/healthz", routes.healthz)
    app.router.add_get("/manifests", routes.manifests)
    app.router.add_get("/metrics", routes.metrics)
    app.router.add_get("/ui", routes.ui_pods)
    app.router.add_get("/ui/", routes.ui_pods)
    app.router.add_get("/ui/node", routes.ui_node)
    app.router.add_get("/ui/pods/{namespace}/{name}", routes.ui_pod)
    app.router.add_get("/ui/static/{file}", routes.ui_static)
    if stats is not None:
        served = _Stats(stats)
        for path in ("/stats/summary", "/stats/summary/"):
            app.router.add_get(path, served.summary)
        app.router.add_get("/metrics/resource", served.resource)
        app.router.add_get("/metrics/probes", served.probes)
    app.router.add_get("/metrics/cadvisor", _no_cadvisor)
    return app


async def _no_cadvisor(request: web.Request) -> web.Response:
    """The kubelet's cAdvisor metrics are not served: 404, with the reason as a comment of
    the metrics text format (a scraper that reads the body anyway finds no sample in it)."""
    return web.Response(status=404, text=(
        "# /metrics/cadvisor: nodelet does not serve cAdvisor's container metrics; "
        "container usage is in /metrics/resource and /stats/summary\n"))


def loopback_host(header: str) -> bool:
    """Whether a Host header names this machine by a loopback name: `localhost` or a loopback
    address, bracketed for IPv6, each with an optional port."""
    host = header.strip().lower()
    if host.startswith("["):
        address, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return False
        return is_loopback(address) and ":" in address
    name, colon, port = host.partition(":")
    if colon and not port.isdigit():
        return False
    return name == "localhost" or (is_loopback(name) and ":" not in name)


def address_host(header: str) -> bool:
    """Whether a Host header names an IP address (bracketed for IPv6), with an optional
    port: no DNS name, so no page could have had it rebound."""
    host = header.strip()
    if host.startswith("["):
        address, bracket, rest = host[1:].partition("]")
        port_ok = not rest or (rest[:1] == ":" and rest[1:].isdigit())
        return bool(bracket) and port_ok and ":" in address and _is_address(address)
    name, colon, port = host.partition(":")
    return (not colon or port.isdigit()) and _is_address(name) and ":" not in name


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


@web.middleware
async def _local_host(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Without a token: only requests that name this machine `localhost` or by an address
    (a request without a Host header, HTTP/1.0, comes from no browser and is let through)."""
    host = request.headers.get("Host")
    if host is not None and not (loopback_host(host) or address_host(host)):
        return web.Response(status=403, text=(
            f"Forbidden: the Host header {host[:100]!r} is neither localhost nor an IP "
            "address (a page's own name resolved to this machine: DNS rebinding); this API "
            "answers other names only when nodelet runs with --auth-token-file\n"))
    return await handler(request)


def _auth_middleware(token: str) -> Any:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def authenticate(request: web.Request, handler: _Handler) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return web.Response(
                status=401, text="Unauthorized\n", headers={"WWW-Authenticate": "Bearer"}
            )
        return await handler(request)

    return authenticate


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(body, indent=None), content_type="application/json"
    )


# Only this origin's stylesheet and script; inline SVG needs nothing more.
_CSP = ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/html", charset="utf-8",
                        headers={"Content-Security-Policy": _CSP,
                                 "X-Content-Type-Options": "nosniff",
                                 "Cache-Control": "no-store"})


def _flag(request: web.Request, name: str) -> bool:
    """`?name`, `?name=true`, `?name=1` are on; absent or `false`/`0` are off."""
    if name not in request.query:
        return False
    return request.query[name].lower() not in ("false", "0", "no")


class _Stats:
    """The node's stats, as the node server answers them."""

    def __init__(self, stats: NodeStats) -> None:
        self._stats = stats

    async def summary(self, request: web.Request) -> web.Response:
        only = request.query.get("only_cpu_and_memory", "").lower() == "true"
        return _json(await self._stats.summary(only_cpu_and_memory=only))

    async def resource(self, request: web.Request) -> web.Response:
        return _prometheus(await self._stats.resource_metrics())

    async def probes(self, request: web.Request) -> web.Response:
        return _prometheus(await self._stats.probe_metrics())


def _prometheus(body: bytes) -> web.Response:
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})


class _Routes:
    def __init__(self, view: AgentView, timeouts: Timeouts | None = None, *,
                 gates: Sequence[tuple[str, bool]] = ()) -> None:
        self._view = view
        self._timeouts = timeouts or Timeouts()
        self._gates = tuple(gates)
        self._ui: pages.Ui | None = None
        self._pod_list = podjson.PodListEncoder()

    async def pods(self, request: web.Request) -> web.Response:
        body = self._pod_list.encode(self._view.pods(), precise=_flag(request, "precise"))
        return web.Response(body=body, content_type="application/json")

    async def events(self, request: web.Request) -> web.Response:
        pod = request.query.get("pod") or None
        namespace = request.query.get("namespace") or None
        events = self._view.events(pod, namespace)
        return _json(ev.event_list_to_api(events, precise=_flag(request, "precise")))

    async def healthz(self, request: web.Request) -> web.Response:
        checks = self._view.health()
        text = hm.healthz_text(checks, verbose=_flag(request, "verbose"), gates=self._gates)
        return web.Response(status=200 if hm.healthy(checks) else 500, text=text)

    async def manifests(self, request: web.Request) -> web.Response:
        return _json([hm.manifest_report_to_api(r) for r in self._view.manifests()])

    async def metrics(self, request: web.Request) -> web.Response:
        body, content_type = self._view.metrics_text()
        return web.Response(body=body, headers={"Content-Type": content_type})

    # -- web UI ------------------------------------------------------------------------------

    @property
    def ui(self) -> pages.Ui:
        """The web UI's renderer, made at the first page asked for: most agents never serve
        one, and its modules, template and static files would stay in their memory (issue
        26)."""
        if self._ui is None:
            from nodelet.adapters.web import pages  # at the first UI request: see above

            self._ui = pages.Ui()
        return self._ui

    async def ui_pods(self, request: web.Request) -> web.Response:
        return _html(self.ui.pods_page(self._view.pods(), datetime.now(UTC)))

    async def ui_pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        now = datetime.now(UTC)
        found = [(p, s) for p, s in self._view.pods() if (p.namespace, p.name) == (namespace, name)]
        if not found:
            return _html(self.ui.not_found_page(namespace, name, now), status=404)
        pod, status = found[0]
        return _html(self.ui.pod_page(pod, status, self._view.events(name, namespace), now))

    async def ui_node(self, request: web.Request) -> web.Response:
        page = self.ui.node_page(self._view.sandbox_metrics(), self._view.pods(),
                                 datetime.now(UTC), gates=self._gates)
        return _html(page)

    async def ui_static(self, request: web.Request) -> web.Response:
        found = self.ui.static(request.match_info["file"])
        if found is None:
            raise web.HTTPNotFound()
        body, content_type = found
        return web.Response(body=body, content_type=content_type, charset="utf-8",
                            headers={"Cache-Control": "max-age=300"})
