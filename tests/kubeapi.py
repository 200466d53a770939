"""A small kube-apiserver for tests: real HTTP on 127.0.0.1, aiohttp, in the test's event loop.

It behaves like kube-apiserver wherever nodelet depends on it (and says so where it does not):

- resources: pods, nodes, events, configmaps, secrets, services (core/v1) and leases
  (coordination.k8s.io/v1); `status` subresource of pods and nodes; namespaces,
  replicationcontrollers, daemonsets, deployments, replicasets (stored, no controllers: what
  `kubectl cluster-info dump` lists); legacy discovery (`/api`, `/apis`, `/api/v1`,
  `/apis/<group>/<version>`), which kubectl reads before `get`;
- server-assigned `metadata.uid`, `resourceVersion` (one global counter, as etcd's revision) and
  `creationTimestamp`; 201 on create, 409 `AlreadyExists`, 404 `NotFound` as `Status` objects;
- GET, LIST (`fieldSelector` with `=`, `==`, `!=` on `spec.nodeName`, `metadata.name`,
  `metadata.namespace`, `status.phase`, a Service's `spec.clusterIP`; `labelSelector` with
  `=`, `==`, `!=`, `key`, `!key`; pages with `limit` and `continue`, a token older than the
  compacted revision 410 `Expired`), WATCH (`labelSelector` too)
  (`?watch=1&resourceVersion=N`, chunked JSON lines ADDED/MODIFIED/DELETED, BOOKMARK with
  `allowWatchBookmarks`, `timeoutSeconds`; an object leaving the selector is a DELETED event,
  entering it an ADDED one; a resourceVersion older than the compacted one gets HTTP 200 and
  an ERROR event with a 410 `Expired` Status, as the real server does);
- PUT: 409 `Conflict` when `metadata.resourceVersion` is stale or `metadata.uid` differs;
- PATCH: `application/merge-patch+json` (RFC 7386) and `application/strategic-merge-patch+json`
  with the merge keys of the real types (`_MERGE_KEYS`: pod `status.conditions` by `type`,
  `podIPs`/`hostIPs` by `ip`; `containerStatuses` is `listType=atomic` in k8s.io/api and is
  replaced, as there) and the `$patch: delete|replace` directives; `metadata.uid` and
  `metadata.resourceVersion` in a patch are preconditions (409); a patch that changes nothing
  does not bump the resourceVersion;
- DELETE with `DeleteOptions` (`gracePeriodSeconds`, `preconditions.uid|resourceVersion`): a
  scheduled, non-terminal pod with a grace period gets `deletionTimestamp` and
  `deletionGracePeriodSeconds` first and is removed on a delete with grace 0.

Who may do what (tests/kubeauth.py): client certificates, static and bootstrap tokens, and
by default kube-apiserver's Node authorizer + NodeRestriction: the default token is node `node`
(`n1`), `admin_token` is `system:masters`, `node_token(name)` another node's. `tls=True` serves
HTTPS with its own CA (tests/kubepki.py), which also signs approved
`certificates.k8s.io/v1` CertificateSigningRequests (`approval` subresource) for
`kubernetes.io/kube-apiserver-client-kubelet`, for `cert_duration` seconds at most;
`auto_approve` approves a node's own client CSRs as kube-controller-manager's csrapproving
controller does with kubeadm's bindings.

The node's server (docs/server.md): `tokenreviews` and `subjectaccessreviews` create, decided
by tests/kubereviews.py (the tokens this server knows; a small rule table, `reviews.rules`),
and `pods/log|exec|attach|portforward` and `nodes/<name>/proxy/...` forwarded to the node's
InternalIP and kubelet port with a client certificate of its CA (tests/kubeproxy.py;
`tls=True` only), upgrades passed through as raw bytes.

ServiceAccounts (tests/kubeaccounts.py): `serviceaccounts` with the `token` subresource
(TokenRequest; `min_token_seconds`, `max_token_seconds`); the tokens it issues are accepted as
bearer tokens (`system:serviceaccount:<ns>:<sa>`) until they expire or their pod goes, and a
tiny rule instead of RBAC lets a service account read the pods of its namespace.
`service_accounts=True` adds the ServiceAccount admission plugin (`kube-api-access-*` volume
and mounts unless automountServiceAccountToken is false, each namespace's `default`
ServiceAccount and `kube-root-ca.crt` ConfigMap). `host` is the address it listens on.

Not modelled: admission beyond NodeRestriction and ServiceAccount, defaulting beyond a few
pod fields, label selectors, finalizers, JSON patch, server-side apply, list pagination.

Tests steer it with `inject()` (per-route faults: status codes with `Retry-After`, delays,
watch disconnects), `drop_watches()`, `compact()` (forces 410 for older resourceVersions) and
read `requests` (method, path, verb, status) to count API calls and `open_watches()` to see
which watches are open.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

import kubeaccounts
import kubeauth
import kubepki
import kubeproto
import kubeproxy
import kubereviews

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group_version: str  # "v1" or "coordination.k8s.io/v1"
    namespaced: bool
    subresources: tuple[str, ...] = ()


RESOURCES = {
    r.plural: r
    for r in (
        Resource("pods", "Pod", "v1", True, ("status",)),
        Resource("nodes", "Node", "v1", False, ("status",)),
        Resource("events", "Event", "v1", True),
        Resource("configmaps", "ConfigMap", "v1", True),
        Resource("secrets", "Secret", "v1", True),
        Resource("services", "Service", "v1", True),
        Resource("serviceaccounts", "ServiceAccount", "v1", True, ("token",)),
        Resource("leases", "Lease", "coordination.k8s.io/v1", True),
        Resource("certificatesigningrequests", "CertificateSigningRequest",
                 "certificates.k8s.io/v1", False, ("status", "approval")),
        # What a node server in Webhook mode asks (tests/kubereviews.py).
        Resource("tokenreviews", "TokenReview", "authentication.k8s.io/v1", False),
        Resource("subjectaccessreviews", "SubjectAccessReview", "authorization.k8s.io/v1",
                 False),
        # What `kubectl cluster-info dump` lists besides pods, events, services and nodes.
        Resource("namespaces", "Namespace", "v1", False),
        Resource("replicationcontrollers", "ReplicationController", "v1", True),
        Resource("daemonsets", "DaemonSet", "apps/v1", True),
        Resource("deployments", "Deployment", "apps/v1", True),
        Resource("replicasets", "ReplicaSet", "apps/v1", True),
    )
}

# Strategic merge keys (patchMergeKey in k8s.io/api) of the lists nodelet patches.
_MERGE_KEYS: dict[tuple[str, ...], str] = {
    ("pods", "status", "conditions"): "type",
    ("pods", "status", "podIPs"): "ip",
    ("pods", "status", "hostIPs"): "ip",
    ("pods", "metadata", "ownerReferences"): "uid",
    ("nodes", "status", "conditions"): "type",
    ("nodes", "status", "addresses"): "type",
    ("nodes", "metadata", "ownerReferences"): "uid",
    ("leases", "metadata", "ownerReferences"): "uid",
}

_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_object(code: int, reason: str, message: str, **details: Any) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details, "code": code}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.body = status_object(code, reason, message, **details)


@dataclass
class Fault:
    """An injected fault: requests matching `method`, `path` (regex, searched) and `verb`."""

    method: str | None = None
    path: str = ""
    verb: str | None = None
    status: int = 500
    times: int | None = 1  # None: forever
    retry_after: int | None = None
    delay: float = 0.0  # seconds to stall before answering (or failing)
    fail: bool = True  # False: only the delay
    hits: int = 0

    def matches(self, method: str, path: str, verb: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return ((self.method is None or self.method == method)
                and (self.verb is None or self.verb == verb)
                and re.search(self.path, path) is not None)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    verb: str  # get, list, watch, create, update, patch, delete
    resource: str
    subresource: str
    status: int
    query: str = ""
    user: str = ""  # who called (authenticated user name), "" when unknown


@dataclass
class _Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    plural: str
    old: Obj | None
    new: Obj


@dataclass(eq=False)
class _Watcher:
    plural: str
    namespace: str | None
    selector: list[tuple[str, str, str]]
    queue: asyncio.Queue[_Change | None] = field(default_factory=asyncio.Queue)
    labels: list[tuple[str, str, str]] = field(default_factory=list)


class KubeApiServer:
    """The test API server. `await start()`, then `url`; `await stop()` at the end."""

    def __init__(self, *, token: str = "test-token", bookmark_interval: float = 1.0,
                 node: str = "n1", node_authorizer: bool = True, tls: bool = False,
                 admin_token: str = "admin-token", cert_duration: float = 3600.0,
                 auto_approve: bool = False, service_accounts: bool = False,
                 host: str = "127.0.0.1", min_token_seconds: int = 600,
                 max_token_seconds: int | None = None) -> None:
        """`service_accounts`: act like the ServiceAccount admission plugin (and create each
        namespace's `default` ServiceAccount and `kube-root-ca.crt`), see tests/kubeaccounts.py;
        `host`: the address to listen on (pods reach the node's IP, not 127.0.0.1);
        `min_token_seconds` / `max_token_seconds`: the TokenRequest bounds."""
        self.host = host
        self.service_accounts = service_accounts
        # TokenReview/SubjectAccessReview (their rule table) and the proxy to nodes' servers.
        self.reviews = kubereviews.Reviews()
        self.kubelet_client: kubeproxy.KubeletClient | None = None
        self.accounts = kubeaccounts.Accounts(
            lookup=lambda p, ns, n: self.objects.get((p, ns, n)),
            min_seconds=min_token_seconds, max_seconds=max_token_seconds)
        self.token = token
        self.admin_token = admin_token
        self.authority = kubepki.Authority.create() if tls else None
        self.cert_duration = cert_duration  # seconds; the signer's --cluster-signing-duration
        self.auto_approve = auto_approve
        self.access = kubeauth.Access(
            lookup=lambda p, ns, n: self.objects.get((p, ns, n)),
            items=lambda p: [o for (q, _, _), o in self.objects.items() if q == p],
            authority=self.authority, node_authorizer=node_authorizer)
        self.access.tokens = {token: kubeauth.node_user(node), admin_token: kubeauth.ADMIN}
        self.bookmark_interval = bookmark_interval
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.rv = 0
        self.compacted = 0
        self.history: list[_Change] = []
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self._watchers: set[_Watcher] = set()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- life cycle -----------------------------------------------------------------------------

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, ssl_context=(
            self.authority.serving_context() if self.authority is not None else None))
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.url

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        scheme = "https" if self.authority is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def node_token(self, node: str) -> str:
        """A bearer token that identifies as node `node` (system:node:<node>, system:nodes)."""
        token = f"node-token-{node}"
        self.access.tokens[token] = kubeauth.node_user(node)
        return token

    def cluster_entry(self) -> Obj:
        """The kubeconfig `cluster` of this server (with the CA when it serves HTTPS)."""
        entry: Obj = {"server": self.url}
        if self.authority is not None:
            entry["certificate-authority-data"] = base64.b64encode(
                self.authority.ca_pem).decode()
        return entry

    def write_kubeconfig(self, path: Path, *, node: str | None = None,
                         token: str | None = None, admin: bool = False) -> Path:
        """A kubeconfig with the default (node) token, or `node`'s, `token`, the admin's."""
        token = token or (self.admin_token if admin else
                          self.node_token(node) if node else self.token)
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": self.cluster_entry()}],
            "users": [{"name": "test", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }))
        return path

    # -- test steering ----------------------------------------------------------------------------

    def inject(self, **kwargs: Any) -> Fault:
        fault = Fault(**kwargs)
        self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        self.faults.clear()

    def drop_watches(self, plural: str | None = None) -> None:
        """Close every open watch stream, or those of `plural` (the client sees the connection
        end)."""
        for watcher in list(self._watchers):
            if plural is None or watcher.plural == plural:
                watcher.queue.put_nowait(None)

    def open_watches(self, plural: str) -> list[tuple[str | None, str]]:
        """The watch streams of `plural` open now, as (namespace, fieldSelector). A stream the
        client closed counts until the server's next write to it fails (at the latest the
        next bookmark, as in the real server)."""
        found = [(w.namespace, ",".join(f"{k}{op}{v}" for k, op, v in w.selector))
                 for w in self._watchers if w.plural == plural]
        return sorted(found, key=lambda watch: (watch[0] or "", watch[1]))

    def compact(self) -> int:
        """Forget history up to now: watches from an older resourceVersion get 410 Gone."""
        self.compacted = self.rv
        self.history.clear()
        return self.rv

    def count(self, *, verb: str | None = None, resource: str | None = None,
              subresource: str | None = None, method: str | None = None) -> int:
        return sum(1 for r in self.requests
                   if (verb is None or r.verb == verb)
                   and (resource is None or r.resource == resource)
                   and (subresource is None or r.subresource == subresource)
                   and (method is None or r.method == method))

    # Direct access for tests (no HTTP, no request log), with the same semantics.

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        found = self.objects.get((plural, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list_objects(self, plural: str) -> list[Obj]:
        return [copy.deepcopy(o) for (p, _, _), o in self.objects.items() if p == plural]

    def create(self, plural: str, obj: Obj) -> Obj:
        namespace = obj.get("metadata", {}).get("namespace", "default") \
            if RESOURCES[plural].namespaced else ""
        return copy.deepcopy(self._create(plural, namespace, copy.deepcopy(obj)))

    def update(self, plural: str, obj: Obj) -> Obj:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if RESOURCES[plural].namespaced else ""
        return copy.deepcopy(self._replace(plural, namespace, meta["name"], copy.deepcopy(obj),
                                           subresource=""))

    def update_status(self, plural: str, obj: Obj) -> Obj:
        """Write `obj`'s status as another controller would (PUT .../status)."""
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if RESOURCES[plural].namespaced else ""
        return copy.deepcopy(self._replace(plural, namespace, meta["name"], copy.deepcopy(obj),
                                           subresource="status"))

    def delete(self, plural: str, namespace: str, name: str, grace: int | None = None) -> Obj:
        options: Obj = {} if grace is None else {"gracePeriodSeconds": grace}
        return self._delete(plural, namespace, name, options)

    # -- HTTP ---------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET" and (found := _discovery(request.path)) is not None:
            return self._log(request, "get", "", "", web.json_response(found))
        if (target := kubeproxy.target(request.path)) is not None:
            return await self._proxy(request, target)
        match = _PATH.match(request.path)
        query = {k: v[-1] for k, v in parse_qs(request.query_string).items()}
        if match is None or match["plural"] not in RESOURCES:
            return self._log(request, "", "", "", _error(404, "NotFound", "no such path"))
        plural, name, sub = match["plural"], match["name"] or "", match["sub"] or ""
        verb = _verb(request.method, bool(name), query.get("watch") in ("1", "true"))
        user = self.access.authenticate(request) or self.accounts.authenticate(
            request.headers.get("Authorization", ""))
        if user is None:
            return self._log(request, verb, plural, sub, _error(401, "Unauthorized",
                                                                 "Unauthorized"))
        kubeauth.CALLER.set(user)
        attrs = kubeauth.Attributes(verb, plural, match["group"] or "", match["ns"] or "",
                                    kubeauth.request_name(name, verb, query), sub)
        try:
            if not self.accounts.allows(user, attrs):
                self.access.authorize(user, attrs)
        except kubeauth.Forbidden as exc:
            return self._log(request, verb, plural, sub, web.json_response(
                kubeauth.forbidden_status(plural, attrs.group, attrs.name, exc.message),
                status=403))
        fault = next((f for f in self.faults
                      if f.matches(request.method, request.path, verb)), None)
        if fault is not None:
            fault.hits += 1
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.fail:
                if verb == "watch" and fault.status == 410:
                    return await self._watch_gone(request, plural)
                return self._log(request, verb, plural, sub, _fault_response(fault))
        try:
            if verb == "watch":
                self._log(request, verb, plural, sub, web.Response(status=200))
                return await self._watch(request, plural, match["ns"], query)
            response = await self._dispatch(request, verb, plural, match["ns"] or "", name,
                                            sub, query)
        except ApiError as exc:
            response = web.json_response(exc.body, status=exc.code)
        except kubeauth.Forbidden as exc:  # refused by admission (NodeRestriction)
            response = web.json_response(kubeauth.forbidden_status(
                plural, match["group"] or "", name, exc.message), status=403)
        return self._log(request, verb, plural, sub, response)

    def _token_user(self, token: str) -> kubeauth.User | None:
        """Who a bearer token is (TokenReview): static, bootstrap or service account."""
        return self.access.token_user(token) or self.accounts.authenticate(f"Bearer {token}")

    async def _proxy(self, request: web.Request,
                     target: kubeproxy.Target) -> web.StreamResponse:
        """pods/log|exec|attach|portforward and nodes/proxy, to the node's server."""
        verb = _verb(request.method, True, False)
        user = self.access.authenticate(request) or self.accounts.authenticate(
            request.headers.get("Authorization", ""))
        if user is None:
            return self._log(request, verb, target.plural, target.subresource,
                             _error(401, "Unauthorized", "Unauthorized"))
        kubeauth.CALLER.set(user)
        attrs = kubeauth.Attributes(verb, target.plural, "", target.namespace, target.name,
                                    target.subresource)
        try:
            self.access.authorize(user, attrs)
            if self.authority is None:
                raise kubeproxy.ProxyError(503, "ServiceUnavailable",
                                           "proxying to nodes needs KubeApiServer(tls=True)")
            if self.kubelet_client is None:
                self.kubelet_client = kubeproxy.KubeletClient(self.authority)
            self._log(request, verb, target.plural, target.subresource, web.Response())
            return await self.kubelet_client.forward(request, target, self.get)
        except kubeauth.Forbidden as exc:
            return self._log(request, verb, target.plural, target.subresource,
                             web.json_response(kubeauth.forbidden_status(
                                 target.plural, "", target.name, exc.message), status=403))
        except kubeproxy.ProxyError as exc:
            return web.json_response(status_object(exc.code, exc.reason, exc.message),
                                     status=exc.code)
        except OSError as exc:  # the node's server cannot be reached
            return web.json_response(status_object(
                502, "BadGateway", f"error dialing backend: {exc}"), status=502)

    def _log(self, request: web.Request, verb: str, plural: str, sub: str,
             response: web.StreamResponse) -> web.StreamResponse:
        caller = kubeauth.CALLER.get()
        self.requests.append(Request(request.method, request.path, verb, plural, sub,
                                     response.status, request.query_string,
                                     caller.name if caller is not None else ""))
        return response

    async def _dispatch(self, request: web.Request, verb: str, plural: str, namespace: str,
                        name: str, sub: str, query: dict[str, str]) -> web.Response:
        resource = RESOURCES[plural]
        if sub and sub not in resource.subresources:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                           f"({plural}/{sub})")
        if verb == "list":
            return web.json_response(self._list(plural, namespace or None, query))
        if verb == "get":
            return web.json_response(self._get(plural, namespace, name))
        body = await _body(request)
        try:
            if verb == "create" and plural == "tokenreviews":
                return web.json_response(self.reviews.token_review(body, self._token_user),
                                         status=201)
            if verb == "create" and plural == "subjectaccessreviews":
                return web.json_response(self.reviews.access_review(body), status=201)
        except kubereviews.ReviewError as exc:
            raise ApiError(exc.code, exc.reason, exc.message) from exc
        if verb == "create" and (plural, sub) == ("serviceaccounts", "token"):
            self.access.admit_token(namespace, body)  # NodeRestriction: a pod bound to it
            return web.json_response(self._token_request(namespace, name, body), status=201)
        if verb == "create":
            return web.json_response(self._create(plural, namespace, body), status=201)
        if verb == "update":
            return web.json_response(self._replace(plural, namespace, name, body, subresource=sub))
        if verb == "patch":
            ctype = request.content_type
            return web.json_response(self._patch(plural, namespace, name, body, ctype, sub))
        if verb == "delete":
            options = dict(body) if isinstance(body, dict) else {}
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            return web.json_response(self._delete(plural, namespace, name, options))
        raise ApiError(405, "MethodNotAllowed", f"{request.method} is not supported")

    # -- storage --------------------------------------------------------------------------------

    def _key(self, plural: str, namespace: str, name: str) -> tuple[str, str, str]:
        return (plural, namespace if RESOURCES[plural].namespaced else "", name)

    def _get(self, plural: str, namespace: str, name: str) -> Obj:
        found = self.objects.get(self._key(plural, namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found', name=name,
                           kind=plural)
        return _with_kind(plural, found)

    def _list(self, plural: str, namespace: str | None, query: dict[str, str]) -> Obj:
        selector = _parse_selector(query.get("fieldSelector", ""))
        labels = _parse_labels(query.get("labelSelector", ""))
        items = [copy.deepcopy(o) for (p, ns, _), o in sorted(self.objects.items())
                 if p == plural and (namespace is None or ns == namespace)
                 and _selected(o, selector) and _labelled(o, labels)]
        resource = RESOURCES[plural]
        meta = {"resourceVersion": str(self.rv)}
        # Pages (`limit`, `continue`): the token is the list's resourceVersion and the offset;
        # unlike the real server's snapshot, later pages see the store as it is then. A token
        # older than the compacted revision is 410 Expired, as there.
        start = 0
        if token := query.get("continue", ""):
            token_rv, _, offset = token.partition(":")
            if int(token_rv) < self.compacted:
                raise ApiError(410, "Expired", "the provided continue parameter is too old")
            start, meta["resourceVersion"] = int(offset), token_rv
        if (limit := int(query.get("limit", "0") or 0)) > 0:
            items, rest = items[start:start + limit], items[start + limit:]
            if rest:
                meta.update({"continue": f"{meta['resourceVersion']}:{start + limit}",
                             "remainingItemCount": len(rest)})  # type: ignore[dict-item]
        return {"kind": f"{resource.kind}List", "apiVersion": resource.group_version,
                "metadata": meta, "items": items}

    def _commit(self, plural: str, type_: str, old: Obj | None, new: Obj) -> Obj:
        self.rv += 1
        if type_ != "DELETED":
            new["metadata"]["resourceVersion"] = str(self.rv)
        key = self._key(plural, new["metadata"].get("namespace", ""), new["metadata"]["name"])
        if type_ == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = new
        change = _Change(self.rv, type_, plural, copy.deepcopy(old), copy.deepcopy(new))
        self.history.append(change)
        for watcher in list(self._watchers):
            if watcher.plural == plural:
                watcher.queue.put_nowait(change)
        return _with_kind(plural, new)

    def _create(self, plural: str, namespace: str, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body must be an object")
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if RESOURCES[plural].namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if self._key(plural, meta.get("namespace", ""), name) in self.objects:
            raise ApiError(409, "AlreadyExists", f'{plural} "{name}" already exists', name=name,
                           kind=plural)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta.pop("resourceVersion", None)
        meta.pop("deletionTimestamp", None)
        body.pop("kind", None)
        body.pop("apiVersion", None)
        if plural == "pods":
            _default_pod(body)
            if self.service_accounts:
                self._admit_service_account(meta["namespace"], body)
        self.access.admit("create", plural, "", None, body)
        if plural == "certificatesigningrequests":
            return self._create_csr(body)
        return self._commit(plural, "ADDED", None, body)

    def _admit_service_account(self, namespace: str, pod: Obj) -> None:
        """The ServiceAccount admission plugin; the namespace's `default` ServiceAccount and
        `kube-root-ca.crt` are made first, as kube-controller-manager would have."""
        for plural, obj in kubeaccounts.Accounts.namespace_objects(namespace):
            if self._key(plural, namespace, obj["metadata"]["name"]) not in self.objects:
                obj["metadata"] |= {"uid": str(uuid.uuid4()), "creationTimestamp": now_rfc3339()}
                self._commit(plural, "ADDED", None, obj)
        try:
            self.accounts.admit_pod(namespace, pod)
        except kubeaccounts.RequestError as exc:
            raise ApiError(exc.code, exc.reason, exc.message) from exc

    def _token_request(self, namespace: str, name: str, body: Any) -> Obj:
        try:
            return self.accounts.token_request(namespace, name, body)
        except kubeaccounts.RequestError as exc:
            raise ApiError(exc.code, exc.reason, exc.message) from exc

    def _current(self, plural: str, namespace: str, name: str) -> Obj:
        found = self.objects.get(self._key(plural, namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found', name=name,
                           kind=plural)
        return found

    def _replace(self, plural: str, namespace: str, name: str, body: Any, *,
                 subresource: str) -> Obj:
        old = self._current(plural, namespace, name)
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body must be an object")
        meta = body.get("metadata") or {}
        _check_preconditions(plural, name, old, meta.get("uid"), meta.get("resourceVersion"))
        new = _restrict(plural, old, body, subresource)
        self.access.admit("update", plural, subresource, old, new)
        return self._store_update(plural, old, new)

    def _patch(self, plural: str, namespace: str, name: str, patch: Any, ctype: str,
               subresource: str) -> Obj:
        old = self._current(plural, namespace, name)
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "the patch must be an object")
        meta = patch.get("metadata") or {}
        _check_preconditions(plural, name, old, meta.get("uid"), meta.get("resourceVersion"))
        if ctype == "application/merge-patch+json":
            merged = _merge_patch(copy.deepcopy(old), patch)
        elif ctype == "application/strategic-merge-patch+json":
            merged = _strategic(copy.deepcopy(old), patch, (plural,))
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {ctype!r}")
        new = _restrict(plural, old, merged, subresource)
        self.access.admit("patch", plural, subresource, old, new)
        return self._store_update(plural, old, new)

    def _store_update(self, plural: str, old: Obj, new: Obj) -> Obj:
        for frozen in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                       "deletionGracePeriodSeconds"):
            if frozen in old["metadata"]:
                new["metadata"][frozen] = old["metadata"][frozen]
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:  # a no-op write: no new resourceVersion, no watch event
            return _with_kind(plural, old)
        stored = self._commit(plural, "MODIFIED", old, new)
        if plural == "certificatesigningrequests":
            return self._sign(stored)
        return stored

    def _delete(self, plural: str, namespace: str, name: str, options: Obj) -> Obj:
        old = self._current(plural, namespace, name)
        pre = options.get("preconditions") or {}
        _check_preconditions(plural, name, old, pre.get("uid"), pre.get("resourceVersion"))
        self.access.admit("delete", plural, "", old, None)
        grace = options.get("gracePeriodSeconds")
        if plural == "pods" and not _deletes_now(old, grace):
            return self._mark_deleting(old, grace)
        return self._commit(plural, "DELETED", old, copy.deepcopy(old))

    def _mark_deleting(self, old: Obj, grace: int | None) -> Obj:
        spec_grace = old.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        period = spec_grace if grace is None else grace
        meta = old["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if current is not None and current <= period:
            return _with_kind("pods", old)  # a grace period can only shrink
        new = copy.deepcopy(old)
        new["metadata"]["deletionGracePeriodSeconds"] = period
        new["metadata"]["deletionTimestamp"] = datetime.fromtimestamp(
            time.time() + period, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._commit("pods", "MODIFIED", old, new)

    # -- certificate signing requests (tests/kubepki.py signs) ---------------------------------

    def _create_csr(self, body: Obj) -> Obj:
        spec = body.setdefault("spec", {})
        caller = kubeauth.CALLER.get()
        if caller is not None:  # the API server records who asked, whatever the body says
            spec["username"], spec["groups"] = caller.name, list(caller.groups)
        if not spec.get("signerName") or not spec.get("request"):
            raise ApiError(422, "Invalid", "spec.signerName and spec.request are required")
        body.pop("status", None)
        stored = self._commit("certificatesigningrequests", "ADDED", None, body)
        groups = spec.get("groups") or []
        if self.auto_approve and ("system:nodes" in groups or "system:bootstrappers" in groups):
            approved = copy.deepcopy(self.objects[self._key(
                "certificatesigningrequests", "", stored["metadata"]["name"])])
            approved["status"] = {"conditions": [_csr_condition(
                "Approved", "AutoApproved", "Auto approving kubelet client certificate after "
                "SubjectAccessReview.")]}
            return self._store_update("certificatesigningrequests", self.objects[self._key(
                "certificatesigningrequests", "", stored["metadata"]["name"])], approved)
        return stored

    def _sign(self, stored: Obj) -> Obj:
        """Issue the certificate of an approved CSR (or mark it Failed), as the signer does."""
        status = stored.get("status") or {}
        types = {c.get("type") for c in status.get("conditions") or []
                 if c.get("status") == "True"}
        if "Approved" not in types or types & {"Denied", "Failed"} or \
                status.get("certificate") or self.authority is None:
            return stored
        spec = stored["spec"]
        old = self.objects[self._key("certificatesigningrequests", "", stored["metadata"]["name"])]
        new = copy.deepcopy(old)
        try:
            pem = self.authority.sign_csr(
                base64.b64decode(spec["request"]), signer=spec["signerName"],
                usages=spec.get("usages") or [],
                expiration_seconds=spec.get("expirationSeconds"), duration=self.cert_duration)
            new["status"]["certificate"] = base64.b64encode(pem).decode()
        except kubepki.SigningError as exc:
            new["status"]["conditions"].append(_csr_condition("Failed", "SignerValidationFailure",
                                                              str(exc)))
        return self._commit("certificatesigningrequests", "MODIFIED", old, new)

    # -- watch ----------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, plural: str, namespace: str | None,
                     query: dict[str, str]) -> web.StreamResponse:
        selector = _parse_selector(query.get("fieldSelector", ""))
        raw_rv = query.get("resourceVersion", "")
        timeout = float(query.get("timeoutSeconds", "1800"))
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        since = int(raw_rv) if raw_rv.isdigit() else 0
        if raw_rv not in ("", "0") and since < self.compacted:
            return await self._watch_gone(request, plural, since)
        watcher = _Watcher(plural, namespace, selector,
                           labels=_parse_labels(query.get("labelSelector", "")))
        # Replay and subscribe with no await in between, so no change falls in the gap.
        if raw_rv in ("", "0"):
            backlog = [_Change(self.rv, "ADDED", plural, None, copy.deepcopy(o))
                       for (p, _, _), o in sorted(self.objects.items()) if p == plural]
        else:
            backlog = [c for c in self.history if c.rv > since and c.plural == plural]
        for change in backlog:
            watcher.queue.put_nowait(change)
        self._watchers.add(watcher)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            await self._stream(response, watcher, timeout, bookmarks)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watchers.discard(watcher)
        return response

    async def _stream(self, response: web.StreamResponse, watcher: _Watcher, timeout: float,
                      bookmarks: bool) -> None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            wait = min(left, self.bookmark_interval) if bookmarks else left
            try:
                change = await asyncio.wait_for(watcher.queue.get(), wait)
            except TimeoutError:
                if bookmarks:
                    await _send(response, _bookmark(watcher.plural, self.rv))
                continue
            if change is None:
                return  # dropped by the test
            event = _filtered(change, watcher)
            if event is not None:
                await _send(response, event)

    async def _watch_gone(self, request: web.Request, plural: str,
                          since: int = 0) -> web.StreamResponse:
        self._log(request, "watch", plural, "", web.Response(status=200))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await _send(response, {"type": "ERROR", "object": status_object(
            410, "Expired", f"too old resource version: {since} ({self.compacted})")})
        return response


# -- helpers --------------------------------------------------------------------------------------


def _discovery(path: str) -> Obj | None:
    """The legacy discovery documents kubectl reads to map `pods` to a path: /api, /apis and
    each group version's resource list (no aggregated discovery: kubectl falls back)."""
    versions = sorted({r.group_version for r in RESOURCES.values()})
    groups = [gv for gv in versions if "/" in gv]
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": gv.split("/")[0], "versions": [{"groupVersion": gv,
                                                     "version": gv.split("/")[1]}],
             "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]}}
            for gv in groups]}
    gv = "v1" if path == "/api/v1" else path.removeprefix("/apis/")
    if gv not in versions or (gv != "v1" and not path.startswith("/apis/")):
        return None
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    resources = [{"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                  "kind": r.kind, "verbs": verbs} for r in RESOURCES.values()
                 if r.group_version == gv]
    resources += [{"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                   "kind": r.kind, "verbs": ["get", "patch", "update"]}
                  for r in RESOURCES.values() if r.group_version == gv
                  for sub in r.subresources]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}


def _verb(method: str, named: bool, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else ("get" if named else "list")
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower())


def _error(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status_object(code, reason, message), status=code)


def _fault_response(fault: Fault) -> web.Response:
    reasons = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError",
               503: "ServiceUnavailable", 504: "Timeout", 404: "NotFound"}
    reason = reasons.get(fault.status, "InternalError")
    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
    return web.json_response(status_object(fault.status, reason, f"injected {reason}"),
                             status=fault.status, headers=headers)


