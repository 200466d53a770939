"""Service account tokens against the real kube-apiserver, without containers: its TokenRequest
API (bound to a pod of the asking node under NodeRestriction) and ServiceAccount admission, and
nodelet's TokenManager (cache, refresh at 80 % of the lifetime, a failed refresh keeping the
valid token, forgetting gone pods, waking pods when a refresh is due) through the real API
client, as a node whose pods are bound to it (no kubelet runs them). API failures come from
the fault proxy in front of the server."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from nodelet.adapters import kube, kubeconfig
from nodelet.helpers import tasks
from nodelet.model.core import pods, tokens
from nodelet.services.cluster import tokens as token_service
from support.clocks import FakeClock
from support.controlplane import (
    CACHE_LAG,
    AdminClient,
    Authority,
    ControlPlane,
    kubeconfig_text,
    node_path,
    pod,
    pod_path,
)
from support.faultproxy import FaultProxy
from support.polling import eventually

# kube-apiserver's default audience: its --service-account-issuer (tests/support/controlplane.py).
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
VAULT = {"name": "vault", "projected": {"sources": [
    {"serviceAccountToken": {"audience": "vault", "path": "token"}}]}}


@dataclass
class Node:
    """A node's identity (a client certificate of the cluster CA) and its client, through a
    fault proxy; pods are bound to it by `bind`."""

    name: str
    namespace: str
    client: kube.KubeClient
    proxy: FaultProxy
    admin: AdminClient
    server: str

    async def bind(self, name: str = "web", **spec: Any) -> dict[str, Any]:
        """A pod bound to this node using service account `robot`, with a token for audience
        `vault` too (NodeRestriction lets a node ask only for the audiences its pods name)."""
        accounts = f"/api/v1/namespaces/{self.namespace}/serviceaccounts"
        if await self.admin.get(f"{accounts}/robot") is None:
            await self.admin.create(accounts, {"metadata": {"name": "robot"}})
        return await self.admin.create(pod_path(self.namespace), pod(
            name, node=self.name, scheduler=False, serviceAccountName="robot",
            volumes=[VAULT], **spec))

    async def delete_account(self) -> None:
        await self.admin.delete(f"/api/v1/namespaces/{self.namespace}/serviceaccounts/robot")


@pytest_asyncio.fixture(loop_scope="session")
async def node(control_plane: ControlPlane, admin: AdminClient, namespace: str,
               tmp_path: Path) -> AsyncIterator[Node]:
    name = f"sa-{secrets.token_hex(3)}"
    pair = Authority.load(control_plane.ca, tmp_path).issue(
        "node", f"system:node:{name}", orgs=("system:nodes",))
    await admin.create(node_path(), {"metadata": {"name": name}})
    try:
        async with FaultProxy(control_plane, tmp_path, credentials=lambda: pair) as proxy:
            path = tmp_path / "kubeconfig"
            path.write_text(kubeconfig_text(proxy.url, control_plane.ca.cert, user=name,
                                            cert=pair))
            client = kube.KubeClient(kubeconfig.load(path))
            try:
                yield Node(name, namespace, client, proxy, admin, control_plane.server)
            finally:
                await client.close()
    finally:
        for found in await admin.items(pod_path(namespace)):
            await admin.delete(pod_path(namespace, found["metadata"]["name"]),
                               gracePeriodSeconds=0)
        await admin.delete(node_path(name))


def request_for(pod_: dict[str, Any], seconds: int = 3607, audience: str = "") -> \
        tokens.TokenRequest:
    meta = pod_["metadata"]
    return tokens.TokenRequest(pod_["spec"]["serviceAccountName"], meta["namespace"],
                               (audience,) if audience else (), seconds, meta["name"],
                               pods.PodUID(meta["uid"]))


async def as_bearer(node: Node, token: str, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(
            node.server + path, headers={"Authorization": f"Bearer {token}"},
            ssl=False) as response:
        return response.status, await response.json()


async def create_token(node: Node, request: tokens.TokenRequest) -> dict[str, Any]:
    return await node.client.create_token(request.namespace, request.service_account,
                                          request.body())


async def first_token(node: Node, request: tokens.TokenRequest) -> dict[str, Any]:
    """The first TokenRequest for a pod just bound: NodeRestriction judges it by the server's
    pod cache, which may not have the binding yet (CACHE_LAG): asked again until it has."""
    async def attempt() -> dict[str, Any] | None:
        try:
            return await create_token(node, request)
        except kube.KubeError as exc:
            if CACHE_LAG in str(exc):
                return None
            raise
    return await eventually(attempt, within=10, what="a token once the server's cache has the pod")


# -- kube-apiserver's TokenRequest and ServiceAccount admission, as nodelet uses them ----------


async def test_token_request_issues_a_bearer_token_bound_to_the_pod(
        node: Node, admin: AdminClient) -> None:
    ns = node.namespace
    await admin.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    await admin.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", {
        "metadata": {"name": "robot-reads-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": ns}]})
    web = await node.bind()
    answer = await first_token(node, request_for(web))
    assert answer["kind"] == "TokenRequest"
    assert answer["spec"]["audiences"] == [API_AUDIENCE]  # the server's default
    assert answer["spec"]["expirationSeconds"] == 3607
    assert answer["spec"]["boundObjectRef"]["uid"] == web["metadata"]["uid"]
    token = answer["status"]["token"]
    status, body = await eventually(lambda: as_bearer(node, token, pod_path(ns)), within=10,
                                    until=lambda r: r[0] == 200, what="the robot's pod list")
    assert [p["metadata"]["name"] for p in body["items"]] == ["web"]
    status, body = await as_bearer(node, token, "/api/v1/namespaces/kube-system/pods")
    assert status == 403, body
    assert f'User "system:serviceaccount:{ns}:robot" cannot list resource "pods"' in \
        body["message"]
    status, _ = await as_bearer(node, token, f"/api/v1/namespaces/{ns}/secrets")
    assert status == 403
    # Another audience is not the API server's: not accepted by it.
    other = await create_token(node, request_for(web, audience="vault"))
    status, _ = await as_bearer(node, other["status"]["token"], pod_path(ns))
    assert status == 401
    # A bound token dies with its pod.
    await admin.delete(pod_path(ns, "web"), gracePeriodSeconds=0)
    await eventually(lambda: as_bearer(node, token, pod_path(ns)), within=30,
                     until=lambda r: r[0] == 401, what="the token refused once its pod is gone")


async def test_token_request_refusals(node: Node) -> None:
    web = await node.bind()
    await first_token(node, request_for(web))
    with pytest.raises(kube.KubeError,
                       match="may not specify a duration less than 10 minutes") as info:
        await create_token(node, request_for(web, seconds=599))
    assert info.value.status == 422
    stale = tokens.TokenRequest("robot", node.namespace, (), 3600, "web",
                                pods.PodUID("not-the-uid"))
    with pytest.raises(kube.KubeError, match="does not match the UID in record"):
        await create_token(node, stale)
    # Only the audiences the pod's volumes name (NodeRestriction).
    with pytest.raises(kube.KubeError,
                       match='not authorized to request tokens for audience "elsewhere"'):
        await create_token(node, request_for(web, audience="elsewhere"))
    await node.delete_account()
    with pytest.raises(kube.NotFound, match='serviceaccounts "robot" not found'):
        await create_token(node, request_for(web))


async def test_service_account_admission_adds_the_kube_api_access_volume(
        admin: AdminClient, namespace: str) -> None:
    created = await admin.create(pod_path(namespace), pod(
        "web", node="nowhere", scheduler=False,
        initContainers=[{"name": "init", "image": "busybox"}]))
    spec = created["spec"]
    assert spec["serviceAccountName"] == "default"
    [volume] = spec["volumes"]
    name = volume["name"]
    assert name.startswith("kube-api-access-") and len(name) == len("kube-api-access-") + 5
    assert volume == {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}
    for container in (*spec["initContainers"], *spec["containers"]):
        assert container["volumeMounts"] == [{"name": name, "readOnly": True,
                                              "mountPath": tokens.MOUNT_PATH}]
    # What kube-controller-manager keeps in every namespace.
    root_ca = await admin.get(f"/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt")
    assert root_ca is not None and "ca.crt" in root_ca["data"]
    # automountServiceAccountToken false on the pod, or on its ServiceAccount: no volume.
    off = await admin.create(pod_path(namespace), pod(
        "off", node="nowhere", scheduler=False, automountServiceAccountToken=False))
    assert not off["spec"].get("volumes")
    await admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                       {"metadata": {"name": "quiet"}, "automountServiceAccountToken": False})
    quiet = await admin.create(pod_path(namespace), pod(
        "quiet", node="nowhere", scheduler=False, serviceAccountName="quiet"))
    assert not quiet["spec"].get("volumes")
    assert not quiet["spec"]["containers"][0].get("volumeMounts")
    for name_ in ("web", "off", "quiet"):
        await admin.delete(pod_path(namespace, name_), gracePeriodSeconds=0)


# -- nodelet's token manager -------------------------------------------------------------------


async def test_manager_caches_refreshes_and_keeps_a_valid_token_when_refresh_fails(
        node: Node) -> None:
    web = await node.bind()
    request = request_for(web, seconds=3600)
    await first_token(node, request)  # the server's pod cache has the binding now
    clock = FakeClock()
    manager = token_service.TokenManager(
        fetch=lambda r: create_token(node, r), clock=clock, jitter=lambda: 0.0)
    first = await manager.token(request)
    # The manager's clock from now on: not before the server issued the token (a token
    # issued "in the future" is refreshed at once, the kubelet's rule for clock leaps).
    clock.now = datetime.now(UTC)
    assert await manager.token(request) == first and manager.fetches == 1  # cached
    clock.now += timedelta(seconds=2879)
    assert await manager.token(request) == first and manager.fetches == 1
    # Past 80 % of its lifetime, but the API fails: the still valid token is kept.
    clock.now += timedelta(seconds=2)
    node.proxy.inject(path="/serviceaccounts/robot/token$", status=500, times=1)
    assert await manager.token(request) == first and manager.fetches == 2
    # The next call refreshes it (the real clock is behind the manager's: the API's new
    # expiry is earlier; what matters is a new token).
    second = await manager.token(request)
    assert second.token != first.token and manager.fetches == 3
    # A token that expired and cannot be renewed is an error, with the API's words.
    clock.now = second.expires + timedelta(seconds=1)
    node.proxy.inject(path="/serviceaccounts/robot/token$", status=500, times=1)
    with pytest.raises(token_service.FetchError, match=r"expired and refresh failed: .*500"):
        await manager.token(request)


async def test_manager_first_failure_says_failed_to_fetch_token(node: Node) -> None:
    web = await node.bind()
    await first_token(node, request_for(web))
    await node.delete_account()
    manager = token_service.TokenManager(fetch=lambda r: create_token(node, r),
                                         clock=lambda: datetime.now(UTC))
    with pytest.raises(token_service.FetchError) as info:
        await manager.token(request_for(web))
    assert info.value.message.startswith(
        f"failed to fetch token: POST /api/v1/namespaces/{node.namespace}/serviceaccounts/"
        "robot/token: 404 NotFound"), info.value.message
    assert 'serviceaccounts "robot" not found' in info.value.message


async def test_manager_wakes_the_pod_when_its_token_is_due_and_forgets_gone_pods(
        node: Node) -> None:
    """A token of the shortest lifetime kube-apiserver grants (600 s) is due at 80 % of it;
    the manager's clock runs AHEAD seconds ahead of the server's, so that is 2 s from now:
    `run` wakes its pod then."""
    web = await node.bind()
    request = request_for(web, seconds=600)
    await first_token(node, request)
    ahead = timedelta(seconds=600 * 0.8 - 2)
    woken: list[pods.PodUID] = []
    manager = token_service.TokenManager(
        fetch=lambda r: create_token(node, r), clock=lambda: datetime.now(UTC) + ahead,
        on_due=woken.append, jitter=lambda: 0.0)
    first = await manager.token(request)
    assert first.lifetime == 600
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


async def test_forget_pod_drops_the_locks_of_tokens_never_fetched(node: Node) -> None:
    """A pod whose first TokenRequest failed has no cached token, only its key's lock: that
    lock goes with the pod too, so a node with many such pods does not pile them up."""
    web = await node.bind()
    other = await node.bind("other")
    for bound in (web, other):
        await first_token(node, request_for(bound))
    await node.delete_account()
    manager = token_service.TokenManager(fetch=lambda r: create_token(node, r),
                                         clock=lambda: datetime.now(UTC))
    for audience in ("", "vault"):
        with pytest.raises(token_service.FetchError):
            await manager.token(request_for(web, audience=audience))
    with pytest.raises(token_service.FetchError):
        await manager.token(request_for(other))
    assert manager.cached() == [] and len(manager._locks) == 3
    manager.forget_pod(pods.PodUID(web["metadata"]["uid"]))
    assert [key[4] for key in manager._locks] == [other["metadata"]["uid"]]
