"""A node server backend with no pods (tests of the node server's own behaviour: TLS, limits,
reloads): healthy, empty metrics and summary, and every pod route answering NotFound."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from nodelet.model.core import health as hm
from nodelet.model.core import noderequests as nr


class EmptyBackend:
    def pods(self) -> list[Any]:
        return []

    def health(self) -> list[hm.HealthCheck]:
        return [hm.HealthCheck("stub", True, "")]

    def metrics_text(self) -> tuple[bytes, str]:
        return b"", "text/plain"

    async def summary(self, *, only_cpu_and_memory: bool) -> dict[str, Any]:
        return {}

    async def resource_metrics(self) -> bytes:
        return b""

    async def probe_metrics(self) -> bytes:
        return b""

    async def stream_url(self, request: nr.StreamRequest) -> str:
        raise nr.NotFoundError("no pods here")

    async def run(self, pod: nr.PodRef, container: str, command: Sequence[str]) -> bytes:
        raise nr.NotFoundError("no pods here")

    async def open_logs(self, pod: nr.PodRef, container: str,
                        options: nr.LogOptions) -> AsyncIterator[bytes]:
        raise nr.NotFoundError("no pods here")
