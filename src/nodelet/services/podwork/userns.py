"""The user namespaces of pods with `hostUsers: false`: one ID range each, kept on disk.

`UserNamespaces.of(pod)` gives the pod's range (`model.core.userns`): the one kept in
`<pods_root>/<uid>/userns` (an agent restart keeps it, and a running pod's containers need the
same one), else the lowest free range, written there before the sandbox is created. The ranges
in use are read from the pods' directories once, at the first call; `release(uid)` frees one
when the pod's directory is removed. Errors: `UserNamespaceError` (no range free, a file that
is not ours), `OSError` from the pod directory.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from nodelet.adapters import hostdirs
from nodelet.helpers import privatefiles
from nodelet.model.core import pods, runtime
from nodelet.model.core import userns as userns_model
from nodelet.model.core.userns import UserNamespaceError

log = logging.getLogger(__name__)

__all__ = ["UserNamespaceError", "UserNamespaces"]


class UserNamespaces:
    def __init__(self, pods_root: Path) -> None:
        self._root = pods_root
        self._lock = threading.Lock()  # allocations run in worker threads
        self._ranges: dict[str, runtime.UserNamespace] | None = None

    async def of(self, pod: pods.Pod) -> runtime.UserNamespace | None:
        """The pod's user namespace (None: it uses the node's)."""
        if pod.spec.host_users is not False:
            return None
        return await asyncio.to_thread(self._of, pod.uid)

    def release(self, uid: pods.PodUID) -> None:
        with self._lock:
            if self._ranges is not None:
                self._ranges.pop(uid, None)

    def _of(self, uid: str) -> runtime.UserNamespace:
        with self._lock:
            ranges = self._load()
            found = ranges.get(uid)
            if found is None:
                found = userns_model.allocate({r.host_id for r in ranges.values()})
                path = hostdirs.pod_dir(self._root, uid) / userns_model.FILE
                privatefiles.write(path, userns_model.to_json(found))
                ranges[uid] = found
                log.info("pod %s: user namespace of host IDs %d-%d", uid, found.host_id,
                         found.host_id + found.length - 1)
            return found

    def _load(self) -> dict[str, runtime.UserNamespace]:
        if self._ranges is None:
            self._ranges = {}
            for path in self._root.glob(f"*/{userns_model.FILE}"):
                try:
                    self._ranges[path.parent.name] = userns_model.from_json(path.read_bytes())
                except (OSError, UserNamespaceError) as exc:
                    log.warning("ignoring %s: %s", path, exc)
        return self._ranges
