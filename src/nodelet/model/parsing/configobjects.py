"""ConfigMaps and Secrets: parsing `configs` values from v1 objects, checked as the API server's
ValidateConfigMap and ValidateSecret do.

Keys are config keys (they become file names in volumes), an object holds at most 1 MiB of data,
and a Secret of a known type has the keys its type needs. Secret `data` is base64-decoded here,
so a `Secret` holds bytes; `stringData` is merged in first, as the API server does, so its keys
are checked (and named) as `data[key]`. No message ever shows a Secret's value. Errors are the
`fields.ManifestError` tree.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from nodelet.model.core import configs, fields, names
from nodelet.model.parsing import apifields, objectmeta

# core.MaxSecretSize, the limit of a ConfigMap too.
MAX_DATA_BYTES = 1024 * 1024
TOO_LONG = f"Too long: must have at most {MAX_DATA_BYTES} bytes"

# The key a Secret of each type needs (SecretTypeTLS needs two; basic-auth one of two).
SERVICE_ACCOUNT_NAME = "kubernetes.io/service-account.name"
_DOCKER_CONFIG_KEYS = {
    "kubernetes.io/dockercfg": ".dockercfg",
    "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
}


def _base64_map(obj: Mapping[str, Any], key: str, *, redact: bool) -> dict[str, bytes]:
    out = {}
    for name, value in fields.string_map(obj, key, "", redact=redact).items():
        path = fields.key_path(key, name)
        names.config_key(name, path)
        try:
            # Go's decoder skips line breaks (wrapped `base64` output); nothing else.
            unwrapped = value.replace("\r", "").replace("\n", "")
            out[name] = base64.b64decode(unwrapped, validate=True)
        except (binascii.Error, ValueError):
            # Never the value, nor the decoder's words (they may quote it): no chained cause.
            raise fields.InvalidValueError(
                f"the value of key {json.dumps(name)} is not valid base64 (use stringData for "
                "plain text)",
                path=path,
            ) from None
    return out


def _too_long(total: int, path: str) -> None:
    if total > MAX_DATA_BYTES:
        raise fields.InvalidValueError(f"{TOO_LONG} (the values have {total})", path=path)


def _config_map(obj: Mapping[str, Any], meta: objectmeta.Meta) -> configs.ConfigMap:
    data = fields.string_map(obj, "data", "")
    for name in data:
        names.config_key(name, fields.key_path("data", name))
    binary = _base64_map(obj, "binaryData", redact=False)
    for name in sorted(data.keys() & binary.keys()):
        raise fields.InvalidValueError(
            f'"{name}": duplicate of key present in binaryData', path=fields.key_path("data", name)
        )
    # The API server names the whole object ("").
    _too_long(sum(len(v.encode()) for v in data.values()) + sum(map(len, binary.values())), "")
    immutable = fields.boolean(obj, "immutable", "")
    return configs.ConfigMap(meta.name, meta.namespace, data, binary, immutable, meta.labels)


def _secret(obj: Mapping[str, Any], meta: objectmeta.Meta) -> configs.Secret:
    data = _base64_map(obj, "data", redact=True)
    for name, value in fields.string_map(obj, "stringData", "", redact=True).items():
        names.config_key(name, fields.key_path("data", name))
        data[name] = value.encode()
    _too_long(sum(map(len, data.values())), "data")
    type_ = fields.string(obj, "type", "") or "Opaque"
    _check_type(type_, data, meta)
    immutable = fields.boolean(obj, "immutable", "")
    return configs.Secret(meta.name, meta.namespace, type_, data, immutable, meta.labels,
                          meta.uid)


def _required(key: str, type_: str) -> fields.InvalidValueError:
    return fields.InvalidValueError(
        f"required: a Secret of type {type_} needs the key {json.dumps(key)}",
        path=fields.key_path("data", key),
    )


def _check_type(type_: str, data: Mapping[str, bytes], meta: objectmeta.Meta) -> None:
    """The keys each known Secret type needs (ValidateSecret's switch on the type)."""
    if type_ == "kubernetes.io/service-account-token" and not meta.annotations.get(
        SERVICE_ACCOUNT_NAME
    ):
        raise fields.InvalidValueError(
            f"required: a Secret of type {type_} names its ServiceAccount in this annotation",
            path=fields.key_path("metadata.annotations", SERVICE_ACCOUNT_NAME),
        )
    if type_ in _DOCKER_CONFIG_KEYS:
        _check_docker_config(type_, data, _DOCKER_CONFIG_KEYS[type_])
    if type_ == "kubernetes.io/basic-auth" and not {"username", "password"} & data.keys():
        raise _required("username", type_)  # either key may be empty, one must be there
    if type_ == "kubernetes.io/ssh-auth" and not data.get("ssh-privatekey"):
        raise _required("ssh-privatekey", type_)
    if type_ == "kubernetes.io/tls":
        for key in ("tls.crt", "tls.key"):
            if key not in data:
                raise _required(key, type_)


def _check_docker_config(type_: str, data: Mapping[str, bytes], key: str) -> None:
    """The key must hold a JSON object (or null, which Go's json reads into a map too)."""
    if key not in data:
        raise _required(key, type_)
    try:
        parsed = json.loads(data[key])
    except ValueError as exc:  # JSONDecodeError's words show no content; bad UTF-8's would
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
        problem = f"not valid JSON: {reason}"
    else:
        problem = "" if parsed is None or isinstance(parsed, dict) else "not a JSON object"
    if problem:
        raise fields.InvalidValueError(
            f"<secret contents redacted>: {problem}", path=fields.key_path("data", key)
        )


def config_object_from_object(
    obj: Mapping[str, Any], *, strict: bool = True
) -> configs.ConfigObject:
    """A v1 ConfigMap or Secret, validated."""
    objectmeta.header(obj, ("ConfigMap", "Secret"), None)
    is_map = obj["kind"] == "ConfigMap"
    if strict:
        allowed = apifields.CONFIGMAP_FIELDS if is_map else apifields.SECRET_FIELDS
        fields.check_fields(obj, allowed, "")
    meta = objectmeta.metadata(obj, strict)
    return _config_map(obj, meta) if is_map else _secret(obj, meta)
