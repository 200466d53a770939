"""Which manifest-directory changes matter and when they are read (`model.core.manifestchanges`):
editors' files are dropped, a finished change is read at once, a burst once per quiet time, a
write in progress once it pauses or closes, a never-ending write no later than `longest`."""

from __future__ import annotations

import pytest

from nodelet.model.core import manifestchanges as mc

QUIET = 0.05
LONGEST = 0.5


@pytest.mark.parametrize(("name", "ignored"), [
    ("web.yaml", False),
    ("web.yml", False),
    ("web.json", False),
    ("web", False),
    (".web.yaml", True),          # hidden: the kubelet skips these
    (".web.yaml.tmp", True),      # tests/support/harness.py's atomic write
    (".web.yaml.swp", True),      # vim swap files
    (".web.yaml.swx", True),
    ("web.yaml~", True),          # backups
    ("web.yaml.bak", True),
    ("#web.yaml#", True),         # Emacs autosave
    (".#web.yaml", True),         # Emacs lock
    ("web.yaml.part", True),      # partial downloads
    ("4913", False),              # vim's write test file: harmless, it is gone at once
])
def test_ignored_names(name: str, ignored: bool) -> None:
    assert mc.ignored_name(name) is ignored


LONG_AGO = 0.0  # the previous read


def due(pending: mc.Pending, last_read: float = LONG_AGO) -> float | None:
    return mc.due_at(pending, last_read=last_read, quiet=QUIET, longest=LONGEST)


def test_nothing_pending_is_never_due() -> None:
    assert due(mc.Pending()) is None


def test_a_finished_change_is_due_at_once() -> None:
    pending = mc.noted(mc.Pending(), "web.yaml", 10.0, finished=True)
    assert pending.names == {"web.yaml"}
    assert due(pending) <= 10.0  # type: ignore[operator]


def test_a_finished_change_right_after_a_read_waits_for_the_quiet_time() -> None:
    pending = mc.noted(mc.Pending(), "web.yaml", 10.0, finished=True)
    assert due(pending, last_read=9.99) == pytest.approx(9.99 + QUIET)


def test_a_write_in_progress_waits_until_it_is_quiet_or_closed() -> None:
    created = mc.noted(mc.Pending(), "web.yaml", 10.0, finished=False)
    written = mc.noted(created, "web.yaml", 10.01, finished=False)
    assert due(written) == pytest.approx(10.01 + QUIET)
    closed = mc.noted(written, "web.yaml", 10.02, finished=True)
    assert due(closed) <= 10.02  # type: ignore[operator]


def test_a_write_in_progress_holds_back_finished_changes_of_other_files() -> None:
    pending = mc.noted(mc.Pending(), "big.yaml", 10.0, finished=False)
    pending = mc.noted(pending, "web.yaml", 10.01, finished=True)
    assert due(pending) == pytest.approx(10.01 + QUIET)


def test_an_ignored_name_changes_nothing() -> None:
    assert mc.noted(mc.Pending(), ".web.yaml.swp", 10.0, finished=False) == mc.Pending()
    pending = mc.noted(mc.Pending(), "web.yaml", 10.0, finished=True)
    assert mc.noted(pending, "web.yaml~", 10.04, finished=False) == pending


def test_a_burst_is_read_once_per_quiet_time() -> None:
    pending = mc.Pending()
    for i in range(50):  # 50 files renamed in, 1 ms apart, right after a read at 10.0
        pending = mc.noted(pending, f"p{i}.yaml", 10.0 + i / 1000, finished=True)
    assert len(pending.names) == 50
    assert due(pending, last_read=10.0) == pytest.approx(10.0 + QUIET)


def test_a_write_that_never_pauses_is_read_at_the_longest() -> None:
    pending = mc.Pending()
    for i in range(100):  # a write every 10 ms for a second
        pending = mc.noted(pending, "big.yaml", 10.0 + i / 100, finished=False)
    assert due(pending) == pytest.approx(10.5)


def test_a_change_of_the_directory_itself_names_no_file_but_is_due() -> None:
    pending = mc.noted(mc.Pending(), None, 10.0, finished=True)
    assert pending.names == frozenset()
    assert due(pending) is not None


def test_a_removal_is_kept_until_the_read_even_if_the_file_came_back() -> None:
    """The kubelet acts on each removal: a manifest deleted and written again before the read
    must still be seen as removed (its pod terminates and starts again)."""
    removed = mc.noted(mc.Pending(), "web.yaml", 10.0, finished=True, removed=True)
    back = mc.noted(removed, "web.yaml", 10.001, finished=False)
    closed = mc.noted(back, "web.yaml", 10.002, finished=True)
    assert closed.removed == {"web.yaml"} and closed.names == {"web.yaml"}
    assert mc.noted(mc.Pending(), "web.yaml", 10.0, finished=True).removed == frozenset()
    assert mc.noted(mc.Pending(), ".web.tmp", 10.0, finished=True, removed=True) == mc.Pending()
