"""ConfigMaps and Secrets: the typed values and their parsing from v1 objects.

Keys are checked like the API server does (they become file names in volumes); Secret `data`
is base64-decoded here, so a `Secret` holds bytes. Errors are the `fields.ManifestError` tree.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodelet.model import apifields, fields, names, objectmeta


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


def _base64_map(obj: Mapping[str, Any], key: str) -> dict[str, bytes]:
    out = {}
    for name, value in fields.string_map(obj, key, "").items():
        names.config_key(name, f"{key}.{name}")
        try:
            out[name] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise fields.InvalidValueError(
                "not valid base64 (use stringData for plain text)", path=f"{key}.{name}"
            ) from exc
    return out


def _config_map(obj: Mapping[str, Any], meta: objectmeta.Meta) -> ConfigMap:
    data = fields.string_map(obj, "data", "")
    for name in data:
        names.config_key(name, f"data.{name}")
    binary = _base64_map(obj, "binaryData")
    for name in data.keys() & binary.keys():
        raise fields.InvalidValueError(
            "duplicate key: it is also in data", path=f"binaryData.{name}"
        )
    immutable = fields.boolean(obj, "immutable", "")
    return ConfigMap(meta.name, meta.namespace, data, binary, immutable, meta.labels)


def _secret(obj: Mapping[str, Any], meta: objectmeta.Meta) -> Secret:
    data = _base64_map(obj, "data")
    for name, value in fields.string_map(obj, "stringData", "").items():
        names.config_key(name, f"stringData.{name}")
        data[name] = value.encode()
    type_ = fields.string(obj, "type", "") or "Opaque"
    immutable = fields.boolean(obj, "immutable", "")
    return Secret(meta.name, meta.namespace, type_, data, immutable, meta.labels)


def config_object_from_object(obj: Mapping[str, Any], *, strict: bool = True) -> ConfigMap | Secret:
    """A v1 ConfigMap or Secret, validated."""
    objectmeta.header(obj, ("ConfigMap", "Secret"), None)
    is_map = obj["kind"] == "ConfigMap"
    if strict:
        allowed = apifields.CONFIGMAP_FIELDS if is_map else apifields.SECRET_FIELDS
        fields.check_fields(obj, allowed, "")
    meta = objectmeta.metadata(obj, strict)
    return _config_map(obj, meta) if is_map else _secret(obj, meta)