async def _body(request: web.Request) -> Any:
    if not request.can_read_body:
        return None
    if "protobuf" in request.content_type or "cbor" in request.content_type:
        # JSON only, but for the CSR kubectl's typed client sends in protobuf (kubeproto).
        decoded = kubeproto.decode_csr(await request.read())
        if decoded is None:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of type {request.content_type} is not supported")
        return decoded
    text = await request.text()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(400, "BadRequest", f"invalid JSON: {exc}") from exc


async def _send(response: web.StreamResponse, event: Obj) -> None:
    await response.write(json.dumps(event).encode() + b"\n")


def _with_kind(plural: str, obj: Obj) -> Obj:
    resource = RESOURCES[plural]
    return {"kind": resource.kind, "apiVersion": resource.group_version, **copy.deepcopy(obj)}


def _bookmark(plural: str, rv: int) -> Obj:
    resource = RESOURCES[plural]
    return {"type": "BOOKMARK", "object": {"kind": resource.kind,
                                           "apiVersion": resource.group_version,
                                           "metadata": {"resourceVersion": str(rv)}}}


def _field(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _parse_selector(text: str) -> list[tuple[str, str, str]]:
    out = []
    for term in filter(None, text.split(",")):
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = term.partition(op)
                out.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            raise ApiError(400, "BadRequest", f"invalid field selector {term!r}")
    return out


def _selected(obj: Obj | None, selector: list[tuple[str, str, str]]) -> bool:
    if obj is None:
        return False
    return all((_field(obj, key) == value) == (op == "=") for key, op, value in selector)


def _parse_labels(text: str) -> list[tuple[str, str, str]]:
    """A label selector's equality terms (`k=v`, `k==v`, `k!=v`) and `k` / `!k` (exists)."""
    out = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = term.partition(op)
                out.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            out.append((term.lstrip("!"), "!exists" if term.startswith("!") else "exists", ""))
    return out


def _labelled(obj: Obj, labels: list[tuple[str, str, str]]) -> bool:
    have = obj.get("metadata", {}).get("labels") or {}
    return all(
        (key in have) == (op == "exists") if op in ("exists", "!exists")
        else (have.get(key) == value) == (op == "=") for key, op, value in labels)


def _filtered(change: _Change, watcher: _Watcher) -> Obj | None:
    def visible(obj: Obj | None) -> bool:
        if obj is None:
            return False
        ns = obj.get("metadata", {}).get("namespace", "")
        return (watcher.namespace is None or ns == watcher.namespace) and \
            _selected(obj, watcher.selector) and _labelled(obj, watcher.labels)

    was, now = visible(change.old), visible(change.new)
    if change.type == "DELETED":
        type_ = "DELETED" if was or now else None
    elif now:
        type_ = "MODIFIED" if was else "ADDED"
    else:
        type_ = "DELETED" if was else None
    if type_ is None:
        return None
    obj = dict(change.new)
    obj["metadata"] = {**obj["metadata"], "resourceVersion": str(change.rv)}
    return {"type": type_, "object": _with_kind(change.plural, obj)}


def _check_preconditions(plural: str, name: str, old: Obj, uid: Any, rv: Any) -> None:
    meta = old["metadata"]
    if uid and uid != meta["uid"]:
        raise ApiError(409, "Conflict", (
            f'Operation cannot be fulfilled on {plural} "{name}": the UID in the precondition '
            f"({uid}) does not match the UID in record ({meta['uid']}). The object might have "
            "been deleted and then recreated"), name=name, kind=plural)
    if rv and rv != meta["resourceVersion"]:
        raise ApiError(409, "Conflict", (
            f'Operation cannot be fulfilled on {plural} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"),
            name=name, kind=plural)


def _restrict(plural: str, old: Obj, new: Obj, subresource: str) -> Obj:
    """What a write may change: only `status` through /status; never status of pods/nodes
    through the main resource (their status has its own subresource)."""
    new = copy.deepcopy(new)
    new.pop("kind", None)
    new.pop("apiVersion", None)
    if subresource == "status":
        out = copy.deepcopy(old)
        out["status"] = new.get("status", {})
        return out
    if subresource == "approval":  # only the Approved/Denied conditions
        out = copy.deepcopy(old)
        out.setdefault("status", {})["conditions"] = (new.get("status") or {}).get(
            "conditions") or []
        return out
    if "status" in RESOURCES[plural].subresources:
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    new.setdefault("metadata", {})
    return new


def _csr_condition(type_: str, reason: str, message: str) -> Obj:
    now = now_rfc3339()
    return {"type": type_, "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now}


def _deletes_now(pod: Obj, grace: int | None) -> bool:
    phase = pod.get("status", {}).get("phase")
    unscheduled = not pod.get("spec", {}).get("nodeName")
    return grace == 0 or unscheduled or phase in ("Succeeded", "Failed")


def _default_pod(pod: Obj) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
    pod.setdefault("status", {"phase": "Pending", "qosClass": "BestEffort"})


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _strategic(target: Any, patch: Any, path: tuple[str, ...]) -> Any:
    """A strategic merge patch: maps merge, lists with a merge key merge by it, others replace."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith(("$setElementOrder/", "$retainKeys", "$deleteFromPrimitiveList/")):
            continue
        sub = (*path, key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and sub in _MERGE_KEYS:
            out[key] = _merge_list(out.get(key) or [], value, _MERGE_KEYS[sub], sub)
        elif isinstance(value, dict):
            out[key] = _strategic(out.get(key), value, sub)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_list(old: list[Any], patch: list[Any], key: str, path: tuple[str, ...]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch
                if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    out = [copy.deepcopy(i) for i in old]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise ApiError(422, "Invalid", f"{'.'.join(path[1:])}: merge key {key!r} missing")
        index = next((n for n, i in enumerate(out) if i.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append(copy.deepcopy(item))
        else:
            out[index] = _strategic(out[index], item, path)
    return out



# -- objects and a cluster-mode rig for tests ------------------------------------------------


def pod_object(name: str, *, node: str, namespace: str = "default", grace: int = 1,
               command: str = "sleep 1000000", scheduled: bool = True, **spec: Any) -> Obj:
    """A busybox pod bound to `node`, with the scheduler's PodScheduled condition."""
    obj: Obj = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"test": "nodelet"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                 "containers": [{"name": "main", "image": "localhost/nodelet/busybox:latest",
                                 "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", command]}], **spec},
    }
    if scheduled:
        obj["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
             "lastTransitionTime": now_rfc3339()}]}
    return obj


