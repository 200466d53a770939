"""One progress line per pod for `nodelet run` on a terminal (pure: no I/O, no terminal library).

    web-node  ✓Scheduled ✓Initialized ✓ReadyToStart ✓ContainersReady ✓Ready  1.23s
    vm-node   ✓Scheduled ✓Initialized ·ReadyToStart ·ContainersReady ·Ready  4.02s
              ✗ FailedCreatePodSandBox: failed to get sandbox runtime: no runtime for "gvisor"...

`pod_progress` reduces a pod's status (and its latest warning event) to a `PodProgress`;
`segments` lays that out as styled text segments, which the progress service hands to the
terminal library. Styles are names (`ok`, `pending`, `fail`, `name`, `time`), not colours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from nodelet.model.core import status as st

Style = Literal["", "name", "ok", "pending", "fail", "time"]

# Display order and short labels; both names of the KEP-3085 condition map to ReadyToStart.
CONDITIONS = (
    ("Scheduled", (st.POD_SCHEDULED,)),
    ("Initialized", (st.INITIALIZED,)),
    ("ReadyToStart", (st.POD_READY_TO_START_CONTAINERS, st.POD_HAS_NETWORK)),
    ("ContainersReady", (st.CONTAINERS_READY,)),
    ("Ready", (st.READY,)),
)

# Container waiting reasons that mean something went wrong (not just "starting").
FAILED_WAITING = frozenset({
    "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull",
    "InvalidImageName", "CreateContainerError", "CreateContainerConfigError",
    "RunContainerError", "PostStartHookError",
})

MARK_TRUE = "✓"
MARK_NOT_YET = "·"
MARK_FAILED = "✗"


@dataclass(frozen=True)
class WarningEvent:
    """The pod's latest Warning event (reason, message), as a hint to why it is stuck."""

    reason: str
    message: str


@dataclass(frozen=True)
class PodProgress:
    name: str
    conditions: tuple[tuple[str, bool], ...]  # (label, is True)
    seconds: float | None  # first seen → Ready (or → now while not Ready)
    failure: str = ""  # "Reason: message", empty when nothing is wrong


def _is_true(pod_status: st.PodStatus, types: tuple[str, ...]) -> bool:
    return any(
        (c := pod_status.condition(t)) is not None and c.status == "True" for t in types
    )


def _elapsed(pod_status: st.PodStatus, first_seen: datetime | None, now: datetime) -> float | None:
    if first_seen is None:
        return None
    ready = pod_status.condition(st.READY)
    end = ready.last_transition_time if ready is not None and ready.status == "True" else None
    return max(((end or now) - first_seen).total_seconds(), 0.0)


def _container_failure(pod_status: st.PodStatus) -> str:
    for container in pod_status.init_container_statuses + pod_status.container_statuses:
        state = container.state
        if isinstance(state, st.ContainerStateWaiting) and state.reason in FAILED_WAITING:
            return f"{container.name}: {state.reason}: {state.message}".rstrip(": ")
    return ""


def failure_of(pod_status: st.PodStatus, warning: WarningEvent | None) -> str:
    """What is wrong with the pod, in one line; empty when nothing is (or it is Ready)."""
    if pod_status.phase == "Failed":
        return f"{pod_status.reason or 'Failed'}: {pod_status.message}".rstrip(": ")
    if _is_true(pod_status, (st.READY,)):
        return ""
    failed = _container_failure(pod_status)
    if failed:
        return failed
    sandbox = next((c for t in CONDITIONS[2][1] if (c := pod_status.condition(t)) is not None),
                   None)
    if sandbox is not None and sandbox.status == "False" and sandbox.message:
        reason = warning.reason if warning is not None else sandbox.reason
        return f"{reason}: {sandbox.message}"
    if warning is not None:
        return f"{warning.reason}: {warning.message}"
    return ""


def pod_progress(
    name: str,
    pod_status: st.PodStatus,
    *,
    first_seen: datetime | None,
    now: datetime,
    warning: WarningEvent | None = None,
) -> PodProgress:
    return PodProgress(
        name=name,
        conditions=tuple((label, _is_true(pod_status, types)) for label, types in CONDITIONS),
        seconds=_elapsed(pod_status, first_seen, now),
        failure=failure_of(pod_status, warning),
    )


# gRPC's wrapping adds nothing a reader of one line needs.
_RPC_PREFIX = re.compile(r"rpc error: code = \w+ desc = ")


def _shorten(text: str, width: int) -> str:
    """One line of at most `width` characters. Go error chains put the cause last, so the
    middle goes: `no pod sandbox exists: failed to … no runtime for "gvisor" is configured`."""
    text = _RPC_PREFIX.sub("", " ".join(text.split()))
    if len(text) <= width:
        return text
    # Keep the reason ("FailedCreatePodSandBox: ") whole when there is room for it.
    head = max(width // 3, min(text.find(": ") + 2, width // 2))
    tail = max(width - head - 1, 0)
    return text[:head] + "…" + (text[-tail:] if tail else "")


def segments(
    progress: PodProgress, *, name_width: int, width: int = 120
) -> tuple[tuple[str, Style], ...]:
    """The line (and, on failure, a second indented line) as (text, style) segments."""
    out: list[tuple[str, Style]] = [(progress.name.ljust(name_width), "name"), ("  ", "")]
    for i, (label, true) in enumerate(progress.conditions):
        out.append((" " if i else "", ""))
        if true:
            out.append((MARK_TRUE + label, "ok"))
        else:
            out.append((MARK_NOT_YET + label, "pending"))
    if progress.seconds is not None:
        out += [("  ", ""), (f"{progress.seconds:.2f}s", "time")]
    if progress.failure:
        indent = " " * (name_width + 2)
        room = max(width - len(indent) - 2, 20)
        out += [("\n" + indent, ""), (f"{MARK_FAILED} {_shorten(progress.failure, room)}", "fail")]
    return tuple(out)


def plain(parts: tuple[tuple[str, Style], ...]) -> str:
    return "".join(text for text, _ in parts)
