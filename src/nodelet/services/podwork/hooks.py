"""Running container lifecycle hooks: postStart right after a start, preStop before a stop.

The kubelet's rules: a failed postStart hook kills the container (event FailedPostStartHook); a
preStop hook gets the pod's grace period as its budget, and whatever it leaves is what the
container's SIGTERM → SIGKILL stop gets (at least 2 s). A hook past its budget is no longer
waited for, but it is not stopped either: it ends with its container.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from nodelet.adapters import probes_net
from nodelet.adapters.cri import client as cri
from nodelet.model.core import handlers, pods, probes, runtime, terminations

log = logging.getLogger(__name__)


# After its budget a hook is no longer waited for but keeps running, as the kubelet's (which
# runs exec hooks without a timeout): a preStop hook that loops runs on through the container's
# SIGTERM until its SIGKILL, which comes at the latest this long after the budget (the
# kubelet's minimum grace period, and a second for the whole-second rounding).
_EXEC_AFTER_BUDGET = terminations.MIN_GRACE_SECONDS + 1


class HookRunner:
    def __init__(self, *, client: cri.RuntimeClient) -> None:
        self._client = client
        # Hooks past their budget, still running until their container is killed.
        self._running_on: set[asyncio.Task[str | None]] = set()

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
        task = asyncio.create_task(self._run(hook, container, container_id, pod_ip, budget),
                                   name=f"{kind} hook of {container.name} ({container_id})")
        try:
            done, _ = await asyncio.wait({task}, timeout=budget)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        self._running_on.add(task)
        task.add_done_callback(self._ended)
        return f"{kind} hook did not finish within {budget:.0f}s"

    def _ended(self, task: asyncio.Task[str | None]) -> None:
        """A hook that ran on past its budget ended (with its container, mostly)."""
        self._running_on.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s: %s", task.get_name(), task.exception())

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
            result = await self._client.exec_sync(
                container_id, list(hook.command), math.ceil(budget) + _EXEC_AFTER_BUDGET)
        except cri.CriError as exc:
            return exc.detail
        log.debug("hook %s ran in %.3fs", hook.command, time.monotonic() - started)
        if result.exit_code == 0:
            return None
        output = (result.stdout + result.stderr).decode(errors="replace").strip()
        return f"command {list(hook.command)!r} exited with {result.exit_code}: {output}"
