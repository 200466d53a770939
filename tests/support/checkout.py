"""The checkout the tests and benchmarks run from: its commit, for reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def current_commit(*, dirty: bool = False) -> str:
    """HEAD's short hash ("unknown" outside git); with `dirty`, "+dirty" appended when the
    tracked files differ from it."""
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    head = done.stdout.strip()
    if not head:
        return "unknown"
    if dirty and subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD"],
                                check=False).returncode != 0:
        return head + "+dirty"
    return head
