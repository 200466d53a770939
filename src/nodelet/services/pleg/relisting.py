"""The relist (the kubelet's PLEG): what the runtime holds, per pod, and who must be woken.

Every relist period the relister lists all sandboxes and containers, groups them by the
`io.kubernetes.pod.uid` label, and wakes the pod worker of every pod whose runtime state
changed (a sandbox went NOTREADY, a container exited...). Pod workers do not trust this cache
for decisions: they call `refresh_pod`, which asks the runtime for that pod's state right then,
so a decision is never taken on a list that predates the worker's own last action.

With containerd's event stream (`services.pleg.runtimeevents`) the period is long and the relist is
a safety net: an event refreshes its pod with `refresh_pod` and wakes its worker; `kick` starts a
relist at once (after every new subscription, and when the subscription is lost, so the
period switches to polling without waiting out the long one).

Immutable details (a sandbox's IP and namespace mode, a container's exit code once exited) come
from the per-object status calls and are cached by ID, so a steady relist costs two list calls.

Reads overlap (an event's refresh, the worker's own, the relist), and one that began earlier
can end later: every read is numbered when it begins, and the cache keeps a pod's state from
the latest-begun read that finished, never an older one that finished last. Otherwise a
refresh that listed the pod before its worker created a sandbox could, ending after the
worker's own refresh, hide that sandbox from the worker's next sync.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping

from nodelet.adapters.cri import client as cri
from nodelet.helpers import tasks
from nodelet.model.core import pods, runtime

log = logging.getLogger(__name__)


def _fingerprint(state: runtime.PodRuntime) -> tuple[object, ...]:
    """What counts as a change worth waking a worker for."""
    return (
        tuple((s.id, s.state) for s in state.sandboxes),
        tuple((c.id, c.state) for c in state.containers),
    )


class Relister:
    def __init__(
        self,
        *,
        client: cri.RuntimeClient,
        on_change: Callable[[pods.PodUID], None],
    ) -> None:
        self._client = client
        self._on_change = on_change
        self._pods: dict[pods.PodUID, runtime.PodRuntime] = {}
        self._sandbox_details: dict[runtime.SandboxID, runtime.SandboxInfo] = {}
        self._container_details: dict[runtime.ContainerID, runtime.ContainerInfo] = {}
        # Reads are numbered as they begin; a pod's cached state is from read `_read_of[uid]`.
        # A pod without an entry was last seen by the relist numbered `_relisted`.
        self._reads = itertools.count(1)
        self._read_of: dict[pods.PodUID, int] = {}
        self._relisted = 0
        self.last_success: float | None = None  # monotonic time of the last good relist
        self.last_error: str = ""
        # The runtime's NetworkReady condition, read with every relist ("" when ready).
        self.network_problem: str = ""
        self._kicked = asyncio.Event()

    def pod(self, uid: pods.PodUID) -> runtime.PodRuntime:
        return self._pods.get(uid, runtime.PodRuntime(uid))

    def uids(self) -> set[pods.PodUID]:
        return set(self._pods)

    def owner(self, object_id: str) -> pods.PodUID | None:
        """The pod a sandbox or container ID belongs to, as far as the cache knows."""
        for uid, state in self._pods.items():
            if any(s.id == object_id for s in state.sandboxes) or any(
                    c.id == object_id for c in state.containers):
                return uid
        return None

    def kick(self) -> None:
        """Relist now instead of at the end of the current period."""
        self._kicked.set()

    async def run(self, period: Callable[[], float]) -> None:
        """Relist forever, every `period()` seconds (read anew for every wait) or when kicked;
        failures are logged and retried on the next tick."""
        while True:
            self._kicked.clear()
            try:
                await self.relist()
            except cri.CriError as exc:
                self.last_error = str(exc)
                log.warning("relist failed: %s", exc)
            except Exception as exc:  # a bug must not end the relist for every pod
                self.last_error = f"relist crashed: {exc!r}"
                log.exception("relist crashed")
            await tasks.wait_event(self._kicked, period())

    async def relist(self) -> None:
        read = next(self._reads)
        sandboxes = await self._client.list_pod_sandboxes()
        containers = await self._client.list_containers()
        grouped = await self._assemble(sandboxes, containers)
        for uid in set(self._pods) | set(grouped):
            self._store(uid, grouped.get(uid, runtime.PodRuntime(uid)), read=read)
        self._forget_reads(read)
        self._forget_details(sandboxes, containers)
        self.network_problem = _network_problem(await self._client.status())
        self.last_success = time.monotonic()
        self.last_error = ""

    async def refresh_pod(self, uid: pods.PodUID) -> runtime.PodRuntime:
        """The pod's state straight from the runtime (for decisions), also updating the cache
        unless a read begun after this one was stored first."""
        read = next(self._reads)
        labels = {runtime.LABEL_POD_UID: uid}
        sandboxes = await self._client.list_pod_sandboxes(labels=labels)
        containers = await self._client.list_containers(labels=labels)
        state = (await self._assemble(sandboxes, containers)).get(uid, runtime.PodRuntime(uid))
        self._store(uid, state, read=read, wake=False)
        return state

    def note_sandbox(self, uid: pods.PodUID, info: runtime.SandboxInfo) -> runtime.PodRuntime:
        """The pod's state with a sandbox the caller just created and read the status of.

        Only for a pod that had no sandbox and no container: then the state is exactly this
        sandbox, and no list call is needed to know it (it saves three runtime round trips
        between RunPodSandbox returning and the condition turning True).
        """
        self._sandbox_details[info.id] = info
        state = runtime.PodRuntime(uid, sandboxes=(info,))
        self._store(uid, state, read=next(self._reads), wake=False)
        return state

    def _store(self, uid: pods.PodUID, state: runtime.PodRuntime, *, read: int,
               wake: bool = True) -> None:
        """Cache what read number `read` saw of the pod, unless a later-begun read is cached."""
        if read < self._read_of.get(uid, self._relisted):
            return  # this read began before the cached one: it may predate what that one saw
        self._read_of[uid] = read
        old = self._pods.get(uid, runtime.PodRuntime(uid))
        if state.sandboxes or state.containers:
            self._pods[uid] = state
        else:
            self._pods.pop(uid, None)
        if wake and _fingerprint(old) != _fingerprint(state):
            self._on_change(uid)

    def _forget_reads(self, relist: int) -> None:
        """After relist number `relist`: pods with nothing in the runtime need no read number
        of their own, the relist's stands for them (so the map does not grow with every pod
        ever seen)."""
        for uid in [u for u, n in self._read_of.items() if n <= relist and u not in self._pods]:
            del self._read_of[uid]
        self._relisted = relist

    async def _assemble(
        self,
        sandboxes: Iterable[runtime.SandboxInfo],
        containers: Iterable[runtime.ContainerInfo],
    ) -> dict[pods.PodUID, runtime.PodRuntime]:
        detailed_sandboxes = [await self._sandbox_detail(s) for s in sandboxes]
        detailed_containers = [await self._container_detail(c) for c in containers]
        return _group(detailed_sandboxes, detailed_containers)

    async def _sandbox_detail(self, listed: runtime.SandboxInfo) -> runtime.SandboxInfo:
        cached = self._sandbox_details.get(listed.id)
        if cached is None:
            try:
                cached = await self._client.pod_sandbox_status(listed.id)
            except cri.CriError as exc:  # one bad sandbox must not fail the whole relist
                if not isinstance(exc, cri.NotFound):
                    log.warning("status of sandbox %s: %s", listed.id, exc)
                return listed
            self._sandbox_details[listed.id] = cached
        # IP and namespace mode never change; the state does.
        return dataclasses.replace(cached, state=listed.state)

    async def _container_detail(self, listed: runtime.ContainerInfo) -> runtime.ContainerInfo:
        cached = self._container_details.get(listed.id)
        if cached is None or cached.state != listed.state:
            try:
                cached = await self._client.container_status(listed.id,
                                                             sandbox_id=listed.sandbox_id)
            except cri.CriError as exc:
                if not isinstance(exc, cri.NotFound):
                    log.warning("status of container %s: %s", listed.id, exc)
                return listed
            self._container_details[listed.id] = cached
        return cached

    def _forget_details(
        self,
        sandboxes: Iterable[runtime.SandboxInfo],
        containers: Iterable[runtime.ContainerInfo],
    ) -> None:
        live_sandboxes = {s.id for s in sandboxes}
        live_containers = {c.id for c in containers}
        for sid in set(self._sandbox_details) - live_sandboxes:
            del self._sandbox_details[sid]
        for cid in set(self._container_details) - live_containers:
            del self._container_details[cid]


def _group(
    sandboxes: Iterable[runtime.SandboxInfo], containers: Iterable[runtime.ContainerInfo]
) -> dict[pods.PodUID, runtime.PodRuntime]:
    by_uid_sandboxes: dict[pods.PodUID, list[runtime.SandboxInfo]] = {}
    by_uid_containers: dict[pods.PodUID, list[runtime.ContainerInfo]] = {}
    for sandbox in sandboxes:
        uid = _uid(sandbox.labels)
        if uid:
            by_uid_sandboxes.setdefault(uid, []).append(sandbox)
    for container in containers:
        uid = _uid(container.labels)
        if uid:
            by_uid_containers.setdefault(uid, []).append(container)
    return {
        uid: runtime.PodRuntime(
            uid=uid,
            sandboxes=tuple(
                sorted(by_uid_sandboxes.get(uid, []), key=lambda s: s.created_at, reverse=True)
            ),
            containers=tuple(
                sorted(by_uid_containers.get(uid, []), key=lambda c: c.created_at, reverse=True)
            ),
        )
        for uid in set(by_uid_sandboxes) | set(by_uid_containers)
    }


def _network_problem(status: runtime.RuntimeStatus) -> str:
    if status.network_ready:
        return ""
    cond = status.condition("NetworkReady")
    detail = f"{cond.reason}: {cond.message}" if cond is not None else "no NetworkReady condition"
    return f"network is not ready: {detail}"


def _uid(labels: Mapping[str, str]) -> pods.PodUID | None:
    value = labels.get(runtime.LABEL_POD_UID)
    return pods.PodUID(value) if value else None
