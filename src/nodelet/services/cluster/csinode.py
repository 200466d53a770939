"""The node's CSI drivers in the API, as the kubelet's nodeinfomanager keeps them: the
`CSINode` object named as the node (owned by the Node) lists each registered driver with its
node ID, topology keys and volume limit; the Node's `csi.volume.kubernetes.io/nodeid`
annotation maps each driver to its node ID, and the drivers' topology segments are Node labels
(the scheduler and the external-provisioner read them). Written again whenever a driver comes
or goes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from nodelet.adapters import kube
from nodelet.model.core import apijson, csi
from nodelet.services.plugins import csidrivers

log = logging.getLogger(__name__)

STORAGE = "storage.k8s.io/v1"


def csinode_drivers(drivers: Sequence[csidrivers.Driver]) -> list[apijson.Obj]:
    """CSINode `spec.drivers`."""
    out = []
    for driver in drivers:
        entry: apijson.Obj = {"name": driver.name, "nodeID": driver.node_id,
                              "topologyKeys": sorted(driver.topology) or None}
        if driver.max_volumes > 0:
            entry["allocatable"] = {"count": driver.max_volumes}
        out.append({k: v for k, v in entry.items() if v is not None})
    return out


async def sync(client: kube.KubeClient, *, node: apijson.JSON,
               drivers: Sequence[csidrivers.Driver]) -> None:
    """Bring the Node's annotation and labels and the CSINode up to date with `drivers`."""
    meta = apijson.obj(node.get("metadata"))
    name = str(meta.get("name") or "")
    # Always sent: the Node at hand may be older than the last change of the drivers.
    ids = csi.node_ids(drivers={d.name: d.node_id for d in drivers})
    patch: apijson.Obj = {"metadata": {"annotations": {csi.NODE_ID_ANNOTATION: ids}}}
    labels = {k: v for d in drivers for k, v in d.topology.items()}
    if labels:
        patch["metadata"]["labels"] = labels
    await client.patch_node(name, patch)
    await _csinode(client, name, str(meta.get("uid") or ""), csinode_drivers(drivers))


async def _csinode(client: kube.KubeClient, name: str, node_uid: str,
                   drivers: list[apijson.Obj]) -> None:
    path = kube.group_path(STORAGE, "csinodes", "", name)
    try:
        await client.request("PATCH", path, body={"spec": {"drivers": drivers}},
                             content_type="application/merge-patch+json")
        return
    except kube.NotFound:
        pass
    owner = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}] \
        if node_uid else []
    body = {"apiVersion": STORAGE, "kind": "CSINode",
            "metadata": {"name": name, "ownerReferences": owner},
            "spec": {"drivers": drivers}}
    try:
        await client.request("POST", kube.group_path(STORAGE, "csinodes"), body=body)
    except kube.AlreadyExists:  # made meanwhile: the next change patches it
        log.info("CSINode %s was created meanwhile", name)
