"""The volume manager: sets up a pod's volumes on the host and says what each container mounts.

`VolumeManager.prepare` runs on every sync of a pod, before its sandbox is created: it makes
each volume's directory (emptyDir, tmpfs for `medium: Memory` and for secrets and projected
volumes, as the kubelet keeps secrets off the disk), checks hostPaths, and (re)writes the
files of configMap, secret, downwardAPI and projected volumes with the kubelet's atomic
`..data` swap, so updates reach mounted files and a reader never sees a half-written set.
subPath mounts are resolved to the file at the time of the call, so like the kubelet's they
do not follow later updates. A `subPathExpr` depends on the container's environment, so it is
expanded and resolved when the container is created (`expand_sub_paths`).

Layout (the kubelet's): `<root>/<pod uid>/volumes/kubernetes.io~<plugin>/<volume name>`.

Exceptions::

    VolumeError     a volume could not be set up (or torn down); `.volume` names it,
                    `.message` is the kubelet's error text, `.event_message` the FailedMount
                    event message
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from nodelet.adapters import mounts
from nodelet.model import envvars, pods, runtime
from nodelet.model import volumes as vol

logger = logging.getLogger(__name__)

# Volume types the kubelet backs with tmpfs even without `medium: Memory` (secret data must
# not reach the node's disk).
_TMPFS_TYPES = frozenset({"secret", "projected"})


class VolumeError(Exception):
    """A volume that could not be set up; `message` is the text of the FailedMount event."""

    def __init__(self, volume: str, message: str) -> None:
        super().__init__(f'volume "{volume}": {message}')
        self.volume = volume
        self.message = message

    @property
    def event_message(self) -> str:
        """The kubelet's FailedMount event message."""
        return f'MountVolume.SetUp failed for volume "{self.volume}" : {self.message}'


