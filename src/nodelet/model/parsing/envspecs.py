"""A container's environment fields (`env[].name`, `env[].valueFrom`, `envFrom`) and a volume
mount's `subPath`/`subPathExpr`, checked as the API server checks them (ValidateEnv,
validateEnvVarValueFrom, ValidateEnvFrom, validateVolumeMounts), with its messages.

What the values resolve to is decided when the container is created (`envvars`). Errors are the
`fields.ManifestError` tree, with the field path of the offending value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

from nodelet.model.core import downward, fields, names, pods, quantities

VALUE_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
_VALUE_FROM_FIELDS = frozenset(VALUE_SOURCES)
_FIELD_REF_FIELDS = frozenset({"apiVersion", "fieldPath"})
_RESOURCE_REF_FIELDS = frozenset({"containerName", "resource", "divisor"})
_KEY_REF_FIELDS = frozenset({"name", "key", "optional"})
_FILE_KEY_REF_FIELDS = frozenset({"volumeName", "path", "key", "optional"})
_ENV_FROM_FIELDS = frozenset({"prefix", "configMapRef", "secretRef"})
_OBJECT_REF_FIELDS = frozenset({"name", "optional"})

# The divisors the API server allows (validContainerResourceDivisorFor*).
_CPU_DIVISORS = frozenset({Decimal("0.001"), Decimal(1)})
_BYTE_DIVISORS = frozenset(
    {Decimal(1)} | {Decimal(1000**p) for p in range(1, 7)} | {Decimal(1024**p) for p in range(1, 7)}
)
_BYTE_DIVISOR_TEXT = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"


def env_var_name(name: str, path: str) -> None:
    """The API server's rule since 1.30 (RelaxedEnvironmentVariableValidation): any printable
    ASCII character but "="."""
    if any(not " " <= char <= "~" or char == "=" for char in name):
        raise fields.InvalidValueError(
            f"{json.dumps(name)} is not a valid environment variable name: use only printable "
            'ASCII characters other than "="',
            path=path,
        )


# ---------------------------------------------------------------------------------------------
# env[].valueFrom


def _field_ref(ref: Mapping[str, Any], path: str) -> None:
    """validateObjectFieldSelector with the env vars' paths."""
    version = fields.string(ref, "apiVersion", path) or "v1"  # the API server's default
    field_path = fields.string(ref, "fieldPath", path, required=True)
    try:
        internal = downward.internal_field_path(version, field_path)
    except downward.FieldError as exc:
        raise fields.InvalidValueError(
            f"error converting fieldPath: {exc.message}", path=f"{path}.fieldPath"
        ) from exc
    split = downward.split_subscript(internal)
    if split is None:
        fields.one_of(internal, downward.ENV_FIELD_PATHS, f"{path}.fieldPath")
    elif split[0] == "metadata.annotations":
        names.qualified_name(split[1].lower(), path)
    else:
        names.qualified_name(split[1], path)


def _divisor(ref: Mapping[str, Any], resource: str, path: str) -> None:
    divisor = ref.get("divisor")
    value = quantities.parse_quantity(divisor, path=f"{path}.divisor") if divisor else Decimal(0)
    if value == 0:
        return  # not set: 1
    if resource.endswith(".cpu") and value not in _CPU_DIVISORS:
        raise fields.InvalidValueError(
            "only divisor's values 1m and 1 are supported with the cpu resource",
            path=f"{path}.divisor",
        )
    what = "memory" if resource.endswith(".memory") else "local ephemeral storage"
    if not resource.endswith(".cpu") and value not in _BYTE_DIVISORS:
        raise fields.InvalidValueError(
            f"only divisor's values {_BYTE_DIVISOR_TEXT} are supported with the {what} resource",
            path=f"{path}.divisor",
        )


def _resource_ref(ref: Mapping[str, Any], path: str) -> None:
    """validateContainerResourceFieldSelector for env vars (containerName may be left out: the
    container itself). Huge pages are not resources nodelet knows."""
    fields.string(ref, "containerName", path)
    resource = fields.string(ref, "resource", path, required=True)
    fields.one_of(resource, downward.RESOURCES, f"{path}.resource")
    _divisor(ref, resource, path)


def _key_ref(ref: Mapping[str, Any], path: str) -> None:
    """validateConfigMapKeySelector / validateSecretKeySelector."""
    names.dns_subdomain(fields.string(ref, "name", path, required=True), f"{path}.name")
    names.config_key(fields.string(ref, "key", path, required=True), f"{path}.key")
    fields.boolean(ref, "optional", path)


