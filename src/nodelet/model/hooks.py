"""Container lifecycle hooks (postStart, preStop), parsed (pure).

A hook has one handler: exec, httpGet or tcpSocket (as in probes), or sleep (seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodelet.model import pods, probes

HookKind = Literal["postStart", "preStop"]


@dataclass(frozen=True)
class SleepAction:
    seconds: int


Hook = probes.Handler | SleepAction


def container_hook(container: pods.Container, kind: HookKind) -> Hook | None:
    """The container's hook of that kind, or None. Raises probes.ProbeError when invalid."""
    lifecycle = container.lifecycle or {}
    raw = lifecycle.get(kind)
    if raw is None:
        return None
    path = f"lifecycle.{kind}"
    if not isinstance(raw, Mapping):
        raise probes.ProbeError("must be an object", path=path)
    sleep: Any = raw.get("sleep")
    if sleep is not None:
        seconds = sleep.get("seconds") if isinstance(sleep, Mapping) else None
        if not isinstance(seconds, int) or seconds < 0:
            raise probes.ProbeError("sleep.seconds must be a non-negative integer", path=path)
        return SleepAction(seconds)
    return probes.parse_handler(raw, path=path)
