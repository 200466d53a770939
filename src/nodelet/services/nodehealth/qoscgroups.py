"""The QoS cgroup manager: kubepods with the node's allocatable, and the burstable and
besteffort levels with shares that follow the pods admitted.

As the kubelet's container manager: at start kubepods gets node allocatable
(--enforce-node-allocatable=pods) and both QoS levels are made; the levels' shares are
written when a pod is admitted (one found running after an agent restart too) or
removed and their values change, and rewritten once a minute anyway (the kubelet's
UpdateCgroups). The values come from `model.core.qoscgroups`; a cgroup that cannot be
written is logged and retried at the next update, and pods still run (with their own
limits) meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from nodelet.adapters import cgroups
from nodelet.helpers import tasks
from nodelet.model.core import pods, qoscgroups

log = logging.getLogger(__name__)


class QosCgroups:
    def __init__(
        self,
        *,
        cgroup_root: str,
        node: qoscgroups.Limits,
        active: Callable[[], Iterable[pods.Pod]],
        period: float = 60.0,
        mount: Path = cgroups.CGROUP_ROOT,
    ) -> None:
        """`node`: kubepods' limits (`qoscgroups.node_allocatable`); `active()`: the pods
        admitted and not yet terminated; `period`: seconds between periodic updates."""
        self._root = cgroup_root
        self._node = node
        self._active = active
        self._period = period
        self._mount = mount
        self._lock = asyncio.Lock()  # one update at a time: the newest pod set is written last
        self._wake = asyncio.Event()
        # Updates asked for (numbered as asked) and the newest number the last written
        # update covered: it read the pods after every call numbered up to it was made.
        self._asked = 0
        self._covered = 0
        # What each level was last written with: a level whose limits did not change is not
        # written again before a sandbox (two thread hops per pod), only by the periodic update.
        self._written: dict[str, qoscgroups.Limits] = {}

    async def start(self, group: tasks.TaskGroup) -> None:
        """Enforce node allocatable on kubepods, make the QoS levels, start the updates."""
        top = qoscgroups.kubepods(self._root)
        try:
            await asyncio.to_thread(cgroups.apply, top, self._node, self._mount)
        except OSError as exc:
            log.warning("node allocatable not enforced on cgroup %s: %s", top, exc)
        await self.update()
        group.spawn("qos-cgroups", self._run())

    def changed(self) -> None:
        """The admitted pods changed: update the QoS levels soon (without waiting here)."""
        self._wake.set()

    async def update(self, *, rewrite: bool = False) -> None:
        """Write the QoS levels' limits for the pods active now (`rewrite`: also those whose
        limits did not change since they were last written); returns once an update that
        read the pods after this call was made is written. Calls made while one update runs
        share the next: a burst of N new pods (each updates before its sandbox) writes the
        levels a few times, not N times one after the other."""
        self._asked += 1
        mine = self._asked
        async with self._lock:
            if self._covered >= mine and not rewrite:
                return
            covers = self._asked
            await self._write(rewrite=rewrite)
            self._covered = covers

    async def _write(self, *, rewrite: bool) -> None:
        wanted = qoscgroups.qos_limits(list(self._active()), self._root)
        for cgroup, limits in wanted.items():
            if not rewrite and self._written.get(cgroup) == limits:
                continue
            self._written.pop(cgroup, None)
            try:
                await asyncio.to_thread(cgroups.apply, cgroup, limits, self._mount)
            except OSError as exc:
                log.warning("QoS cgroup %s not updated: %s", cgroup, exc)
                continue
            self._written[cgroup] = limits

    async def _run(self) -> None:
        while True:
            woken = await tasks.wait_event(self._wake, self._period)
            self._wake.clear()
            # The periodic update writes every level, repairing what was changed from outside.
            await self.update(rewrite=not woken)
