"""A real agent whose checkpoint cannot be written for a while — another connection holds its
lock, or its disk is full — while a pod changes: the agent keeps answering, /healthz and
/metrics say so, the writes land once the checkpoint is usable again, and after a restart the
pod's transition times are the ones it had. And a corrupt checkpoint at start is replaced."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime

import pytest
import pytest_asyncio

from conftest import Instance
from nodelet import settings
from nodelet.adapters import api_client
from nodelet.adapters import checkpoint as cp
from nodelet.model.core import status as st
from support.disks import fill, tiny_tmpfs
from support.harness import Harness, all_ready, exec_in, is_true, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

# Short lock waits and retries, so recovery is seen quickly; the behaviour is the same.
CHECKPOINT = settings.CheckpointSettings(busy_timeout=0.2, retry_backoff=0.1,
                                         retry_backoff_max=1.0, flush_timeout=5.0)
PROBE = ("readinessProbe:\n  exec: {command: [cat, /tmp/ready]}\n  periodSeconds: 1\n"
         "  failureThreshold: 1\n")
WITHIN = 30.0

Times = dict[str, datetime | None]


@pytest_asyncio.fixture(loop_scope="session")
async def new_harness(runtime: Instance) -> AsyncIterator[Callable[[], Harness]]:
    """Harnesses (not started) on the shared containerd, with fast checkpoint retries;
    emptied, stopped and removed at teardown."""
    made: list[Harness] = []

    def make() -> Harness:
        harness = Harness(endpoint=runtime.containerd.endpoint)
        harness.settings = replace(harness.settings, checkpoint=CHECKPOINT)
        made.append(harness)
        return harness

    try:
        yield make
    finally:
        for harness in made:
            try:
                await harness.stop()
            finally:
                harness.cleanup()


def client_of(harness: Harness) -> api_client.ApiClient:
    return api_client.ApiClient(f"http://127.0.0.1:{harness.agent_or_fail().server_port}",
                                timeout=10)


def times(pod_status: st.PodStatus | None) -> Times:
    assert pod_status is not None
    return {c.type: c.last_transition_time for c in pod_status.conditions}


def checkpointed_times(harness: Harness, name: str) -> Times:
    """The transition times the checkpoint file holds (read by a connection of our own: WAL
    readers do not wait for the lock)."""
    found = harness.find(name)
    assert found is not None
    checkpoint = cp.Checkpoint.open(harness.settings.data_dir / cp.FILENAME)
    try:
        stored = checkpoint.load_pod_statuses().get(found[0].uid)
    finally:
        checkpoint.close()
    return {c.type: c.last_transition_time for c in stored.conditions} if stored else {}


async def healthz(harness: Harness) -> tuple[bool, str]:
    return await asyncio.to_thread(client_of(harness).healthz, verbose=True)


async def metric(harness: Harness, name: str) -> float:
    url = f"http://127.0.0.1:{harness.agent_or_fail().server_port}/metrics"

    def get() -> str:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())

    for line in (await asyncio.to_thread(get)).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    pytest.fail(f"metric {name} not served")


async def ready_and_checkpointed(harness: Harness, name: str) -> Times:
    harness.write(f"{name}.yaml", pod_manifest(
        name, command="touch /tmp/ready; sleep 1000000", container_extra=PROBE))
    ready = await harness.wait_status(name, all_ready, what=f"{name} Ready")
    await eventually(lambda: checkpointed_times(harness, name) == times(ready),
                     within=WITHIN, what="the Ready times in the checkpoint")
    return times(ready)


async def unready_while_unwritable(
    harness: Harness, runtime: Instance, name: str, still_unwritable: Callable[[], bool]
) -> Times:
    """Make the pod unready while the checkpoint cannot be written; check what the agent
    shows meanwhile; return the new transition times."""
    before = times(harness.status_of(name))
    found = harness.status_of(name)
    assert found is not None
    result = await exec_in(runtime.client, found, "rm /tmp/ready")
    assert result.exit_code == 0, result
    unready = await harness.wait_status(name, lambda s: not is_true(s, st.READY),
                                        what=f"{name} not Ready")
    changed = times(unready)
    assert changed[st.READY] != before[st.READY]

    _, text = await eventually(lambda: healthz(harness), until=lambda h: not h[0],
                               within=WITHIN, every=0.1, what="/healthz failing")
    assert "[-]checkpoint failed" in text and "[+]runtime ok" in text, text
    assert await metric(harness, "nodelet_checkpoint_write_failures_total") >= 1
    assert await metric(harness, "nodelet_checkpoint_pending_writes") >= 1

    # The event loop is not stuck behind the checkpoint: /pods answers while the checkpoint
    # is still unwritable, with the new status. (Its duration is printed, not asserted.)
    started = time.monotonic()
    listed = await asyncio.to_thread(client_of(harness).pods, precise=True)
    print(f"/pods answered in {time.monotonic() - started:.3f} s while the checkpoint "
          f"could not be written")
    assert still_unwritable(), "the checkpoint became writable before /pods answered"
    ours = [p for p in listed["items"] if p["metadata"]["name"] == f"{name}-testnode"]
    assert ours and {c["type"]: c["status"] for c in ours[0]["status"]["conditions"]}[
        st.READY] == "False"

    assert checkpointed_times(harness, name)[st.READY] == before[st.READY], \
        "nothing was written while the checkpoint was unwritable"
    return changed


async def recovered_and_restarted(harness: Harness, name: str, changed: Times) -> None:
    """Once writable again: /healthz recovers, the new times are written, and a restarted
    agent shows the pod with exactly those times."""
    await eventually(lambda: healthz(harness), until=lambda h: h[0], within=WITHIN, every=0.1,
                     what="/healthz recovered")
    await eventually(lambda: checkpointed_times(harness, name) == changed,
                     within=WITHIN, what="the new times written to the checkpoint")
    assert await metric(harness, "nodelet_checkpoint_pending_writes") == 0
    last = times(harness.status_of(name))
    assert last == changed

    await harness.stop(terminate_pods=False)
    await harness.start()
    adopted = await harness.wait_status(
        name, lambda s: len(s.conditions) == 5 and s.phase == "Running",
        what=f"{name} adopted after the restart")
    assert times(adopted) == last
    assert (await healthz(harness))[0]




async def test_locked_checkpoint_keeps_transition_times_across_a_restart(
    new_harness: Callable[[], Harness], runtime: Instance
) -> None:
    harness = new_harness()
    await harness.start()
    await ready_and_checkpointed(harness, "locked")

    other = sqlite3.connect(harness.settings.data_dir / cp.FILENAME, isolation_level=None,
                            timeout=5)
    try:
        other.execute("BEGIN EXCLUSIVE")  # as another process writing the file would
        changed = await unready_while_unwritable(harness, runtime, "locked",
                                                 lambda: other.in_transaction)
        other.execute("ROLLBACK")
    finally:
        other.close()
    await recovered_and_restarted(harness, "locked", changed)


async def test_full_disk_keeps_transition_times_across_a_restart(
    new_harness: Callable[[], Harness], runtime: Instance
) -> None:
    harness = new_harness()
    with tiny_tmpfs(harness.root / "disk", size="2m") as disk:
        # Only the checkpoint lives on the tiny disk (SQLite follows the link and keeps its
        # -wal and -shm next to the real file): pods and logs still have room.
        harness.settings.data_dir.mkdir()
        (harness.settings.data_dir / cp.FILENAME).symlink_to(disk / cp.FILENAME)
        try:
            await harness.start()
            await ready_and_checkpointed(harness, "full")
            filler = fill(disk)
            changed = await unready_while_unwritable(harness, runtime, "full",
                                                     filler.exists)
            _, text = await healthz(harness)
            assert "full" in text, text
            filler.unlink()
            await recovered_and_restarted(harness, "full", changed)
        finally:
            await harness.stop()  # before the disk goes away


async def test_corrupt_checkpoint_is_moved_aside_and_the_agent_starts(
    new_harness: Callable[[], Harness], caplog: pytest.LogCaptureFixture
) -> None:
    harness = new_harness()
    data_dir = harness.settings.data_dir
    data_dir.mkdir()
    (data_dir / cp.FILENAME).write_bytes(b"not a database, after a disk error" * 100)
    with caplog.at_level(logging.WARNING, logger=cp.__name__):
        await harness.start()
    moved = [p.name for p in data_dir.iterdir() if ".corrupt-" in p.name]
    assert len(moved) == 1 and moved[0].startswith(f"{cp.FILENAME}.corrupt-"), moved
    assert any(moved[0] in r.getMessage() for r in caplog.records
               if r.levelno == logging.WARNING and r.name == cp.__name__)
    assert (await healthz(harness))[0]
    ready = await ready_and_checkpointed(harness, "fresh")
    assert ready[st.READY] is not None
