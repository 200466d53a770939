"""httpGet probes follow redirects as the kubelet's prober: same host only, at most 10.

Found by the [NodeConformance] test "Probing container should be restarted with a local
redirect http liveness probe": nodelet took the 302 for a success and never restarted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from aiohttp import web

from nodelet.adapters import probes_net


async def _redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound(request.query["loc"])


async def _loop(request: web.Request) -> web.Response:
    raise web.HTTPFound("/loop")


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(status=500, text="unhealthy")


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@pytest_asyncio.fixture(loop_scope="session")
async def base() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/redirect", _redirect)
    app.router.add_get("/loop", _loop)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/ok", _ok)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_local_redirect_is_followed_to_its_status(base: str) -> None:
    failed = await probes_net.http_get(f"{base}/redirect?loc=/healthz", timeout_s=5)
    assert failed.outcome == "failure"
    assert failed.output == "HTTP probe failed with statuscode: 500"
    ok = await probes_net.http_get(f"{base}/redirect?loc=/ok", timeout_s=5)
    assert (ok.outcome, ok.output) == ("success", "ok")


async def test_a_redirect_to_another_host_is_a_success_not_followed(base: str) -> None:
    """A success with a warning: the prober records a ProbeWarning event (tests/model)."""
    attempt = await probes_net.http_get(f"{base}/redirect?loc=http://0.0.0.0/", timeout_s=5)
    assert attempt.outcome == "warning"
    assert attempt.output.startswith("Probe terminated redirects, Response body: ")


async def test_more_than_ten_redirects_fail(base: str) -> None:
    attempt = await probes_net.http_get(f"{base}/loop", timeout_s=5)
    assert attempt.outcome == "failure"
    assert attempt.output.endswith("stopped after 10 redirects")
