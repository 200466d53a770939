"""Port 10250 under a flood of connections (adapters/tlsfront.py): the caps in all and per
client address, the flood's own connections evicted for a newcomer, and a real agent that
keeps working — its event loop on time, `/healthz` and authenticated requests answered, a new
pod started — while another process holds thousands of idle and half-open connections from
eight loopback addresses. The figures are printed; wall-clock times are not asserted.
"""

from __future__ import annotations

import asyncio
import json
import resource
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from nodelet import settings
from nodelet.adapters import host, node_server, servingcerts
from nodelet.model.core import nodeauth
from nodelet.model.core import noderequests as nr
from nodelet.services.serving import nodeserving
from support.controlplane import ControlPlane, node_requests
from support.harness import Harness, all_ready, pod_manifest
from support.nodebackend import EmptyBackend
from support.polling import eventually

TOKEN = "flood-test-token"
FLOOD_SOURCES = [f"127.0.0.{n}" for n in range(2, 10)]
FLOOD = Path(__file__).resolve().parents[1] / "support" / "flood.py"


_Backend = EmptyBackend


async def _server(tmp_path: Path, **limits: Any) -> node_server.NodeServer:
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    running = node_server.NodeServer(_Backend(), node_server.NodeServerConfig(
        address="127.0.0.1", port=0, node_name="n1", tls=node_server.TlsFiles(pair.cert, pair.key),
        authenticators=[nodeauth.TokenFile.parse(f"{TOKEN},bob,uid-1,devs\n")], **limits))
    await running.start()
    return running


def _seen(front: Any) -> int:
    """Connections the front has taken from the listen queue (admitted or refused)."""
    c = front.counters
    return int(c.accepted + c.refused_per_source + c.refused_total)


