"""KubeletEnsureSecretPulledImages through the API (issue 36, item 5), on nodelet and on the
kubelet of the same release, each joined to the real control plane: pod A with a pull Secret
pulls a private image (a local registry with htpasswd auth), pod B without the Secret
(IfNotPresent) is not let use it — it pulls as itself and the registry refuses it — and pod C
with the Secret runs it without a pull. Both columns must show the same outcome.

The kubelet runs on a containerd of its own (it kills the pods of a runtime it does not know);
the standalone kubelet refuses static pods that name Secrets, hence the cluster.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance, InstanceFactory
from support import kubeletpeer
from support.controlplane import AdminClient, ControlPlane, pod, pod_path
from support.polling import eventually
from support.registry import Auth, Registry

pytestmark = pytest.mark.runtime

AUTH: Auth = ("puller", "pulled-image-credentials")
ACCESSIBLE = "already present on machine and can be accessed by the pod"
WITHIN = 90.0


@pytest.fixture(scope="module")
def private_registry() -> Iterator[Registry]:
    with Registry.started(auth=AUTH) as running:
        yield running


@contextlib.asynccontextmanager
async def kubelet_node(control_plane: ControlPlane, admin: AdminClient, instance: Instance,
                       node: str, work: Path) -> AsyncIterator[None]:
    peer = await kubeletpeer.JoinedKubelet.join(
        endpoint=instance.containerd.endpoint, client_ca=control_plane.ca.cert,
        node_name=node, client=instance.client,
        bootstrap_kubeconfig=control_plane.bootstrap_kubeconfig(work / "bootstrap.conf"))
    try:
        await peer.wait_ready(admin, within=WITHIN)
        yield
    finally:
        await peer.stop(admin, within=WITHIN)


def pull_secret(name: str, registry: Registry) -> dict[str, Any]:
    token = base64.b64encode(f"{AUTH[0]}:{AUTH[1]}".encode()).decode()
    config = json.dumps({"auths": {registry.host: {"auth": token}}})
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()}}


def image_pod(name: str, node: str, image: str, *secrets: str) -> dict[str, Any]:
    spec = pod(name, node=node, scheduler=False,
               imagePullSecrets=[{"name": s} for s in secrets])
    spec["spec"]["containers"][0]["image"] = image
    return spec


def main_state(obj: dict[str, Any] | None) -> dict[str, Any]:
    statuses = (obj or {}).get("status", {}).get("containerStatuses") or [{}]
    return dict(statuses[0].get("state") or {})


async def events_of(admin: AdminClient, namespace: str, name: str) -> list[dict[str, Any]]:
    return await admin.items(f"/api/v1/namespaces/{namespace}/events",
                             fieldSelector=f"involvedObject.name={name}")


async def scenario(admin: AdminClient, namespace: str, node: str, image: str,
                   registry: Registry) -> None:
    await admin.create(f"/api/v1/namespaces/{namespace}/secrets",
                       pull_secret("regcred", registry))
    await admin.create(pod_path(namespace), image_pod("a", node, image, "regcred"))
    await eventually(lambda: admin.get(pod_path(namespace, "a")), within=WITHIN,
                     until=lambda p: "running" in main_state(p), seen=main_state,
                     what="a: running, pulled with its Secret")

    await admin.create(pod_path(namespace), image_pod("b", node, image))
    refused = await eventually(
        lambda: admin.get(pod_path(namespace, "b")), within=WITHIN, seen=main_state,
        until=lambda p: main_state(p).get("waiting", {}).get("reason") in (
            "ErrImagePull", "ImagePullBackOff"),
        what="b: waiting ErrImagePull or ImagePullBackOff without the Secret")
    message = main_state(refused)["waiting"].get("message", "")
    # The registry's 401 in the runtime's words (containerd 2.x).
    assert "401 Unauthorized" in message or "authorization failed" in message, message

    await admin.create(pod_path(namespace), image_pod("c", node, image, "regcred"))
    await eventually(lambda: admin.get(pod_path(namespace, "c")), within=WITHIN,
                     until=lambda p: "running" in main_state(p), seen=main_state,
                     what="c: running with the Secret")
    events = await eventually(lambda: events_of(admin, namespace, "c"), within=WITHIN,
                              until=lambda found: any(e["reason"] == "Pulled" for e in found),
                              what="c: its Pulled event")
    reasons = {e["reason"]: e["message"] for e in events}
    assert "Pulling" not in reasons, events
    assert reasons["Pulled"] == f'Container image "{image}" {ACCESSIBLE}', events


@pytest.mark.parametrize("agent", ["nodelet", "kubelet"])
async def test_a_pod_without_the_secret_cannot_use_a_private_image_another_pod_pulled(
    agent: str, pulled: list[str], join: Any, instances: InstanceFactory,
    control_plane: ControlPlane, admin: AdminClient, namespace: str,
    private_registry: Registry, tmp_path: Path,
) -> None:
    node = f"pulled-creds-{agent}"
    image = private_registry.push("private/busybox", agent)
    if agent == "nodelet":  # on the session's containerd, which `pulled` cleans
        pulled.append(image)
        async with join(node):
            await scenario(admin, namespace, node, image, private_registry)
    else:
        own = await instances()
        async with kubelet_node(control_plane, admin, own, node, tmp_path):
            await scenario(admin, namespace, node, image, private_registry)
