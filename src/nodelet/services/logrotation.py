"""Rotating container logs: the kubelet's container log manager, run every `period` seconds.

For each running container the relist knows of, `model.core.logrotation.plan` decides; this
module renames the file, asks the runtime to reopen the log (CRI ReopenContainerLog) and
removes the oldest rotated files. At most `workers` rotations run at once (the kubelet's
containerLogMaxWorkers). A failed reopen renames the file back, so no line is lost to a log
the runtime no longer writes; the next round tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from nodelet import settings as settings_mod
from nodelet.adapters.cri import client as cri
from nodelet.model.core import logrotation, runtime

log = logging.getLogger(__name__)


class LogRotator:
    def __init__(
        self, *, client: cri.RuntimeClient, settings: settings_mod.LogSettings,
        running: Callable[[], Iterable[runtime.ContainerInfo]], clock: Callable[[], datetime],
    ) -> None:
        """`running`: the containers to look at (the relist's running ones)."""
        self._client = client
        self._settings = settings
        self._running = running
        self._clock = clock
        self._slots = asyncio.Semaphore(max(settings.max_workers, 1))
        self.rotations = 0

    async def run(self) -> None:
        while True:
            await self.rotate_once()
            await asyncio.sleep(self._settings.monitor_period)

    async def rotate_once(self) -> None:
        logs = [(c, Path(c.log_path)) for c in self._running() if c.log_path]
        # Every log directory is read in one trip off the event loop: on an idle node nothing
        # is rotated, and a trip per container was most of what a round cost.
        sizes = await asyncio.to_thread(_sizes_by_directory, {path.parent for _, path in logs})
        now = self._clock()
        plans = [(c, logrotation.plan(path.name, sizes[path.parent],
                                      max_size=self._settings.max_size,
                                      max_files=self._settings.max_files, now=now))
                 for c, path in logs]
        await asyncio.gather(*(self._rotate(c, plan) for c, plan in plans
                               if plan.rotate_to is not None or plan.remove))

    async def _rotate(self, container: runtime.ContainerInfo, plan: logrotation.Plan) -> None:
        async with self._slots:
            path = Path(container.log_path)
            if plan.rotate_to is not None:
                await self._reopen(container, path, path.with_name(plan.rotate_to))
            for name in plan.remove:
                with contextlib.suppress(FileNotFoundError):
                    await asyncio.to_thread(os.unlink, path.with_name(name))

    async def _reopen(self, container: runtime.ContainerInfo, path: Path, target: Path) -> None:
        try:
            await asyncio.to_thread(os.rename, path, target)
        except OSError as exc:
            log.warning("rotate log %s: %s", path, exc)
            return
        try:
            await self._client.reopen_container_log(container.id)
        except cri.CriError as exc:
            # The runtime still writes the renamed file: give it its name back.
            log.warning("reopen log of container %s: %s; rotation undone", container.id, exc)
            with contextlib.suppress(OSError):
                await asyncio.to_thread(os.rename, target, path)
            return
        self.rotations += 1


def _sizes_by_directory(directories: Iterable[Path]) -> dict[Path, dict[str, int]]:
    """`_sizes` of each directory (blocking)."""
    return {directory: _sizes(directory) for directory in directories}


def _sizes(directory: Path) -> dict[str, int]:
    """Sizes of the files in a container's log directory (empty when it is gone)."""
    sizes = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            with contextlib.suppress(FileNotFoundError):
                if entry.is_file(follow_symlinks=False):
                    sizes[entry.name] = entry.stat(follow_symlinks=False).st_size
    return sizes


def remove_logs(log_path: str) -> None:
    """Delete a removed container's log and its rotated files (blocking)."""
    if not log_path:
        return
    path = Path(log_path)
    names = list(_sizes(path.parent))
    for name in (path.name, *logrotation.rotated_files(path.name, names)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.with_name(name))
