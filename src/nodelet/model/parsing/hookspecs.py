"""Parsing container lifecycle hooks (postStart, preStop) into `handlers.Lifecycle` (pure).

A hook has exactly one handler: exec, httpGet or tcpSocket (as in probes), or sleep (seconds).
`lifecycle` is the API server's validateLifecycle, run when the manifest is read; it raises the
`fields.ManifestError` tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodelet.model.core import fields, handlers, probes
from nodelet.model.parsing import podfields, probespecs

LIFECYCLE_FIELDS = frozenset({*handlers.HOOK_KINDS, "stopSignal"})

# The stop signals the API server accepts for a Linux pod (validateStopSignal): the standard
# ones, then the real-time ones by their distance from SIGRTMIN and SIGRTMAX.
LINUX_STOP_SIGNALS: tuple[str, ...] = (
    *(f"SIG{name}" for name in (
        "ABRT", "ALRM", "BUS", "CHLD", "CLD", "CONT", "FPE", "HUP", "ILL", "INT", "IO", "IOT",
        "KILL", "PIPE", "POLL", "PROF", "PWR", "QUIT", "SEGV", "STKFLT", "STOP", "SYS", "TERM",
        "TRAP", "TSTP", "TTIN", "TTOU", "URG", "USR1", "USR2", "VTALRM", "WINCH", "XCPU",
        "XFSZ")),
    "SIGRTMIN", *(f"SIGRTMIN+{n}" for n in range(1, 16)),
    *(f"SIGRTMAX-{n}" for n in range(14, 0, -1)), "SIGRTMAX",
)
WINDOWS_STOP_SIGNALS = ("SIGKILL", "SIGTERM")
# A LifecycleHandler: the probes' handlers without grpc, and sleep.
_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")
_SLEEP_FIELDS = frozenset({"seconds"})


def _sleep(raw: Any, path: str) -> handlers.SleepAction:
    """`sleep.seconds`: an int64 that is not negative; unset is 0 (Go's zero value)."""
    if not isinstance(raw, Mapping):
        raise probes.ProbeError("expected a mapping with seconds", path=path)
    seconds = 0 if raw.get("seconds") is None else raw["seconds"]
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
        raise probes.ProbeError("sleep.seconds must be a non-negative integer", path=path)
    if seconds > probespecs.INT64_MAX:
        raise probes.ProbeError(f"sleep.seconds must be at most {probespecs.INT64_MAX}", path=path)
    return handlers.SleepAction(seconds)


def parse_hook(raw: Any, *, path: str) -> handlers.Hook:
    """One hook (`lifecycle.postStart` or `lifecycle.preStop` at `path`). Raises ProbeError."""
    if not isinstance(raw, Mapping):
        raise probes.ProbeError("expected a mapping with one handler", path=path)
    present = [key for key in _HANDLERS if raw.get(key) is not None]
    if not present:
        raise probes.ProbeError(
            "must specify a handler type: one of exec, httpGet, tcpSocket, sleep", path=path
        )
    if len(present) > 1:  # reported at the second handler, as the API server does
        raise probes.ProbeError(
            f"may not specify more than 1 handler type (found {', '.join(present)})",
            path=f"{path}.{present[1]}",
        )
    if present[0] == "sleep":
        return _sleep(raw["sleep"], f"{path}.sleep")
    handler = probespecs.parse_handler({present[0]: raw[present[0]]}, path=path)
    assert not isinstance(handler, handlers.GRPCAction)  # not among _HANDLERS
    return handler


def _check_sleep(hook: handlers.Hook, grace: int | None, path: str) -> None:
    """validateSleepAction (with PodLifecycleSleepActionAllowZero, on since 1.33): a sleep
    longer than the pod's grace period could never finish."""
    if isinstance(hook, handlers.SleepAction) and grace is not None and hook.seconds > grace:
        raise fields.InvalidValueError(
            f"{hook.seconds}: must be non-negative and less than terminationGracePeriodSeconds "
            f"({grace})",
            path=f"{path}.sleep",
        )


def _check_fields(raw: Mapping[str, Any], path: str) -> None:
    fields.check_fields(raw, frozenset(_HANDLERS), path)
    sleep = raw.get("sleep")
    if isinstance(sleep, Mapping):
        fields.check_fields(sleep, _SLEEP_FIELDS, f"{path}.sleep")


def lifecycle(
    obj: Mapping[str, Any], path: str, *, grace: int | None, strict: bool, os_name: str = ""
) -> handlers.Lifecycle:
    """The container's `lifecycle` (`obj` at `path`): each hook exactly one valid handler, a
    sleep within the pod's grace period `grace` (None: not known, not checked), a stop signal
    only with the pod's `spec.os.name` (`os_name`) and one of its OS's."""
    raw = fields.mapping(obj, "lifecycle", path)
    path = f"{path}.lifecycle"
    if strict:
        fields.check_fields(raw, LIFECYCLE_FIELDS, path)
        podfields.check_refused(raw, "lifecycle", path)
    found: dict[str, handlers.Hook] = {}
    for kind in handlers.HOOK_KINDS:
        if raw.get(kind) is None:
            continue
        hook_path = f"{path}.{kind}"
        if strict and isinstance(raw[kind], Mapping):
            _check_fields(raw[kind], hook_path)
        try:
            hook = parse_hook(raw[kind], path=hook_path)
        except probes.ProbeError as exc:
            raise fields.InvalidValueError(exc.message, path=exc.path) from exc
        _check_sleep(hook, grace, hook_path)
        found[kind] = hook
    return handlers.Lifecycle(post_start=found.get("postStart"), pre_stop=found.get("preStop"),
                              stop_signal=_stop_signal(raw, path, os_name))


def _stop_signal(raw: Mapping[str, Any], path: str, os_name: str) -> str:
    """The API server's validateStopSignal."""
    signal = fields.string(raw, "stopSignal", path)
    if not signal:
        return ""
    where = f"{path}.stopSignal"
    if not os_name:
        raise fields.InvalidValueError(
            "forbidden: may not be set for containers with empty `spec.os.name`", path=where)
    allowed = WINDOWS_STOP_SIGNALS if os_name == "windows" else LINUX_STOP_SIGNALS
    return fields.one_of(signal, allowed, where)
