"""Projected service account tokens, the pure part: the TokenRequest of a projected source,
the answer's token, the kubelet's refresh rule, and the refusal of static pods' tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nodelet.model.core import admission, pods, tokens

T0 = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def token(lifetime: int, issued: datetime = T0) -> tokens.Token:
    return tokens.Token("t", issued + timedelta(seconds=lifetime), lifetime)


# (lifetime s, age s, jitter, refresh?) — the kubelet's requiresRefresh: older than 80 % of
# the lifetime or 24 h, less up to 10 s of jitter (here at most a tenth of the lifetime).
@pytest.mark.parametrize(("lifetime", "age", "jitter", "refresh"), [
    (3600, 0, 0.0, False),
    (3600, 2879, 0.0, False),
    (3600, 2880, 0.0, True),           # 80 % of an hour
    (3600, 2871, 0.99, True),          # 10 s of jitter at most: 2880 - 9.9
    (3600, 2869, 0.99, False),
    (3607, 2885, 0.0, False),          # the admission plugin's 3607 s: 2885.6
    (3607, 2886, 0.0, True),
    (7 * 24 * 3600, 86399, 0.0, False),  # a week-long token: 24 h first
    (7 * 24 * 3600, 86400, 0.0, True),
    (10, 7, 0.0, False),               # a 10 s token (tests): at 8 s ...
    (10, 8, 0.0, True),
    (10, 7.5, 0.99, True),             # ... less at most 1 s of jitter, not 10
    (10, 6.9, 0.99, False),
    (3600, -1, 0.0, True),             # issued in the future: the clock leapt back
])
def test_requires_refresh(lifetime: int, age: float, jitter: float, refresh: bool) -> None:
    now = T0 + timedelta(seconds=age)
    assert tokens.requires_refresh(token(lifetime), now, jitter) is refresh


def test_refresh_at_is_the_earlier_of_80_percent_and_24_hours() -> None:
    assert tokens.refresh_at(token(3600), 0.0) == T0 + timedelta(seconds=2880)
    assert tokens.refresh_at(token(30 * 24 * 3600), 0.0) == T0 + timedelta(hours=24)
    assert tokens.refresh_at(token(3600), 0.5) == T0 + timedelta(seconds=2875)


def test_expired() -> None:
    assert not tokens.expired(token(600), T0 + timedelta(seconds=600))
    assert tokens.expired(token(600), T0 + timedelta(seconds=601))


def pod(volumes: list[pods.Volume], *, source: Any = "api", account: str = "robot") -> pods.Pod:
    return pods.Pod(uid=pods.PodUID("u-1"), name="web", namespace="team",
                    spec=pods.PodSpec(containers=(), volumes=tuple(volumes)), source=source,
                    raw={"spec": {"serviceAccountName": account}})


ACCESS = pods.Volume("kube-api-access-x2b4z", "projected", {"defaultMode": 420, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"serviceAccountToken": {"audience": "vault", "path": "vault/token"}},
]})


def test_requests_bind_each_token_source_to_the_pod() -> None:
    found = tokens.requests(pod([ACCESS]), ACCESS)
    assert found == {
        "token": tokens.TokenRequest("robot", "team", (), 3607, "web", pods.PodUID("u-1")),
        "vault/token": tokens.TokenRequest("robot", "team", ("vault",), 3600, "web",
                                           pods.PodUID("u-1")),
    }
    assert found["token"].body() == {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "metadata": {"name": "robot", "namespace": "team"},
        "spec": {"audiences": [], "expirationSeconds": 3607, "boundObjectRef": {
            "apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-1"}},
    }
    assert found["token"].key == ("robot", "team", (), 3607, "u-1")
    assert tokens.requests(pod([ACCESS]), pods.Volume("v", "emptyDir", {})) == {}


@pytest.mark.parametrize(("answer", "expected"), [
    ({"spec": {"expirationSeconds": 3607},
      "status": {"token": "abc", "expirationTimestamp": "2026-12-03T13:00:07Z"}},
     tokens.Token("abc", T0 + timedelta(seconds=3607), 3607)),
    # The server granted less than asked (--service-account-max-token-expiration).
    ({"spec": {"expirationSeconds": 10},
      "status": {"token": "abc", "expirationTimestamp": "2026-12-03T12:00:10Z"}},
     tokens.Token("abc", T0 + timedelta(seconds=10), 10)),
    ({"status": {"token": "abc", "expirationTimestamp": "2026-12-03T13:00:07Z"}},
     tokens.Token("abc", T0 + timedelta(seconds=3607), 3607)),
])
def test_token_from_answer(answer: dict[str, Any], expected: tokens.Token) -> None:
    request = tokens.requests(pod([ACCESS]), ACCESS)["token"]
    assert tokens.token_from_answer(answer, request) == expected


@pytest.mark.parametrize(("answer", "message"), [
    ({"status": {}}, "no status.token"),
    ({"status": {"token": "abc"}}, "no valid status.expirationTimestamp"),
    ({"status": {"token": "abc", "expirationTimestamp": "soon"}},
     "no valid status.expirationTimestamp"),
])
def test_bad_answers(answer: dict[str, Any], message: str) -> None:
    request = tokens.requests(pod([ACCESS]), ACCESS)["token"]
    with pytest.raises(tokens.TokenError, match=message):
        tokens.token_from_answer(answer, request)


def test_a_static_pod_with_a_token_source_is_refused_at_admission() -> None:
    node = admission.Node(labels={})
    rejection = admission.admit(pod([ACCESS], source="file"), node)
    assert rejection is not None and rejection.reason == "UnsupportedPodSpec"
    assert rejection.message.startswith(
        "spec.volumes[0].projected.sources[0].serviceAccountToken: a static pod cannot use a "
        "service account token")
    assert admission.admit(pod([ACCESS], source="api"), node) is None
    assert admission.admit(pod([], source="file"), node) is None
