"""Reading TokenReview and SubjectAccessReview answers, and the answer cache (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import nodeauth, reviews


@pytest.mark.parametrize(
    ("status", "allowed", "reason"),
    [
        ({"allowed": True, "reason": "RBAC: bound"}, True, "RBAC: bound"),
        ({"allowed": False}, False, ""),
        ({"allowed": True, "denied": True}, False, ""),  # denied wins
        ({"allowed": False, "evaluationError": "webhook down"}, False, "webhook down"),
    ],
)
def test_access_review_decisions(status: dict[str, Any], allowed: bool, reason: str) -> None:
    assert reviews.review_decision({"status": status}) == nodeauth.Decision(allowed, reason)


@pytest.mark.parametrize(
    ("status", "user"),
    [
        ({"authenticated": True, "user": {"username": "system:serviceaccount:ns:sa",
                                          "uid": "u1", "groups": ["system:serviceaccounts"]}},
         nodeauth.User("system:serviceaccount:ns:sa", "u1", ("system:serviceaccounts",))),
        ({"authenticated": True, "user": {
            "username": "alice", "groups": ["devs"],
            "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"],
                      "a.example/scopes": ["read", "write"]}}},
         nodeauth.User("alice", "", ("devs",), (("a.example/scopes", ("read", "write")), (
             "authentication.kubernetes.io/credential-id", ("JTI=abc",))))),
        ({"authenticated": False}, None),
        ({"authenticated": False, "error": "token expired"}, None),
    ],
)
def test_token_review_users(status: dict[str, Any], user: nodeauth.User | None) -> None:
    assert reviews.reviewed_user({"status": status}) == user


def test_answers_without_a_status_or_user_are_errors() -> None:
    with pytest.raises(reviews.ReviewError, match="has no status"):
        reviews.review_decision({"kind": "SubjectAccessReview"})
    with pytest.raises(reviews.ReviewError, match="names no user"):
        reviews.reviewed_user({"status": {"authenticated": True, "user": {}}})


def test_cache_expiry_ttl_zero_and_size() -> None:
    cache: reviews.AnswerCache[str] = reviews.AnswerCache(size=2)
    cache.put("a", "yes", 10.0, now=0.0)
    assert cache.get("a", now=9.9) == "yes"
    assert cache.get("a", now=10.0) is None and len(cache) == 0
    cache.put("b", "no", 0.0, now=0.0)  # TTL 0: not cached, as the kubelet's 0s flags
    assert cache.get("b", now=0.0) is None
    for key in ("c", "d", "e"):
        cache.put(key, key, 10.0, now=0.0)
    assert [cache.get(k, now=1.0) for k in ("c", "d", "e")] == [None, "d", "e"]


def test_the_token_is_not_the_cache_key() -> None:
    assert "secret-token" not in reviews.token_key("secret-token")
    assert reviews.token_key("a") != reviews.token_key("b")


_CREDENTIAL = (("authentication.kubernetes.io/credential-id", ("JTI=abc",)),)


def test_the_users_extra_goes_into_the_access_review_and_its_cache_key() -> None:
    plain = nodeauth.User("alice", "u1", ("devs",))
    with_extra = nodeauth.User("alice", "u1", ("devs",), _CREDENTIAL)
    review = reviews.access_review(nodeauth.Attributes(with_extra, "get", "proxy", "n1"))
    assert review["spec"]["extra"] == {
        "authentication.kubernetes.io/credential-id": ["JTI=abc"]}
    assert "extra" not in reviews.access_review(
        nodeauth.Attributes(plain, "get", "proxy", "n1"))["spec"]
    assert reviews.access_key(nodeauth.Attributes(plain, "get", "proxy", "n1")) != \
        reviews.access_key(nodeauth.Attributes(with_extra, "get", "proxy", "n1"))
    # The extra survives the authenticated group being added.
    assert with_extra.with_authenticated_group().extra == _CREDENTIAL


def test_a_malformed_extra_is_an_error() -> None:
    with pytest.raises(reviews.ReviewError, match="extra"):
        reviews.reviewed_user({"status": {"authenticated": True, "user": {
            "username": "alice", "extra": {"k": "not-a-list"}}}})
