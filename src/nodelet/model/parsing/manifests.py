"""Manifests: parse YAML/JSON documents and validate them into typed pods, config maps, secrets.

Validation follows the API server for the fields nodelet uses, with strict field validation
(unknown fields are rejected, with a "did you mean" hint); the allowlists (`apifields`) hold
every real v1 field, also those nodelet ignores, so that real manifests are never rejected.
Static pods get the kubelet's conventions: name `<name>-<node name>`, UID = config hash,
config annotations.

This module is the public API; the work is done by `fields` (typed field access and the
exception tree), `names` (DNS-1123 and label checks), `quantities`, `objectmeta` (apiVersion,
kind, metadata), `configobjects` (ConfigMap, Secret), `containerspecs` and `podspecs` (the pod
spec) and `defaulting` (the defaulted v1 object in `Pod.raw`).

Exceptions (all carry `.path`, the field path such as `spec.containers[0].image`, and
`.message`, which says what is wrong and what is expected)::

    ManifestError                 base class; also a ValueError
    ├── UnknownFieldError         a field that v1 does not have (strict mode)
    ├── FieldTypeError            a field of the wrong type (`command: "sleep"`)
    ├── InvalidValueError         a missing, malformed, out-of-range or duplicate value
    └── UnsupportedError          a kind, apiVersion or volume type nodelet does not run

`parse_documents` never raises for bad input: it returns `ManifestProblem`s next to the
`ParsedDocument`s, so one bad document does not hide the others. It bounds what it reads
(`inputlimits`): nesting depth, and the nodes YAML aliases may add.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from nodelet import settings
from nodelet.model.core import fields, names, pods

# Re-exported: callers and tests use these names from `manifests`, where they are documented.
from nodelet.model.core.configs import ConfigMap as ConfigMap
from nodelet.model.core.configs import Secret as Secret
from nodelet.model.core.fields import FieldTypeError as FieldTypeError
from nodelet.model.core.fields import InvalidValueError as InvalidValueError
from nodelet.model.core.fields import ManifestError as ManifestError
from nodelet.model.core.fields import UnknownFieldError as UnknownFieldError
from nodelet.model.core.fields import UnsupportedError as UnsupportedError
from nodelet.model.core.quantities import cpu_millis as cpu_millis
from nodelet.model.core.quantities import memory_bytes as memory_bytes
from nodelet.model.core.quantities import parse_quantity as parse_quantity
from nodelet.model.parsing import (
    apifields,
    defaulting,
    inputlimits,
    objectmeta,
    podfields,
    podspecs,
)
from nodelet.model.parsing.configobjects import (
    config_object_from_object as config_object_from_object,
)
from nodelet.model.parsing.defaulting import default_pull_policy as default_pull_policy

_SPEC_DEFAULTS = defaulting.SPEC_DEFAULTS

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


def _json_mapping(
    constructor: yaml.constructor.SafeConstructor, node: yaml.MappingNode, deep: bool
) -> dict[Hashable, Any]:
    """A mapping as the kubelet's YAML reader (sigs.k8s.io/yaml) makes it: YAML is turned into
    JSON, so a number or boolean key becomes its JSON text (`1: one` is the label "1") and any
    other key is refused. A key written twice is an error, as in the API server's strict field
    validation (PyYAML would keep the last); keys from a `<<` merge may be overridden."""
    seen: set[str] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        text = _key_text(constructor, key_node, node)
        if text in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"duplicate key {text!r}",
                key_node.start_mark)
        seen.add(text)
    constructor.flatten_mapping(node)
    return {_key_text(constructor, key_node, node): constructor.construct_object(value, deep)
            for key_node, value in node.value}


def _key_text(
    constructor: yaml.constructor.SafeConstructor, key_node: yaml.Node, node: yaml.MappingNode
) -> str:
    text = _json_key(constructor.construct_object(key_node, deep=True))
    if text is None:
        raise yaml.constructor.ConstructorError(
            "while constructing a mapping", node.start_mark,
            "unsupported key: keys must be strings, numbers or booleans", key_node.start_mark)
    return text


def _json_key(key: Any) -> str | None:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int) or (isinstance(key, float) and math.isfinite(key)):
        return json.dumps(key)
    return None


# YAML's 0x/0o/0b literals make integers of any size, and Python refuses to print one of more
# than 4300 decimal digits (sys.get_int_max_str_digits), which every error message would do. A
# decimal literal that long already fails to load, as it does in JSON; hex ones get the same.
_MAX_DIGITS = 4300
_TOO_LONG = 10**_MAX_DIGITS


def _construct_int(constructor: yaml.SafeLoader | yaml.CSafeLoader, node: yaml.ScalarNode) -> int:
    value = yaml.constructor.SafeConstructor.construct_yaml_int(constructor, node)
    if abs(value) >= _TOO_LONG:
        raise yaml.constructor.ConstructorError(
            None, None, f"integer out of range: more than {_MAX_DIGITS} digits",
            node.start_mark)
    return value


class _Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps stay strings, keys become JSON strings,
    duplicate keys are errors, integers are no longer than JSON's."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        return _json_mapping(self, node, deep)


class _FastLoader(yaml.CSafeLoader):
    """`_Loader` on libyaml's parser. Measured on a 9 MB file of 40,000 ConfigMaps: 5 s with
    the limit checks, against 23 s for the pure-Python loader."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        return _json_mapping(self, node, deep)


