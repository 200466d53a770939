"""Container log rotation decisions (`logrotation.plan`): rotate past the size, keep at most
max_files files per log, oldest rotated removed first, every rotated file but the newest
gzipped (as the kubelet's container log manager)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodelet.model.core import logrotation

NOW = datetime(2026, 12, 3, 8, 30, 5, tzinfo=UTC)
NEW = "0.log.20261203-083005"
T1, T2, T3 = (f"0.log.20261203-08300{i}" for i in (1, 2, 3))


@pytest.mark.parametrize(("sizes", "max_files", "expected"), [
    ({"0.log": 100}, 5, logrotation.Plan(None, ())),
    ({"0.log": 101}, 5, logrotation.Plan(NEW, ())),
    ({"0.log": 101, T1: 200, T3: 200}, 3, logrotation.Plan(NEW, (T1,), (T3,))),
    ({"0.log": 5, T1: 200, T2: 200, T3: 200}, 3, logrotation.Plan(None, (T1,), (T2,))),
    # The newest rotated file stays plain; the older ones are gzipped once.
    ({"0.log": 101, T1 + ".gz": 20, T2: 200}, 5, logrotation.Plan(NEW, (), (T2,))),
    ({"0.log": 5, T1 + ".gz": 20, T2 + ".gz": 20, T3: 200}, 5, logrotation.Plan(None, ())),
    # Counted among max_files as any rotated file, oldest first.
    ({"0.log": 101, T1 + ".gz": 20, T2 + ".gz": 20}, 3,
     logrotation.Plan(NEW, (T1 + ".gz",))),
    # A compression that stopped half-way: its .tmp goes, the plain file is compressed again;
    # one that stopped before removing the original: the original goes.
    ({"0.log": 5, T1 + ".gz.tmp": 3, T1: 200, T2: 200}, 5,
     logrotation.Plan(None, (T1 + ".gz.tmp",), (T1,))),
    ({"0.log": 5, T1: 200, T1 + ".gz": 20, T2: 200}, 5, logrotation.Plan(None, (T1,))),
    # Another attempt's log in the same directory is not this log's rotated file.
    ({"0.log": 101, "1.log": 500, "1.log.20261203-083001": 9}, 2, logrotation.Plan(NEW, ())),
    ({"0.log": 101, T1: 9}, 2, logrotation.Plan(NEW, (T1,))),
    # Rotated twice within a second: wait for the next round rather than overwrite.
    ({"0.log": 101, NEW: 200}, 5, logrotation.Plan(None, ())),
])
def test_plan(sizes: dict[str, int], max_files: int, expected: logrotation.Plan) -> None:
    assert logrotation.plan("0.log", sizes, max_size=100, max_files=max_files,
                            now=NOW) == expected


@pytest.mark.parametrize(("period", "rotated", "expected"), [
    (10.0, [], 10.0),          # nothing rotated: the period
    (10.0, [150], 10.0),       # past its size, not a flood
    (10.0, [99, 200], 1.0),    # one log at twice its size: again within a second
    (0.2, [500], 0.2),         # never later than the period
])
def test_next_check(period: float, rotated: list[int], expected: float) -> None:
    assert logrotation.next_check(period, rotated, 100) == expected
