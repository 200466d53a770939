"""A container's environment as the kubelet builds it (pure): `envFrom`, then `env`, `$(VAR)`
expansion, and the expansion of command, args and `subPathExpr` from the result.

The kubelet's makeEnvironmentVariables, step by step:

1. every `envFrom` source in order: each key of the ConfigMap's `data` (or the Secret's data),
   behind the prefix; keys that are not valid variable names are skipped and reported
   (`InvalidEnvironmentVariableNames`, see `SkippedKeys`); a later source wins;
2. every `env` entry in order: a `value` has its `$(VAR)` references expanded against the
   variables defined so far (envFrom and earlier entries); a `valueFrom` is resolved from its
   source and not expanded; an entry overrides anything defined before under its name;
3. a missing object or key marked `optional` leaves the variable out; one that is not stops the
   container from being created (`ConfigError`); a `fileKeyRef` takes its value from what was
   read of its env file (`envfiles`: the rules, `files`: what the caller read).

Objects are read through `lookup(kind, namespace, name)`, the volume manager's lookup (manifests
standalone, the API cache in cluster mode); one container reads each object once, so all its
variables see the same version.

Exceptions::

    ConfigError   the container's config cannot be generated (missing ConfigMap, Secret or key,
                  an env file or key, a downward API value that cannot be read, a bad
                  subPathExpr); `.message` is
                  the kubelet's text, the waiting message of CreateContainerConfigError (the
                  `Failed` event says `Error: <message>`)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import configs, downward, envfiles, pods
from nodelet.model.core import volumes as vol

# The kubelet's event for envFrom keys it skips.
INVALID_NAMES_REASON = "InvalidEnvironmentVariableNames"

# apimachinery's IsEnvVarName, which the kubelet applies to envFrom keys (1.6 to 1.33; 1.34
# dropped the check together with the API server's strict rule for `env` names).
_ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")

ObjectKey = tuple[str, str, str]  # (kind, namespace, name)


class ConfigError(errors.MessageError):
    """A container config that cannot be generated; `message` is the kubelet's text."""


@dataclass(frozen=True)
class SkippedKeys:
    """envFrom keys left out because they are not valid environment variable names."""

    kind: str  # "configMap" or "secret", as the kubelet's message says
    namespace: str
    name: str
    keys: tuple[str, ...]

    @property
    def message(self) -> str:
        """The kubelet's Warning event message (reason `InvalidEnvironmentVariableNames`)."""
        return (
            f"Keys [{', '.join(self.keys)}] from the EnvFrom {self.kind} "
            f"{self.namespace}/{self.name} were skipped since they are considered invalid "
            "environment variable names."
        )


@dataclass(frozen=True)
class Environment:
    """A container's variables, in the order they were first defined, and what was skipped."""

    variables: tuple[tuple[str, str], ...] = ()
    skipped: tuple[SkippedKeys, ...] = ()

    @property
    def mapping(self) -> dict[str, str]:
        return dict(self.variables)


# ---------------------------------------------------------------------------------------------
# $(VAR) expansion (k8s.io/kubernetes/third_party/forked/golang/expansion)


