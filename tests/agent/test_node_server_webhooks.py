"""Cluster mode's node-server authentication and authorization against the real kube-apiserver's
TokenReview and SubjectAccessReview, asked with a node's identity through the fault proxy
(which counts the reviews, keeps what was sent, and delays or fails them on demand), with fake
time for the caches; the authorization modes each setting gives; and the node server's
handshake and header timeout against slow clients. The known users are real: service
accounts with tokens from the TokenRequest API, RBAC for what they may do on a node, the
plane's bootstrap token and kube-apiserver's client certificate.
(tests/cluster/test_cluster_kubectl.py runs all of it with the real kubectl and a joined
node.)"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from nodelet import settings
from nodelet.adapters import kube, kubeconfig, node_server, servingcerts
from nodelet.helpers import ratelimit
from nodelet.model.core import health as hm
from nodelet.model.core import nodeauth
from nodelet.services.serving import nodeserving, preflight, webhookauth
from support.clocks import MonotonicClock
from support.controlplane import AdminClient, Authority, ControlPlane, kubeconfig_text
from support.faultproxy import FaultProxy
from support.polling import eventually

RBAC = "/apis/rbac.authorization.k8s.io/v1"
EVER = 10**6  # a fault's `times` for all of a test


async def account_token(admin: AdminClient, namespace: str, name: str) -> str:
    """A token of service account `name` (made if missing), by the TokenRequest API."""
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    if await admin.get(f"{accounts}/{name}") is None:
        await admin.create(accounts, {"metadata": {"name": name}})
    answer = await admin.create(f"{accounts}/{name}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    return str(answer["status"]["token"])


async def grant(admin: AdminClient, name: str, resources: tuple[str, ...],
                subjects: list[dict[str, str]]) -> None:
    """A ClusterRole `name` to get node `resources` (subresources of nodes), bound to
    `subjects`; removed by `revoke`."""
    await admin.create(f"{RBAC}/clusterroles", {"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": list(resources), "verbs": ["get"]}]})
    await admin.create(f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": name}, "subjects": subjects,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name}})


async def revoke(admin: AdminClient, name: str) -> None:
    await admin.delete(f"{RBAC}/clusterrolebindings/{name}")
    await admin.delete(f"{RBAC}/clusterroles/{name}")


async def allowed(admin: AdminClient, user: str, groups: list[str], subresource: str) -> bool:
    answer = await admin.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": {
            "verb": "get", "resource": "nodes", "subresource": subresource, "name": "n1"}}})
    return bool(answer["status"].get("allowed"))


@dataclass
class Api:
    """A node's API client through a fault proxy; `dev_token`: a service account's token,
    whose account (and group `devs`) may get `nodes/log`."""

    proxy: FaultProxy
    client: kube.KubeClient
    dev_token: str
    dev: str  # its user name
    namespace: str

    def count(self, resource: str) -> int:
        return self.proxy.count(method="POST", path=f"/{resource}$")

    def last(self, resource: str) -> dict[str, Any]:
        """The spec of the last review of `resource` sent."""
        sent = [r for r in self.proxy.requests if r.path.endswith(f"/{resource}")]
        body = json.loads(sent[-1].body)
        assert isinstance(body, dict)
        return dict(body["spec"])


@pytest_asyncio.fixture(loop_scope="session")
async def api(control_plane: ControlPlane, admin: AdminClient, namespace: str,
              tmp_path: Path) -> AsyncIterator[Api]:
    pair = Authority.load(control_plane.ca, tmp_path).issue(
        "node", "system:node:n1", orgs=("system:nodes",))
    token = await account_token(admin, namespace, "dev")
    dev = f"system:serviceaccount:{namespace}:dev"
    role = f"nodelet-test-logs-{namespace}"
    await grant(admin, role, ("nodes/log",), [
        {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "ServiceAccount", "name": "dev", "namespace": namespace}])
    try:
        # RBAC's cache has the binding before a test's first review is cached.
        await eventually(lambda: allowed(admin, "dev", ["devs"], "log"), within=10,
                         what="the devs' role in force")
        await eventually(lambda: allowed(admin, dev, [], "log"), within=10,
                         what="the dev account's role in force")
        async with FaultProxy(control_plane, tmp_path, credentials=lambda: pair) as proxy:
            path = tmp_path / "kubeconfig"
            path.write_text(kubeconfig_text(proxy.url, control_plane.ca.cert, user="n1",
                                            cert=pair))
            client = kube.KubeClient(kubeconfig.load(path))
            try:
                yield Api(proxy, client, token, dev, namespace)
            finally:
                await client.close()
    finally:
        await revoke(admin, role)


def account_groups(namespace: str) -> tuple[str, ...]:
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
            "system:authenticated")
def _attributes(user: nodeauth.User, subresource: str) -> nodeauth.Attributes:
    return nodeauth.Attributes(user=user, verb="get", subresource=subresource, name="n1")


async def test_token_review_answers_are_cached_for_the_ttl(
        api: Api) -> None:
    client = api.client
    clock = MonotonicClock()
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0, clock=clock)
    token = nodeauth.Credentials(token=api.dev_token)
    user = await authenticator.authenticate(token)
    assert user is not None and (user.name, user.groups) == (api.dev,
                                                             account_groups(api.namespace))
    assert await authenticator.authenticate(nodeauth.Credentials(token="nope")) is None
    assert await authenticator.authenticate(nodeauth.Credentials()) is None  # no token: not asked
    assert api.count("tokenreviews") == 2
    clock.now += 119  # both answers, yes and no, are kept for the TTL
    assert await authenticator.authenticate(token) == user
    assert await authenticator.authenticate(nodeauth.Credentials(token="nope")) is None
    assert api.count("tokenreviews") == 2
    clock.now += 2
    assert await authenticator.authenticate(token) == user
    assert api.count("tokenreviews") == 3
    # A node identity asked it, with the token only in the spec (no audiences: the server's).
    assert api.last("tokenreviews") == {"token": api.dev_token}


async def test_subject_access_review_caches_allowed_and_denied_apart(
        api: Api) -> None:
    client = api.client
    clock = MonotonicClock()
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: client, authorized_ttl=300.0, unauthorized_ttl=30.0, clock=clock)
    dev = nodeauth.User("dev", "uid-dev", ("devs", nodeauth.AUTHENTICATED))
    assert (await authorizer.authorize(_attributes(dev, "log"))).allowed
    denied = await authorizer.authorize(_attributes(dev, "proxy"))
    assert not denied.allowed
    assert api.count("subjectaccessreviews") == 2
    spec = api.last("subjectaccessreviews")
    assert spec == {"user": "dev", "uid": "uid-dev", "groups": ["devs", "system:authenticated"],
                    "resourceAttributes": {"verb": "get", "group": "", "version": "v1",
                                           "resource": "nodes", "subresource": "proxy",
                                           "name": "n1"}}
    clock.now += 31  # the denial expired, the allowance is kept
    assert (await authorizer.authorize(_attributes(dev, "log"))).allowed
    assert not (await authorizer.authorize(_attributes(dev, "proxy"))).allowed
    assert api.count("subjectaccessreviews") == 3
    # An API error is a denial that is not cached.
    api.proxy.inject(path="subjectaccessreviews$", status=500)
    clock.now += 31
    failed = await authorizer.authorize(_attributes(dev, "proxy"))
    assert not failed.allowed and failed.error and "authorization error" in failed.reason
    assert not (await authorizer.authorize(_attributes(dev, "proxy"))).allowed
    assert api.count("subjectaccessreviews") == 5


async def test_before_cluster_mode_started_nothing_is_accepted() -> None:
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: None, ttl=120.0)
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: None, authorized_ttl=300.0, unauthorized_ttl=30.0)
    assert await authenticator.authenticate(nodeauth.Credentials(token="t")) is None
    user = nodeauth.User("admin", groups=("system:masters",))
    decision = await authorizer.authorize(_attributes(user, "proxy"))
    assert not decision.allowed and decision.error


async def test_the_users_extra_reaches_the_subject_access_review(
        api: Api) -> None:
    client = api.client
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0)
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: client, authorized_ttl=300.0, unauthorized_ttl=30.0)
    user = await authenticator.authenticate(nodeauth.Credentials(token=api.dev_token))
    assert user is not None
    # kube-apiserver's service account tokens carry their credential's ID.
    credential = dict(user.extra)["authentication.kubernetes.io/credential-id"]
    assert len(credential) == 1 and credential[0].startswith("JTI="), user.extra
    assert (await authorizer.authorize(_attributes(user, "log"))).allowed
    spec = api.last("subjectaccessreviews")
    assert spec["extra"] == {key: list(values) for key, values in user.extra}, spec
    # The same user with another credential is another question, not a cached answer.
    other = replace(user, extra=(("authentication.kubernetes.io/credential-id", ("JTI=9",)),))
    assert (await authorizer.authorize(_attributes(other, "log"))).allowed
    assert api.count("subjectaccessreviews") == 2


async def test_identical_reviews_in_flight_are_merged(
        api: Api) -> None:
    client = api.client
    api.proxy.inject(path="tokenreviews$|subjectaccessreviews$", delay=0.3, times=EVER)
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0)
    users = await asyncio.gather(*(authenticator.authenticate(
        nodeauth.Credentials(token=api.dev_token)) for _ in range(5)))
    assert len({u.name if u else None for u in users}) == 1 and users[0] is not None
    assert api.count("tokenreviews") == 1
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: client, authorized_ttl=300.0, unauthorized_ttl=30.0)
    decisions = await asyncio.gather(*(authorizer.authorize(_attributes(users[0], "log"))
                                       for _ in range(5)))
    assert all(d.allowed for d in decisions)
    assert api.count("subjectaccessreviews") == 1


async def test_reviews_beyond_the_cap_are_refused_not_queued(
        api: Api) -> None:
    client = api.client
    api.proxy.inject(path="tokenreviews$", delay=0.3, times=EVER)
    gate = webhookauth.ReviewGate(2)
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0, gate=gate)
    answers = await asyncio.gather(*(authenticator.authenticate(
        nodeauth.Credentials(token=f"random-{n}")) for n in range(6)), return_exceptions=True)
    assert answers[:2] == [None, None]  # asked, and rejected
    assert all(isinstance(a, nodeauth.Overloaded) for a in answers[2:])
    assert api.count("tokenreviews") == 2 and gate.refused == 4
    assert gate.in_flight == 0
    # The refused ones were not cached: asked again once there is room.
    assert await authenticator.authenticate(nodeauth.Credentials(token="random-5")) is None
    assert api.count("tokenreviews") == 3


def test_warnings_are_throttled(caplog: pytest.LogCaptureFixture) -> None:
    clock = MonotonicClock()
    throttled = webhookauth.ThrottledLog(every=60.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger=webhookauth.__name__):
        for n in range(5):
            throttled.warning("review %d failed", n)
        clock.now += 60
        throttled.warning("review %d failed", 5)
    assert [r.getMessage() for r in caplog.records] == [
        "review 0 failed", "review 5 failed (and 4 more like it since the last one)"]


async def test_a_flood_of_random_tokens_does_not_delay_the_lease(
        make_rig: Any, proxied: FaultProxy, tmp_path: Path) -> None:
    """Every request with a new token costs a TokenReview. A flood of random ones must not
    hold up the node's heartbeat (the Lease, on its own client without a rate limit, as the
    kubelet's), and what the cap on reviews in flight cannot take is answered 429."""
    cap, flood = 4, 40
    # One API request a second (the heartbeat aside), and slow reviews: the first `cap` of
    # the flood stay in flight while the rest arrive and the Lease is renewed.
    proxied.inject(path="tokenreviews$", delay=8.0, times=EVER)
    async with make_rig(qps=1.0, burst=1) as rig:
        joined = settings.Settings(
            data_dir=tmp_path, node_name="n1",
            cluster=settings.ClusterSettings(kubeconfig=tmp_path / "kubeconfig"),
            node_server=settings.NodeServerSettings(address="127.0.0.1", port=0,
                                                    max_token_reviews_in_flight=cap))
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
            puts = proxied.count(method="PUT", path="/leases/")
            await eventually(lambda: proxied.count(method="PUT", path="/leases/"),
                             until=lambda n: n >= puts + 3, within=10,
                             what="lease renewals during the flood")
            await asyncio.wait_for(calls, 30)
            assert sorted(statuses)[:cap] == [(401, None)] * cap  # reviewed: not authenticated
            assert proxied.count(method="POST", path="/tokenreviews$") == cap
        finally:
            await session.close()
            await running.stop()


