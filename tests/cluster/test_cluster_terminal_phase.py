"""A graceful delete leaves a terminal phase in the API before nodelet's final delete (the
kubelet 1.27+): real containerd, the real kube-apiserver, the real kubectl — `kubectl delete
pod` (the pod's own grace period) while `kubectl get -w --output-watch-events` records every
version of the pod, the last one as the API held it when nodelet's final delete arrived.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from support.controlplane import AdminClient, ControlPlane, node_requests, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "terminal-node"


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON documents kubectl printed one after the other."""
    decoder, found, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        obj, end = decoder.raw_decode(text, at)
        found.append(obj)
        at = end
        while at < len(text) and text[at].isspace():
            at += 1
    return found


async def test_graceful_delete_writes_failed_before_the_final_delete(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    async with join(NODE):
        # `sleep` as PID 1 ignores SIGTERM: killed after the 1 s grace period, exit code 137.
        await admin.create(pod_path(namespace), pod("victim", node=NODE, grace=1))
        await eventually(lambda: admin.get(pod_path(namespace, "victim")), within=60,
                         until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
                         what="pod Running in the API")
        watch = await asyncio.create_subprocess_exec(
            *control_plane.kubectl_args("get", "pod", "victim", "-n", namespace, "-w",
                                        "--output-watch-events", "-o", "json"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            code, _, err = await control_plane.kubectl("delete", "pod", "victim", "-n",
                                                       namespace, timeout=90)
            assert code == 0, err  # kubectl waited until the pod was gone
        finally:
            watch.terminate()
            out, _ = await watch.communicate()
        events = _objects(out.decode())
        deleted = [e for e in events if e["type"] == "DELETED"]
        assert len(deleted) == 1, [e["type"] for e in events]
        last: dict[str, Any] = deleted[0]["object"]["status"]
        # What the API held when nodelet's final delete arrived: the terminal status.
        assert last["phase"] == "Failed", last
        state = last["containerStatuses"][0]["state"]
        assert state["terminated"]["exitCode"] == 137, state
        conds = {c["type"]: c for c in last["conditions"]}
        assert conds["PodReadyToStartContainers"]["status"] == "False"
        assert conds["Ready"]["reason"] == "PodFailed", conds
        phases = [e["object"]["status"].get("phase") for e in events if e["type"] == "MODIFIED"]
        assert "Failed" in phases, phases

        def final() -> list[dict[str, Any]]:  # the audit log is written in batches
            return [e for e in node_requests(control_plane.audit_events(), NODE, namespace)
                    if e["verb"] == "delete" and e["objectRef"].get("name") == "victim"
                    and e["stage"] == "ResponseComplete"]

        deletes = await eventually(final, within=10, what="nodelet's final delete audited")
        assert len(deletes) == 1 and deletes[0]["responseStatus"]["code"] == 200, deletes
        patches = [e for e in node_requests(control_plane.audit_events(), NODE, namespace)
                   if e["verb"] == "patch" and e["objectRef"].get("subresource") == "status"
                   and e["objectRef"].get("name") == "victim" and e["stage"] == "ResponseComplete"]
        assert patches and patches[-1]["stageTimestamp"] <= deletes[0]["requestReceivedTimestamp"]
