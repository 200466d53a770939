"""What the node server's backend (`services.nodeserving.NodeServing`) costs and tells a
remote client: a stats scrape sends at most `stats_concurrency` PodSandboxStats at once and
concurrent scrapes share one sample; a log it cannot give is a 400 without host paths; a log
is sent a batch at a time, and a tail reads the log's end only. The
runtime is a stub here (only the counting is under test; tests/agent/test_node_server.py
scrapes real pods on containerd)."""

from __future__ import annotations

import asyncio
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nodelet.model.core import noderequests as nr
from nodelet.model.core import pods, runtime
from nodelet.model.core import summary as sm
from nodelet.services.serving import nodeserving
from support.polling import eventually


def _pod(n: int) -> pods.Pod:
    return pods.Pod(uid=pods.PodUID(f"u-{n}"), name=f"p{n}", namespace="default",
                    spec=pods.PodSpec(containers=(pods.Container("main", "busybox"),)),
                    raw={"spec": {"containers": [{"name": "main", "image": "busybox"}]}})


class _View:
    def __init__(self, count: int) -> None:
        self.list = [(_pod(n), None) for n in range(count)]

    def pods(self) -> list[Any]:
        return self.list

    async def volume_stats(self, pod: pods.Pod) -> list[sm.VolumeUsage]:
        return []


class _Relister:
    def pod(self, uid: pods.PodUID) -> runtime.PodRuntime:
        sandbox = runtime.SandboxInfo(runtime.SandboxID(f"s-{uid}"), "p", "default", uid, 0,
                                      runtime.SandboxState.READY, created_at=1)
        return runtime.PodRuntime(uid, sandboxes=(sandbox,))


class _Runtime:
    """PodSandboxStats that wait for `release`, counting calls and how many run at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls = self.in_flight = self.most = 0

    async def pod_sandbox_stats(self, sandbox: runtime.SandboxID) -> sm.PodUsage:
        self.calls += 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        return sm.PodUsage(sandbox, "", "", "")

    async def image_fs_info(self) -> list[runtime.FilesystemUsage]:
        return []


def _serving(tmp_path: Path, view: _View, cri: Any) -> nodeserving.NodeServing:
    return nodeserving.NodeServing(
        view=view, client=cri, relister=_Relister(),  # type: ignore[arg-type]
        facts=nodeserving.Facts(node_name="n1", data_dir=tmp_path, stats_concurrency=4))


async def test_scrapes_are_bounded_and_concurrent_ones_share_a_sample(tmp_path: Path) -> None:
    cri = _Runtime()
    serving = _serving(tmp_path, _View(12), cri)
    scrapes = asyncio.gather(*(serving.collect() for _ in range(3)))
    await eventually(lambda: cri.in_flight, until=lambda n: n == 4, within=10,
                     what="the first four PodSandboxStats")
    assert cri.calls == 4  # not 12 (one per pod at once), nor 36 (one round per scrape)
    cri.release.set()
    first, second, third = await asyncio.wait_for(scrapes, 30)
    assert first is second is third and len(first.pods) == 12
    assert (cri.calls, cri.most) == (12, 4)
    # A scrape after that one is a new sample (its CPU rates need one).
    assert (await serving.collect()) is not first and cri.calls == 24


async def test_a_log_it_cannot_give_names_no_host_path(tmp_path: Path) -> None:
    serving = _serving(tmp_path, _View(1), _Runtime())
    options = nr.log_options({}, datetime.now(UTC))
    with pytest.raises(nr.NodeRequestError) as raised:
        await serving.open_logs(nr.PodRef("default", "p0"), "main", options)
    assert raised.value.status == 400
    assert str(raised.value) == 'container "main" in pod "p0" has no log yet'
    assert str(tmp_path) not in str(raised.value) and "--data-dir" not in str(raised.value)


async def _logs(serving: nodeserving.NodeServing, query: nr.Query) -> tuple[bytes, int]:
    """The body of /containerLogs of p0's main, and the most memory Python held meanwhile."""
    tracemalloc.start()
    try:
        chunks = await serving.open_logs(nr.PodRef("default", "p0"), "main",
                                         nr.log_options(query, datetime.now(UTC)))
        last = b""
        async for chunk in chunks:
            last = (last + chunk)[-128:]
        return last, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_logs_are_sent_in_batches_and_a_tail_reads_the_end(tmp_path: Path) -> None:
    directory = tmp_path / "logs" / "default_p0_u-0" / "main"
    directory.mkdir(parents=True)
    with (directory / "0.log").open("wb") as f:
        for n in range(200_000):
            f.write(f"2026-01-01T00:00:00.000000001Z stdout F line {n:06d} {'x' * 20}\n".encode())
    assert (directory / "0.log").stat().st_size > 10 * 1024 * 1024
    serving = _serving(tmp_path, _View(1), _Runtime())
    last, peak = await _logs(serving, {"tailLines": ["2"]})
    assert last.endswith(b"line 199998 " + b"x" * 20 + b"\nline 199999 " + b"x" * 20 + b"\n")
    assert peak < 1024 * 1024  # not the 10 MiB file
    last, peak = await _logs(serving, {})  # the whole log: a batch at a time
    assert last.endswith(b"line 199999 " + b"x" * 20 + b"\n")
    assert peak < 4 * 1024 * 1024
