"""The Node object and its status, as the kubelet's `kubelet_node_status.go` builds them.

Pure functions over plain values: the facts about the machine (`MachineFacts`, read by the host
adapter), what nodelet says about its node (`NodeSpec`), and the runtime's answers (CRI Version
and Status, as model values). `services.cluster.nodestatus` does the API and CRI calls and
sends what these functions return.

Rules:
- capacity (cpu, memory, pods, ephemeral-storage, hugepages) comes from the machine; allocatable
  is capacity less the reservations and hard eviction thresholds (`NodeSpec.reserved`);
- the Ready condition comes from CRI Status (RuntimeReady and NetworkReady), worded as the
  kubelet words it; the pressure conditions are always False (no eviction signals are read);
- a condition's `lastTransitionTime` moves only when its status does; heartbeats are `now`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import nodelet
from nodelet.model.core import apijson, nodeips, quantities, resources
from nodelet.model.core import runtime as rt
from nodelet.model.core import status as st

# (status, reason, message) of a node condition.
ConditionValue = tuple[str, str, str]

# The kubelet's version string is what `kubectl get nodes` shows; say what we are: the
# Kubernetes release whose kubelet nodelet behaves as (its feature gates, the condition names:
# the design, section 3), tested against that release's control plane (kube/versions.env). A node
# older than the API server by more than three minor releases is outside the version skew
# policy, so this moves with the release nodelet follows. nodelet's own version is semver build
# metadata, which comparisons ignore: the e2e suite's and kubectl's version checks read v1.37.2
# (a pre-release suffix, `v1.37.0-nodelet`, would compare as older than v1.37.0).
KUBERNETES_RELEASE = "v1.37.2"
KUBELET_VERSION = f"{KUBERNETES_RELEASE}+nodelet.{nodelet.__version__}"

# `status.images`: the largest images first, at most this many (the kubelet's
# nodeStatusMaxImages default), each with at most this many names (MaxNamesPerImageInNodeStatus).
MAX_IMAGES = 50
MAX_NAMES_PER_IMAGE = 5

# The pressure conditions as the kubelet reports them: (type, (reason, message) when False,
# (reason, message) when True).
_PRESSURE = (
    ("MemoryPressure", ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
     ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available")),
    ("DiskPressure", ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
     ("KubeletHasDiskPressure", "kubelet has disk pressure")),
    ("PIDPressure", ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
     ("KubeletHasInsufficientPID", "kubelet has insufficient PID available")),
)


@dataclass(frozen=True)
class MachineFacts:
    """What the Node says about the machine (capacity and nodeInfo)."""

    cpus: int
    memory_bytes: int
    # The data dir's filesystem (the kubelet's nodefs): ephemeral-storage capacity in bytes.
    ephemeral_storage_bytes: int = 0
    # Pre-allocated huge pages by resource name (`hugepages-2Mi`) in bytes.
    hugepages: Mapping[str, int] = field(default_factory=dict)
    machine_id: str = ""
    boot_id: str = ""
    kernel_version: str = ""
    os_image: str = ""
    architecture: str = "amd64"


@dataclass(frozen=True)
class NodeSpec:
    """What nodelet says about its node (everything but the runtime's state)."""

    name: str
    host_ip: str  # the primary InternalIP
    machine: MachineFacts
    max_pods: int = 110
    pod_cidrs: tuple[str, ...] = ()
    # What allocatable holds back (reservations and hard eviction thresholds), summed.
    reserved: Mapping[str, int] = field(default_factory=dict)
    kubelet_port: int = 10250
    labels: dict[str, str] = field(default_factory=dict)
    # Taints the Node is registered with, (key, value, effect) (--register-with-taints); an
    # existing Node's taints are left alone, as the kubelet leaves them.
    taints: tuple[tuple[str, str, str], ...] = ()
    # Every InternalIP, the primary first (--node-ip's dual-stack pair); empty: `host_ip`.
    host_ips: tuple[str, ...] = ()


def node_labels(spec: NodeSpec) -> dict[str, str]:
    """The well-known labels the kubelet sets on its Node, then `spec.labels` over them."""
    return {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": spec.machine.architecture,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": spec.machine.architecture,
        **spec.labels,
    }


# The kubelet's annotation that leaves attaching and detaching the node's volumes to the
# attach/detach controller (its default, enableControllerAttachDetach).
CONTROLLER_ATTACH_DETACH = "volumes.kubernetes.io/controller-managed-attach-detach"


def node_metadata(spec: NodeSpec) -> apijson.Obj:
    """The Node's labels and the annotations the kubelet sets at registration."""
    return {"labels": node_labels(spec), "annotations": {CONTROLLER_ATTACH_DETACH: "true"}}


def node_object(spec: NodeSpec) -> apijson.Obj:
    """The Node to create."""
    node: apijson.Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, **node_metadata(spec)},
        "spec": {},
    }
    if spec.pod_cidrs:
        node["spec"] = {"podCIDR": spec.pod_cidrs[0], "podCIDRs": list(spec.pod_cidrs)}
    if spec.taints:
        node["spec"]["taints"] = [
            {"key": key, **({"value": value} if value else {}), "effect": effect}
            for key, value, effect in spec.taints]
    return node