def expand(text: str, resolve: Callable[[str], str | None]) -> str:
    """`text` with its `$(NAME)` references replaced, as the kubelet's expansion.Expand: `$$` is
    a literal `$`; a reference `resolve` does not know (None), an unclosed `$(` and a `$` that
    starts no reference stay as written."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        close = text.find(")", i + 2) if following == "(" else -1
        if close >= 0:
            name = text[i + 2 : close]
            value = resolve(name)
            out.append(f"$({name})" if value is None else value)
            i = close + 1
        else:
            # `$$` is an escaped `$`; `$(` without `)` and `$x` are kept.
            out.append("$" if following == "$" else "$" + following)
            i += 2
    return "".join(out)


def expand_from(text: str, variables: Mapping[str, str]) -> str:
    """`expand` against `variables` (the kubelet's MappingFuncFor)."""
    return expand(text, variables.get)


def command_and_args(
    container: pods.Container, variables: Mapping[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The container's command and args with `$(VAR)` expanded from its environment."""
    return (
        tuple(expand_from(item, variables) for item in container.command),
        tuple(expand_from(item, variables) for item in container.args),
    )


def sub_path(mount: pods.VolumeMount, variables: Mapping[str, str]) -> str:
    """The mount's subPath: `subPathExpr` expanded from the container's environment (a reference
    to an unset or empty variable is an error, as in ExpandContainerVolumeMounts), then checked
    like a subPath (the kubelet's makeMounts)."""
    path = mount.sub_path
    if mount.sub_path_expr:
        missing: set[str] = set()

        def resolve(name: str) -> str:
            if not variables.get(name):
                missing.add(name)
            return variables.get(name, "")

        path = expand(mount.sub_path_expr, resolve)
        if missing:
            raise ConfigError(f"missing value for {', '.join(sorted(missing))}")
    if path.startswith("/"):
        raise ConfigError(f"error SubPath `{path}` must not be an absolute path")
    if ".." in PurePosixPath(path).parts:
        raise ConfigError(f"unable to provision SubPath `{path}`: must not contain '..'")
    return path


# ---------------------------------------------------------------------------------------------
# Names


def is_env_var_name(name: str) -> bool:
    """apimachinery's IsEnvVarName: what the kubelet keeps of envFrom keys."""
    return bool(_ENV_VAR_NAME.fullmatch(name)) and name not in (".", "..") and \
        not name.startswith("..")


# ---------------------------------------------------------------------------------------------
# Sources

_Reader = Callable[[str, str], configs.ConfigObject | None]


def _reader(lookup: vol.Lookup, namespace: str) -> _Reader:
    """`lookup` for one namespace, asking once per object (the kubelet's per-container cache)."""
    seen: dict[tuple[str, str], configs.ConfigObject | None] = {}

    def read(kind: str, name: str) -> configs.ConfigObject | None:
        if (kind, name) not in seen:
            found = lookup(kind, namespace, name)
            wanted = configs.ConfigMap if kind == "ConfigMap" else configs.Secret
            seen[(kind, name)] = found if isinstance(found, wanted) else None
        return seen[(kind, name)]

    return read


def _string_data(obj: configs.ConfigObject) -> dict[str, str]:
    """A ConfigMap's `data` (not binaryData, as the kubelet) or a Secret's decoded data."""
    if isinstance(obj, configs.ConfigMap):
        return dict(obj.data)
    # Go's string(bytes) keeps any bytes; CRI carries UTF-8, so invalid bytes are replaced.
    return {key: value.decode(errors="replace") for key, value in obj.data.items()}


def _env_from(
    source: pods.EnvFromSource, read: _Reader, namespace: str, out: dict[str, str]
) -> SkippedKeys | None:
    obj = read(source.kind, source.name)
    if obj is None:
        if source.optional:
            return None
        raise ConfigError(f'{source.kind.lower()} "{source.name}" not found')
    invalid = []
    for key, value in sorted(_string_data(obj).items()):
        name = source.prefix + key
        if is_env_var_name(name):
            out[name] = value
        else:
            invalid.append(name)
    if not invalid:
        return None
    kind = "configMap" if source.kind == "ConfigMap" else "secret"
    return SkippedKeys(kind, namespace, source.name, tuple(invalid))


def _key_ref(kind: str, ref: Mapping[str, Any], read: _Reader, namespace: str) -> str | None:
    """A configMapKeyRef or secretKeyRef; None when it is optional and missing."""
    name, key = str(ref.get("name") or ""), str(ref.get("key") or "")
    optional = bool(ref.get("optional"))
    obj = read(kind, name)
    if obj is None:
        if optional:
            return None
        raise ConfigError(f'{kind.lower()} "{name}" not found')
    values = _string_data(obj)
    if key not in values:
        if optional:
            return None
        raise ConfigError(f"couldn't find key {key} in {kind} {namespace}/{name}")
    return values[key]


def _downward(
    value_from: Mapping[str, Any], facts: downward.PodFacts, container: pods.Container
) -> str:
    field_ref = value_from.get("fieldRef")
    try:
        if isinstance(field_ref, Mapping):
            path = downward.internal_field_path(
                str(field_ref.get("apiVersion") or "v1"), str(field_ref.get("fieldPath") or ""))
            return downward.field_value(path, facts)
        return downward.resource_value(value_from["resourceFieldRef"], facts,
                                       container=container)
    except downward.FieldError as exc:
        raise ConfigError(exc.message) from exc


def _file_key_ref(ref: envfiles.FileKeyRef, files: envfiles.FileValues) -> str | None:
    try:
        return envfiles.resolve(ref, files.get(ref, envfiles.FileValue(
            error=envfiles.missing_volume_message(ref.volume))))
    except envfiles.EnvFileError as exc:
        raise ConfigError(exc.message) from exc


def _value_from(
    value_from: Mapping[str, Any],
    read: _Reader,
    facts: downward.PodFacts,
    container: pods.Container,
    files: envfiles.FileValues,
) -> str | None:
    """The value of one `valueFrom` (checked when the manifest was read: exactly one source)."""
    namespace = facts.pod.namespace
    file_ref = envfiles.file_key_ref(value_from)
    if file_ref is not None:
        return _file_key_ref(file_ref, files)
    if isinstance(value_from.get("configMapKeyRef"), Mapping):
        return _key_ref("ConfigMap", value_from["configMapKeyRef"], read, namespace)
    if isinstance(value_from.get("secretKeyRef"), Mapping):
        return _key_ref("Secret", value_from["secretKeyRef"], read, namespace)
    if isinstance(value_from.get("fieldRef"), Mapping) or isinstance(
        value_from.get("resourceFieldRef"), Mapping
    ):
        return _downward(value_from, facts, container)
    raise ConfigError(
        "valueFrom must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, "
        "`secretKeyRef` or `fileKeyRef`"
    )


def resolve(
    container: pods.Container,
    *,
    lookup: vol.Lookup,
    facts: downward.PodFacts,
    service_env: Iterable[tuple[str, str]] = (),
    files: envfiles.FileValues | None = None,
) -> Environment:
    """The container's environment (see the module docstring); raises ConfigError.

    `service_env`: the Service variables (`servicelinks.service_env`). As in the kubelet's
    makeEnvironmentVariables, `$(VAR)` in `env` values sees them after the container's own
    variables, and they follow the container's variables, except those it defines itself.
    `files`: what was read for each of the container's `envfiles.file_key_refs`."""
    services = dict(service_env)
    namespace = facts.pod.namespace
    read = _reader(lookup, namespace)
    variables: dict[str, str] = {}
    skipped = []
    for source in container.env_from:
        found = _env_from(source, read, namespace, variables)
        skipped += [found] if found is not None else []
    for var in container.env:
        if var.value:
            variables[var.name] = expand(
                var.value, lambda name: variables.get(name, services.get(name)))
        elif var.value_from is not None:
            value = _value_from(var.value_from, read, facts, container, files or {})
            if value is not None:
                variables[var.name] = value
        else:
            variables[var.name] = ""
    linked = [(name, value) for name, value in services.items() if name not in variables]
    return Environment((*variables.items(), *linked), tuple(skipped))


def referenced_objects(pod: pods.Pod) -> set[ObjectKey]:
    """(kind, namespace, name) of every ConfigMap and Secret the pod's containers read into
    their environment (env valueFrom and envFrom)."""
    refs: set[ObjectKey] = set()
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        refs |= {(s.kind, pod.namespace, s.name) for s in container.env_from}
        for var in container.env:
            for key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                ref = (var.value_from or {}).get(key)
                if isinstance(ref, Mapping):
                    refs.add((kind, pod.namespace, str(ref.get("name") or "")))
    return refs
