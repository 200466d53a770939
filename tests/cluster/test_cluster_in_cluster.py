"""A pod calls the API from inside, as in-cluster clients do, on a nodelet node with kube-proxy
(iptables mode, the same build) beside it: agnhost's `inclusterclient` — client-go's
`rest.InClusterConfig`, a real Go TLS client — reads the `kube-api-access-*` volume that
kube-apiserver's ServiceAccount admission added (a token nodelet got by TokenRequest, bound to
the pod and the node, and the cluster CA that the root-CA publisher wrote) and the `kubernetes`
Service's variables, and polls `/healthz` through the Service IP, which kube-proxy's rules send
to kube-apiserver. The audit log shows each call: as the pod's service account, bound to the
pod and the node, from the pod's own IP.

After a restart of nodelet under the running pod, the token file is written anew, and the
pod's client, which reads the file again every minute (client-go's cached token source), calls
with the new token (a new credential ID in the audit log); that node talks to kube-apiserver
through the fault proxy, which answers every ConfigMap list a second late, so a pod's first
sync comes before `kube-root-ca.crt` was read; no Warning event and no false MountVolume
message (`configmap ... not found`) come of any of it. A pod whose ServiceAccount is gone
cannot get its token: its sandbox waits with the API's words in a FailedMount until the
account exists again.

agnhost is the image built from the pinned Kubernetes (images/e2e.py), pushed to the tests'
local registry and pulled by nodelet as any image.
"""

from __future__ import annotations

import json
import logging
import ssl
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.controlplane import (
    SERVICE_IP,
    AdminClient,
    ControlPlane,
    Pair,
    conditions,
    kube_proxy_leftovers,
    pod,
    pod_path,
)
from support.faultproxy import FaultProxy
from support.harness import Harness
from support.polling import eventually

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images"))
import e2e as e2e_images

pytestmark = pytest.mark.runtime

NODE = "in-cluster-node"
SA = "/var/run/secrets/kubernetes.io/serviceaccount"
CALLER = ["/agnhost", "inclusterclient", "--poll-interval", "1"]


@pytest.fixture(scope="module")
def agnhost(registry: Any) -> Iterator[str]:
    """agnhost of the pinned release in the local registry; its reference."""
    try:
        archives = e2e_images.build_all()
    except (OSError, SystemExit) as exc:  # agnhost itself not built
        pytest.fail(f"cannot build the agnhost image ({exc}): run `kube/build.sh agnhost`")
    yield registry.push_archive(archives["agnhost.tar"], "e2e-test-images/agnhost", "2.66.1")


def caller(agnhost: str, name: str = "caller") -> dict[str, Any]:
    # No cluster DNS here: ClusterFirst would fall back to Default with a MissingClusterDNS
    # Warning, as under the kubelet.
    spec = pod(name, node=NODE, dnsPolicy="Default")
    spec["spec"]["containers"][0].update(image=agnhost, command=CALLER)
    return spec


