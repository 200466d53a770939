"""The client certificate renewal deadline: 70-90 % of the lifetime, as the kubelet's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import rotation

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
YEAR = timedelta(days=365)


@pytest.mark.parametrize(("lifetime", "r", "after"), [
    (YEAR, 0.0, YEAR * 0.7),                 # the earliest: 70 %
    (YEAR, 0.5, YEAR * 0.8),                 # the middle: 80 %
    (YEAR, 1.0, YEAR * 0.9),                 # the bound r → 1: 90 %
    (timedelta(seconds=10), 0.0, timedelta(seconds=7)),   # short test lifetimes alike
    (timedelta(seconds=10), 1.0, timedelta(seconds=9)),
    (timedelta(0), 0.5, timedelta(0)),       # nonsense validity: renew at once
])
def test_deadline_is_70_to_90_percent_of_the_lifetime(
        lifetime: timedelta, r: float, after: timedelta) -> None:
    deadline = rotation.rotation_deadline(T0, T0 + lifetime, r)
    assert abs((deadline - (T0 + after)).total_seconds()) < 1


@pytest.mark.parametrize(("now", "wait"), [
    (T0, 80.0),                              # issued now: wait until 80 %
    (T0 + timedelta(seconds=50), 30.0),
    (T0 + timedelta(seconds=80), 0.0),       # the deadline: now
    (T0 + timedelta(seconds=95), 0.0),       # past it (the node was down): now
])
def test_seconds_until_rotation(now: datetime, wait: float) -> None:
    assert rotation.seconds_until_rotation(T0, T0 + timedelta(seconds=100), 0.5, now) == wait


@pytest.mark.parametrize(("now", "usable"), [
    (T0 - timedelta(seconds=1), False),      # not valid yet
    (T0, True),
    (T0 + timedelta(seconds=99), True),
    (T0 + timedelta(seconds=100), False),    # expired: bootstrap again
])
def test_usable(now: datetime, usable: bool) -> None:
    assert rotation.usable(T0, T0 + timedelta(seconds=100), now) is usable
