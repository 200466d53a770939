"""A fault-injecting HTTPS proxy in front of the real kube-apiserver, for one node.

    async with FaultProxy(plane, root, credentials=lambda: store_pair) as proxy:
        proxy.kubeconfig(path, ...)                      # the node talks to the proxy
        refused = proxy.inject(method="PATCH", path="/pods/x/status$", status=500, times=3)
        proxy.drop_watches()                             # every open watch ends now
        proxy.inject(verb="watch", path="/pods$", gone=True, times=1)  # 410 in the stream

The proxy ends TLS with a serving certificate of the cluster CA (so the node's kubeconfig needs
no other CA) and sends each request on to kube-apiserver as the node: with the `Authorization`
header it got (a bootstrap token), and with the node's current client certificate
(`credentials()`: the pair in the node's certificate store, or None before it has one). So the
real server authenticates, authorizes (Node authorizer, NodeRestriction) and answers every
request the node makes; the proxy only adds what the real server does not do on demand:
error answers (`status`, with `retry_after` for 429 and the server's words in `message`),
delays (`delay`), an in-stream 410 Gone for a watch (`gone`), and dropped watches. `requests`
logs (verb, path, status, and the body sent) of what passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import aiohttp
from aiohttp import web

from support.controlplane import Authority, ControlPlane, Pair, kubeconfig_text

# Headers the proxy passes on (both ways); hop-by-hop ones and lengths are its own.
_PASS = ("authorization", "content-type", "accept", "user-agent")
_BACK = ("content-type", "retry-after", "audit-id", "warning")


@dataclass
class Fault:
    method: str | None
    verb: str | None  # "watch" or "list" (GET with or without watch=true), or None
    path: re.Pattern[str]
    status: int = 0
    retry_after: float | None = None
    delay: float = 0.0
    gone: bool = False
    times: int = 1
    hits: int = 0
    message: str = ""

    def matches(self, request: web.Request) -> bool:
        if self.hits >= self.times:
            return False
        if self.method and request.method != self.method:
            return False
        watching = request.query.get("watch") in ("1", "true")
        if (self.verb == "watch" and not watching) or (self.verb == "list" and watching):
            return False
        return bool(self.path.search(request.path))


@dataclass
class Logged:
    method: str
    path: str
    query: str
    status: int
    watch: bool
    body: bytes = b""


@dataclass
class FaultProxy:
    plane: ControlPlane
    root: Path
    credentials: Callable[[], Pair | None] = lambda: None
    faults: list[Fault] = field(default_factory=list)
    requests: list[Logged] = field(default_factory=list)
    url: str = ""
    # The handlers of the watches in flight, with their path and field selector.
    _watches: dict[asyncio.Task[object], tuple[str, str]] = field(default_factory=dict)
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FaultProxy:
        serving = Authority.load(self.plane.ca, self.root).issue(
            "fault-proxy", "fault-proxy", server=True, hosts=("127.0.0.1",))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(serving.cert, serving.key)
        context.load_verify_locations(self.plane.ca.cert)
        context.verify_mode = ssl.CERT_OPTIONAL  # the node's certificate, when it has one
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A client that goes (a watch nodelet closes) cancels its handler at once, so
        # `open_watches` sees what the node has open.
        self._runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"https://127.0.0.1:{port}"
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            connector=aiohttp.TCPConnector(limit=0))
        return self

    async def __aexit__(self, *_: object | TracebackType) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # -- use -------------------------------------------------------------------------------

    def bootstrap_kubeconfig(self, path: Path) -> Path:
        """The plane's bootstrap kubeconfig, pointed at the proxy."""
        path.write_text(kubeconfig_text(self.url, self.plane.ca.cert,
                                        user="tls-bootstrap-token-user",
                                        token=self.plane.token))
        path.chmod(0o600)
        return path

    def inject(self, *, method: str | None = None, verb: str | None = None, path: str,
               status: int = 0, times: int = 1, retry_after: float | None = None,
               delay: float = 0.0, gone: bool = False, message: str = "") -> Fault:
        fault = Fault(method, verb, re.compile(path), status, retry_after, delay, gone, times,
                      message=message)
        self.faults.append(fault)
        return fault

    def drop_watches(self) -> None:
        """End every watch in flight, also one still waiting for the server's first answer
        (the node sees its stream close)."""
        for task in list(self._watches):
            task.cancel()
        self._watches.clear()

    def open_watches(self, path: str) -> list[str]:
        """The field selectors of the watches in flight whose path matches `path`, sorted."""
        return sorted(selector for watched, selector in self._watches.values()
                      if re.search(path, watched))

    def count(self, *, method: str | None = None, path: str = "", status: int | None = None,
              watch: bool | None = None) -> int:
        return sum(1 for r in self.requests if (method is None or r.method == method)
                   and re.search(path, r.path) and (status is None or r.status == status)
                   and (watch is None or r.watch == watch))

    # -- proxying ------------------------------------------------------------------------------

    def _upstream_ssl(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.plane.ca.cert))
        pair = self.credentials()
        if pair is not None and pair.cert.exists():
            # A pair a test broke on purpose is not the node's credential: not sent (the
            # node then bootstraps again with its token).
            with contextlib.suppress(ssl.SSLError):
                context.load_cert_chain(pair.cert, pair.key)
        return context

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("1", "true")
        task = asyncio.current_task()
        if watch and task is not None:
            self._watches[task] = (request.path, request.query.get("fieldSelector", ""))
        try:
            return await self._pass(request, watch)
        finally:
            if task is not None:
                self._watches.pop(task, None)

    async def _pass(self, request: web.Request, watch: bool) -> web.StreamResponse:
        try:
            body = await request.read()
        except ConnectionError:  # the client gave up (a delay beyond its timeout)
            return self._log(request, watch, web.Response(status=499))
        fault = next((f for f in self.faults if f.matches(request)), None)
        if fault is not None:
            fault.hits += 1
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.status:
                return self._log(request, watch, self._refusal(fault), body)
            if fault.gone:
                return self._log(request, watch, self._gone(), body)
        headers = {k: v for k, v in request.headers.items() if k.lower() in _PASS}
        assert self._session is not None
        try:
            upstream = await self._session.request(
                request.method, self.plane.server + request.path_qs, data=body or None,
                headers=headers, ssl=self._upstream_ssl())
        except aiohttp.ClientError as exc:
            return self._log(request, watch, web.Response(status=502, text=str(exc)), body)
        response = web.StreamResponse(status=upstream.status, headers={
            k: v for k, v in upstream.headers.items() if k.lower() in _BACK})
        try:
            # The client may be gone (it gave up on a delayed answer): nothing to send then.
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientError):
                await response.prepare(request)
                self._log(request, watch, response, body)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
        finally:
            upstream.release()
        return response

    def _log(self, request: web.Request, watch: bool, response: web.StreamResponse,
             body: bytes = b"") -> web.StreamResponse:
        self.requests.append(Logged(request.method, request.path, request.query_string,
                                    response.status, watch, body))
        return response

    @staticmethod
    def _refusal(fault: Fault) -> web.Response:
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                  409: "Conflict", 404: "NotFound", 403: "Forbidden"}.get(fault.status, "")
        headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after else {}
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                  "message": fault.message or f"injected by the fault proxy: {fault.status}",
                  "reason": reason,
                  "code": fault.status}
        return web.json_response(status, status=fault.status, headers=headers)

    @staticmethod
    def _gone() -> web.Response:
        event = {"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
            "message": "too old resource version (injected by the fault proxy)", "code": 410}}
        return web.Response(status=200, text=json.dumps(event) + "\n",
                            content_type="application/json")
