"""The downward API (pure): pod and container facts as the strings the kubelet gives them, for
environment variables (`envvars`) and downwardAPI volume files (`volumes`).

`field_value` answers a fieldRef as the kubelet's podFieldSelectorRuntimeValue and
ExtractFieldPathAsString do; `resource_value` a resourceFieldRef as ExtractContainerResourceValue,
where an unset limit stands for the node's allocatable amount (defaultPodLimitsForDownwardAPI).
Which paths a pod may ask for is checked when the manifest is read (`envspecs` for env vars).

Exceptions::

    FieldError    a fieldRef or resourceFieldRef that cannot be answered; `.message` says which
                  and what would work
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import fields, pods, quantities

# The fieldRef paths the API server allows for env vars (validEnvDownwardAPIFieldPathExpressions);
# `metadata.labels['KEY']` and `metadata.annotations['KEY']` come on top.
ENV_FIELD_PATHS = (
    "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
    "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
)  # fmt: skip
SUBSCRIPTED_PATHS = ("metadata.annotations", "metadata.labels")
# What ConvertDownwardAPIFieldLabel accepts for a v1 pod (`spec.host` is an old name).
_KNOWN_PATHS = frozenset({
    *ENV_FIELD_PATHS, *SUBSCRIPTED_PATHS, "spec.restartPolicy", "spec.schedulerName",
    "status.phase",
})  # fmt: skip
_OLD_NAMES = {"spec.host": "spec.nodeName"}

RESOURCES = (
    "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "requests.cpu", "requests.memory", "requests.ephemeral-storage",
)  # fmt: skip


class FieldError(errors.MessageError):
    """A downward API reference that cannot be answered; `message` says why."""


@dataclass(frozen=True)
class Node:
    """The node as the downward API shows it: its name, IPs and allocatable resources (what an
    unset limit means: CPU in millicores, memory and ephemeral storage in bytes)."""

    name: str
    host_ips: tuple[str, ...] = ()
    cpu_milli: int = 0
    memory: int = 0
    ephemeral_storage: int = 0


@dataclass(frozen=True)
class PodFacts:
    """What the downward API can expose besides the pod object itself.

    `node_cpu_milli`, `node_memory` and `node_ephemeral_storage` (bytes) stand in for unset
    limits in resourceFieldRef, as the kubelet uses the node's allocatable resources.
    `pod_ips`/`host_ips` are every IP (dual stack), `pod_ip`/`host_ip` the first one.
    """

    pod: pods.Pod
    node_name: str
    pod_ip: str = ""
    host_ip: str = ""
    node_cpu_milli: int = 0
    node_memory: int = 0
    pod_ips: tuple[str, ...] = ()
    host_ips: tuple[str, ...] = ()
    node_ephemeral_storage: int = 0

    @property
    def all_pod_ips(self) -> tuple[str, ...]:
        return self.pod_ips or ((self.pod_ip,) if self.pod_ip else ())

    @property
    def all_host_ips(self) -> tuple[str, ...]:
        return self.host_ips or ((self.host_ip,) if self.host_ip else ())


def pod_facts(pod: pods.Pod, node: Node, pod_ips: Sequence[str]) -> PodFacts:
    """The facts of `pod` on `node`; a hostNetwork pod's IPs are the node's, as in its status."""
    ips = node.host_ips if pod.spec.host_network else tuple(pod_ips)
    return PodFacts(
        pod=pod, node_name=node.name, pod_ip=ips[0] if ips else "", pod_ips=ips,
        host_ip=node.host_ips[0] if node.host_ips else "", host_ips=node.host_ips,
        node_cpu_milli=node.cpu_milli, node_memory=node.memory,
        node_ephemeral_storage=node.ephemeral_storage,
    )


# ---------------------------------------------------------------------------------------------
# fieldRef


def go_quote(value: str) -> str:
    """`value` quoted like Go's strconv.Quote (the kubelet writes label values with %q)."""
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f",
               "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}  # fmt: skip
    out = []
    for char in value:
        code = ord(char)
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def format_map(values: Mapping[str, str]) -> str:
    """The kubelet's fieldpath.FormatMap: `key="value"` lines, sorted by key, no final newline."""
    return "\n".join(f"{key}={go_quote(values[key])}" for key in sorted(values))


def split_subscript(field_path: str) -> tuple[str, str] | None:
    """`metadata.labels['app']` -> ("metadata.labels", "app"); None when not subscripted (the
    kubelet's SplitMaybeSubscriptedPath)."""
    if not field_path.endswith("']"):
        return None
    head, sep, key = field_path[:-2].partition("['")
    return (head, key) if sep and head else None


def internal_field_path(api_version: str, field_path: str) -> str:
    """The path a v1 fieldRef names, as the kubelet's ConvertDownwardAPIFieldLabel: only v1, only
    known paths, subscripts only on labels and annotations, `spec.host` is `spec.nodeName`."""
    if api_version != "v1":
        raise FieldError(f"unsupported pod version: {api_version}")
    split = split_subscript(field_path)
    if split is not None:
        if split[0] not in SUBSCRIPTED_PATHS:
            raise FieldError(f"field label does not support subscript: {field_path}")
        return field_path
    if field_path not in _KNOWN_PATHS and field_path not in _OLD_NAMES:
        raise FieldError(f"field label not supported: {field_path}")
    return _OLD_NAMES.get(field_path, field_path)


