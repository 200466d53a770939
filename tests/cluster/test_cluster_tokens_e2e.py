"""End to end on real containerd: a pod on a nodelet node uses its projected service account
token the way client-go's in-cluster configuration does and lists pods through the API.

The test API server acts as kube-apiserver with the ServiceAccount admission plugin (it adds
the `kube-api-access-*` volume: token, `kube-root-ca.crt`, namespace) and the Node authorizer;
it listens on the node's IP, which pods reach through their bridge, and caps tokens at 6 s
(as `--service-account-max-token-expiration` would), so the token rotates in the running pod
within seconds. The pod is the first of its namespace, ConfigMap lists answer slowly, and nodelet
is restarted under the pod. None of it may produce a Warning event, a false MountVolume message
in a condition or a "keeping the old files" log.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from harness import Harness
from kubeapi import KubeApiServer, pod_object
from nodelet.adapters import host
from nodelet.services import cluster
from polling import eventually

pytestmark = pytest.mark.runtime

NODE = "sa-node"
USER = "system:serviceaccount:team:default"
# What client-go's rest.InClusterConfig reads, with busybox's wget (the server is plain HTTP).
CLIENT = """
D=/var/run/secrets/kubernetes.io/serviceaccount
API=http://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
while true; do
  wget -q -O /tmp/pods --header "Authorization: Bearer $(cat $D/token)" \
    "$API/api/v1/namespaces/$(cat $D/namespace)/pods" && test -s $D/ca.crt && echo listed
  sleep 0.5
done
"""


def client_pod(server: KubeApiServer) -> dict[str, Any]:
    # No cluster DNS here: ClusterFirst would fall back to Default with a MissingClusterDNS
    # Warning, as under the kubelet.
    obj = pod_object("client", node=NODE, namespace="team", command=CLIENT, dnsPolicy="Default")
    obj["spec"]["containers"][0]["env"] = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": server.host},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(server.port)},
    ]
    return obj


def listed_by_pod(server: KubeApiServer, status: int = 200) -> int:
    return sum(1 for r in server.requests if r.user == USER and r.verb == "list"
               and r.resource == "pods" and r.status == status)


def token_file(harness: Harness, pod: dict[str, Any]) -> str | None:
    volume = next(v["name"] for v in pod["spec"]["volumes"]
                  if v["name"].startswith("kube-api-access-"))
    path = (harness.settings.data_dir / "pods" / pod["metadata"]["uid"] / "volumes" /
            "kubernetes.io~projected" / volume / "token")
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def problems(server: KubeApiServer, harness: Harness) -> list[str]:
    """Warning events (agent and API) and false volume errors in any stored pod version."""
    found = [f"agent event {e.reason}: {e.message}"
             for e in harness.agent_or_fail().events(pod="client") if e.type == "Warning"]
    found += [f"API event {e.get('reason')}: {e.get('message')}"
              for e in server.list_objects("events")
              if e.get("type") == "Warning" and e["involvedObject"]["name"] == "client"]
    for change in server.history:
        if change.plural == "pods" and change.new["metadata"]["name"] == "client":
            found += [f"condition {c['type']}: {c.get('message')}"
                      for c in change.new.get("status", {}).get("conditions", [])
                      if "MountVolume" in (c.get("message") or "")]
    return found


@asynccontextmanager
async def joined(runtime: Instance, tmp_path: Path, **server_options: Any) -> AsyncIterator[
        tuple[KubeApiServer, Harness]]:
    """An agent on the session's containerd joined as node `sa-node` to a fresh test API
    server on the node's IP; the pods left are deleted and terminated at the end."""
    server = KubeApiServer(node=NODE, host=host.host_ip(), bookmark_interval=1.0,
                           **server_options)
    await server.start()
    harness = Harness(endpoint=runtime.containerd.endpoint, node_name=NODE)
    config = cluster.ClusterSettings(
        kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"), node_status_period=1.0,
        lease_renew_period=1.0, status_resync_period=2.0)
    harness.settings = dataclasses.replace(harness.settings, cluster=config)
    try:
        yield server, harness
    finally:
        for obj in server.list_objects("pods"):
            server.delete("pods", obj["metadata"]["namespace"], obj["metadata"]["name"], grace=0)
        if harness.agent is not None:
            await eventually(lambda: not harness.agent_or_fail().pods(), within=60,
                             what="pods terminated")
        await harness.stop()
        harness.cleanup()
        await server.stop()