async def test_negative_answers_never_evict_positive_ones(
        api: Api) -> None:
    client = api.client
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0,
                                                         cache_sizes=(2, 2))
    assert await authenticator.authenticate(nodeauth.Credentials(token=api.dev_token))
    for n in range(20):  # ten times the caches' size of answers "no"
        assert await authenticator.authenticate(nodeauth.Credentials(token=f"r-{n}")) is None
    reviews = api.count("tokenreviews")
    assert await authenticator.authenticate(nodeauth.Credentials(token=api.dev_token))
    assert api.count("tokenreviews") == reviews  # still cached
    authorizer = webhookauth.SubjectAccessReviewAuthorizer(
        lambda: client, authorized_ttl=300.0, unauthorized_ttl=30.0, cache_sizes=(2, 2))
    dev = nodeauth.User("dev", groups=("devs",))
    assert (await authorizer.authorize(_attributes(dev, "log"))).allowed
    for n in range(20):
        assert not (await authorizer.authorize(_attributes(dev, f"denied-{n}"))).allowed
    asked = api.count("subjectaccessreviews")
    assert (await authorizer.authorize(_attributes(dev, "log"))).allowed
    assert api.count("subjectaccessreviews") == asked


async def test_unknown_tokens_are_limited_per_client_address(
        api: Api) -> None:
    client = api.client
    clock = MonotonicClock()
    authenticator = webhookauth.TokenReviewAuthenticator(
        lambda: client, ttl=120.0, per_source=ratelimit.PerKey(1.0, 3, clock=clock))
    flooder = [nodeauth.Credentials(token=f"r-{n}", source="10.0.0.9") for n in range(5)]
    assert [await authenticator.authenticate(c) for c in flooder[:3]] == [None] * 3
    with pytest.raises(nodeauth.Overloaded, match=r"too many unknown tokens from 10\.0\.0\.9"):
        await authenticator.authenticate(flooder[3])
    # Another address, and a token already known, are not held back by it.
    assert await authenticator.authenticate(nodeauth.Credentials(token=api.dev_token,
                                                                 source="10.0.0.7"))
    assert await authenticator.authenticate(nodeauth.Credentials(token="r-0",
                                                                 source="10.0.0.9")) is None
    clock.now += 1.0  # a token a second
    assert await authenticator.authenticate(flooder[3]) is None
    assert api.count("tokenreviews") == 5