def _self_review(server: str, ca: bytes, token: str) -> dict[str, Any]:
    context = ssl.create_default_context(cadata=ca.decode())
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1",
                       "kind": "SelfSubjectReview"}).encode()
    request = urllib.request.Request(
        f"{server}/apis/authentication.k8s.io/v1/selfsubjectreviews", data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return dict(json.loads(answer.read()))


def pod_calls(plane: ControlPlane, namespace: str, name: str) -> list[dict[str, Any]]:
    """The audit events of `/healthz` calls made with pod `name`'s bound token."""
    return [e for e in plane.audit_events()
            if e.get("requestURI") == "/healthz" and e.get("stage") == "ResponseComplete"
            and e.get("user", {}).get("username") == f"system:serviceaccount:{namespace}:default"
            and e["user"].get("extra", {}).get("authentication.kubernetes.io/pod-name")
            == [name]]


def credential(event: dict[str, Any]) -> str:
    return str(event["user"]["extra"]["authentication.kubernetes.io/credential-id"][0])


async def running(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    found = await eventually(lambda: admin.get(pod_path(namespace, name)), within=90,
                             until=lambda p: (p or {}).get("status", {}).get("phase")
                             == "Running", what=f"{name} running")
    assert found is not None
    return found


async def test_a_pod_calls_the_api_through_kubernetes_default(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str,
        agnhost: str, pulled: list[str]) -> None:
    pulled.append(agnhost)
    async with join(NODE, kube_proxy=True):
        await admin.create(pod_path(namespace), caller(agnhost))
        found = await running(admin, namespace, "caller")
        pod_ip = found["status"]["podIP"]

        async def inside(*command: str) -> bytes:
            code, out, err = await control_plane.kubectl(
                "exec", "caller", "-n", namespace, "--", *command)
            assert code == 0, err
            return out

        env = (await inside("env")).decode()
        assert f"KUBERNETES_SERVICE_HOST={SERVICE_IP}" in env, env
        assert "KUBERNETES_SERVICE_PORT=443" in env, env
        assert (await inside("cat", f"{SA}/namespace")).decode() == namespace
        ca = await inside("cat", f"{SA}/ca.crt")
        assert ca == control_plane.ca.cert.read_bytes()  # the root-CA publisher's copy

        # The pod's own calls, through the Service IP: kube-apiserver took them as the pod's
        # service account, bound to this pod on this node, from the pod's address.
        calls = await eventually(lambda: pod_calls(control_plane, namespace, "caller"),
                                 within=60, until=lambda c: len(c) >= 3,
                                 what="the pod's /healthz calls in the audit log")
        for call in calls:
            assert call["responseStatus"]["code"] == 200, call
            assert call["sourceIPs"] == [pod_ip], call
            assert call["user"]["extra"]["authentication.kubernetes.io/node-name"] == [NODE]
        code, logs, err = await control_plane.kubectl("logs", "caller", "-n", namespace)
        assert code == 0, err
        assert b"calling /healthz" in logs and b"status=failed" not in logs, logs.decode()

        # The same token, read from the pod, authenticates it from outside too.
        token = (await inside("cat", f"{SA}/token")).decode()
        user = _self_review(control_plane.server, ca, token)["status"]["userInfo"]
        assert user["username"] == f"system:serviceaccount:{namespace}:default", user
        assert user["extra"]["authentication.kubernetes.io/pod-name"] == ["caller"], user
        assert any(v["name"].startswith("kube-api-access-") for v in found["spec"]["volumes"])
    # kube-proxy stopped, its rules and chains removed (unless another one runs now).
    assert kube_proxy_leftovers() in (None, [])


def token_file(harness: Harness, found: dict[str, Any]) -> str | None:
    volume = next(v["name"] for v in found["spec"]["volumes"]
                  if v["name"].startswith("kube-api-access-"))
    path = (harness.settings.data_dir / "pods" / found["metadata"]["uid"] / "volumes" /
            "kubernetes.io~projected" / volume / "token")
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


async def problems(admin: AdminClient, harness: Harness, namespace: str) -> list[str]:
    """Warning events (the agent's and the API's) and false volume errors of the caller."""
    found = [f"agent event {e.reason}: {e.message}"
             for e in harness.agent_or_fail().events(pod="caller") if e.type == "Warning"]
    found += [f"API event {e.get('reason')}: {e.get('message')}"
              for e in await admin.items(f"/api/v1/namespaces/{namespace}/events")
              if e.get("type") == "Warning" and e["involvedObject"]["name"] == "caller"]
    current = await admin.get(pod_path(namespace, "caller"))
    found += [f"condition {t}: {c.get('message')}" for t, c in conditions(current).items()
              if "MountVolume" in (c.get("message") or "")]
    return found


async def test_after_a_restart_the_pod_calls_with_its_new_token(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str,
        agnhost: str, pulled: list[str], caplog: pytest.LogCaptureFixture,
        tmp_path: Path) -> None:
    pulled.append(agnhost)
    caplog.set_level(logging.WARNING)
    current = tmp_path / "pki" / "kubelet-client-current.pem"
    async with FaultProxy(control_plane, tmp_path,
                          credentials=lambda: Pair(current, current)) as proxy:
        # A slow API for ConfigMaps: every list answers a second late.
        proxy.inject(method="GET", path="/configmaps$", verb="list", delay=1.0, times=10**6)
        await _restart_under_the_pod(
            join(NODE, kube_proxy=True, cert_dir=tmp_path / "pki",
                 bootstrap_kubeconfig=proxy.bootstrap_kubeconfig(tmp_path / "bootstrap.conf")),
            admin, control_plane, namespace, agnhost)
        assert proxy.count(method="GET", path="/configmaps$") > 0  # the delayed lists
    kept = [r.getMessage() for r in caplog.records
            if "keeping the old files" in r.getMessage() or "MountVolume" in r.getMessage()]
    assert kept == []


async def _restart_under_the_pod(joining: Any, admin: AdminClient, control_plane: ControlPlane,
                                 namespace: str, agnhost: str) -> None:
    async with joining as harness:
        await admin.create(pod_path(namespace), caller(agnhost))
        found = await running(admin, namespace, "caller")
        calls = await eventually(lambda: pod_calls(control_plane, namespace, "caller"),
                                 within=60, what="the pod's first calls")
        first = credential(calls[0])
        # nodelet restarts under the running pod: its first sync fetches a token again.
        before = token_file(harness, found)
        await harness.stop(terminate_pods=False)
        await harness.start()
        await eventually(lambda: token_file(harness, found), until=lambda t: t != before,
                         within=30, what="the token file written again after the restart")
        # client-go reads the file again within a minute: its calls carry the new token.
        await eventually(lambda: pod_calls(control_plane, namespace, "caller"), within=120,
                         until=lambda c: credential(c[-1]) != first,
                         what="the pod calling with the new token",
                         seen=lambda c: credential(c[-1]) if c else "no call")
        assert await problems(admin, harness, namespace) == []


async def test_a_token_the_api_refuses_is_a_failed_mount_until_it_can_be_had(
        join: Any, admin: AdminClient, namespace: str) -> None:
    """kube-apiserver's ServiceAccount admission admits a pod only for an account that
    exists: the account goes after the pod is admitted and before the node starts."""
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    await admin.create(accounts, {"metadata": {"name": "ghost"}})
    ghostly = pod("ghostly", node=NODE, dnsPolicy="Default", serviceAccountName="ghost",
                  automountServiceAccountToken=False, volumes=[
                      {"name": "api", "projected": {"sources": [
                          {"serviceAccountToken": {"path": "token"}}]}}])
    ghostly["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "api", "mountPath": "/var/run/secrets/tokens", "readOnly": True}]
    await admin.create(pod_path(namespace), ghostly)
    await admin.delete(f"{accounts}/ghost")
    words = (f"failed to fetch token: POST /api/v1/namespaces/{namespace}/serviceaccounts/"
             'ghost/token: 404 NotFound serviceaccounts "ghost" not found')
    expected = f'MountVolume.SetUp failed for volume "api" : {words}'

    async def condition() -> dict[str, Any]:
        found = await admin.get(pod_path(namespace, "ghostly"))
        return conditions(found).get("PodReadyToStartContainers", {})

    async with join(NODE, start=False) as harness:
        await harness.start()
        cond = await eventually(condition, until=lambda c: c.get("status") == "False"
                                and expected in (c.get("message") or ""), within=60,
                                what="PodReadyToStartContainers False with the API's words")
        assert cond["reason"] == "PodSandboxNotReady"
        mounts = [e for e in harness.agent_or_fail().events(pod="ghostly")
                  if e.reason == "FailedMount"]
        assert [(e.type, e.message) for e in mounts] == [("Warning", expected)]
        # Once the ServiceAccount exists, the pod's retry (its back-off) gets the token.
        await admin.create(accounts, {"metadata": {"name": "ghost"}})
        await eventually(condition, until=lambda c: c.get("status") == "True", within=60,
                         what="the pod's sandbox after the token could be had")
