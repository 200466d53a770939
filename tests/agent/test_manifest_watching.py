"""The manifest directory is watched with inotify, not polled.

First the watch itself (`adapters/dirwatch.py`) on real directories: the names that change,
and the directory removed, re-created or not there yet. Then a real agent whose resync and poll
periods are an hour, so only inotify can explain a reaction: a manifest written, changed in
place, renamed over (an editor's atomic save) and deleted is acted on; 50 manifests written at
once are read in a few scans and all start; editors' temp files are ignored; a re-created
directory is watched again. Finally the safety nets: a watch that misses everything is repaired
by the resync, and a watch that cannot be had falls back to polling, logged once, /healthz ok.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nodelet.adapters import dirwatch
from nodelet.model.core import pods
from nodelet.services.sources import sources
from support.harness import Harness, all_ready, pod_manifest
from support.polling import eventually

AgentFactory = Callable[..., Awaitable[Harness]]
# Only inotify can explain a reaction within a test's time.
HOUR = {"manifest_resync_period": 3600.0, "manifest_poll_period": 3600.0}


# -- the watch on real directories -----------------------------------------------------------------


async def changes_until(watch: dirwatch.InotifyWatch, last: dirwatch.Change,
                        within: float = 5.0) -> list[dirwatch.Change]:
    """The changes the watch reports, up to and including `last`."""
    seen: list[dirwatch.Change] = []
    try:
        async with asyncio.timeout(within):
            while not seen or seen[-1] != last:
                seen.append(await watch.next())
    except TimeoutError:
        raise AssertionError(f"no {last} within {within} s; seen: {seen}") from None
    return seen


async def test_the_watch_names_created_renamed_and_deleted_files(tmp_path: Path) -> None:
    directory = tmp_path / "manifests"
    directory.mkdir()
    watch = dirwatch.open_watch(directory)
    try:
        (directory / ".web.yaml.tmp").write_text("a")
        (directory / ".web.yaml.tmp").rename(directory / "web.yaml")
        seen = await changes_until(watch, dirwatch.Change("web.yaml"))
        assert {c.name for c in seen} == {".web.yaml.tmp", "web.yaml"}
        # Renamed over: no removal of web.yaml (the kubelet's podDelete comes only for a
        # name deleted or renamed away).
        assert [c.name for c in seen if c.removed] == [".web.yaml.tmp"]
        (directory / "web.yaml").write_text("b")  # in place
        seen = await changes_until(watch, dirwatch.Change("web.yaml"))
        assert not any(c.removed for c in seen)
        (directory / "web.yaml").unlink()
        await changes_until(watch, dirwatch.Change("web.yaml", removed=True))
        (directory / "web.yaml").write_text("c")
        (directory / "web.yaml").rename(directory / "moved.yaml")
        await changes_until(watch, dirwatch.Change("web.yaml", removed=True))
    finally:
        watch.close()


async def test_a_removed_and_recreated_directory_is_watched_again(tmp_path: Path) -> None:
    directory = tmp_path / "manifests"
    directory.mkdir()
    watch = dirwatch.open_watch(directory)
    try:
        shutil.rmtree(directory)
        await changes_until(watch, dirwatch.Change(None))
        assert not watch.armed
        directory.mkdir()
        async with asyncio.timeout(5):
            while not watch.armed:  # the rest of the removal's events, then the creation's
                assert await watch.next() == dirwatch.Change(None)
        (directory / "web.yaml").write_text("a")
        await changes_until(watch, dirwatch.Change("web.yaml"))
    finally:
        watch.close()


async def test_a_directory_that_does_not_exist_yet_is_watched_once_created(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "manifests"
    watch = dirwatch.open_watch(directory)
    try:
        directory.mkdir()
        await changes_until(watch, dirwatch.Change(None))
        (directory / "web.yaml").write_text("a")
        await changes_until(watch, dirwatch.Change("web.yaml"))
    finally:
        watch.close()


def test_a_directory_without_parent_cannot_be_watched(tmp_path: Path) -> None:
    with pytest.raises(dirwatch.WatchError, match=r"cannot watch .*missing"):
        dirwatch.open_watch(tmp_path / "missing" / "manifests")


async def test_a_manifest_removed_and_back_before_the_read_leaves_then_returns(
    tmp_path: Path,
) -> None:
    """The source on a real directory: a removal the watch reported is published even when
    the file is back by the read (the kubelet's file source handles each event), so the pod
    terminates and starts again; a file only rewritten is one update."""
    published: list[set[pods.PodUID]] = []
    source = sources.ManifestSource(
        directory=tmp_path, node_name="n1", clock=lambda: datetime.now(UTC),
        on_update=lambda snapshot: published.append(set(snapshot.pods)))
    path = tmp_path / "web.yaml"
    path.write_text(pod_manifest("web"))
    (tmp_path / "db.yaml").write_text(pod_manifest("db"))
    await source.scan()
    both = published[-1]
    web = next(uid for uid in both if source.snapshot.pods[uid].name == "web-n1")
    path.unlink()
    path.write_text(pod_manifest("web"))
    await source.scan({"web.yaml"}, removed={"web.yaml"})
    assert published[1:] == [both - {web}, both]
    path.write_text(pod_manifest("web", grace=2))  # rewritten in place: an update only
    await source.scan({"web.yaml"})
    assert len(published) == 4 and web not in published[-1] and len(published[-1]) == 2


# -- a real agent ----------------------------------------------------------------------------------


def uid_of(agent: Harness, name: str) -> pods.PodUID | None:
    found = agent.find(name)
    return found[0].uid if found else None


async def uid_changed(agent: Harness, name: str, old: pods.PodUID | None, what: str) -> None:
    await eventually(lambda: uid_of(agent, name), until=lambda uid: uid not in (None, old),
                     within=10, what=what)


@pytest.mark.runtime
async def test_written_changed_renamed_over_and_deleted_manifests_are_acted_on(
    make_agent: AgentFactory,
) -> None:
    agent = await make_agent(manifest_settings=HOUR)
    path = agent.manifests / "web.yaml"
    path.write_text(pod_manifest("web"))  # written in place: create, modify, close
    await agent.wait_status("web", all_ready, what="web Ready after it was written")
    first = uid_of(agent, "web")
    path.write_text(pod_manifest("web", command="sleep 999999"))  # changed in place
    await uid_changed(agent, "web", first, "web replaced after its file changed in place")
    second = uid_of(agent, "web")
    agent.write("web.yaml", pod_manifest("web", command="sleep 999998"))  # renamed over
    await uid_changed(agent, "web", second, "web replaced after a file was renamed over it")
    await agent.wait_status("web", all_ready, what="the renamed-over web Ready")
    path.unlink()
    await eventually(lambda: agent.find("web") is None, within=30,
                     what="web gone after its file was deleted")


@pytest.mark.runtime
async def test_fifty_manifests_written_at_once_are_read_in_a_few_scans_and_all_start(
    make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = await make_agent(manifest_settings=HOUR)
    scans = count_scans(monkeypatch)
    names = [f"burst{i}" for i in range(50)]
    for name in names:
        agent.write(f"{name}.yaml", pod_manifest(name))
    await eventually(lambda: [n for n in names if agent.find(n) is None], until=lambda a: not a,
                     within=10, what="all 50 pods admitted")
    # Each file is 4 events (create, write, close, rename): debounced, a handful of reads.
    assert len(scans) < 10, f"{len(scans)} scans for 50 files"
    await eventually(lambda: [n for n in names if not ready(agent, n)], until=lambda a: not a,
                     within=180, what="all 50 pods Ready")


@pytest.mark.runtime
async def test_editor_temp_and_backup_files_are_ignored(make_agent: AgentFactory) -> None:
    agent = await make_agent(manifest_settings=HOUR)
    (agent.manifests / ".swap.yaml.swp").write_text(pod_manifest("swap"))
    (agent.manifests / "backup.yaml~").write_text(pod_manifest("backup"))
    (agent.manifests / "#autosave.yaml#").write_text(pod_manifest("autosave"))
    agent.write("sentinel.yaml", pod_manifest("sentinel"))
    await eventually(lambda: agent.find("sentinel"), within=10, what="sentinel admitted")
    assert [agent.find(n) for n in ("swap", "backup", "autosave")] == [None, None, None]
    files = {Path(r.file).name for r in agent.agent_or_fail().manifests()}
    assert files == {"sentinel.yaml"}


@pytest.mark.runtime
async def test_a_removed_and_recreated_directory_is_read_again(make_agent: AgentFactory) -> None:
    agent = await make_agent(manifest_settings=HOUR)
    agent.write("before.yaml", pod_manifest("before"))
    await eventually(lambda: agent.find("before"), within=10, what="before admitted")
    shutil.rmtree(agent.manifests)
    await eventually(lambda: agent.find("before") is None, within=30,
                     what="before gone with its directory")
    agent.manifests.mkdir()
    agent.write("after.yaml", pod_manifest("after"))
    await agent.wait_status("after", all_ready, what="after Ready in the re-created directory")


# -- the safety nets -------------------------------------------------------------------------------


class DeafWatch:
    """A watch that opens fine and never reports anything: every event is missed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def next(self) -> dirwatch.Change:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def close(self) -> None:
        pass


@pytest.mark.runtime
async def test_the_resync_repairs_missed_events(
    make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dirwatch, "open_watch", DeafWatch)
    agent = await make_agent(manifest_settings={"manifest_resync_period": 0.5,
                                                "manifest_poll_period": 3600.0})
    agent.write("missed.yaml", pod_manifest("missed"))
    await agent.wait_status("missed", all_ready, what="missed Ready after a resync")
    agent.remove("missed.yaml")
    await eventually(lambda: agent.find("missed") is None, within=30,
                     what="missed gone after a resync")


@pytest.mark.runtime
async def test_without_a_watch_the_directory_is_polled_and_that_is_logged_once(
    make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    attempts: list[Path] = []

    def broken(directory: Path) -> dirwatch.InotifyWatch:
        attempts.append(directory)
        raise dirwatch.WatchError("injected: no inotify watches left")

    monkeypatch.setattr(dirwatch, "open_watch", broken)
    caplog.set_level(logging.INFO, logger="nodelet.services.sources.manifestwatching")
    agent = await make_agent(manifest_settings={"manifest_resync_period": 3600.0,
                                                "manifest_poll_period": 0.2})
    agent.write("polled.yaml", pod_manifest("polled"))
    await agent.wait_status("polled", all_ready, what="polled Ready while polling")
    await eventually(lambda: len(attempts), until=lambda n: n >= 3, within=10,
                     what="the watch tried again at each poll")
    warnings = [r.getMessage() for r in caplog.records if "cannot watch" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "injected: no inotify watches left" in warnings[0]
    assert all(c.ok for c in agent.agent_or_fail().health() if c.name == "manifest-source")


@pytest.mark.runtime
async def test_watching_turned_off_polls(make_agent: AgentFactory) -> None:
    agent = await make_agent(manifest_settings={"manifest_watch": False,
                                                "manifest_resync_period": 3600.0,
                                                "manifest_poll_period": 0.2})
    agent.write("polled.yaml", pod_manifest("polled"))
    await eventually(lambda: agent.find("polled"), within=10, what="polled admitted")


# -- helpers -------------------------------------------------------------------------------------


def ready(agent: Harness, name: str) -> bool:
    status = agent.status_of(name)
    return status is not None and all_ready(status)


def count_scans(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every `ManifestSource.scan` from now on, by the event loop's time."""
    calls: list[float] = []
    scan = sources.ManifestSource.scan

    async def counted(self: sources.ManifestSource, *args: Any, **kwargs: Any) -> bool:
        calls.append(asyncio.get_running_loop().time())
        return await scan(self, *args, **kwargs)

    monkeypatch.setattr(sources.ManifestSource, "scan", counted)
    return calls
