"""The alpha conditions beyond KEP-3085 in cluster mode: nodelet owns its `nodelet.dev/...`
types, so they reach the API in status patches (whole-second times) and a pod read back from
the API does not hand them over as someone else's."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubeapi import ClusterRig, KubeApiServer, pod_object
from nodelet.model.core import extraconditions as xc
from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.services import apisource
from polling import eventually


def api_conditions(server: KubeApiServer, name: str) -> dict[str, dict[str, Any]]:
    found = server.get("pods", "default", name)
    assert found is not None, f"pod {name} gone"
    return {c["type"]: c for c in found["status"].get("conditions", [])}


async def test_extra_conditions_reach_the_api(server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        created = server.create("pods", pod_object("web", node="n1"))
        uid = created["metadata"]["uid"]
        await eventually(lambda: uid in rig.desired, within=10, what="pod announced")
        pod: pods.Pod = rig.desired[uid]
        missing = "pod sandbox has no IPv6 address (the node serves IPv4 and IPv6)"
        want = st.PodStatus(phase="Pending", conditions=(
            st.PodCondition(st.POD_SCHEDULED, "True"),
            st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "True"),
            st.PodCondition(xc.IPV4_READY, "True"),
            st.PodCondition(xc.IPV6_READY, "False", "PodSandboxNoIPv6Address", missing),
            st.PodCondition(xc.VOLUMES_READY, "True"),
            st.PodCondition(st.INITIALIZED, "True"),
        ), start_time=datetime.now(UTC))
        rig.statuses.set_status(pod, want)
        have = await eventually(
            lambda: api_conditions(server, "web"), until=lambda c: xc.IPV6_READY in c,
            within=10, what="the extra conditions in the API")
        assert have[xc.IPV6_READY]["reason"] == "PodSandboxNoIPv6Address"
        assert have[xc.IPV6_READY]["message"] == missing
        assert have[xc.VOLUMES_READY]["status"] == "True"
        assert have[xc.IPV4_READY]["lastTransitionTime"].endswith("Z")
        # Read back from the API, they are nodelet's own: not kept as someone else's.
        obj = server.get("pods", "default", "web")
        assert obj is not None
        assert [c["type"] for c in apisource.others_conditions(obj)] == []
