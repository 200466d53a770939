"""Container log rotation decisions (`logrotation.plan`): rotate past the size, keep at most
max_files files per log, oldest rotated removed first."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodelet.model.core import logrotation

NOW = datetime(2026, 12, 3, 8, 30, 5, tzinfo=UTC)
NEW = "0.log.20261203-083005"


@pytest.mark.parametrize(("sizes", "max_files", "expected"), [
    ({"0.log": 100}, 5, logrotation.Plan(None, ())),
    ({"0.log": 101}, 5, logrotation.Plan(NEW, ())),
    ({"0.log": 101, "0.log.20261203-083001": 200, "0.log.20261203-083003": 200}, 3,
     logrotation.Plan(NEW, ("0.log.20261203-083001",))),
    ({"0.log": 5, "0.log.20261203-083001": 200, "0.log.20261203-083002": 200,
      "0.log.20261203-083003": 200}, 3, logrotation.Plan(None, ("0.log.20261203-083001",))),
    # Another attempt's log in the same directory is not this log's rotated file.
    ({"0.log": 101, "1.log": 500, "1.log.20261203-083001": 9}, 2, logrotation.Plan(NEW, ())),
    # Rotated twice within a second: wait for the next round rather than overwrite.
    ({"0.log": 101, NEW: 200}, 5, logrotation.Plan(None, ())),
])
def test_plan(sizes: dict[str, int], max_files: int, expected: logrotation.Plan) -> None:
    assert logrotation.plan("0.log", sizes, max_size=100, max_files=max_files,
                            now=NOW) == expected
