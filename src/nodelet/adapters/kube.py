"""nodelet's own thin Kubernetes API client (aiohttp): just the calls a node agent makes.

Objects go in and out as plain JSON dicts (`apijson.Obj`); no third-party type leaves this module.
Every request takes a token from the client's rate limiter (`helpers.ratelimit.TokenBucket`,
the kubelet's `--kube-api-qps/--kube-api-burst`) unless the caller took one ahead with
`reserve()` — the status sync does that so it can pick the newest status *after* the wait.
Requests are not retried here: callers own their retry policy (back-off, coalescing); only
`Reflector`, the list+watch loop, retries by itself.

Calls: pods (list, watch, get, create, PATCH status as a strategic merge patch with the pod UID as
precondition, DELETE with grace period and UID precondition), events (create, patch), nodes
(get, create, patch, patch status), leases (get, create, replace), service account tokens
(create: TokenRequest); any collection (list,
watch: configmaps and secrets are read that way, one object each, by `Reflector`).

Exceptions (all carry `.status` — the HTTP code, 0 for transport errors — and `.reason`)::

    KubeError                  base class: any failed API call
    ├── Conflict               409: stale resourceVersion or UID precondition failed
    │   └── AlreadyExists      409 on create: the object exists
    ├── NotFound               404
    ├── Gone                   410: resourceVersion too old (watch: relist)
    ├── TooManyRequests        429; `.retry_after` seconds from the Retry-After header
    └── Unavailable            5xx, timeouts, refused or dropped connections: retry later
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from nodelet.adapters import kubeconfig
from nodelet.helpers import backoff, ratelimit
from nodelet.model.core import apijson

log = logging.getLogger(__name__)


STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


class KubeError(Exception):
    """A failed Kubernetes API call; `status` is the HTTP code (0: no answer)."""

    def __init__(self, message: str, *, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class Conflict(KubeError):
    """409: the object changed since it was read, or a UID precondition failed."""


class AlreadyExists(Conflict):
    """409 on create: an object of that name exists."""


class NotFound(KubeError):
    """404: no such object."""


class Gone(KubeError):
    """410: the resourceVersion is too old; list again."""


class TooManyRequests(KubeError):
    """429: the server asks to slow down; wait `retry_after` seconds (None: not said)."""

    def __init__(self, message: str, *, retry_after: float | None, status: int = 429,
                 reason: str = "TooManyRequests") -> None:
        super().__init__(message, status=status, reason=reason)
        self.retry_after = retry_after


class Unavailable(KubeError):
    """5xx, a timeout, or no connection: the API server is not answering; retry later."""


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: apijson.Obj


@dataclass(frozen=True)
class ClientSettings:
    """Timeouts of API calls (seconds)."""

    # Deadline of one ordinary request (the kubelet's client uses 10 s for node status calls).
    request_timeout: float = 10.0
    # Server-side length of one watch (`timeoutSeconds`); the watch is then simply renewed.
    watch_timeout: int = 300
    # A watch that delivers nothing, not even a bookmark, for this long is reconnected.
    watch_inactivity: float = 120.0
    # Reconnect back-off of list+watch after errors: initial and cap.
    watch_backoff: float = 0.5
    watch_backoff_max: float = 30.0


def _error(status: int, body: Any, headers: Mapping[str, str], what: str) -> KubeError:
    reason = body.get("reason", "") if isinstance(body, dict) else ""
    detail = body.get("message", "") if isinstance(body, dict) else str(body)[:200]
    message = f"{what}: {status} {reason or ''} {detail}".rstrip()
    if status == 409:
        cls: type[KubeError] = AlreadyExists if reason == "AlreadyExists" else Conflict
        return cls(message, status=status, reason=reason)
    if status == 404:
        return NotFound(message, status=status, reason=reason)
    if status == 410:
        return Gone(message, status=status, reason=reason)
    if status == 429:
        return TooManyRequests(message, retry_after=_retry_after(headers), reason=reason)
    if status >= 500:
        return Unavailable(message, status=status, reason=reason)
    return KubeError(message, status=status, reason=reason)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After", "")
    return float(value) if value.strip().isdigit() else None


def pod_path(namespace: str, name: str = "", sub: str = "") -> str:
    return _path("/api/v1", "pods", namespace, name, sub)


def core_path(plural: str, namespace: str = "", name: str = "") -> str:
    """The path of a core/v1 collection (`name` empty: to list and watch) or object."""
    return _path("/api/v1", plural, namespace, name)


def group_path(group_version: str, plural: str, namespace: str = "", name: str = "") -> str:
    """The path of an object (or collection) of an API group (`storage.k8s.io/v1`)."""
    return _path(f"/apis/{group_version}", plural, namespace, name)


def _path(prefix: str, plural: str, namespace: str, name: str = "", sub: str = "") -> str:
    path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
    if name:
        path += f"/{name}"
    if sub:
        path += f"/{sub}"
    return path


_LEASES = "/apis/coordination.k8s.io/v1"


class KubeClient:
    """A connection to one API server. Close it with `close()`."""

    def __init__(
        self,
        config: kubeconfig.KubeConfig,
        *,
        limiter: ratelimit.TokenBucket | None = None,
        settings: ClientSettings | None = None,
        user_agent: str = "nodelet",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """`tls`: `config.ssl_context()` made already (on a thread: it writes files)."""
        self._config = config
        self._limiter = limiter or ratelimit.TokenBucket(0, 1)
        self.settings = settings or ClientSettings()
        headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        # True: aiohttp's default verification (plain http ignores it).
        self._ssl: ssl.SSLContext | bool = tls or config.ssl_context() or True
        # No connection limit (aiohttp's default is 100): without HTTP/2 every open watch holds
        # a connection — one per ConfigMap/Secret pods read — and a full pool would stall every
        # other call. Requests are bounded by the rate limiter instead.
        self._session = aiohttp.ClientSession(
            headers=headers, connector=aiohttp.TCPConnector(limit=0))
        self._reserved = 0
        self.calls = 0  # requests sent (watches included)

    async def close(self) -> None:
        await self._session.close()

    def use_config(self, config: kubeconfig.KubeConfig, *,
                   tls: ssl.SSLContext | None = None) -> None:
        """Authenticate new requests with `config` (a rotated client certificate; `tls` its
        `ssl_context()` made on a thread). Requests and watches in flight finish on their
        connections; new ones open connections with the new TLS context (aiohttp pools
        connections per context)."""
        self._ssl = tls or config.ssl_context() or True
        if config.token:
            self._session.headers["Authorization"] = f"Bearer {config.token}"
        else:
            self._session.headers.pop("Authorization", None)
        self._config = config

    @property
    def limiter(self) -> ratelimit.TokenBucket:
        return self._limiter

    async def reserve(self) -> None:
        """Take a rate-limiter token now for the next request (used to coalesce: the caller
        waits first, then builds the request from the newest data)."""
        await self._limiter.acquire()
        self._reserved += 1

    async def _throttle(self) -> None:
        if self._reserved > 0:
            self._reserved -= 1
            return
        await self._limiter.acquire()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> apijson.Obj:
        """One API call; the decoded JSON answer. Raises KubeError (see the module doc)."""
        await self._throttle()
        what = f"{method} {path}"
        data = json.dumps(body).encode() if body is not None else None
        timeout = aiohttp.ClientTimeout(total=self.settings.request_timeout)
        self.calls += 1
        try:
            async with self._session.request(
                method, self._config.server + path, params=params, data=data, ssl=self._ssl,
                headers={"Content-Type": content_type} if data is not None else None,
                timeout=timeout,
            ) as response:
                text = await response.text()
                answer = _decode(text)
                if response.status >= 400:
                    raise _error(response.status, answer, response.headers, what)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unavailable(f"{what}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(answer, dict):
            raise KubeError(f"{what}: expected a JSON object, got {text[:100]!r}")
        return answer

    # -- list + watch ---------------------------------------------------------------------------

    async def list_objects(
        self, path: str, *, field_selector: str = "", label_selector: str = "",
        page_size: int = 0,
    ) -> tuple[list[apijson.Obj], str]:
        """The items at `path` and the list's resourceVersion (to watch from). With
        `page_size`, in pages of that many items (`limit` and `continue`, as kubectl's 500);
        an expired continue token raises Gone: list again."""
        params = {"fieldSelector": field_selector} if field_selector else {}
        if label_selector:
            params["labelSelector"] = label_selector
        if page_size:
            params["limit"] = str(page_size)
        items: list[apijson.Obj] = []
        while True:
            answer = await self.request("GET", path, params=params or None)
            items += [i for i in answer.get("items") or [] if isinstance(i, dict)]
            meta = answer.get("metadata") or {}
            if not page_size or not meta.get("continue"):
                return items, str(meta.get("resourceVersion", ""))
            params["continue"] = str(meta["continue"])

    async def watch(
        self, path: str, *, resource_version: str, field_selector: str = "",
        label_selector: str = "",
    ) -> AsyncGenerator[WatchEvent, None]:
        """Changes at `path` after `resource_version`, bookmarks included, until the server
        ends the watch (`watch_timeout`). Raises Gone (relist), Unavailable (nothing received
        for `watch_inactivity` seconds, or the connection broke) and other KubeErrors."""
        await self._throttle()
        params = {"watch": "1", "resourceVersion": resource_version,
                  "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(self.settings.watch_timeout)}
        if field_selector:
            params["fieldSelector"] = field_selector
        if label_selector:
            params["labelSelector"] = label_selector
        what = f"WATCH {path}"
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.settings.request_timeout)
        self.calls += 1
        try:
            async with self._session.get(self._config.server + path, params=params,
                                         ssl=self._ssl, timeout=timeout) as response:
                if response.status >= 400:
                    raise _error(response.status, _decode(await response.text()),
                                 response.headers, what)
                while True:
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
                    # cancellation that arrives as the line does, leaving the watch running.
                    async with asyncio.timeout(self.settings.watch_inactivity):
                        line = await response.content.readline()
                    if not line:
                        return
                    if line.strip():
                        yield _watch_event(line, what)
        except TimeoutError as exc:
            raise Unavailable(f"{what}: nothing received for "
                              f"{self.settings.watch_inactivity}s") from exc
        except aiohttp.ClientError as exc:
            raise Unavailable(f"{what}: {type(exc).__name__}: {exc}") from exc

    # -- pods -----------------------------------------------------------------------------------

    async def get_pod(self, namespace: str, name: str) -> apijson.Obj:
        return await self.request("GET", pod_path(namespace, name))

    async def create_pod(self, namespace: str, pod: apijson.Obj) -> apijson.Obj:
        """POST a pod (mirror pods); AlreadyExists when one of that name exists."""
        return await self.request("POST", pod_path(namespace), body=pod)

    async def patch_pod_status(
        self, namespace: str, name: str, uid: str, status: apijson.Obj
    ) -> apijson.Obj:
        """Strategic-merge `status` into the pod's status, only if the pod still has `uid`
        (Conflict otherwise: it was deleted and re-created under the same name)."""
        body = {"metadata": {"uid": uid}, "status": status}
        return await self.request("PATCH", pod_path(namespace, name, "status"), body=body,
                                  content_type=STRATEGIC)

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str, grace: int = 0
    ) -> apijson.Obj:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace,
                "preconditions": {"uid": uid}}
        return await self.request("DELETE", pod_path(namespace, name), body=body)

    # -- service account tokens -------------------------------------------------------------------

    async def create_token(
        self, namespace: str, service_account: str, request: apijson.Obj
    ) -> apijson.Obj:
        """POST an authentication.k8s.io/v1 TokenRequest to the ServiceAccount's `token`
        subresource; the answer carries `status.token` and `status.expirationTimestamp`."""
        return await self.request(
            "POST", _path("/api/v1", "serviceaccounts", namespace, service_account, "token"),
            body=request)

    # -- events ---------------------------------------------------------------------------------

    async def create_event(self, namespace: str, event: apijson.Obj) -> apijson.Obj:
        return await self.request("POST", _path("/api/v1", "events", namespace), body=event)

    async def patch_event(self, namespace: str, name: str, patch: apijson.Obj) -> apijson.Obj:
        return await self.request("PATCH", _path("/api/v1", "events", namespace, name),
                                  body=patch, content_type=STRATEGIC)

    # -- nodes ----------------------------------------------------------------------------------

    async def get_node(self, name: str) -> apijson.Obj:
        return await self.request("GET", _path("/api/v1", "nodes", "", name))

    async def create_node(self, node: apijson.Obj) -> apijson.Obj:
        return await self.request("POST", "/api/v1/nodes", body=node)

    async def patch_node(self, name: str, patch: apijson.Obj) -> apijson.Obj:
        return await self.request("PATCH", _path("/api/v1", "nodes", "", name), body=patch,
                                  content_type=STRATEGIC)

    async def patch_node_status(self, name: str, patch: apijson.Obj) -> apijson.Obj:
        return await self.request("PATCH", _path("/api/v1", "nodes", "", name, "status"),
                                  body=patch, content_type=STRATEGIC)

    # -- runtime classes --------------------------------------------------------------------------

    async def get_runtime_class(self, name: str) -> apijson.Obj:
        """A node.k8s.io/v1 RuntimeClass (NotFound when there is none of that name)."""
        return await self.request("GET", _path("/apis/node.k8s.io/v1", "runtimeclasses", "",
                                               name))

    # -- leases ---------------------------------------------------------------------------------

    async def get_lease(self, namespace: str, name: str) -> apijson.Obj:
        return await self.request("GET", _path(_LEASES, "leases", namespace, name))

    async def create_lease(self, namespace: str, lease: apijson.Obj) -> apijson.Obj:
        return await self.request("POST", _path(_LEASES, "leases", namespace), body=lease)

    async def replace_lease(self, namespace: str, name: str, lease: apijson.Obj) -> apijson.Obj:
        """PUT; Conflict when `lease` carries a stale resourceVersion."""
        return await self.request("PUT", _path(_LEASES, "leases", namespace, name), body=lease)

    # -- certificate signing requests (TLS bootstrap and rotation) -------------------------------

    async def create_csr(self, csr: apijson.Obj) -> apijson.Obj:
        return await self.request("POST", CSR_PATH, body=csr)


# certificates.k8s.io/v1 CertificateSigningRequests (cluster-scoped): create, list, watch.
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def _decode(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return text


def _watch_event(line: bytes, what: str) -> WatchEvent:
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise Unavailable(f"{what}: undecodable watch line {line[:100]!r}") from exc
    type_, obj = event.get("type"), event.get("object")
    if not isinstance(obj, dict) or not isinstance(type_, str):
        raise Unavailable(f"{what}: malformed watch event {line[:100]!r}")
    if type_ == "ERROR":
        code = int(obj.get("code") or 500)
        raise _error(code, obj, {}, what)
    return WatchEvent(type_, obj)


def resource_version(obj: apijson.Obj) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


class Reflector:
    """List, then watch from the list's resourceVersion, for ever: the client-go reflector.

    Keeps `store` (objects by UID) current and calls `on_change(store)` after the initial list,
    every relist and every change (bookmarks only move the resourceVersion). During the call
    `changed` is the UID of the one object a watch event added, changed or removed, None after
    a (re)list: a consumer can update itself by that one object, not by the whole store.
    A 410 Gone relists at once; other failures retry after a doubling back-off; a watch the
    server ends is renewed from the last resourceVersion seen.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        path: str,
        field_selector: str = "",
        label_selector: str = "",
        page_size: int = 0,
        on_change: Callable[[Mapping[str, apijson.Obj]], None],
        name: str = "reflector",
    ) -> None:
        self._client = client
        self._path = path
        self._selector = field_selector
        self._labels = label_selector
        self._page_size = page_size  # 0: one list call (the API server's default)
        self._on_change = on_change
        self._name = name
        settings = client.settings
        self._backoff = backoff.Backoff(settings.watch_backoff, settings.watch_backoff_max)
        self.store: dict[str, apijson.Obj] = {}
        self.resource_version = ""
        self.synced = False
        self.listed = asyncio.Event()  # set once the first list is in `store`
        self.lists = 0
        self.last_error: str | None = None
        self.last_event = 0.0  # monotonic time of the last list or watch event
        self.changed: str | None = None  # see the class doc

    async def run(self) -> None:
        while True:
            try:
                if not self.resource_version:
                    await self._list()
                await self._watch()
            except Gone as exc:
                log.info("%s: %s; listing again", self._name, exc)
                self.resource_version = ""
            except KubeError as exc:
                self.last_error = str(exc)
                delay = exc.retry_after if isinstance(exc, TooManyRequests) and \
                    exc.retry_after else self._backoff.next_delay()
                log.warning("%s: %s; retrying in %.1fs", self._name, exc, delay)
                await asyncio.sleep(delay)

    async def _list(self) -> None:
        items, rv = await self._client.list_objects(
            self._path, field_selector=self._selector, label_selector=self._labels,
            page_size=self._page_size)
        self.store = {str(i["metadata"]["uid"]): i for i in items if i.get("metadata")}
        self.resource_version = rv
        self.lists += 1
        self.synced = True
        self.listed.set()
        self.last_error = None
        self.last_event = time.monotonic()
        self.changed = None
        self._on_change(self.store)

    async def _watch(self) -> None:
        events = self._client.watch(self._path, resource_version=self.resource_version,
                                    field_selector=self._selector, label_selector=self._labels)
        async for event in events:
            self._backoff.reset()
            self.last_error = None
            self.last_event = time.monotonic()
            rv = resource_version(event.object)
            if rv:
                self.resource_version = rv
            if event.type == "BOOKMARK":
                continue
            uid = str(event.object.get("metadata", {}).get("uid", ""))
            if event.type == "DELETED":
                self.store.pop(uid, None)
            else:
                self.store[uid] = event.object
            self.changed = uid
            self._on_change(self.store)