async def _idle(source: str, port: int, count: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(count):
        _, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        writers.append(writer)
    return writers


async def _closed(writer: asyncio.StreamWriter) -> bool:
    """Whether the server has closed this connection (it sends nothing before a handshake)."""
    reader = writer.transport.get_protocol()._stream_reader  # type: ignore[attr-defined]
    try:
        return await asyncio.wait_for(reader.read(1), 0.05) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


async def _close(writers: list[asyncio.StreamWriter]) -> None:
    for writer in writers:
        writer.close()
    for writer in writers:
        try:
            await writer.wait_closed()
        except OSError:
            pass


async def _healthz(port: int, ca: Path) -> int:
    """A new connection, a handshake and a request."""
    context = ssl.create_default_context(cafile=str(ca))
    connector = aiohttp.TCPConnector(ssl=context, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session, session.get(
            f"https://127.0.0.1:{port}/healthz",
            headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        return response.status


async def test_the_caps_per_address_and_in_all(tmp_path: Path) -> None:
    running = await _server(tmp_path, max_connections=12, max_connections_per_source=5)
    front = running.front
    assert front is not None
    ca = servingcerts.self_signed_paths(tmp_path).cert
    held: list[asyncio.StreamWriter] = []
    try:
        # One address: five are held, the sixth and seventh are closed at once.
        held += await _idle("127.0.0.2", running.port, 7)
        await eventually(lambda: _seen(front), until=lambda n: n == 7, within=10,
                         what="all 7 connections accepted or refused")
        assert front.counters.refused_per_source == 2
        assert [await _closed(w) for w in held] == [False] * 5 + [True] * 2
        # Two more addresses fill the total (12): the flood's own are evicted for newcomers,
        # oldest first from the address holding most.
        held += await _idle("127.0.0.3", running.port, 5)
        held += await _idle("127.0.0.4", running.port, 4)
        await eventually(lambda: _seen(front), until=lambda n: n == 16, within=10,
                         what="all 16 connections accepted or refused")
        assert front.held() == 12 == front.in_handshake() and front.counters.evicted == 2
        # A newcomer with a prompt handshake is answered however full it is: the first takes
        # a flood connection's place, and frees its own once answered.
        for _ in range(3):
            assert await _healthz(running.port, ca) == 200
            await eventually(front.held, until=lambda n: n == 11, within=10,
                             what="the answered connection closed")
        assert front.counters.evicted == 3 and front.counters.handed == 3
    finally:
        await _close(held)
        await running.stop()


async def test_idle_and_half_open_connections_are_cut_after_the_handshake_timeout(
        tmp_path: Path) -> None:
    running = await _server(tmp_path, header_timeout=0.5)
    front = running.front
    assert front is not None
    held = await _idle("127.0.0.5", running.port, 3)
    try:
        held[0].write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello begun
        await eventually(lambda: front.counters.handshakes_failed, until=lambda n: n == 3,
                         within=10, what="the three cut after their handshake deadline")
        assert [await _closed(w) for w in held] == [True] * 3 and front.held() == 0
    finally:
        await _close(held)
        await running.stop()


class _BigLog(_Backend):
    """A log of `SIZE` bytes, produced as fast as it is taken."""

    SIZE = 64 * 1024 * 1024

    def __init__(self) -> None:
        self.produced = 0

    async def open_logs(self, pod: nr.PodRef, container: str,
                        options: nr.LogOptions) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        chunk = b"x" * 65535 + b"\n"
        while self.produced < self.SIZE:
            self.produced += len(chunk)
            yield chunk


async def test_a_slow_reader_holds_back_the_writer_through_the_front(tmp_path: Path) -> None:
    """Flow control across the TLS front: while the client reads nothing, the log is taken
    from the backend only as far as the buffers on the way hold (not 64 MiB into memory);
    once it reads, every byte arrives."""
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    backend = _BigLog()
    running = node_server.NodeServer(backend, node_server.NodeServerConfig(
        address="127.0.0.1", port=0, node_name="n1", tls=node_server.TlsFiles(pair.cert, pair.key),
        authenticators=[nodeauth.TokenFile.parse(f"{TOKEN},bob,uid-1,devs\n")]))
    await running.start()
    context = ssl.create_default_context(cafile=str(pair.cert))
    reader, writer = await asyncio.open_connection("127.0.0.1", running.port, ssl=context,
                                                   server_hostname="n1")
    try:
        writer.write(f"GET /containerLogs/default/web/main HTTP/1.1\r\nHost: n1\r\n"
                     f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        writer.transport.pause_reading()  # the client reads nothing for now
        # What the buffers on the way take (kernel socket buffers on both legs and a few
        # transports' high-water marks), then the backend is no longer asked for more.
        await eventually(lambda: backend.produced, until=lambda n: n > 0, within=10,
                         what="the log started")
        stalled = await eventually(_Still(lambda: backend.produced).check,
                                   until=lambda n: n is not None, within=20,
                                   what="the backend held back")
        writer.transport.resume_reading()
        body = await asyncio.wait_for(reader.read(), 60)
    finally:
        writer.close()
        await running.stop()
    print(f"\nslow reader: {stalled / 2**20:.1f} MiB taken from the backend while the client "
          f"read nothing, of {_BigLog.SIZE / 2**20:.0f} MiB")
    assert stalled < 16 * 2**20
    assert body.count(b"\n") >= _BigLog.SIZE // 65536  # the whole log, after the headers


class _Still:
    """`check()`: the value once it stayed the same over three checks 0.2 s apart, else None."""

    def __init__(self, read: Any) -> None:
        self._read = read
        self._seen: list[int] = []

    async def check(self) -> int | None:
        await asyncio.sleep(0.2)  # spaces the samples out; `eventually` does the waiting
        self._seen = [*self._seen[-2:], self._read()]
        return self._seen[-1] if len(self._seen) == 3 and len(set(self._seen)) == 1 else None


# -- a real agent under a flood ----------------------------------------------------------------


@dataclass
class _Ticks:
    """A task on the agent's event loop that wakes every 50 ms (as the Lease's renewal and
    every timer there do); how late each wake-up came."""

    late: list[float] = field(default_factory=list)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + 0.05
            await asyncio.sleep(0.05)
            self.late.append(loop.time() - due)

    def since(self, start: int) -> str:
        late = sorted(self.late[start:])
        if not late:
            return "no ticks"
        return (f"{len(late)} ticks, late p50 {late[len(late) // 2] * 1000:.1f} ms, "
                f"p99 {late[int(len(late) * 0.99)] * 1000:.1f} ms, "
                f"max {late[-1] * 1000:.0f} ms")


class _Flooder:
    def __init__(self, port: int, per_source: int) -> None:
        self._args = [sys.executable, str(FLOOD), "127.0.0.1", str(port), "--sources",
                      ",".join(FLOOD_SOURCES), "--per-source", str(per_source),
                      "--half-open-share", "0.5"]
        self.process: asyncio.subprocess.Process | None = None
        self.last: dict[str, int] = {}
        self._reading: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *self._args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        self._reading = asyncio.create_task(self._read(), name="flood-reports")

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.last = json.loads(line)

    async def stop(self) -> None:
        if self.process is None:
            return
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 20)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        if self._reading is not None:
            await self._reading


async def _pod_start(agent: Harness, name: str) -> float:
    started = time.monotonic()
    agent.write(f"{name}.yaml", pod_manifest(name))
    await agent.wait_status(name, all_ready, within=90, what=f"{name} Ready")
    return time.monotonic() - started


# Seconds the agent is checked without a flood, then with one: more than the handshake
# timeout, so the idle and half-open connections the flood holds are cut and opened again.
CALM_SECONDS, FLOOD_SECONDS = 5.0, 15.0


@dataclass
class _Seen:
    """What the checks of one period saw."""

    statuses: list[int] = field(default_factory=list)
    healthz: list[float] = field(default_factory=list)  # seconds, each on a new connection
    pod_start: float = 0.0
    loop: str = ""

    def summary(self) -> str:
        times = sorted(self.healthz)
        return (f"{self.statuses.count(200)}/{len(self.statuses)} requests answered 200 "
                f"(/healthz on a new connection each: p50 {times[len(times) // 2] * 1000:.0f}"
                f" ms, max {times[-1] * 1000:.0f} ms; /pods on a kept-alive one); a pod "
                f"Ready in {self.pod_start:.2f} s; agent loop: {self.loop}")


async def _checks(agent: Harness, port: int, ca: Path, ticks: _Ticks, pod: str,
                  seconds: float) -> _Seen:
    """For `seconds` (and until the pod `pod` is Ready): /healthz on new connections, /pods
    on a kept-alive one, a pod started; the event loop's lateness meanwhile."""
    seen, first, started = _Seen(), len(ticks.late), time.monotonic()
    starting = asyncio.create_task(_pod_start(agent, pod), name=f"start-{pod}")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            ssl=ssl.create_default_context(cafile=str(ca)))) as kept:
        while time.monotonic() - started < seconds or not starting.done():
            took, status = await _timed(_healthz(port, ca))
            seen.healthz.append(took)
            seen.statuses += [status, await _pods(kept, port)]
            await asyncio.sleep(0.2)  # paces the checks; nothing waits for state here
    seen.pod_start = await starting
    seen.loop = ticks.since(first)
    return seen


@pytest.mark.runtime
async def test_a_connection_flood_leaves_the_agent_working(
        join: Any, control_plane: ControlPlane, tmp_path: Path) -> None:
    """The agent is a node of the real control plane, renewing its Lease every second: the
    renewals kube-apiserver took (its audit log) are counted before and during the flood."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"{TOKEN},bob,uid-bob,admins\n")
    node_server_settings = settings.NodeServerSettings(
        token_auth_file=tokens, authorization_mode="AlwaysAllow",
        authentication_token_webhook=False)
    async with join("flood-node", harness_args={"node_server": node_server_settings}) as agent:
        await _flood_an_agent(agent, lambda since, until: _renewals(
            control_plane, "flood-node", since, until))
        # The static pod goes with its manifest (its mirror pod with it).
        for manifest in list(agent.manifests.iterdir()):
            agent.remove(manifest.name)
        await eventually(lambda: not agent.agent_or_fail().pods(), within=60,
                         what="the static pod gone")


async def _renewals(plane: ControlPlane, node: str, since: datetime, until: datetime) -> int:
    """The node's Lease renewals kube-apiserver received between `since` and `until` (the
    audit log is written in batches: waited for until it has passed `until`)."""
    def events() -> list[dict[str, Any]]:
        return plane.audit_events()

    def stamp(event: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))

    logged = await eventually(events, within=10, what="the audit log past the window",
                              until=lambda es: bool(es) and stamp(es[-1]) > until)
    return sum(1 for e in node_requests(logged, node) if e.get("stage") == "ResponseComplete"
               and e["verb"] == "update" and e["objectRef"].get("resource") == "leases"
               and since <= stamp(e) <= until)


Renewals = Callable[[datetime, datetime], Awaitable[int]]


async def _flood_an_agent(agent: Harness, renewals: Renewals) -> None:
    port = agent.agent_or_fail().node_server_port
    front = agent.agent_or_fail()._node_server.front  # type: ignore[union-attr]
    assert front is not None
    ca = servingcerts.self_signed_paths(agent.settings.data_dir).cert
    ticks = _Ticks()
    ticker = asyncio.create_task(ticks.run(), name="flood-ticks")
    flooder = _Flooder(port, per_source=600)
    try:
        calm_from = datetime.now(UTC)
        calm = await _checks(agent, port, ca, ticks, "calm", CALM_SECONDS)
        calm_until = datetime.now(UTC)
        await flooder.start()
        await eventually(front.held, until=lambda n: n >= front.limits.max_total - 8,
                         within=60, what="the flood filling the node server's connections")
        flood_from = datetime.now(UTC)
        flooded = await _checks(agent, port, ca, ticks, "flooded", FLOOD_SECONDS)
        flood_until = datetime.now(UTC)
        held, counters, flood = front.held(), front.counters, dict(flooder.last)
    finally:
        await flooder.stop()
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
    calm_renewals = await renewals(calm_from, calm_until)
    flood_renewals = await renewals(flood_from, flood_until)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(f"\nconnection flood from {len(FLOOD_SOURCES)} addresses, 600 connections each, "
          f"half of them half-open, for {FLOOD_SECONDS:.0f} s (flood process: {flood}):\n"
          f"node server held {held} connections (cap {front.limits.max_total}, "
          f"{front.limits.max_per_source} per address; open-file limit {soft}); {counters}\n"
          f"before the flood ({CALM_SECONDS:.0f} s): {calm.summary()}; "
          f"{calm_renewals} Lease renewals\n"
          f"during the flood: {flooded.summary()}; {flood_renewals} Lease renewals")
    assert calm.statuses == [200] * len(calm.statuses)
    assert flooded.statuses == [200] * len(flooded.statuses)
    assert held <= front.limits.max_total
    assert counters.evicted > 0 and counters.refused_total > 0
    assert flood.get("opened", 0) > 2 * front.limits.max_total
    assert flood_renewals > 0


async def _timed(call: Any) -> tuple[float, int]:
    sent = time.monotonic()
    status = await call
    return time.monotonic() - sent, status


async def _pods(session: aiohttp.ClientSession, port: int) -> int:
    async with session.get(f"https://127.0.0.1:{port}/pods",
                           headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        await response.read()
        return response.status


def test_the_open_file_limit_is_raised_and_bounds_the_connections() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        assert nodeserving.connection_cap(settings.NodeServerSettings()) == min(1024, hard) // 8
        assert host.raise_open_file_limit() == (min(1024, hard), hard)
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        assert host.raise_open_file_limit() == (hard, hard)  # nothing left to raise
        assert nodeserving.connection_cap(settings.NodeServerSettings()) == min(1024, hard // 8)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
