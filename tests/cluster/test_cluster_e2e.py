"""End to end on real containerd and the real control plane (tests/support/controlplane.py): nodelet
joins by TLS bootstrap, runs a pod the real scheduler placed, reports its five conditions in
the API and removes it when it is deleted; Ready follows a readiness gate a controller writes; a
static pod has a mirror pod carrying its status; a private image's pull secret, refusals,
ConfigMap/Secret watches — every request of the node judged by kube-apiserver's Node
authorizer and NodeRestriction, and read back from its audit log.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import pods
from support.controlplane import (
    AdminClient,
    ControlPlane,
    conditions,
    node_path,
    node_requests,
    now_rfc3339,
    pod,
    pod_path,
)
from support.harness import Harness, pod_manifest
from support.polling import eventually
from support.registry import Registry

pytestmark = pytest.mark.runtime

ORDER = ("PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady", "Ready")
NODE = "e2e-node"


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def _conditions(admin: AdminClient, ns: str, name: str) -> dict[str, dict[str, Any]]:
    return conditions(await admin.get(pod_path(ns, name)))


async def _gone(admin: AdminClient, ns: str, name: str) -> bool:
    return await admin.get(pod_path(ns, name)) is None


async def test_bound_pod_runs_reports_five_conditions_and_is_deleted(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    async with join(NODE) as harness:
        node = await eventually(lambda: admin.get(node_path(NODE)), within=30,
                                until=lambda n: conditions(n).get("Ready", {}).get("status")
                                == "True", what="the node Ready")
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        if "1.6." not in node["status"]["nodeInfo"]["containerRuntimeVersion"]:
            # What each runtime handler can do, as the kubelet reports it (containerd 2.x
            # names its handlers; the node suite reads recursiveReadOnlyMounts from here).
            handlers = {h["name"]: h["features"] for h in node["status"]["runtimeHandlers"]}
            assert handlers[""] == {"recursiveReadOnlyMounts": True, "userNamespaces": True}

        created = await admin.create(pod_path(namespace), pod("web", node=NODE))
        uid = created["metadata"]["uid"]

        async def running() -> dict[str, dict[str, Any]] | None:
            conds = await _conditions(admin, namespace, "web")
            if all(conds.get(t, {}).get("status") == "True" for t in ORDER):
                return conds
            return None

        conds = await eventually(running, within=60, what="five conditions True in the API")
        # A condition that turned True carries no reason or message left from when it was False.
        assert not any(conds[t].get("reason") or conds[t].get("message") for t in ORDER), conds
        times = [_time(conds[t]["lastTransitionTime"]) for t in ORDER]
        assert times == sorted(times), conds
        status = (await admin.get(pod_path(namespace, "web")) or {})["status"]
        assert status["phase"] == "Running" and status["podIP"]
        assert await admin.get(
            f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}")

        code, _, err = await control_plane.kubectl(  # graceful: deletionTimestamp first
            "delete", "pod", "web", "-n", namespace, "--wait=false")
        assert code == 0, err
        await eventually(lambda: _gone(admin, namespace, "web"), within=60,
                         what="pod deleted from the API by nodelet")
        agent = harness.agent_or_fail()
        await eventually(lambda: not [p for p, _ in agent.pods() if p.uid == uid], within=30,
                         what="pod gone from the agent")

        def final_delete() -> list[dict[str, Any]]:
            return [e for e in node_requests(control_plane.audit_events(), NODE, namespace)
                    if e["verb"] == "delete" and e["objectRef"].get("name") == "web"
                    and e.get("responseStatus", {}).get("code") == 200]

        await eventually(final_delete, within=10, what="nodelet's final delete in the audit log")


async def test_ready_follows_a_readiness_gate_written_by_a_controller(
        join: Any, admin: AdminClient, namespace: str) -> None:
    async with join(NODE):
        gate = "example.com/lb"
        await admin.create(pod_path(namespace), pod(
            "gated", node=NODE, readinessGates=[{"conditionType": gate}]))

        async def ready_is(value: str, reason: str = "") -> dict[str, Any] | None:
            conds = await _conditions(admin, namespace, "gated")
            ready = conds.get("Ready", {})
            if conds.get("ContainersReady", {}).get("status") == "True" and \
                    ready.get("status") == value and (ready.get("reason") or "") == reason:
                return conds
            return None

        await eventually(lambda: ready_is("False", "ReadinessGatesNotReady"), within=60,
                         what="containers ready, Ready False for the missing gate")
        # The controller: a strategic merge patch of pods/status, as a real one sends.
        for value in ("True", "False"):
            await admin.patch(
                pod_path(namespace, "gated", "status"),
                {"status": {"conditions": [{"type": gate, "status": value,
                                            "lastTransitionTime": now_rfc3339()}]}},
                content_type="application/strategic-merge-patch+json")
            reason = "" if value == "True" else "ReadinessGatesNotReady"
            conds = await eventually(lambda v=value, r=reason: ready_is(v, r), within=20,
                                     what=f"Ready {value} after the gate turned {value}")
            assert conds[gate]["status"] == value  # the gate itself is left alone


async def _mirror_ready(admin: AdminClient, name: str) -> str | None:
    """The mirror pod's UID once all five conditions are True in its API status."""
    mirror = await admin.get(pod_path("default", name)) or {}
    annotations = mirror.get("metadata", {}).get("annotations", {})
    conds = conditions(mirror)
    if pods.ANNOTATION_CONFIG_MIRROR in annotations and \
            all(conds.get(t, {}).get("status") == "True" for t in ORDER):
        return str(mirror["metadata"]["uid"])
    return None


