"""The test API server's proxy to a node's server, as kube-apiserver's (pkg/registry/core/pod
and node `*Location` functions, the upgrade-aware proxy):

- `pods/log` → `GET /containerLogs/<ns>/<pod>/<container>` with `follow`, `previous`,
  `timestamps`, `sinceSeconds`, `sinceTime`, `tailLines`, `limitBytes`;
- `pods/exec` → `/exec/<ns>/<pod>/<container>`, `pods/attach` → `/attach/...` (kubectl's
  `stdin`/`stdout`/`stderr`/`tty`=true become the kubelet's `input`/`output`/`error`/`tty`=1,
  `command` is kept), `pods/portforward` → `/portForward/<ns>/<pod>` (`ports` → `port`);
- `nodes/<name>/proxy/<path>` → `<path>` with the query as it came.

The node is found as kube-apiserver finds it: the pod's `spec.nodeName`, the Node's
`InternalIP` address and `status.daemonEndpoints.kubeletEndpoint.Port`, over HTTPS. The server
authenticates with a client certificate its CA signed (`kube-apiserver-kubelet-client` in
`kubeadm:cluster-admins`, as kubeadm's `apiserver-kubelet-client.crt`) and, like kube-apiserver
without `--kubelet-certificate-authority`, does not verify the node's serving certificate.

Upgrades (exec, attach, port-forward over SPDY or WebSocket) go through as raw bytes: the
request head goes to the node, its answer comes back, and after a `101 Switching Protocols`
bytes flow both ways untouched; any other answer is passed back as it is (kubectl then falls
back from WebSocket to SPDY). Other requests (logs, `-f` too, nodes/proxy) are streamed.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import aiohttp
from aiohttp import web

import kubepki
from nodelet.adapters import node_server

Obj = dict[str, Any]
KUBELET_CLIENT = ("kube-apiserver-kubelet-client", ("kubeadm:cluster-admins",))

_POD_SUB = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/"
    r"(?P<sub>log|exec|attach|portforward)$")
_NODE_PROXY = re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)/proxy(?P<rest>/.*)?$")
# Headers never sent to the node: the caller's own credentials.
_NOT_FORWARDED = frozenset({"authorization", "host", "impersonate-user", "impersonate-group",
                            "impersonate-uid"})
_STREAM_FLAGS = {"stdin": "input", "stdout": "output", "stderr": "error", "tty": "tty"}
_LOG_PARAMS = ("follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines",
               "limitBytes")


class ProxyError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


@dataclass(frozen=True)
class Target:
    plural: str  # pods or nodes
    namespace: str
    name: str
    subresource: str  # log, exec, attach, portforward, proxy
    rest: str = ""  # nodes/proxy: the path on the node


def target(path: str) -> Target | None:
    """The proxied subresource `path` names, None for any other path."""
    if (m := _POD_SUB.match(path)) is not None:
        return Target("pods", m["ns"], m["name"], m["sub"])
    if (m := _NODE_PROXY.match(path)) is not None:
        return Target("nodes", "", m["name"], "proxy", m["rest"] or "/")
    return None


def node_endpoint(node: Obj) -> tuple[str, int]:
    status = node.get("status") or {}
    address = next((a["address"] for a in status.get("addresses") or []
                    if a.get("type") == "InternalIP"), None)
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    if not address or not port:
        raise ProxyError(503, "ServiceUnavailable",
                         f"node {node['metadata']['name']!r} has no InternalIP or kubelet port")
    return address, int(port)


def _container(pod: Obj, query: list[tuple[str, str]]) -> str:
    named = next((v for k, v in query if k == "container"), "")
    if named:
        return named
    names = [c["name"] for c in pod["spec"].get("containers") or []]
    if len(names) == 1:
        return names[0]
    raise ProxyError(400, "BadRequest", f"a container name must be specified for pod "
                                        f"{pod['metadata']['name']}, choose one of: "
                                        f"[{' '.join(names)}]")


def kubelet_path(t: Target, query: list[tuple[str, str]], pod: Obj | None) -> str:
    """The node server's path and query for `t`, as kube-apiserver builds it."""
    if t.plural == "nodes":
        return t.rest + (f"?{urlencode(query)}" if query else "")
    assert pod is not None
    ns, name = t.namespace, t.name
    if t.subresource == "log":
        params = [(k, v) for k, v in query if k in _LOG_PARAMS]
        path = f"/containerLogs/{ns}/{name}/{_container(pod, query)}"
    elif t.subresource == "portforward":
        params = [("port", v) for k, v in query if k == "ports"]
        path = f"/portForward/{ns}/{name}"
    else:
        params = [(k, v) for k, v in query if k == "command"]
        params += [(_STREAM_FLAGS[k], "1") for k, v in query
                   if k in _STREAM_FLAGS and v.lower() in ("true", "1")]
        path = f"/{t.subresource}/{ns}/{name}/{_container(pod, query)}"
    return path + (f"?{urlencode(params)}" if params else "")


