"""Manifests: parse YAML/JSON documents and validate them into typed pods, config maps, secrets.

Validation follows the API server for the fields nodelet uses, with strict field validation
(unknown fields are rejected, with a "did you mean" hint); the allowlists below hold every real
v1 field, also those nodelet ignores, so that real manifests are never rejected. Static pods get
the kubelet's conventions: name `<name>-<node name>`, UID = config hash, config annotations.

Exceptions (all carry `.path`, the field path such as `spec.containers[0].image`, and
`.message`, which says what is wrong and what is expected)::

    ManifestError                 base class; also a ValueError
    ├── UnknownFieldError         a field that v1 does not have (strict mode)
    ├── FieldTypeError            a field of the wrong type (`command: "sleep"`)
    ├── InvalidValueError         a missing, malformed, out-of-range or duplicate value
    └── UnsupportedError          a kind, apiVersion or volume type nodelet does not run

`parse_documents` never raises for bad input: it returns `ManifestProblem`s next to the
`ParsedDocument`s, so one bad document does not hide the others.
"""

from __future__ import annotations

import base64
import binascii
import copy
import dataclasses
import difflib
import hashlib
import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any, TypeVar, cast

import yaml

from nodelet.model import pods, probes, status

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# Errors


class ManifestError(ValueError):
    """A manifest that cannot be run; `path` names the field, `message` says what to fix."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class UnknownFieldError(ManifestError):
    """A field that the v1 API does not define (rejected with strict field validation)."""


class FieldTypeError(ManifestError):
    """A field whose value has the wrong type."""


class InvalidValueError(ManifestError):
    """A missing, malformed, out-of-range or duplicate value."""


class UnsupportedError(ManifestError):
    """Valid Kubernetes, but not something nodelet runs (other kinds, some volume types)."""


# ---------------------------------------------------------------------------------------------
# Documents


@dataclass(frozen=True)
class ParsedDocument:
    """One non-empty document of a manifest file. `line` is where it starts (1-based)."""

    filename: str
    index: int
    obj: Mapping[str, Any]
    line: int = 1

    @property
    def kind(self) -> str:
        kind = self.obj.get("kind")
        return kind if isinstance(kind, str) else ""


@dataclass(frozen=True)
class ManifestProblem:
    """Why a document of a manifest file was not used. `index` is 0-based, `line` 1-based."""

    filename: str
    index: int
    message: str
    line: int | None = None
    path: str = ""

    @classmethod
    def from_error(cls, document: ParsedDocument, error: ManifestError) -> ManifestProblem:
        return cls(document.filename, document.index, str(error), document.line, error.path)

    def __str__(self) -> str:
        where = f"{self.filename}:{self.line}" if self.line else self.filename
        return f"{where}: document {self.index}: {self.message}"


class _Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps stay strings, and duplicate keys are errors
    (the API server's strict field validation rejects them; PyYAML would keep the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"duplicate key {key!r}",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen.add(key)
        return super().construct_mapping(node, deep)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_DOC_START = re.compile(r"^---(?:[ \t].*)?$")


def _split_yaml(text: str) -> list[tuple[int, str]]:
    """Documents as (first line 0-based, text), split on `---` lines like the kubelet does."""
    chunks: list[tuple[int, list[str]]] = [(0, [])]
    for number, line in enumerate(text.splitlines()):
        if _DOC_START.match(line):
            chunks.append((number, []))
        chunks[-1][1].append(line)
    first = chunks[0][1]
    # The text before the first `---` is a document only if it has content.
    if len(chunks) > 1 and all(
        not ln.strip() or ln.lstrip().startswith(("#", "%")) for ln in first
    ):
        chunks.pop(0)
    return [(start, "\n".join(lines)) for start, lines in chunks]


def _yaml_problem(filename: str, index: int, start: int, exc: yaml.YAMLError) -> ManifestProblem:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"invalid YAML: {problem}" + (f" ({context})" if context else "")
    line = start + mark.line + 1 if mark is not None else None
    return ManifestProblem(filename, index, message, line)


def _document(filename: str, index: int, line: int, value: Any) -> ParsedDocument | ManifestProblem:
    if isinstance(value, Mapping):
        return ParsedDocument(filename, index, value, line)
    message = (
        "expected a Kubernetes object (a mapping with apiVersion, kind, metadata...), "
        f"got {_describe(value)}"
    )
    return ManifestProblem(filename, index, message, line)


def parse_documents(text: str, *, filename: str) -> list[ParsedDocument | ManifestProblem]:
    """All documents of a manifest file: `.json` files hold one JSON object, anything else is
    YAML with documents separated by `---` lines. Empty documents are skipped (their index is
    not reused); a syntax error becomes a problem with its line and spoils only its document."""
    if filename.endswith(".json"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return [ManifestProblem(filename, 0, f"invalid JSON: {exc.msg}", exc.lineno)]
        return [] if value is None else [_document(filename, 0, 1, value)]
    out: list[ParsedDocument | ManifestProblem] = []
    for index, (start, chunk) in enumerate(_split_yaml(text)):
        try:
            value = yaml.load(chunk, Loader=_Loader)  # a SafeLoader subclass
        except yaml.YAMLError as exc:
            out.append(_yaml_problem(filename, index, start, exc))
            continue
        if value is not None:
            out.append(_document(filename, index, start + 1, value))
    return out


# ---------------------------------------------------------------------------------------------
# Field access with type checks


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown)})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_error(path: str, expected: str, value: Any) -> FieldTypeError:
    hint = ""
    if expected == "a string" and isinstance(value, bool | int | float):
        hint = "; quote it (YAML reads yes/no/on/off/true/false and numbers as non-strings)"
    return FieldTypeError(f"expected {expected}, got {_describe(value)}{hint}", path=path)


def _str(obj: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise InvalidValueError("required: a non-empty string", path=_join(path, key))
        return ""
    if not isinstance(value, str):
        raise _type_error(_join(path, key), "a string", value)
    return value


def _int(
    obj: Mapping[str, Any],
    key: str,
    path: str,
    *,
    low: int | None = None,
    high: int | None = None,
) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(_join(path, key), "an integer", value)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidValueError(f"{value} is out of range: must be {bounds}", path=_join(path, key))
    return value


def _bool(obj: Mapping[str, Any], key: str, path: str) -> bool:
    value = obj.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _type_error(_join(path, key), "a boolean (true or false)", value)
    return value


def _map(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _type_error(_join(path, key), "a mapping", value)
    return value


def _list(obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise _type_error(_join(path, key), "a list", value)
    return list(value)


def _items(
    obj: Mapping[str, Any], key: str, path: str, parse: Callable[[Mapping[str, Any], str], T]
) -> tuple[T, ...]:
    """Parse a list of objects, each at `path.key[i]`."""
    out = []
    for i, item in enumerate(_list(obj, key, path)):
        item_path = f"{_join(path, key)}[{i}]"
        if not isinstance(item, Mapping):
            raise _type_error(item_path, "a mapping", item)
        out.append(parse(item, item_path))
    return tuple(out)


def _str_list(obj: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    values = obj.get(key)
    if values is None:
        return ()
    if not isinstance(values, list | tuple):
        raise _type_error(_join(path, key), "a list of strings", values)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise _type_error(f"{_join(path, key)}[{i}]", "a string", value)
    return tuple(values)


def _str_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    out = {}
    for name, value in _map(obj, key, path).items():
        if not isinstance(value, str):
            raise _type_error(f"{_join(path, key)}.{name}", "a string", value)
        out[str(name)] = value
    return out


def _one_of(value: str, allowed: Sequence[str], path: str) -> str:
    if value not in allowed:
        choices = ", ".join(allowed)
        raise InvalidValueError(f'unsupported value "{value}": must be one of {choices}', path=path)
    return value


def _check_fields(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key in allowed:
            continue
        full = _join(path, str(key))
        hint = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
        suggestion = f'; did you mean "{_join(path, hint[0])}"?' if hint else ""
        raise UnknownFieldError(f'unknown field "{full}"{suggestion}', path=full)


# ---------------------------------------------------------------------------------------------
# Names (k8s.io/apimachinery/pkg/util/validation)

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(f"^{_LABEL}$")
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _dns_label(value: str, path: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise InvalidValueError(
            f'"{value}" is not a valid DNS-1123 label: at most 63 lowercase letters, digits '
            "and '-', starting and ending with a letter or digit",
            path=path,
        )
    return value


def _dns_subdomain(value: str, path: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise InvalidValueError(
            f'"{value}" is not a valid DNS-1123 subdomain: at most 253 lowercase letters, '
            "digits, '-' and '.', starting and ending with a letter or digit",
            path=path,
        )
    return value


def _qualified_name(value: str, path: str) -> None:
    prefix, _, name = value.rpartition("/")
    if prefix:
        _dns_subdomain(prefix, path)
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise InvalidValueError(
            f'"{value}" is not a valid qualified name: an optional DNS subdomain prefix and "/", '
            "then at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric",
            path=path,
        )


def _labels(obj: Mapping[str, Any], path: str) -> dict[str, str]:
    labels = _str_map(obj, "labels", path)
    for key, value in labels.items():
        _qualified_name(key, f"{path}.labels")
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise InvalidValueError(
                f'"{value}" is not a valid label value: at most 63 letters, digits, '
                "'-', '_' or '.', starting and ending alphanumeric",
                path=f"{path}.labels.{key}",
            )
    return labels


# ---------------------------------------------------------------------------------------------
# Quantities (k8s.io/apimachinery/pkg/api/resource)

_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{s: Decimal(1024**p) for p, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
}


def parse_quantity(value: Any, *, path: str = "") -> Decimal:
    """A Kubernetes quantity ("100m", "0.5", "128Mi", "1G", "1e3" or a plain number)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _type_error(path, 'a quantity such as "100m", "0.5", "128Mi"', value)
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise InvalidValueError(
            f'"{value}" is not a quantity: a number with an optional suffix '
            "(n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent like e3)",
            path=path,
        )
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E") and suffix not in _SUFFIXES:
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation as exc:
        raise InvalidValueError(f'"{value}" is not a quantity', path=path) from exc


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def cpu_millis(value: Any, *, path: str = "") -> int:
    """A CPU quantity in millicores, rounded up like Quantity.MilliValue ("0.5" → 500)."""
    return _ceil(parse_quantity(value, path=path) * 1000)