async def test_static_pod_has_a_mirror_pod_with_its_status(
        join: Any, admin: AdminClient, control_plane: ControlPlane) -> None:
    async with join(NODE) as harness:
        harness.write("static.yaml", pod_manifest("static"))
        name = f"static-{NODE}"
        first = await eventually(lambda: _mirror_ready(admin, name), within=60,
                                 what="mirror pod with five True conditions")
        found = harness.find("static")
        assert found is not None
        mirror = await admin.get(pod_path("default", name))
        assert mirror is not None
        assert mirror["metadata"]["annotations"][pods.ANNOTATION_CONFIG_MIRROR] == found[0].uid
        # NodeRestriction: a node may create only mirror pods of itself, owned by its Node.
        owners = mirror["metadata"].get("ownerReferences", [])
        assert [(o["kind"], o["name"]) for o in owners] == [("Node", NODE)], owners
        assert found[1] is not None and mirror["status"]["podIP"] == found[1].pod_ip
        code, _, err = await control_plane.kubectl(  # someone deletes the mirror pod
            "delete", "pod", name, "--grace-period=0", "--force")
        assert code == 0, err

        async def recreated() -> str | None:
            uid = await _mirror_ready(admin, name)
            return uid if uid not in (None, first) else None

        await eventually(recreated, within=30, what="mirror pod recreated with the status")
        assert harness.find("static") is not None  # the static pod itself kept running
        harness.remove("static.yaml")
        await eventually(lambda: _gone(admin, "default", name), within=60,
                         what="mirror pod deleted with its static pod")


async def test_an_edited_static_pod_keeps_its_mirror_pod_until_the_old_version_is_gone(
        join: Any, admin: AdminClient) -> None:
    """As the kubelet: the edited manifest's new version starts once the old one has
    terminated (its `sleep` ignores SIGTERM: the grace period), and only then replaces the
    mirror pod, which meanwhile stays the old one, Running."""
    async with join(NODE) as harness:
        harness.write("edited.yaml", pod_manifest("edited", grace=3))
        name = f"edited-{NODE}"
        first = await eventually(lambda: _mirror_ready(admin, name), within=60,
                                 what="the first version's mirror pod")
        found = harness.find("edited")
        assert found is not None
        old = found[0].uid
        harness.write("edited.yaml", pod_manifest(
            "edited", grace=3, container_extra="env: [{name: V, value: '2'}]"))
        nodelet = harness.agent_or_fail()
        kept: list[str] = []
        early: list[str] = []

        async def replaced() -> str | None:
            mirror = await admin.get(pod_path("default", name)) or {}
            meta = mirror.get("metadata", {})
            uid = meta.get("uid")
            terminating = old in nodelet.workers.uids()  # read after the mirror pod
            if uid == first and terminating and mirror.get("status", {}).get("phase") == "Running":
                kept.append(uid)
            elif uid not in (None, first) and terminating:
                early.append(f"mirror pod {uid} made while {old} was still terminating")
            hash_ = meta.get("annotations", {}).get(pods.ANNOTATION_CONFIG_MIRROR)
            return uid if uid not in (None, first) and hash_ != old else None

        await eventually(replaced, within=60, what="the new version's mirror pod")
        assert not early, early[0]
        assert kept, "the old mirror pod was never seen while the old version terminated"
        await eventually(lambda: _mirror_ready(admin, name), within=60,
                         what="the new version's mirror pod Ready")
        harness.remove("edited.yaml")
        await eventually(lambda: _gone(admin, "default", name), within=60,
                         what="mirror pod deleted with its static pod")


