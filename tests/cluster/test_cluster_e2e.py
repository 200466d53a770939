"""End to end on real containerd: nodelet joins the test API server, runs a bound pod, reports
its five conditions in the API and removes it when it is deleted; Ready follows a readiness gate a
controller writes; a static pod has a mirror pod carrying its status.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from harness import Harness, pod_manifest
from kubeapi import KubeApiServer, now_rfc3339, pod_object
from nodelet.adapters import kube, kubeconfig
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import pods
from nodelet.services import cluster
from polling import eventually
from registry import Registry

pytestmark = pytest.mark.runtime

ORDER = ("PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady", "Ready")


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@asynccontextmanager
async def joined(runtime: Instance, tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer,
                                                                          Harness]]:
    """An agent on the session's containerd, joined to a fresh test API server as node
    `e2e-node`; API pods must be deleted by the test (static ones are removed here)."""
    server = KubeApiServer(bookmark_interval=1.0, node="e2e-node")
    await server.start()
    harness = Harness(endpoint=runtime.containerd.endpoint, node_name="e2e-node")
    config = cluster.ClusterSettings(
        kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"), node_status_period=1.0,
        lease_renew_period=1.0, status_resync_period=2.0)
    harness.settings = dataclasses.replace(harness.settings, cluster=config)
    try:
        await harness.start()
        yield server, harness
    finally:
        for pod in server.list_objects("pods"):  # what the test left: removed, so terminated
            server.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], grace=0)
        await harness.stop()
        harness.cleanup()
        await server.stop()


def api_conditions(server: KubeApiServer, name: str) -> dict[str, dict[str, Any]]:
    pod = server.get("pods", "default", name) or {}
    return {c["type"]: c for c in pod.get("status", {}).get("conditions", [])}


async def test_bound_pod_runs_reports_five_conditions_and_is_deleted(
        runtime: Instance, tmp_path: Path) -> None:
    async with joined(runtime, tmp_path) as (server, harness):
        node = server.get("nodes", "", "e2e-node")
        assert node is not None
        ready = {c["type"]: c for c in node["status"]["conditions"]}["Ready"]
        assert ready["status"] == "True", ready
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")

        created = server.create("pods", pod_object("web", node="e2e-node", grace=1))
        uid = created["metadata"]["uid"]

        def running() -> dict[str, dict[str, Any]] | None:
            conds = api_conditions(server, "web")
            if all(conds.get(t, {}).get("status") == "True" for t in ORDER):
                return conds
            return None

        conds = await eventually(running, within=60, what="five conditions True in the API")
        # A condition that turned True carries no reason or message left from when it was False.
        assert not any(conds[t].get("reason") or conds[t].get("message") for t in ORDER), conds
        times = [_time(conds[t]["lastTransitionTime"]) for t in ORDER]
        assert times == sorted(times), conds
        status = server.get("pods", "default", "web")["status"]
        assert status["phase"] == "Running" and status["podIP"]
        assert server.get("leases", "kube-node-lease", "e2e-node") is not None

        server.delete("pods", "default", "web")  # graceful: deletionTimestamp first
        await eventually(lambda: server.get("pods", "default", "web") is None, within=60,
                         what="pod deleted from the API by nodelet")
        agent = harness.agent_or_fail()
        await eventually(lambda: not [p for p, _ in agent.pods() if p.uid == uid], within=30,
                         what="pod gone from the agent")
        deletes = [r for r in server.requests if r.verb == "delete" and r.status == 200]
        assert deletes, "nodelet issued no final delete"


async def test_ready_follows_a_readiness_gate_written_by_a_controller(
        runtime: Instance, tmp_path: Path) -> None:
    async with joined(runtime, tmp_path) as (server, _harness):
        gate = "example.com/lb"
        server.create("pods", pod_object("gated", node="e2e-node", grace=1,
                                         readinessGates=[{"conditionType": gate}]))

        def ready_is(value: str, reason: str = "") -> dict[str, Any] | None:
            conds = api_conditions(server, "gated")
            ready = conds.get("Ready", {})
            if conds.get("ContainersReady", {}).get("status") == "True" and \
                    ready.get("status") == value and (ready.get("reason") or "") == reason:
                return conds
            return None

        await eventually(lambda: ready_is("False", "ReadinessGatesNotReady"), within=60,
                         what="containers ready, Ready False for the missing gate")
        # The controller: a strategic merge patch of pods/status, as a real one would send.
        controller = kube.KubeClient(kubeconfig.load(
            server.write_kubeconfig(tmp_path / "controller", admin=True)))
        try:
            for value in ("True", "False"):
                await controller.request(
                    "PATCH", kube.pod_path("default", "gated", "status"),
                    body={"status": {"conditions": [{"type": gate, "status": value,
                                                     "lastTransitionTime": now_rfc3339()}]}},
                    content_type=kube.STRATEGIC)
                reason = "" if value == "True" else "ReadinessGatesNotReady"
                conds = await eventually(lambda v=value, r=reason: ready_is(v, r), within=20,
                                         what=f"Ready {value} after the gate turned {value}")
                assert conds[gate]["status"] == value  # the gate itself is left alone
        finally:
            await controller.close()
        server.delete("pods", "default", "gated")
        await eventually(lambda: server.get("pods", "default", "gated") is None, within=60,
                         what="gated pod removed")


def mirror_ready(server: KubeApiServer, name: str) -> str | None:
    """The mirror pod's UID once all five conditions are True in its API status."""
    pod = server.get("pods", "default", name) or {}
    annotations = pod.get("metadata", {}).get("annotations", {})
    conds = api_conditions(server, name)
    if pods.ANNOTATION_CONFIG_MIRROR in annotations and \
            all(conds.get(t, {}).get("status") == "True" for t in ORDER):
        return str(pod["metadata"]["uid"])
    return None