class VolumeManager:
    """Volumes of the pods of one node. Only a pod's worker calls it for that pod.

    `lookup(kind, namespace, name)` returns the ConfigMap or Secret (kind "ConfigMap" or
    "Secret") or None. `on_refresh_error` hears about volumes that were set up before but
    cannot be refreshed now (the object or key went away): their files are kept, and the pod
    goes on, as under the kubelet; by default this is only logged.
    """

    def __init__(
        self,
        *,
        root: Path,
        lookup: vol.Lookup,
        node_name: str,
        command_timeout: float = 10.0,
        on_refresh_error: Callable[[pods.Pod, VolumeError], None] | None = None,
    ) -> None:
        self._root = root
        self._lookup = lookup
        self._node_name = node_name
        self._timeout = command_timeout
        self._on_refresh_error = on_refresh_error or _log_refresh_error

    def volumes_dir(self, uid: pods.PodUID) -> Path:
        return self._root / uid / "volumes"

    def referenced_objects(self, pod: pods.Pod) -> set[tuple[str, str, str]]:
        """(kind, namespace, name) of the ConfigMaps and Secrets the pod's volumes read."""
        return vol.referenced_objects(pod)

    # -- set up ---------------------------------------------------------------------------

    async def prepare(
        self, pod: pods.Pod, *, pod_ip: str = "", host_ip: str = ""
    ) -> Mapping[str, tuple[runtime.Mount, ...]]:
        """Set up every volume of the pod (idempotent) and return each container's mounts
        (init and regular containers, by name). Raises VolumeError for the first volume, in
        spec order, that cannot be set up."""
        facts = vol.PodFacts(
            pod=pod, node_name=self._node_name, pod_ip=pod_ip, host_ip=host_ip,
            node_cpu_milli=(os.cpu_count() or 1) * 1000, node_memory=_node_memory(),
        )
        paths: dict[str, Path] = {}
        for volume in pod.spec.volumes:
            try:
                paths[volume.name] = await self._set_up(pod, volume, facts)
            except (vol.SourceError, mounts.MountError) as exc:
                raise VolumeError(volume.name, exc.message) from exc
            except OSError as exc:
                raise VolumeError(volume.name, str(exc)) from exc
        return await asyncio.to_thread(self._container_mounts, pod, paths)

    async def _set_up(self, pod: pods.Pod, volume: pods.Volume, facts: vol.PodFacts) -> Path:
        if volume.source_type == "hostPath":
            path, type_ = vol.host_path(volume.source)
            await asyncio.to_thread(mounts.check_host_path, path, type_)
            return Path(path)
        plugin = vol.PLUGIN_DIRS.get(volume.source_type)
        if plugin is None:
            raise vol.SourceError(f'volume type "{volume.source_type}" is not supported')
        directory = self.volumes_dir(pod.uid) / plugin / volume.name
        if volume.source_type == "emptyDir":
            medium = vol.empty_dir_medium(volume.source)
            # emptyDir is world-writable so that containers running as any user can use it.
            created = await self._make_dir(directory, tmpfs=medium == "Memory",
                                           size=vol.tmpfs_size(volume.source), mode=0o777)
            if created:  # later files are the containers': the setgid bit keeps their group
                await self._set_ownership(pod, directory, read_only=False)
            return directory
        await self._make_dir(directory, tmpfs=volume.source_type in _TMPFS_TYPES, size=None,
                             mode=0o755)
        if await self._write_contents(pod, volume, facts, directory):
            await self._set_ownership(pod, directory, read_only=True)
        return directory

    async def _set_ownership(self, pod: pods.Pod, directory: Path, *, read_only: bool) -> None:
        """fsGroup: the volume's files belong to the group and are group-readable (writable
        for emptyDir), directories setgid, as the kubelet's SetVolumeOwnership."""
        psc = pod.spec.security_context
        if psc.fs_group is None:
            return
        only_if_root_differs = psc.fs_group_change_policy == "OnRootMismatch"
        await asyncio.to_thread(_set_ownership, directory, psc.fs_group, read_only,
                                only_if_root_differs)

    async def _make_dir(
        self, directory: Path, *, tmpfs: bool, size: int | None, mode: int
    ) -> bool:
        """Make the volume's directory (tmpfs-backed if asked); True when it is new."""
        created = await asyncio.to_thread(_make_dir, directory)
        if tmpfs and not await asyncio.to_thread(mounts.is_tmpfs, directory):
            await mounts.mount_tmpfs(directory, size=size, mode=mode, limit=self._timeout)
            return True
        if created:
            await asyncio.to_thread(directory.chmod, mode)
        return created

    async def _write_contents(
        self, pod: pods.Pod, volume: pods.Volume, facts: vol.PodFacts, directory: Path
    ) -> bool:
        """(Re)write the volume's files; True when they changed."""
        try:
            payload = vol.content_payload(volume, self._lookup, facts)
        except vol.SourceError as exc:
            if mounts.current_data_dir(directory) is None:
                raise
            # Set up before: keep the files the containers already see (the kubelet does too).
            self._on_refresh_error(pod, VolumeError(volume.name, exc.message))
            return False
        if not await asyncio.to_thread(mounts.write_atomically, directory, payload):
            return False
        logger.info("wrote volume %s of pod %s (%d files)", volume.name, pod.full_name,
                    len(payload))
        return True

    # -- mounts ---------------------------------------------------------------------------

    def _container_mounts(
        self, pod: pods.Pod, paths: Mapping[str, Path]
    ) -> dict[str, tuple[runtime.Mount, ...]]:
        types = {v.name: v.source_type for v in pod.spec.volumes}
        out: dict[str, tuple[runtime.Mount, ...]] = {}
        for container in (*pod.spec.init_containers, *pod.spec.containers):
            out[container.name] = tuple(
                self._mount(m, paths[m.name], types[m.name]) for m in container.volume_mounts
            )
        return out

    def _mount(self, mount: pods.VolumeMount, base: Path, source_type: str) -> runtime.Mount:
        # The kubelet always mounts the volumes whose files it writes read-only.
        read_only = mount.read_only or source_type in vol.CONTENT_TYPES
        host = str(base)
        if mount.sub_path:
            try:
                host = _resolve_sub_path(base, mount.sub_path)
            except vol.SourceError as exc:
                raise VolumeError(mount.name, exc.message) from exc
            except OSError as exc:
                raise VolumeError(mount.name, f'subPath "{mount.sub_path}": {exc}') from exc
        return runtime.Mount(container_path=mount.mount_path, host_path=host, readonly=read_only,
                             propagation=vol.mount_propagation(mount.mount_propagation))

    # -- tear down ------------------------------------------------------------------------

    async def cleanup(self, pod_uid: pods.PodUID) -> None:
        """Unmount and remove every volume directory of the pod; idempotent. Call it once the
        pod's containers and sandbox are gone (hostPath contents are never touched)."""
        directory = self.volumes_dir(pod_uid)
        if not await asyncio.to_thread(directory.exists):
            return
        for point, _ in await asyncio.to_thread(mounts.mount_points, directory):
            try:
                await mounts.unmount(point, limit=self._timeout)
            except mounts.MountError as exc:
                raise VolumeError(point.name, exc.message) from exc
        left = await asyncio.to_thread(mounts.mount_points, directory)
        if left:
            # Never delete through a mount point: the data would belong to someone else.
            paths = ", ".join(str(p) for p, _ in left)
            raise VolumeError(left[0][0].name, f"still mounted, not removed: {paths}")
        await asyncio.to_thread(_remove_pod_dirs, directory)


