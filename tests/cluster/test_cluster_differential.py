"""nodelet and the real kubelet v1.37.2 as nodes of the real control plane, side by side: the
same pods (a part of the differential catalogue, tests/differential/scenarios.py, as API
pods bound by `spec.nodeName`) run on each, and the status each wrote to the API and the
Events each posted are compared — the whole status, as tests/differential compares `/pods`
(`normalise.pod_view`), and each event's type, reason, message, `involvedObject.fieldPath`
and source (docs/differential.md, "In a cluster").

nodelet runs on the session's containerd, the kubelet on one of its own (it kills the pods
of a runtime it does not know); each in a namespace of its own, so that the same pod names
compare as they are once the namespace and node names are scrubbed from every text.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import InstanceFactory
from differential import normalise, scenarios
from support import kubeletpeer
from support.controlplane import AdminClient, ControlPlane, pod_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

WITHIN = 120.0
# The scenarios that need nothing but a node: no manifest-dir objects, no host ports, no
# restart rounds whose timing differs between runs.
NAMES = (
    "running", "failed", "succeeded", "start-error-never", "start-not-executable",
    "create-error", "init-ok", "init-fails-never", "sidecar", "sidecar-main-exits",
    "readiness-exec-fails", "image-missing-never", "image-bad-name", "volume-mounts",
    "emptydir-subpath", "downward-api", "env-field-and-resource", "run-as-non-root-refused",
    "qos-guaranteed", "qos-burstable", "out-of-cpu", "unsafe-sysctl", "active-deadline",
    "poststart-fails-never", "image-volume-missing", "image-volume-unmounted",
)
# Pods of claims, which only API pods have: each agent's namespace gets a claim that is never
# bound and one bound to a hostPath PV of its own (`claim_objects`).
CLAIM_SCENARIOS = (
    scenarios.Scenario("claim-unbound", """\
        containers: [{name: main, image: IMAGE, imagePullPolicy: IfNotPresent,
                      command: [sleep, "1000000"],
                      volumeMounts: [{name: store, mountPath: /d}]}]
        volumes: [{name: store, persistentVolumeClaim: {claimName: unbound}}]
        terminationGracePeriodSeconds: 1
        """.replace("IMAGE", scenarios.BUSYBOX),
        scenarios.condition("PodReadyToStartContainers", "False")),
    scenarios.Scenario("claim-hostpath", """\
        containers: [{name: main, image: IMAGE, imagePullPolicy: IfNotPresent,
                      command: [sh, -c, "echo ok > /d/f && sleep 1000000"],
                      volumeMounts: [{name: store, mountPath: /d}]}]
        volumes: [{name: store, persistentVolumeClaim: {claimName: held, readOnly: false}}]
        terminationGracePeriodSeconds: 1
        """.replace("IMAGE", scenarios.BUSYBOX),
        scenarios.condition("Ready", "True")),
)
NAMES += tuple(s.name for s in CLAIM_SCENARIOS)
CATALOGUE = tuple(s for s in scenarios.CATALOGUE if s.name in NAMES) + CLAIM_SCENARIOS


@contextlib.asynccontextmanager
async def claim_objects(admin: AdminClient, namespace: str, node: str,
                        tmp_path: Path) -> AsyncIterator[None]:
    """The claims of CLAIM_SCENARIOS in `namespace`: `unbound` (a class no PV has) and `held`,
    pre-bound to a hostPath PV on `node`; the PV deleted at the end."""
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    pv = f"held-{namespace}"
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    directory = tmp_path / namespace
    directory.mkdir()
    await admin.create("/api/v1/persistentvolumes", {"metadata": {"name": pv}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": "", "hostPath": {"path": str(directory)},
        "claimRef": {"namespace": namespace, "name": "held"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}})
    await admin.create(claims, {"metadata": {"name": "unbound"},
                                "spec": spec | {"storageClassName": "none"}})
    await admin.create(claims, {"metadata": {"name": "held"},
                                "spec": spec | {"storageClassName": "", "volumeName": pv}})
    # Bound before any pod uses it (else either agent may see it unbound once, or not).
    await eventually(lambda: admin.get(f"{claims}/held"), within=60,
                     until=lambda c: (c or {}).get("status", {}).get("phase") == "Bound",
                     what="the claim held bound")
    try:
        yield
    finally:
        await admin.delete(f"/api/v1/persistentvolumes/{pv}")


def api_pod(scenario: scenarios.Scenario, node: str) -> dict[str, Any]:
    obj: dict[str, Any] = _strings_in_commands(yaml.safe_load(scenario.manifest()))
    obj["spec"]["nodeName"] = node
    return obj


def _strings_in_commands(value: Any) -> Any:
    """`command: [false]` is the program `false`, which YAML 1.1 reads as a boolean: the API
    server refuses a boolean where a string is due, as a manifest dir's reader does not."""
    if isinstance(value, dict):
        return {k: [str(c).lower() if isinstance(c, bool) else c for c in v]
                if k == "command" and isinstance(v, list) else _strings_in_commands(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_in_commands(v) for v in value]
    return value


# The API server's random suffix of the service account token volume's name.
_TOKEN_VOLUME = re.compile(r"kube-api-access-[a-z0-9]{5}")
# Differences allowed, each with its reason (docs/differential.md, "In a cluster"): the
# kubelet reports the pod cgroup's unlimited memory (the page counter's maximum) as the
# pod's memory limit in some terminated pods whose containers have none; nodelet none.
ALLOWED = ("resources.limits: None != {'memory': '9007199254740988Ki'}",)
# DESIGN (docs/differential.md, "Deliberate differences"): nodelet's PodReadyToStartContainers
# says why there is no sandbox yet (the volume that cannot be set up); the kubelet's does not.
# Timing: a claim's FailedMount names the pod's volumes not set up at the moment the agent
# checked: the token volume is among them or not, on either agent, and the retry 10-15 s
# later (a 10 s back-off, jittered) names only the claim's. The list is compared as `[…]`.
UNMOUNTED = re.compile(r"unmounted volumes=\[[^\]]*\]")
# The event each claim scenario posts, which may come after the status that settles it.
AWAITED_EVENTS = {"claim-unbound": "FailedMount"}
WHY_NO_SANDBOX = re.compile(
    r"^conditions\[0\]\.message: 'no pod sandbox exists: .+' != 'no pod sandbox exists'$")
# NodeRestriction judges a TokenRequest against kube-apiserver's pod cache, which can lag a
# new pod (tests/README.md, CACHE_LAG): then the first mount of the token fails once, on
# either agent, and is retried.
CACHE_LAG = re.compile(r"events: only .*'FailedMount'.*failed to fetch token: .*404 NotFound")


@contextlib.contextmanager
def scrubbed_names(namespace: str, node: str) -> Iterator[Any]:
    """A function that replaces the run's namespace and node names, and the token volume's
    random suffix, in a JSON value."""
    def scrub(value: Any) -> Any:
        text = json.dumps(value).replace(namespace, "<namespace>").replace(node, "<node>")
        return json.loads(_TOKEN_VOLUME.sub("kube-api-access-<random>", text))
    yield scrub


async def observe(admin: AdminClient, namespace: str, node: str) -> dict[str, Any]:
    """Every scenario's pod once it settled, then the events about it (a few seconds later:
    an agent may post one just after the status that settles the scenario)."""
    settled: dict[str, Any] = {}
    created: set[str] = set()

    async def poll() -> dict[str, Any]:
        for scenario in CATALOGUE:  # one that comes after another once that one settled
            if scenario.name not in created and (not scenario.after
                                                 or scenario.after in settled):
                await admin.create(pod_path(namespace), api_pod(scenario, node))
                created.add(scenario.name)
        for scenario in CATALOGUE:
            if scenario.name in created and scenario.name not in settled:
                found = await admin.get(pod_path(namespace, scenario.name))
                if found is not None and scenario.settled(found):
                    settled[scenario.name] = found
        return settled

    await eventually(poll, until=lambda done: len(done) == len(CATALOGUE), within=WITHIN,
                     seen=lambda done: sorted(set(NAMES) - set(done)),
                     what="every scenario settled")

    async def awaited_events() -> list[dict[str, Any]] | None:
        found = await admin.items(f"/api/v1/namespaces/{namespace}/events")
        posted = {(e["involvedObject"].get("name"), e["reason"]) for e in found}
        return found if set(AWAITED_EVENTS.items()) <= posted else None

    events = await eventually(awaited_events, within=WITHIN,
                              what=f"the events {AWAITED_EVENTS}")
    events.sort(key=lambda e: e.get("firstTimestamp") or "")
    out = {}
    with scrubbed_names(namespace, node) as scrub:
        for name, pod in settled.items():
            mine = [e for e in events if e["involvedObject"].get("name") == name]
            out[name] = {
                "status": normalise.pod_view(scrub({"status": pod.get("status")})),
                "order": normalise.transition_order(pod),
                "events": normalise.event_view([scrub({
                    "type": e["type"], "reason": e["reason"], "message": e["message"],
                    "fieldPath": e["involvedObject"].get("fieldPath", "")}) for e in mine]),
                "sources": sorted({json.dumps(scrub([
                    e.get("source"), e.get("reportingComponent"), e.get("reportingInstance")]))
                    for e in mine}),
            }
    return out


@contextlib.asynccontextmanager
async def second_namespace(admin: AdminClient) -> AsyncIterator[str]:
    name = f"t-{secrets.token_hex(4)}"
    await admin.create("/api/v1/namespaces", {"metadata": {"name": name}})
    await eventually(lambda: admin.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
                     within=30, what=f"the default ServiceAccount of {name}")
    try:
        yield name
    finally:
        await admin.delete(f"/api/v1/namespaces/{name}")


def _events(events: list[dict[str, str]]) -> list[dict[str, str]]:
    """The distinct events, with a FailedMount's list of unmounted volumes as `[…]`."""
    return normalise.event_view([{**e, "message": UNMOUNTED.sub("unmounted volumes=[…]",
                                                                 e["message"])}
                                 for e in events])


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, list[str]]:
    found = {}
    for name in NAMES:
        a, b = ours[name], theirs[name]
        diffs = normalise.differences(a["status"], b["status"])
        if not normalise.orders_agree(a["order"], b["order"]):
            diffs.append(f"condition order: {a['order']} != {b['order']}")
        ours_events, their_events = _events(a["events"]), _events(b["events"])
        diffs += [f"events: only nodelet's: {e}" for e in ours_events if e not in their_events]
        diffs += [f"events: only the kubelet's: {e}" for e in their_events
                  if e not in ours_events]
        if a["sources"] != b["sources"]:
            diffs.append(f"event sources: {a['sources']} != {b['sources']}")
        diffs = [d for d in diffs if d not in ALLOWED and not CACHE_LAG.search(d)
                 and not WHY_NO_SANDBOX.match(d)]
        if diffs:
            found[name] = diffs
    return found