def field_value(field_path: str, facts: PodFacts) -> str:
    """The value of a downward API fieldRef, as the kubelet's ExtractFieldPathAsString."""
    pod = facts.pod
    simple = {
        "metadata.name": pod.name,
        "metadata.namespace": pod.namespace,
        "metadata.uid": str(pod.uid),
        "metadata.labels": format_map(pod.labels),
        "metadata.annotations": format_map(pod.annotations),
        "spec.nodeName": pod.spec.node_name or facts.node_name,
        "spec.serviceAccountName": str(pod.raw.get("spec", {}).get("serviceAccountName") or ""),
        "status.podIP": facts.all_pod_ips[0] if facts.all_pod_ips else "",
        "status.podIPs": ",".join(facts.all_pod_ips),
        "status.hostIP": facts.all_host_ips[0] if facts.all_host_ips else "",
        "status.hostIPs": ",".join(facts.all_host_ips),
    }
    field_path = _OLD_NAMES.get(field_path, field_path)
    if field_path in simple:
        return simple[field_path]
    split = split_subscript(field_path)
    if split is not None and split[0] in SUBSCRIPTED_PATHS:
        values = pod.labels if split[0] == "metadata.labels" else pod.annotations
        return values.get(split[1], "")
    raise FieldError(
        f'unsupported fieldPath "{field_path}": use one of {", ".join(sorted(simple))}, '
        "metadata.labels['KEY'] or metadata.annotations['KEY']"
    )


# ---------------------------------------------------------------------------------------------
# resourceFieldRef


def _find_container(pod: pods.Pod, name: str) -> pods.Container:
    every = (*pod.spec.init_containers, *pod.spec.containers)
    found = next((c for c in every if c.name == name), None)
    if found is None:
        raise FieldError(f'resourceFieldRef: container "{name}" not found in the pod')
    return found


def _raw_quantity(resources: Mapping[str, Any], kind: str, name: str) -> int | None:
    values = resources.get(kind)
    value = values.get(name) if isinstance(values, Mapping) else None
    if value is None:
        return None
    try:
        return quantities.ceil(quantities.parse_quantity(value))
    except fields.ManifestError:
        return None  # checked when the manifest was read


def ephemeral_storage(pod: pods.Pod, container: str) -> tuple[int, int]:
    """(request, limit) of ephemeral storage in bytes, 0 when unset. Read from the pod as
    written: `pods.Resources` keeps CPU and memory only, what QoS and cgroups use."""
    spec = pod.raw.get("spec")
    items = [c for key in ("initContainers", "containers")
             for c in ((spec.get(key) if isinstance(spec, Mapping) else None) or ())]
    raw = next((c for c in items if isinstance(c, Mapping) and c.get("name") == container), {})
    resources = raw.get("resources")
    if not isinstance(resources, Mapping):
        return 0, 0
    limit = _raw_quantity(resources, "limits", "ephemeral-storage")
    request = _raw_quantity(resources, "requests", "ephemeral-storage")
    # The API server defaults a missing request to its limit.
    return (limit if request is None else request) or 0, limit or 0


def _amount(container: pods.Container, resource: str, facts: PodFacts) -> int:
    """CPU in millicores, memory and ephemeral storage in bytes."""
    res = container.resources
    if resource.endswith(".ephemeral-storage"):
        request, limit = ephemeral_storage(facts.pod, container.name)
        if resource.startswith("requests."):
            return request
        return limit or facts.node_ephemeral_storage
    return {
        "limits.cpu": res.cpu_limit_milli or facts.node_cpu_milli,
        "requests.cpu": res.cpu_request_milli,
        "limits.memory": res.memory_limit or facts.node_memory,
        "requests.memory": res.memory_request,
    }[resource]


def _divisor(ref: Mapping[str, Any]) -> Decimal:
    raw = ref.get("divisor")
    try:
        divisor = quantities.parse_quantity(raw) if raw not in (None, "") else Decimal(0)
    except fields.ManifestError as exc:
        raise FieldError(f"resourceFieldRef: divisor: {exc.message}") from exc
    if divisor < 0:
        raise FieldError(f"resourceFieldRef: divisor {raw!r} must be positive")
    # An unset (zero) divisor means 1, as in the kubelet.
    return divisor or Decimal(1)


def resource_value(
    ref: Mapping[str, Any], facts: PodFacts, *, container: pods.Container | None = None
) -> str:
    """A resourceFieldRef, as the kubelet's ExtractContainerResourceValue: unset limits are the
    node's allocatable amount, values are divided by `divisor` and rounded up. Without a
    `containerName` the reference is to `container` (env vars name their own container)."""
    name = str(ref.get("containerName") or "")
    resource = str(ref.get("resource") or "")
    target = container if container is not None and not name else _find_container(facts.pod, name)
    if resource not in RESOURCES:
        raise FieldError(
            f'resourceFieldRef: unsupported resource "{resource}": use one of '
            + ", ".join(RESOURCES)
        )
    divisor = _divisor(ref)
    value = _amount(target, resource, facts)
    # CPU in millicores against the divisor's MilliValue, the others against its Value.
    unit = math.ceil(divisor * 1000) if resource.endswith(".cpu") else math.ceil(divisor)
    return str(-(-value // unit))
