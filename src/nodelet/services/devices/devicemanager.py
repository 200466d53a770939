"""The device manager (the kubelet's devicemanager.ManagerImpl and its plugin server).

At start the device plugins directory (`DeviceSettings.plugins_dir`, by default
`<data dir>/device-plugins`) is made, the checkpoint read, every other socket in it removed
(the kubelet's CleanupPluginDirectory: plugins watch for `kubelet.sock` to be made again and
register again), and the Registration service served on `kubelet.sock`.

A Register request is checked (version, resource name: the kubelet's words), the plugin's
socket dialled and asked GetDevicePluginOptions before the request is answered, so a plugin
that fails there is refused ("failed to get device plugin options: ..."). Then one task per
plugin reads ListAndWatch: every list replaces the resource's devices. When the stream ends
(the plugin stopped, or its ListAndWatch failed) it is not called again: its devices stay in
capacity, none allocatable, for `stop_grace_period`, after which the resource is reported 0;
a plugin registering again for the resource takes over.

Device health (the ResourceHealthStatus gate): `resource_statuses` is each container's
`allocatedResourcesStatus`, every device it holds with its health in its plugin's last list
(the kubelet's allDevices, kept when the plugin goes away and past the grace period: the
kubelet reports the last health it was told, and `Healthy` for a device not listed since the
agent started). When a list changes a device's health, or names a device the last one did
not, `on_health` is told the UID of each pod holding it, so its status is generated again
at once (the kubelet's device manager update channel, which syncs those pods).

Admission (`admit`): every container's device plugin resources are allocated, init
containers first, as the kubelet's topology manager admits a pod with the `none` policy: free
healthy devices picked (the plugin's GetPreferredAllocation first when it offers it), the
plugin's Allocate called, the answer kept and checkpointed. A failure refuses the pod with
UnexpectedAdmissionError, "Allocate failed due to ..., which is unexpected". Devices of pods
no longer active are freed at the next allocation, once the pod sources were read.
A pod is admitted once in the agent's life; after a restart, a container that holds devices
in the checkpoint keeps them without asking when it is running (an agent restart), and gets
them again only if its resource is registered and they are all still healthy when it is not
(a node reboot: the kubelet's devicesToAllocate). A resource of the checkpoint counts as
registered, with no device until its plugin is back (the kubelet's readCheckpoint).
At container start (`run_options`): PreStartContainer when the plugin asks for it, then the
container's envs, mounts, devices, annotations and CDI devices.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import stat
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from nodelet.adapters.deviceplugin import plugins
from nodelet.helpers import tasks
from nodelet.model.core import admission, devices, pods, preemption, status
from nodelet.settings import DeviceSettings

log = logging.getLogger(__name__)

REGISTRATION_SOCKET = "kubelet.sock"
_Key = tuple[str, str, str]  # pod UID, container name, resource name


@dataclass
class _Endpoint:
    client: plugins.PluginClient
    options: plugins.Options
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class PodView:
    """What the device manager asks of the agent about pods. `active()`: the UIDs of the pods
    that hold their devices (admitted, being terminated, or not synced yet after a restart:
    the kubelet's active pods); `ready()`: whether every pod source was read once (before
    that no device is freed); `running(uid, container)`: whether the runtime has that
    container running."""

    active: Callable[[], Collection[str]]
    ready: Callable[[], bool] = lambda: True
    running: Callable[[str, str], bool] = lambda uid, name: False


class DeviceManager:
    """Device plugins and the devices they give containers, for the pods of `pod_view`.
    `on_change()`: told when capacity or allocatable changed; `on_health(uid)`: a device the
    pod holds changed health."""

    def __init__(self, *, directory: Path, settings: DeviceSettings, group: tasks.TaskGroup,
                 pod_view: PodView, on_change: Callable[[], None] = lambda: None,
                 on_health: Callable[[str], None] = lambda uid: None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self._settings = settings
        self._group = group
        self._active = pod_view.active
        self._ready = pod_view.ready
        self._running = pod_view.running
        self._on_change = on_change
        self._on_health = on_health
        self._monotonic = monotonic
        self._resources: dict[str, devices.Resource] = {}
        # Each resource's devices as its plugin last listed them, kept when the plugin goes
        # away (the kubelet's allDevices): the health reported in pod statuses.
        self._listed: dict[str, dict[str, devices.Device]] = {}
        self._removed: set[str] = set()
        # Each resource's plugins, oldest first: several may serve one resource (a rollout,
        # the new instance registered before the old one went); the newest is asked.
        self._endpoints: dict[str, list[_Endpoint]] = {}
        self._assigned: dict[_Key, devices.Assignment] = {}
        self._lock = asyncio.Lock()  # one allocation at a time, as the kubelet's admission
        # No checkpoint when it started: the node is new here (a fresh data dir), so the
        # extended resources its Node showed before are not this node's (the kubelet's
        # ShouldResetExtendedResourceCapacity).
        self.new_node = False
        self._server = plugins.RegistrationServer(directory / REGISTRATION_SOCKET,
                                                  self._register)

    @property
    def checkpoint_file(self) -> Path:
        return self.directory / devices.CHECKPOINT_NAME

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.directory.mkdir, mode=0o750, parents=True, exist_ok=True)
        await asyncio.to_thread(self._read_checkpoint)
        await asyncio.to_thread(self._remove_sockets)
        await self._server.start()
        log.info("device plugin registration on %s", self._server.socket)

    async def stop(self) -> None:
        await self._server.stop()
        for endpoints in list(self._endpoints.values()):
            for endpoint in list(endpoints):
                await self._drop(endpoint)
        self._endpoints.clear()

    def _read_checkpoint(self) -> None:
        """The assignments, and each registered resource as stopped until its plugin comes
        back (the kubelet's readCheckpoint)."""
        try:
            blob = self.checkpoint_file.read_bytes()
        except FileNotFoundError:
            self.new_node = True
            return
        try:
            assignments, registered = devices.decode_checkpoint(blob)
        except devices.CheckpointError as exc:
            log.error("%s; device assignments may not be up to date", exc.message)
            return
        now = self._monotonic()
        self._assigned = {(a.pod_uid, a.container, a.resource): a for a in assignments}
        for name in registered:
            self._resources[name] = devices.Resource(name, stopped_at=now)
        log.info("device checkpoint: %d assignments, resources %s", len(assignments),
                 sorted(registered) or "none")

    def _remove_sockets(self) -> None:
        for path in self.directory.iterdir():
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(path.lstat().st_mode):
                    path.unlink()

    def _write_checkpoint(self) -> None:
        registered = {name: r.healthy for name, r in self._resources.items()}
        blob = devices.encode_checkpoint(self._assigned.values(), registered)
        temporary = self.checkpoint_file.with_name(devices.CHECKPOINT_NAME + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(blob)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.checkpoint_file)

    async def _save(self) -> None:
        try:
            await asyncio.to_thread(self._write_checkpoint)
        except OSError as exc:
            log.error("cannot write the device checkpoint %s: %s", self.checkpoint_file, exc)

    # -- registration and ListAndWatch ---------------------------------------------------

    async def _register(self, request: plugins.Registration) -> str | None:
        log.info("registration request from device plugin for %s", request.resource_name)
        refusal = devices.validate_registration(request.version, request.resource_name)
        if refusal is not None:
            log.warning("device plugin for %s refused: %s", request.resource_name, refusal)
            return refusal
        # As the kubelet's filepath.Join(socketDir, endpoint): an absolute endpoint is still
        # a name in the directory.
        socket = Path(posixpath.normpath(self.directory / request.endpoint.lstrip("/")))
        if any(e.client.socket == socket for e in self._endpoints.get(request.resource_name, ())):
            return f"device plugin already connected: {socket}"
        client = plugins.PluginClient(socket, timeout=self._settings.call_timeout)
        try:
            await client.connect()
            try:
                options = await client.options()
            except plugins.PluginError as exc:
                raise plugins.PluginError(f"failed to get device plugin options: {exc.message}",
                                          code=exc.code) from exc
        except plugins.PluginError as exc:
            await client.close()
            log.warning("device plugin for %s at %s: %s", request.resource_name, socket,
                        exc.message)
            return exc.message
        endpoint = _Endpoint(client, options)
        self._endpoints.setdefault(request.resource_name, []).append(endpoint)
        known = self._resources.get(request.resource_name)
        self._resources[request.resource_name] = replace(
            known or devices.Resource(request.resource_name), stopped_at=None)
        self._removed.discard(request.resource_name)
        endpoint.task = self._group.spawn(
            f"device-plugin {request.resource_name}", self._watch(request.resource_name,
                                                                  endpoint))
        log.info("registered device plugin for %s at %s (pre-start %s, preferred allocation "
                 "%s)", request.resource_name, socket, options.pre_start_required,
                 options.preferred_allocation)
        self._on_change()
        return None

    async def _watch(self, name: str, endpoint: _Endpoint) -> None:
        """ListAndWatch until the stream ends (never asked again, as the kubelet does: the
        plugin registers again when it can serve). Every plugin of the resource lists its
        devices; when the last one's stream ends, the resource is stopped."""
        try:
            async for listed in endpoint.client.list_and_watch():
                changed = devices.health_changes(self._listed.get(name, {}), listed)
                self._listed[name] = {d.id: d for d in listed}
                self._resources[name] = devices.Resource(
                    name, self._listed[name], stopped_at=None)
                log.info("device plugin for %s lists %d devices, %d healthy", name,
                         len(listed), len(self._resources[name].healthy))
                self._health_changed(name, changed)
                await self._save()
                self._on_change()
        except plugins.PluginError as exc:
            log.warning("ListAndWatch of the device plugin for %s ended: %s", name, exc.message)
        finally:
            left = self._endpoints.get(name, [])
            if endpoint in left:
                left.remove(endpoint)
                if not left:
                    del self._endpoints[name]
                    self._resources[name] = replace(self._resources[name],
                                                    stopped_at=self._monotonic())
                    self._on_change()
                else:
                    log.info("device plugin for %s at %s went; %s serves it", name,
                             endpoint.client.socket, left[-1].client.socket)
            await endpoint.client.close()

    def _health_changed(self, name: str, changed: frozenset[str]) -> None:
        """Tell `on_health` of each pod holding one of the `changed` devices of `name`."""
        holders = sorted({a.pod_uid for k, a in self._assigned.items()
                          if k[2] == name and a.device_ids & changed})
        for uid in holders:
            log.info("devices of pod %s changed health: %s %s", uid, name,
                     ", ".join(sorted(changed & self._held(uid, name))))
            self._on_health(uid)

    def _held(self, pod_uid: str, name: str) -> frozenset[str]:
        return frozenset(d for k, a in self._assigned.items()
                         if k[0] == pod_uid and k[2] == name for d in a.device_ids)

    def _serving(self, name: str) -> _Endpoint | None:
        """The plugin asked for `name`'s allocations: the newest registered."""
        endpoints = self._endpoints.get(name)
        return endpoints[-1] if endpoints else None

    async def _drop(self, endpoint: _Endpoint) -> None:
        task = endpoint.task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await endpoint.client.close()

    # -- what the node reports -----------------------------------------------------------

    def node_resources(self) -> devices.NodeResources:
        """Capacity and allocatable of every device plugin resource; a resource whose plugin
        is gone longer than the grace period is forgotten and reported 0 from then on."""
        found = devices.node_resources(self._resources.values(), self._monotonic(),
                                       self._settings.stop_grace_period)
        for name in found.removed:
            self._resources.pop(name, None)
            self._endpoints.pop(name, None)
            log.info("device plugin resource %s removed: its plugin is gone", name)
        self._removed |= found.removed
        zero = dict.fromkeys(self._removed, 0)
        return devices.NodeResources({**zero, **found.capacity}, {**zero, **found.allocatable},
                                     frozenset(self._removed))

    def admission_allocatable(self, allocatable: dict[str, int]) -> dict[str, int]:
        """The node's allocatable as admission weighs it: the device plugin resources added,
        none below what is assigned (the kubelet's sanitizeNodeAllocatable)."""
        out = dict(allocatable)
        out.update(self.node_resources().allocatable)
        held: dict[str, int] = {}
        for assignment in self._assigned.values():
            held[assignment.resource] = held.get(assignment.resource, 0) + len(
                assignment.device_ids)
        for name, count in held.items():
            out[name] = max(out.get(name, 0), count)
        return out

    def devices_of(self, pod_uid: str, container: str) -> dict[str, frozenset[str]]:
        """The devices a container holds, by resource."""
        return {k[2]: a.device_ids for k, a in self._assigned.items()
                if k[0] == pod_uid and k[1] == container}

    def assigned(self, pod_uid: str) -> dict[str, dict[str, Mapping[int, tuple[str, ...]]]]:
        """What each container of the pod holds: by container, by resource, the device IDs
        by NUMA node (the pod resources API)."""
        held: dict[str, dict[str, Mapping[int, tuple[str, ...]]]] = {}
        for (uid, container, name), assignment in self._assigned.items():
            if uid == pod_uid:
                held.setdefault(container, {})[name] = assignment.devices
        return held

    def resources(self) -> list[devices.Resource]:
        """Every registered resource as its plugin last listed it."""
        return list(self._resources.values())

    def resource_statuses(self, pod_uid: str) -> dict[str, tuple[status.ResourceStatus, ...]]:
        """The allocatedResourcesStatus of each container of the pod that holds devices, by
        container name (`devices.resource_statuses`)."""
        held: dict[str, dict[str, frozenset[str]]] = {}
        for (uid, container, name), assignment in self._assigned.items():
            if uid == pod_uid:
                held.setdefault(container, {})[name] = assignment.device_ids
        return {container: devices.resource_statuses(by_resource, self._listed)
                for container, by_resource in held.items()}

    # -- admission and container start ---------------------------------------------------

    def _requests(self, container: pods.Container) -> dict[str, int]:
        """The container's device plugin resources (registered, or held by a container)."""
        return devices.device_requests(container,
                                       {*self._resources, *(k[2] for k in self._assigned)})

    async def admit(self, pod: pods.Pod) -> admission.Rejection | None:
        """Allocate the devices of every container of `pod` (init containers first); the
        kubelet's refusal when one cannot get them."""
        everything = (*pod.spec.init_containers, *pod.spec.containers)
        if not any(self._requests(c) for c in everything):
            return None
        async with self._lock:
            self._free_inactive(keep=pod.uid)
            try:
                for container in everything:
                    await self._allocate(pod, container)
            except devices.DeviceError as exc:
                return admission.Rejection(
                    preemption.UNEXPECTED_REASON,
                    f"Allocate failed due to {exc.message}, which is unexpected")
            finally:
                await self._save()
        return None

    def _free_inactive(self, *, keep: str) -> None:
        """The kubelet's UpdateAllocatedDevices: the devices of pods no longer active are
        free again (not before every source was read: a pod not re-admitted yet after a
        restart still holds its devices)."""
        if not self._ready():
            return
        active = {*self._active(), keep}
        for key in [k for k in self._assigned if k[0] not in active]:
            log.info("device %s of pod %s container %s freed", key[2], key[0], key[1])
            del self._assigned[key]

    def _in_use(self, resource: str, pod: pods.Pod, container: str) -> frozenset[str]:
        """The devices of `resource` held by containers, less those `container` may take
        from the pod's containers before it (`_reusable`)."""
        reusable = self._reusable(resource, pod, container)
        return frozenset(d for k, a in self._assigned.items() if k[2] == resource
                         for d in a.device_ids) - reusable

    def _reusable(self, resource: str, pod: pods.Pod, container: str) -> frozenset[str]:
        """The kubelet's devicesToReuse for `container` (`devices.reusable`)."""
        def held(name: str) -> frozenset[str]:
            found = self._assigned.get((pod.uid, name, resource))
            return found.device_ids if found is not None else frozenset()
        return devices.reusable(pod, container, held)

    async def _allocate(self, pod: pods.Pod, container: pods.Container) -> None:
        for name, needed in sorted(self._requests(container).items()):
            key = (pod.uid, container.name, name)
            held = self._assigned.get(key)
            if held is not None and len(held.device_ids) != needed:
                raise devices.DeviceError(
                    f'pod "{pod.uid}" container "{container.name}" changed request for '
                    f'resource "{name}" from {len(held.device_ids)} to {needed}')
            if held is not None and self._running(pod.uid, container.name):
                continue  # an agent restart: the running container has its devices
            resource = self._resources.get(name)
            if resource is None:
                raise devices.DeviceError(f"cannot allocate unregistered device {name}")
            if held is not None:  # a node reboot: its devices again, if still healthy
                devices.check_held(resource, held.device_ids)
                continue
            in_use = self._in_use(name, pod, container.name)
            devices.pick(resource, needed, in_use=in_use)  # its refusal first, in its words
            endpoint = self._serving(name)
            if endpoint is None or resource.stopped_at is not None:
                raise devices.DeviceError(f"endpoint {name} has been stopped")
            reusable = self._reusable(name, pod, container.name)
            chosen = devices.pick(resource, needed, in_use=in_use, reusable=reusable,
                                  preferred=() if len(reusable) >= needed else
                                  await self._preferred(endpoint, resource, in_use, needed))
            self._assigned[key] = devices.Assignment(
                pod.uid, container.name, name, devices.by_numa(resource, chosen),
                await self._plugin_allocate(endpoint, chosen))
            log.info("pod %s container %s got %s devices %s", pod.full_name, container.name,
                     name, ", ".join(chosen))

    async def _preferred(self, endpoint: _Endpoint, resource: devices.Resource,
                         in_use: frozenset[str], needed: int) -> tuple[str, ...]:
        available = resource.healthy - in_use
        if not endpoint.options.preferred_allocation or needed >= len(available):
            return ()
        try:
            return await endpoint.client.preferred(sorted(available), (), needed)
        except plugins.PluginError as exc:
            raise devices.DeviceError(
                f"device plugin GetPreferredAllocation rpc failed with err: {exc.message}"
            ) from exc

    async def _plugin_allocate(self, endpoint: _Endpoint,
                               chosen: Iterable[str]) -> devices.Allocation:
        try:
            answer = await endpoint.client.allocate(list(chosen))
        except plugins.PluginError as exc:
            raise devices.DeviceError(exc.message) from exc
        if answer is None:
            raise devices.DeviceError("no containers return in allocation response")
        return answer

    async def run_options(self, pod: pods.Pod,
                          container: pods.Container) -> devices.RunOptions | None:
        """What the container gets of its devices, PreStartContainer called first where the
        plugin asks for it; None when it has none. Raises DeviceError (the kubelet's words),
        which fails the container's creation."""
        wanted = self._requests(container)
        if not wanted:
            return None
        async with self._lock:
            for name in sorted(wanted):
                await self._pre_start(pod, container, name)
            if any((pod.uid, container.name, n) not in self._assigned for n in wanted):
                await self._allocate(pod, container)  # held nothing yet (the kubelet too)
                await self._save()
            held = [self._assigned[(pod.uid, container.name, n)] for n in sorted(wanted)]
        return devices.run_options(a.allocation for a in held)

    async def _pre_start(self, pod: pods.Pod, container: pods.Container, name: str) -> None:
        if name not in self._resources:
            raise devices.DeviceError(
                f"endpoint not found in cache for a registered resource: {name}")
        endpoint = self._serving(name)
        if endpoint is None or not endpoint.options.pre_start_required:
            return
        held = self._assigned.get((pod.uid, container.name, name))
        if held is None:
            raise devices.DeviceError(
                f"no devices found allocated in local cache for pod {pod.uid}, container "
                f"{container.name}, resource {name}")
        try:
            if self._resources[name].stopped_at is not None:
                raise plugins.PluginError(f"endpoint {name} has been stopped")
            await endpoint.client.pre_start(sorted(held.device_ids),
                                            limit=self._settings.pre_start_timeout)
        except plugins.PluginError as exc:
            raise devices.DeviceError(
                f"device plugin PreStartContainer rpc failed with err: {exc.message}") from exc