def node_images(images: Sequence[rt.ImageInfo], max_images: int = MAX_IMAGES) -> list[apijson.Obj]:
    """`status.images` as the kubelet's Images setter: largest first (equal sizes by ID,
    descending), at most `max_images` (-1: all), each named by its digests then its tags, at
    most `MAX_NAMES_PER_IMAGE` names."""
    ordered = sorted(images, key=lambda i: (i.size, i.id), reverse=True)
    if max_images > -1:
        ordered = ordered[:max_images]
    return [{"names": [*i.repo_digests, *i.repo_tags][:MAX_NAMES_PER_IMAGE], "sizeBytes": i.size}
            for i in ordered]


def ready_condition(runtime: rt.RuntimeStatus | None, error: str = "") -> ConditionValue:
    """(status, reason, message) of the node's Ready condition, worded as the kubelet does;
    `runtime` None means the runtime did not answer, `error` says why."""
    if runtime is None:
        return "False", "KubeletNotReady", f"container runtime status check may not have " \
            f"completed yet: {error}".rstrip(": ")
    problems = [p for p in (_runtime_problem(runtime, t) for t in ("RuntimeReady", "NetworkReady"))
                if p]
    if problems:
        return "False", "KubeletNotReady", "; ".join(problems)
    return "True", "KubeletReady", "kubelet is posting ready status"


def _runtime_problem(runtime: rt.RuntimeStatus, type_: str) -> str:
    """The kubelet's words for runtime condition `type_` not being true; "" when it is."""
    cond = runtime.condition(type_)
    if cond is not None and cond.status:
        return ""
    reason = cond.reason if cond else "missing"
    message = cond.message if cond else "not reported"
    what = "network" if type_ == "NetworkReady" else ""
    return f"container runtime {what} not ready: {type_}=false " \
        f"reason:{reason} message:{message}".replace("  ", " ")


# status.declaredFeatures (NodeDeclaredFeatures, GA in 1.37): the features of the registry
# (k8s.io/component-helpers/nodedeclaredfeatures) this node offers. The scheduler and the API
# server send a pod needing one of the others elsewhere, or refuse its update, rather than
# leave it to a node that would ignore it: nodelet offers no DRA, no user namespaces with
# hostNetwork, no bind-mount options, and lets kube-apiserver translate WebSocket streams
# (ExtendWebSocketsToKubelet undeclared). Sorted, as the API requires.
DECLARED_FEATURES = ("InPlacePodLevelResourcesVerticalScaling",
                     "InPlacePodVerticalScalingInitContainers",
                     "RestartAllContainersOnContainerExits")


