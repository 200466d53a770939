"""Container probes as values, and the kubelet's result-threshold state machine (pure, no I/O).

`parse_probe` validates a `livenessProbe` / `readinessProbe` / `startupProbe` mapping as written
in the manifest (the API server's validation and v1 defaults: initialDelaySeconds 0,
periodSeconds 10, timeoutSeconds 1, successThreshold 1, failureThreshold 3; a 0 reads as "not
set", as the API's defaulting does) into a frozen `Probe`. `observe` is the kubelet's
`worker.doProbe` bookkeeping (`pkg/kubelet/prober/worker.go`): a result is reported only after
`successThreshold` / `failureThreshold` equal attempts in a row, and a liveness or startup probe
that reports a failure is put on hold until the container is replaced.

Exceptions::

    ProbeError          a probe that cannot run; a ValueError with `.path` (the field, such as
                        `livenessProbe.httpGet.port`) and `.message` (what to fix). Also raised
                        by `resolve_port` for a port name the container does not declare.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodelet.model import names, pods

ProbeKind = Literal["startup", "liveness", "readiness"]
# What one attempt gave: "error" means the prober could not even try (e.g. an unknown port
# name); the kubelet throws such attempts away instead of counting them.
Outcome = Literal["success", "failure", "error"]
Result = Literal["success", "failure"]
Scheme = Literal["HTTP", "HTTPS"]

# The event messages' prefixes, as the kubelet capitalises the probe type.
KIND_TITLES: Mapping[ProbeKind, str] = {
    "startup": "Startup", "liveness": "Liveness", "readiness": "Readiness",
}
_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_PROBE_FIELDS = frozenset({
    *_HANDLERS, "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold",
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


class ProbeError(ValueError):
    """A probe that cannot run; `path` names the field, `message` says what to fix."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


# --- values ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecAction:
    command: tuple[str, ...]


@dataclass(frozen=True)
class HTTPGetAction:
    port: int | str  # a number, or the name of one of the container's ports
    path: str = "/"
    host: str = ""  # empty: the pod IP
    scheme: Scheme = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TCPSocketAction:
    port: int | str
    host: str = ""


@dataclass(frozen=True)
class GRPCAction:
    port: int
    service: str = ""  # the `service` of grpc.health.v1.HealthCheckRequest


Handler = ExecAction | HTTPGetAction | TCPSocketAction | GRPCAction


@dataclass(frozen=True)
class Attempt:
    """What one probe attempt gave, and the output for the event (kubelet wording)."""

    outcome: Outcome
    output: str = ""


@dataclass(frozen=True)
class Probe:
    """One probe with the API's defaults filled in; all times in whole seconds."""

    handler: Handler
    initial_delay_seconds: int = 0
    period_seconds: int = 10
    timeout_seconds: int = 1
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace_period_seconds: int | None = None


@dataclass(frozen=True)
class ContainerProbes:
    startup: Probe | None = None
    liveness: Probe | None = None
    readiness: Probe | None = None

    def of(self, kind: ProbeKind) -> Probe | None:
        return getattr(self, kind)  # type: ignore[no-any-return]

    @property
    def kinds(self) -> tuple[ProbeKind, ...]:
        """The kinds this container has, startup first."""
        all_kinds: tuple[ProbeKind, ...] = ("startup", "liveness", "readiness")
        return tuple(k for k in all_kinds if self.of(k) is not None)


