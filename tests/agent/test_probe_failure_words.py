"""A failed httpGet probe says why in the kubelet's (Go's) words, as the TCP probe does.

Found by the differential harness (tests/differential, scenario `readiness-http-refused`):
nodelet's Unhealthy event read `Cannot connect to host 10.1.2.3:8081 ssl:default [Connect
call failed ...]` (aiohttp's words) where the kubelet's reads `dial tcp 10.1.2.3:8081:
connect: connection refused`.
"""

from __future__ import annotations

import socket

from nodelet.adapters import probes_net


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: connecting to it is refused
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_a_refused_http_probe_says_dial_tcp_connection_refused() -> None:
    port = _closed_port()
    attempt = await probes_net.http_get(f"http://127.0.0.1:{port}/", timeout_s=5)
    assert attempt.outcome == "failure"
    assert attempt.output == (f'Get "http://127.0.0.1:{port}/": dial tcp 127.0.0.1:{port}: '
                              "connect: connection refused")


async def test_a_refused_tcp_probe_says_the_same() -> None:
    port = _closed_port()
    attempt = await probes_net.tcp_socket("127.0.0.1", port, timeout_s=5)
    assert attempt.output == f"dial tcp 127.0.0.1:{port}: connect: connection refused"
