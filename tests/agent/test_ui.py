"""The web UI (`/ui`): real pods on the shared containerd, pages loaded by real headless Chromium.

Chromium runs as a subprocess (`--dump-dom`, `--screenshot`) awaited with asyncio, so the agent
keeps serving in this event loop while the browser fetches the page, its stylesheet and script.
Screenshots go to `test-artifacts/` (gitignored) and are checked to be real, non-blank PNGs in
which the stylesheet's colours show. A few tests below need no browser: escaping, and the
routes' status codes and headers. (The histogram values and charts are tested in tests/model,
`Metrics.sandbox_metrics` in test_metrics_values.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import struct
import tempfile
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import aiohttp
import pytest

from nodelet import cli
from nodelet.adapters import http_server
from nodelet.adapters.web import pages
from nodelet.model.core import events as ev
from nodelet.model.core import health as hm
from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.model.reports import histograms as hg
from support.harness import Harness, all_ready, cond, pod_manifest
from support.polling import eventually

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
GVISOR_ERROR = 'no runtime for "gvisor" is configured'
STARTUP = (st.POD_SCHEDULED, st.POD_READY_TO_START_CONTAINERS, st.INITIALIZED,
           st.CONTAINERS_READY, st.READY)
# The stylesheet's colours: reached timeline bars, histogram bars, the sandbox error box.
BAR_GREEN = (0x43, 0xA0, 0x47)
HISTOGRAM_BLUE = (0x5C, 0x8F, 0xD6)
ALERT_RED = (0xFF, 0xEB, 0xEE)
# Without the background-networking flags Chromium keeps
# dialling out, and this machine's closed network refuses it.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-dev-shm-usage", "--force-color-profile=srgb",
                  "--hide-scrollbars")
CHROMIUM_TIMEOUT = 90.0


# --- Chromium -------------------------------------------------------------------------------


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium not found: `make setup` installs Debian's chromium")
    return path


async def chromium(*args: str) -> bytes:
    """Run headless Chromium with a fresh profile; its stdout. Never blocks the event loop."""
    with tempfile.TemporaryDirectory(prefix="nl-chromium-") as profile:
        proc = await asyncio.create_subprocess_exec(
            _chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), CHROMIUM_TIMEOUT)
        except TimeoutError:
            pytest.fail(f"chromium {args} did not finish within {CHROMIUM_TIMEOUT}s")
        finally:
            with contextlib.suppress(ProcessLookupError):  # helpers of ours that outlived it
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    assert proc.returncode == 0, f"chromium {args} exited {proc.returncode}: {err[-2000:]!r}"
    return out


async def dump_dom(url: str) -> Node:
    html = (await chromium("--virtual-time-budget=2000", "--dump-dom", url)).decode()
    assert "<html" in html, f"chromium returned no document for {url}: {html[:500]!r}"
    return parse_html(html)


async def screenshot(url: str, name: str, size: tuple[int, int] = (1280, 1200)) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.unlink(missing_ok=True)
    await chromium(f"--screenshot={path}", f"--window-size={size[0]},{size[1]}",
                   "--virtual-time-budget=2000", url)
    assert path.is_file(), f"chromium wrote no screenshot for {url}"
    return path


# --- a small DOM over html.parser ---------------------------------------------------------------

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self) -> Iterator[Node]:
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.walk()

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        """Descendants by tag, class and attributes (`data_pod=` matches `data-pod`)."""
        wanted = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [n for n in self.walk()
                if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and all(n.attrs.get(k) == v for k, v in wanted.items())]

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, cls, **attrs)
        assert len(found) == 1, f"expected one <{tag} .{cls} {attrs}>, found {len(found)}"
        return found[0]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(html: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


# --- a small PNG decoder (8-bit RGB/RGBA, non-interlaced: what Chromium writes) --------------


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes); asserts the file is a well-formed PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        crc = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        assert zlib.crc32(kind + chunk) == crc, f"bad CRC in {kind!r} chunk"
        header = chunk if kind == b"IHDR" else header
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + length
        if kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, color, interlace) in ((8, 2, 0), (8, 6, 0)), (depth, color, interlace)
    bpp = 3 if color == 2 else 4
    raw, stride, rows = zlib.decompress(idat), width * bpp, []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], previous[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + (0, a, b, (a + b) // 2, _paeth(a, b, c))[kind]) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def colours(path: Path) -> tuple[tuple[int, int], Counter[tuple[int, int, int]]]:
    width, height, rows = decode_png(path.read_bytes())
    bpp = len(rows[0]) // width
    counts: Counter[tuple[int, int, int]] = Counter()
    for row in rows:
        counts.update(zip(row[0::bpp], row[1::bpp], row[2::bpp], strict=True))
    return (width, height), counts


def near(counts: Counter[tuple[int, int, int]], rgb: tuple[int, int, int], tol: int = 6) -> int:
    return sum(n for c, n in counts.items() if all(abs(x - y) <= tol for x, y in zip(c, rgb,
                                                                                       strict=True)))


def assert_real_picture(path: Path, size: tuple[int, int]) -> Counter[tuple[int, int, int]]:
    got_size, counts = colours(path)
    assert got_size == size
    top, top_count = counts.most_common(1)[0]
    assert len(counts) > 20, f"{path} has only {len(counts)} colours"
    assert top_count < 0.97 * size[0] * size[1], f"{path} is almost all {top}"
    return counts


# --- end to end ---------------------------------------------------------------------------------


def badges(row: Node) -> dict[str, str]:
    return {b.attrs["data-condition"]: b.attrs["data-status"] for b in row.all("span", "badge")}


async def start_pods(agent: Harness) -> None:
    agent.write("web.yaml", pod_manifest("web"))
    agent.write("stuck.yaml", pod_manifest("stuck", extra_spec="runtimeClassName: gvisor\n"))
    await agent.wait_status("web", all_ready, what="web ready")

    def sandbox_failed(s: st.PodStatus) -> bool:
        c = cond(s, st.POD_READY_TO_START_CONTAINERS)
        return c is not None and c.status == "False" and GVISOR_ERROR in c.message

    await agent.wait_status("stuck", sandbox_failed, what="stuck pod's sandbox error")
    await eventually(lambda: any(e.reason == ev.FAILED_CREATE_POD_SANDBOX
                                 for e in agent.events_of("stuck")),
                     within=30, what="FailedCreatePodSandBox event")


async def test_ui_in_chromium(agent: Harness) -> None:
    await start_pods(agent)
    base = f"http://127.0.0.1:{agent.agent_or_fail().server_port}"

    # The pods page: both pods, their conditions as badges, the stuck pod's sandbox error.
    dom = await dump_dom(f"{base}/ui")
    assert dom.one("html").attrs.get("data-js") == "on", "ui.js did not run (CSP, route?)"
    web = dom.one("tr", "pod", data_pod="default/web-testnode")
    stuck = dom.one("tr", "pod", data_pod="default/stuck-testnode")
    assert badges(web) == dict.fromkeys(STARTUP, "True")
    assert badges(stuck) == {st.POD_SCHEDULED: "True", st.POD_READY_TO_START_CONTAINERS: "False",
                             st.INITIALIZED: "True", st.CONTAINERS_READY: "False",
                             st.READY: "False"}
    assert {b.attrs["data-status"]: b.classes for b in stuck.all("span", "badge")}["False"] \
        >= {"badge", "false"}
    assert web.one("td", "sandbox-error").text() == ""
    assert GVISOR_ERROR in stuck.one("td", "sandbox-error").text()
    assert web.one("td", "phase").text() == "Running"
    assert stuck.one("a").attrs["href"] == "/ui/pods/default/stuck-testnode"

    # The stuck pod: the error up front, a pending sandbox bar, the failed attempts, the events.
    dom = await dump_dom(f"{base}/ui/pods/default/stuck-testnode")
    assert GVISOR_ERROR in dom.one("section", id="sandbox-error").text()
    svg = dom.one("svg", id="timeline")
    row = svg.one("g", data_condition=st.POD_READY_TO_START_CONTAINERS)
    assert row.attrs["data-status"] == "False"
    assert row.one("rect").classes == {"bar", "pending"}
    failed = svg.all("g", "failed")
    assert failed and int(failed[0].attrs["data-count"]) >= 1
    assert GVISOR_ERROR in failed[0].one("title").text()
    assert any(r.text().startswith("Warning") and ev.FAILED_CREATE_POD_SANDBOX in r.text()
               for r in dom.one("table", id="events").all("tr"))
    assert dom.one("table", id="attempts").all("tr", "failed")

    # The healthy pod: five reached bars in start-up order, precise transition times.
    dom = await dump_dom(f"{base}/ui/pods/default/web-testnode")
    assert not dom.all(id="sandbox-error")
    rows = dom.one("svg", id="timeline").all("g", "row")
    assert [r.attrs.get("data-condition") for r in rows[:5]] == list(STARTUP)
    assert all(r.one("rect").classes == {"bar", "reached"} for r in rows[:5])
    times = [r.all("td")[2].text() for r in dom.one("table", id="conditions").all("tr")[1:]]
    assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", t)
                         for t in times), times

    # Screenshots: real pictures, drawn with the stylesheet (bar and alert colours present).
    size = (1280, 1200)
    counts = assert_real_picture(
        await screenshot(f"{base}/ui/pods/default/web-testnode", "ui-pod-web.png", size), size)
    assert near(counts, BAR_GREEN) > 500, "no reached (green) timeline bars in the screenshot"
    counts = assert_real_picture(
        await screenshot(f"{base}/ui/pods/default/stuck-testnode", "ui-pod-stuck.png", size),
        size)
    assert near(counts, ALERT_RED) > 2000, "no sandbox error box in the screenshot"
    assert_real_picture(await screenshot(f"{base}/ui", "ui-pods.png", size), size)

    # The node: the sandbox-ready histogram counted the web pod; failures by error class.
    dom = await dump_dom(f"{base}/ui/node")
    bars = dom.one("svg", id="sandbox-ready-histogram").all("rect", "hbar")
    assert sum(float(b.attrs["data-count"]) for b in bars) >= 1
    assert bars[-1].attrs["data-le"] == "+Inf"
    failures = dom.one("table", id="failures").all("tr")
    assert any(float(r.all("td")[1].text()) >= 1 for r in failures[1:])
    counts = assert_real_picture(await screenshot(f"{base}/ui/node", "ui-node.png", size), size)
    assert near(counts, HISTOGRAM_BLUE) > 200, "no histogram bars in the screenshot"


async def test_timeline_command(agent: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    await start_pods(agent)
    server = f"http://127.0.0.1:{agent.agent_or_fail().server_port}"
    # The CLI reads with blocking urllib: run it in a thread so this loop keeps serving.
    assert await asyncio.to_thread(cli.main, ["timeline", "web-testnode", "--server", server]) == 0
    web = capsys.readouterr().out
    assert web.startswith("Pod default/web-testnode (Running), scheduled ")
    assert re.search(r"^PodReadyToStartContainers +True +\S+\.\d{6}Z +\|[█·]+\|", web, re.M), web
    assert "Sandbox ready after " in web and "Sandbox error" not in web
    argv = ["timeline", "stuck-testnode", "-n", "default", "--server", server]
    assert await asyncio.to_thread(cli.main, argv) == 0
    stuck = capsys.readouterr().out
    assert re.search(r"^PodReadyToStartContainers +False .*waiting ", stuck, re.M), stuck
    assert re.search(r"Sandbox attempts \([1-9]\d* failed\):", stuck), stuck
    assert "FailedCreatePodSandBox" in stuck
    assert "Sandbox error: no pod sandbox exists: " in stuck and GVISOR_ERROR in stuck
    argv = ["timeline", "nope", "--server", server]
    assert await asyncio.to_thread(cli.main, argv) == 1
    assert 'pod "nope" not found' in capsys.readouterr().err


# --- without a browser: escaping, routes ------------------------------------------------------

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def evil_pod() -> tuple[pods.Pod, st.PodStatus]:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    pod = pods.Pod(uid=pods.PodUID("u"), name='a"b<c>', namespace="ns&1", spec=spec, raw={})
    condition = st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "False",
                                reason="PodSandboxNotReady", message=EVIL,
                                last_transition_time=T0)
    return pod, st.PodStatus(phase="Pending", conditions=(condition,))


def evil_events() -> list[ev.Event]:
    event = ev.new_event(evil_pod()[0], "Warning", EVIL, EVIL, at=T0, host="n")
    return [event.repeated(T0)]


def evil_metrics() -> hg.SandboxMetrics:
    h = hg.Histogram('a"b<c>', (1.0, float("inf")), (1.0, 0.0), 0.5)
    return hg.SandboxMetrics(h, h, ((EVIL, 2.0),))


@pytest.mark.parametrize("page", ["pods", "pod", "node", "not_found"])
def test_pages_escape_user_input(page: str) -> None:
    ui, now = pages.Ui(), T0 + timedelta(seconds=5)
    html = {"pods": lambda: ui.pods_page([evil_pod()], now),
            "pod": lambda: ui.pod_page(*evil_pod(), evil_events(), now),
            "node": lambda: ui.node_page(evil_metrics(), [evil_pod()], now),
            "not_found": lambda: ui.not_found_page('a"b<c>', EVIL, now)}[page]()
    assert "<script>alert" not in html and "<img src=x" not in html and 'a"b<c>' not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert 'a&quot;b&lt;c&gt;' in html
    # Every script the page loads is our own file.
    dom = parse_html(html)
    assert [s.attrs.get("src") for s in dom.all("script")] == ["/ui/static/ui.js"]


def test_pod_links_are_url_quoted() -> None:
    assert pages.pod_path("ns&1", 'a"b<c>/d') == "/ui/pods/ns%261/a%22b%3Cc%3E%2Fd"


@dataclass
class FakeView:
    """Two pods and their events; the real Agent is tested in Chromium above."""

    def pods(self) -> list[tuple[pods.Pod, st.PodStatus | None]]:
        spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
        pod = pods.Pod(uid=pods.PodUID("u1"), name="web", namespace="default", spec=spec, raw={})
        status = st.PodStatus(phase="Running", conditions=(
            st.PodCondition(st.POD_SCHEDULED, "True", last_transition_time=T0),))
        return [(pod, status)]

    def events(self, pod: str | None, namespace: str | None) -> list[ev.Event]:
        web = self.pods()[0][0]
        return [ev.new_event(web, "Warning", ev.FAILED_CREATE_POD_SANDBOX, "boom", at=T0,
                             host="n")]

    def health(self) -> list[hm.HealthCheck]:
        return [hm.HealthCheck("runtime", True)]

    def manifests(self) -> list[hm.ManifestReport]:
        return []

    def metrics_text(self) -> tuple[bytes, str]:
        return b"kubelet_started_pods_total 2.0\n", "text/plain; version=0.0.4; charset=utf-8"

    def sandbox_metrics(self) -> hg.SandboxMetrics:
        latency = hg.from_cumulative(
            "lat_seconds", [(0.1, 2.0), (0.5, 6.0), (1.0, 8.0), (float("inf"), 10.0)], 9.5)
        run = hg.from_cumulative("run_seconds", [(1.0, 3.0), (float("inf"), 4.0)], 7.5)
        return hg.SandboxMetrics(latency, run, (("ip_exhausted", 4.0), ("other", 3.0)))


@contextlib.asynccontextmanager
async def serving(token: str | None = None) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    server = http_server.HttpServer(FakeView())
    await server.start("127.0.0.1", 0, token)
    try:
        async with aiohttp.ClientSession() as session:
            yield f"http://127.0.0.1:{server.port}", session
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("path", "status", "content_type"),
    [
        ("/ui", 200, "text/html"),
        ("/ui/", 200, "text/html"),
        ("/ui/pods/default/web", 200, "text/html"),
        ("/ui/pods/default/nope", 404, "text/html"),
        ("/ui/node", 200, "text/html"),
        ("/ui/static/ui.css", 200, "text/css"),
        ("/ui/static/ui.js", 200, "text/javascript"),
        ("/ui/static/../app.py", 404, None),
        ("/ui/static/nope.js", 404, None),
    ],
)
async def test_ui_routes(path: str, status: int, content_type: str | None) -> None:
    async with serving() as (base, session), session.get(base + path) as response:
        assert response.status == status
        if content_type is not None:
            assert response.content_type == content_type
        if content_type == "text/html":
            assert "script-src 'self'" in response.headers["Content-Security-Policy"]


async def test_ui_follows_the_api_auth() -> None:
    async with serving(token="t0k") as (base, session):
        async with session.get(base + "/ui") as response:
            assert response.status == 401
        headers = {"Authorization": "Bearer t0k"}
        async with session.get(base + "/ui", headers=headers) as response:
            assert response.status == 200


async def test_precise_events() -> None:
    async with serving() as (base, session):
        async with session.get(base + "/events?precise") as response:
            item = (await response.json())["items"][0]
        assert item["firstTimestamp"] == item["lastTimestamp"] == "2024-05-01T12:00:00.123456Z"
        async with session.get(base + "/events") as response:
            item = (await response.json())["items"][0]
        assert item["firstTimestamp"] == "2024-05-01T12:00:00Z"
