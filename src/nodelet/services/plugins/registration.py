"""The plugin watcher and its registration (the kubelet's pluginwatcher and reconciler).

A plugin puts a unix socket in the registry directory (`<data dir>/plugins_registry`, the
kubelet's `/var/lib/kubelet/plugins_registry`) that serves the Registration service. The
watcher sees it appear (inotify, with a rescan every `rescan` seconds as a safety net), asks
`GetInfo`, hands the plugin to the handler of its type (CSIPlugin, DRAPlugin), and tells the
plugin the result (`NotifyRegistrationStatus`, with the handler's error when it refused). A
socket that goes away deregisters its plugin; one made again at the same path (a restarted
plugin) is registered again. A socket that does not answer GetInfo is tried again at the
next change or rescan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nodelet.adapters import dirwatch
from nodelet.adapters.csi import client as csi

log = logging.getLogger(__name__)

CSI_PLUGIN = "CSIPlugin"


class Handler(Protocol):
    """What a plugin type does with registrations (the kubelet's PluginHandler)."""

    async def register(self, name: str, endpoint: str, versions: tuple[str, ...]) -> None:
        """Take the plugin; raise `csi.CsiError` (or any `errors.MessageError`) to refuse."""

    async def deregister(self, name: str, endpoint: str) -> None:
        """The plugin registered as `name` at `endpoint` went away (another registration of
        the same name may remain)."""


@dataclass
class _Plugin:
    name: str
    type: str
    inode: int  # of the socket it registered through
    endpoint: str


class PluginWatcher:
    """Registrations of the plugins in `directory`, handed to `handlers` by plugin type."""

    def __init__(self, *, directory: Path, handlers: dict[str, Handler], rescan: float = 5.0,
                 call_timeout: float = 10.0) -> None:
        self._directory = directory
        self._handlers = handlers
        self._rescan = rescan
        self._timeout = call_timeout
        self._registered: dict[Path, _Plugin] = {}

    async def run(self) -> None:
        """Watch until cancelled; the directory is made (0750) when missing."""
        await asyncio.to_thread(self._directory.mkdir, mode=0o750, parents=True, exist_ok=True)
        watch: dirwatch.InotifyWatch | None = None
        try:
            watch = dirwatch.open_watch(self._directory)
        except dirwatch.WatchError as exc:
            log.warning("plugin registry %s: no inotify (%s), rescanning every %gs",
                        self._directory, exc, self._rescan)
        try:
            while True:
                await self.reconcile()
                await self._next_change(watch)
        finally:
            if watch is not None:
                watch.close()

    async def _next_change(self, watch: dirwatch.InotifyWatch | None) -> None:
        if watch is None:
            await asyncio.sleep(self._rescan)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watch.next(), self._rescan)

    async def reconcile(self) -> None:
        """Register the sockets that appeared, deregister those that went."""
        present = await asyncio.to_thread(_sockets, self._directory)
        for socket, plugin in sorted(self._registered.items()):
            if present.get(socket) != plugin.inode:  # gone, or made again
                await self._deregister(socket)
        for socket in sorted(set(present) - set(self._registered)):
            await self._register(socket, present[socket])

    async def _register(self, socket: Path, inode: int) -> None:
        try:
            info = await csi.plugin_info(str(socket), limit=self._timeout)
        except csi.CsiError as exc:
            log.debug("plugin socket %s does not answer yet: %s", socket, exc.message)
            return
        handler = self._handlers.get(info.type)
        error = "" if handler is not None else (
            f"RegisterPlugin error -- no handler registered for plugin type: {info.type} at "
            f"socket {socket}")
        endpoint = info.endpoint or str(socket)
        if handler is not None:
            try:
                await handler.register(info.name, endpoint, info.versions)
            except Exception as exc:  # the handler's refusal, told to the plugin
                why = getattr(exc, "message", None) or str(exc)
                error = f"RegisterPlugin error -- plugin validation failed with err: {why}"
        try:
            await csi.notify_registration(str(socket), registered=not error, error=error,
                                          limit=self._timeout)
        except csi.CsiError as exc:
            if not error and handler is not None:
                # Not told, not registered: undone, and tried again at the next change or
                # rescan (the kubelet's RegisterPlugin when NotifyRegistrationStatus fails).
                await handler.deregister(info.name, endpoint)
                log.warning("plugin %s (%s) at %s: NotifyRegistrationStatus failed, will "
                            "retry: %s", info.name, info.type, socket, exc.message)
                return
        if error:
            log.warning("plugin %s (%s) at %s refused: %s", info.name, info.type, socket, error)
            return
        self._registered[socket] = _Plugin(info.name, info.type, inode, endpoint)
        log.info("registered %s plugin %s (%s)", info.type, info.name, socket)

    async def _deregister(self, socket: Path) -> None:
        plugin = self._registered.pop(socket)
        handler = self._handlers.get(plugin.type)
        if handler is not None:
            await handler.deregister(plugin.name, plugin.endpoint)
        log.info("deregistered %s plugin %s (%s went away)", plugin.type, plugin.name, socket)


def _sockets(directory: Path) -> dict[Path, int]:
    """The unix sockets in the registry directory and its subdirectories, with their inodes
    (dot names left out, as the kubelet's watcher does)."""
    found = {}
    for path in directory.rglob("*"):
        if any(part.startswith(".") for part in path.relative_to(directory).parts):
            continue
        with contextlib.suppress(OSError):
            info = path.lstat()
            if stat.S_ISSOCK(info.st_mode):
                found[path] = info.st_ino
    return found