async def test_pull_secret_is_read_from_the_api_for_a_private_image(
        join: Any, admin: AdminClient, runtime: Instance, control_plane: ControlPlane,
        namespace: str) -> None:
    """imagePullSecrets of an API pod come from the API, like Secrets of volumes."""
    auth = ("puller", "s3cret")
    with Registry.started(auth=auth) as private:
        ref = private.push("private/busybox", "cluster")
        token = base64.b64encode(":".join(auth).encode()).decode()
        config = json.dumps({"auths": {private.host: {"auth": token}}}).encode()
        try:
            async with join(NODE) as harness:
                await admin.create(f"/api/v1/namespaces/{namespace}/secrets", {
                    "metadata": {"name": "regcred"},
                    "type": "kubernetes.io/dockerconfigjson",
                    "data": {".dockerconfigjson": base64.b64encode(config).decode()}})
                spec = pod("private", node=NODE, imagePullSecrets=[{"name": "regcred"}])
                spec["spec"]["containers"][0]["image"] = ref
                await admin.create(pod_path(namespace), spec)
                await eventually(lambda: _conditions(admin, namespace, "private"), within=60,
                                 until=lambda c: c.get("Ready", {}).get("status") == "True",
                                 what="the private image's pod Ready")
                # Looked up at the start of the sync, the Secret was there by the pull.
                reasons = [e.reason for e in harness.agent_or_fail().events(pod="private")]
                assert "FailedToRetrieveImagePullSecret" not in reasons, reasons
                assert "Failed" not in reasons, reasons
                # Read under the Node authorizer: allowed, as the Secret of a pod of the node.
                reads = [e for e in node_requests(control_plane.audit_events(), NODE, namespace)
                         if e["objectRef"].get("resource") == "secrets"]
                assert reads and all(e["responseStatus"]["code"] < 400 for e in reads), reads
        finally:
            try:
                await runtime.client.remove_image(ref)
            except cri_errors.NotFound:
                pass


async def test_api_pods_nodelet_cannot_run_are_refused_with_a_reason(
        join: Any, admin: AdminClient, namespace: str) -> None:
    async with join(NODE):
        unsafe = pod("unsafe", node=NODE)
        unsafe["spec"]["securityContext"] = {
            "sysctls": [{"name": "kernel.msgmax", "value": "1024"}]}
        await admin.create(pod_path(namespace), unsafe)

        async def failed(name: str) -> dict[str, Any] | None:
            status = (await admin.get(pod_path(namespace, name)) or {}).get("status", {})
            return status if status.get("phase") == "Failed" else None

        status = await eventually(lambda: failed("unsafe"), within=30,
                                  what="unsafe sysctl pod refused")
        assert (status["reason"], status["message"]) == (
            "SysctlForbidden",
            'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted')
        events = await admin.items(f"/api/v1/namespaces/{namespace}/events")
        assert "SysctlForbidden" in {e["reason"] for e in events}


