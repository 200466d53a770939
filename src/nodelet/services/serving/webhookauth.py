"""Cluster mode's authenticator and authorizer for the node server: bearer tokens checked with
TokenReview, requests authorized with SubjectAccessReview, both asked of the API server the
node joined, with cached answers (the kubelet's `--authentication-token-webhook` and
`--authorization-mode=Webhook`; `model.core.reviews` builds and reads the reviews).

Both implement the Protocols of `model.core.nodeauth`. The API client comes from
`client_of()` — cluster mode's review client, with its own rate limit, so reviews never take
the tokens of pod statuses (and the Lease has a client of its own) — and is None until
cluster mode has started (the node server starts first, so the Node can advertise its port):
meanwhile a token authenticates nobody (401) and no request is authorized (500, as the
kubelet answers an authorization error). An API error is logged (at most once a minute, with
a count of the ones left out) and answered the same way, never cached.

Flood protection, since anyone who reaches port 10250 can make the node ask a review (a
random token is a new TokenReview):
- identical reviews in flight are merged: the first asker's answer is everyone's (as
  k8s.io/apiserver's cached token authenticator does with its singleflight group);
- TokenReviews of unknown tokens and SubjectAccessReviews of users already authenticated (a
  client certificate, a cached token) each have their own `ReviewGate` capping their reviews
  in flight (and, in cluster mode, their own API client and rate limit), so a flood of random
  tokens fills only the first: kube-apiserver's client certificate and a cached token are
  still authorized. A request needing one more review than its gate allows gets
  `nodeauth.Overloaded` (the server's 429 with Retry-After) instead of a place in a queue;
- each client address may have a TokenReview of an unknown token asked at most `qps` times a
  second (burst `burst`, `ratelimit.PerKey`); beyond that, Overloaded too;
- answers "no" (a token not authenticated, a request denied) are kept in caches of their own
  (`NEGATIVE_CACHE_SIZE` each), so a flood of them never evicts the "yes" answers
  (`POSITIVE_CACHE_SIZE` each) that metrics-server's token or the API server's user rely on.

Exceptions: `nodeauth.Overloaded` from `authenticate` and `authorize`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from nodelet.adapters import kube
from nodelet.helpers import inflight, ratelimit
from nodelet.model.core import nodeauth, reviews

log = logging.getLogger(__name__)

ClientOf = Callable[[], kube.KubeClient | None]

# Reviews in flight at once by default, per gate (settings.NodeServerSettings
# .max_token_reviews_in_flight and .max_access_reviews_in_flight).
DEFAULT_IN_FLIGHT = 8
# Answers kept at most: "yes" (a user, an allowed request) and "no", in caches apart.
POSITIVE_CACHE_SIZE = 4096
NEGATIVE_CACHE_SIZE = 1024
# Seconds between two warnings of the same kind: a flood must not flood the log too.
WARNING_INTERVAL = 60.0

async def _create(client_of: ClientOf, path: str, body: dict[str, Any]) -> dict[str, Any]:
    client = client_of()
    if client is None:
        raise kube.Unavailable("cluster mode has not started: no API client yet")
    return await client.request("POST", path, body=body)


class ReviewGate:
    """At most `limit` reviews in flight; `slot()` raises nodeauth.Overloaded when full."""

    def __init__(self, limit: int = DEFAULT_IN_FLIGHT) -> None:
        self.limit = max(1, limit)
        self.in_flight = 0
        self.refused = 0  # reviews not asked because the gate was full

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        if self.in_flight >= self.limit:
            self.refused += 1
            raise nodeauth.Overloaded(
                f"{self.in_flight} reviews in flight, the most allowed: try again later")
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


class ThrottledLog:
    """Warnings at most once per `every` seconds; those left out in between are counted, and
    the count goes out with the next one."""

    def __init__(self, every: float = WARNING_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._every = every
        self._clock = clock
        self._next = float("-inf")
        self.suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        now = self._clock()
        if now < self._next:
            self.suppressed += 1
            return
        if self.suppressed:
            message += " (and %d more like it since the last one)"
            args = (*args, self.suppressed)
        log.warning(message, *args)
        self.suppressed = 0
        self._next = now + self._every


def _abandoned() -> Exception:
    return nodeauth.Overloaded("the review this request waited for was abandoned")


class TokenReviewAuthenticator:
    """Bearer tokens the API server's TokenReview accepts; answers (yes and no, in caches
    apart) kept for `ttl` seconds. `per_source`: how many tokens unknown to the caches each
    client address may have reviewed (None: no limit)."""

    def __init__(self, client_of: ClientOf, *, ttl: float, gate: ReviewGate | None = None,
                 per_source: ratelimit.PerKey | None = None,
                 cache_sizes: tuple[int, int] = (POSITIVE_CACHE_SIZE, NEGATIVE_CACHE_SIZE),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client_of = client_of
        self._ttl = ttl
        self.gate = gate or ReviewGate()
        self.per_source = per_source
        self._clock = clock
        self._accepted: reviews.AnswerCache[nodeauth.User] = reviews.AnswerCache(
            cache_sizes[0])
        self._rejected: reviews.AnswerCache[bool] = reviews.AnswerCache(cache_sizes[1])
        self._merged: inflight.Shared[nodeauth.User | None] = inflight.Shared(_abandoned)
        self._log = ThrottledLog()
        self.reviews = 0  # TokenReviews sent

    async def authenticate(self, credentials: nodeauth.Credentials) -> nodeauth.User | None:
        token = credentials.token
        if token is None:
            return None
        key, now = reviews.token_key(token), self._clock()
        user = self._accepted.get(key, now)
        if user is not None:
            return user
        if self._rejected.get(key, now):
            return None
        return await self._merged.run(key, lambda: self._review(key, token, credentials.source))

    async def _review(self, key: str, token: str, source: str) -> nodeauth.User | None:
        if self.per_source is not None and not self.per_source.allow(source):
            raise nodeauth.Overloaded(
                f"too many unknown tokens from {source or 'this client'}: try again later")
        with self.gate.slot():
            self.reviews += 1
            try:
                answer = await _create(self._client_of, reviews.TOKEN_REVIEWS,
                                       reviews.token_review(token))
                user = reviews.reviewed_user(answer)
            except (kube.KubeError, reviews.ReviewError) as exc:
                self._log.warning("token review failed, the request is not authenticated: %s",
                                  exc)
                return None
        if user is None:
            self._rejected.put(key, True, self._ttl, self._clock())
        else:
            self._accepted.put(key, user, self._ttl, self._clock())
        return user


class SubjectAccessReviewAuthorizer:
    """Decisions of the API server's SubjectAccessReview; allowed answers cached for
    `authorized_ttl` seconds, denied ones for `unauthorized_ttl`."""

    def __init__(self, client_of: ClientOf, *, authorized_ttl: float, unauthorized_ttl: float,
                 gate: ReviewGate | None = None,
                 cache_sizes: tuple[int, int] = (POSITIVE_CACHE_SIZE, NEGATIVE_CACHE_SIZE),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client_of = client_of
        self._authorized_ttl = authorized_ttl
        self._unauthorized_ttl = unauthorized_ttl
        self.gate = gate or ReviewGate()
        self._clock = clock
        self._allowed: reviews.AnswerCache[nodeauth.Decision] = reviews.AnswerCache(
            cache_sizes[0])
        self._denied: reviews.AnswerCache[nodeauth.Decision] = reviews.AnswerCache(
            cache_sizes[1])
        self._merged: inflight.Shared[nodeauth.Decision] = inflight.Shared(_abandoned)
        self._log = ThrottledLog()
        self.reviews = 0  # SubjectAccessReviews sent

    async def authorize(self, attributes: nodeauth.Attributes) -> nodeauth.Decision:
        key, now = reviews.access_key(attributes), self._clock()
        cached = self._allowed.get(key, now) or self._denied.get(key, now)
        if cached is not None:
            return cached
        return await self._merged.run(key, lambda: self._review(key, attributes))

    async def _review(self, key: object, attributes: nodeauth.Attributes) -> nodeauth.Decision:
        with self.gate.slot():
            self.reviews += 1
            try:
                answer = await _create(self._client_of, reviews.ACCESS_REVIEWS,
                                       reviews.access_review(attributes))
                decision = reviews.review_decision(answer)
            except (kube.KubeError, reviews.ReviewError) as exc:
                self._log.warning("subject access review for %s failed, the request is "
                                  "refused: %s", attributes.user.name, exc)
                return nodeauth.Decision(False, f"authorization error: {exc}", error=True)
        if decision.allowed:
            self._allowed.put(key, decision, self._authorized_ttl, self._clock())
        else:
            self._denied.put(key, decision, self._unauthorized_ttl, self._clock())
        return decision