FLOOD_SOURCES = [f"127.0.0.{n}" for n in range(2, 10)]


async def test_a_flood_of_random_tokens_locks_out_no_known_client(
        make_rig: Any, proxied: FaultProxy, control_plane: ControlPlane, admin: AdminClient,
        namespace: str, tmp_path: Path) -> None:
    """While random bearer tokens from several addresses keep every TokenReview place taken
    (the API server holds them), kube-apiserver's client certificate and a token reviewed
    before the flood are still authorized, each request by a new SubjectAccessReview (no
    authorization cache here): their reviews have places and an API client of their own."""
    metrics_token = await account_token(admin, namespace, "metrics")
    role = f"nodelet-test-metrics-{namespace}"
    await grant(admin, role, ("nodes/stats", "nodes/metrics"),
                [{"kind": "ServiceAccount", "name": "metrics", "namespace": namespace}])
    try:
        await eventually(lambda: allowed(
            admin, f"system:serviceaccount:{namespace}:metrics", [], "stats"), within=10,
            what="the metrics account's role in force")
        async with make_rig() as rig:
            await _known_clients_during_a_flood(rig, proxied, control_plane, metrics_token,
                                                tmp_path)
    finally:
        await revoke(admin, role)


async def _known_clients_during_a_flood(rig: Any, proxied: FaultProxy, plane: ControlPlane,
                                        metrics_token: str, tmp_path: Path) -> None:
    joined = settings.Settings(
        data_dir=tmp_path, node_name="n1",
        cluster=settings.ClusterSettings(kubeconfig=tmp_path / "kubeconfig"),
        node_server=settings.NodeServerSettings(
            address="127.0.0.1", port=0, client_ca_file=plane.ca.cert,
            max_token_reviews_in_flight=4, authorization_webhook_cache_authorized_ttl=0))
    config = nodeserving.server_config(joined, api_client=rig.mode.api_client,
                                       access_client=rig.mode.access_api_client)
    running = node_server.NodeServer(_StatsBackend(), config)
    await running.start()
    url = f"https://127.0.0.1:{running.port}"
    context = ssl.create_default_context(cafile=str(config.tls.cert))
    apiserver = ssl.create_default_context(cafile=str(config.tls.cert))
    # kube-apiserver's own client certificate towards the nodes (system:masters).
    apiserver.load_cert_chain(plane.kubelet_client.cert, plane.kubelet_client.key)
    gate = next(a for a in config.authenticators
                if isinstance(a, webhookauth.TokenReviewAuthenticator)).gate
    flood = _Flood(url, context)
    known = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
    admin = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=apiserver))
    try:
        assert await _status(known, f"{url}/stats/summary", metrics_token) == 200
        proxied.inject(path="tokenreviews$", delay=5.0, times=EVER)
        flood.start()
        await eventually(lambda: gate.in_flight, until=lambda n: n == gate.limit,
                         within=10, what="every TokenReview place taken by the flood")
        # Each known request is sent while the flood holds every place (`full`: the
        # places taken when it was sent; the held reviews end after 5 s, and the flood
        # takes the places again at once).
        succeeded: list[int] = []
        full: list[int] = []
        while len(succeeded) < 20:
            for path in ("/stats/summary", "/pods", "/metrics", "/healthz"):
                full.append(gate.in_flight)
                succeeded.append(await _status(admin, url + path))
            full.append(gate.in_flight)
            succeeded.append(await _status(known, f"{url}/stats/summary", metrics_token))
        sent = flood.sent
    finally:
        await flood.stop()
        await known.close()
        await admin.close()
        # The reviews the API server still holds end (and free their places) first.
        await eventually(lambda: gate.in_flight, until=lambda n: n == 0, within=15,
                         what="the flood's last TokenReviews answered")
        await running.stop()
    print(f"\nreview flood: {sent} requests with random tokens from {len(FLOOD_SOURCES)} "
          f"addresses, answered {dict(sorted(flood.answers.items()))}; meanwhile "
          f"{succeeded.count(200)}/{len(succeeded)} requests of kube-apiserver's certificate "
          f"and a cached token succeeded, {full.count(gate.limit)} of them sent while all "
          f"{gate.limit} TokenReview places were taken; "
          f"{proxied.count(method='POST', path='/subjectaccessreviews$')} SubjectAccessReviews "
          "sent")
    assert succeeded == [200] * len(succeeded)
    assert full.count(gate.limit) >= len(full) // 2
    assert set(flood.answers) <= {401, 429} and flood.answers.get(429, 0) > 0


