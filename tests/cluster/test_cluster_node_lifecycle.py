"""The Node and its Lease under the real node-lifecycle controller: registered Ready with its
capacity, the Lease renewed; nodelet stopped → the controller marks the node Unknown, taints it
`node.kubernetes.io/unreachable` and its pods not Ready; nodelet started again on the same data
dir → Ready, the taint gone, the running pod adopted (same sandbox) and Ready again.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import Instance
from nodelet.model.core import runtime as rt
from support.controlplane import AdminClient, conditions, node_path, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "lifecycle-node"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}"
UNREACHABLE = "node.kubernetes.io/unreachable"


def _ready(node: dict[str, Any] | None) -> str:
    return conditions(node).get("Ready", {}).get("status", "")


def _taints(node: dict[str, Any] | None) -> set[str]:
    return {t["key"] for t in (node or {}).get("spec", {}).get("taints") or []}


async def test_node_registered_ready_with_capacity_and_lease(
        join: Any, admin: AdminClient) -> None:
    async with join(NODE):
        node = await eventually(lambda: admin.get(node_path(NODE)), within=30,
                                until=lambda n: _ready(n) == "True", what="the node Ready")
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == NODE
        assert conditions(node)["Ready"]["reason"] == "KubeletReady"
        status = node["status"]
        assert int(status["capacity"]["cpu"]) >= 1 and status["capacity"]["pods"] == "110"
        assert status["nodeInfo"]["kubeletVersion"].startswith("v1.37")
        assert any(a["type"] == "InternalIP" for a in status["addresses"])
        lease = await admin.get(LEASE)
        assert lease is not None and lease["spec"]["holderIdentity"] == NODE
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        first = lease["spec"]["renewTime"]
        await eventually(lambda: admin.get(LEASE), within=10,
                         until=lambda x: x is not None and x["spec"]["renewTime"] != first,
                         what="the Lease renewed")
        # The not-ready taint the lifecycle controller put on the new node is gone.
        assert "node.kubernetes.io/not-ready" not in _taints(await admin.get(node_path(NODE)))


async def _sandboxes(runtime: Instance, uid: str) -> list[rt.SandboxInfo]:
    return [s for s in await runtime.client.list_pod_sandboxes() if s.uid == uid]


async def test_not_ready_and_tainted_while_stopped_ready_again_after_a_restart(
        join: Any, admin: AdminClient, runtime: Instance, namespace: str) -> None:
    async with join(NODE) as harness:
        await eventually(lambda: admin.get(node_path(NODE)), within=30,
                         until=lambda n: _ready(n) == "True", what="the node Ready")
        created = await admin.create(pod_path(namespace), pod("keeper", node=NODE))
        uid = created["metadata"]["uid"]
        await eventually(lambda: admin.get(pod_path(namespace, "keeper")), within=60,
                         until=lambda p: conditions(p).get("Ready", {}).get("status") == "True",
                         what="the pod Ready")
        (before,) = await _sandboxes(runtime, uid)

        await harness.stop(terminate_pods=False)  # as `systemctl stop nodelet`: pods stay
        node = await eventually(
            lambda: admin.get(node_path(NODE)), within=60,
            until=lambda n: _ready(n) == "Unknown" and UNREACHABLE in _taints(n),
            seen=lambda n: repr((conditions(n).get("Ready"), _taints(n))),
            what="the node Unknown and tainted unreachable by the lifecycle controller")
        assert conditions(node)["Ready"]["reason"] == "NodeStatusUnknown"
        await eventually(lambda: admin.get(pod_path(namespace, "keeper")), within=30,
                         until=lambda p: conditions(p).get("Ready", {}).get("status") == "False",
                         what="the pod marked not Ready by the controller")

        await harness.start()  # the same data dir, kubeconfig and client certificate
        await eventually(lambda: admin.get(node_path(NODE)), within=60,
                         until=lambda n: _ready(n) == "True" and UNREACHABLE not in _taints(n),
                         seen=lambda n: repr((conditions(n).get("Ready"), _taints(n))),
                         what="the node Ready again, the taint removed")
        await eventually(lambda: admin.get(pod_path(namespace, "keeper")), within=60,
                         until=lambda p: conditions(p).get("Ready", {}).get("status") == "True",
                         what="the pod Ready again")
        after = await _sandboxes(runtime, uid)
        assert [s.id for s in after] == [before.id], after  # adopted, not re-created
