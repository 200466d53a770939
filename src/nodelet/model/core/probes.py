"""Running container probes (pure, no I/O): ports, URLs and the kubelet's result-threshold
state machine over the `handlers.Probe` values `probespecs` parsed. `observe` is the kubelet's
`worker.doProbe` bookkeeping (`pkg/kubelet/prober/worker.go`): a result is reported only after
`successThreshold` / `failureThreshold` equal attempts in a row, and a liveness or startup probe
that reports a failure is put on hold until the container is replaced.

Exceptions::

    ProbeError          a probe that cannot run; a ValueError with `.path` (the field, such as
                        `livenessProbe.httpGet.port`) and `.message` (what to fix): raised by
                        `probespecs` for an invalid probe and by `resolve_port` for a port name
                        the container does not declare.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from nodelet.model.core import handlers, pods

ProbeKind = Literal["startup", "liveness", "readiness"]
# What one attempt gave: "error" means the prober could not even try (e.g. an unknown port
# name); the kubelet throws such attempts away instead of counting them.
# "warning": a success the kubelet reports with a ProbeWarning event (an HTTP redirect to
# another host).
Outcome = Literal["success", "warning", "failure", "error"]
Result = Literal["success", "failure"]

# The event messages' prefixes, as the kubelet capitalises the probe type.
KIND_TITLES: Mapping[ProbeKind, str] = {
    "startup": "Startup", "liveness": "Liveness", "readiness": "Readiness",
}


class ProbeError(ValueError):
    """A probe that cannot run; `path` names the field, `message` says what to fix."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


# --- values ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """What one probe attempt gave, and the output for the event (kubelet wording)."""

    outcome: Outcome
    output: str = ""


@dataclass(frozen=True)
class ContainerProbes:
    startup: handlers.Probe | None = None
    liveness: handlers.Probe | None = None
    readiness: handlers.Probe | None = None

    def of(self, kind: ProbeKind) -> handlers.Probe | None:
        return getattr(self, kind)  # type: ignore[no-any-return]

    @property
    def kinds(self) -> tuple[ProbeKind, ...]:
        """The kinds this container has, startup first."""
        all_kinds: tuple[ProbeKind, ...] = ("startup", "liveness", "readiness")
        return tuple(k for k in all_kinds if self.of(k) is not None)


def container_probes(container: pods.Container) -> ContainerProbes:
    """The container's three probes (None where absent)."""
    return ContainerProbes(startup=container.startup_probe, liveness=container.liveness_probe,
                           readiness=container.readiness_probe)


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


def http_url(action: handlers.HTTPGetAction, *, pod_ip: str, port: int) -> str:
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


def observe(
    state: ProbeState, outcome: Outcome, *, kind: ProbeKind, probe: handlers.Probe
) -> ProbeState:
    """The state after one attempt with `outcome`; errors and attempts on hold change nothing."""
    if outcome == "error" or state.on_hold:
        return state
    if outcome == "warning":
        outcome = "success"
    run = state.run + 1 if outcome == state.last else 1
    state = dataclasses.replace(state, last=outcome, run=run)
    threshold = probe.success_threshold if outcome == "success" else probe.failure_threshold
    if run < threshold:
        return state
    if outcome == "failure" and kind != "readiness":
        # The container is restarted: stop probing (and counting) until a new container ID.
        return dataclasses.replace(state, result="failure", run=0, on_hold=True)
    return dataclasses.replace(state, result=outcome)


def warning_message(kind: ProbeKind, output: str) -> str:
    """The `ProbeWarning` event message, as the kubelet words it."""
    return f"{KIND_TITLES[kind]} probe warning: {output.rstrip()}"


def failure_message(kind: ProbeKind, output: str, *, errored: bool = False) -> str:
    """The `Unhealthy` event message, as the kubelet words it."""
    verb = "errored" if errored else "failed"
    return f"{KIND_TITLES[kind]} probe {verb}: {output.rstrip()}"
