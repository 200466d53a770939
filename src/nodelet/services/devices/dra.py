"""Dynamic resource allocation on the node: the DRA drivers registered here and the claims
they prepared (the kubelet's pkg/kubelet/cm/dra manager and its plugin manager).

- **Drivers** register through the plugin registry (type `DRAPlugin`, `services.plugins`):
  one that offers neither the `v1.DRAPlugin` nor the `v1beta1.DRAPlugin` service is refused
  with the kubelet's words.
  A driver may register at several endpoints; each one's connection is watched. The node's
  ResourceSlices are deleted at start (until its driver is back, a device cannot be used
  here), and a driver's 30 s after none of its endpoints is connected any more (it went, or
  its service socket did), unless one is connected again by then.
- **prepare(pod)**, before the pod's sandbox is made: each of its claims is read from the
  API and checked (`model.core.resourceclaims.checked_claim`), every driver it needs must be
  registered, and only then is anything recorded: the pod is added to each claim's pods (the
  checkpoint written), and the claims not prepared yet are prepared, one call per driver.
  A failure raises `PrepareError` in the kubelet's words; the sync records it as
  FailedPrepareDynamicResources and makes no sandbox.
- **cdi_devices(pod, container)**: the CDI devices of the claims the container names.
- **unprepare(pod)**, once its containers have stopped: the pod leaves each claim; a claim no
  other pod uses is unprepared by its drivers and forgotten. A pod not known to the cache (a
  restart whose checkpoint was lost) is looked up by its spec.
- **reconcile()**, every `reconcile_period` seconds once the pod sources are synced: the
  claims of pods no longer active are unprepared (a pod deleted while nodelet was down).
- **Device health** (ResourceHealthStatus): a driver that names a DRAResourceHealth service
  among its supported ones (v1, else v1alpha1) is watched on the same connection; each report
  updates `model.core.drahealth.HealthCache`, and the pods holding a device whose health
  changed are told (`HealthOptions.on_change`), so that their status shows it at once. A
  stream that ends is opened again 5 s later, and meanwhile the driver's devices read
  `Unknown` (their pods told too); a driver that answers Unimplemented is not asked again
  until it registers again.
  `resource_statuses(pod)` gives each container's allocatedResourcesStatus of its claims.

The claims known to the node are kept in `<data dir>/dra_manager_state`, so that a restart
still unprepares what was prepared; the devices' health in `<data dir>/dra_health_state`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nodelet.adapters.dra import client as dra
from nodelet.helpers import errors
from nodelet.model.core import drahealth, pods, status
from nodelet.model.core import resourceclaims as rc

log = logging.getLogger(__name__)

DRA_PLUGIN = "DRAPlugin"
# The DRAPlugin services the kubelet speaks, newest first.
SUPPORTED_SERVICES = dra.SERVICES


class PrepareError(errors.MessageError):
    """A pod's claims cannot be prepared (yet), or unprepared."""


class ClaimReader(Protocol):
    async def resource_claim(self, namespace: str, name: str) -> Any:
        """The ResourceClaim as v1 JSON; raises errors.MessageError with the API's words."""

    async def delete_resource_slices(self, driver: str = "") -> None:
        """Delete the node's ResourceSlices (of `driver`; all: ""); errors.MessageError."""


