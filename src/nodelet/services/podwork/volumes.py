"""The volume manager: sets up a pod's volumes on the host and says what each container mounts.

`VolumeManager.prepare` runs on every sync of a pod, before its sandbox is created: it makes
each volume's directory (emptyDir, tmpfs for `medium: Memory` and for secrets and projected
volumes, as the kubelet keeps secrets off the disk), checks hostPaths, and (re)writes the
files of configMap, secret, downwardAPI and projected volumes (service account tokens from
the token source, `services.cluster.tokens` in cluster mode) with the kubelet's atomic
`..data` swap, so updates and rotated tokens reach mounted files and a reader never sees a
half-written set.

Claim volumes (`persistentVolumeClaim`, generic `ephemeral`) are resolved first, through the
API (`ApiSources.claims`, the rules of `model.core.claims`); a claim that cannot be used yet
fails the whole set-up with the kubelet's "Unable to attach or mount volumes" words while the
pod's other volumes are set up. The PV is then a hostPath used in place, a local path
bind-mounted under the pod (a Block one linked under `volumeDevices`, given to the runtime as
a device), or a CSI volume published by its driver (`csivolumes`, also for inline `csi:`
volumes), which `cleanup` has the driver unpublish first.

subPath and subPathExpr mounts are made when the container is created (`expand_sub_paths`,
the kubelet's makeMounts): the path is opened inside the volume without following symlinks
and what was opened is bind-mounted by descriptor onto a path of nodelet's own, which is what
the runtime gets. A container can turn a directory of its volume into a symlink at any time,
so a checked path handed on as a string could lead out of the volume (CVE-2017-1002101,
CVE-2021-25741). Like the kubelet's, a subPath mount keeps the file it was made from: it does
not follow later updates of a configMap.

`share_root` makes the root a shared mount at start-up (the kubelet's MakeRShared of its root
directory): containerd accepts HostToContainer and Bidirectional propagation only for sources
on a shared (or slave) mount.

Layout (the kubelet's): `<root>/<pod uid>/volumes/kubernetes.io~<plugin>/<volume name>`, and
the subPath binds `<root>/<pod uid>/volume-subpaths/<volume>/<container>/<mount index>`.

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
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from nodelet.adapters import host, hostdirs, mounts
from nodelet.helpers import errors
from nodelet.model.core import (
    apijson,
    claims,
    configs,
    csi,
    envvars,
    pods,
    runtime,
    summary,
    tokens,
)
from nodelet.model.core import volumes as vol
from nodelet.services.podwork import csivolumes

log = logging.getLogger(__name__)

# Under a pod's directory: the subPath bind mounts given to the runtime, and the links to the
# block devices of its raw block volumes (the kubelet's names).
SUB_PATHS_DIR = "volume-subpaths"
DEVICES_DIR = "volumeDevices"

# Service account tokens for projected volumes (cluster mode: `services.cluster.tokens`); raises a
# `helpers.errors.MessageError` whose message is the FailedMount text.
TokenSource = Callable[[tokens.TokenRequest], Awaitable[tokens.Token]]

# Volume types the kubelet backs with tmpfs even without `medium: Memory` (secret data must
# not reach the node's disk).
_TMPFS_TYPES = frozenset({"secret", "projected"})


class ClaimReader(Protocol):
    """The API objects behind a pod's claims (cluster mode: `services.cluster`). Each raises
    `helpers.errors.MessageError` with the API's words (`persistentvolumeclaims "x" not
    found`) when the object cannot be read."""

    async def claim(self, namespace: str, name: str) -> apijson.JSON: ...

    async def volume(self, name: str) -> apijson.JSON: ...

    async def patch_claim_status(self, namespace: str, name: str,
                                 patch: apijson.JSON) -> None: ...


class VolumeError(Exception):
    """A volume that could not be set up; `message` is the error, `event_message` the text of
    the FailedMount event: `<operation> for volume "<volume>" : <message>`, or the whole
    `event` where the kubelet words it otherwise (claims that could not be processed)."""

    def __init__(self, volume: str, message: str, *,
                 operation: str = "MountVolume.SetUp failed", event: str = "") -> None:
        super().__init__(f'volume "{volume}": {message}')
        self.volume = volume
        self.message = message
        self._operation = operation
        self._event = event

    @property
    def event_message(self) -> str:
        """The kubelet's FailedMount event message."""
        return self._event or f'{self._operation} for volume "{self.volume}" : {self.message}'


@dataclasses.dataclass(frozen=True)
class ApiSources:
    """What volumes are made of that lives in the API server (cluster mode).

    `lookup(kind, namespace, name)` returns the ConfigMap or Secret (kind "ConfigMap" or
    "Secret") or None; `synced(kind, namespace, name)` whether None from `lookup` means the
    API said the object does not exist (False: it was not read yet, and a missing object is
    reported as the kubelet's "failed to sync configmap cache", never as "not found").
    `tokens(request)` fetches the service account tokens of projected volumes, `claims` reads
    the PVCs and PVs of claim volumes; None for either: there is no API server to ask (a
    token volume then fails, a claim waits with the kubelet's "failed to fetch PVC" words).
    """

    lookup: vol.Lookup = vol.no_objects
    synced: Callable[[str, str, str], bool] = lambda kind, namespace, name: True
    tokens: TokenSource | None = None
    claims: ClaimReader | None = None


class VolumeManager:
    """Volumes of the pods of one node. Only a pod's worker sets up and cleans up that pod's
    volumes; the node's status, stats and metrics read what is in use.

    `sources` are the API objects volumes read (`ApiSources`). `on_refresh_error` hears about
    volumes that were set up before but cannot be refreshed now (the object or key went
    away, a token could not be renewed): their files are kept, and the pod goes on, as under
    the kubelet; by default this is only logged. `node_labels()` are the Node's labels a
    PV's node affinity is matched against; `csi` sets up and tears down CSI PVs (None: they
    fail, as no driver can register).
    """

    def __init__(
        self,
        *,
        root: Path,
        node_name: str,
        sources: ApiSources = ApiSources(),
        command_timeout: float = 10.0,
        on_refresh_error: Callable[[pods.Pod, VolumeError], None] | None = None,
        node_labels: Callable[[], Mapping[str, str]] = dict,
        csi: csivolumes.CsiVolumes | None = None,
    ) -> None:
        self._root = root
        # The kubelet's global mounts of local PVs on block devices (beside `pods`).
        self._local_mounts = root.parent / "plugins" / "kubernetes.io" / "local-volume" / \
            "mounts"
        self._csi = csi
        self._lookup = sources.lookup
        self._synced = sources.synced
        self._tokens = sources.tokens
        self._claims = sources.claims
        self._node_labels = node_labels
        # The PVs of each pod's claims, as resolved (the kubelet's desired state keeps them
        # too): a sync reads the API only for a claim not resolved yet. Forgotten at cleanup.
        self._bound: dict[pods.PodUID, dict[str, claims.PersistentVolume]] = {}
        # The volumes of each pod set up by an earlier sync (for the kubelet's "unmounted
        # volumes" list). Forgotten at cleanup.
        self._ready: dict[pods.PodUID, set[str]] = {}
        self._node_name = node_name
        self._timeout = command_timeout
        self._on_refresh_error = on_refresh_error or _log_refresh_error

    def volumes_dir(self, uid: pods.PodUID) -> Path:
        return self._root / uid / "volumes"

    async def share_root(self) -> None:
        """Put the root on a shared mount (bound onto itself when needed; `nodelet reset`
        unmounts it). On failure pods still run; a mount with propagation then fails with
        containerd's error, so this only logs."""
        try:
            await asyncio.to_thread(self._root.mkdir, parents=True, exist_ok=True)
            bound = await asyncio.to_thread(mounts.make_rshared, self._root)
        except (mounts.MountError, OSError) as exc:
            detail = exc.message if isinstance(exc, mounts.MountError) else str(exc)
            log.warning("pods dir %s is not a shared mount, so mountPropagation "
                        "HostToContainer and Bidirectional will fail: %s", self._root, detail)
            return
        if bound:
            log.info("bound %s onto itself as a shared mount", self._root)

    # -- set up ---------------------------------------------------------------------------

    async def prepare(
        self, pod: pods.Pod, *, pod_ip: str = "", host_ip: str = ""
    ) -> Mapping[str, tuple[runtime.Mount, ...]]:
        """Set up every volume of the pod (idempotent) and return each container's mounts
        (init, regular and ephemeral containers, by name). Raises VolumeError for the first
        volume, in spec order, that cannot be set up."""
        # 0750, as the kubelet's: no host user but root reaches the pod's files.
        await asyncio.to_thread(hostdirs.pod_dir, self._root, pod.uid)
        facts = vol.PodFacts(
            pod=pod, node_name=self._node_name, pod_ip=pod_ip, host_ip=host_ip,
            node_cpu_milli=(os.cpu_count() or 1) * 1000, node_memory=_node_memory(),
        )
        bound, failed = await self._resolve_claims(pod)
        # In use from now on (volumesInUse; teardown), also while a volume waits to be set up.
        self._bound[pod.uid] = bound
        paths: dict[str, Path] = {}
        for volume in pod.spec.volumes:
            if volume.name in failed:
                continue
            pv = bound.get(volume.name)
            # The kubelet names a PV-backed volume by its PV in these messages.
            name = pv.name if pv is not None else volume.name
            try:
                if pv is not None:
                    paths[volume.name] = await self._set_up_persistent(pod, pv)
                else:
                    paths[volume.name] = await self._set_up(pod, volume, facts)
            except (vol.SourceError, mounts.MountError) as exc:
                raise VolumeError(name, exc.message) from exc
            except csivolumes.Failure as exc:
                raise VolumeError(name, exc.message, operation=exc.operation) from exc
            except OSError as exc:
                raise VolumeError(name, str(exc)) from exc
        await self._expand_claims(pod, bound)
        before = self._ready.get(pod.uid, set())
        self._ready[pod.uid] = before | set(paths)
        if failed:
            # The other volumes are set up meanwhile, as the kubelet's reconciler mounts
            # them: the volumes named unmounted are those not set up before this sync.
            mounted, devices = claims.used_names(pod)
            unmounted = ((mounted | devices) - before) | set(failed)
            first = min(failed)
            raise VolumeError(first, failed[first],
                              event=claims.failure_message(unmounted, failed))
        return self._container_mounts(pod, paths, bound)

    async def volume_stats(self, pod: pods.Pod, *,
                           directories: bool = True) -> list[summary.VolumeUsage]:
        """The figures of the pod's volumes that can say them: emptyDir, configMap, secret,
        downwardAPI and projected volumes as `du` and statfs count their directory (the
        kubelet's MetricsDu; not with `directories` false), CSI volumes whose driver has
        GET_VOLUME_STATS (NodeGetVolumeStats); a volume that does not answer is left out."""
        out = await asyncio.to_thread(self._directory_stats, pod) if directories else []
        for volume in pod.spec.volumes:
            pv = self._bound.get(pod.uid, {}).get(volume.name)
            claim = claims.claim_of(pod, volume)
            if pv is None or pv.csi is None or claim is None or self._csi is None:
                continue
            fs = await self._csi.stats(pod.uid, pv)
            if fs is not None:
                out.append(summary.VolumeUsage(volume.name, fs, (pod.namespace, claim.name)))
        return out

    def _directory_stats(self, pod: pods.Pod) -> list[summary.VolumeUsage]:
        """The volumes nodelet keeps as directories, measured (blocking: on a thread)."""
        out = []
        for volume in pod.spec.volumes:
            plugin = vol.PLUGIN_DIRS.get(volume.source_type)
            directory = self.volumes_dir(pod.uid) / (plugin or "") / volume.name
            if plugin is None or not directory.is_dir():
                continue
            now = time.time_ns()
            try:
                fs = host.filesystem_stats(directory)
            except OSError:
                continue
            used, inodes = host.directory_usage(directory)
            out.append(summary.VolumeUsage(
                volume.name, summary.Fs(time_ns=now, used=used, inodes_used=inodes,
                                        capacity=fs.capacity, available=fs.available,
                                        inodes=fs.inodes, inodes_free=fs.inodes_free),
                local_ephemeral=vol.local_ephemeral(volume)))
        return out

    def volumes_in_use(self) -> list[str]:
        """The attachable volumes the node's pods use, by the kubelet's unique names (for
        `node.status.volumesInUse`: the attach/detach controller does not detach them)."""
        names = {claims.unique_name(pv) for bound in self._bound.values()
                 for pv in bound.values()}
        # What the pods recorded on disk too: in use until torn down, also after a restart.
        on_disk = self._csi.in_use() if self._csi is not None else []
        return sorted({n for n in names if n} | set(on_disk))

    def extra_groups(self, pod: pods.Pod) -> tuple[int, ...]:
        """The groups the pod's PVs ask for (their pv.beta.kubernetes.io/gid annotation),
        which every container gets besides the pod's own, as the kubelet's
        GetExtraSupplementalGroupsForPod: each once, none the pod lists already."""
        own = set(pod.spec.security_context.supplemental_groups)
        gids = {pv.gid for pv in self._bound.get(pod.uid, {}).values() if pv.gid is not None}
        return tuple(sorted(gids - own))

    # -- claims ---------------------------------------------------------------------------

    async def _resolve_claims(
        self, pod: pods.Pod
    ) -> tuple[dict[str, claims.PersistentVolume], dict[str, str]]:
        """The PV of each claim volume, and the kubelet's error for each claim that cannot be
        used yet (not bound, being deleted, not the pod's...), by volume name."""
        known = self._bound.get(pod.uid, {})
        mounted, devices = claims.used_names(pod)
        out: dict[str, claims.PersistentVolume] = {}
        failed: dict[str, str] = {}
        for volume in pod.spec.volumes:
            claim = claims.claim_of(pod, volume)
            if claim is None:
                continue
            if volume.name in known:
                out[volume.name] = known[volume.name]
                continue
            try:
                out[volume.name] = await self._resolve(pod, claim, mounted, devices)
            except claims.ClaimError as exc:
                failed[volume.name] = (f"error processing PVC {pod.namespace}/{claim.name}: "
                                       f"{exc.message}" if exc.processing else exc.message)
        return out, failed

    async def _resolve(self, pod: pods.Pod, claim: claims.Claim, mounted: set[str],
                       devices: set[str]) -> claims.PersistentVolume:
        if self._claims is None:
            raise claims.ClaimError("failed to fetch PVC from API server: nodelet runs "
                                    "without an API server (run it with --kubeconfig)")
        try:
            pvc = await self._claims.claim(pod.namespace, claim.name)
        except errors.MessageError as exc:
            raise claims.ClaimError(f"failed to fetch PVC from API server: {exc.message}") \
                from exc
        volume_name, claim_uid = claims.check_claim(pvc)
        if claim.ephemeral:
            claims.check_owner(pod, pvc)
        try:
            pv_object = await self._claims.volume(volume_name)
        except errors.MessageError as exc:
            raise claims.ClaimError(f"failed to fetch PV {volume_name} from API server: "
                                    f"{exc.message}") from exc
        pv = claims.persistent_volume(pv_object, claim_uid, read_only=claim.read_only)
        claims.check_mode(claim.volume, pv.volume_mode, mounted=claim.volume in mounted,
                          device=claim.volume in devices)
        return pv

    async def _expand_claims(self, pod: pods.Pod,
                             bound: Mapping[str, claims.PersistentVolume]) -> None:
        """Expand on the node the CSI volumes whose claims the resizer left to it, then mark
        the claims expanded (the kubelet's in-use expansion). A failure does not stop the
        pod: it is logged and tried again at the next sync."""
        if self._csi is None or self._claims is None:
            return
        for volume in pod.spec.volumes:
            pv, claim = bound.get(volume.name), claims.claim_of(pod, volume)
            if pv is None or claim is None or not self._csi.expands(pv):
                continue
            try:
                pvc = await self._claims.claim(pod.namespace, claim.name)
                if not claims.resize_asked(pvc):
                    continue
                pv_object = await self._claims.volume(pv.name)
                size = claims.node_expansion(pvc, pv_object)
                if size is None:
                    continue
                await self._csi.expand(pod, pv, size)
                await self._claims.patch_claim_status(pod.namespace, claim.name,
                                                      claims.expansion_done(pvc, pv_object))
            except (errors.MessageError, csivolumes.Failure) as exc:
                message = exc.message if isinstance(exc, errors.MessageError) else str(exc)
                log.warning("pod %s: volume %s not expanded yet: %s", pod.full_name,
                            volume.name, message)

    async def _set_up_persistent(self, pod: pods.Pod, pv: claims.PersistentVolume) -> Path:
        """A bound PV: node affinity checked, then a hostPath used in place, a local PV
        bind-mounted under the pod (or, in Block mode, its device linked there)."""
        block = pv.volume_mode == "Block"
        operation = "MapVolume" if block else "MountVolume"
        try:
            claims.check_node(pv, self._node_labels(), self._node_name)
        except claims.ClaimError as exc:
            raise VolumeError(pv.name, exc.message,
                              operation=f"{operation}.NodeAffinity check failed") from exc
        if block:
            return await self._map_device(pod, pv)
        if pv.source_type == "hostPath":
            if not pv.path.startswith("/") or ".." in pv.path.split("/"):
                raise vol.SourceError(f"invalid HostPath {pv.path}: must be an absolute path "
                                      "without '..'")
            await asyncio.to_thread(mounts.check_host_path, pv.path, pv.host_path_type)
            return Path(pv.path)
        if pv.source_type == "local":
            return await self._mount_local(pod, pv)
        if pv.source_type == "csi" and self._csi is not None:
            target, owned_by_node = await self._csi.set_up(pod, pv)
            await self._own_published(pod, target, owned_by_node)
            return target
        raise vol.SourceError(
            f'PV {pv.name} is a "{pv.source_type or "unknown"}" volume: nodelet sets up '
            "local, hostPath and CSI PVs only")

    async def _set_up_inline_csi(self, pod: pods.Pod, volume: pods.Volume) -> Path:
        """An inline CSI volume, published by its driver (with its nodePublishSecretRef's
        data), then given to the fsGroup where the driver's fsGroupPolicy says the node
        does it."""
        if self._csi is None:
            raise vol.SourceError("CSI volumes need a CSI driver registered with nodelet")
        source = csi.inline_source(pod.uid, volume.name, volume.source)
        target, owned_by_node = await self._csi.set_up_inline(
            pod, volume.name, source, self._csi_secrets(pod, volume))
        await self._own_published(pod, target, owned_by_node)
        return target

    def _csi_secrets(self, pod: pods.Pod, volume: pods.Volume) -> dict[str, str]:
        """The data of an inline CSI volume's nodePublishSecretRef (none: {})."""
        ref = volume.source.get("nodePublishSecretRef")
        name = str(ref.get("name") or "") if isinstance(ref, Mapping) else ""
        if not name:
            return {}
        found = self._lookup("Secret", pod.namespace, name)
        if not isinstance(found, configs.Secret):
            why = "not read from the API yet" if not self._synced(
                "Secret", pod.namespace, name) else f'secrets "{name}" not found'
            raise vol.SourceError(f"fetching NodePublishSecretRef {pod.namespace}/{name} "
                                  f"failed: {why}")
        return {k: v.decode(errors="replace") for k, v in found.data.items()}

    async def _own_published(self, pod: pods.Pod, target: Path, owned_by_node: bool) -> None:
        fs_group = pod.spec.security_context.fs_group
        if owned_by_node and fs_group is not None and await asyncio.to_thread(target.is_dir):
            policy = pod.spec.security_context.fs_group_change_policy or "Always"
            await asyncio.to_thread(_own_tree, target, fs_group, policy)

    async def _mount_local(self, pod: pods.Pod, pv: claims.PersistentVolume) -> Path:
        """The local plugin's SetUpAt: the PV's path bind-mounted (read-only for a read-only
        claim) onto the pod's directory for it; a writable one then owned by the fsGroup."""
        directory = self.volumes_dir(pod.uid) / claims.LOCAL_PLUGIN_DIR / pv.name
        if await asyncio.to_thread(mounts.is_mount_point, directory):
            return directory
        if ".." in pv.path.split("/"):
            raise vol.SourceError(f"invalid path: {pv.path} must not contain '..'")
        source = await self._local_device(pv) if await asyncio.to_thread(
            _is_block_device, pv.path) else pv.path
        await asyncio.to_thread(directory.mkdir, mode=0o750, parents=True, exist_ok=True)
        await mounts.bind(source, directory, read_only=pv.read_only, options=pv.mount_options,
                          limit=self._timeout)
        fs_group = pod.spec.security_context.fs_group
        if fs_group is not None and not pv.read_only:
            policy = pod.spec.security_context.fs_group_change_policy or "Always"
            await asyncio.to_thread(_own_tree, directory, fs_group, policy)
        log.info("mounted local PV %s for pod %s", pv.name, pod.full_name)
        return directory

    async def _local_device(self, pv: claims.PersistentVolume) -> str:
        """A local PV on a block device, in Filesystem mode: the device formatted if blank
        (fsType, ext4 by default) and mounted once at the kubelet's global path
        `plugins/kubernetes.io/local-volume/mounts/<pv>` (its MountDevice), which each pod's
        directory binds."""
        target = self._local_mounts / pv.name
        if await asyncio.to_thread(mounts.is_mount_point, target):
            return str(target)
        await asyncio.to_thread(target.mkdir, mode=0o750, parents=True, exist_ok=True)
        fstype = pv.fs_type or "ext4"
        try:
            await mounts.format_and_mount(pv.path, target, fstype=fstype,
                                          options=(*(("ro",) if pv.read_only else ()),
                                                   *pv.mount_options), limit=self._timeout)
        except mounts.MountError as exc:
            await asyncio.to_thread(_remove_empty_dir, target)
            raise vol.SourceError(f"local: failed to mount device {pv.path} at {target} "
                                  f"(fstype: {fstype}), error {exc.message}") from exc
        log.info("mounted the block device %s of local PV %s at %s", pv.path, pv.name, target)
        return str(target)

    async def _unmount_unused_local_devices(self) -> None:
        """UnmountDevice of the local PVs on block devices that no pod binds any more."""
        if not await asyncio.to_thread(self._local_mounts.is_dir):
            return
        for target in await asyncio.to_thread(lambda: sorted(self._local_mounts.iterdir())):
            if await asyncio.to_thread(self._local_pv_bound, target.name):
                continue
            if await asyncio.to_thread(mounts.is_mount_point, target):
                try:
                    await mounts.unmount(target, limit=self._timeout)
                except mounts.MountError as exc:
                    raise VolumeError(target.name, exc.message,
                                      operation="UnmountDevice failed") from exc
            await asyncio.to_thread(_remove_empty_dir, target)

    def _local_pv_bound(self, name: str) -> bool:
        """Whether some pod's directory binds the local PV `name`."""
        return any(self._root.glob(f"*/volumes/{claims.LOCAL_PLUGIN_DIR}/{name}"))

    async def _map_device(self, pod: pods.Pod, pv: claims.PersistentVolume) -> Path:
        """A Block PV: its device linked at `<pod>/volumeDevices/<plugin>/<pv>`, the path the
        runtime gets (it resolves the link, as for the kubelet's)."""
        if pv.source_type != "local":
            raise vol.SourceError(f'PV {pv.name} is a "{pv.source_type}" volume in Block mode: '
                                  "nodelet maps local block devices only")
        link = self._root / pod.uid / DEVICES_DIR / claims.LOCAL_PLUGIN_DIR / pv.name
        await asyncio.to_thread(_link_device, pv.path, link)
        return link

    async def _set_up(self, pod: pods.Pod, volume: pods.Volume, facts: vol.PodFacts) -> Path:
        if volume.source_type == "image":  # the runtime mounts the image itself
            return Path()
        if volume.source_type == "csi":
            return await self._set_up_inline_csi(pod, volume)
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
            # On tmpfs the kubelet passes no mode, so the root has tmpfs's default 1777
            # (sticky; a subPath made in it inherits that, which [NodeConformance] checks).
            memory = medium == "Memory"
            created = await self._make_dir(directory, tmpfs=memory,
                                           size=vol.tmpfs_size(volume.source),
                                           mode=0o1777 if memory else 0o777)
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
        for emptyDir), directories setgid, as the kubelet's SetVolumeOwnership. It runs when an
        emptyDir is made (so fsGroupChangePolicy OnRootMismatch and Always agree) and after
        each write of a content volume (always recursively: the kubelet ignores the policy
        for them, and new files must be the group's)."""
        fs_group = pod.spec.security_context.fs_group
        if fs_group is not None:
            await asyncio.to_thread(_set_ownership, directory, fs_group, read_only)

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
            files = await self._token_files(pod, volume)
            payload = vol.content_payload(volume, self._lookup, facts, files)
        except vol.SourceError as exc:
            error = self._unsynced(pod, volume) or exc
            if mounts.current_data_dir(directory) is None:
                if error is exc:
                    raise
                raise error from exc
            # Set up before: keep the files the containers already see (the kubelet does too).
            self._on_refresh_error(pod, VolumeError(volume.name, error.message))
            return False
        if not await asyncio.to_thread(mounts.write_atomically, directory, payload):
            return False
        log.info("wrote volume %s of pod %s (%d files)", volume.name, pod.full_name,
                 len(payload))
        return True

    def _unsynced(self, pod: pods.Pod, volume: pods.Volume) -> vol.SourceError | None:
        """The kubelet's error for an object of the volume not read from the API yet (its
        watch's first list did not answer in time): not "not found", which only the API's
        answer may say."""
        for kind, namespace, name in sorted(vol.volume_objects(volume, pod.namespace)):
            if not self._synced(kind, namespace, name):
                return vol.SourceError(f"failed to sync {kind.lower()} cache: timed out "
                                       "waiting for the condition")
        return None

    async def _token_files(self, pod: pods.Pod, volume: pods.Volume) -> dict[str, bytes]:
        """The service account tokens of a projected volume's token sources, by path."""
        requests = tokens.requests(pod, volume)
        if not requests:
            return {}
        if self._tokens is None:
            raise vol.SourceError("cannot fetch a service account token: nodelet has no API "
                                  "server to ask (run it with --kubeconfig)")
        out = {}
        for path, request in requests.items():
            try:
                out[path] = (await self._tokens(request)).token.encode()
            except errors.MessageError as exc:
                raise vol.SourceError(exc.message) from exc
        return out

    # -- mounts ---------------------------------------------------------------------------

    def _container_mounts(
        self, pod: pods.Pod, paths: Mapping[str, Path],
        bound: Mapping[str, claims.PersistentVolume],
    ) -> dict[str, tuple[runtime.Mount, ...]]:
        by_name = {v.name: v for v in pod.spec.volumes}
        out: dict[str, tuple[runtime.Mount, ...]] = {}
        for container in (*pod.spec.init_containers, *pod.spec.containers,
                          *pod.spec.ephemeral_containers):
            mounts_ = tuple(
                self._image_mount(m, by_name[m.name]) if by_name[m.name].source_type == "image"
                else self._mount(m, paths[m.name], by_name[m.name].source_type,
                                 _read_only_volume(by_name[m.name], bound.get(m.name)))
                for m in container.volume_mounts
            )
            # makeBlockVolumes: each device read-only when its claim is.
            devices = tuple(
                runtime.Mount(container_path=d.device_path, host_path=str(paths[d.name]),
                              readonly=bound[d.name].read_only, volume=d.name,
                              block_device=True)
                for d in container.volume_devices)
            out[container.name] = mounts_ + devices
        return out

    def _image_mount(self, mount: pods.VolumeMount, volume: pods.Volume) -> runtime.Mount:
        """An image volume: always read-only (the kubelet's), its subPath mounted by the
        runtime from inside the image."""
        reference, policy = vol.image_volume(volume.source)
        if mount.sub_path:
            try:
                vol.check_sub_path(mount.sub_path)
            except vol.SourceError as exc:
                raise VolumeError(mount.name, exc.message) from exc
        return runtime.Mount(container_path=mount.mount_path, host_path="", readonly=True,
                             volume=mount.name, image=reference, image_pull_policy=policy,
                             image_sub_path=mount.sub_path)

    def _mount(self, mount: pods.VolumeMount, base: Path, source_type: str,
               volume_read_only: bool) -> runtime.Mount:
        """The whole volume; a subPath mount too, until `expand_sub_paths` binds the path
        when the container is created."""
        # The kubelet always mounts the volumes whose files it writes read-only, and those
        # that are read-only themselves (`_read_only_volume`).
        read_only = mount.read_only or source_type in vol.CONTENT_TYPES or volume_read_only
        if mount.sub_path:
            try:
                vol.check_sub_path(mount.sub_path)
            except vol.SourceError as exc:
                raise VolumeError(mount.name, exc.message) from exc
        return runtime.Mount(container_path=mount.mount_path, host_path=str(base),
                             readonly=read_only,
                             propagation=vol.mount_propagation(mount.mount_propagation),
                             volume=mount.name, recursive_request=mount.recursive_read_only)

    # -- tear down ------------------------------------------------------------------------

    async def cleanup(self, pod_uid: pods.PodUID) -> None:
        """Unmount and remove the pod's subPath binds, then every volume directory of the pod;
        idempotent. Call it once the pod's containers and sandbox are gone (hostPath contents
        are never touched)."""
        sub_paths = self._root / pod_uid / SUB_PATHS_DIR
        if await asyncio.to_thread(sub_paths.exists):  # before the volumes they bind from
            await self._unmount_all(sub_paths)
        if self._csi is not None:  # the driver unpublishes (and unstages) first
            try:
                await self._csi.tear_down(pod_uid)
            except csivolumes.Failure as exc:
                raise VolumeError(exc.volume, exc.message, operation=exc.operation) from exc
        self._bound.pop(pod_uid, None)
        self._ready.pop(pod_uid, None)
        for directory in (sub_paths, self.volumes_dir(pod_uid),
                          self._root / pod_uid / DEVICES_DIR):
            if await asyncio.to_thread(directory.exists):
                await self._unmount_all(directory)
                # rmtree does not follow symlinks, so `..data` links and hostPaths are safe.
                await asyncio.to_thread(shutil.rmtree, directory)
        try:
            await asyncio.to_thread((self._root / pod_uid).rmdir)  # when nothing else is there
        except OSError:
            pass
        await self._unmount_unused_local_devices()

    async def _unmount_all(self, directory: Path) -> None:
        """Unmount everything below `directory` (mounts stacked on one path too); raises
        VolumeError unless nothing is left mounted."""
        for _ in range(mounts.UNMOUNT_PASSES):
            points = await asyncio.to_thread(mounts.mount_points, directory)
            if not points:
                return
            for point, fstype in points:
                try:
                    await mounts.unmount(point, limit=self._timeout, fstype=fstype)
                except mounts.MountError as exc:
                    raise VolumeError(point.name, exc.message) from exc
        left = await asyncio.to_thread(mounts.mount_points, directory)
        if left:
            # Never delete through a mount point: the data would belong to someone else.
            paths = ", ".join(str(p) for p, _ in left)
            raise VolumeError(left[0][0].name, f"still mounted, not removed: {paths}")


def _read_only_volume(volume: pods.Volume, pv: claims.PersistentVolume | None) -> bool:
    """Whether the volume is read-only whatever the mount says: a read-only claim or CSI PV,
    or an inline CSI volume with readOnly (its mounter's ReadOnly attribute)."""
    if pv is not None:
        return pv.read_only or (pv.csi is not None and pv.csi.read_only)
    return volume.source_type == "csi" and volume.source.get("readOnly") is True


def _log_refresh_error(pod: pods.Pod, error: VolumeError) -> None:
    log.warning("pod %s: keeping the old files: %s", pod.full_name, error.event_message)


def _set_ownership(directory: Path, fs_group: int, read_only: bool) -> None:
    for root, dirs, files in os.walk(directory):
        for name in (root, *(os.path.join(root, n) for n in (*dirs, *files))):
            info = os.lstat(name)
            os.lchown(name, -1, fs_group)
            if stat.S_ISLNK(info.st_mode):
                continue  # the `..data` links: chmod would follow them
            os.chmod(name, vol.owned_mode(info.st_mode & 0o7777, is_dir=stat.S_ISDIR(info.st_mode),
                                          read_only=read_only))


def _own_tree(directory: Path, fs_group: int, policy: str) -> None:
    """SetVolumeOwnership of a writable PV: the whole tree with Always; with OnRootMismatch
    only when the root's group or bits say the tree is not the fsGroup's yet."""
    if policy == "OnRootMismatch":
        info = os.stat(directory)
        if not vol.needs_ownership(stat.S_IMODE(info.st_mode), info.st_gid, fs_group,
                                   is_dir=True, read_only=False):
            return
    _set_ownership(directory, fs_group, read_only=False)


def _link_device(device: str, link: Path) -> None:
    """Link `link` to the block device `device` (replacing an older link)."""
    try:
        info = os.stat(device)
    except OSError as exc:
        raise vol.SourceError(f"block device {device}: {exc.strerror or exc}") from exc
    if not stat.S_ISBLK(info.st_mode):
        raise vol.SourceError(f"{device} is not a block device: a Block PV's path must be one")
    link.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    if os.path.islink(link) and os.readlink(link) == device:
        return
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(device, link)


def _is_block_device(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False  # the bind mount says what is wrong with the path


def _remove_empty_dir(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def _make_dir(directory: Path) -> bool:
    """Create the directory (and its parents); True when it did not exist."""
    if directory.is_dir():
        return False
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    return True


def expand_sub_paths(
    container: pods.Container,
    mounts_: Sequence[runtime.Mount],
    variables: Mapping[str, str],
    *,
    pod_dir: Path,
) -> tuple[runtime.Mount, ...]:
    """The container's mounts (from `prepare`, where a subPath or subPathExpr mount is the
    whole volume) with each subPath (a `subPathExpr` expanded from the container's environment
    first) created when missing, opened safely and bind-mounted onto
    `<pod_dir>/volume-subpaths/<volume>/<container>/<mount index>`, the path the runtime gets
    instead (a bind made before, for an earlier instance of the container, is reused).
    Blocking (file system, mounts): run it in a thread. Raises `envvars.ConfigError` with the
    kubelet's words (CreateContainerConfigError): it happens when the container is created."""
    specs = {m.mount_path: (index, m) for index, m in enumerate(container.volume_mounts)
             if m.sub_path or m.sub_path_expr}
    out = []
    for mount in mounts_:
        index, spec = specs.get(mount.container_path, (0, None))
        sub_path = envvars.sub_path(spec, variables) if spec is not None else ""
        if spec is None or not sub_path or mount.image:  # an image's subPath is the runtime's
            out.append(mount)
            continue
        target = pod_dir / SUB_PATHS_DIR / spec.name / container.name / str(index)
        try:
            _bind_sub_path(Path(mount.host_path), sub_path, target)
        except (vol.SourceError, mounts.MountError, OSError) as exc:
            detail = str(exc) if isinstance(exc, OSError) else exc.message
            raise envvars.ConfigError(
                f'failed to prepare subPath for volumeMount "{spec.name}" of container '
                f'"{container.name}": {detail}'
            ) from exc
        out.append(dataclasses.replace(mount, host_path=str(target)))
    return tuple(out)


def _bind_sub_path(base: Path, sub_path: str, target: Path) -> None:
    """Bind `base/sub_path` onto `target`, as the kubelet's makeMounts and doBindSubPath: a
    missing path is made as directories with the volume root's mode and group; symlinks are
    resolved once and must stay inside the volume; the resolved path is then opened without
    following any symlink (one swapped in meanwhile is refused) and bound by descriptor."""
    vol.check_sub_path(sub_path)
    top = os.path.realpath(base)
    if not os.path.lexists(os.path.join(top, sub_path)):
        root = os.stat(top)
        mounts.make_dirs_beneath(top, sub_path, mode=stat.S_IMODE(root.st_mode),
                                 gid=root.st_gid)
    resolved = os.path.realpath(os.path.join(top, sub_path))
    if resolved != top and not resolved.startswith(top.rstrip("/") + "/"):
        raise vol.SourceError(f'subPath "{sub_path}" resolves outside the volume: {resolved}')
    fd = mounts.open_beneath(top, os.path.relpath(resolved, top))
    try:
        mounts.bind_descriptor(fd, target)
    finally:
        os.close(fd)


def _node_memory() -> int:
    """The node's memory in bytes (what an unset memory limit means to the downward API)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
