"""In-place pod resize (KEP-1287) and pod-level resources (KEP-2837) on the real control plane:
real containerd and runc, the real kube-apiserver's `pods/resize` subresource, the real kubectl.
What the container sees in its own cgroup (read with `kubectl exec`, as Kubernetes' e2e tests
read it) and what the API's status says must follow each resize.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from nodelet.model.core import quantities
from support.controlplane import AdminClient, ControlPlane, conditions, node_path, pod, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "resize-node"
RESIZE_CONDITIONS = ("PodResizePending", "PodResizeInProgress")
STRATEGIC = "application/strategic-merge-patch+json"


def _resources(cpu: tuple[str, str], memory: tuple[str, str]) -> dict[str, Any]:
    return {"requests": {"cpu": cpu[0], "memory": memory[0]},
            "limits": {"cpu": cpu[1], "memory": memory[1]}}


async def _cgroup(control_plane: ControlPlane, namespace: str, name: str,
                  path: str, container: str = "main") -> str:
    code, out, err = await control_plane.kubectl(
        "exec", name, "-n", namespace, "-c", container, "--", "head", "-n", "1", path)
    assert code == 0, err
    return out.decode().strip()


def _settled(obj: dict[str, Any] | None) -> bool:
    """The e2e framework's WaitForPodResizeActuation: status caught up with the generation,
    no resize condition, and Ready."""
    if not obj:
        return False
    status = obj.get("status", {})
    conds = conditions(obj)
    return (status.get("observedGeneration", 0) >= obj["metadata"]["generation"]
            and not any(t in conds for t in RESIZE_CONDITIONS)
            and conds.get("Ready", {}).get("status") == "True")


def _quantity_set(resources: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {k: dict(v) for k, v in resources.items()}


async def test_resize_of_a_running_container_changes_its_cgroup_and_status(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    spec = pod("web", node=NODE)
    container = spec["spec"]["containers"][0]
    container["resources"] = _resources(("100m", "200m"), ("64Mi", "128Mi"))
    # cpu resizes in place, memory restarts the container.
    container["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                 {"resourceName": "memory",
                                  "restartPolicy": "RestartContainer"}]
    async with join(NODE):
        await admin.create(pod_path(namespace), spec)
        created = await eventually(lambda: admin.get(pod_path(namespace, "web")), within=60,
                                   until=_settled, what="web Ready")
        status = created["status"]["containerStatuses"][0]
        assert status["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
        assert _quantity_set(status["resources"]) == container["resources"]
        assert created["status"]["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
        assert await _cgroup(control_plane, namespace, "web",
                             "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") == "20000"

        # cpu only: the same container, its quota rewritten.
        await admin.patch(pod_path(namespace, "web", "resize"), {"spec": {"containers": [
            {"name": "main", "resources": _resources(("150m", "300m"), ("64Mi", "128Mi"))}]}},
            content_type=STRATEGIC)
        resized = await eventually(
            lambda: admin.get(pod_path(namespace, "web")), within=60,
            until=lambda p: _settled(p) and p["status"]["containerStatuses"][0][
                "resources"]["limits"]["cpu"] == "300m", what="the cpu resize actuated")
        after = resized["status"]["containerStatuses"][0]
        assert after["restartCount"] == 0 and after["containerID"] == status["containerID"]
        assert await _cgroup(control_plane, namespace, "web",
                             "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") == "30000"

        # memory: resizePolicy RestartContainer, so one restart and the new limit.
        await admin.patch(pod_path(namespace, "web", "resize"), {"spec": {"containers": [
            {"name": "main", "resources": _resources(("150m", "300m"), ("64Mi", "160Mi"))}]}},
            content_type=STRATEGIC)
        restarted = await eventually(
            lambda: admin.get(pod_path(namespace, "web")), within=90,
            until=lambda p: _settled(p) and p["status"]["containerStatuses"][0][
                "resources"]["limits"]["memory"] == "160Mi", what="the memory resize actuated")
        assert restarted["status"]["containerStatuses"][0]["restartCount"] == 1
        assert await _cgroup(control_plane, namespace, "web",
                             "/sys/fs/cgroup/memory/memory.limit_in_bytes") == str(160 * 2**20)
        # The kubelet's OOM score for a Burstable container: 1000 - 1000 * request / capacity.
        node = await admin.get(node_path(NODE))
        capacity = quantities.memory_bytes(node["status"]["capacity"]["memory"], path="memory")
        assert await _cgroup(control_plane, namespace, "web", "/proc/1/oom_score_adj") == \
            str(1000 - 1000 * 64 * 2**20 // capacity)
        reasons = [e["reason"] for e in await admin.items(
            f"/api/v1/namespaces/{namespace}/events", fieldSelector="involvedObject.name=web")]
        assert reasons.count("ResizeStarted") == 2 and reasons.count("ResizeCompleted") == 2


async def test_pod_level_resources_cap_containers_and_resize_in_place(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    spec = pod("shared", node=NODE,
               resources={"limits": {"cpu": "200m", "memory": "128Mi"}})
    async with join(NODE):
        await admin.create(pod_path(namespace), spec)
        created = await eventually(lambda: admin.get(pod_path(namespace, "shared")),
                                   within=60, until=_settled, what="shared Ready")
        # Requests default to the limits; the pod is Guaranteed by its pod-level resources.
        assert created["status"]["qosClass"] == "Guaranteed"
        status = created["status"]["containerStatuses"][0]
        assert status["resources"] == {} and "allocatedResources" not in status
        assert created["status"]["allocatedResources"] == {"cpu": "200m", "memory": "128Mi"}
        # A container without limits of its own runs with the pod's.
        assert await _cgroup(control_plane, namespace, "shared",
                             "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") == "20000"
        assert await _cgroup(control_plane, namespace, "shared",
                             "/sys/fs/cgroup/memory/memory.limit_in_bytes") == str(128 * 2**20)

        await admin.patch(pod_path(namespace, "shared", "resize"), {"spec": {"resources": {
            "requests": {"cpu": "300m", "memory": "128Mi"},
            "limits": {"cpu": "300m", "memory": "128Mi"}}}}, content_type=STRATEGIC)
        resized = await eventually(
            lambda: admin.get(pod_path(namespace, "shared")), within=60,
            until=lambda p: _settled(p) and p["status"]["allocatedResources"]["cpu"] == "300m",
            what="the pod-level resize actuated")
        assert resized["status"]["containerStatuses"][0]["restartCount"] == 0
        assert await _cgroup(control_plane, namespace, "shared",
                             "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") == "30000"


async def test_a_memory_limit_below_use_is_refused_and_nothing_changes(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    spec = pod("tight", node=NODE)
    spec["spec"]["containers"][0]["resources"] = _resources(("100m", "100m"),
                                                            ("64Mi", "64Mi"))
    async with join(NODE):
        await admin.create(pod_path(namespace), spec)
        await eventually(lambda: admin.get(pod_path(namespace, "tight")), within=60,
                         until=_settled, what="tight Ready")
        await admin.patch(pod_path(namespace, "tight", "resize"), {"spec": {"containers": [
            {"name": "main", "resources": _resources(("100m", "100m"), ("10Ki", "10Ki"))}]}},
            content_type=STRATEGIC)

        def refused(p: dict[str, Any] | None) -> bool:
            cond = conditions(p).get("PodResizeInProgress", {})
            return cond.get("reason") == "Error" and "PodResizePending" not in conditions(p) \
                and bool(re.search(r"memory limit \(\d+\) below current usage",
                                   cond.get("message", "")))

        refusal = await eventually(lambda: admin.get(pod_path(namespace, "tight")), within=60,
                                   until=refused, what="the resize refused with reason Error")
        status = refusal["status"]["containerStatuses"][0]
        # Allocated, not applied: the cgroup and the status keep the old limit.
        assert status["allocatedResources"]["memory"] == "10Ki"
        assert status["resources"]["limits"]["memory"] == "64Mi"
        assert await _cgroup(control_plane, namespace, "tight",
                             "/sys/fs/cgroup/memory/memory.limit_in_bytes") == str(64 * 2**20)
        # Back to what runs: the condition goes.
        await admin.patch(pod_path(namespace, "tight", "resize"), {"spec": {"containers": [
            {"name": "main", "resources": _resources(("100m", "100m"), ("64Mi", "64Mi"))}]}},
            content_type=STRATEGIC)
        await eventually(lambda: admin.get(pod_path(namespace, "tight")), within=60,
                         until=_settled, what="the resize reverted and settled")
