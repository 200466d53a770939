"""Starting and stopping one container, with everything the kubelet does around it.

Start: the image (policy, pull, back-off), the environment (env, envFrom, env files, `$(VAR)`
in command, args and subPathExpr; a missing ConfigMap, Secret or env file is a
CreateContainerConfigError), the
termination-message file mounted at `terminationMessagePath`, CreateContainer + StartContainer
with the kubelet's events, the postStart hook (a failed hook kills the container), and removal
of instances older than the previous one. Stop: the preStop hook within the grace period, then
StopContainer with what is left of it (SIGTERM, then SIGKILL). And the terminated container's
message: the file's contents, or with `FallbackToLogsOnError` the end of its log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Protocol

from nodelet.adapters import hostdirs, loglinks
from nodelet.adapters.cri import client as cri
from nodelet.model.core import (
    crilogs,
    downward,
    envfiles,
    envvars,
    podactions,
    pods,
    runtime,
    sandboxes,
    security,
    specs,
    terminations,
)
from nodelet.model.core import devices as devicerules
from nodelet.model.core import events as ev
from nodelet.model.core import volumes as vol
from nodelet.services.podwork import fileenv, hooks, images, names, volumes
from nodelet.services.status import recording

log = logging.getLogger(__name__)

# The kubelet's limits on termination messages: 4 KiB from the file, 80 lines / 2 KiB of logs.
MAX_MESSAGE_BYTES = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048


class ContainerError(Exception):
    """Creating or starting a container failed; the message is the runtime's words."""


@dataclass(frozen=True)
class ImagePull:
    """How the image of one image volume was made present this sync: its ID, or why not
    (the waiting reason and message a container mounting it shows) and the seconds until
    it is tried again."""

    image_id: str = ""
    reason: str = ""
    message: str = ""
    retry: float = 0.0


ImagePulls = dict[str, ImagePull]


@dataclass(frozen=True)
class NodeContext:
    """What a container start needs to know of the node: where per-pod state lives, the
    security defaults, the node as the downward API shows it, and its memory (bytes; the
    containers' OOM score)."""

    pods_root: Path
    security: security.Options
    downward: downward.Node
    memory_capacity: int = 0
    # Where the link to each started container's log goes (settings.LogSettings.links_dir);
    # None: no links.
    log_links: Path | None = None


class DeviceOptions(Protocol):
    """What a container gets of its device plugin devices (`devices.DeviceManager`)."""

    async def run_options(self, pod: pods.Pod,
                          container: pods.Container) -> devicerules.RunOptions | None:
        """None: it has none; raises devicerules.DeviceError when it cannot get them."""


class ClaimDevices(Protocol):
    """What a container gets of its pod's DRA claims (`dra.DraManager`)."""

    def cdi_devices(self, pod: pods.Pod, container: pods.Container) -> tuple[str, ...]:
        """The CDI devices of the prepared claims `container` names."""


@dataclass(frozen=True)
class DeviceSources:
    """Where a container's devices come from: device plugins and DRA claims (None: none)."""

    plugins: DeviceOptions | None = None
    claims: ClaimDevices | None = None


