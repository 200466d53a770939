"""A Deployment on a nodelet node under the real control plane: the real scheduler places its
10 replicas, the real deployment and replica-set controllers roll it and scale it, and the real
kubectl 1.37 drives it as a user does. Every pod reaches PodReadyToStartContainers=True and
Ready; after a rolling update and a scale to 0 no sandbox of any of its pods is left.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from conftest import Instance
from nodelet.model.core import runtime as rt
from support.controlplane import BUSYBOX, AdminClient, ControlPlane, conditions, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "deploy-node"
REPLICAS = 10


def deployment(namespace: str, replicas: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: web, namespace: {namespace}}}
        spec:
          replicas: {replicas}
          selector: {{matchLabels: {{app: web}}}}
          strategy:
            type: RollingUpdate
            rollingUpdate: {{maxSurge: 3, maxUnavailable: 2}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec:
              nodeSelector: {{kubernetes.io/hostname: {NODE}}}
              terminationGracePeriodSeconds: 1
              containers:
                - name: main
                  image: {BUSYBOX}
                  imagePullPolicy: IfNotPresent
                  command: ["sh", "-c", "sleep 1000000"]
        """)


async def _pods(admin: AdminClient, namespace: str) -> list[dict[str, Any]]:
    return await admin.items(pod_path(namespace), labelSelector="app=web")


def _ready(pod: dict[str, Any]) -> bool:
    conds = conditions(pod)
    return all(conds.get(t, {}).get("status") == "True"
               for t in ("PodScheduled", "PodReadyToStartContainers", "Ready"))


async def _sandboxes_of(runtime: Instance, uids: set[str]) -> list[rt.SandboxInfo]:
    return [s for s in await runtime.client.list_pod_sandboxes() if s.uid in uids]


async def _rollout(plane: ControlPlane, namespace: str) -> None:
    code, out, err = await plane.kubectl("rollout", "status", "deployment/web", "-n", namespace,
                                         "--timeout=180s", timeout=200)
    assert code == 0, (out + err).decode()


async def test_deployment_rolls_out_rolls_and_scales_to_zero(
        join: Any, admin: AdminClient, control_plane: ControlPlane, runtime: Instance,
        namespace: str) -> None:
    async with join(NODE):
        await control_plane.apply(deployment(namespace, REPLICAS))
        await _rollout(control_plane, namespace)
        first = await eventually(lambda: _pods(admin, namespace), within=60,
                                 until=lambda ps: len(ps) == REPLICAS and all(map(_ready, ps)),
                                 seen=lambda ps: repr([(p["metadata"]["name"], conditions(p))
                                                       for p in ps]),
                                 what=f"{REPLICAS} pods Ready with their sandboxes ready")
        assert {p["spec"]["nodeName"] for p in first} == {NODE}  # placed by the scheduler
        assert all(p["status"].get("podIP") for p in first)
        uids = {p["metadata"]["uid"] for p in first}

        # A rolling update: a new template, new pods; the old ones go with their sandboxes.
        code, _, err = await control_plane.kubectl(
            "set", "env", "deployment/web", "-n", namespace, "ROLLED=1")
        assert code == 0, err
        await _rollout(control_plane, namespace)
        second = await eventually(
            lambda: _pods(admin, namespace), within=90,
            until=lambda ps: len(ps) == REPLICAS and all(map(_ready, ps))
            and not uids & {p["metadata"]["uid"] for p in ps},
            seen=lambda ps: repr([(p["metadata"]["name"], p["status"].get("phase")) for p in ps]),
            what="the rolled pods, and only they, Ready")
        await eventually(lambda: _sandboxes_of(runtime, uids), within=60,
                         until=lambda left: not left, what="the old pods' sandboxes removed")
        uids |= {p["metadata"]["uid"] for p in second}

        code, _, err = await control_plane.kubectl(
            "scale", "deployment/web", "-n", namespace, "--replicas=0")
        assert code == 0, err
        await eventually(lambda: _pods(admin, namespace), within=90, until=lambda ps: not ps,
                         what="every pod deleted after the scale to 0")
        await eventually(lambda: _sandboxes_of(runtime, uids), within=60,
                         until=lambda left: not left, what="every sandbox removed")
