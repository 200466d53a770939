"""The defaulted v1 pod object: what the API server and the kubelet would hold for a pod.

`Pod.raw` is this object (see `manifests.pod_from_object`): it carries the API server's
defaults (pull policy, termination message, protocol, volume modes...) also for a static pod
that never went through an API server.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from nodelet.model.core import pods

default_pull_policy = pods.default_pull_policy


def _default_container(container: dict[str, Any], host_network: bool) -> None:
    container["imagePullPolicy"] = container.get("imagePullPolicy") or default_pull_policy(
        container["image"]
    )
    container["terminationMessagePath"] = (
        container.get("terminationMessagePath") or "/dev/termination-log"
    )
    container["terminationMessagePolicy"] = container.get("terminationMessagePolicy") or "File"
    resources = container["resources"] = dict(container.get("resources") or {})
    if resources.get("limits"):
        resources["requests"] = {**resources["limits"], **(resources.get("requests") or {})}
    for port in container.get("ports") or ():
        port["protocol"] = port.get("protocol") or "TCP"
        if host_network and not port.get("hostPort"):
            port["hostPort"] = port["containerPort"]


def _default_volume(volume: dict[str, Any]) -> None:
    for source_type in ("configMap", "secret", "projected", "downwardAPI"):
        if isinstance(volume.get(source_type), dict):
            volume[source_type].setdefault("defaultMode", 0o644)
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
    "priority": 0,
    "securityContext": {},
    "preemptionPolicy": "PreemptLowerPriority",
}


def defaulted(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON copy of the v1 pod `obj` (which has a `spec`) with the defaults filled in."""
    raw: dict[str, Any] = json.loads(json.dumps(obj, default=str))
    spec = raw["spec"]
    for key, value in SPEC_DEFAULTS.items():
        if spec.get(key) is None:
            spec[key] = copy.deepcopy(value)
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            _default_container(container, bool(spec.get("hostNetwork")))
    for volume in spec.get("volumes") or ():
        _default_volume(volume)
    return raw
