"""Probe and lifecycle-hook values (pure): what a container's probes and hooks do, with the
API's defaults filled in. `probespecs` and `hookspecs` parse them from the manifest once;
the prober and the hook runner only read these values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scheme = Literal["HTTP", "HTTPS"]


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
class SleepAction:
    seconds: int


# A LifecycleHandler: the probes' handlers without grpc, and sleep.
Hook = ExecAction | HTTPGetAction | TCPSocketAction | SleepAction
HookKind = Literal["postStart", "preStop"]
HOOK_KINDS: tuple[HookKind, ...] = ("postStart", "preStop")


@dataclass(frozen=True)
class Lifecycle:
    post_start: Hook | None = None
    pre_stop: Hook | None = None
    # lifecycle.stopSignal by its API name ("SIGUSR1"); "": the image's or the runtime's.
    stop_signal: str = ""

    def hook(self, kind: HookKind) -> Hook | None:
        return self.post_start if kind == "postStart" else self.pre_stop