class DraManager:
    """The DRAPlugin handler of the plugin watcher, and the claims prepared on the node."""

    def __init__(self, *, state_dir: Path, claims: ClaimReader,
                 active: Callable[[], set[str]], ready: Callable[[], bool],
                 call_timeout: float = 45.0, reconcile_period: float = 60.0,
                 wiping_delay: float = 30.0, health: HealthOptions | None = None) -> None:
        """`health`: how the drivers' device health is watched (None: HealthOptions'
        defaults)."""
        self._file = state_dir / rc.CHECKPOINT_NAME
        self._health_file = state_dir / drahealth.CHECKPOINT_NAME
        self._health_options = health or HealthOptions()
        self._health = drahealth.HealthCache()
        self._health_lock = asyncio.Lock()  # one checkpoint write at a time
        self._closing = False
        self._claims = claims
        self._active = active
        self._ready = ready
        self._timeout = call_timeout
        self._period = reconcile_period
        self._plugins: dict[str, list[_Plugin]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # closing retired clients
        self._infos: dict[tuple[str, str], rc.ClaimInfo] = {}
        # One sync at a time per claim (`_holding`): its lock and how many hold or wait for it.
        self._claim_locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
        self._save_lock = asyncio.Lock()  # one checkpoint write at a time, the newest last
        self._wiping_delay = wiping_delay
        self._wipes: dict[str, asyncio.Task[None]] = {}

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Read the checkpoints (the claims prepared before a restart, the devices' health)."""
        await self._load_health()
        try:
            blob = await asyncio.to_thread(self._file.read_bytes)
        except FileNotFoundError:
            return
        try:
            infos = rc.decode_checkpoint(blob)
        except rc.CheckpointError as exc:
            aside = self._file.with_name(f"{self._file.name}.corrupt-{int(time.time())}")
            await asyncio.to_thread(os.replace, self._file, aside)
            log.error("%s; moved to %s: the claims prepared before nodelet started will not "
                      "be unprepared by it (drain the node to be sure)", exc.message, aside)
            return
        self._infos = {(i.ref.namespace, i.ref.name): i for i in infos}
        log.info("DRA checkpoint: %d claims", len(infos))

    async def run(self) -> None:
        """Delete the node's ResourceSlices (no driver has registered yet: pods must not be
        placed here for devices no driver may come back for), then unprepare the claims of
        inactive pods every `reconcile_period` seconds."""
        self._wipes[""] = self._background("wipe", self._wipe(""), keep=False)
        while True:
            await asyncio.sleep(self._period)
            if self._ready():
                await self.reconcile()

    async def close(self) -> None:
        # The health checkpoint stays as it is: a restart keeps what the drivers said until
        # their reports time out.
        self._closing = True
        for wipe in self._wipes.values():
            wipe.cancel()
        for plugins in self._plugins.values():
            for plugin in plugins:
                plugin.cancel()
                await plugin.client.close()
        self._plugins.clear()
        for task in list(self._tasks):
            task.cancel()

    # -- registration --------------------------------------------------------------------

    async def register(self, name: str, endpoint: str, versions: tuple[str, ...]) -> None:
        """ValidatePlugin and RegisterPlugin: a driver that offers `v1.DRAPlugin` or
        `v1beta1.DRAPlugin` (the first of its list the node speaks is used, as the kubelet
        picks it). A driver may register at several endpoints (a new instance before the old
        one went): calls go to the newest that is connected."""
        if not name:
            raise PrepareError("DRA driver name is empty")
        chosen = next((v for v in versions if v in SUPPORTED_SERVICES), "")
        if not versions:
            problem = "empty list of supported gRPC services (aka supported versions)"
        elif not chosen:
            problem = (f"none of services supported by the plugin ({_quoted(versions)}) are "
                       f"supported by the kubelet ({_quoted(SUPPORTED_SERVICES)})")
        else:
            problem = ""
        if problem:
            raise PrepareError(f"invalid supported gRPC versions of DRA driver plugin {name} "
                               f"at endpoint {endpoint}: {problem}")
        if any(p.endpoint == endpoint for p in self._plugins.get(name, ())):
            # One registration cannot take another's endpoint (a socket made again is
            # deregistered by the watcher first).
            raise PrepareError(f"endpoint {endpoint} already registered for DRA driver "
                               f"plugin {name}")
        plugin = _Plugin(endpoint, dra.DriverClient(endpoint, timeout=self._timeout,
                                                    service=chosen))
        plugin.monitor = self._background(f"watch {endpoint}", plugin.client.watch(
            lambda connected: self._connected(name, plugin, connected)), keep=False)
        service = next((s for s in dra.HEALTH_SERVICES if s in versions), "")
        if service and self._health_options.enabled:
            plugin.health = self._background(f"health {endpoint}", self._watch_health(
                name, plugin, service), keep=False)
        self._plugins.setdefault(name, []).append(plugin)
        log.info("DRA driver %s registered (%s, %s%s)", name, endpoint, chosen,
                 f", device health by {service}" if plugin.health is not None else "")

    async def deregister(self, name: str, endpoint: str) -> None:
        self._remove(name, endpoint)
        log.info("DRA driver %s at %s deregistered", name, endpoint)
        self._sync(name)

    def _remove(self, name: str, endpoint: str) -> None:
        plugins = self._plugins.get(name, [])
        for plugin in [p for p in plugins if p.endpoint == endpoint]:
            plugins.remove(plugin)
            plugin.cancel()
            # Closed once the calls in flight had their deadline to finish.
            self._background(f"close {plugin.endpoint}", plugin.client.close(self._timeout))
        if not plugins:
            self._plugins.pop(name, None)

    def _connected(self, name: str, plugin: _Plugin, connected: bool) -> None:
        if plugin.connected != connected:
            plugin.connected = connected
            log.info("DRA driver %s at %s %s", name, plugin.endpoint,
                     "connected" if connected else "not connected")
        self._sync(name)

    def _sync(self, name: str) -> None:
        """A driver with a connected endpoint keeps its ResourceSlices; one without has them
        deleted after the wiping delay, unless it is connected again by then (the kubelet's
        DRAPluginManager.sync)."""
        if any(p.connected for p in self._plugins.get(name, ())):
            pending = self._wipes.pop(name, None)
            if pending is not None:
                pending.cancel()
        elif name not in self._wipes:
            log.info("DRA driver %s is not usable; its ResourceSlices go in %gs unless it "
                     "comes back", name, self._wiping_delay)
            self._wipes[name] = self._background(
                f"wipe {name}", self._wipe(name, self._wiping_delay), keep=False)

    def _background(self, what: str, work: Coroutine[Any, Any, None], *,
                    keep: bool = True) -> asyncio.Task[None]:
        """`work` as a task of its own whose failure is logged (and, with `keep`, held until
        it ends: a task nothing refers to may be collected)."""
        task = asyncio.create_task(work, name=f"dra: {what}")

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                log.error("DRA manager: %s failed", what, exc_info=finished.exception())
                for driver, wipe in list(self._wipes.items()):
                    if wipe is finished:  # scheduled again at the next change
                        del self._wipes[driver]
        if keep:
            self._tasks.add(task)
        task.add_done_callback(done)
        return task

    async def _wipe(self, driver: str, delay: float = 0.0) -> None:
        """Delete the node's ResourceSlices of `driver` (all: "") after `delay` seconds,
        retried with a back-off (1 s doubling to 5 min) until the API takes it."""
        await asyncio.sleep(delay)
        retry = 1.0
        while True:
            try:
                await self._claims.delete_resource_slices(driver)
                break
            except errors.MessageError as exc:
                log.debug("deleting the ResourceSlices of %s failed, will retry: %s",
                          driver or "every driver", exc.message)
            await asyncio.sleep(retry)
            retry = min(retry * 2, 300.0)
        log.info("deleted the node's ResourceSlices of %s", driver or "every driver")
        if self._wipes.get(driver) is asyncio.current_task():
            del self._wipes[driver]

    def drivers(self) -> list[str]:
        return sorted(self._plugins)

    def _driver(self, name: str) -> dra.DriverClient:
        plugins = self._plugins.get(name)
        if not plugins:
            raise PrepareError(f"DRA driver {name} is not registered")
        connected = [p for p in plugins if p.connected]
        return (connected or plugins)[-1].client

    # -- prepare ---------------------------------------------------------------------------

    async def prepare(self, pod: pods.Pod) -> None:
        """Prepare the pod's claims (see the module); PrepareError when they cannot be."""
        if not pod.spec.resource_claims:
            return
        try:
            checked = await self._checked(pod)  # the API read outside the locks
            async with self._holding((f.ref.namespace, f.ref.name) for f in checked):
                await self._prepare(pod, checked)
        except (errors.MessageError, dra.DriverError) as exc:
            raise PrepareError(f"prepare dynamic resources: {exc.message}") from exc

    async def _checked(self, pod: pods.Pod) -> list[rc.CheckedClaim]:
        """Every claim of the pod read and checked, changing nothing: a pod that cannot start
        can be deleted without a driver being asked to unprepare what it never prepared."""
        checked: list[rc.CheckedClaim] = []
        for claim in pod.spec.resource_claims:
            made = rc.claim_name(pod, claim)
            if made is None:
                continue  # none was made on purpose: nothing to prepare
            name, must_check_owner = made
            try:
                obj = await self._claims.resource_claim(pod.namespace, name)
            except errors.MessageError as exc:
                raise PrepareError(f"fetch ResourceClaim {name}: {exc.message}") from exc
            found = rc.checked_claim(pod, name, must_check_owner, obj)
            for driver in found.prepare_drivers:
                self._driver(driver)
            checked.append(found)
        return checked

    async def _prepare(self, pod: pods.Pod, checked: list[rc.CheckedClaim]) -> None:
        """Record the pod on its checked claims, then have the drivers prepare those not
        prepared yet (under the claims' locks: a driver slow for one claim holds up only the
        pods of that claim)."""
        batches: dict[str, list[rc.ClaimRef]] = {}
        for found in checked:
            key = (found.ref.namespace, found.ref.name)
            info = self._infos.get(key)
            if info is None:
                info = rc.ClaimInfo(found.ref, found.prepare_drivers, found.unprepare_drivers)
                self._infos[key] = info
            elif info.ref.uid != found.ref.uid:
                raise PrepareError(f"old ResourceClaim with same name {found.ref.name} and "
                                   f"different UID {info.ref.uid} still exists (previous pod "
                                   "force-deleted?!)")
            info.pod_uids.add(pod.uid)
            if not info.prepared:
                for driver in info.prepare_drivers:
                    batches.setdefault(driver, []).append(info.ref)
        await self._save()
        for driver, refs in sorted(batches.items()):
            try:
                answers = await self._driver(driver).prepare(refs)
            except dra.DriverError as exc:
                raise PrepareError(f"NodePrepareResources: {exc.message}") from exc
            by_uid = {ref.uid: ref for ref in refs}
            for uid, answer in answers.items():
                ref = by_uid.get(uid)
                if ref is None:
                    raise PrepareError(f"NodePrepareResources returned result for unknown "
                                       f"claim UID {uid}")
                if answer.error:
                    raise PrepareError(f"NodePrepareResources failed for ResourceClaim "
                                       f"{ref.name}: {answer.error}")
                self._infos[(ref.namespace, ref.name)].devices[driver] = answer.devices
            if len(answers) != len(refs):
                raise PrepareError(f"NodePrepareResources skipped "
                                   f"{len(refs) - len(answers)} ResourceClaims")
        for found in checked:
            self._infos[(found.ref.namespace, found.ref.name)].prepared = True
        await self._save()
        log.info("prepared the ResourceClaims of pod %s: %s", pod.full_name,
                 ", ".join(f.ref.name for f in checked))

    def cdi_devices(self, pod: pods.Pod, container: pods.Container) -> tuple[str, ...]:
        """The CDI devices `container` gets of its pod's prepared claims."""
        if not container.resources.claims:
            return ()
        return rc.cdi_devices(pod, container, self._pods_claims(pod))

    def _pods_claims(self, pod: pods.Pod) -> dict[str, rc.ClaimInfo]:
        """The claims known to the node that `pod` uses, by ResourceClaim name."""
        return {name: info for (namespace, name), info in self._infos.items()
                if namespace == pod.namespace and pod.uid in info.pod_uids}

    # -- unprepare -------------------------------------------------------------------------

    async def unprepare(self, pod: pods.Pod) -> None:
        """The pod leaves its claims; those no pod uses any more are unprepared."""
        keys = self._claims_of(pod.uid) or [(pod.namespace, n) for n in rc.claim_names(pod)]
        if not keys:
            return
        try:
            async with self._holding(keys):
                await self._unprepare(pod.uid, keys)
        except (errors.MessageError, dra.DriverError) as exc:
            raise PrepareError(f"unprepare dynamic resources: {exc.message}") from exc

    @contextlib.asynccontextmanager
    async def _holding(self, keys: Iterable[tuple[str, str]]) -> AsyncIterator[None]:
        """The locks of these claims (namespace, name), taken in order: one sync at a time
        works on a claim, as the kubelet's claim cache is locked around each claim's
        bookkeeping, while pods of other claims go on."""
        wanted = sorted(set(keys))
        for key in wanted:
            lock, users = self._claim_locks.get(key, (asyncio.Lock(), 0))
            self._claim_locks[key] = (lock, users + 1)
        try:
            async with contextlib.AsyncExitStack() as stack:
                for key in wanted:
                    await stack.enter_async_context(self._claim_locks[key][0])
                yield
        finally:
            for key in wanted:
                lock, users = self._claim_locks[key]
                if users == 1:
                    del self._claim_locks[key]
                else:
                    self._claim_locks[key] = (lock, users - 1)

    def _claims_of(self, uid: str) -> list[tuple[str, str]]:
        return sorted(key for key, info in self._infos.items() if uid in info.pod_uids)

    async def _unprepare(self, uid: str, keys: Iterable[tuple[str, str]]) -> None:
        batches: dict[str, list[rc.ClaimRef]] = {}
        done: list[rc.ClaimInfo] = []
        for key in keys:
            info = self._infos.get(key)
            if info is None or uid not in info.pod_uids:
                continue
            if len(info.pod_uids) > 1:
                info.pod_uids.discard(uid)
                continue
            done.append(info)
            for driver in info.unprepare_drivers:
                batches.setdefault(driver, []).append(info.ref)
        for driver, refs in sorted(batches.items()):
            try:
                answers = await self._driver(driver).unprepare(refs)
            except dra.DriverError as exc:
                raise PrepareError(f"NodeUnprepareResources: {exc.message}") from exc
            by_uid = {ref.uid: ref for ref in refs}
            for claim_uid, error in answers.items():
                ref = by_uid.get(claim_uid)
                if ref is None:
                    raise PrepareError(f"NodeUnprepareResources returned result for unknown "
                                       f"claim UID {claim_uid}")
                if error:
                    raise PrepareError(f"NodeUnprepareResources failed for ResourceClaim "
                                       f"{ref.name}: {error}")
            if len(answers) != len(refs):
                raise PrepareError(f"NodeUnprepareResources skipped "
                                   f"{len(refs) - len(answers)} ResourceClaims")
        for info in done:
            self._infos.pop((info.ref.namespace, info.ref.name), None)
        await self._save()
        if done:
            log.info("unprepared ResourceClaims %s (pod %s)",
                     ", ".join(i.ref.name for i in done), uid)

    async def reconcile(self) -> None:
        """Unprepare the claims of every pod that is no longer active."""
        active = self._active()
        inactive = {uid for info in self._infos.values() for uid in info.pod_uids - active}
        for uid in sorted(inactive):
            try:
                keys = self._claims_of(uid)
                async with self._holding(keys):
                    await self._unprepare(uid, keys)
            except (errors.MessageError, dra.DriverError) as exc:
                log.info("unpreparing the claims of pod %s failed, will retry: %s", uid,
                         exc.message)

    def container_claims(self, pod: pods.Pod, container: pods.Container) -> list[rc.ClaimInfo]:
        """The prepared claims `container` names (for the pod resources API)."""
        found = (self._infos.get((pod.namespace, name))
                 for name in rc.container_claim_names(pod, container))
        return [info for info in found if info is not None and pod.uid in info.pod_uids]

    def metrics_text(self) -> str:
        """`dra_resource_claims_in_use` for /metrics."""
        return rc.metrics_text(self._infos.values())

    def claims(self) -> list[rc.ClaimInfo]:
        """The claims known to the node (for the pod resources API and the tests' eyes)."""
        return [self._infos[key] for key in sorted(self._infos)]

    # -- device health ---------------------------------------------------------------------

    async def _watch_health(self, name: str, plugin: _Plugin, service: str) -> None:
        """Read the driver's health stream, opened again `retry` seconds after it ended or
        failed. Once a stream that gave reports ends, the driver's devices read Unknown (the
        kubelet's HandleWatchResourcesStream, which clears the driver when its stream exits);
        a stream that never opened leaves what is known, the checkpoint's after a restart,
        to time out."""
        while True:
            opened = False  # a report came: what the driver said is its, and goes with it
            try:
                async with contextlib.aclosing(plugin.client.watch_health(service)) as reports:
                    async for report in reports:
                        opened = True
                        await self._health_reported(name, report)
                log.info("DRA driver %s at %s ended its health stream", name, plugin.endpoint)
            except dra.DriverError as exc:
                if exc.code == "UNIMPLEMENTED":
                    log.info("DRA driver %s at %s does not report device health: %s", name,
                             plugin.endpoint, exc.message)
                    return
                log.debug("DRA driver %s at %s: health stream failed, will retry: %s", name,
                          plugin.endpoint, exc.message)
            except Exception:  # whatever it was, the stream is read again
                log.exception("DRA driver %s at %s: reading its health stream failed, will "
                              "retry", name, plugin.endpoint)
            finally:
                if opened:
                    self._health_cleared(name)
            await asyncio.sleep(self._health_options.retry)

    async def _health_reported(self, name: str, report: list[drahealth.DeviceHealth]) -> None:
        changed, dirty = self._health.update(name, report, self._health_options.clock())
        if dirty:
            await self._save_health()
        self._tell(name, changed)

    def _health_cleared(self, name: str) -> None:
        if self._closing:
            return
        gone = self._health.clear(name)
        if gone:
            self._background("save device health", self._save_health())
            self._tell(name, gone)

    def _tell(self, name: str, devices: list[drahealth.DeviceHealth]) -> None:
        for uid in sorted(drahealth.pods_using(self._infos.values(), name, devices)):
            self._health_options.on_change(uid)

    def resource_statuses(self, pod: pods.Pod) -> dict[str, tuple[status.ResourceStatus, ...]]:
        """The allocatedResourcesStatus of the pod's claims, for each container that names
        any, by container name (`drahealth.resource_statuses`)."""
        if not pod.spec.resource_claims:
            return {}
        prepared = self._pods_claims(pod)
        now = self._health_options.clock()

        def health(driver: str, pool: str, device: str) -> drahealth.DeviceHealth:
            return self._health.get(driver, pool, device, now)
        out: dict[str, tuple[status.ResourceStatus, ...]] = {}
        for container in pod.spec.containers:
            if container.resources.claims:
                found = drahealth.resource_statuses(
                    pod, container, prepared, health, messages=self._health_options.messages)
                if found:
                    out[container.name] = found
        return out

    async def _load_health(self) -> None:
        try:
            blob = await asyncio.to_thread(self._health_file.read_bytes)
            self._health = drahealth.HealthCache.decode(blob)
        except FileNotFoundError:
            pass
        except drahealth.CheckpointError as exc:
            log.error("%s; starting without it (the drivers report again)", exc.message)

    async def _save_health(self) -> None:
        async with self._health_lock:
            try:
                await asyncio.to_thread(_write, self._health_file, self._health.encode())
            except OSError as exc:
                log.error("cannot save the DRA device health checkpoint (a restart forgets "
                          "it until the drivers report again): %s", exc)

    # -- checkpoint ------------------------------------------------------------------------

    async def _save(self) -> None:
        async with self._save_lock:  # what is written is read under it: the newest wins
            blob = rc.encode_checkpoint(self._infos.values())
            try:
                await asyncio.to_thread(_write, self._file, blob)
            except OSError as exc:
                raise PrepareError(f"checkpoint ResourceClaim state: {exc}") from exc


@dataclass(frozen=True)
class HealthOptions:
    """Device health: `enabled` (ResourceHealthStatus) watches the drivers' health streams,
    `messages` (ResourceHealthStatusMessage) shows their messages, `on_change(pod UID)` is
    told when a device the pod holds changed health; a stream is opened again `retry` s
    after it ended; `clock()` is the wall clock (Unix seconds)."""

    enabled: bool = True
    messages: bool = True
    on_change: Callable[[str], None] = lambda uid: None
    retry: float = 5.0
    clock: Callable[[], float] = time.time


@dataclass(eq=False)
class _Plugin:
    """One registration of a driver: its endpoint, client, whether it is connected, and the
    tasks that watch its connection and its devices' health."""

    endpoint: str
    client: dra.DriverClient
    connected: bool = False
    monitor: asyncio.Task[None] | None = None
    health: asyncio.Task[None] | None = None

    def cancel(self) -> None:
        for task in (self.monitor, self.health):
            if task is not None:
                task.cancel()


def _write(path: Path, blob: bytes) -> None:
    """`blob` as the whole of `path`, atomically, through a temporary file of its own (a write
    whose caller was cancelled may still be running in its thread)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(blob)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _quoted(values: Iterable[str]) -> str:
    """A Go %q of a string slice: ["a" "b"]."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"