async def test_static_pod_has_a_mirror_pod_with_its_status(
        runtime: Instance, tmp_path: Path) -> None:
    async with joined(runtime, tmp_path) as (server, harness):
        harness.write("static.yaml", pod_manifest("static"))
        name = "static-e2e-node"
        first = await eventually(lambda: mirror_ready(server, name), within=60,
                                 what="mirror pod with five True conditions")
        found = harness.find("static")
        assert found is not None
        mirror = server.get("pods", "default", name)
        assert mirror is not None
        assert mirror["metadata"]["annotations"][pods.ANNOTATION_CONFIG_MIRROR] == found[0].uid
        assert found[1] is not None and mirror["status"]["podIP"] == found[1].pod_ip
        server.delete("pods", "default", name, grace=0)  # someone deletes the mirror pod
        await eventually(lambda: (uid := mirror_ready(server, name)) not in (None, first) and uid,
                         within=30, what="mirror pod recreated with the status")
        assert harness.find("static") is not None  # the static pod itself kept running
        harness.remove("static.yaml")
        await eventually(lambda: server.get("pods", "default", name) is None, within=60,
                         what="mirror pod deleted with its static pod")


async def test_pull_secret_is_read_from_the_api_for_a_private_image(
        runtime: Instance, tmp_path: Path) -> None:
    """imagePullSecrets of an API pod come from the API, like Secrets of volumes."""
    auth = ("puller", "s3cret")
    with Registry.started(auth=auth) as private:
        ref = private.push("private/busybox", "cluster")
        token = base64.b64encode(":".join(auth).encode()).decode()
        config = json.dumps({"auths": {private.host: {"auth": token}}}).encode()
        try:
            async with joined(runtime, tmp_path) as (server, harness):
                server.create("secrets", {
                    "metadata": {"name": "regcred", "namespace": "default"},
                    "type": "kubernetes.io/dockerconfigjson",
                    "data": {".dockerconfigjson": base64.b64encode(config).decode()}})
                spec = pod_object("private", node="e2e-node", imagePullSecrets=[
                    {"name": "regcred"}])
                spec["spec"]["containers"][0]["image"] = ref
                server.create("pods", spec)
                await eventually(lambda: api_conditions(server, "private").get("Ready", {}).get(
                    "status") == "True", within=60, what="the private image's pod Ready")
                assert [r for r in server.requests  # listed for its watch
                        if r.resource == "secrets" and r.verb == "list" and r.status == 200]
                # Looked up at the start of the sync, the Secret was there by the pull.
                reasons = [e.reason for e in harness.agent_or_fail().events(pod="private")]
                assert "FailedToRetrieveImagePullSecret" not in reasons, reasons
                assert "Failed" not in reasons, reasons
                server.delete("pods", "default", "private")
                await eventually(lambda: server.get("pods", "default", "private") is None,
                                 within=60, what="private pod removed")
        finally:
            try:
                await runtime.client.remove_image(ref)
            except cri_errors.NotFound:
                pass


