"""The Node deleted under a running node, on the real control plane (cluster mode alone, through
the fault proxy): the node's Lease follows the kubelet's lease controller.

The kubelet (1.37) registers its Node once (`registrationCompleted`) and does not register it
again while it runs; its Lease is made with the Node as owner, the owner read by a GET of the
Node whenever the Lease has none (`SetNodeOwnerFunc`), and a Lease is neither created nor
renewed while that GET fails. So once the Node is deleted the garbage collector deletes the
Lease (its owner is gone) and no Lease comes back — not one owned by the deleted Node, which
the collector would delete again and again. When the Node exists again (here: made by the
admin, as the next start of the node would), the Lease is created owned by the new Node.
"""

from __future__ import annotations

from typing import Any

from support.controlplane import AdminClient, node_path
from support.faultproxy import FaultProxy
from support.polling import eventually

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def owner(lease: dict[str, Any] | None) -> str:
    refs = (lease or {}).get("metadata", {}).get("ownerReferences") or [{}]
    return str(refs[0].get("uid", ""))


async def test_a_deleted_node_s_lease_follows_the_node(
        make_rig: Any, proxied: FaultProxy, admin: AdminClient) -> None:
    async with make_rig() as rig:
        node = await admin.get(node_path(rig.node))
        assert node is not None
        old_uid = node["metadata"]["uid"]
        lease = await eventually(lambda: admin.get(f"{LEASES}/{rig.node}"), within=10,
                                 what="the Lease")
        assert owner(lease) == old_uid

        await admin.delete(node_path(rig.node))
        await eventually(lambda: admin.get(f"{LEASES}/{rig.node}"), within=30,
                         until=lambda found: found is None,
                         what="the Lease deleted by the garbage collector with its Node")
        # Renewals go on (every 0.5 s here) and find no Node: no Lease is created.
        created = proxied.count(method="POST", path="/leases$", status=201)
        renewals = rig.mode.lease.attempts
        await eventually(lambda: rig.mode.lease.attempts, within=10,
                         until=lambda n: n >= renewals + 4, what="four renewal rounds")
        assert await admin.get(f"{LEASES}/{rig.node}") is None
        assert proxied.count(method="POST", path="/leases$", status=201) == created

        # The Node back (a new object): the Lease is created, owned by it.
        again = await admin.create(node_path(), {"metadata": {"name": rig.node}})
        lease = await eventually(lambda: admin.get(f"{LEASES}/{rig.node}"), within=10,
                                 until=lambda found: found is not None,
                                 what="the Lease of the new Node")
        assert owner(lease) == again["metadata"]["uid"] != old_uid, lease
        # And it stays: the collector does not take it (its owner exists).
        renewed = (lease or {})["spec"]["renewTime"]
        await eventually(lambda: admin.get(f"{LEASES}/{rig.node}"), within=10,
                         until=lambda found: found is not None
                         and found["spec"]["renewTime"] != renewed,
                         what="the new Lease renewed")
        assert owner(await admin.get(f"{LEASES}/{rig.node}")) == again["metadata"]["uid"]
