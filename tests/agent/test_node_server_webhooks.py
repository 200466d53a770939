"""Cluster mode's node-server authentication and authorization against the test API server's
TokenReview and SubjectAccessReview (tests/kubereviews.py), with fake time for the caches; the
authorization modes each setting gives; and the node server's handshake and header timeout
against slow clients. (tests/cluster/test_cluster_kubectl_node.py runs all of it with the real
kubectl and a joined node.)"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

import kubeauth
import kubereviews
from kubeapi import ClusterRig, KubeApiServer
from nodelet import settings
from nodelet.adapters import kube, kubeconfig, node_server, servingcerts
from nodelet.model.core import nodeauth
from nodelet.services import nodeserving, preflight, webhookauth
from polling import eventually


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture(loop_scope="session")
async def api(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, kube.KubeClient]]:
    server = KubeApiServer(node="n1")
    await server.start()
    server.access.tokens["dev-token"] = kubeauth.User("dev", ("devs", "system:authenticated"))
    server.reviews.rules.append(kubereviews.rule("devs", resources=("nodes/log",),
                                                 verbs=("get",)))
    client = kube.KubeClient(kubeconfig.load(server.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        yield server, client
    finally:
        await client.close()
        await server.stop()


def _attributes(user: nodeauth.User, subresource: str) -> nodeauth.Attributes:
    return nodeauth.Attributes(user=user, verb="get", subresource=subresource, name="n1")


async def test_token_review_answers_are_cached_for_the_ttl(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    clock = _Clock()
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0, clock=clock)
    token = nodeauth.Credentials(token="dev-token")
    user = await authenticator.authenticate(token)
    assert user is not None and (user.name, user.groups) == ("dev", ("devs",
                                                                    "system:authenticated"))
    assert await authenticator.authenticate(nodeauth.Credentials(token="nope")) is None
    assert await authenticator.authenticate(nodeauth.Credentials()) is None  # no token: not asked
    assert server.count(resource="tokenreviews") == 2
    clock.now += 119  # both answers, yes and no, are kept for the TTL
    assert await authenticator.authenticate(token) == user
    assert await authenticator.authenticate(nodeauth.Credentials(token="nope")) is None
    assert server.count(resource="tokenreviews") == 2
    clock.now += 2
    assert await authenticator.authenticate(token) == user
    assert server.count(resource="tokenreviews") == 3
    # A node identity asked it, with the token only in the spec (no audiences: the server's).
    kind, spec = server.reviews.seen[-1]
    assert (kind, spec) == ("TokenReview", {})


async def test_subject_access_review_caches_allowed_and_denied_apart(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    clock = _Clock()
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: client, authorized_ttl=300.0, unauthorized_ttl=30.0, clock=clock)
    dev = nodeauth.User("dev", "uid-dev", ("devs", nodeauth.AUTHENTICATED))
    assert (await authorizer.authorize(_attributes(dev, "log"))).allowed
    denied = await authorizer.authorize(_attributes(dev, "proxy"))
    assert not denied.allowed
    assert server.count(resource="subjectaccessreviews") == 2
    kind, spec = server.reviews.seen[-1]
    assert kind == "SubjectAccessReview"
    assert spec == {"user": "dev", "uid": "uid-dev", "groups": ["devs", "system:authenticated"],
                    "resourceAttributes": {"verb": "get", "group": "", "version": "v1",
                                           "resource": "nodes", "subresource": "proxy",
                                           "name": "n1"}}
    clock.now += 31  # the denial expired, the allowance is kept
    assert (await authorizer.authorize(_attributes(dev, "log"))).allowed
    assert not (await authorizer.authorize(_attributes(dev, "proxy"))).allowed
    assert server.count(resource="subjectaccessreviews") == 3
    # An API error is a denial that is not cached.
    server.inject(path="subjectaccessreviews", status=500)
    clock.now += 31
    failed = await authorizer.authorize(_attributes(dev, "proxy"))
    assert not failed.allowed and failed.error and "authorization error" in failed.reason
    assert not (await authorizer.authorize(_attributes(dev, "proxy"))).allowed
    assert server.count(resource="subjectaccessreviews") == 5


async def test_before_cluster_mode_started_nothing_is_accepted() -> None:
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: None, ttl=120.0)
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: None, authorized_ttl=300.0, unauthorized_ttl=30.0)
    assert await authenticator.authenticate(nodeauth.Credentials(token="t")) is None
    user = nodeauth.User("admin", groups=("system:masters",))
    decision = await authorizer.authorize(_attributes(user, "proxy"))
    assert not decision.allowed and decision.error


async def test_the_users_extra_reaches_the_subject_access_review(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    credential = {"authentication.kubernetes.io/credential-id": ["JTI=7f1c"]}
    server.reviews.extra["dev"] = credential
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0)
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: client, authorized_ttl=300.0, unauthorized_ttl=30.0)
    user = await authenticator.authenticate(nodeauth.Credentials(token="dev-token"))
    assert user is not None
    assert (await authorizer.authorize(_attributes(user, "log"))).allowed
    kind, spec = server.reviews.seen[-1]
    assert kind == "SubjectAccessReview" and spec["extra"] == credential
    # The same user with another credential is another question, not a cached answer.
    other = replace(user, extra=(("authentication.kubernetes.io/credential-id", ("JTI=9",)),))
    assert (await authorizer.authorize(_attributes(other, "log"))).allowed
    assert server.count(resource="subjectaccessreviews") == 2


async def test_identical_reviews_in_flight_are_merged(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    server.inject(path="tokenreviews|subjectaccessreviews", delay=0.3, fail=False, times=None)
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0)
    users = await asyncio.gather(*(authenticator.authenticate(
        nodeauth.Credentials(token="dev-token")) for _ in range(5)))
    assert len({u.name if u else None for u in users}) == 1 and users[0] is not None
    assert server.count(resource="tokenreviews") == 1
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: client, authorized_ttl=300.0, unauthorized_ttl=30.0)
    decisions = await asyncio.gather(*(authorizer.authorize(_attributes(users[0], "log"))
                                       for _ in range(5)))
    assert all(d.allowed for d in decisions)
    assert server.count(resource="subjectaccessreviews") == 1


async def test_reviews_beyond_the_cap_are_refused_not_queued(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    server.inject(path="tokenreviews", delay=0.3, fail=False, times=None)
    gate = webhookauth.ReviewGate(2)
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0, gate=gate)
    answers = await asyncio.gather(*(authenticator.authenticate(
        nodeauth.Credentials(token=f"random-{n}")) for n in range(6)), return_exceptions=True)
    assert answers[:2] == [None, None]  # asked, and rejected
    assert all(isinstance(a, nodeauth.Overloaded) for a in answers[2:])
    assert server.count(resource="tokenreviews") == 2 and gate.refused == 4
    assert gate.in_flight == 0
    # The refused ones were not cached: asked again once there is room.
    assert await authenticator.authenticate(nodeauth.Credentials(token="random-5")) is None
    assert server.count(resource="tokenreviews") == 3


def test_warnings_are_throttled(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    throttled = webhookauth.ThrottledLog(every=60.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger=webhookauth.__name__):
        for n in range(5):
            throttled.warning("review %d failed", n)
        clock.now += 60
        throttled.warning("review %d failed", 5)
    assert [r.getMessage() for r in caplog.records] == [
        "review 0 failed", "review 5 failed (and 4 more like it since the last one)"]


async def test_a_flood_of_random_tokens_does_not_delay_the_lease(
        server: KubeApiServer, tmp_path: Path) -> None:
    """Every request with a new token costs a TokenReview. A flood of random ones must not
    hold up the node's heartbeat (the Lease, on its own client without a rate limit, as the
    kubelet's), and what the cap on reviews in flight cannot take is answered 429."""
    cap, flood = 4, 40
    # One API request a second (the heartbeat aside), and slow reviews: the first `cap` of
    # the flood stay in flight while the rest arrive and the Lease is renewed.
    server.inject(path="tokenreviews", delay=8.0, fail=False, times=None)
    async with ClusterRig(server, tmp_path, qps=1.0, burst=1) as rig:
        joined = settings.Settings(
            data_dir=tmp_path, node_name="n1",
            cluster=settings.ClusterSettings(kubeconfig=tmp_path / "kubeconfig"),
            node_server=settings.NodeServerSettings(address="127.0.0.1", port=0,
                                                    max_reviews_in_flight=cap))
        config = nodeserving.server_config(joined, api_client=rig.mode.api_client)
        running = node_server.NodeServer(_NoBackend(), config)
        await running.start()
        gate = next(a for a in config.authenticators
                    if isinstance(a, webhookauth.TokenReviewAuthenticator)).gate
        context = ssl.create_default_context(cafile=str(config.tls.cert))
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=0))
        statuses: list[tuple[int, str | None]] = []

        async def call(n: int) -> None:
            async with session.get(f"https://127.0.0.1:{running.port}/pods",
                                   headers={"Authorization": f"Bearer random-{n}"}) as r:
                statuses.append((r.status, r.headers.get("Retry-After")))

        try:
            calls = asyncio.gather(*(call(n) for n in range(flood)))
            answered = await eventually(lambda: list(statuses),
                                        until=lambda seen: len(seen) >= flood - cap, within=30,
                                        what="the flood beyond the cap answered")
            assert set(answered) == {(429, "1")}
            assert gate.in_flight == cap  # the first ones still wait for their reviews
            puts = server.count(method="PUT", resource="leases")
            await eventually(lambda: server.count(method="PUT", resource="leases"),
                             until=lambda n: n >= puts + 3, within=10,
                             what="lease renewals during the flood")
            await asyncio.wait_for(calls, 30)
            assert sorted(statuses)[:cap] == [(401, None)] * cap  # reviewed: not authenticated
            assert server.count(resource="tokenreviews") == cap
        finally:
            await session.close()
            await running.stop()


