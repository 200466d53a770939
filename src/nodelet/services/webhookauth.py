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
- a `ReviewGate`, shared by both, caps the reviews in flight; a request needing one more gets
  `nodeauth.Overloaded` (the server's 429 with Retry-After) instead of a place in a queue.

Exceptions: `nodeauth.Overloaded` from `authenticate` and `authorize`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from nodelet.adapters import kube
from nodelet.helpers import inflight
from nodelet.model.core import nodeauth, reviews

log = logging.getLogger(__name__)

ClientOf = Callable[[], kube.KubeClient | None]

# Reviews in flight at once by default (settings.NodeServerSettings.max_reviews_in_flight).
DEFAULT_IN_FLIGHT = 8
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
    """Bearer tokens the API server's TokenReview accepts; answers (yes and no) cached for
    `ttl` seconds."""

    def __init__(self, client_of: ClientOf, *, ttl: float, gate: ReviewGate | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client_of = client_of
        self._ttl = ttl
        self.gate = gate or ReviewGate()
        self._clock = clock
        self._cache: reviews.AnswerCache[tuple[nodeauth.User | None]] = reviews.AnswerCache()
        self._merged: inflight.Shared[nodeauth.User | None] = inflight.Shared(_abandoned)
        self._log = ThrottledLog()
        self.reviews = 0  # TokenReviews sent

    async def authenticate(self, credentials: nodeauth.Credentials) -> nodeauth.User | None:
        token = credentials.token
        if token is None:
            return None
        key = reviews.token_key(token)
        cached = self._cache.get(key, self._clock())
        if cached is not None:
            return cached[0]
        return await self._merged.run(key, lambda: self._review(key, token))

    async def _review(self, key: str, token: str) -> nodeauth.User | None:
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
        self._cache.put(key, (user,), self._ttl, self._clock())
        return user


class SubjectAccessReviewAuthorizer:
    """Decisions of the API server's SubjectAccessReview; allowed answers cached for
    `authorized_ttl` seconds, denied ones for `unauthorized_ttl`."""

    def __init__(self, client_of: ClientOf, *, authorized_ttl: float, unauthorized_ttl: float,
                 gate: ReviewGate | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client_of = client_of
        self._authorized_ttl = authorized_ttl
        self._unauthorized_ttl = unauthorized_ttl
        self.gate = gate or ReviewGate()
        self._clock = clock
        self._cache: reviews.AnswerCache[nodeauth.Decision] = reviews.AnswerCache()
        self._merged: inflight.Shared[nodeauth.Decision] = inflight.Shared(_abandoned)
        self._log = ThrottledLog()
        self.reviews = 0  # SubjectAccessReviews sent

    async def authorize(self, attributes: nodeauth.Attributes) -> nodeauth.Decision:
        key = reviews.access_key(attributes)
        cached = self._cache.get(key, self._clock())
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
        ttl = self._authorized_ttl if decision.allowed else self._unauthorized_ttl
        self._cache.put(key, decision, ttl, self._clock())
        return decision