async def _status(session: aiohttp.ClientSession, url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.get(url, headers=headers) as response:
        await response.read()
        return response.status


class _Flood:
    """Requests with a new random token each, from `FLOOD_SOURCES`, as fast as they are
    answered, until stopped."""

    def __init__(self, url: str, context: ssl.SSLContext) -> None:
        self._url = url
        self._sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            ssl=context, local_addr=(source, 0), limit=8)) for source in FLOOD_SOURCES]
        self._tasks: list[asyncio.Task[None]] = []
        self.sent = 0
        self.answers: dict[int, int] = {}

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(session), name=f"flood-{n}")
                       for n, session in enumerate(self._sessions) for _ in range(8)]

    async def _run(self, session: aiohttp.ClientSession) -> None:
        while True:
            self.sent += 1
            status = await _status(session, f"{self._url}/pods", secrets.token_hex(16))
            self.answers[status] = self.answers.get(status, 0) + 1

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for session in self._sessions:
            await session.close()


class _StatsBackend:
    """Enough of a node to answer the known clients' requests."""

    def pods(self) -> list[Any]:
        return []

    def health(self) -> list[hm.HealthCheck]:
        return [hm.HealthCheck("stub", True, "")]

    def metrics_text(self) -> tuple[bytes, str]:
        return b"# nothing\n", "text/plain"

    async def summary(self, *, only_cpu_and_memory: bool) -> dict[str, Any]:
        return {"node": {"nodeName": "n1"}, "pods": []}


