"""Name checks of the API server (k8s.io/apimachinery/pkg/util/validation): DNS-1123 labels
and subdomains, qualified names and label values, ConfigMap/Secret keys. Each check raises
`fields.InvalidValueError` at the given path, with a message that says what a valid name is."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from nodelet.model.core import fields

# `\Z`, not `$`: `$` also matches before a final newline, and "app\n" is no DNS label.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(rf"^{_LABEL}\Z")
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+\Z")


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


_UNDERSCORE_LABEL = r"[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?"
_DNS_SUBDOMAIN_WITH_UNDERSCORE = re.compile(rf"^{_UNDERSCORE_LABEL}(\.{_UNDERSCORE_LABEL})*\Z")


def dns_subdomain_with_underscore(value: str, path: str) -> str:
    """IsDNS1123SubdomainWithUnderscore (dnsConfig searches: `_sip._tcp.example.com`)."""
    if len(value) > 253 or not _DNS_SUBDOMAIN_WITH_UNDERSCORE.match(value):
        raise fields.InvalidValueError(
            f'"{value}" is not a valid DNS subdomain: at most 253 lowercase letters, digits, '
            "'-', '_' and '.', starting and ending with a letter, digit or '_'",
            path=path,
        )
    return value


def qualified_name(value: str, path: str) -> None:
    prefix, slash, name = value.rpartition("/")
    if slash:  # "/name" has an empty prefix, which is no DNS subdomain
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
        label_value(value, f"{path}.labels", key=key)
    return found


def label_value(value: str, path: str, *, key: str = "") -> None:
    """A label value (the API server names the whole map, so `key` is said in the message)."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        shown = json.dumps(value if len(value) <= 80 else value[:77] + "...")
        of = f" (label {json.dumps(key)})" if key else ""
        raise fields.InvalidValueError(
            f"{shown}{of} is not a valid label value: at most 63 letters, digits, "
            "'-', '_' or '.', starting and ending alphanumeric",
            path=path,
        )


def config_key(key: str, path: str) -> None:
    """A key of a ConfigMap's or Secret's data (it becomes a file name in a volume)."""
    if len(key) > 253 or key.startswith("..") or key == "." or not _CONFIG_KEY.match(key):
        shown = json.dumps(key if len(key) <= 80 else key[:77] + "...")
        raise fields.InvalidValueError(
            f'{shown} is not a valid key: letters, digits, "-", "_" and "." (at most 253), '
            "not '.' and not starting with '..'",
            path=path,
        )


def is_qualified_name(value: str) -> bool:
    """`qualified_name` as a test (extended resource names are checked with a prefix added)."""
    prefix, slash, name = value.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


_PORT_NAME_CHARS = re.compile(r"^[-a-z0-9]+\Z")


def port_name_problem(value: str) -> str | None:
    """Why `value` is not an IANA_SVC_NAME (validation.IsValidPortName), in the API server's
    words, or None when it is one."""
    if len(value) > 15:
        return "must be no more than 15 characters"
    if not _PORT_NAME_CHARS.match(value):
        return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
    if not any("a" <= char <= "z" for char in value):
        return "must contain at least one letter (a-z)"
    if "--" in value:
        return "must not contain consecutive hyphens"
    if value.startswith("-") or value.endswith("-"):
        return "must not begin or end with a hyphen"
    return None


def port_name(value: str, path: str) -> str:
    """A named port (containers' `ports[].name`, probes' and hooks' named `port`)."""
    problem = port_name_problem(value)
    if problem is not None:
        raise fields.InvalidValueError(
            f"{json.dumps(value)} is not a valid port name: {problem} (an IANA service name "
            "such as \"http\")",
            path=path,
        )
    return value
