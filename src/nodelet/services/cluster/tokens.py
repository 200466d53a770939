"""The service account token manager of cluster mode (the kubelet's pkg/kubelet/token).

`TokenManager.token(request)` returns a pod's projected token from its cache, or asks the
TokenRequest API (`fetch`, POST `serviceaccounts/<name>/token`) when there is none or the
cached one must be refreshed (`model.core.tokens.requires_refresh`: 80 % of its lifetime or
24 h, less a jitter). As in the kubelet, a failed refresh keeps the cached token while it is
still valid (logged); only a token that cannot be had at all, or has expired, is an error.
Tokens are cached per (service account, namespace, audiences, expiration, bound pod UID);
`forget_pod(uid)` drops a gone pod's tokens, and expired ones are dropped too.

The kubelet refreshes a token when it next sets up the pod's volumes. Here `run()` (the
`token-refresh` task) sleeps until the earliest refresh time of the cached tokens and then
calls `on_due(pod_uid)`, so the pod's worker syncs and its volume's file is rewritten in place
(atomically) without waiting for a periodic resync; a refresh that keeps failing is retried
every `retry` seconds, doubling to `retry_max`.

kube-apiserver's NodeRestriction checks a TokenRequest against the server's pod cache, which
can lag behind the watch that brought the pod here: the first request for a pod just bound to
this node may be refused (403 "bound to a pod scheduled on a different node", or 404 for the
pod). Such an answer is asked again after `lag_retry` s, doubling, `lag_retries` times, before
it counts as a failure.

Exceptions::

    FetchError      no token for a pod: `.message` is the kubelet's text (`failed to fetch
                    token: <the API's words>`), shown in the FailedMount event
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import pods, tokens

log = logging.getLogger(__name__)

Request = tokens.TokenRequest
Token = tokens.Token
Fetch = Callable[[Request], Awaitable[dict[str, Any]]]
Key = tuple[str, str, tuple[str, ...], int, pods.PodUID]


class FetchError(errors.MessageError):
    """No usable token for a pod's projected volume."""


@dataclasses.dataclass
class _Entry:
    request: tokens.TokenRequest
    token: tokens.Token
    jitter: float  # drawn once per token, in [0, 1)
    due: datetime  # when `on_due` is next called for it
    retries: int = 0


