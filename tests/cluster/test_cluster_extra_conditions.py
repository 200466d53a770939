"""The alpha conditions beyond KEP-3085 in cluster mode, on the real kube-apiserver: nodelet
owns its `nodelet.dev/...` types, so they reach the API in status patches (whole-second times,
accepted by the API's validation) and a pod read back from the API does not hand them over as
someone else's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodelet.model.core import extraconditions as xc
from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.services.sources import apisource
from support.controlplane import AdminClient, conditions, pod, pod_path
from support.polling import eventually


async def test_extra_conditions_reach_the_api(
        make_rig: Any, admin: AdminClient, namespace: str) -> None:
    async with make_rig() as rig:
        created = await admin.create(pod_path(namespace), pod("web", node=rig.node,
                                                             scheduler=False))
        uid = created["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="pod announced")
        found: pods.Pod = rig.desired[uid]
        missing = "pod sandbox has no IPv6 address (the node serves IPv4 and IPv6)"
        want = st.PodStatus(phase="Pending", conditions=(
            st.PodCondition(st.POD_SCHEDULED, "True"),
            st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "True"),
            st.PodCondition(xc.IPV4_READY, "True"),
            st.PodCondition(xc.IPV6_READY, "False", "PodSandboxNoIPv6Address", missing),
            st.PodCondition(xc.VOLUMES_READY, "True"),
            st.PodCondition(st.INITIALIZED, "True"),
        ), start_time=datetime.now(UTC), qos_class="BestEffort")
        rig.statuses.set_status(found, want)
        have = await eventually(
            lambda: admin.get(pod_path(namespace, "web")),
            until=lambda p: xc.IPV6_READY in conditions(p),
            within=10, what="the extra conditions in the API")
        conds = conditions(have)
        assert conds[xc.IPV6_READY]["reason"] == "PodSandboxNoIPv6Address"
        assert conds[xc.IPV6_READY]["message"] == missing
        assert conds[xc.VOLUMES_READY]["status"] == "True"
        assert conds[xc.IPV4_READY]["lastTransitionTime"].endswith("Z")
        # Read back from the API, they are nodelet's own: not kept as someone else's.
        assert [c["type"] for c in apisource.others_conditions(have)] == []