for _loader in (_Loader, _FastLoader):
    _loader.add_constructor("tag:yaml.org,2002:int", _construct_int)

_NO_TIMESTAMPS = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.yaml_implicit_resolvers = _NO_TIMESTAMPS
_FastLoader.yaml_implicit_resolvers = _NO_TIMESTAMPS
# Fast first; the pure-Python loader words errors better ("found undefined alias 'x'",
# "mapping values are not allowed here"), so a document libyaml rejects is read again by it.
_LOADERS: tuple[type[yaml.SafeLoader | yaml.CSafeLoader], ...] = (
    (_FastLoader, _Loader) if yaml.__with_libyaml__ else (_Loader,)
)

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
        f"got {fields.describe(value)}"
    )
    return ManifestProblem(filename, index, message, line)


def _load_yaml(
    chunk: str, loader: type[yaml.SafeLoader | yaml.CSafeLoader], *, max_depth: int,
    budget: inputlimits.AliasBudget,
) -> Any:
    """One document's value, after its events passed the limits (raises YAMLError)."""
    inputlimits.check_events(yaml.parse(chunk, Loader=loader), max_depth=max_depth,
                             budget=budget)
    return yaml.load(chunk, Loader=loader)  # both loaders are SafeLoader subclasses


def _yaml_document(
    filename: str, index: int, start: int, chunk: str, limits: settings.ManifestLimits,
    budget: inputlimits.AliasBudget,
) -> ParsedDocument | ManifestProblem | None:
    error: yaml.YAMLError | None = None
    for loader in _LOADERS:
        spent = budget.spent
        try:
            value = _load_yaml(chunk, loader, max_depth=limits.max_depth, budget=budget)
        except inputlimits.LimitExceeded as exc:
            line = start + exc.line + 1 if exc.line is not None else None
            return ManifestProblem(filename, index, f"refused: {exc.message}", line)
        except yaml.constructor.ConstructorError as exc:  # Python's words on either loader
            return _yaml_problem(filename, index, start, exc)
        except yaml.YAMLError as exc:
            budget.spent = spent  # the next loader reads the same document again
            error = exc
            continue
        except ValueError as exc:  # `!!int x`, or an integer of more than 4300 digits
            return ManifestProblem(filename, index, f"invalid YAML value: {_first(exc)}")
        return None if value is None else _document(filename, index, start + 1, value)
    assert error is not None
    return _yaml_problem(filename, index, start, error)


def _first(exc: Exception) -> str:
    """The first clause of a Python error (not its "use sys.set_int_max_str_digits()" hint)."""
    return str(exc).split(";")[0]


def _json_documents(
    text: str, filename: str, limits: settings.ManifestLimits
) -> list[ParsedDocument | ManifestProblem]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return [ManifestProblem(filename, 0, f"invalid JSON: {exc.msg}", exc.lineno)]
    except RecursionError:  # deeper than the json module goes: far beyond the limit
        return [_too_deep_json(filename, limits.max_depth)]
    except ValueError as exc:  # an integer of more than 4300 digits
        return [ManifestProblem(filename, 0, f"invalid JSON value: {_first(exc)}")]
    if inputlimits.json_too_deep(value, limits.max_depth):
        return [_too_deep_json(filename, limits.max_depth)]
    return [] if value is None else [_document(filename, 0, 1, value)]


