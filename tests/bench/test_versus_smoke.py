"""A small run of `bench/versus.py` at every `make test` (issue 42, item 5): raw CRI, the real
kubelet v1.37.2 and nodelet on one containerd, 10 pods, one round.

It asserts nothing about time. It asserts that the bench measured every contender (a figure
for each row it has) and left nothing behind (the bench's own leak check fails the run
otherwise). The figures are appended as one JSON line to test-artifacts/bench-history.jsonl,
beside the earlier runs of this checkout, and the printed report is kept in
test-artifacts/bench-smoke.txt: a regression shows in the next run's numbers, and a figure of
a small, noisy run is never read as a benchmark result (docs/benchmarks.md has those).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
HISTORY = ARTIFACTS / "bench-history.jsonl"
ARGS = ("--pods", "10", "--rounds", "1", "--idle", "5", "--kills", "2")
# Every contender has a figure in these rows; the agents in these too.
EVERY_CONTENDER = ("throughput", "sandbox-ready seen p99", "agent CPU per pod",
                   "idle agent + runtime side CPU")
AGENTS_ONLY = ("sandbox-ready LTT p99", "agent peak RSS (VmHWM)", "kill -> replacement p99")


@pytest.mark.timeout(600)
def test_versus_measures_every_contender_and_records_the_ratios() -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    lines_before = _lines(HISTORY)
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "versus.py"), *ARGS, "--json", str(HISTORY)],
        cwd=REPO, capture_output=True, text=True, timeout=560, check=False)
    (ARTIFACTS / "bench-smoke.txt").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = _lines(HISTORY)
    assert len(lines) == len(lines_before) + 1, "the run appended no line to the history"
    record = json.loads(lines[-1])
    assert record["run"]["pods"] == 10 and record["run"]["contenders"] == [
        "cri", "kubelet", "nodelet"]
    rows = record["rows"]
    for label in EVERY_CONTENDER:
        _finite(rows[label], ("cri", "kubelet", "nodelet"), label)
    for label in AGENTS_ONLY:
        _finite(rows[label], ("kubelet", "nodelet"), label)
    for label in EVERY_CONTENDER + AGENTS_ONLY:
        if rows[label]["kubelet"]:  # a ratio wherever the kubelet's figure is not 0
            _finite(rows[label], ("nodelet/kubelet",), label)
    print("\nbench smoke, nodelet / kubelet: " + ", ".join(
        f"{label} {rows[label].get('nodelet/kubelet', float('nan')):.2f}"
        for label in EVERY_CONTENDER + AGENTS_ONLY))


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _finite(row: dict[str, float | str], keys: tuple[str, ...], label: str) -> None:
    for key in keys:
        value = row.get(key)
        assert isinstance(value, float | int) and math.isfinite(value) and value >= 0, (
            f"{label}: no figure for {key}: {row}")
