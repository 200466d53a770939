"""The defaulted v1 pod object: what the API server and the kubelet would hold for a pod.

`Pod.raw` is this object (see `manifests.pod_from_object`): it carries the scheme's defaults
that the kubelet applies to a static pod it decodes, and the API server to every pod (pull
policy, termination message, protocol, volume modes, probe timings, field selectors'
apiVersion...), quantities in their canonical form (`quantities.canonical`). What only the
API server's admission adds (a priority, a preemption policy) is not added here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from nodelet.model.core import pods, quantities

default_pull_policy = pods.default_pull_policy


# SetDefaults_Probe.
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                   "failureThreshold": 3}


def _default_handler(handler: Any) -> None:
    """A probe's or hook's action: SetDefaults_HTTPGetAction, the gRPC service."""
    if not isinstance(handler, dict):
        return
    if isinstance(handler.get("httpGet"), dict):
        handler["httpGet"]["path"] = handler["httpGet"].get("path") or "/"
        handler["httpGet"]["scheme"] = handler["httpGet"].get("scheme") or "HTTP"
    if isinstance(handler.get("grpc"), dict):
        handler["grpc"].setdefault("service", "")


def _default_selectors(holder: Any) -> None:
    """An env var's or downward API item's fieldRef (apiVersion v1) and resourceFieldRef
    (divisor 0, canonical)."""
    if not isinstance(holder, dict):
        return
    if isinstance(holder.get("fieldRef"), dict):
        holder["fieldRef"]["apiVersion"] = holder["fieldRef"].get("apiVersion") or "v1"
    if isinstance(holder.get("resourceFieldRef"), dict):
        ref = holder["resourceFieldRef"]
        ref["divisor"] = quantities.canonical(ref.get("divisor") or "0")


def _canonical(amounts: Any) -> Any:
    if not isinstance(amounts, dict):
        return amounts
    return {name: quantities.canonical(value) for name, value in amounts.items()}


def _default_resources(holder: dict[str, Any]) -> dict[str, Any]:
    resources = holder["resources"] = dict(holder.get("resources") or {})
    for key in ("limits", "requests"):
        if key in resources:
            resources[key] = _canonical(resources[key])
    if resources.get("limits"):
        resources["requests"] = {**resources["limits"], **(resources.get("requests") or {})}
    return resources


def _default_container(container: dict[str, Any], host_network: bool) -> None:
    container["imagePullPolicy"] = container.get("imagePullPolicy") or default_pull_policy(
        container["image"]
    )
    container["terminationMessagePath"] = (
        container.get("terminationMessagePath") or "/dev/termination-log"
    )
    container["terminationMessagePolicy"] = container.get("terminationMessagePolicy") or "File"
    _default_resources(container)
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(kind)
        if isinstance(probe, dict):
            for key, value in _PROBE_DEFAULTS.items():
                probe[key] = probe.get(key) or value
            _default_handler(probe)
    for hook in (container.get("lifecycle") or {}).values():
        _default_handler(hook)
    for env in container.get("env") or ():
        if isinstance(env, dict):
            _default_selectors(env.get("valueFrom"))
    for port in container.get("ports") or ():
        port["protocol"] = port.get("protocol") or "TCP"
        if host_network and not port.get("hostPort"):
            port["hostPort"] = port["containerPort"]


def _default_volume(volume: dict[str, Any]) -> None:
    for source_type in ("configMap", "secret", "projected", "downwardAPI"):
        if isinstance(volume.get(source_type), dict):
            volume[source_type].setdefault("defaultMode", 0o644)
    downward = [volume.get("downwardAPI")] + [
        source.get("downwardAPI") for source in
        (volume.get("projected") or {}).get("sources") or () if isinstance(source, dict)]
    for items in (d.get("items") or () for d in downward if isinstance(d, dict)):
        for item in items:
            _default_selectors(item)
    if isinstance(volume.get("emptyDir"), dict) and "sizeLimit" in volume["emptyDir"]:
        volume["emptyDir"]["sizeLimit"] = quantities.canonical(volume["emptyDir"]["sizeLimit"])
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"].setdefault("type", "")
    image = volume.get("image")
    if isinstance(image, dict) and not image.get("pullPolicy"):
        image["pullPolicy"] = default_pull_policy(str(image.get("reference") or ""))


SPEC_DEFAULTS: Mapping[str, Any] = {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "terminationGracePeriodSeconds": 30,
    "schedulerName": "default-scheduler",
    "enableServiceLinks": True,
    "securityContext": {},
}
# The kubelet's toleration of every NoExecute taint for static pods, so that node problems
# never evict them (config/common.go applyDefaults).
STATIC_TOLERATION: Mapping[str, str] = {"operator": "Exists", "effect": "NoExecute"}


def defaulted(obj: Mapping[str, Any], *, static: bool = False) -> dict[str, Any]:
    """A JSON copy of the v1 pod `obj` (which has a `spec`) with the defaults filled in;
    `static`: a static pod, which also tolerates every NoExecute taint."""
    raw: dict[str, Any] = json.loads(json.dumps(obj, default=str))
    spec = raw["spec"]
    for key, value in SPEC_DEFAULTS.items():
        if spec.get(key) is None:
            spec[key] = copy.deepcopy(value)
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            _default_container(container, bool(spec.get("hostNetwork")))
    for volume in spec.get("volumes") or ():
        _default_volume(volume)
    if isinstance(spec.get("resources"), dict):
        _default_resources(spec)
    if isinstance(spec.get("overhead"), dict):
        spec["overhead"] = _canonical(spec["overhead"])
    if static:
        tolerations = spec["tolerations"] = list(spec.get("tolerations") or [])
        if not any(_same_toleration(t) for t in tolerations):
            tolerations.append(dict(STATIC_TOLERATION))
    return raw


def _same_toleration(toleration: Any) -> bool:
    """AddOrUpdateTolerationInPod's match: the same key, operator, value and effect."""
    return isinstance(toleration, dict) and not toleration.get("key") and \
        toleration.get("operator") == "Exists" and toleration.get("effect") == "NoExecute" \
        and not toleration.get("value")