# --- parsing ---------------------------------------------------------------------------------


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_fields(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            name = key if isinstance(key, str) else _shown(key)
            raise ProbeError(f'unknown field "{name}" (known: {known})', path=_join(path, name))


def _int(obj: Mapping[str, Any], key: str, path: str, default: int) -> int:
    """A non-negative int32; 0 or absent means `default` (the API's defaulting)."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProbeError(f"expected an integer, got {_shown(value)}", path=_join(path, key))
    if value < 0:
        raise ProbeError(f"{_shown(value)}: must be greater than or equal to 0",
                         path=_join(path, key))
    if value > INT32_MAX:
        raise ProbeError(f"{_shown(value)} is out of range: must be at most {INT32_MAX} (an "
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
        raise ProbeError(f"expected a string, got {_shown(value)}; quote it",
                         path=_join(path, key))
    return value or default


def _map(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise ProbeError(f"expected a mapping, got {_shown(value)}", path=_join(path, key))
    return value


def _port(obj: Mapping[str, Any], path: str, *, named: bool = True) -> int | str:
    value = obj.get("port")
    path = _join(path, "port")
    if value is None or value == "":
        raise ProbeError("required: a port number" + (" or name" if named else ""), path=path)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= 65535:
            raise ProbeError(f"{_shown(value)}: must be between 1 and 65535, inclusive",
                             path=path)
        return value
    if named and isinstance(value, str):
        problem = names.port_name_problem(value)
        if problem is not None:
            raise ProbeError(f"{_shown(value)} is not a valid port name: {problem} (or use "
                             "the port number)", path=path)
        return value
    expected = "an integer or a port name" if named else "an integer"
    raise ProbeError(f"expected {expected}, got {_shown(value)}", path=path)


def _exec(obj: Mapping[str, Any], path: str) -> ExecAction:
    command = obj.get("command")
    if not command:
        raise ProbeError("required: a non-empty list of strings", path=_join(path, "command"))
    if not isinstance(command, list | tuple) or not all(isinstance(c, str) for c in command):
        raise ProbeError(f"expected a list of strings, got {_shown(command)}",
                         path=_join(path, "command"))
    return ExecAction(command=tuple(command))


def _headers(obj: Mapping[str, Any], path: str) -> tuple[tuple[str, str], ...]:
    headers = obj.get("httpHeaders") or []
    if not isinstance(headers, list | tuple):
        raise ProbeError("expected a list of {name, value}", path=_join(path, "httpHeaders"))
    out = []
    for i, header in enumerate(headers):
        item = f"{_join(path, 'httpHeaders')}[{i}]"
        if not isinstance(header, Mapping):
            raise ProbeError("expected a mapping with name and value", path=item)
        _check_fields(header, frozenset({"name", "value"}), item)
        name = _str(header, "name", item)
        if not _HEADER_NAME.fullmatch(name):
            raise ProbeError(f"{_shown(name)} is not a valid HTTP header name: a valid HTTP "
                             "header must consist of alphanumeric characters or '-'",
                             path=f"{item}.name")
        out.append((name, _str(header, "value", item)))
    return tuple(out)


def _http_get(obj: Mapping[str, Any], path: str) -> HTTPGetAction:
    scheme = _str(obj, "scheme", path, "HTTP")
    if scheme not in ("HTTP", "HTTPS"):
        raise ProbeError(f'unsupported value "{scheme}": one of HTTP, HTTPS',
                         path=_join(path, "scheme"))
    probe_path = _str(obj, "path", path, "/")
    return HTTPGetAction(
        port=_port(obj, path),
        path=probe_path if probe_path.startswith("/") else f"/{probe_path}",
        host=_str(obj, "host", path),
        scheme="HTTPS" if scheme == "HTTPS" else "HTTP",
        headers=_headers(obj, path),
    )


def _handler(raw: Mapping[str, Any], path: str) -> Handler:
    present = [key for key in _HANDLERS if raw.get(key) is not None]
    if not present:
        raise ProbeError("must specify a handler type: one of exec, httpGet, tcpSocket, grpc",
                         path=path)
    if len(present) > 1:  # reported at the second handler, as the API server does
        raise ProbeError(f"may not specify more than 1 handler type (found {', '.join(present)})",
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
        return TCPSocketAction(port=_port(obj, sub), host=_str(obj, "host", sub))
    port = _port(obj, sub, named=False)
    assert isinstance(port, int)
    return GRPCAction(port=port, service=_str(obj, "service", sub))


def parse_handler(raw: Mapping[str, Any], *, path: str = "") -> Handler:
    """One handler (exec, httpGet, tcpSocket, grpc) as in probes and lifecycle hooks."""
    return _handler(raw, path)


def _grace(raw: Mapping[str, Any], kind: ProbeKind, path: str) -> int | None:
    key = "terminationGracePeriodSeconds"
    if raw.get(key) is None:
        return None
    if kind == "readiness":
        raise ProbeError("must not be set for readinessProbes", path=_join(path, key))
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= INT64_MAX:
        raise ProbeError(f"{_shown(value)}: must be an integer greater than 0 (and at most "
                         f"{INT64_MAX})", path=_join(path, key))
    return value


def parse_probe(raw: Mapping[str, Any], kind: ProbeKind, *, path: str = "") -> Probe:
    """Validate one probe mapping (as written) and fill in the defaults. Raises ProbeError.

    `path` prefixes field paths in errors, e.g. `spec.containers[0].livenessProbe`.
    """
    path = path or f"{kind}Probe"
    _check_fields(raw, _PROBE_FIELDS, path)
    probe = Probe(
        handler=_handler(raw, path),
        initial_delay_seconds=_int(raw, "initialDelaySeconds", path, 0),
        period_seconds=_int(raw, "periodSeconds", path, 10),
        timeout_seconds=_int(raw, "timeoutSeconds", path, 1),
        success_threshold=_int(raw, "successThreshold", path, 1),
        failure_threshold=_int(raw, "failureThreshold", path, 3),
        termination_grace_period_seconds=_grace(raw, kind, path),
    )
    if kind != "readiness" and probe.success_threshold != 1:
        raise ProbeError(f"{probe.success_threshold}: must be 1 (for {kind} probes)",
                         path=_join(path, "successThreshold"))
    return probe


def container_probes(container: pods.Container, *, path: str = "") -> ContainerProbes:
    """The container's three probes, parsed (None where absent). Raises ProbeError."""
    prefix = f"{path}." if path else ""

    def one(raw: Mapping[str, Any] | None, kind: ProbeKind) -> Probe | None:
        return None if raw is None else parse_probe(raw, kind, path=f"{prefix}{kind}Probe")

    return ContainerProbes(
        startup=one(container.startup_probe, "startup"),
        liveness=one(container.liveness_probe, "liveness"),
        readiness=one(container.readiness_probe, "readiness"),
    )


def resolve_port(port: int | str, container: pods.Container) -> int:
    """A probe port as a number: a name is looked up in the container's ports.

    Raises ProbeError naming the container when it declares no port of that name.
    """
    if isinstance(port, int):
        return port
    for declared in container.ports:
        if declared.name == port:
            return declared.container_port
    names = ", ".join(p.name for p in container.ports if p.name) or "none"
    raise ProbeError(
        f'container "{container.name}" has no port named "{port}" (named ports: {names})',
        path="port",
    )


def http_url(action: HTTPGetAction, *, pod_ip: str, port: int) -> str:
    """The URL an httpGet probe requests: the probe's host, or the pod IP (IPv6 in brackets)."""
    host = action.host or pod_ip
    if ":" in host:
        host = f"[{host}]"
    return f"{action.scheme.lower()}://{host}:{port}{action.path}"


# --- the result-threshold state machine ------------------------------------------------------


@dataclass(frozen=True)
class ProbeState:
    """What one probe worker knows about one container instance.

    `result` is the reported result (None: unknown yet); `last` and `run` count equal attempts
    in a row; `on_hold`: a liveness/startup failure was reported, probing stops until the
    container is replaced.
    """

    result: Result | None
    last: Result | None = None
    run: int = 0
    on_hold: bool = False


def initial_state(kind: ProbeKind) -> ProbeState:
    """Before any attempt: not ready, alive, start-up unknown (as the kubelet's workers)."""
    initial: Mapping[ProbeKind, Result | None] = {
        "readiness": "failure", "liveness": "success", "startup": None,
    }
    return ProbeState(result=initial[kind])


def observe(state: ProbeState, outcome: Outcome, *, kind: ProbeKind, probe: Probe) -> ProbeState:
    """The state after one attempt with `outcome`; errors and attempts on hold change nothing."""
    if outcome == "error" or state.on_hold:
        return state
    run = state.run + 1 if outcome == state.last else 1
    state = dataclasses.replace(state, last=outcome, run=run)
    threshold = probe.success_threshold if outcome == "success" else probe.failure_threshold
    if run < threshold:
        return state
    if outcome == "failure" and kind != "readiness":
        # The container is restarted: stop probing (and counting) until a new container ID.
        return dataclasses.replace(state, result="failure", run=0, on_hold=True)
    return dataclasses.replace(state, result=outcome)


def failure_message(kind: ProbeKind, output: str, *, errored: bool = False) -> str:
    """The `Unhealthy` event message, as the kubelet words it."""
    verb = "errored" if errored else "failed"
    return f"{KIND_TITLES[kind]} probe {verb}: {output.rstrip()}"
