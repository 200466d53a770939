"""Name checks of the API server (k8s.io/apimachinery/pkg/util/validation): DNS-1123 labels
and subdomains, qualified names and label values, ConfigMap/Secret keys. Each check raises
`fields.InvalidValueError` at the given path, with a message that says what a valid name is."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nodelet.model import fields

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(f"^{_LABEL}$")
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def dns_label(value: str, path: str) -> str:
    if len(value) > 63 or not DNS_LABEL.match(value):
        raise fields.InvalidValueError(
            f'"{value}" is not a valid DNS-1123 label: at most 63 lowercase letters, digits '
            "and '-', starting and ending with a letter or digit",
            path=path,
        )
    return value


def dns_subdomain(value: str, path: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise fields.InvalidValueError(
            f'"{value}" is not a valid DNS-1123 subdomain: at most 253 lowercase letters, '
            "digits, '-' and '.', starting and ending with a letter or digit",
            path=path,
        )
    return value


def qualified_name(value: str, path: str) -> None:
    prefix, _, name = value.rpartition("/")
    if prefix:
        dns_subdomain(prefix, path)
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise fields.InvalidValueError(
            f'"{value}" is not a valid qualified name: an optional DNS subdomain prefix and "/", '
            "then at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric",
            path=path,
        )


def labels(obj: Mapping[str, Any], path: str) -> dict[str, str]:
    """The `labels` of `obj` (a metadata mapping at `path`), keys and values checked."""
    found = fields.string_map(obj, "labels", path)
    for key, value in found.items():
        qualified_name(key, f"{path}.labels")
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise fields.InvalidValueError(
                f'"{value}" is not a valid label value: at most 63 letters, digits, '
                "'-', '_' or '.', starting and ending alphanumeric",
                path=f"{path}.labels.{key}",
            )
    return found


def config_key(key: str, path: str) -> None:
    """A key of a ConfigMap's or Secret's data (it becomes a file name in a volume)."""
    if len(key) > 253 or key in (".", "..") or not _CONFIG_KEY.match(key):
        raise fields.InvalidValueError(
            f'"{key}" is not a valid key: letters, digits, "-", "_" and "." (at most 253)',
            path=path,
        )