def _file_key_ref(ref: Mapping[str, Any], path: str) -> None:
    """validateFileKeySelector (EnvFiles, on by default since 1.35): a key that is a variable
    name, the name of a volume (that it is an emptyDir of the pod is `podspecs`' check), a
    path without '..' steps."""
    key = fields.string(ref, "key", path, required=True)
    env_var_name(key, f"{path}.key")
    names.dns_label(fields.string(ref, "volumeName", path, required=True), f"{path}.volumeName")
    file_path = fields.string(ref, "path", path, required=True)
    if ".." in file_path.split("/"):
        raise fields.InvalidValueError(f"{json.dumps(file_path)}: must not contain '..'",
                                       path=f"{path}.path")
    fields.boolean(ref, "optional", path)


def _sources(value_from: Mapping[str, Any], path: str, strict: bool) -> list[str]:
    if strict:
        fields.check_fields(value_from, _VALUE_FROM_FIELDS, path)
    return [key for key in VALUE_SOURCES if value_from.get(key) is not None]


def value_from(obj: Mapping[str, Any], path: str, *, strict: bool) -> Mapping[str, Any] | None:
    """The `valueFrom` of an env var at `path`, checked; None when not set."""
    if obj.get("valueFrom") is None:
        return None
    raw = fields.mapping(obj, "valueFrom", path)
    path = f"{path}.valueFrom"
    sources = _sources(raw, path, strict)
    if not sources:
        raise fields.InvalidValueError(
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, "
            "`secretKeyRef` or `fileKeyRef`",
            path=path,
        )
    if fields.string(obj, "value", path):
        raise fields.InvalidValueError("may not be specified when `value` is not empty", path=path)
    if len(sources) > 1:
        raise fields.InvalidValueError(
            "may not have more than one field specified at a time", path=path
        )
    check = {"fieldRef": _field_ref, "resourceFieldRef": _resource_ref,
             "configMapKeyRef": _key_ref, "secretKeyRef": _key_ref,
             "fileKeyRef": _file_key_ref}[sources[0]]  # fmt: skip
    ref = fields.mapping(raw, sources[0], path)
    if strict:
        allowed = {"fieldRef": _FIELD_REF_FIELDS, "resourceFieldRef": _RESOURCE_REF_FIELDS,
                   "fileKeyRef": _FILE_KEY_REF_FIELDS}
        fields.check_fields(ref, allowed.get(sources[0], _KEY_REF_FIELDS), f"{path}.{sources[0]}")
    check(ref, f"{path}.{sources[0]}")
    return raw


# ---------------------------------------------------------------------------------------------
# envFrom


def env_from(obj: Mapping[str, Any], path: str, *, strict: bool) -> pods.EnvFromSource:
    """One `envFrom` entry: exactly one of configMapRef and secretRef, a valid prefix."""
    if strict:
        fields.check_fields(obj, _ENV_FROM_FIELDS, path)
    prefix = fields.string(obj, "prefix", path)
    env_var_name(prefix, f"{path}.prefix")
    keys = [key for key in ("configMapRef", "secretRef") if obj.get(key) is not None]
    if not keys:
        raise fields.InvalidValueError("must specify one of: `configMapRef` or `secretRef`",
                                       path=path)
    if len(keys) > 1:
        raise fields.InvalidValueError(
            "may not have more than one field specified at a time", path=path
        )
    ref = fields.mapping(obj, keys[0], path)
    ref_path = f"{path}.{keys[0]}"
    if strict:
        fields.check_fields(ref, _OBJECT_REF_FIELDS, ref_path)
    name = fields.string(ref, "name", ref_path, required=True)
    names.dns_subdomain(name, f"{ref_path}.name")
    return pods.EnvFromSource(
        kind="ConfigMap" if keys[0] == "configMapRef" else "Secret",
        name=name,
        prefix=prefix,
        optional=fields.boolean(ref, "optional", ref_path),
    )


# ---------------------------------------------------------------------------------------------
# volumeMounts[].subPath and subPathExpr


def _descending(value: str, path: str) -> None:
    """validateLocalDescendingPath: relative, and no '..' step."""
    if value.startswith("/"):
        raise fields.InvalidValueError(f'"{value}": must be a relative path', path=path)
    if ".." in PurePosixPath(value).parts:
        raise fields.InvalidValueError(f"\"{value}\": must not contain '..'", path=path)


def sub_paths(obj: Mapping[str, Any], path: str) -> tuple[str, str]:
    """(subPath, subPathExpr) of a volume mount at `path`, checked."""
    sub_path = fields.string(obj, "subPath", path)
    expr = fields.string(obj, "subPathExpr", path)
    if sub_path and expr:
        raise fields.InvalidValueError(
            "subPathExpr and subPath are mutually exclusive", path=f"{path}.subPathExpr"
        )
    for key, value in (("subPath", sub_path), ("subPathExpr", expr)):
        _descending(value, f"{path}.{key}")
    return sub_path, expr
