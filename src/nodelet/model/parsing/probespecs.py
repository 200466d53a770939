"""Parsing probes and their handlers from the manifest (pure), as the API server validates them
and with the v1 defaults: initialDelaySeconds 0, periodSeconds 10, timeoutSeconds 1,
successThreshold 1, failureThreshold 3 (a 0 reads as "not set", as the API's defaulting does).
Raises `probes.ProbeError`, which `containerspecs` turns into the `fields.ManifestError` tree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nodelet.model.core import handlers, names, probes

HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_PROBE_FIELDS = frozenset({
    *HANDLERS, "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold",
    "failureThreshold", "terminationGracePeriodSeconds",
})
_HANDLER_FIELDS: Mapping[str, frozenset[str]] = {
    "exec": frozenset({"command"}),
    "httpGet": frozenset({"path", "port", "host", "scheme", "httpHeaders"}),
    "tcpSocket": frozenset({"port", "host"}),
    "grpc": frozenset({"port", "service"}),
}
# The v1 types of the numbers (int32 fields; terminationGracePeriodSeconds is int64): the API
# server's JSON decoding refuses larger values, and they would overflow timers here.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# validation.IsHTTPHeaderName: stricter than an RFC 7230 token.
_HEADER_NAME = re.compile(r"[-A-Za-z0-9]+")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_fields(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            name = key if isinstance(key, str) else _shown(key)
            raise probes.ProbeError(f'unknown field "{name}" (known: {known})',
                                    path=_join(path, name))


def _int(obj: Mapping[str, Any], key: str, path: str, default: int) -> int:
    """A non-negative int32; 0 or absent means `default` (the API's defaulting)."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise probes.ProbeError(f"expected an integer, got {_shown(value)}", path=_join(path, key))
    if value < 0:
        raise probes.ProbeError(f"{_shown(value)}: must be greater than or equal to 0",
                                path=_join(path, key))
    if value > INT32_MAX:
        raise probes.ProbeError(f"{_shown(value)} is out of range: must be at most {INT32_MAX} (an "
                                "int32)", path=_join(path, key))
    return value or default


def _shown(value: Any) -> str:
    """A value for a message, cut short: a hostile manifest can hold anything, and the repr of
    a deeply nested list would not even finish."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, int) and value.bit_length() > 128:
        # YAML's 0x/0b/0o literals make integers that str() refuses to print (over 4300 digits).
        return f"a number of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _str(obj: Mapping[str, Any], key: str, path: str, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise probes.ProbeError(f"expected a string, got {_shown(value)}; quote it",
                                path=_join(path, key))
    return value or default


def _map(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise probes.ProbeError(f"expected a mapping, got {_shown(value)}", path=_join(path, key))
    return value


def _port(obj: Mapping[str, Any], path: str, *, named: bool = True) -> int | str:
    value = obj.get("port")
    path = _join(path, "port")
    if value is None or value == "":
        raise probes.ProbeError("required: a port number" + (" or name" if named else ""),
                                path=path)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= 65535:
            raise probes.ProbeError(f"{_shown(value)}: must be between 1 and 65535, inclusive",
                                    path=path)
        return value
    if named and isinstance(value, str):
        problem = names.port_name_problem(value)
        if problem is not None:
            raise probes.ProbeError(f"{_shown(value)} is not a valid port name: {problem} (or use "
                                    "the port number)", path=path)
        return value
    expected = "an integer or a port name" if named else "an integer"
    raise probes.ProbeError(f"expected {expected}, got {_shown(value)}", path=path)


def _exec(obj: Mapping[str, Any], path: str) -> handlers.ExecAction:
    command = obj.get("command")
    if not command:
        raise probes.ProbeError("required: a non-empty list of strings",
                                path=_join(path, "command"))
    if not isinstance(command, list | tuple) or not all(isinstance(c, str) for c in command):
        raise probes.ProbeError(f"expected a list of strings, got {_shown(command)}",
                                path=_join(path, "command"))
    return handlers.ExecAction(command=tuple(command))


def _headers(obj: Mapping[str, Any], path: str) -> tuple[tuple[str, str], ...]:
    headers = obj.get("httpHeaders") or []
    if not isinstance(headers, list | tuple):
        raise probes.ProbeError("expected a list of {name, value}", path=_join(path, "httpHeaders"))
    out = []
    for i, header in enumerate(headers):
        item = f"{_join(path, 'httpHeaders')}[{i}]"
        if not isinstance(header, Mapping):
            raise probes.ProbeError("expected a mapping with name and value", path=item)
        _check_fields(header, frozenset({"name", "value"}), item)
        name = _str(header, "name", item)
        if not _HEADER_NAME.fullmatch(name):
            raise probes.ProbeError(f"{_shown(name)} is not a valid HTTP header name: a valid HTTP "
                                    "header must consist of alphanumeric characters or '-'",
                                    path=f"{item}.name")
        out.append((name, _str(header, "value", item)))
    return tuple(out)


def _http_get(obj: Mapping[str, Any], path: str) -> handlers.HTTPGetAction:
    scheme = _str(obj, "scheme", path, "HTTP")
    if scheme not in ("HTTP", "HTTPS"):
        raise probes.ProbeError(f'unsupported value "{scheme}": one of HTTP, HTTPS',
                                path=_join(path, "scheme"))
    probe_path = _str(obj, "path", path, "/")
    return handlers.HTTPGetAction(
        port=_port(obj, path),
        path=probe_path if probe_path.startswith("/") else f"/{probe_path}",
        host=_str(obj, "host", path),
        scheme="HTTPS" if scheme == "HTTPS" else "HTTP",
        headers=_headers(obj, path),
    )


def _handler(raw: Mapping[str, Any], path: str) -> handlers.Handler:
    present = [key for key in HANDLERS if raw.get(key) is not None]
    if not present:
        raise probes.ProbeError(
            "must specify a handler type: one of exec, httpGet, tcpSocket, grpc", path=path)
    if len(present) > 1:  # reported at the second handler, as the API server does
        raise probes.ProbeError(
            f"may not specify more than 1 handler type (found {', '.join(present)})",
            path=_join(path, present[1]))
    key = present[0]
    obj = _map(raw, key, path)
    sub = _join(path, key)
    _check_fields(obj, _HANDLER_FIELDS[key], sub)
    if key == "exec":
        return _exec(obj, sub)
    if key == "httpGet":
        return _http_get(obj, sub)
    if key == "tcpSocket":
        return handlers.TCPSocketAction(port=_port(obj, sub), host=_str(obj, "host", sub))
    port = _port(obj, sub, named=False)
    assert isinstance(port, int)
    return handlers.GRPCAction(port=port, service=_str(obj, "service", sub))


def parse_handler(raw: Mapping[str, Any], *, path: str = "") -> handlers.Handler:
    """One handler (exec, httpGet, tcpSocket, grpc) as in probes and lifecycle hooks."""
    return _handler(raw, path)


def _grace(raw: Mapping[str, Any], kind: probes.ProbeKind, path: str) -> int | None:
    key = "terminationGracePeriodSeconds"
    if raw.get(key) is None:
        return None
    if kind == "readiness":
        raise probes.ProbeError("must not be set for readinessProbes", path=_join(path, key))
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= INT64_MAX:
        raise probes.ProbeError(f"{_shown(value)}: must be an integer greater than 0 (and at most "
                                f"{INT64_MAX})", path=_join(path, key))
    return value


def parse_probe(
    raw: Mapping[str, Any], kind: probes.ProbeKind, *, path: str = ""
) -> handlers.Probe:
    """Validate one probe mapping (as written) and fill in the defaults. Raises ProbeError.

    `path` prefixes field paths in errors, e.g. `spec.containers[0].livenessProbe`.
    """
    path = path or f"{kind}Probe"
    _check_fields(raw, _PROBE_FIELDS, path)
    probe = handlers.Probe(
        handler=_handler(raw, path),
        initial_delay_seconds=_int(raw, "initialDelaySeconds", path, 0),
        period_seconds=_int(raw, "periodSeconds", path, 10),
        timeout_seconds=_int(raw, "timeoutSeconds", path, 1),
        success_threshold=_int(raw, "successThreshold", path, 1),
        failure_threshold=_int(raw, "failureThreshold", path, 3),
        termination_grace_period_seconds=_grace(raw, kind, path),
    )
    if kind != "readiness" and probe.success_threshold != 1:
        raise probes.ProbeError(f"{probe.success_threshold}: must be 1 (for {kind} probes)",
                                path=_join(path, "successThreshold"))
    return probe
