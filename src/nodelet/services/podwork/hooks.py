"""Running container lifecycle hooks: postStart right after a start, preStop before a stop.

The kubelet's rules: a failed postStart hook kills the container (event FailedPostStartHook); a
preStop hook gets the pod's grace period as its budget, and whatever it leaves is what the
container's SIGTERM → SIGKILL stop gets.
"""

from __future__ import annotations

import asyncio
import logging
import time

from nodelet.adapters import probes_net
from nodelet.adapters.cri import client as cri
from nodelet.model.core import handlers, pods, probes, runtime

log = logging.getLogger(__name__)


class HookRunner:
    def __init__(self, *, client: cri.RuntimeClient) -> None:
        self._client = client

    async def run(
        self,
        container: pods.Container,
        container_id: runtime.ContainerID,
        kind: handlers.HookKind,
        *,
        pod_ip: str,
        budget: float,
    ) -> str | None:
        """Run the hook within `budget` seconds; None when it succeeded or there is none,
        else what went wrong (for the event)."""
        hook = container.lifecycle.hook(kind)
        if hook is None:
            return None
        try:
            return await asyncio.wait_for(
                self._run(hook, container, container_id, pod_ip, budget), timeout=budget
            )
        except TimeoutError:
            return f"{kind} hook did not finish within {budget:.0f}s"

    async def _run(
        self,
        hook: handlers.Hook,
        container: pods.Container,
        container_id: runtime.ContainerID,
        pod_ip: str,
        budget: float,
    ) -> str | None:
        if isinstance(hook, handlers.SleepAction):
            await asyncio.sleep(min(hook.seconds, budget))
            return None
        if isinstance(hook, handlers.ExecAction):
            return await self._exec(hook, container_id, budget)
        try:
            port = probes.resolve_port(hook.port, container)
        except probes.ProbeError as exc:
            return exc.message
        if isinstance(hook, handlers.HTTPGetAction):
            url = probes.http_url(hook, pod_ip=pod_ip, port=port)
            attempt = await probes_net.http_get(url, headers=hook.headers, timeout_s=budget)
        else:
            attempt = await probes_net.tcp_socket(hook.host or pod_ip, port, timeout_s=budget)
        return None if attempt.outcome == "success" else attempt.output or "failed"

    async def _exec(
        self, hook: handlers.ExecAction, container_id: runtime.ContainerID, budget: float
    ) -> str | None:
        started = time.monotonic()
        try:
            result = await self._client.exec_sync(container_id, list(hook.command),
                                                  max(int(budget), 1))
        except cri.CriError as exc:
            return exc.detail
        log.debug("hook %s ran in %.3fs", hook.command, time.monotonic() - started)
        if result.exit_code == 0:
            return None
        output = (result.stdout + result.stderr).decode(errors="replace").strip()
        return f"command {list(hook.command)!r} exited with {result.exit_code}: {output}"