@pytest.mark.timeout(900)
async def test_nodelet_and_the_kubelet_write_the_same_to_the_api(
    join: Any, instances: InstanceFactory, control_plane: ControlPlane, admin: AdminClient,
    namespace: str, tmp_path: Path,
) -> None:
    try:
        async with join("diff-nodelet"), claim_objects(admin, namespace, "diff-nodelet",
                                                        tmp_path):
            ours = await observe(admin, namespace, "diff-nodelet")
        own = await instances()
        async with second_namespace(admin) as other:
            peer = await kubeletpeer.JoinedKubelet.join(
                endpoint=own.containerd.endpoint, client_ca=control_plane.ca.cert,
                node_name="diff-kubelet", client=own.client,
                bootstrap_kubeconfig=control_plane.bootstrap_kubeconfig(tmp_path / "boot.conf"))
            try:
                await peer.wait_ready(admin, within=WITHIN)
                async with claim_objects(admin, other, "diff-kubelet", tmp_path):
                    theirs = await observe(admin, other, "diff-kubelet")
            finally:
                await peer.stop(admin, within=WITHIN)
    finally:
        for made in scenarios.HOST_PATHS_MADE:  # DirectoryOrCreate made them on the host
            shutil.rmtree(made, ignore_errors=True)
    found = differences(ours, theirs)
    report = Path("test-artifacts") / "differential-cluster.json"
    report.parent.mkdir(exist_ok=True)
    report.write_text(json.dumps({"differences": found, "nodelet": ours, "kubelet": theirs},
                                 indent=1))
    assert not found, found