class ContainerRunner:
    def __init__(
        self,
        *,
        client: cri.RuntimeClient,
        recorder: recording.EventRecorder,
        puller: images.ImagePuller,
        hooks: hooks.HookRunner,
        lookup: vol.Lookup,
        node: NodeContext,
        services: Callable[[], names.ServiceSource | None] = lambda: None,
        devices: DeviceSources = DeviceSources(),
    ) -> None:
        """`services()`: the cluster's Services for service links (None: standalone);
        `devices`: the device plugins' devices and those of DRA claims."""
        self._devices = devices.plugins
        self._claims = devices.claims
        self._memory_capacity = node.memory_capacity
        self._services = services
        self._security = node.security
        # Env vars read ConfigMaps and Secrets through the volume manager's lookup.
        self._lookup = lookup
        self._node = node.downward
        self._client = client
        self._recorder = recorder
        self._puller = puller
        self._hooks = hooks
        self._pods_root = node.pods_root
        self._log_links = node.log_links

    def message_file(self, uid: str, name: str, attempt: int) -> Path:
        return self._pods_root / uid / "containers" / name / str(attempt)

    async def start(
        self,
        pod: pods.Pod,
        sandbox: runtime.SandboxInfo,
        sandbox_config: runtime.SandboxConfig,
        container: pods.Container,
        *,
        attempt: int,
        kind: str,
        mounts: tuple[runtime.Mount, ...],
        waiting: MutableMapping[str, tuple[str, str]],
        pod_ip: str,
        state: runtime.PodRuntime | None = None,
        image_volumes: ImagePulls | None = None,
        volume_groups: tuple[int, ...] = (),
    ) -> float | None:
        """Start one instance; None when started, else seconds until an image retry.
        `state`: the pod's runtime state, where an ephemeral container finds its target;
        `image_volumes`: the pod's image volumes as `pull_image_volumes` made them present;
        `volume_groups`: the groups its PVs ask for (`VolumeManager.extra_groups`)."""
        # The image volumes first, as the kubelet fails a start on them before it looks at
        # the container's own image.
        pulled = self._image_volumes(pod, container, mounts, waiting, image_volumes or {})
        if isinstance(pulled, float):
            return pulled
        mounts = pulled
        image = await self._puller.ensure(pod, container, waiting)
        if isinstance(image, int | float):  # not there yet: seconds until a retry
            return float(image)
        # The security check first: it has no side effects, the subPath bind mounts do.
        context = self._security_context(pod, container, image, waiting,
                                         sandbox_config.security.namespaces.user)
        if volume_groups:  # after the pod's own groups, as the kubelet appends them
            context = dataclasses.replace(context, supplemental_groups=(
                *context.supplemental_groups, *volume_groups))
        if container.target_container_name and state is not None:
            try:
                context = dataclasses.replace(context, namespaces=podactions.target_namespaces(
                    context.namespaces, container, state))
            except LookupError as exc:
                self.config_error(pod, container, str(exc), waiting)
        envs, mounts = await self._environment(pod, sandbox, container, mounts, waiting)
        message_file = self.message_file(pod.uid, container.name, attempt)
        await asyncio.to_thread(_touch, self._pods_root, pod.uid, message_file)
        mounts = (*mounts, runtime.Mount(container.termination_message_path, str(message_file)))
        config = specs.container_config(pod, container, attempt=attempt, kind=kind, mounts=mounts,
                                        security=context, envs=envs,
                                        memory_capacity=self._memory_capacity)
        config = await self._with_devices(pod, container, config, waiting)
        container_id = await self._create_and_start(pod, container, sandbox, sandbox_config,
                                                    config, waiting)
        await self._link_log(pod, sandbox_config, config, container_id)
        failure = await self._hooks.run(container, container_id, "postStart", pod_ip=pod_ip,
                                        budget=float(pod.spec.termination_grace_period_seconds
                                                     or 30))
        if failure is not None:
            # The kubelet's words: the hook's output stays out of the event (it may hold
            # secrets, and events are readable more widely than the pod); it is logged.
            log.warning("postStart hook of %s in %s failed: %s", container.name,
                        pod.full_name, failure)
            self._recorder.record(pod, "Warning", "FailedPostStartHook", "PostStartHook failed",
                                  container=container.name)
            # The kubelet's kill of it says why in its Killing event.
            self._recorder.record(pod, "Normal", ev.KILLING, "FailedPostStartHook",
                                  container=container.name)
            await self._client.stop_container(container_id, 0)
        return None

    async def _environment(
        self,
        pod: pods.Pod,
        sandbox: runtime.SandboxInfo,
        container: pods.Container,
        mounts: tuple[runtime.Mount, ...],
        waiting: MutableMapping[str, tuple[str, str]],
    ) -> tuple[tuple[tuple[str, str], ...], tuple[runtime.Mount, ...]]:
        """The container's variables, and its mounts with each subPath safely bind-mounted
        (a subPathExpr expanded from the variables first: `volumes.expand_sub_paths`). A
        missing ConfigMap, Secret or key (not optional) is a CreateContainerConfigError, as in
        the kubelet's generateContainerConfig, and so is a subPath that cannot be mounted;
        envFrom keys that are no variable names are skipped with a Warning event."""
        facts = downward.pod_facts(pod, self._node, sandboxes.sandbox_ips(sandbox))
        files = await self._env_files(pod, container)
        try:
            environment = envvars.resolve(
                container, lookup=self._lookup, facts=facts,
                service_env=await names.service_env(pod, self._services()), files=files)
            if any(m.sub_path or m.sub_path_expr for m in container.volume_mounts):
                mounts = await asyncio.to_thread(volumes.expand_sub_paths, container, mounts,
                                                 environment.mapping,
                                                 pod_dir=self._pods_root / pod.uid)
        except envvars.ConfigError as exc:
            self.config_error(pod, container, exc.message, waiting)
        for skipped in environment.skipped:
            self._recorder.record(pod, "Warning", envvars.INVALID_NAMES_REASON, skipped.message)
        return environment.variables, mounts

    async def _env_files(
        self, pod: pods.Pod, container: pods.Container
    ) -> dict[envfiles.FileKeyRef, envfiles.FileValue]:
        """What the container's fileKeyRefs read from their env files, now: an init container
        that ran before it may have written them."""
        refs = envfiles.file_key_refs(container)
        if not refs:
            return {}
        dirs = fileenv.volume_dirs(pod, self._pods_root / pod.uid / "volumes")
        return await asyncio.to_thread(fileenv.read_values, pod, refs, dirs)

    async def _with_devices(
        self, pod: pods.Pod, container: pods.Container, config: runtime.ContainerConfig,
        waiting: MutableMapping[str, tuple[str, str]],
    ) -> runtime.ContainerConfig:
        """The config with the container's devices (envs, mounts, devices, annotations, CDI
        devices, then those of its DRA claims); the device manager's refusal is a
        CreateContainerConfigError, as the kubelet's GenerateRunContainerOptions failing is."""
        if self._devices is not None:
            try:
                options = await self._devices.run_options(pod, container)
            except devicerules.DeviceError as exc:
                self.config_error(pod, container, exc.message, waiting)
            if options is not None:
                config = devicerules.with_devices(config, options)
        claimed = self._claims.cdi_devices(pod, container) \
            if self._claims is not None and container.resources.claims else ()
        if claimed:
            config = dataclasses.replace(config, cdi_devices=tuple(dict.fromkeys(
                (*config.cdi_devices, *claimed))))
        return config

    def _security_context(
        self,
        pod: pods.Pod,
        container: pods.Container,
        image: runtime.ImageInfo | None,
        waiting: MutableMapping[str, tuple[str, str]],
        user: runtime.UserNamespace | None,
    ) -> runtime.ContainerSecurity:
        """The container's CRI security context, in the sandbox's user namespace (`user`);
        runAsNonRoot is checked against the image's user first, as the kubelet does
        (CreateContainerConfigError when it fails)."""
        image_user = security.image_user(image)
        problem = security.run_as_non_root_error(pod, container, image_user)
        if problem is not None:
            self.config_error(pod, container, problem, waiting)
        return security.container_security(pod, container, image_user, self._security, user)

    async def pull_image_volumes(self, pod: pods.Pod) -> ImagePulls:
        """Every image volume of the pod made present as its pull policy says, mounted by a
        container or not, before any container of the sync starts (the kubelet's
        getImageVolumes): the same pulls, back-offs and events as a container image's, the
        events about the pod itself (no container's field path)."""
        out: ImagePulls = {}
        for volume in pod.spec.volumes:
            if volume.source_type != "image":
                continue
            reference, policy = vol.image_volume(volume.source)
            # Nameless: what the puller records is about the pod, and no start fails here.
            puller = pods.Container(name="", image=reference, image_pull_policy=policy)
            waiting: dict[str, tuple[str, str]] = {}
            found = await self._puller.ensure(pod, puller, waiting)
            if isinstance(found, runtime.ImageInfo):
                out[volume.name] = ImagePull(image_id=found.id)
            elif found is None:  # pulled, yet the runtime does not show it: try again
                out[volume.name] = ImagePull(reason="ErrImagePull", message=(
                    f"image {reference} pulled but not found"),
                    retry=self._puller.retry_delay())
            else:
                reason, message = waiting[""]
                out[volume.name] = ImagePull(reason=reason, message=message,
                                             retry=float(found))
        return out

    def _image_volumes(
        self, pod: pods.Pod, container: pods.Container, mounts: tuple[runtime.Mount, ...],
        waiting: MutableMapping[str, tuple[str, str]], pulls: ImagePulls,
    ) -> tuple[runtime.Mount, ...] | float:
        """The container's mounts, each image volume naming its image by ID as the kubelet's
        do; or, when one of its images could not be made present, seconds until a retry:
        the container waits with that pull's reason, and a Failed event on it says which
        (the kubelet's toKubeContainerImageVolumes)."""
        out, retry = [], None
        for mount in mounts:
            pull = pulls.get(mount.volume) if mount.image else None
            if pull is None:
                out.append(mount)
            elif pull.image_id:
                out.append(dataclasses.replace(mount, image=pull.image_id))
            else:
                self._recorder.record(pod, "Warning", ev.FAILED, f"Error: {pull.reason}",
                                      container=container.name)
                waiting[container.name] = (pull.reason, pull.message)
                retry = pull.retry if retry is None else min(retry, pull.retry)
        return tuple(out) if retry is None else retry

    def config_error(
        self,
        pod: pods.Pod,
        container: pods.Container,
        message: str,
        waiting: MutableMapping[str, tuple[str, str]],
    ) -> NoReturn:
        """The container cannot be configured as its spec says: it waits with the kubelet's
        CreateContainerConfigError and a Failed event, and is retried on the next sync."""
        waiting[container.name] = ("CreateContainerConfigError", message)
        self._recorder.record(pod, "Warning", ev.FAILED, f"Error: {message}",
                              container=container.name)
        raise ContainerError(f"configure container {container.name}: {message}")

    async def _create_and_start(
        self,
        pod: pods.Pod,
        container: pods.Container,
        sandbox: runtime.SandboxInfo,
        sandbox_config: runtime.SandboxConfig,
        config: runtime.ContainerConfig,
        waiting: MutableMapping[str, tuple[str, str]],
    ) -> runtime.ContainerID:
        # The kubelet's words: the runtime's description without gRPC's `rpc error: code =
        # … desc =` (its startContainer reads grpc status' Message()), in the container's
        # waiting state and its Failed event alike.
        name = container.name
        try:
            container_id = await self._client.create_container(sandbox.id, config, sandbox_config)
        except cri.CriError as exc:
            waiting[name] = ("CreateContainerError", exc.description)
            self._recorder.record(pod, "Warning", ev.FAILED, f"Error: {exc.description}",
                                  container=name)
            raise ContainerError(f"create container {name}: {exc.detail}") from exc
        self._recorder.record(pod, "Normal", ev.CREATED, "Container created", container=name)
        try:
            await self._client.start_container(container_id)
        except cri.CriError as exc:
            # Shown only while the container is to be restarted: one that is not stays
            # terminated with the runtime's StartError (phases.container_statuses).
            waiting[name] = ("RunContainerError", exc.description)
            self._recorder.record(pod, "Warning", ev.FAILED, f"Error: {exc.description}",
                                  container=name)
            raise ContainerError(f"start container {name}: {exc.detail}") from exc
        waiting.pop(name, None)
        self._recorder.record(pod, "Normal", ev.STARTED, "Container started", container=name)
        return container_id

    async def _link_log(self, pod: pods.Pod, sandbox_config: runtime.SandboxConfig,
                        config: runtime.ContainerConfig, container_id: str) -> None:
        """The link to the started container's log (adapters.loglinks), as the kubelet makes
        it after StartContainer; one that cannot be made is logged and the container runs
        on, as with the kubelet."""
        if self._log_links is None:
            return
        name = crilogs.link_name(pod.name, pod.namespace, config.name, container_id)
        target = Path(sandbox_config.log_directory) / config.log_path
        try:
            await asyncio.to_thread(loglinks.make, self._log_links, name, target)
        except OSError as exc:
            log.warning("cannot link %s to the log of container %s of %s: %s",
                        self._log_links / name, config.name, pod.full_name, exc)

    async def stop(
        self,
        pod: pods.Pod,
        spec: pods.Container | None,
        info: runtime.ContainerInfo,
        *,
        grace: float,
        pod_ip: str,
        turn: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        """preStop within the grace period, then (`turn(seconds left)`: a sidecar waits for
        the containers it must outlive) SIGTERM, and SIGKILL after what is left."""
        started = time.monotonic()
        if spec is not None and grace > 0:
            failure = await self._hooks.run(spec, info.id, "preStop", pod_ip=pod_ip,
                                            budget=grace)
            if failure is not None:
                # The kubelet's words: the hook's output stays out of the event (it may hold
                # secrets); it is logged.
                log.warning("preStop hook of %s in %s failed: %s", spec.name, pod.full_name,
                            failure)
                self._recorder.record(pod, "Warning", "FailedPreStopHook", "PreStopHook failed",
                                      container=spec.name)
        if turn is not None and grace - (time.monotonic() - started) > 0:
            await turn(grace - (time.monotonic() - started))
        left = grace - (time.monotonic() - started)
        # Whole seconds, rounded up, and at least the kubelet's minimum of 2 s: a timeout of 0
        # would make containerd send SIGKILL without any SIGTERM.
        await self._client.stop_container(
            info.id, max(math.ceil(left), terminations.MIN_GRACE_SECONDS))

    def with_message(self, pod: pods.Pod, info: runtime.ContainerInfo) -> runtime.ContainerInfo:
        """The exited container with its termination message (file, or logs on error)."""
        if info.state is not runtime.ContainerState.EXITED or info.message:
            return info
        message = _read_tail(self.message_file(pod.uid, info.name, info.attempt),
                             MAX_MESSAGE_BYTES).decode(errors="replace")
        spec = next((c for c in (*pod.spec.init_containers, *pod.spec.containers)
                     if c.name == info.name), None)
        fallback = spec is not None and spec.termination_message_policy == "FallbackToLogsOnError"
        if not message and fallback and info.exit_code != 0 and info.log_path:
            raw = _read_tail(Path(info.log_path), 64 * 1024)
            message = crilogs.last_lines(raw, FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES)
        if not message:
            return info
        return runtime.ContainerInfo(**{**info.__dict__, "message": message})


def _touch(pods_root: Path, uid: str, path: Path) -> None:
    hostdirs.pod_dir(pods_root, uid)  # 0750: other host users never reach the file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    # Writable by the container's user, whoever it is (the kubelet chmods it 0666 too).
    path.chmod(0o666)


def _read_tail(path: Path, limit: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(size - limit, 0))
            return handle.read()
    except OSError:
        return b""