def _log_refresh_error(pod: pods.Pod, error: VolumeError) -> None:
    logger.warning("pod %s: keeping the old files: %s", pod.full_name, error.event_message)


def _set_ownership(directory: Path, fs_group: int, read_only: bool, on_mismatch: bool) -> None:
    top = directory.lstat()
    if on_mismatch and vol.root_owned(top.st_mode & 0o7777, top.st_gid, fs_group,
                                      read_only=read_only):
        return
    for root, dirs, files in os.walk(directory):
        for name in (root, *(os.path.join(root, n) for n in (*dirs, *files))):
            info = os.lstat(name)
            os.lchown(name, -1, fs_group)
            if stat.S_ISLNK(info.st_mode):
                continue  # the `..data` links: chmod would follow them
            os.chmod(name, vol.owned_mode(info.st_mode & 0o7777, is_dir=stat.S_ISDIR(info.st_mode),
                                          read_only=read_only))


def _make_dir(directory: Path) -> bool:
    """Create the directory (and its parents); True when it did not exist."""
    if directory.is_dir():
        return False
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    return True


def expand_sub_paths(
    container: pods.Container, mounts_: Sequence[runtime.Mount], variables: Mapping[str, str]
) -> tuple[runtime.Mount, ...]:
    """The container's mounts (from `prepare`, where a subPathExpr mount is the whole volume)
    with each `subPathExpr` expanded from the container's environment and resolved like a
    subPath: created when missing, kept inside the volume. Blocking (file system): run it in a
    thread. Raises `envvars.ConfigError` with the kubelet's words (CreateContainerConfigError),
    since the expression depends on the container's environment, not on the volume."""
    exprs = {m.mount_path: m for m in container.volume_mounts if m.sub_path_expr}
    out = []
    for mount in mounts_:
        spec = exprs.get(mount.container_path)
        sub_path = envvars.sub_path(spec, variables) if spec is not None else ""
        if spec is None or not sub_path:
            out.append(mount)
            continue
        try:
            host = _resolve_sub_path(Path(mount.host_path), sub_path)
        except (vol.SourceError, OSError) as exc:
            detail = exc.message if isinstance(exc, vol.SourceError) else str(exc)
            raise envvars.ConfigError(
                f'failed to prepare subPath for volumeMount "{spec.name}" of container '
                f'"{container.name}": {detail}'
            ) from exc
        out.append(dataclasses.replace(mount, host_path=host))
    return tuple(out)


def _resolve_sub_path(base: Path, sub_path: str) -> str:
    """The host path of `base/sub_path` with symlinks resolved, created as a directory when
    missing (as the kubelet does); it must stay inside the volume."""
    vol.check_sub_path(sub_path)
    top = os.path.realpath(base)
    target = os.path.realpath(os.path.join(top, sub_path))
    if target != top and not target.startswith(top.rstrip("/") + "/"):
        raise vol.SourceError(f'subPath "{sub_path}" resolves outside the volume: {target}')
    if not os.path.lexists(target):
        os.makedirs(target, mode=0o755, exist_ok=True)
    return target


def _remove_pod_dirs(directory: Path) -> None:
    # rmtree does not follow symlinks, so `..data` links and hostPaths are safe.
    shutil.rmtree(directory, ignore_errors=False)
    try:
        directory.parent.rmdir()  # <root>/<uid>, when nothing else lives there
    except OSError:
        pass


def _node_memory() -> int:
    """The node's memory in bytes (what an unset memory limit means to the downward API)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
