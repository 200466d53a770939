"""nodelet's alpha conditions (nodelet.dev/VolumesReady, IPv4Ready, IPv6Ready) in analyze:
what stuck pods wait for, per-condition readiness, and nothing new for dumps without them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_analysis import T, cond, pod_list, started, stuck

from nodelet.model.reports import analysis as an
from nodelet.model.reports import analysis_html, analysis_report

V4, V6, VOL = "nodelet.dev/IPv4Ready", "nodelet.dev/IPv6Ready", "nodelet.dev/VolumesReady"
MOUNT = 'MountVolume.SetUp failed for volume "data" : secret "db" not found'


def with_conditions(doc: dict[str, Any], *extra: dict[str, Any]) -> dict[str, Any]:
    doc["status"]["conditions"] += list(extra)
    return doc


@pytest.mark.parametrize(
    ("extra", "blocked"),
    [
        ([], None),
        ([cond(VOL, "False", 1, "FailedMount", MOUNT)], f"volumes (FailedMount): {MOUNT}"),
        ([cond(VOL, "False", 1, "VolumesNotReady", "volumes are not set up yet")],
         "volumes (VolumesNotReady): volumes are not set up yet"),
        ([cond(VOL, "True", 1), cond(V4, "True", 2),
          cond(V6, "False", 1, "PodSandboxNoIPv6Address", "pod sandbox has no IPv6 address")],
         "network: no IPv6 address"),
        ([cond(V6, "False", 1), cond(V4, "False", 1), cond(VOL, "False", 1)],
         "volumes: not set up; network: no IPv4 address; network: no IPv6 address"),
        ([cond(VOL, "True", 1), cond(V4, "True", 2)], None),
    ],
)
def test_stuck_pods_say_what_they_wait_for(extra: list[dict[str, Any]],
                                           blocked: str | None) -> None:
    analysis = an.analyze(pod_list(with_conditions(stuck("s"), *extra)))
    (s,) = analysis.stuck
    assert s.blocked_on == blocked
    out = analysis_report.to_json(analysis, source="pods", events_source=None)
    assert out["stuck"][0].get("blockedOn") == blocked
    notes = [n for n in analysis.notes if n.startswith("nodelet.dev")]
    assert bool(notes) == (blocked is not None)


def test_per_condition_readiness_counts_and_times() -> None:
    pods = pod_list(
        with_conditions(started("a", 0, 2, 2, 3, 3), cond(V4, "True", 2), cond(V6, "True", 4)),
        with_conditions(started("b", 0, 1, 1, 2, 2), cond(V4, "True", 1),
                        cond(V6, "False", 1, "PodSandboxNoIPv6Address")),
        with_conditions(stuck("c"), cond(VOL, "False", 1, "FailedMount", MOUNT)),
        started("d", 0, 1, 1, 1, 1),  # no nodelet.dev conditions: not counted
    )
    analysis = an.analyze(pods)
    got = {e.type: (e.pods, e.not_ready, e.stats) for e in analysis.extra}
    assert got == {
        VOL: (1, 1, None),
        V4: (2, 0, an.Stats(2, 1.0, 2.0, 2.0, 2.0)),
        V6: (2, 1, an.Stats(1, 4.0, 4.0, 4.0, 4.0)),
    }
    out = analysis_report.to_json(analysis, source="pods", events_source=None)
    assert out["extraConditions"][V6] == {
        "pods": 2, "notReady": 1,
        "scheduledToTrue": {"count": 1, "p50": 4.0, "p90": 4.0, "p99": 4.0, "max": 4.0}}
    text = analysis_report.table(analysis)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "nodelet.dev conditions" in text and "blocked on volumes (FailedMount)" in text
    row = next(line for line in text.splitlines() if line.startswith(V6))
    assert row.split() == [V6, "2", "1", "1", "4s", "4s", "4s", "4s"]
    page = analysis_html.report(analysis, source="pods", events_source=None)
    assert "<h2>nodelet.dev conditions</h2>" in page and "blocked on volumes" in page


def test_recreated_pods_are_left_out_of_the_ready_times() -> None:
    recreated = started("r", 0, 50, 50, 51, 51)
    recreated["status"]["containerStatuses"] = [{"name": "main", "restartCount": 0, "state": {
        "running": {"startedAt": T.format(5)}}}]
    analysis = an.analyze(pod_list(with_conditions(recreated, cond(V4, "True", 50))))
    assert analysis.recreated
    assert [(e.pods, e.not_ready, e.stats) for e in analysis.extra] == [(1, 0, None)]


def test_dumps_without_the_conditions_report_exactly_as_before() -> None:
    plain = pod_list(started("a", 0, 2, 2, 3, 3), stuck("s"))
    other = pod_list(with_conditions(started("a", 0, 2, 2, 3, 3),
                                     cond("example.com/gate", "True", 2)), stuck("s"))
    for doc in (plain, other):
        analysis = an.analyze(doc)
        assert analysis.extra == () and analysis.stuck[0].blocked_on is None
        out = analysis_report.to_json(analysis, source="pods", events_source=None)
        assert "extraConditions" not in out and "blockedOn" not in json.dumps(out)
        assert "nodelet.dev" not in analysis_report.table(analysis)
        assert "nodelet.dev" not in analysis_html.report(analysis, source="pods",
                                                         events_source=None)