def memory_bytes(value: Any, *, path: str = "") -> int:
    """A memory quantity in bytes, rounded up like Quantity.Value ("128Mi" → 134217728)."""
    return _ceil(parse_quantity(value, path=path))


# ---------------------------------------------------------------------------------------------
# The v1 fields (k8s.io/api/core/v1 types.go), including those nodelet ignores.

_TOP_FIELDS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
        "annotations", "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip
_SPEC_FIELDS = frozenset(
    {
        "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
        "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
        "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
        "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
        "imagePullSecrets", "hostname", "subdomain", "affinity", "schedulerName", "tolerations",
        "hostAliases", "priorityClassName", "priority", "dnsConfig", "readinessGates",
        "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
        "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
        "resourceClaims", "resources", "hostnameOverride", "workloadRef",
    }
)  # fmt: skip
_CONTAINER_FIELDS = frozenset(
    {
        "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env",
        "resources", "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts",
        "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
        "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
        "securityContext", "stdin", "stdinOnce", "tty",
    }
)  # fmt: skip
_PORT_FIELDS = frozenset({"name", "hostPort", "containerPort", "protocol", "hostIP"})
_ENV_FIELDS = frozenset({"name", "value", "valueFrom"})
_MOUNT_FIELDS = frozenset(
    {
        "name", "readOnly", "recursiveReadOnly", "mountPath", "subPath", "mountPropagation",
        "subPathExpr",
    }
)  # fmt: skip
_RESOURCES_FIELDS = frozenset({"limits", "requests", "claims"})
_SUPPORTED_VOLUMES = ("emptyDir", "hostPath", "configMap", "secret", "projected", "downwardAPI")
_VOLUME_SOURCES = frozenset(
    {
        *_SUPPORTED_VOLUMES, "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs",
        "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs",
        "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
        "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral",
        "image",
    }
)  # fmt: skip
_CONFIGMAP_FIELDS = frozenset({"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"})
_SECRET_FIELDS = frozenset(
    {"apiVersion", "kind", "metadata", "data", "stringData", "type", "immutable"}
)

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")

