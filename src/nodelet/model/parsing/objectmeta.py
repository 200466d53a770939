"""The parts every v1 object shares: `apiVersion` and `kind` (the header), and `metadata`,
checked as the API server's ValidateObjectMeta does (apimachinery's api/validation/objectmeta.go
and pkg/apis/core/validation), plus the annotations only a pod's metadata is checked for
(ValidatePodSpecificAnnotations).

Errors are the `fields.ManifestError` tree, at the API server's field paths (a map entry is
`metadata.annotations[key]`); an object of another kind or apiVersion is `fields.UnsupportedError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from nodelet.model.core import fields, names, status
from nodelet.model.parsing import apifields

# apimachinery's TotalAnnotationSizeLimitB: keys and values together, in bytes.
MAX_ANNOTATIONS_BYTES = 256 * 1024
# Finalizers without a domain the API server knows (helper.IsStandardFinalizerName, and the
# two of metav1).
STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")
# Owners the API server refuses (BannedOwners).
_BANNED_OWNERS = frozenset({("", "v1", "Event")})
# Pod annotations the API server checks the values of.
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR_CONTAINER_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def header(obj: Any, kinds: Sequence[str], allowed: frozenset[str] | None) -> Mapping[str, Any]:
    """`obj` if it is a v1 object of one of `kinds`; with `allowed`, also its top-level fields
    are checked (strict field validation)."""
    if not isinstance(obj, Mapping):
        raise fields.type_error("", "a Kubernetes object (a mapping)", obj)
    api_version, kind = fields.string(obj, "apiVersion", ""), fields.string(obj, "kind", "")
    if not kind:
        raise fields.InvalidValueError(f"required: one of {', '.join(kinds)}", path="kind")
    if kind not in kinds:
        raise fields.UnsupportedError(
            f'unsupported kind "{kind}": nodelet runs {", ".join(kinds)} objects', path="kind"
        )
    if api_version != "v1":
        got = f'"{api_version}"' if api_version else "nothing"
        raise fields.UnsupportedError(
            f'expected "v1" for kind {kind}, got {got}', path="apiVersion"
        )
    if allowed is not None:
        fields.check_fields(obj, allowed, "")
    return obj


@dataclass(frozen=True)
class Meta:
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None
    deletion_grace_period_seconds: int | None


def _time(meta: Mapping[str, Any], key: str) -> datetime | None:
    value = fields.string(meta, key, "metadata")
    try:
        return status.parse_time(value)
    except ValueError as exc:
        raise fields.InvalidValueError(
            f'"{value}" is not an RFC 3339 time such as "2024-05-01T12:00:00Z"',
            path=f"metadata.{key}",
        ) from exc


def _generate_name(meta: Mapping[str, Any]) -> None:
    """generateName is a prefix: a DNS subdomain once a suffix follows (a final '-' is fine)."""
    prefix = fields.string(meta, "generateName", "metadata")
    if prefix:
        masked = prefix[:-1] + "a" if len(prefix) > 1 and prefix.endswith("-") else prefix
        try:
            names.dns_subdomain(masked, "metadata.generateName")
        except fields.InvalidValueError as exc:
            raise fields.InvalidValueError(
                exc.message.replace(json.dumps(masked), json.dumps(prefix), 1), path=exc.path
            ) from None
    if not meta.get("name") and prefix:
        raise fields.UnsupportedError(
            "required: generateName is not supported here, give the object a name",
            path="metadata.name",
        )


def annotation_map(meta: Mapping[str, Any]) -> dict[str, str]:
    """ValidateAnnotations: qualified-name keys (case does not matter), 256 KiB in all."""
    found = fields.string_map(meta, "annotations", "metadata")
    path = "metadata.annotations"
    size = 0
    for key, value in found.items():
        names.qualified_name(key.lower(), path)
        size += len(key.encode()) + len(value.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        raise fields.InvalidValueError(
            f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes (keys and values "
            f"together; these have {size})",
            path=path,
        )
    return found


def metadata(obj: Mapping[str, Any], strict: bool) -> Meta:
    """The validated `metadata` of `obj`; the namespace defaults to "default"."""
    if obj.get("metadata") is None:
        raise fields.InvalidValueError("required: a mapping with at least a name", path="metadata")
    meta = fields.mapping(obj, "metadata", "")
    if strict:
        fields.check_fields(meta, apifields.META_FIELDS, "metadata")
    _generate_name(meta)
    namespace = fields.string(meta, "namespace", "metadata") or "default"
    name = fields.string(meta, "name", "metadata", required=True)
    for key in ("uid", "resourceVersion", "selfLink"):
        fields.string(meta, key, "metadata")
    fields.integer(meta, "generation", "metadata", low=0)
    _owner_references(meta, strict)
    _finalizers(meta)
    _managed_fields(meta, strict)
    found = annotation_map(meta)
    if obj.get("kind") == "Pod":
        pod_annotations(found, _container_names(obj))
    return Meta(
        name=names.dns_subdomain(name, "metadata.name"),
        namespace=names.dns_label(namespace, "metadata.namespace"),
        uid=fields.string(meta, "uid", "metadata"),
        labels=names.labels(meta, "metadata"),
        annotations=found,
        creation_timestamp=_time(meta, "creationTimestamp"),
        deletion_timestamp=_time(meta, "deletionTimestamp"),
        deletion_grace_period_seconds=fields.integer(
            meta, "deletionGracePeriodSeconds", "metadata", low=0
        ),
    )


# ---------------------------------------------------------------------------------------------
# ownerReferences, finalizers, managedFields


def _group_version(api_version: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion: "v1" → ("", "v1"), "apps/v1" → ("apps", "v1")."""
    if api_version in ("", "/"):
        return "", ""
    parts = api_version.split("/")
    if len(parts) > 2:
        return None
    return ("", parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def _owner_reference(item: Mapping[str, Any], path: str, strict: bool) -> tuple[str, bool]:
    """validateOwnerReference; the API server names the list, not the entry (`path`)."""
    where = path.rpartition(".")[2]  # "ownerReferences[i]", said in the messages
    if strict:
        fields.check_fields(item, apifields.OWNER_REFERENCE_FIELDS, path)
    values = {key: fields.string(item, key, path) for key in ("apiVersion", "kind", "name", "uid")}
    controller = fields.boolean(item, "controller", path)
    fields.boolean(item, "blockOwnerDeletion", path)
    group_version = _group_version(values["apiVersion"])
    problems = [
        ("apiVersion", "version must not be empty", not group_version or not group_version[1]),
        ("kind", "must not be empty", not values["kind"]),
        ("name", "must not be empty", not values["name"]),
        ("uid", "must not be empty", not values["uid"]),
    ]
    for key, message, failed in problems:
        if failed:
            raise fields.InvalidValueError(
                f"{where}: {message}", path=f"metadata.ownerReferences.{key}"
            )
    if group_version and (*group_version, values["kind"]) in _BANNED_OWNERS:
        raise fields.InvalidValueError(
            f"{where}: /v1, Kind={values['kind']} is disallowed from being an owner",
            path="metadata.ownerReferences",
        )
    return f"{values['kind']}/{values['name']}", controller


def _owner_references(meta: Mapping[str, Any], strict: bool) -> None:
    refs = fields.items(
        meta, "ownerReferences", "metadata", lambda item, p: _owner_reference(item, p, strict)
    )
    controllers = [owner for owner, controller in refs if controller]
    if len(controllers) > 1:
        raise fields.InvalidValueError(
            'Only one reference can have Controller set to true. Found "true" in references '
            f"for {controllers[0]} and {controllers[1]}",
            path="metadata.ownerReferences",
        )


def _finalizers(meta: Mapping[str, Any]) -> None:
    """ValidateFinalizers and the core group's validateKubeFinalizerName."""
    found = fields.string_list(meta, "finalizers", "metadata")
    for i, finalizer in enumerate(found):
        names.qualified_name(finalizer, "metadata.finalizers")
        if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
            raise fields.InvalidValueError(
                f'"{finalizer}": name is neither a standard finalizer name nor is it fully '
                f"qualified (standard: {', '.join(STANDARD_FINALIZERS)}; else domain/name)",
                path=f"metadata.finalizers[{i}]",
            )
    if {"orphan", "foregroundDeletion"} <= set(found):
        raise fields.InvalidValueError(
            "finalizer orphan and foregroundDeletion cannot be both set",
            path="metadata.finalizers",
        )


def _managed_fields_entry(item: Mapping[str, Any], path: str, strict: bool) -> None:
    """ValidateManagedFields: an Apply or Update by a manager, in the FieldsV1 format."""
    if strict:
        fields.check_fields(item, apifields.MANAGED_FIELDS_ENTRY_FIELDS, path)
    for key in ("manager", "apiVersion", "time", "subresource"):
        fields.string(item, key, path)
    fields.mapping(item, "fieldsV1", path)
    fields.one_of(fields.string(item, "operation", path), ("Apply", "Update"), f"{path}.operation")
    fields.one_of(fields.string(item, "fieldsType", path), ("FieldsV1",), f"{path}.fieldsType")


def _managed_fields(meta: Mapping[str, Any], strict: bool) -> None:
    fields.items(
        meta, "managedFields", "metadata",
        lambda item, path: _managed_fields_entry(item, path, strict),
    )


# ---------------------------------------------------------------------------------------------
# A pod's annotations


def _container_names(obj: Mapping[str, Any]) -> set[str]:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return set()
    every = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        listed = spec.get(key)
        every += listed if isinstance(listed, list) else []
    return {c["name"] for c in every if isinstance(c, Mapping) and isinstance(c.get("name"), str)}


def _seccomp_annotation(key: str, value: str) -> None:
    """ValidateSeccompProfile on the deprecated seccomp annotations."""
    path = f"metadata.annotations.{key}"  # the API server's Child(), not Key()
    if value in ("runtime/default", "docker/default", "unconfined"):
        return
    local = value.removeprefix("localhost/")
    if local == value:
        raise fields.InvalidValueError(
            f'"{value}": must be a valid seccomp profile (runtime/default, unconfined or '
            "localhost/<path>)",
            path=path,
        )
    if local.startswith("/"):
        raise fields.InvalidValueError(f'"{local}": must be a relative path', path=path)
    if ".." in PurePosixPath(local).parts:
        raise fields.InvalidValueError(f"\"{local}\": must not contain '..'", path=path)


def _apparmor_annotation(key: str, value: str, containers: set[str]) -> None:
    """ValidateAppArmorPodAnnotations."""
    path = fields.key_path("metadata.annotations", key)
    container = key.removeprefix(APPARMOR_CONTAINER_PREFIX)
    if container not in containers:
        raise fields.InvalidValueError(f'container "{container}" not found', path=path)
    if value not in ("", "runtime/default", "unconfined") and not value.startswith("localhost/"):
        raise fields.InvalidValueError(
            f'invalid AppArmor profile name: "{value}" (runtime/default, unconfined or '
            "localhost/<profile>)",
            path=path,
        )


def pod_annotations(found: Mapping[str, str], containers: set[str]) -> None:
    """ValidatePodSpecificAnnotations: deletion cost, seccomp and AppArmor annotations."""
    cost = found.get(DELETION_COST)
    if cost is not None and not _is_int32(cost):
        path = fields.key_path("metadata.annotations", DELETION_COST)
        raise fields.InvalidValueError(f'"{cost}": must be a 32bit integer', path=path)
    for key, value in found.items():
        if key == SECCOMP_POD or key.startswith(SECCOMP_CONTAINER_PREFIX):
            _seccomp_annotation(key, value)
        if key.startswith(APPARMOR_CONTAINER_PREFIX):
            _apparmor_annotation(key, value, containers)


def _is_int32(text: str) -> bool:
    """strconv.ParseInt(text, 10, 32) succeeds: an optional sign and decimal digits."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits.isascii() or not digits.isdigit() or len(digits) > 11:
        return False
    return fields.INT32_MIN <= int(text) <= fields.INT32_MAX