@dataclass(frozen=True)
class Upgrade:
    upgrade: str  # the Upgrade header: websocket, SPDY/3.1
    protocols: str  # the subprotocols offered (WebSocket) or asked (SPDY)
    path: str  # on the node
    status: int  # the node's answer


def _protocols(request: web.Request) -> str:
    headers = request.headers
    return headers.get("Sec-WebSocket-Protocol") or ", ".join(
        headers.getall("X-Stream-Protocol-Version", []))


class KubeletClient:
    """The API server's side of the connection to nodes: its client certificate, signed by
    `authority` (the CA nodes trust with --client-ca-file)."""

    def __init__(self, authority: kubepki.Authority) -> None:
        cert, key = authority.client_pem(*KUBELET_CLIENT)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # no --kubelet-certificate-authority
        with tempfile.TemporaryDirectory(prefix="kubelet-client-") as tmp:
            cert_file, key_file = Path(tmp) / "client.crt", Path(tmp) / "client.key"
            cert_file.write_bytes(cert)
            key_file.write_bytes(key)
            context.load_cert_chain(cert_file, key_file)
        self.context = context
        # Each upgrade asked of a node, and the node's answer.
        self.upgrades: list[Upgrade] = []

    async def forward(self, request: web.Request, t: Target,
                      get: Callable[[str, str, str], Obj | None]) -> web.StreamResponse:
        """Proxy `request` for `t` to its node (`get(plural, namespace, name)` reads the
        store). Raises ProxyError for a missing pod or node."""
        pod = get("pods", t.namespace, t.name) if t.plural == "pods" else None
        if t.plural == "pods" and pod is None:
            raise ProxyError(404, "NotFound", f'pods "{t.name}" not found')
        node_name = t.name if pod is None else (pod.get("spec") or {}).get("nodeName", "")
        node = get("nodes", "", node_name) if node_name else None
        if node is None:
            raise ProxyError(404, "NotFound", f'nodes "{node_name}" not found')
        host, port = node_endpoint(node)
        path = kubelet_path(t, parse_qsl(request.query_string, keep_blank_values=True), pod)
        if "upgrade" in request.headers.get("Connection", "").lower():
            return await self._upgrade(request, host, port, path)
        return await self._stream(request, host, port, path, t)

    async def _stream(self, request: web.Request, host: str, port: int, path: str,
                      t: Target) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        body = await request.read() if request.can_read_body else None
        async with aiohttp.ClientSession() as session, session.request(
                request.method, f"https://{host}:{port}{path}", headers=headers, data=body,
                ssl=self.context, timeout=aiohttp.ClientTimeout(total=None)) as upstream:
            if t.subresource == "log" and not 200 <= upstream.status <= 206:
                raise _log_error(upstream.status, await upstream.text(), t.name)
            response = web.StreamResponse(status=upstream.status, headers={
                "Content-Type": upstream.headers.get("Content-Type", "text/plain")})
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            except (ConnectionError, RuntimeError):
                pass  # the client went away (kubectl logs -f interrupted)
            return response

    async def _upgrade(self, request: web.Request, host: str, port: int,
                       path: str) -> web.StreamResponse:
        reader, writer = await node_server.open_upstream(host, port, context=self.context,
                                                         limit=1 << 16)
        try:
            lines = [f"{request.method} {path} HTTP/1.1", f"Host: {host}:{port}"]
            lines += [f"{k}: {v}" for k, v in request.headers.items()
                      if k.lower() not in _NOT_FORWARDED]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            if request.can_read_body:
                writer.write(await request.read())
            status, headers = _head(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10))
            self.upgrades.append(Upgrade(request.headers.get("Upgrade", ""), _protocols(request),
                                         path, status))
            if status != 101:
                length = int(dict((k.lower(), v) for k, v in headers).get("content-length", 0))
                body = await asyncio.wait_for(reader.readexactly(length), 10) if length else b""
                return web.Response(status=status, body=body, headers=[
                    (k, v) for k, v in headers if k.lower() == "content-type"])
            return await node_server.splice(request, reader, writer, headers)
        finally:
            writer.close()


def _log_error(status: int, text: str, name: str) -> ProxyError:
    """kube-apiserver's check of a node's log answer (GenericHttpResponseChecker): a 400 is
    BadRequest with the node's words, a 500 InternalError, anything else a generic answer."""
    text = text.strip()
    if status == 400:
        return ProxyError(400, "BadRequest", text)
    if status == 500:
        return ProxyError(500, "InternalError", f"Internal error occurred: {text}")
    if status == 404:
        return ProxyError(404, "NotFound", f"the server could not find the requested resource "
                                           f"( pods/log {name})")
    return ProxyError(status, "Unknown", f"the server responded with the status code {status} "
                                         f"but did not return more information ( pods/log {name})")


def _head(raw: bytes) -> tuple[int, list[tuple[str, str]]]:
    status_line, *lines = raw.decode("latin-1").split("\r\n")
    headers = [(k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in lines if h)]
    return int(status_line.split(" ", 2)[1]), headers