async def test_pod_lists_pods_with_its_projected_token_which_rotates(
        runtime: Instance, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with joined(runtime, tmp_path, service_accounts=True, max_token_seconds=6) as (
            server, harness):
        await _rotates_and_restarts(server, harness, caplog)


async def _rotates_and_restarts(server: KubeApiServer, harness: Harness,
                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    # A slow API: every list of a ConfigMap answers after 1 s, so a pod's first sync comes
    # before kube-root-ca.crt was read (the false `configmap ... not found`).
    server.inject(method="GET", path="/configmaps", verb="list", delay=1.0, fail=False,
                  times=None)
    await harness.start()
    pod = server.create("pods", client_pod(server))
    await eventually(lambda: listed_by_pod(server), within=60,
                     what="the pod listed pods through the API with its token")
    first = token_file(harness, pod)
    assert first is not None and first in server.accounts.issued
    # Rotated in the volume of the running pod, and the container uses the new token.
    await eventually(lambda: token_file(harness, pod), until=lambda t: t != first,
                     within=20, what="the token file rotated")
    await eventually(lambda: [t for t, n in server.accounts.accepted.items()
                              if t != first and n > 0], within=20,
                     what="the container authenticated with the rotated token")

    # nodelet restarts under the running pod: its first sync fetches a token again and
    # reads kube-root-ca.crt from a fresh watch — still no false error.
    await harness.stop(terminate_pods=False)
    before = token_file(harness, pod)
    await harness.start()
    await eventually(lambda: token_file(harness, pod), until=lambda t: t != before,
                     within=30, what="the volume written again after the restart")
    calls = listed_by_pod(server)
    await eventually(lambda: listed_by_pod(server), until=lambda n: n > calls, within=20,
                     what="the pod still lists pods after the restart")

    assert problems(server, harness) == []
    kept = [r.getMessage() for r in caplog.records
            if "keeping the old files" in r.getMessage() or "MountVolume" in r.getMessage()]
    assert kept == []
    # Only nodelet's own node asked for tokens, each bound to the pod.
    asks = [r for r in server.requests if r.resource == "serviceaccounts"]
    assert asks and all(r.subresource == "token" and r.user == f"system:node:{NODE}"
                        and r.status == 201 for r in asks), asks


async def test_a_token_the_api_refuses_is_a_failed_mount_until_it_can_be_had(
        runtime: Instance, tmp_path: Path) -> None:
    """No admission plugin here: the pod names a ServiceAccount that does not exist yet."""
    async with joined(runtime, tmp_path) as (server, harness):
        await harness.start()
        obj = pod_object("ghostly", node=NODE, namespace="team", dnsPolicy="Default",
                         serviceAccountName="ghost", volumes=[
                             {"name": "api", "projected": {"sources": [
                                 {"serviceAccountToken": {"path": "token"}}]}}])
        obj["spec"]["containers"][0]["volumeMounts"] = [
            {"name": "api", "mountPath": "/var/run/secrets/tokens", "readOnly": True}]
        server.create("pods", obj)
        words = 'failed to fetch token: POST /api/v1/namespaces/team/serviceaccounts/ghost/' \
            'token: 404 NotFound serviceaccounts "ghost" not found'
        expected = f'MountVolume.SetUp failed for volume "api" : {words}'

        def condition() -> dict[str, Any]:
            found = server.get("pods", "team", "ghostly") or {}
            return {c["type"]: c for c in found.get("status", {}).get("conditions", [])}.get(
                "PodReadyToStartContainers", {})

        cond = await eventually(condition, until=lambda c: c.get("status") == "False"
                                and expected in (c.get("message") or ""), within=30,
                                what="PodReadyToStartContainers False with the API's words")
        assert cond["reason"] == "PodSandboxNotReady"
        mounts = [e for e in harness.agent_or_fail().events(pod="ghostly")
                  if e.reason == "FailedMount"]
        assert [(e.type, e.message) for e in mounts] == [("Warning", expected)]
        # Once the ServiceAccount exists, the pod's retry (its back-off) gets the token.
        server.create("serviceaccounts", {"metadata": {"name": "ghost", "namespace": "team"}})
        await eventually(condition, until=lambda c: c.get("status") == "True", within=30,
                         what="the pod's sandbox after the token could be had")