async def test_api_pods_nodelet_cannot_run_are_refused_with_a_reason(
        runtime: Instance, tmp_path: Path) -> None:
    async with joined(runtime, tmp_path) as (server, _):
        overhead = pod_object("overhead", node="e2e-node", grace=1)
        overhead["spec"]["overhead"] = {"cpu": "250m"}
        server.create("pods", overhead)
        unsafe = pod_object("unsafe", node="e2e-node", grace=1)
        unsafe["spec"]["securityContext"] = {
            "sysctls": [{"name": "kernel.msgmax", "value": "1024"}]}
        server.create("pods", unsafe)

        def failed(name: str) -> dict[str, Any] | None:
            status = (server.get("pods", "default", name) or {}).get("status", {})
            return status if status.get("phase") == "Failed" else None

        status = await eventually(lambda: failed("overhead"), within=10,
                                  what="overhead pod refused")
        assert status["reason"] == "UnsupportedPodSpec"
        assert status["message"].startswith("Pod was rejected: spec.overhead: pod overhead")
        status = await eventually(lambda: failed("unsafe"), within=10,
                                  what="unsafe sysctl pod refused")
        assert (status["reason"], status["message"]) == (
            "SysctlForbidden",
            'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted')
        reasons = {e["reason"] for e in server.list_objects("events")}
        assert {"UnsupportedPodSpec", "SysctlForbidden"} <= reasons


def _volume_file(harness: Harness, uid: str, plugin: str, volume: str, key: str) -> str | None:
    """The content of `key` in a pod's volume as the containers see it (None: not there)."""
    directory = harness.agent_or_fail().volumes.volumes_dir(pods.PodUID(uid))
    path = directory / f"kubernetes.io~{plugin}" / volume / key
    return path.read_text() if path.exists() else None


async def test_configmap_and_secret_created_later_are_mounted_by_watch(
        runtime: Instance, tmp_path: Path) -> None:
    """Issue 13's acceptance: a ConfigMap created after the pod is mounted within 2 s (by its
    watch, not a re-read); a Secret likewise; changes reach the files; the watches go with the
    pod."""
    async with joined(runtime, tmp_path) as (server, harness):
        spec = pod_object("reader", node="e2e-node", grace=1, volumes=[
            {"name": "conf", "configMap": {"name": "late"}},
            {"name": "tok", "secret": {"secretName": "late-secret"}}])
        spec["spec"]["containers"][0]["volumeMounts"] = [
            {"name": "conf", "mountPath": "/conf"}, {"name": "tok", "mountPath": "/tok"}]
        uid = server.create("pods", spec)["metadata"]["uid"]
        agent = harness.agent_or_fail()
        await eventually(lambda: [e for e in agent.events(pod="reader")
                                  if e.reason == "FailedMount" and '"late"' in e.message],
                         within=30, what="FailedMount while the ConfigMap is missing")
        await eventually(lambda: server.open_watches("configmaps"), within=5,
                         until=lambda w: w == [("default", "metadata.name=late")],
                         what="the missing ConfigMap watched")
        server.create("configmaps", {"metadata": {"name": "late", "namespace": "default"},
                                     "data": {"key": "one"}})
        await eventually(lambda: _volume_file(harness, uid, "configmap", "conf", "key"),
                         within=2, until=lambda text: text == "one",
                         what="the ConfigMap created later in the pod's volume")
        token = base64.b64encode(b"s1").decode()
        server.create("secrets", {"metadata": {"name": "late-secret", "namespace": "default"},
                                  "data": {"t": token}})
        await eventually(lambda: api_conditions(server, "reader").get("Ready", {}).get(
            "status") == "True", within=60, what="the pod Ready once both exist")
        assert _volume_file(harness, uid, "secret", "tok", "t") == "s1"
        server.update("configmaps", {"metadata": {"name": "late", "namespace": "default"},
                                     "data": {"key": "two"}})
        server.update("secrets", {"metadata": {"name": "late-secret", "namespace": "default"},
                                  "data": {"t": base64.b64encode(b"s2").decode()}})
        await eventually(lambda: (_volume_file(harness, uid, "configmap", "conf", "key"),
                                  _volume_file(harness, uid, "secret", "tok", "t")),
                         within=10, until=lambda seen: seen == ("two", "s2"),
                         what="both changes in the mounted files")
        # Each object was listed once and then followed by its watch: no GET, no re-list.
        assert sorted((r.resource, r.verb) for r in server.requests
                      if r.resource in ("configmaps", "secrets") and r.verb in ("get", "list")
                      ) == [("configmaps", "list"), ("secrets", "list")]
        server.delete("pods", "default", "reader")
        await eventually(lambda: server.get("pods", "default", "reader") is None, within=60,
                         what="reader deleted")
        await eventually(lambda: server.open_watches("configmaps") +
                         server.open_watches("secrets"), within=10, until=lambda w: w == [],
                         what="the watches closed with their last reader")
