"""Rotating container logs: the kubelet's container log manager, run every `period` seconds.

For each running container the relist knows of, `model.core.logrotation.plan` decides; this
module renames the file, asks the runtime to reopen the log (CRI ReopenContainerLog) and
removes the oldest rotated files and gzips every rotated file but the newest (written to
`<name>.gz.tmp`, renamed to `<name>.gz`, then the original removed, so a crash leaves either
file whole). At most `workers` rotations run at once (the kubelet's containerLogMaxWorkers).

No line is lost or cut at a rotation. The runtime writes whole CRI records; a line the
container had half written when the log was reopened ends the old file as a partial (`P`)
record and goes on in the new one, as under the kubelet. A failed reopen gives the file its
name back, so no line goes to a log the runtime no longer writes — unless the runtime did
reopen after all (a call that timed out but went through): then it writes a new file under
that name, which is never replaced; the renamed file stays a rotated one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import os
import shutil
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
        # Rotated files waiting for their gzip, and the one being compressed: the next
        # rounds neither wait for them nor plan them again.
        self._to_compress: asyncio.Queue[Path] = asyncio.Queue()
        self._compressing: set[Path] = set()
        self.rotations = 0

    async def run(self) -> None:
        """Rotate every `monitor_period` s, and compress on the side, one file at a time:
        gzipping a flooded log takes seconds, and a rotation waiting for it lets the current
        log grow past its size all that time (measured with the gzip inside the round: under
        a `yes` flood the rounds came 10-22 s apart and the current log reached 1.4 GB,
        bench/logflood.py)."""
        await asyncio.gather(self._rotating(), self._compressing_loop())

    async def _rotating(self) -> None:
        while True:
            rotated = await self.rotate_once()
            await asyncio.sleep(logrotation.next_check(
                self._settings.monitor_period, rotated, self._settings.max_size))

    async def _compressing_loop(self) -> None:
        while True:
            path = await self._to_compress.get()
            try:
                await asyncio.to_thread(compress, path)
            except FileNotFoundError:
                pass  # removed meanwhile (the pod went, or it was the oldest)
            except OSError as exc:
                log.warning("compress rotated log %s: %s", path, exc)
            finally:
                self._compressing.discard(path)

    async def rotate_once(self) -> list[int]:
        """One round; returns the sizes of the logs it rotated."""
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
                               if plan.rotate_to is not None or plan.remove or plan.compress))
        return [sizes[Path(c.log_path).parent].get(Path(c.log_path).name, 0)
                for c, plan in plans if plan.rotate_to is not None]

    async def _rotate(self, container: runtime.ContainerInfo, plan: logrotation.Plan) -> None:
        async with self._slots:
            path = Path(container.log_path)
            if plan.rotate_to is not None:
                await self._reopen(container, path, path.with_name(plan.rotate_to))
            busy = {p.name + logrotation.GZ + logrotation.TMP for p in self._compressing}
            for name in plan.remove:
                if name in busy:
                    continue  # a compression under way, not one that stopped half-way
                with contextlib.suppress(FileNotFoundError):
                    await asyncio.to_thread(os.unlink, path.with_name(name))
            for name in plan.compress:
                rotated = path.with_name(name)
                if rotated not in self._compressing:
                    self._compressing.add(rotated)
                    self._to_compress.put_nowait(rotated)

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
            undone = await asyncio.to_thread(_rename_back, target, path)
            log.warning("reopen log of container %s: %s; %s", container.id, exc,
                        "rotation undone" if undone else "the runtime reopened it after all")
            if not undone:
                self.rotations += 1
            return
        self.rotations += 1


def _rename_back(rotated: Path, path: Path) -> bool:
    """Give `rotated` its name back unless a file by that name exists (blocking): a rename
    would replace the log the runtime has just reopened and lose what it wrote there."""
    try:
        os.link(rotated, path)  # fails where `rename` would silently replace
    except FileExistsError:
        return False
    except OSError as exc:
        log.warning("rename rotated log %s back: %s", rotated, exc)
        return False
    os.unlink(rotated)
    return True


def compress(path: Path) -> None:
    """`path` gzipped into `<path>.gz`, then removed (blocking). Nothing is left of a
    compression that failed, or whose file went meanwhile (the pod was deleted, or the file
    was the oldest): its `.tmp` is removed, and the directory too if that leaves it empty
    (a deletion of the pod's logs that ran meanwhile could not remove it)."""
    tmp = path.with_name(path.name + ".gz.tmp")
    try:
        # Level 6: Go's default, which the kubelet's gzip writer uses.
        with path.open("rb") as source, gzip.open(tmp, "wb", compresslevel=6) as out:
            shutil.copyfileobj(source, out, 1 << 20)
        if not path.exists():
            raise FileNotFoundError(f"{path} removed while it was compressed")
        os.rename(tmp, path.with_name(path.name + ".gz"))
        os.unlink(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        for directory in (path.parent, path.parent.parent):  # the container's, the pod's
            with contextlib.suppress(OSError):  # not empty: still in use
                directory.rmdir()
        raise


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
    for name in (path.name, *logrotation.rotated_files(path.name, names),
                 *logrotation.unfinished_files(path.name, names)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.with_name(name))