async def test_bootstrap_and_service_account_tokens_are_reviewed(
        api: tuple[KubeApiServer, kube.KubeClient]) -> None:
    server, client = api
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0)
    server.create("secrets", kubeauth.bootstrap_token_secret("abcdef", "0123456789abcdef"))
    user = await authenticator.authenticate(
        nodeauth.Credentials(token="abcdef.0123456789abcdef"))
    assert user is not None and user.name == "system:bootstrap:abcdef"
    assert "system:bootstrappers" in user.groups
    server.create("serviceaccounts", {"metadata": {"name": "robot", "namespace": "apps"}})
    issued = server.accounts.token_request("apps", "robot", {"spec": {}})
    user = await authenticator.authenticate(nodeauth.Credentials(token=issued["status"]["token"]))
    assert user is not None and user.name == "system:serviceaccount:apps:robot"
    assert "system:serviceaccounts:apps" in user.groups


def test_authorization_modes_from_the_settings(tmp_path: Path) -> None:
    base = settings.Settings(data_dir=tmp_path, node_name="n1")
    joined = replace(base, cluster=settings.ClusterSettings(kubeconfig=tmp_path / "kubeconfig"))

    def config(s: settings.Settings) -> node_server.NodeServerConfig:
        return nodeserving.server_config(s, api_client=lambda: None)

    standalone = config(base)
    assert isinstance(standalone.authorizer, nodeauth.AllowAuthenticated)
    assert not any(isinstance(a, webhookauth.TokenReviewAuthenticator)
                   for a in standalone.authenticators)
    cluster = config(joined)  # kubeadm's defaults: Webhook and the token webhook
    assert isinstance(cluster.authorizer, webhookauth.SubjectAccessReviewAuthorizer)
    assert any(isinstance(a, webhookauth.TokenReviewAuthenticator)
               for a in cluster.authenticators)
    allow = config(replace(joined, node_server=settings.NodeServerSettings(
        authorization_mode="AlwaysAllow", authentication_token_webhook=False)))
    assert isinstance(allow.authorizer, nodeauth.AllowAuthenticated)
    assert not allow.authenticators
    with pytest.raises(preflight.StartupError, match="need cluster mode"):
        config(replace(base, node_server=settings.NodeServerSettings(
            authorization_mode="Webhook")))
    with pytest.raises(preflight.StartupError, match="must be one of"):
        config(replace(joined, node_server=settings.NodeServerSettings(
            authorization_mode="RBAC")))


async def test_slow_clients_are_disconnected(tmp_path: Path) -> None:
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    running = node_server.NodeServer(_NoBackend(), node_server.NodeServerConfig(
        address="127.0.0.1", port=0, node_name="n1",
        tls=node_server.TlsFiles(pair.cert, pair.key), header_timeout=0.3))
    await running.start()
    try:
        # No TLS handshake at all: the connection is closed.
        reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        # A handshake, then headers that never end.
        context = ssl.create_default_context(cafile=str(pair.cert))
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", running.port, ssl=context, server_hostname="n1")
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: n1\r\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        await running.stop()


class _NoBackend:
    """Never reached: the slow clients send no complete request."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"backend asked for {name}")
