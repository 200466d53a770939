"""A pod from the API that nodelet refuses says so in the API, as the kubelet's admission
refusals do (rejectPod): `Failed` with the reason and the message, and a Warning event — read
with the real kubectl (`kubectl describe pod`) — rather than `Pending` for ever with the reason
only in the node's log. The pod here has an nfs volume, which nodelet cannot read into its pod
model at all; a pod beside it that nodelet runs keeps running.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.controlplane import AdminClient, ControlPlane, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "refusing-node"
REASON = "UnsupportedPodSpec"
WHY = 'spec.volumes[0].nfs: unsupported volume type "nfs"'


def phase(found: dict[str, Any] | None) -> str:
    return str((found or {}).get("status", {}).get("phase", ""))


def nfs_pod() -> dict[str, Any]:
    """A pod with an nfs volume, bound by `nodeName` (the API server accepts it as it is)."""
    spec = pod("shared", node=NODE, scheduler=False, volumes=[
        {"name": "data", "nfs": {"server": "files.invalid", "path": "/data"}}])
    spec["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return spec


async def test_a_pod_nodelet_cannot_run_is_failed_with_the_reason_in_kubectl_describe(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    async with join(NODE):
        await admin.create(pod_path(namespace), pod("fine", node=NODE))
        await eventually(lambda: admin.get(pod_path(namespace, "fine")), within=60,
                         until=lambda p: phase(p) == "Running", seen=phase,
                         what="the pod nodelet runs Running")
        code, _, err = await control_plane.kubectl(
            "create", "-n", namespace, "-f", "-", stdin=json.dumps(nfs_pod()).encode())
        assert code == 0, err.decode()
        found = await eventually(lambda: admin.get(pod_path(namespace, "shared")), within=20,
                                 until=lambda p: phase(p) == "Failed", seen=phase,
                                 what="the refused pod Failed in the API")
        status = found["status"]
        assert status["reason"] == REASON
        assert status["message"].startswith(f"Pod was rejected: {WHY}")
        # As the kubelet's rejectPod: no container statuses, none of the kubelet's conditions.
        assert not status.get("containerStatuses")
        assert {c["type"] for c in status.get("conditions") or ()} <= {"PodScheduled"}

        async def describe() -> str:
            code, out, err = await control_plane.kubectl("describe", "pod", "shared", "-n",
                                                         namespace)
            assert code == 0, err.decode()
            return out.decode()

        text = await eventually(describe, within=20, every=0.5,
                                until=lambda t: f"Warning  {REASON}" in t,
                                seen=lambda t: t[-600:], what="the Warning event in describe")
        lines = [" ".join(line.split()) for line in text.splitlines()]
        assert "Status: Failed" in lines, text
        assert f"Reason: {REASON}" in lines, text
        assert any(line.startswith(f"Message: Pod was rejected: {WHY}") for line in lines), text
        assert any(line.startswith(f"Warning {REASON}") and WHY in line for line in lines), text
        # The pod beside it runs on, untouched.
        fine = await admin.get(pod_path(namespace, "fine"))
        assert phase(fine) == "Running"
        assert [c["restartCount"] for c in fine["status"]["containerStatuses"]] == [0]