async def test_a_runtime_class_overhead_is_in_the_pod_cgroup(
        join: Any, admin: AdminClient, namespace: str) -> None:
    """kube-apiserver's RuntimeClass admission copies the class's overhead into the pod;
    nodelet adds it to the pod cgroup's limits and shares, as the kubelet's
    ResourceConfigForPod does (500m + 250m of cpu, 64Mi + 32Mi of memory)."""
    async with join(NODE) as harness:
        await admin.create("/apis/node.k8s.io/v1/runtimeclasses", {
            "metadata": {"name": f"overhead-{namespace}"}, "handler": "runc",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "32Mi"}}})
        try:
            spec = pod("overhead", node=NODE, runtimeClassName=f"overhead-{namespace}")
            spec["spec"]["containers"][0]["resources"] = {
                "limits": {"cpu": "500m", "memory": "64Mi"}}
            created = await admin.create(pod_path(namespace), spec)
            assert created["spec"]["overhead"] == {"cpu": "250m", "memory": "32Mi"}
            await eventually(lambda: _conditions(admin, namespace, "overhead"), within=60,
                             until=lambda c: c.get("Ready", {}).get("status") == "True",
                             what="the overhead pod Ready")
            cgroup = (f"{harness.settings.node.cgroup_root}/kubepods"
                      f"/pod{created['metadata']['uid']}")
            assert _cgroup_file("memory", cgroup, "memory.limit_in_bytes") == str(96 * 2**20)
            assert _cgroup_file("cpu", cgroup, "cpu.cfs_quota_us") == "75000"
            assert _cgroup_file("cpu", cgroup, "cpu.shares") == "768"
        finally:
            await admin.delete(pod_path(namespace, "overhead"))
            await eventually(lambda: _gone(admin, namespace, "overhead"), within=60,
                             what="the overhead pod gone")
            await admin.delete(f"/apis/node.k8s.io/v1/runtimeclasses/overhead-{namespace}")


async def test_a_runtime_class_gone_before_the_sandbox_fails_it_with_the_apis_words(
        join: Any, admin: AdminClient, namespace: str) -> None:
    """kube-apiserver admits only pods of a RuntimeClass that exists; one deleted before the
    node made the pod's sandbox (here: before the node started) fails the sandbox with the
    API's words, as the kubelet's LookupRuntimeHandler fails it."""
    gone = f"gone-{namespace}"
    async with join(NODE, start=False) as harness:
        await admin.create("/apis/node.k8s.io/v1/runtimeclasses", {
            "metadata": {"name": gone}, "handler": "runc"})
        await admin.create(pod_path(namespace), pod("orphaned", node=NODE, scheduler=False,
                                                    runtimeClassName=gone))
        await admin.delete(f"/apis/node.k8s.io/v1/runtimeclasses/{gone}")
        await harness.start()
        conds = await eventually(
            lambda: _conditions(admin, namespace, "orphaned"), within=60,
            until=lambda c: f'"{gone}" not found' in c.get(
                "PodReadyToStartContainers", {}).get("message", ""),
            what="the sandbox failed for want of the RuntimeClass")
        assert conds["PodReadyToStartContainers"]["status"] == "False", conds
        events = await admin.items(f"/api/v1/namespaces/{namespace}/events")
        assert any(e["reason"] == "FailedCreatePodSandBox" and f'"{gone}" not found'
                   in e["message"] for e in events), [e["message"] for e in events]
        await admin.delete(pod_path(namespace, "orphaned"))
        await eventually(lambda: _gone(admin, namespace, "orphaned"), within=60,
                         what="the pod gone")


def _cgroup_file(controller: str, cgroup: str, name: str) -> str:
    """A cgroup v1 file (these machines mount v1 only)."""
    return (Path("/sys/fs/cgroup") / controller / cgroup.lstrip("/") / name).read_text().strip()


def _volume_file(harness: Harness, uid: str, plugin: str, volume: str, key: str) -> str | None:
    """The content of `key` in a pod's volume as the containers see it (None: not there)."""
    directory = harness.agent_or_fail().volumes.volumes_dir(pods.PodUID(uid))
    path = directory / f"kubernetes.io~{plugin}" / volume / key
    return path.read_text() if path.exists() else None


