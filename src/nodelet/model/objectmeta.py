"""The parts every v1 object shares: `apiVersion` and `kind` (the header), and `metadata`.

Errors are the `fields.ManifestError` tree; an object of another kind or apiVersion is
`fields.UnsupportedError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nodelet.model import apifields, fields, names, status


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


def metadata(obj: Mapping[str, Any], strict: bool) -> Meta:
    """The validated `metadata` of `obj`; the namespace defaults to "default"."""
    if obj.get("metadata") is None:
        raise fields.InvalidValueError("required: a mapping with at least a name", path="metadata")
    meta = fields.mapping(obj, "metadata", "")
    if strict:
        fields.check_fields(meta, apifields.META_FIELDS, "metadata")
    if not meta.get("name") and meta.get("generateName"):
        raise fields.UnsupportedError(
            "required: generateName is not supported here, give the object a name",
            path="metadata.name",
        )
    namespace = fields.string(meta, "namespace", "metadata") or "default"
    name = fields.string(meta, "name", "metadata", required=True)
    return Meta(
        name=names.dns_subdomain(name, "metadata.name"),
        namespace=names.dns_label(namespace, "metadata.namespace"),
        uid=fields.string(meta, "uid", "metadata"),
        labels=names.labels(meta, "metadata"),
        annotations=fields.string_map(meta, "annotations", "metadata"),
        creation_timestamp=_time(meta, "creationTimestamp"),
        deletion_timestamp=_time(meta, "deletionTimestamp"),
        deletion_grace_period_seconds=fields.integer(
            meta, "deletionGracePeriodSeconds", "metadata", low=0
        ),
    )
