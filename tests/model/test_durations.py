"""Go durations (pure): written as Go's time.Duration.String() writes them, and read back."""

from __future__ import annotations

import pytest

from nodelet.model.core import durations


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.5, "500ms"), (1, "1s"), (10, "10s"), (60, "1m0s"), (90.5, "1m30.5s"),
    (300, "5m0s"), (3723, "1h2m3s"), (7200, "2h0m0s"),
])
def test_seconds_are_written_as_go_writes_them(seconds: float, text: str) -> None:
    assert durations.go_duration(seconds) == text
    assert durations.duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0.0), ("0s", 0.0), ("90s", 90.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("300ms", 0.3),
    ("2h45m", 9900.0), ("10us", 1e-5), ("-1s", None), ("1d", None), ("", None), ("5", None)])
def test_go_durations_are_read_in_seconds(text: str, seconds: float | None) -> None:
    assert durations.duration_seconds(text) == (
        pytest.approx(seconds) if seconds is not None else None)
