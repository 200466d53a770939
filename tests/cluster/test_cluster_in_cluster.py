"""A pod's in-cluster credentials on a nodelet node, checked against the real API server: the
`kube-api-access-*` volume that kube-apiserver's ServiceAccount admission added carries a token
nodelet got by TokenRequest (bound to the pod and the node) and the cluster CA that the
root-CA publisher wrote; the pod's environment has the `kubernetes` Service's variables; the
token read from inside the pod authenticates to kube-apiserver as the pod's service account.

The call is made by the test with what the pod holds, not from inside the pod: the images here
have no TLS client that completes a handshake with kube-apiserver (busybox's built-in TLS is
refused by Go's and OpenSSL's servers alike: "no shared cipher" / alert 40, measured), and
there is no kube-proxy on the node yet for the Service IP.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

import pytest

from controlplane import SERVICE_IP, AdminClient, ControlPlane, pod, pod_path
from polling import eventually

pytestmark = pytest.mark.runtime

NODE = "in-cluster-node"
SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def _self_review(server: str, ca: bytes, token: str) -> dict[str, Any]:
    context = ssl.create_default_context(cadata=ca.decode())
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1",
                       "kind": "SelfSubjectReview"}).encode()
    request = urllib.request.Request(
        f"{server}/apis/authentication.k8s.io/v1/selfsubjectreviews", data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return dict(json.loads(answer.read()))


async def test_the_pods_projected_token_and_ca_authenticate_it_to_the_api_server(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    async with join(NODE):
        await admin.create(pod_path(namespace), pod("caller", node=NODE))
        await eventually(lambda: admin.get(pod_path(namespace, "caller")), within=60,
                         until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
                         what="the pod running")

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
        token = (await inside("cat", f"{SA}/token")).decode()
        # The CA from the pod verifies the API server; the token from it authenticates.
        answer = _self_review(control_plane.server, ca, token)
        user = answer["status"]["userInfo"]
        assert user["username"] == f"system:serviceaccount:{namespace}:default", user
        # Bound by TokenRequest to this pod on this node.
        assert user["extra"]["authentication.kubernetes.io/pod-name"] == ["caller"], user
        assert user["extra"]["authentication.kubernetes.io/node-name"] == [NODE], user
        found = await admin.get(pod_path(namespace, "caller")) or {}
        assert any(v["name"].startswith("kube-api-access-") for v in found["spec"]["volumes"])
