"""Dynamic resource allocation on a real control plane, with the DRA e2e suites' test driver
(tests/support/dra.py) as the node's driver: it publishes its devices for a joined nodelet
node, the real scheduler allocates a claim made from a pod's ResourceClaimTemplate by the
real resourceclaim controller, nodelet has the driver prepare it before the sandbox and hands
its CDI device to the container that names the claim (its env, through containerd's CDI),
not to the one that does not; that container's status lists the device with its health. A
claim is unprepared when its pod goes, also when the pod was deleted while nodelet was down
(from the checkpoint). A pod whose driver is not running gets no sandbox and an event naming
the driver, and starts once the driver is back; a driver gone for good has its
ResourceSlices deleted by the node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support import podresources
from support.controlplane import AdminClient, ControlPlane, pod, pod_path
from support.dra import DRIVER, running_driver
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "dra-node"
RESOURCE = "/apis/resource.k8s.io/v1"


def class_name(namespace: str) -> str:
    return f"nodelet-{namespace}"


def template(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-device"},
        "spec": {"spec": {"devices": {
            "requests": [{"name": "dev", "exactly": {"deviceClassName": class_name(namespace)}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"a": "b"}}}],
        }}},
    }


def claiming(name: str) -> dict[str, Any]:
    """Two containers printing their env: `with` names the claim, `without` does not."""
    manifest = pod(name, node=NODE, command="env; sleep 1000000")
    main = manifest["spec"]["containers"][0]
    manifest["spec"]["containers"] = [
        {**main, "name": "with", "resources": {"claims": [{"name": "gpu"}]}},
        {**main, "name": "without"},
    ]
    manifest["spec"]["resourceClaims"] = [{"name": "gpu",
                                           "resourceClaimTemplateName": "one-device"}]
    return manifest


def phase(obj: dict[str, Any] | None) -> str:
    return str((obj or {}).get("status", {}).get("phase", ""))


def sandbox_ready(obj: dict[str, Any] | None) -> str:
    conditions = (obj or {}).get("status", {}).get("conditions") or []
    return next((c["status"] for c in conditions
                 if c["type"] == "PodReadyToStartContainers"), "")


async def logs(plane: ControlPlane, namespace: str, name: str, container: str) -> str:
    code, out, err = await plane.kubectl("-n", namespace, "logs", name, "-c", container)
    assert code == 0, err.decode()
    return out.decode()


async def events(admin: AdminClient, namespace: str, name: str) -> list[dict[str, Any]]:
    return await admin.items(f"/api/v1/namespaces/{namespace}/events",
                             fieldSelector=f"involvedObject.name={name}")


async def test_a_claim_from_a_template_gets_the_drivers_device_and_is_unprepared_after(
        join: Any, admin: AdminClient, control_plane: ControlPlane, runtime: Any,
        namespace: str, tmp_path: Path) -> None:
    cdi_dir = runtime.settings.runtime.cdi_spec_dirs[0]
    await admin.create(f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": class_name(namespace)},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    await admin.create(f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates",
                       template(namespace))
    try:
        async with join(NODE) as node:
            data_dir = node.settings.data_dir

            def driver(name: str) -> Any:
                return running_driver(node=NODE, data_dir=data_dir, cdi_dir=cdi_dir,
                                   kubeconfig=control_plane.admin_kubeconfig,
                                   log=tmp_path / name)

            async with driver("driver-1.log") as d:
                await eventually(
                    lambda: admin.items(f"{RESOURCE}/resourceslices",
                                        fieldSelector=f"spec.nodeName={NODE}"),
                    within=60, until=bool, what="the driver's ResourceSlice for the node",
                    seen=lambda _: d.tail())
                await eventually(lambda: node.agent_or_fail().dra.drivers()  # type: ignore[union-attr]
                                 , within=30, until=lambda found: DRIVER in found,
                                 what="the driver registered with nodelet",
                                 seen=lambda _: d.tail())
                await admin.create(pod_path(namespace), claiming("dra-1"))
                running = await eventually(
                    lambda: admin.get(pod_path(namespace, "dra-1")), within=90,
                    until=lambda o: phase(o) == "Running", what="dra-1 running with its claim",
                    seen=lambda o: f"{(o or {}).get('status')}; driver: {d.tail()}")
                statuses = running["status"]["resourceClaimStatuses"]  # type: ignore[index]
                claim = statuses[0]["resourceClaimName"]
                with_env = await eventually(lambda: logs(control_plane, namespace, "dra-1",
                                                         "with"),
                                            within=30, until=lambda t: "user_a=b" in t,
                                            what="the claim's CDI env in the container")
                flat = claim.replace("-", "_")
                assert f"claim_{flat}_dev=true" in with_env.splitlines(), with_env
                without_env = await logs(control_plane, namespace, "dra-1", "without")
                assert "user_a=b" not in without_env and "claim_" not in without_env
                assert len(d.cdi_files()) == 1, d.cdi_files()
                # The pod resources API shows the claim on the container that names it.
                listed = await podresources.answer(
                    node.settings.pod_resources_dir / "kubelet.sock", "get", namespace, "dra-1")
                by_name = {c["name"]: c for c in listed["pod_resources"]["containers"]}
                dynamic = by_name["with"]["dynamic_resources"]
                assert [(r["claim_name"], r["claim_namespace"]) for r in dynamic] == [
                    (claim, namespace)], dynamic
                device = dynamic[0]["claim_resources"][0]
                assert device["driver_name"] == DRIVER and device["pool_name"] == NODE, device
                assert device["cdi_devices"][0]["name"].startswith(f"{DRIVER}/test="), device
                assert "dynamic_resources" not in by_name["without"], by_name
                # The device's health in the status of the container that names the claim:
                # the driver serves DRAResourceHealth but reports no device, so Unknown.
                shown = await admin.get(pod_path(namespace, "dra-1"))
                by_status = {c["name"]: c for c in shown["status"]["containerStatuses"]}
                assert by_status["with"]["allocatedResourcesStatus"] == [{
                    "name": "claim:gpu", "resources": [{
                        "resourceID": device["cdi_devices"][0]["name"],
                        "health": "Unknown"}]}], by_status["with"]
                assert "allocatedResourcesStatus" not in by_status["without"], by_status

                # Deleted while nodelet is down: unprepared from the checkpoint after.
                await node.stop(terminate_pods=False)
                await admin.delete(pod_path(namespace, "dra-1"), gracePeriodSeconds=0)
                await eventually(lambda: admin.get(pod_path(namespace, "dra-1")), within=30,
                                 until=lambda o: o is None, what="dra-1 gone from the API")
                assert len(d.cdi_files()) == 1, "unprepared while nodelet was down"
                await node.start()
                await eventually(lambda: d.cdi_files(), within=60, until=lambda f: not f,
                                 what="the claim unprepared after the restart",
                                 seen=lambda f: f"{f}; driver: {d.tail()}")
                assert not node.agent_or_fail().dra.claims()  # type: ignore[union-attr]

            # The driver is not running: no sandbox, an event naming it; then it comes.
            await admin.create(pod_path(namespace), claiming("dra-2"))
            waiting = await eventually(
                lambda: events(admin, namespace, "dra-2"), within=60,
                until=lambda found: any(e["reason"] == "FailedPrepareDynamicResources"
                                        for e in found),
                what="FailedPrepareDynamicResources on dra-2")
            message = next(e["message"] for e in waiting
                           if e["reason"] == "FailedPrepareDynamicResources")
            assert message == ("Failed to prepare dynamic resources: prepare dynamic "
                               f"resources: DRA driver {DRIVER} is not registered"), message
            assert sandbox_ready(await admin.get(pod_path(namespace, "dra-2"))) != "True"
            async with driver("driver-2.log") as d:
                await eventually(lambda: admin.get(pod_path(namespace, "dra-2")), within=90,
                                 until=lambda o: phase(o) == "Running",
                                 what="dra-2 running once its driver came",
                                 seen=lambda o: f"{(o or {}).get('status')}; {d.tail()}")
                assert len(d.cdi_files()) == 1, d.cdi_files()
                await admin.delete(pod_path(namespace, "dra-2"))
                await eventually(lambda: admin.get(pod_path(namespace, "dra-2")), within=60,
                                 until=lambda o: o is None, what="dra-2 deleted")
                assert not d.cdi_files(), "unprepared when the pod was deleted"
            # The driver gone for good: its ResourceSlices go after 30 s, as the kubelet's.
            await eventually(lambda: admin.items(f"{RESOURCE}/resourceslices",
                                                 fieldSelector=f"spec.nodeName={NODE}"),
                             within=90, until=lambda found: not found,
                             what="the gone driver's ResourceSlices deleted by the node")
    finally:
        await admin.delete(f"{RESOURCE}/deviceclasses/{class_name(namespace)}")
        for obj in await admin.items(f"{RESOURCE}/resourceslices",
                                     fieldSelector=f"spec.nodeName={NODE}"):
            await admin.delete(f"{RESOURCE}/resourceslices/{obj['metadata']['name']}")