def node_status(
    spec: NodeSpec,
    version: rt.VersionInfo | None,
    ready: ConditionValue,
    *,
    previous: Mapping[str, Any] | None,
    now: datetime,
    pressure: frozenset[str] = frozenset(),
    images: Sequence[apijson.Obj] | None = None,
    features: rt.RuntimeStatus | None = None,
    volumes_in_use: Sequence[str] | None = None,
    extended: tuple[Mapping[str, int], Mapping[str, int]] | None = None,
) -> apijson.Obj:
    """The Node status to report. Transition times are kept from `previous` (the API's status)
    for conditions whose status did not change; heartbeats are `now`; `version` None (the
    runtime did not answer) leaves containerRuntimeVersion empty; `pressure` names the
    pressure conditions that are True (the eviction manager's); `images`: `node_images`
    (None: not reported); `features`: the runtime's Status, for `status.features` (None: the
    runtime did not answer, the Node keeps what it said); `extended`: the device plugins'
    resources, (capacity, allocatable) counts by name, a removed one as 0 (the kubelet keeps
    it at 0, to tell it from cluster-level extended resources)."""
    more_capacity, more_allocatable = extended or ({}, {})
    out: apijson.Obj = {
        "capacity": _quantities({**capacity(spec), **more_capacity}),
        "allocatable": _quantities({**allocatable(spec), **more_allocatable}),
        "conditions": _conditions(ready, pressure, previous, now),
        "addresses": nodeips.addresses(spec.host_ips or (spec.host_ip,), spec.name),
        "daemonEndpoints": {"kubeletEndpoint": {"Port": spec.kubelet_port}},
        "nodeInfo": _node_info(spec.machine, version),
        "declaredFeatures": list(DECLARED_FEATURES),
    }
    if images is not None:
        out["images"] = list(images)
    if volumes_in_use is not None:  # the kubelet's VolumesInUse setter (an empty list too)
        out["volumesInUse"] = sorted(volumes_in_use)
    if features is not None:
        # The kubelet's NodeFeatures setter (SupplementalGroupsPolicy is GA).
        out["features"] = {"supplementalGroupsPolicy": features.supplemental_groups_policy}
        # Its RuntimeHandlers setter: what each handler can do, which the scheduler and the
        # node suite read (recursive read-only mounts, user namespaces); none when the
        # runtime names no handlers (containerd 1.6).
        if features.handlers:
            out["runtimeHandlers"] = [
                {"name": h.name, "features": {
                    "recursiveReadOnlyMounts": h.recursive_read_only_mounts,
                    "userNamespaces": h.user_namespaces}}
                for h in features.handlers]
    return out


def extended_at_zero(status: Mapping[str, Any]) -> dict[str, int]:
    """Every extended resource in a Node's status capacity, at 0: what a node new to its
    device manager reports of them when it adopts the Node."""
    return {name: 0 for name in status.get("capacity") or {}
            if resources.is_extended_resource(name)}


def status_changed(reported: Mapping[str, Any] | None, status: Mapping[str, Any]) -> bool:
    """True when `status` says more than `reported` did beyond newer heartbeats (None: nothing
    was reported yet)."""
    return reported is None or _without_heartbeats(status) != _without_heartbeats(reported)


def capacity(spec: NodeSpec) -> dict[str, int]:
    """The node's capacity in `resources` units (cpu in millicores, bytes, counts)."""
    m = spec.machine
    return {"cpu": m.cpus * 1000, "memory": m.memory_bytes, "pods": spec.max_pods,
            "ephemeral-storage": m.ephemeral_storage_bytes, **m.hugepages}


def allocatable(spec: NodeSpec) -> dict[str, int]:
    """Capacity less what is reserved: what admission lets pods ask for."""
    return resources.allocatable(capacity(spec), spec.reserved)


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    """Amounts as the kubelet writes them: whole cores or millicores, memory in Ki."""
    out = {}
    for name, value in amounts.items():
        if name == "cpu":
            out[name] = quantities.format_millis(value)
        elif name == "memory" and value % 1024 == 0:
            out[name] = f"{value // 1024}Ki"
        else:
            out[name] = str(value)
    return out


def _conditions(ready: ConditionValue, pressure: frozenset[str],
                previous: Mapping[str, Any] | None, now: datetime) -> list[apijson.Obj]:
    stamp = st.format_time(now)
    old = {c.get("type"): c for c in (previous or {}).get("conditions") or []}
    conditions = []
    values = [(type_, "True", *pressed) if type_ in pressure else (type_, "False", *fine)
              for type_, fine, pressed in _PRESSURE]
    for type_, status, reason, message in (*values, ("Ready", *ready)):
        before = old.get(type_)
        since = before.get("lastTransitionTime") if before and \
            before.get("status") == status else stamp
        conditions.append({"type": type_, "status": status, "reason": reason,
                           "message": message, "lastHeartbeatTime": stamp,
                           "lastTransitionTime": since})
    return conditions


def _node_info(m: MachineFacts, version: rt.VersionInfo | None) -> dict[str, str]:
    runtime_version = f"{version.runtime_name}://{version.runtime_version}" if version else ""
    return {
        "machineID": m.machine_id, "systemUUID": m.machine_id, "bootID": m.boot_id,
        "kernelVersion": m.kernel_version, "osImage": m.os_image,
        "containerRuntimeVersion": runtime_version, "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": m.architecture,
    }


def _without_heartbeats(status: Mapping[str, Any]) -> apijson.Obj:
    out = dict(status)
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"}
                         for c in status.get("conditions", [])]
    return out