def _too_deep_json(filename: str, limit: int) -> ManifestProblem:
    return ManifestProblem(filename, 0, f"refused: {inputlimits.too_deep(limit).message}")


def parse_documents(
    text: str, *, filename: str, limits: settings.ManifestLimits | None = None
) -> list[ParsedDocument | ManifestProblem]:
    """All documents of a manifest file: `.json` files hold one JSON object, anything else is
    YAML with documents separated by `---` lines. Empty documents are skipped (their index is
    not reused); a syntax error, or a document beyond `limits` (nesting depth, alias
    expansion; the file size is the caller's), becomes a problem with its line and spoils only
    its document. Never raises for bad input. `limits`: the defaults when None."""
    limits = limits or settings.ManifestLimits()
    if filename.endswith(".json"):
        return _json_documents(text, filename, limits)
    out: list[ParsedDocument | ManifestProblem] = []
    budget = inputlimits.AliasBudget(limits.max_alias_nodes)
    for index, (start, chunk) in enumerate(_split_yaml(text)):
        item = _yaml_document(filename, index, start, chunk, limits, budget)
        if item is not None:
            out.append(item)
    return out


# ---------------------------------------------------------------------------------------------
# Pods


def config_hash(obj: Mapping[str, Any], *, node_name: str, source: pods.Source) -> str:
    """The static pod's config hash and UID: md5 of the object as written, plus where it runs
    and where it came from (as the kubelet's applyDefaults). Never depends on config.seen."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    hasher = hashlib.md5(canonical.encode(), usedforsecurity=False)
    hasher.update(f"host:{node_name}".encode())
    hasher.update(f"file:{source}".encode())
    return hasher.hexdigest()


def pod_from_object(
    obj: Mapping[str, Any], *, node_name: str, source: pods.Source = "file", strict: bool = True
) -> pods.Pod:
    """A validated pod from a v1 Pod object; raises ManifestError.

    With `source` "file" the object is a static pod: its name gets `-<node_name>`,
    its UID is the config hash (unless it has one) and `spec.nodeName` is this node. Every
    source gets the `kubernetes.io/config.source` annotation; `config.seen` is the caller's
    (it must not change the hash). `Pod.raw` is the defaulted v1 object.
    """
    objectmeta.header(obj, ("Pod",), apifields.TOP_FIELDS if strict else None)
    meta = objectmeta.metadata(obj, strict)
    spec = podspecs.pod_spec(obj, strict=strict)
    podspecs.validate_spec(spec)
    static = source != "api"
    if static and spec.resource_claims:
        raise InvalidValueError(
            "a static pod cannot use ResourceClaims: its claims are allocated and reserved "
            "for it through the API server, which refuses a mirror pod that names any; run "
            "it as a pod of the API server instead", path="spec.resourceClaims")
    annotations = {**meta.annotations, pods.ANNOTATION_CONFIG_SOURCE: source}
    name, uid = meta.name, meta.uid
    if static:
        uid = uid or config_hash(obj, node_name=node_name, source=source)
        # The kubelet's generatePodName lowercases the node name.
        name = names.dns_subdomain(f"{meta.name}-{node_name.lower()}", "metadata.name")
        annotations[pods.ANNOTATION_CONFIG_HASH] = uid
    elif not uid:
        raise InvalidValueError("required for pods from the API server", path="metadata.uid")
    node = node_name if static else spec.node_name
    raw = defaulting.defaulted(obj, static=static)
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
        refused=() if strict else podfields.refused_fields(fields.mapping(obj, "spec", "")),
    )


def load_object(
    obj: Mapping[str, Any], *, node_name: str, source: pods.Source = "file", strict: bool = True
) -> pods.Pod | ConfigMap | Secret:
    """A Pod, ConfigMap or Secret from a parsed document; any other kind is an error."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if kind in ("ConfigMap", "Secret"):
        return config_object_from_object(obj, strict=strict)
    if kind != "Pod":
        objectmeta.header(obj, ("Pod", "ConfigMap", "Secret"), None)
    return pod_from_object(obj, node_name=node_name, source=source, strict=strict)