# Sub-objects that are type-checked only (a mapping or a list); nodelet does not read them.
_SPEC_MAPPINGS = ("securityContext", "affinity", "dnsConfig", "os", "overhead", "resources")
_SPEC_LISTS = (
    "ephemeralContainers", "imagePullSecrets", "tolerations", "hostAliases",
    "topologySpreadConstraints", "schedulingGates", "resourceClaims",
)  # fmt: skip
_SPEC_STRINGS = (
    "serviceAccountName", "serviceAccount", "nodeName", "schedulerName", "priorityClassName",
    "runtimeClassName", "preemptionPolicy",
)  # fmt: skip
_SPEC_BOOLS = (
    "hostPID", "hostIPC", "shareProcessNamespace", "automountServiceAccountToken",
    "enableServiceLinks", "setHostnameAsFQDN", "hostUsers",
)  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Objects: header and metadata


def _header(obj: Any, kinds: Sequence[str], allowed: frozenset[str] | None) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise _type_error("", "a Kubernetes object (a mapping)", obj)
    api_version, kind = _str(obj, "apiVersion", ""), _str(obj, "kind", "")
    if not kind:
        raise InvalidValueError(f"required: one of {', '.join(kinds)}", path="kind")
    if kind not in kinds:
        raise UnsupportedError(
            f'unsupported kind "{kind}": nodelet runs {", ".join(kinds)} objects', path="kind"
        )
    if api_version != "v1":
        got = f'"{api_version}"' if api_version else "nothing"
        raise UnsupportedError(f'expected "v1" for kind {kind}, got {got}', path="apiVersion")
    if allowed is not None:
        _check_fields(obj, allowed, "")
    return obj