class StubRuntime:
    """The CRI Version/Status a node reports, for node tests that need no containers (the real
    runtime is used by the end-to-end test); same Protocol as `cri.RuntimeClient`."""

    def __init__(self) -> None:
        from nodelet.model.core import runtime as rt

        self.rt = rt
        self.network_ready = True

    async def version(self) -> Any:
        return self.rt.VersionInfo("containerd", "1.6.20", "v1")

    async def status(self) -> Any:
        rt = self.rt
        return rt.RuntimeStatus((
            rt.RuntimeCondition("RuntimeReady", True),
            rt.RuntimeCondition("NetworkReady", self.network_ready,
                                "" if self.network_ready else "NetworkPluginNotReady",
                                "" if self.network_ready else "cni config uninitialized"),
        ))


class ClusterRig:
    """`ClusterMode` against a `KubeApiServer`, with a real status manager and event recorder
    (checkpoint in `root`), fast timings, and the desired pods it announces in `desired`."""

    def __init__(self, server: KubeApiServer, root: Path, *, node: str = "n1",
                 **overrides: Any) -> None:
        from nodelet.adapters import checkpoint
        from nodelet.services import cluster, recording, statuses

        self.server, self.node = server, node
        self.checkpoint = checkpoint.Checkpoint.open(root / "checkpoint.db")
        clock = lambda: datetime.now(UTC)  # noqa: E731
        self.statuses = statuses.StatusManager(checkpoint=self.checkpoint, clock=clock)
        self.recorder = recording.EventRecorder(checkpoint=self.checkpoint, node_name=node,
                                                clock=clock, max_events=1000)
        self.runtime = StubRuntime()
        self.announced: list[dict[Any, Any]] = []
        self.objects_changed: list[set[Any]] = []
        defaults: dict[str, Any] = dict(
            kubeconfig=server.write_kubeconfig(root / "kubeconfig", node=node),
            status_resync_period=0.5, status_retry=0.05, status_retry_max=0.5,
            node_status_period=0.2, lease_renew_period=0.2,
            watch_backoff=0.05, watch_backoff_max=0.2, watch_inactivity=5.0, watch_timeout=30,
            delete_retry=0.05, delete_retry_max=0.2, start_timeout=5.0)
        self.mode = cluster.ClusterMode(
            settings=cluster.ClusterSettings(**(defaults | overrides)), node_name=node,
            host_ip="192.0.2.10", pod_cidrs=("10.77.0.0/24",), statuses=self.statuses,
            recorder=self.recorder, runtime=self.runtime, on_pods=self._on_pods,
            on_objects=self.objects_changed.append, clock=clock)

    def _on_pods(self, desired: Any) -> None:
        self.announced.append(dict(desired))

    @property
    def desired(self) -> dict[Any, Any]:
        return self.announced[-1] if self.announced else {}

    async def __aenter__(self) -> ClusterRig:
        await self.mode.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.mode.stop()
        self.checkpoint.close()