class TokenManager:
    """Projected tokens of the pods of this node (see the module docstring)."""

    def __init__(
        self,
        *,
        fetch: Fetch,
        clock: Callable[[], datetime],
        on_due: Callable[[pods.PodUID], None] = lambda uid: None,
        retry: float = 1.0,
        retry_max: float = 60.0,
        lag_retry: float = 0.1,
        lag_retries: int = 4,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """`fetch(request)`: the API's TokenRequest answer, raising an exception with the
        API's words; `clock()`: aware UTC now; `on_due(uid)`: a pod's token needs a refresh."""
        self._fetch = fetch
        self._clock = clock
        self._on_due = on_due
        self._retry = retry
        self._retry_max = retry_max
        self._lag_retry = lag_retry
        self._lag_retries = lag_retries
        self._jitter = jitter
        self._cache: dict[Key, _Entry] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._changed = asyncio.Event()
        self.fetches = 0  # TokenRequests sent (successful or not)

    async def token(self, request: tokens.TokenRequest) -> tokens.Token:
        """The token for `request`, fetched when missing or due; raises FetchError."""
        key = request.key
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # two syncs of one pod (or two volumes) ask once
            entry = self._cache.get(key)
            now = self._clock()
            if entry is not None and not tokens.requires_refresh(entry.token, now, entry.jitter):
                return entry.token
            try:
                token = await self._ask(request)
            except FetchError as exc:
                return self._refresh_failed(entry, request, exc, now)
            self._store(request, token)
            return token

    async def _ask(self, request: tokens.TokenRequest) -> tokens.Token:
        for attempt in range(self._lag_retries + 1):
            self.fetches += 1
            try:
                answer = await self._fetch(request)
                return tokens.token_from_answer(answer, request)
            except Exception as exc:  # the adapter's KubeError, or a bad answer
                detail = exc.message if isinstance(exc, errors.MessageError) else str(exc)
                if attempt < self._lag_retries and _cache_lag(exc, request):
                    log.info("pod %s/%s: TokenRequest refused before the API server's cache "
                             "has the pod, asking again: %s", request.namespace,
                             request.pod_name, detail)
                    await asyncio.sleep(self._lag_retry * 2 ** attempt)
                    continue
                raise FetchError(f"failed to fetch token: {detail}") from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _refresh_failed(self, entry: _Entry | None, request: tokens.TokenRequest,
                        exc: FetchError, now: datetime) -> tokens.Token:
        if entry is None:
            raise exc
        if tokens.expired(entry.token, now):
            raise FetchError(f"token of service account {request.namespace}/"
                             f"{request.service_account} for pod {request.pod_name} expired "
                             f"and refresh failed: {exc.message}") from exc
        log.error("pod %s/%s: keeping the service account token of %s, valid until %s: "
                  "couldn't update it: %s", request.namespace, request.pod_name,
                  request.service_account, entry.token.expires.isoformat(), exc.message)
        entry.retries += 1
        delay = min(self._retry * 2 ** (entry.retries - 1), self._retry_max)
        entry.due = now + timedelta(seconds=delay)
        self._changed.set()
        return entry.token

    def _store(self, request: tokens.TokenRequest, token: tokens.Token) -> None:
        jitter = self._jitter()
        self._cache[request.key] = _Entry(request, token, jitter,
                                          due=tokens.refresh_at(token, jitter))
        log.info("pod %s/%s: service account token of %s, valid until %s",
                 request.namespace, request.pod_name, request.service_account,
                 token.expires.isoformat())
        self._changed.set()

    def forget_pod(self, uid: pods.PodUID) -> None:
        """The pod is gone: drop its tokens (the kubelet's DeleteServiceAccountToken)."""
        for key in [k for k, e in self._cache.items() if e.request.pod_uid == uid]:
            del self._cache[key]
        # Also the locks of keys never cached (their first fetch failed): keyed by pod UID.
        for key in [k for k in self._locks if k[4] == uid]:
            del self._locks[key]
        self._changed.set()

    def cached(self) -> list[tokens.TokenRequest]:
        return [e.request for e in self._cache.values()]

    async def run(self) -> None:
        """Wake the pods whose tokens are due, for ever (the `token-refresh` task)."""
        while True:
            self._changed.clear()
            now = self._clock()
            self._drop_expired(now)
            due = [e for e in self._cache.values() if e.due <= now]
            for entry in due:
                # Woken once per due time: the pod's sync fetches (and sets a new due time);
                # if it does not, try again after the retry delay.
                entry.retries += 1
                entry.due = now + timedelta(seconds=min(
                    self._retry * 2 ** (entry.retries - 1), self._retry_max))
                self._on_due(entry.request.pod_uid)
            upcoming = [e.due for e in self._cache.values()]
            wait = (min(upcoming) - now).total_seconds() if upcoming else None
            try:
                async with asyncio.timeout(max(wait, 0.0) if wait is not None else None):
                    await self._changed.wait()
            except TimeoutError:
                pass

    def _drop_expired(self, now: datetime) -> None:
        """Expired tokens are of no use (the kubelet's cleanup, every minute there)."""
        for key in [k for k, e in self._cache.items() if tokens.expired(e.token, now)]:
            del self._cache[key]
            self._locks.pop(key, None)


# NodeRestriction's words when its pod cache does not show the pod bound to this node yet.
_NOT_HERE_YET = "bound to a pod scheduled on a different node"


def _cache_lag(exc: Exception, request: tokens.TokenRequest) -> bool:
    """Whether `exc` is NodeRestriction refusing because its pod cache lags (see the module
    doc): a 403 with its words, or a 404 naming the bound pod."""
    status = getattr(exc, "status", 0)
    text = str(exc)
    return (status == 403 and _NOT_HERE_YET in text) or (
        status == 404 and f'pods "{request.pod_name}" not found' in text)
