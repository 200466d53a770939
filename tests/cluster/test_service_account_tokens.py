"""Service account tokens against the test API server, without containers: the TokenRequest
API and the ServiceAccount admission plugin of tests/kubeapi.py, and nodelet's TokenManager
(cache, refresh at 80 % of the lifetime, a failed refresh keeping the valid token, forgetting
gone pods, waking pods when a refresh is due) through the real API client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

import kubeaccounts
from kubeapi import KubeApiServer, pod_object
from nodelet.adapters import kube, kubeconfig
from nodelet.helpers import tasks
from nodelet.model.core import pods, tokens
from nodelet.services import tokens as token_service
from polling import eventually


def bound_pod(server: KubeApiServer, name: str = "web", **spec: Any) -> dict[str, Any]:
    """A pod bound to n1 (the server's node token) using service account `robot`."""
    if server.get("serviceaccounts", "default", "robot") is None:
        server.create("serviceaccounts", {"metadata": {"name": "robot", "namespace": "default"}})
    return server.create("pods", pod_object(name, node="n1", serviceAccountName="robot", **spec))


def request_for(pod: dict[str, Any], seconds: int = 3607, audience: str = "") -> \
        tokens.TokenRequest:
    meta = pod["metadata"]
    return tokens.TokenRequest(pod["spec"]["serviceAccountName"], meta["namespace"],
                               (audience,) if audience else (), seconds, meta["name"],
                               pods.PodUID(meta["uid"]))


@pytest_asyncio.fixture(loop_scope="session")
async def client(server: KubeApiServer, tmp_path: Path) -> AsyncIterator[kube.KubeClient]:
    """The node's client (default token: node n1, under the Node authorizer)."""
    api = kube.KubeClient(kubeconfig.load(server.write_kubeconfig(tmp_path / "kubeconfig")))
    yield api
    await api.close()


async def as_bearer(server: KubeApiServer, token: str, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(
            server.url + path, headers={"Authorization": f"Bearer {token}"}) as response:
        return response.status, await response.json()


async def create_token(client: kube.KubeClient, request: tokens.TokenRequest) -> dict[str, Any]:
    return await client.create_token(request.namespace, request.service_account, request.body())


# -- the test API server -----------------------------------------------------------------------


async def test_token_request_issues_a_bearer_token_bound_to_the_pod(
        server: KubeApiServer, client: kube.KubeClient) -> None:
    pod = bound_pod(server)
    answer = await create_token(client, request_for(pod))
    assert answer["kind"] == "TokenRequest"
    assert answer["spec"]["audiences"] == [kubeaccounts.API_AUDIENCE]  # the server's default
    assert answer["spec"]["expirationSeconds"] == 3607
    assert answer["spec"]["boundObjectRef"]["uid"] == pod["metadata"]["uid"]
    token = answer["status"]["token"]
    status, body = await as_bearer(server, token, "/api/v1/namespaces/default/pods")
    assert status == 200 and [p["metadata"]["name"] for p in body["items"]] == ["web"]
    assert server.requests[-1].user == "system:serviceaccount:default:robot"
    status, body = await as_bearer(server, token, "/api/v1/namespaces/kube-system/pods")
    assert status == 403, body
    assert 'User "system:serviceaccount:default:robot" cannot list resource "pods"' in \
        body["message"]
    status, _ = await as_bearer(server, token, "/api/v1/namespaces/default/secrets")
    assert status == 403
    # Another audience is not the API server's: not accepted by it.
    other = await create_token(client, request_for(pod, audience="vault"))
    status, _ = await as_bearer(server, other["status"]["token"], "/api/v1/namespaces/default/pods")
    assert status == 401
    # A bound token dies with its pod.
    server.delete("pods", "default", "web", grace=0)
    status, _ = await as_bearer(server, token, "/api/v1/namespaces/default/pods")
    assert status == 401


async def test_token_request_refusals_and_expiry(
        server: KubeApiServer, client: kube.KubeClient) -> None:
    pod = bound_pod(server)
    with pytest.raises(kube.KubeError, match="may not specify a duration less than 600") as info:
        await create_token(client, request_for(pod, seconds=599))
    assert info.value.status == 422
    stale = tokens.TokenRequest("robot", "default", (), 3600, "web", pods.PodUID("not-the-uid"))
    with pytest.raises(kube.KubeError, match="does not match the UID"):
        await create_token(client, stale)
    server.delete("serviceaccounts", "default", "robot")
    with pytest.raises(kube.NotFound, match='serviceaccounts "robot" not found'):
        await create_token(client, request_for(pod))
    bound_pod(server, "web2")
    server.accounts.max_seconds = 700  # --service-account-max-token-expiration
    pod2 = server.get("pods", "default", "web2")
    assert pod2 is not None
    answer = await create_token(client, request_for(pod2))
    assert answer["spec"]["expirationSeconds"] == 700
    now = datetime.now(UTC)
    expires = datetime.fromisoformat(answer["status"]["expirationTimestamp"].replace("Z", "+00:00"))
    assert timedelta(seconds=698) <= expires - now <= timedelta(seconds=700)
    server.accounts.clock = lambda: expires.timestamp()  # the token's last second is over
    status, _ = await as_bearer(server, answer["status"]["token"],
                                "/api/v1/namespaces/default/pods")
    assert status == 401


async def test_service_account_admission_adds_the_kube_api_access_volume() -> None:
    server = KubeApiServer(service_accounts=True)
    created = server.create("pods", pod_object(
        "web", node="n1", namespace="team",
        initContainers=[{"name": "init", "image": "busybox"}]))
    spec = created["spec"]
    assert spec["serviceAccountName"] == "default"
    [volume] = spec["volumes"]
    name = volume["name"]
    assert name.startswith("kube-api-access-") and len(name) == len("kube-api-access-") + 5
    assert volume == kubeaccounts.access_volume(name)
    for container in (*spec["initContainers"], *spec["containers"]):
        assert container["volumeMounts"] == [{"name": name, "readOnly": True,
                                              "mountPath": tokens.MOUNT_PATH}]
    # What kube-controller-manager keeps in every namespace.
    assert server.get("serviceaccounts", "team", "default") is not None
    root_ca = server.get("configmaps", "team", "kube-root-ca.crt")
    assert root_ca is not None and "ca.crt" in root_ca["data"]
    # automountServiceAccountToken false on the pod, or on its ServiceAccount: no volume.
    off = server.create("pods", pod_object("off", node="n1", namespace="team",
                                           automountServiceAccountToken=False))
    assert "volumes" not in off["spec"] or not off["spec"]["volumes"]
    server.create("serviceaccounts", {"metadata": {"name": "quiet", "namespace": "team"},
                                      "automountServiceAccountToken": False})
    quiet = server.create("pods", pod_object("quiet", node="n1", namespace="team",
                                             serviceAccountName="quiet"))
    assert not quiet["spec"].get("volumes")
    assert not quiet["spec"]["containers"][0].get("volumeMounts")


# -- nodelet's token manager -------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_manager_caches_refreshes_and_keeps_a_valid_token_when_refresh_fails(
        server: KubeApiServer, client: kube.KubeClient) -> None:
    pod = bound_pod(server)
    clock = Clock()
    manager = token_service.TokenManager(
        fetch=lambda r: create_token(client, r), clock=clock, jitter=lambda: 0.0)
    request = request_for(pod, seconds=3600)
    first = await manager.token(request)
    # The manager's clock from now on: not before the server issued the token (a token
    # issued "in the future" is refreshed at once, the kubelet's rule for clock leaps).
    clock.now = datetime.now(UTC)
    assert await manager.token(request) == first and manager.fetches == 1  # cached
    clock.now += timedelta(seconds=2879)
    assert await manager.token(request) == first and manager.fetches == 1
    # Past 80 % of its lifetime, but the API fails: the still valid token is kept.
    clock.now += timedelta(seconds=2)
    server.inject(path="/serviceaccounts/robot/token", status=500, times=1)
    assert await manager.token(request) == first and manager.fetches == 2
    # The next call refreshes it (the real clock is behind the manager's: the API's new
    # expiry is earlier; what matters is a new token).
    second = await manager.token(request)
    assert second.token != first.token and manager.fetches == 3
    # A token that expired and cannot be renewed is an error, with the API's words.
    clock.now = second.expires + timedelta(seconds=1)
    server.inject(path="/serviceaccounts/robot/token", status=500, times=1)
    with pytest.raises(token_service.FetchError, match=r"expired and refresh failed: .*500"):
        await manager.token(request)


async def test_manager_first_failure_says_failed_to_fetch_token(
        server: KubeApiServer, client: kube.KubeClient) -> None:
    pod = bound_pod(server)
    server.delete("serviceaccounts", "default", "robot")
    manager = token_service.TokenManager(fetch=lambda r: create_token(client, r),
                                         clock=lambda: datetime.now(UTC))
    with pytest.raises(token_service.FetchError) as info:
        await manager.token(request_for(pod))
    assert info.value.message.startswith("failed to fetch token: POST /api/v1/namespaces/"
                                         "default/serviceaccounts/robot/token: 404 NotFound")
    assert 'serviceaccounts "robot" not found' in info.value.message


async def test_manager_wakes_the_pod_when_its_token_is_due_and_forgets_gone_pods(
        server: KubeApiServer, client: kube.KubeClient) -> None:
    """A 2 s token (the server caps it) is due after 1.6 s at most: `run` wakes its pod."""
    server.accounts.max_seconds = 2
    pod = bound_pod(server)
    woken: list[pods.PodUID] = []
    manager = token_service.TokenManager(
        fetch=lambda r: create_token(client, r), clock=lambda: datetime.now(UTC),
        on_due=woken.append)
    request = request_for(pod)
    first = await manager.token(request)
    assert first.lifetime == 2
    group = tasks.TaskGroup()
    group.spawn("token-refresh", manager.run())
    try:
        await eventually(lambda: woken, within=5, what="the pod woken for its refresh")
        assert woken[0] == request.pod_uid
        second = await manager.token(request)  # what the woken pod's sync does
        assert second.token != first.token and manager.fetches == 2
        manager.forget_pod(request.pod_uid)
        assert manager.cached() == []
    finally:
        await group.close()


async def test_forget_pod_drops_the_locks_of_tokens_never_fetched(
        server: KubeApiServer, client: kube.KubeClient) -> None:
    """A pod whose first TokenRequest failed has no cached token, only its key's lock: that
    lock goes with the pod too, so a node with many such pods does not pile them up."""
    pod = bound_pod(server)
    other = bound_pod(server, "other")
    server.delete("serviceaccounts", "default", "robot")
    manager = token_service.TokenManager(fetch=lambda r: create_token(client, r),
                                         clock=lambda: datetime.now(UTC))
    for audience in ("", "vault"):
        with pytest.raises(token_service.FetchError):
            await manager.token(request_for(pod, audience=audience))
    with pytest.raises(token_service.FetchError):
        await manager.token(request_for(other))
    assert manager.cached() == [] and len(manager._locks) == 3
    manager.forget_pod(pods.PodUID(pod["metadata"]["uid"]))
    assert [key[4] for key in manager._locks] == [other["metadata"]["uid"]]