def _watches(events: list[dict[str, Any]], node: str, namespace: str,
             resource: str) -> dict[str, set[str]]:
    """auditID → stages of the node's watches of `resource` in `namespace`."""
    seen: dict[str, set[str]] = {}
    for e in node_requests(events, node, namespace):
        if e["verb"] == "watch" and e["objectRef"].get("resource") == resource:
            seen.setdefault(e["auditID"], set()).add(e["stage"])
    return seen


async def test_configmap_and_secret_created_later_are_mounted_by_watch(
        join: Any, admin: AdminClient, control_plane: ControlPlane, namespace: str) -> None:
    """Issue 13's acceptance: a ConfigMap created after the pod is mounted within 2 s (by its
    watch, not a re-read); a Secret likewise; changes reach the files; the watches go with the
    pod. The Node authorizer allows the node exactly these reads."""
    async with join(NODE) as harness:
        spec = pod("reader", node=NODE, volumes=[
            {"name": "conf", "configMap": {"name": "late"}},
            {"name": "tok", "secret": {"secretName": "late-secret"}}])
        spec["spec"]["containers"][0]["volumeMounts"] = [
            {"name": "conf", "mountPath": "/conf"}, {"name": "tok", "mountPath": "/tok"}]
        uid = (await admin.create(pod_path(namespace), spec))["metadata"]["uid"]
        agent = harness.agent_or_fail()
        await eventually(lambda: [e for e in agent.events(pod="reader")
                                  if e.reason == "FailedMount" and '"late"' in e.message],
                         within=30, what="FailedMount while the ConfigMap is missing")
        await eventually(lambda: _watches(control_plane.audit_events(), NODE, namespace,
                                                  "configmaps"),
                         within=10, what="the missing ConfigMap watched")
        ns_path = f"/api/v1/namespaces/{namespace}"
        await admin.create(f"{ns_path}/configmaps", {"metadata": {"name": "late"},
                                                     "data": {"key": "one"}})
        await eventually(lambda: _volume_file(harness, uid, "configmap", "conf", "key"),
                         within=2, until=lambda text: text == "one",
                         what="the ConfigMap created later in the pod's volume")
        token = base64.b64encode(b"s1").decode()
        await admin.create(f"{ns_path}/secrets", {"metadata": {"name": "late-secret"},
                                                  "data": {"t": token}})
        await eventually(lambda: _conditions(admin, namespace, "reader"), within=60,
                         until=lambda c: c.get("Ready", {}).get("status") == "True",
                         what="the pod Ready once both exist")
        assert _volume_file(harness, uid, "secret", "tok", "t") == "s1"
        await admin.patch(f"{ns_path}/configmaps/late", {"data": {"key": "two"}})
        await admin.patch(f"{ns_path}/secrets/late-secret",
                          {"data": {"t": base64.b64encode(b"s2").decode()}})
        await eventually(lambda: (_volume_file(harness, uid, "configmap", "conf", "key"),
                                  _volume_file(harness, uid, "secret", "tok", "t")),
                         within=10, until=lambda seen: seen == ("two", "s2"),
                         what="both changes in the mounted files")
        # Each object was listed once and then followed by its watch: no GET, no re-list.
        # (kube-apiserver names the object of a list by `metadata.name=` in the audit log.)
        reads = sorted((e["objectRef"]["resource"], e["objectRef"].get("name"), e["verb"])
                       for e in node_requests(control_plane.audit_events(), NODE, namespace)
                       if e["objectRef"].get("resource") in ("configmaps", "secrets")
                       and e["verb"] in ("get", "list"))
        assert reads == [("configmaps", "kube-root-ca.crt", "list"),  # kube-api-access-*
                         ("configmaps", "late", "list"), ("secrets", "late-secret", "list")], reads
        code, _, err = await control_plane.kubectl("delete", "pod", "reader", "-n", namespace)
        assert code == 0, err

        def open_watches() -> list[str]:
            events = control_plane.audit_events()
            return [audit_id for resource in ("configmaps", "secrets")
                    for audit_id, stages in _watches(events, NODE, namespace, resource).items()
                    if "ResponseComplete" not in stages]

        await eventually(open_watches, within=15, until=lambda w: w == [],
                         what="the watches closed with their last reader")
