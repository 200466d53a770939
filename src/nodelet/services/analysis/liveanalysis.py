"""`nodelet analyze --kubeconfig`: pods and events straight from an API server.

Once: the pods (of one namespace, or all with `-A`; `--selector` as kubectl's `-l`) and the
events are listed in pages of `settings.ANALYZE_PAGE_SIZE` (`limit`/`continue`, as kubectl
does) through `adapters/kube.py`, and analysed like a dump. With `--watch`: the pods are
listed and watched for ever by the client's `Reflector` (a dropped watch is renewed from the
last resourceVersion, a 410 Gone lists again), each pod's sandbox-ready time (or its
re-created sandbox, or why it is stuck) is printed as it happens, and the running numbers are
served in the Prometheus text format on `--metrics-address` (`GET /metrics`) until SIGINT or
SIGTERM.

Errors: `analysis.AnalysisError`, one line (an unusable kubeconfig, an API error on the first
list).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodelet import settings as settings_
from nodelet.adapters import kube, kubeconfig
from nodelet.helpers import tasks
from nodelet.model.reports import analysis, analysis_live
from nodelet.model.reports import analysis_input as ai
from nodelet.services.analysis import dumpfiles

# How long the first list may take before the command gives up (seconds).
FIRST_LIST_TIMEOUT = 60.0
# A metrics request must arrive whole within this many seconds.
METRICS_READ_TIMEOUT = 5.0


@dataclass(frozen=True)
class Request:
    kubeconfig: Path
    namespace: str | None  # None: all namespaces
    selector: str = ""
    output: str = "table"
    output_file: Path | None = None
    watch: bool = False
    metrics_address: str | None = None  # HOST:PORT
    page_size: int = settings_.ANALYZE_PAGE_SIZE  # 0: one list call


def _client(request: Request) -> tuple[kube.KubeClient, str]:
    """A client of the kubeconfig's server, and the server's URL."""
    try:
        config = kubeconfig.load(request.kubeconfig)
    except kubeconfig.KubeconfigError as exc:
        raise analysis.AnalysisError(str(exc)) from exc
    return kube.KubeClient(config, user_agent="nodelet-analyze"), config.server


def _path(plural: str, namespace: str | None) -> str:
    return kube.core_path(plural, namespace or "")


def _where(request: Request) -> str:
    scope = "all namespaces" if request.namespace is None else f"namespace {request.namespace}"
    return scope + (f", pods {request.selector}" if request.selector else "")


async def snapshot(request: Request) -> tuple[analysis.Analysis, str]:
    """The analysis of the pods and events listed now, and the source's name."""
    client, server = _client(request)
    source = f"{server} ({_where(request)})"
    try:
        pods, _ = await client.list_objects(_path("pods", request.namespace),
                                            label_selector=request.selector,
                                            page_size=request.page_size)
        events, _ = await client.list_objects(_path("events", request.namespace),
                                              page_size=request.page_size)
    except kube.KubeError as exc:
        raise analysis.AnalysisError(f"{server}: {exc}") from exc
    finally:
        await client.close()
    reader = ai.DumpReader()
    reader.add({"kind": "PodList", "items": pods}, f"{source}: pods")
    reader.add({"kind": "EventList", "items": events}, f"{source}: events")
    return analysis.analyze_dump(reader), source


def run(request: Request) -> int:
    if request.watch:
        return asyncio.run(_watch(request))
    result, source = asyncio.run(snapshot(request))
    dumpfiles.write(dumpfiles.render(result, request.output, source, source),
                    request.output_file)
    return 0


# --- watch


async def _watch(request: Request) -> int:
    client, url = _client(request)
    monitor = analysis_live.Monitor()
    out = _printer()
    group = tasks.TaskGroup()
    server: asyncio.Server | None = None
    try:
        reflector = kube.Reflector(
            client, path=_path("pods", request.namespace), label_selector=request.selector,
            page_size=request.page_size, name="analyze-pods",
            on_change=lambda store: _report(monitor, reflector, store, out))
        group.spawn("analyze-pods", reflector.run())
        if request.metrics_address:
            server = await _serve_metrics(request.metrics_address, monitor.exposition)
            out(f"# serving metrics on http://{_bound(server)}/metrics")
        await _first_list(reflector, url)
        out(f"# watching pods in {_where(request)} of {url}")
        await _until_signalled()
    finally:
        if server is not None:
            server.close()
            await server.wait_closed()
        await group.close()
        await client.close()
    return 0


def _report(monitor: analysis_live.Monitor, reflector: kube.Reflector,
            store: Mapping[str, Any], out: Callable[[str], None]) -> None:
    monitor.relists = reflector.lists
    changed = reflector.changed  # one watch event: that pod only, not the whole store
    try:
        news = monitor.update(store) if changed is None else \
            monitor.update_one(changed, store.get(changed))
    except analysis.AnalysisError as exc:  # one malformed pod must not stop the watch
        out(f"# skipped: {exc}")
        return
    for seen in news:
        out(seen.line())


def _printer() -> Callable[[str], None]:
    def out(line: str) -> None:
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            pass
    return out


async def _first_list(reflector: kube.Reflector, server: str) -> None:
    """Wait for the first list; AnalysisError (one line) when it does not come."""
    try:
        async with asyncio.timeout(FIRST_LIST_TIMEOUT):
            while not reflector.listed.is_set():
                if reflector.last_error is not None:
                    raise analysis.AnalysisError(f"{server}: {reflector.last_error}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reflector.listed.wait(), 0.2)
    except TimeoutError as exc:
        raise analysis.AnalysisError(f"{server}: no pod list within {FIRST_LIST_TIMEOUT:g}s"
                                     ) from exc


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


# --- metrics: a minimal HTTP/1.1 responder (GET /metrics, nothing else)


async def _serve_metrics(address: str, render: Callable[[], str]) -> asyncio.Server:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise analysis.AnalysisError(f"--metrics-address {address!r}: expected HOST:PORT, "
                                     "e.g. 127.0.0.1:9101")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(METRICS_READ_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            if head.startswith(b"GET ") and target.split(b"?")[0] == b"/metrics":
                status, body = "200 OK", render().encode()
            else:
                status, body = "404 Not Found", b"only GET /metrics is served\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; "
                         f"charset=utf-8\r\nContent-Length: {len(body)}\r\nConnection: close"
                         "\r\n\r\n".encode() + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass
        finally:
            writer.close()

    try:
        return await asyncio.start_server(answer, host.strip("[]"), int(port))
    except OSError as exc:
        raise analysis.AnalysisError(f"--metrics-address {address}: cannot listen: "
                                     f"{exc.strerror}") from exc


def _bound(server: asyncio.Server) -> str:
    host, port = server.sockets[0].getsockname()[:2]
    return f"{host}:{port}"