@dataclass(frozen=True)
class _Meta:
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None
    deletion_grace_period_seconds: int | None


def _time(meta: Mapping[str, Any], key: str) -> datetime | None:
    value = _str(meta, key, "metadata")
    try:
        return status.parse_time(value)
    except ValueError as exc:
        raise InvalidValueError(
            f'"{value}" is not an RFC 3339 time such as "2024-05-01T12:00:00Z"',
            path=f"metadata.{key}",
        ) from exc


def _metadata(obj: Mapping[str, Any], strict: bool) -> _Meta:
    if obj.get("metadata") is None:
        raise InvalidValueError("required: a mapping with at least a name", path="metadata")
    meta = _map(obj, "metadata", "")
    if strict:
        _check_fields(meta, _META_FIELDS, "metadata")
    if not meta.get("name") and meta.get("generateName"):
        raise UnsupportedError(
            "required: generateName is not supported here, give the object a name",
            path="metadata.name",
        )
    namespace = _str(meta, "namespace", "metadata") or "default"
    return _Meta(
        name=_dns_subdomain(_str(meta, "name", "metadata", required=True), "metadata.name"),
        namespace=_dns_label(namespace, "metadata.namespace"),
        uid=_str(meta, "uid", "metadata"),
        labels=_labels(meta, "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        creation_timestamp=_time(meta, "creationTimestamp"),
        deletion_timestamp=_time(meta, "deletionTimestamp"),
        deletion_grace_period_seconds=_int(meta, "deletionGracePeriodSeconds", "metadata", low=0),
    )


# ---------------------------------------------------------------------------------------------
# ConfigMap and Secret


@dataclass(frozen=True)
class ConfigMap:
    name: str
    namespace: str
    data: Mapping[str, str] = field(default_factory=dict)
    binary_data: Mapping[str, bytes] = field(default_factory=dict)
    immutable: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Secret:
    """`data` holds the decoded bytes; `stringData` entries are merged in and win."""

    name: str
    namespace: str
    type: str = "Opaque"
    data: Mapping[str, bytes] = field(default_factory=dict)
    immutable: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)


def _config_key(key: str, path: str) -> None:
    if len(key) > 253 or key in (".", "..") or not _CONFIG_KEY.match(key):
        raise InvalidValueError(
            f'"{key}" is not a valid key: letters, digits, "-", "_" and "." (at most 253)',
            path=path,
        )


def _base64_map(obj: Mapping[str, Any], key: str) -> dict[str, bytes]:
    out = {}
    for name, value in _str_map(obj, key, "").items():
        _config_key(name, f"{key}.{name}")
        try:
            out[name] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidValueError(
                "not valid base64 (use stringData for plain text)", path=f"{key}.{name}"
            ) from exc
    return out


def _config_map(obj: Mapping[str, Any], meta: _Meta) -> ConfigMap:
    data = _str_map(obj, "data", "")
    for name in data:
        _config_key(name, f"data.{name}")
    binary = _base64_map(obj, "binaryData")
    for name in data.keys() & binary.keys():
        raise InvalidValueError("duplicate key: it is also in data", path=f"binaryData.{name}")
    immutable = _bool(obj, "immutable", "")
    return ConfigMap(meta.name, meta.namespace, data, binary, immutable, meta.labels)


def _secret(obj: Mapping[str, Any], meta: _Meta) -> Secret:
    data = _base64_map(obj, "data")
    for name, value in _str_map(obj, "stringData", "").items():
        _config_key(name, f"stringData.{name}")
        data[name] = value.encode()
    type_ = _str(obj, "type", "") or "Opaque"
    immutable = _bool(obj, "immutable", "")
    return Secret(meta.name, meta.namespace, type_, data, immutable, meta.labels)


def config_object_from_object(obj: Mapping[str, Any], *, strict: bool = True) -> ConfigMap | Secret:
    """A v1 ConfigMap or Secret, validated."""
    _header(obj, ("ConfigMap", "Secret"), None)
    is_map = obj["kind"] == "ConfigMap"
    if strict:
        _check_fields(obj, _CONFIGMAP_FIELDS if is_map else _SECRET_FIELDS, "")
    meta = _metadata(obj, strict)
    return _config_map(obj, meta) if is_map else _secret(obj, meta)


# ---------------------------------------------------------------------------------------------
# Containers


