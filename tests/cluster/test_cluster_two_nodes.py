"""Two nodelet nodes on one control plane, each with its own data dir, containerd, bridge, pod
CIDR and node-server port: the real scheduler spreads a Deployment across both (a topology
spread constraint on the hostname), and a pod on one node reaches a pod on the other by pod IP
(the host routes between the two bridges: both ranges are on this host).
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from conftest import InstanceFactory
from support.controlplane import BUSYBOX, AdminClient, ControlPlane, conditions, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODES = ("two-a", "two-b")
REPLICAS = 4
SERVE = "mkdir -p /www && hostname > /www/index.html && httpd -f -p 8080 -h /www"


def deployment(namespace: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: spread, namespace: {namespace}}}
        spec:
          replicas: {REPLICAS}
          selector: {{matchLabels: {{app: spread}}}}
          template:
            metadata: {{labels: {{app: spread}}}}
            spec:
              terminationGracePeriodSeconds: 1
              affinity:
                nodeAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                    nodeSelectorTerms:
                      - matchExpressions:
                          - key: kubernetes.io/hostname
                            operator: In
                            values: [{", ".join(NODES)}]
              topologySpreadConstraints:
                - maxSkew: 1
                  topologyKey: kubernetes.io/hostname
                  whenUnsatisfiable: DoNotSchedule
                  labelSelector: {{matchLabels: {{app: spread}}}}
              containers:
                - name: main
                  image: {BUSYBOX}
                  imagePullPolicy: IfNotPresent
                  command: ["sh", "-c", "{SERVE}"]
        """)


async def test_a_deployment_spreads_over_two_nodes_and_their_pods_reach_each_other(
        join: Any, instances: InstanceFactory, admin: AdminClient,
        control_plane: ControlPlane, namespace: str) -> None:
    second = await instances()
    async with join(NODES[0]), join(NODES[1], on=second,
                                    pod_cidrs=second.settings.runtime.pod_cidrs):
        await control_plane.apply(deployment(namespace))
        code, out, err = await control_plane.kubectl(
            "rollout", "status", "deployment/spread", "-n", namespace, "--timeout=120s",
            timeout=150)
        assert code == 0, (out + err).decode()
        pods = await eventually(
            lambda: admin.items(pod_path(namespace), labelSelector="app=spread"), within=30,
            until=lambda ps: len(ps) == REPLICAS and all(
                conditions(p).get("Ready", {}).get("status") == "True" for p in ps),
            what="every replica Ready")
        on = {n: [p for p in pods if p["spec"]["nodeName"] == n] for n in NODES}
        assert [len(on[n]) for n in NODES] == [2, 2], {n: len(v) for n, v in on.items()}
        a, b = on[NODES[0]][0], on[NODES[1]][0]
        assert a["status"]["podIP"].rsplit(".", 1)[0] != b["status"]["podIP"].rsplit(".", 1)[0]
        for source, target in ((a, b), (b, a)):
            code, out, err = await control_plane.kubectl(
                "exec", source["metadata"]["name"], "-n", namespace, "--",
                # (busybox's `wget -T` dies of SIGSEGV here: no -T; kubectl's timeout bounds it)
                "wget", "-qO-", f"http://{target['status']['podIP']}:8080/")
            assert code == 0, err
            assert out.decode().strip() == target["metadata"]["name"]  # its hostname
        code, _, err = await control_plane.kubectl("delete", "deployment/spread", "-n",
                                                   namespace)
        assert code == 0, err
