"""Cluster mode's authentication and authorization of node-server requests, as the kubelet's
webhook modes (pure): the bodies of the reviews sent to the API server, what their answers
mean, and the cache of answers.

- `token_review(token)`: an `authentication.k8s.io/v1` TokenReview; `reviewed_user(answer)`
  the user it proves (None: not authenticated).
- `access_review(attributes)`: an `authorization.k8s.io/v1` SubjectAccessReview of the
  kubelet's attributes (`nodeauth.request_attributes`: resource `nodes` in the core group,
  version `v1`, the node's name, the subresource); `review_decision(answer)` the decision.
- `AnswerCache`: answers kept for a time-to-live per answer, as the kubelet's webhook caches
  (k8s.io/apiserver's cached token authenticator: successes and failures both for
  `--authentication-token-webhook-cache-ttl`, 2 min; the webhook authorizer: allowed for
  `--authorization-webhook-cache-authorized-ttl`, 5 min, denied for `...-unauthorized-ttl`,
  30 s). Errors (the API server not answering) are never cached.

Exceptions: `ReviewError` (an answer that is not a review's; the message says what is missing).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nodelet.model.core import nodeauth

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

_V = TypeVar("_V")


class ReviewError(ValueError):
    """The API server's answer is not a review with a status."""


# -- TokenReview --------------------------------------------------------------------------------


def token_review(token: str) -> dict[str, Any]:
    """The TokenReview asking who `token` is (no audiences: the API server's own, as the
    kubelet sends)."""
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}}


def reviewed_user(answer: Mapping[str, Any]) -> nodeauth.User | None:
    """The user a TokenReview answer proves; None when it says not authenticated."""
    status = _status(answer)
    if not status.get("authenticated"):
        return None
    user = status.get("user") or {}
    name = user.get("username") or ""
    if not isinstance(name, str) or not name:
        raise ReviewError("the TokenReview says authenticated but names no user")
    groups = tuple(str(g) for g in user.get("groups") or ())
    return nodeauth.User(name, str(user.get("uid") or ""), groups, _extra(user.get("extra")))


def _extra(extra: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`user.extra` (key → list of strings) as sorted pairs; a malformed value is an error,
    not dropped: the SubjectAccessReview must see what the TokenReview said."""
    if not extra:
        return ()
    if not isinstance(extra, Mapping) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()):
        raise ReviewError("the TokenReview's user.extra is not a map of string lists")
    return tuple(sorted((str(k), tuple(v)) for k, v in extra.items()))


def token_key(token: str) -> str:
    """What a token is cached under: its SHA-256, so the cache holds no usable token."""
    return hashlib.sha256(token.encode()).hexdigest()


# -- SubjectAccessReview ------------------------------------------------------------------------


def access_review(attributes: nodeauth.Attributes) -> dict[str, Any]:
    """The SubjectAccessReview the kubelet sends for `attributes`."""
    user = attributes.user
    resource = {"verb": attributes.verb, "group": attributes.api_group, "version": "v1",
                "resource": attributes.resource, "subresource": attributes.subresource,
                "name": attributes.name}
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups),
                            "resourceAttributes": resource}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {key: list(values) for key, values in user.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}


def access_key(attributes: nodeauth.Attributes) -> tuple[object, ...]:
    """What an authorization answer is cached under: everything the review asks about
    (the user's extra too: an authorizer may decide by the credential it names)."""
    user = attributes.user
    return (user.name, user.uid, tuple(sorted(user.groups)), user.extra, attributes.verb,
            attributes.api_group, attributes.resource, attributes.subresource, attributes.name)


def review_decision(answer: Mapping[str, Any]) -> nodeauth.Decision:
    """Allowed only when the answer says so (and does not also say denied)."""
    status = _status(answer)
    reason = str(status.get("reason") or status.get("evaluationError") or "")
    return nodeauth.Decision(bool(status.get("allowed")) and not status.get("denied"), reason)


def _status(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    status = answer.get("status")
    if not isinstance(status, Mapping):
        raise ReviewError(f"the {answer.get('kind') or 'review'} answer has no status")
    return status


# -- the cache ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry(Generic[_V]):
    value: _V
    expires: float


class AnswerCache(Generic[_V]):
    """Answers by key, each until its own expiry (seconds on the caller's monotonic clock);
    at most `size` entries, the least recently stored dropped first."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: OrderedDict[object, _Entry[_V]] = OrderedDict()

    def get(self, key: object, now: float) -> _V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= now:
            del self._entries[key]
            return None
        return entry.value

    def put(self, key: object, value: _V, ttl: float, now: float) -> None:
        if ttl <= 0:  # a TTL of 0 turns the cache off, as the kubelet's flags
            return
        self._entries.pop(key, None)
        self._entries[key] = _Entry(value, now + ttl)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