async def test_bootstrap_and_service_account_tokens_are_reviewed(
        api: Api, control_plane: ControlPlane, admin: AdminClient) -> None:
    client = api.client
    authenticator = webhookauth.TokenReviewAuthenticator(lambda: client, ttl=120.0)
    user = await authenticator.authenticate(nodeauth.Credentials(token=control_plane.token))
    token_id = control_plane.token.split(".")[0]
    assert user is not None and user.name == f"system:bootstrap:{token_id}"
    assert "system:bootstrappers" in user.groups
    robot = await account_token(admin, api.namespace, "robot")
    user = await authenticator.authenticate(nodeauth.Credentials(token=robot))
    assert user is not None and user.name == f"system:serviceaccount:{api.namespace}:robot"
    assert f"system:serviceaccounts:{api.namespace}" in user.groups


def test_authorization_modes_from_the_settings(tmp_path: Path) -> None:
    base = settings.Settings(data_dir=tmp_path, node_name="n1")
    joined = replace(base, cluster=settings.ClusterSettings(kubeconfig=tmp_path / "kubeconfig"))

    def config(s: settings.Settings) -> node_server.NodeServerConfig:
        found = nodeserving.server_config(s, api_client=lambda: None)
        # The node-local credential first, in every mode: its user is allowed before the
        # mode's authorizer is asked (test_node_local_credential.py).
        assert isinstance(found.authenticators[0], nodeauth.LocalToken)
        assert isinstance(found.authorizer, nodeauth.LocalFirst)
        return replace(found, authenticators=found.authenticators[1:],
                       authorizer=found.authorizer.inner)

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
