"""The Node's own labels and registration taints (pure): `--node-labels` and
`--register-with-taints`, parsed and checked as the kubelet checks them.

Rules (the kubelet's `ValidateKubeletFlags` and `pkg/kubelet/apis/well_known_labels.go`):
- a label key is a qualified name and its value a label value;
- a key in the `kubernetes.io` or `k8s.io` namespaces (or a subdomain of them) is refused
  unless the kubelet may set it on its own Node: one of `KUBELET_LABELS`, or a key in (a
  subdomain of) `kubelet.kubernetes.io` or `node.kubernetes.io`. So
  `node-restriction.kubernetes.io/…`, which only administrators may set (NodeRestriction),
  and `node-role.kubernetes.io/…` are refused;
- a taint is `key=value:Effect` or `key:Effect`, Effect one of NoSchedule,
  PreferNoSchedule, NoExecute; its key a qualified name, its value a label value.

`NodeFlagError` (a ValueError) names the flag and the offending item.
"""

from __future__ import annotations

from nodelet.model.core import fields, names

Label = tuple[str, str]
Taint = tuple[str, str, str]  # (key, value, effect)

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Labels the kubelet may set on its own Node (kubeletapis.IsKubeletLabel).
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
})
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
_KUBERNETES_NAMESPACES = ("kubernetes.io", "k8s.io")


class NodeFlagError(ValueError):
    """A node label or taint the kubelet would refuse; the message names the flag and item."""


def _in_namespace(namespace: str, domains: tuple[str, ...]) -> bool:
    return any(namespace == d or namespace.endswith("." + d) for d in domains)


def is_kubelet_label(key: str) -> bool:
    """The kubelet may set `key` on its own Node (outside the Kubernetes namespaces, any key)."""
    namespace = key.rpartition("/")[0]
    if not _in_namespace(namespace, _KUBERNETES_NAMESPACES):
        return True
    return key in KUBELET_LABELS or _in_namespace(namespace, KUBELET_LABEL_NAMESPACES)


def parse_labels(text: str, flag: str = "--node-labels") -> tuple[Label, ...]:
    """`k=v,k2=v2` (the kubelet's --node-labels), each key and value checked."""
    labels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise NodeFlagError(f"{flag}: {item!r} is not KEY=VALUE")
        labels[key.strip()] = value.strip()
    check_labels(tuple(labels.items()), flag)
    return tuple(labels.items())


def check_labels(labels: tuple[Label, ...], flag: str = "--node-labels") -> None:
    """Every key a qualified name the kubelet may set, every value a label value."""
    refused = sorted(key for key, _ in labels if not is_kubelet_label(key))
    if refused:
        allowed = ", ".join(sorted(KUBELET_LABELS))
        raise NodeFlagError(
            f"{flag}: unknown 'kubernetes.io' or 'k8s.io' labels {', '.join(refused)}: labels "
            f"in these namespaces must be in (a subdomain of) "
            f"{' or '.join(KUBELET_LABEL_NAMESPACES)}, or one of {allowed}")
    for key, value in labels:
        _checked(flag, key, value)


def parse_taints(text: str, flag: str = "--register-with-taints") -> tuple[Taint, ...]:
    """`key=value:Effect,key:Effect` (the kubelet's --register-with-taints)."""
    return tuple(parse_taint(item, flag)
                 for item in filter(None, (part.strip() for part in text.split(","))))


def parse_taint(item: str, flag: str = "--register-with-taints") -> Taint:
    spec, sep, effect = item.rpartition(":")
    if not sep or not spec:
        raise NodeFlagError(f"{flag}: {item!r} is not KEY[=VALUE]:EFFECT")
    key, _, value = spec.partition("=")
    return check_taint(key, value, effect, flag)


def check_taint(key: str, value: str, effect: str, flag: str) -> Taint:
    if effect not in TAINT_EFFECTS:
        raise NodeFlagError(
            f"{flag}: taint {key!r} has effect {effect!r}: must be one of "
            f"{', '.join(TAINT_EFFECTS)}")
    _checked(flag, key, value)
    return key, value, effect


def _checked(flag: str, key: str, value: str) -> None:
    """`key` a qualified name and `value` a label value, else a NodeFlagError."""
    try:
        names.qualified_name(key, flag)
        names.label_value(value, flag, key=key)
    except fields.ManifestError as exc:
        raise NodeFlagError(f"{flag}: {exc.message}") from exc