def default_pull_policy(image: str) -> pods.PullPolicy:
    """Always for ":latest" or untagged images, IfNotPresent otherwise (a tag or a digest)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    if tag == "latest" or (not tag and not digest):
        return "Always"
    return "IfNotPresent"


def _port(obj: Mapping[str, Any], path: str, strict: bool) -> pods.ContainerPort:
    if strict:
        _check_fields(obj, _PORT_FIELDS, path)
    if obj.get("containerPort") is None:
        raise InvalidValueError("required: a port number 1-65535", path=f"{path}.containerPort")
    number = cast(int, _int(obj, "containerPort", path, low=1, high=65535))
    name = _str(obj, "name", path)
    if name and (len(name) > 15 or not _DNS_LABEL.match(name) or "--" in name):
        raise InvalidValueError(
            f'"{name}" is not a valid port name: at most 15 lowercase letters, digits and '
            "single '-', starting and ending alphanumeric",
            path=f"{path}.name",
        )
    return pods.ContainerPort(
        container_port=number,
        protocol=_one_of(_str(obj, "protocol", path) or "TCP", _PROTOCOLS, f"{path}.protocol"),
        host_port=_int(obj, "hostPort", path, low=0, high=65535) or 0,
        host_ip=_str(obj, "hostIP", path),
        name=name,
    )


def _env(obj: Mapping[str, Any], path: str, strict: bool) -> pods.EnvVar:
    if strict:
        _check_fields(obj, _ENV_FIELDS, path)
    name = _str(obj, "name", path, required=True)
    if "=" in name:
        raise InvalidValueError(
            f'"{name}" is not a valid variable name: no "="', path=f"{path}.name"
        )
    value = _str(obj, "value", path)
    value_from = _map(obj, "valueFrom", path)
    if value and value_from:
        raise InvalidValueError(
            "may not be specified when `value` is not empty", path=f"{path}.valueFrom"
        )
    return pods.EnvVar(name=name, value=value, value_from=value_from or None)


def _mount(obj: Mapping[str, Any], path: str, strict: bool) -> pods.VolumeMount:
    if strict:
        _check_fields(obj, _MOUNT_FIELDS, path)
    return pods.VolumeMount(
        name=_str(obj, "name", path, required=True),
        mount_path=_str(obj, "mountPath", path, required=True),
        read_only=_bool(obj, "readOnly", path),
        sub_path=_str(obj, "subPath", path),
    )


def _quantities(obj: Mapping[str, Any], key: str, path: str) -> dict[str, Decimal]:
    out = {}
    for name, value in _map(obj, key, path).items():
        item_path = f"{path}.{key}.{name}"
        out[str(name)] = quantity = parse_quantity(value, path=item_path)
        if quantity < 0:
            raise InvalidValueError("must be greater than or equal to 0", path=item_path)
    return out


def _resources(obj: Mapping[str, Any], path: str, strict: bool) -> pods.Resources:
    res = _map(obj, "resources", path)
    path = f"{path}.resources"
    if strict:
        _check_fields(res, _RESOURCES_FIELDS, path)
    limits = _quantities(res, "limits", path)
    # The API server defaults a missing request to its limit.
    requests = {**limits, **_quantities(res, "requests", path)}
    for name, request in requests.items():
        if name in limits and request > limits[name]:
            raise InvalidValueError(
                f"must be less than or equal to the {name} limit", path=f"{path}.requests.{name}"
            )
    _list(res, "claims", path)

    def milli(values: Mapping[str, Decimal]) -> int:
        return _ceil(values["cpu"] * 1000) if "cpu" in values else 0

    return pods.Resources(
        cpu_request_milli=milli(requests),
        cpu_limit_milli=milli(limits),
        memory_request=_ceil(requests.get("memory", Decimal(0))),
        memory_limit=_ceil(limits.get("memory", Decimal(0))),
    )


def _probe(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    return _map(obj, key, path) or None


def _container_restart_policy(obj: Mapping[str, Any], path: str, init: bool) -> str:
    value = _str(obj, "restartPolicy", path)
    if not value:
        return ""
    if init and value != "Always":
        raise InvalidValueError(
            f'unsupported value "{value}": init containers may only set "Always" (a sidecar)',
            path=f"{path}.restartPolicy",
        )
    return _one_of(value, _RESTART_POLICIES, f"{path}.restartPolicy")


def _container(obj: Mapping[str, Any], path: str, *, init: bool, strict: bool) -> pods.Container:
    if strict:
        _check_fields(obj, _CONTAINER_FIELDS, path)
    image = _str(obj, "image", path, required=True)
    policy = _str(obj, "imagePullPolicy", path) or default_pull_policy(image)
    message_policy = _str(obj, "terminationMessagePolicy", path) or "File"
    _one_of(message_policy, _MESSAGE_POLICIES, f"{path}.terminationMessagePolicy")
    for key in ("envFrom", "volumeDevices", "resizePolicy", "restartPolicyRules"):
        _list(obj, key, path)
    for key in ("stdin", "stdinOnce", "tty"):
        _bool(obj, key, path)
    _map(obj, "securityContext", path)
    container = pods.Container(
        name=_dns_label(_str(obj, "name", path, required=True), f"{path}.name"),
        image=image,
        image_pull_policy=cast(
            pods.PullPolicy, _one_of(policy, _PULL_POLICIES, f"{path}.imagePullPolicy")
        ),
        command=_str_list(obj, "command", path),
        args=_str_list(obj, "args", path),
        working_dir=_str(obj, "workingDir", path),
        env=_items(obj, "env", path, lambda item, p: _env(item, p, strict)),
        ports=_items(obj, "ports", path, lambda item, p: _port(item, p, strict)),
        volume_mounts=_items(obj, "volumeMounts", path, lambda item, p: _mount(item, p, strict)),
        resources=_resources(obj, path, strict),
        restart_policy=_container_restart_policy(obj, path, init),
        termination_message_path=_str(obj, "terminationMessagePath", path)
        or "/dev/termination-log",
        termination_message_policy=message_policy,
        readiness_probe=_probe(obj, "readinessProbe", path),
        liveness_probe=_probe(obj, "livenessProbe", path),
        startup_probe=_probe(obj, "startupProbe", path),
        lifecycle=_probe(obj, "lifecycle", path),
    )
    _check_probes(container, path, init=init)
    return container


def _check_probes(container: pods.Container, path: str, *, init: bool) -> None:
    """Probes are validated when the manifest is read, not when a prober first runs them."""
    try:
        parsed = probes.container_probes(container, path=path)
    except probes.ProbeError as exc:
        raise InvalidValueError(exc.message, path=exc.path) from exc
    has_probe = parsed.startup or parsed.liveness or parsed.readiness
    if init and has_probe and container.restart_policy != "Always":
        raise InvalidValueError("init containers may not have probes (only sidecars may)",
                                path=path)


def _containers(spec: Mapping[str, Any], key: str, *, strict: bool) -> tuple[pods.Container, ...]:
    init = key == "initContainers"
    return _items(
        spec, key, "spec", lambda item, path: _container(item, path, init=init, strict=strict)
    )


# ---------------------------------------------------------------------------------------------
# Volumes


def _volume_source(obj: Mapping[str, Any], path: str, strict: bool) -> str:
    keys = [str(k) for k in obj if k != "name"]
    if strict:
        _check_fields(obj, _VOLUME_SOURCES | {"name"}, path)
    given = [k for k in keys if k in _VOLUME_SOURCES and obj[k] is not None]
    if not given:
        nulls = [k for k in keys if k in _VOLUME_SOURCES]
        hint = f'; "{nulls[0]}" is null, write `{nulls[0]}: {{}}` for its defaults' if nulls else ""
        raise InvalidValueError(
            f"must specify a volume type (one of {', '.join(_SUPPORTED_VOLUMES)}){hint}", path=path
        )
    if len(given) > 1:
        raise InvalidValueError(
            f"may not specify more than 1 volume type (found {', '.join(given)})", path=path
        )
    if given[0] not in _SUPPORTED_VOLUMES:
        raise UnsupportedError(
            f'unsupported volume type "{given[0]}": nodelet supports '
            f"{', '.join(_SUPPORTED_VOLUMES)}",
            path=f"{path}.{given[0]}",
        )
    return given[0]


_REQUIRED_SOURCE_FIELDS = {"hostPath": "path", "configMap": "name", "secret": "secretName"}


def _volume(obj: Mapping[str, Any], path: str, strict: bool) -> pods.Volume:
    name = _dns_label(_str(obj, "name", path, required=True), f"{path}.name")
    source_type = _volume_source(obj, path, strict)
    source = _map(obj, source_type, path)
    source_path = f"{path}.{source_type}"
    required = _REQUIRED_SOURCE_FIELDS.get(source_type)
    if required:
        _str(source, required, source_path, required=True)
    if source_type == "projected":
        _list(source, "sources", source_path)
    return pods.Volume(name=name, source_type=source_type, source=source)


# ---------------------------------------------------------------------------------------------
# Pod spec


def _unique_names(spec: pods.PodSpec) -> None:
    seen: dict[str, str] = {}
    named = [("initContainers", c) for c in spec.init_containers]
    named += [("containers", c) for c in spec.containers]
    counters: dict[str, int] = {}
    for key, container in named:
        index = counters[key] = counters.get(key, -1) + 1
        path = f"spec.{key}[{index}].name"
        if container.name in seen:
            raise InvalidValueError(
                f'duplicate container name "{container.name}" (also {seen[container.name]}): '
                "names must be unique across initContainers and containers",
                path=path,
            )
        seen[container.name] = path


def _check_volumes(spec: pods.PodSpec) -> None:
    declared: dict[str, int] = {}
    for i, volume in enumerate(spec.volumes):
        if volume.name in declared:
            first = f"spec.volumes[{declared[volume.name]}]"
            raise InvalidValueError(
                f'duplicate volume name "{volume.name}" (also {first})',
                path=f"spec.volumes[{i}].name",
            )
        declared[volume.name] = i
    groups = (("initContainers", spec.init_containers), ("containers", spec.containers))
    for key, containers in groups:
        for i, container in enumerate(containers):
            _check_mounts(container, f"spec.{key}[{i}]", declared)


def _check_mounts(container: pods.Container, path: str, declared: Mapping[str, int]) -> None:
    paths: set[str] = set()
    for j, mount in enumerate(container.volume_mounts):
        mount_path = f"{path}.volumeMounts[{j}]"
        if mount.name not in declared:
            known = ", ".join(declared) or "none"
            raise InvalidValueError(
                f'volume "{mount.name}" is not declared in spec.volumes (declared: {known})',
                path=f"{mount_path}.name",
            )
        if mount.mount_path in paths:
            raise InvalidValueError(
                f'mountPath "{mount.mount_path}" must be unique', path=f"{mount_path}.mountPath"
            )
        paths.add(mount.mount_path)


def _check_host_ports(spec: pods.PodSpec) -> None:
    """With hostNetwork the container port is the host port: they must agree."""
    if not spec.host_network:
        return
    for i, container in enumerate(spec.containers):
        for j, port in enumerate(container.ports):
            if port.host_port and port.host_port != port.container_port:
                raise InvalidValueError(
                    "must match containerPort when hostNetwork is true",
                    path=f"spec.containers[{i}].ports[{j}].hostPort",
                )


def _dns_config(spec: Mapping[str, Any], policy: str) -> pods.PodDNSConfig | None:
    raw = _map(spec, "dnsConfig", "spec")
    if policy == "None" and not raw.get("nameservers"):
        raise InvalidValueError(
            'required when dnsPolicy is "None": at least one nameserver', path="spec.dnsConfig"
        )
    if not raw:
        return None

    def option(item: Mapping[str, Any], path: str) -> str:
        name = _str(item, "name", path, required=True)
        value = _str(item, "value", path)
        return f"{name}:{value}" if value else name

    return pods.PodDNSConfig(
        nameservers=_str_list(raw, "nameservers", "spec.dnsConfig"),
        searches=_str_list(raw, "searches", "spec.dnsConfig"),
        options=_items(raw, "options", "spec.dnsConfig", option),
    )


def _readiness_gate(item: Mapping[str, Any], path: str) -> str:
    gate = _str(item, "conditionType", path, required=True)
    _qualified_name(gate, f"{path}.conditionType")
    return gate


def _type_only(spec: Mapping[str, Any]) -> None:
    """Fields nodelet does not read, checked for their type as the API server would."""
    for key in _SPEC_MAPPINGS:
        _map(spec, key, "spec")
    for key in _SPEC_LISTS:
        _list(spec, key, "spec")
    for key in _SPEC_STRINGS:
        _str(spec, key, "spec")
    for key in _SPEC_BOOLS:
        _bool(spec, key, "spec")
    _str_map(spec, "nodeSelector", "spec")
    _int(spec, "priority", "spec")


def _pod_spec(obj: Mapping[str, Any], *, strict: bool) -> pods.PodSpec:
    if obj.get("spec") is None:
        raise InvalidValueError("required: a mapping with at least one container", path="spec")
    spec = _map(obj, "spec", "")
    if strict:
        _check_fields(spec, _SPEC_FIELDS, "spec")
    _type_only(spec)
    containers = _containers(spec, "containers", strict=strict)
    if not containers:
        raise InvalidValueError("required: at least one container", path="spec.containers")
    restart = _str(spec, "restartPolicy", "spec") or "Always"
    dns_policy = _one_of(
        _str(spec, "dnsPolicy", "spec") or "ClusterFirst", _DNS_POLICIES, "spec.dnsPolicy"
    )
    hostname = _str(spec, "hostname", "spec")
    subdomain = _str(spec, "subdomain", "spec")
    grace = _int(spec, "terminationGracePeriodSeconds", "spec", low=0)
    return pods.PodSpec(
        containers=containers,
        init_containers=_containers(spec, "initContainers", strict=strict),
        volumes=_items(spec, "volumes", "spec", lambda v, p: _volume(v, p, strict)),
        restart_policy=cast(
            pods.RestartPolicy, _one_of(restart, _RESTART_POLICIES, "spec.restartPolicy")
        ),
        host_network=_bool(spec, "hostNetwork", "spec"),
        hostname=hostname and _dns_label(hostname, "spec.hostname"),
        subdomain=subdomain and _dns_label(subdomain, "spec.subdomain"),
        dns_policy=dns_policy,
        dns_config=_dns_config(spec, dns_policy),
        termination_grace_period_seconds=30 if grace is None else grace,
        active_deadline_seconds=_int(spec, "activeDeadlineSeconds", "spec", low=1),
        readiness_gates=_items(spec, "readinessGates", "spec", _readiness_gate),
        node_name=_str(spec, "nodeName", "spec"),
        runtime_class_name=_str(spec, "runtimeClassName", "spec"),
    )


def _validate_spec(spec: pods.PodSpec) -> None:
    _unique_names(spec)
    _check_volumes(spec)
    _check_host_ports(spec)


# ---------------------------------------------------------------------------------------------
# The defaulted v1 object (what the API server and the kubelet would hold)


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


_SPEC_DEFAULTS: Mapping[str, Any] = {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "terminationGracePeriodSeconds": 30,
    "schedulerName": "default-scheduler",
    "enableServiceLinks": True,
    "priority": 0,
    "securityContext": {},
    "preemptionPolicy": "PreemptLowerPriority",
}


def _defaulted(obj: Mapping[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(json.dumps(obj, default=str))
    spec = raw["spec"]
    for key, value in _SPEC_DEFAULTS.items():
        if spec.get(key) is None:
            spec[key] = copy.deepcopy(value)
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            _default_container(container, bool(spec.get("hostNetwork")))
    for volume in spec.get("volumes") or ():
        _default_volume(volume)
    return raw


# ---------------------------------------------------------------------------------------------
# Pods


def config_hash(obj: Mapping[str, Any], *, node_name: str, source: str) -> str:
    """The static pod's config hash and UID: md5 of the object as written, plus where it runs
    and where it came from (as the kubelet's applyDefaults). Never depends on config.seen."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    hasher = hashlib.md5(canonical.encode(), usedforsecurity=False)
    hasher.update(f"host:{node_name}".encode())
    hasher.update(f"file:{source}".encode())
    return hasher.hexdigest()


def pod_from_object(
    obj: Mapping[str, Any], *, node_name: str, source: str = "file", strict: bool = True
) -> pods.Pod:
    """A validated pod from a v1 Pod object; raises ManifestError.

    With `source` other than "api" the object is a static pod: its name gets `-<node_name>`,
    its UID is the config hash (unless it has one) and `spec.nodeName` is this node. Every
    source gets the `kubernetes.io/config.source` annotation; `config.seen` is the caller's
    (it must not change the hash). `Pod.raw` is the defaulted v1 object.
    """
    _header(obj, ("Pod",), _TOP_FIELDS if strict else None)
    meta = _metadata(obj, strict)
    spec = _pod_spec(obj, strict=strict)
    _validate_spec(spec)
    static = source != "api"
    annotations = {**meta.annotations, pods.ANNOTATION_CONFIG_SOURCE: source}
    name, uid = meta.name, meta.uid
    if static:
        uid = uid or config_hash(obj, node_name=node_name, source=source)
        # The kubelet's generatePodName lowercases the node name.
        name = _dns_subdomain(f"{meta.name}-{node_name.lower()}", "metadata.name")
        annotations[pods.ANNOTATION_CONFIG_HASH] = uid
    elif not uid:
        raise InvalidValueError("required for pods from the API server", path="metadata.uid")
    node = node_name if static else spec.node_name
    raw = _defaulted(obj)
    raw_meta = raw.setdefault("metadata", {})
    raw_meta.update(name=name, namespace=meta.namespace, uid=uid, annotations=annotations)
    raw["spec"]["nodeName"] = node
    return pods.Pod(
        uid=pods.PodUID(uid),
        name=name,
        namespace=meta.namespace,
        spec=dataclasses.replace(spec, node_name=node),
        labels=meta.labels,
        annotations=annotations,
        creation_timestamp=meta.creation_timestamp,
        deletion_timestamp=meta.deletion_timestamp,
        deletion_grace_period_seconds=meta.deletion_grace_period_seconds,
        raw=raw,
        source=source,
    )


def load_object(
    obj: Mapping[str, Any], *, node_name: str, source: str = "file", strict: bool = True
) -> pods.Pod | ConfigMap | Secret:
    """A Pod, ConfigMap or Secret from a parsed document; any other kind is an error."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if kind in ("ConfigMap", "Secret"):
        return config_object_from_object(obj, strict=strict)
    if kind != "Pod":
        _header(obj, ("Pod", "ConfigMap", "Secret"), None)
    return pod_from_object(obj, node_name=node_name, source=source, strict=strict)
