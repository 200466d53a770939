"""The progress lines of `nodelet run` on a terminal: table-driven, pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import status as st
from nodelet.model.reports import progress_lines as pl

T0 = datetime(2026, 12, 2, 11, 0, 0, tzinfo=UTC)
NOW = T0 + timedelta(seconds=5)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def cond(type_: str, value: str, seconds: float = 0.0, reason: str = "",
         message: str = "") -> st.PodCondition:
    return st.PodCondition(type_, value, reason, message, last_transition_time=at(seconds))  # type: ignore[arg-type]


def pod_status(*conditions: st.PodCondition, phase: str = "Pending", reason: str = "",
               message: str = "",
               containers: tuple[st.ContainerStatus, ...] = ()) -> st.PodStatus:
    return st.PodStatus(phase=phase, conditions=conditions, reason=reason, message=message,  # type: ignore[arg-type]
                        container_statuses=containers)


def waiting(name: str, reason: str, message: str = "") -> st.ContainerStatus:
    return st.ContainerStatus(name, "busybox", st.ContainerStateWaiting(reason, message))


READY_ALL = pod_status(
    cond(st.POD_SCHEDULED, "True"), cond(st.INITIALIZED, "True"),
    cond(st.POD_READY_TO_START_CONTAINERS, "True", 0.4), cond(st.CONTAINERS_READY, "True", 1.2),
    cond(st.READY, "True", 1.23), phase="Running")
SANDBOX_ERROR = ('no pod sandbox exists: failed to create pod sandbox: rpc error: code = Unknown '
                 'desc = failed to get sandbox runtime: no runtime for "gvisor" is configured')
NO_SANDBOX = pod_status(
    cond(st.POD_SCHEDULED, "True"), cond(st.INITIALIZED, "True"),
    cond(st.POD_READY_TO_START_CONTAINERS, "False", reason="PodSandboxNotReady",
         message=SANDBOX_ERROR),
    cond(st.CONTAINERS_READY, "False"), cond(st.READY, "False"))
STARTING = pod_status(
    cond(st.POD_SCHEDULED, "True"), cond(st.INITIALIZED, "True"),
    cond(st.POD_READY_TO_START_CONTAINERS, "True"), cond(st.CONTAINERS_READY, "False"),
    cond(st.READY, "False"), containers=(waiting("main", "ContainerCreating"),))
CRASHING = pod_status(
    cond(st.POD_SCHEDULED, "True"), cond(st.INITIALIZED, "True"),
    cond(st.POD_READY_TO_START_CONTAINERS, "True"), cond(st.CONTAINERS_READY, "False"),
    cond(st.READY, "False"),
    containers=(waiting("main", "CrashLoopBackOff", "back-off 10s restarting failed container"),))
OLD_NAME = pod_status(cond(st.POD_SCHEDULED, "True"), cond(st.POD_HAS_NETWORK, "True"))
MOUNT = 'MountVolume.SetUp failed for volume "vol" : configmap "cm" not found'
FAILED_MOUNT = pod_status(
    cond(st.POD_SCHEDULED, "True"),
    cond(st.POD_READY_TO_START_CONTAINERS, "False", reason="PodSandboxNotReady",
         message=MOUNT))
FAILED_PHASE = pod_status(cond(st.POD_SCHEDULED, "True"), phase="Failed",
                          reason="DeadlineExceeded", message="Pod was active too long")


@pytest.mark.parametrize(
    ("status", "warning", "marks", "seconds", "failure"),
    [
        (READY_ALL, None, "✓✓✓✓✓", 1.23, ""),
        # A warning from before the pod became Ready no longer explains anything.
        (READY_ALL, pl.WarningEvent("BackOff", "old"), "✓✓✓✓✓", 1.23, ""),
        (STARTING, None, "✓✓✓··", 5.0, ""),
        (NO_SANDBOX, pl.WarningEvent("FailedCreatePodSandBox", "x"), "✓✓···", 5.0,
         f"FailedCreatePodSandBox: {SANDBOX_ERROR}"),
        (NO_SANDBOX, None, "✓✓···", 5.0, f"PodSandboxNotReady: {SANDBOX_ERROR}"),
        (FAILED_MOUNT, pl.WarningEvent("FailedMount", MOUNT), "✓····", 5.0,
         f"FailedMount: {MOUNT}"),
        (CRASHING, pl.WarningEvent("BackOff", "Back-off restarting failed container"),
         "✓✓✓··", 5.0, "main: CrashLoopBackOff: back-off 10s restarting failed container"),
        (STARTING, pl.WarningEvent("Unhealthy", "Readiness probe failed"), "✓✓✓··", 5.0,
         "Unhealthy: Readiness probe failed"),
        (OLD_NAME, None, "✓·✓··", 5.0, ""),
        (FAILED_PHASE, None, "✓····", 5.0, "DeadlineExceeded: Pod was active too long"),
        (st.PodStatus(), None, "·····", 5.0, ""),
    ],
    ids=["ready", "ready-old-warning", "starting", "sandbox-error-event", "sandbox-error",
         "failed-mount", "crashloop", "unhealthy", "pod-has-network", "failed-phase", "empty"],
)
def test_pod_progress(status: st.PodStatus, warning: pl.WarningEvent | None, marks: str,
                      seconds: float, failure: str) -> None:
    progress = pl.pod_progress("web-node", status, first_seen=T0, now=NOW, warning=warning)
    assert "".join("✓" if true else "·" for _, true in progress.conditions) == marks
    assert [label for label, _ in progress.conditions] == [
        "Scheduled", "Initialized", "ReadyToStart", "ContainersReady", "Ready"]
    assert progress.seconds == pytest.approx(seconds)
    assert progress.failure == failure


def test_no_first_seen_means_no_time() -> None:
    assert pl.pod_progress("p", READY_ALL, first_seen=None, now=NOW).seconds is None


@pytest.mark.parametrize(
    ("progress", "text", "styles"),
    [
        (pl.PodProgress("web-node", (("Scheduled", True), ("Ready", True)), 1.234),
         "web-node    ✓Scheduled ✓Ready  1.23s",
         {"✓Scheduled": "ok", "✓Ready": "ok", "1.23s": "time", "web-node  ": "name"}),
        (pl.PodProgress("vm", (("Scheduled", True), ("Ready", False)), None,
                        "FailedMount: a\nb"),
         "vm          ✓Scheduled ·Ready\n            ✗ FailedMount: a b",
         {"·Ready": "pending", "✗ FailedMount: a b": "fail"}),
        (pl.PodProgress("vm", (("Ready", False),), 2.0, "a" * 100 + "z" * 100),
         "vm          ·Ready  2.00s\n            ✗ " + "a" * 15 + "…" + "z" * 30,
         {}),
        (pl.PodProgress("vm", (("Ready", False),), 2.0,
                        "X: rpc error: code = Unknown desc = no runtime"),
         "vm          ·Ready  2.00s\n            ✗ X: no runtime",
         {}),
    ],
    ids=["ready", "failure-one-line", "failure-shortened-in-the-middle", "rpc-prefix-dropped"],
)
def test_segments(progress: pl.PodProgress, text: str, styles: dict[str, str]) -> None:
    parts = pl.segments(progress, name_width=10, width=60)
    assert pl.plain(parts) == text
    by_text = dict(parts)
    for part, style in styles.items():
        assert by_text[part] == style


def test_shortened_failure_keeps_the_reason_and_the_cause() -> None:
    failure = ("FailedCreatePodSandBox: no pod sandbox exists: failed to create pod sandbox: "
               "rpc error: code = Unknown desc = failed to get sandbox runtime: "
               'no runtime for "gvisor" is configured')
    progress = pl.PodProgress("vm", (("Ready", False),), None, failure)
    second = pl.plain(pl.segments(progress, name_width=2, width=80)).splitlines()[1]
    assert len(second) <= 80
    assert second.startswith("    ✗ FailedCreatePodSandBox: …")
    assert second.endswith('no runtime for "gvisor" is configured')
    assert "rpc error" not in second
