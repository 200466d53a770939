"""CSI volumes of a pod, as the kubelet's CSI volume plugin sets them up and tears them down,
through the registered driver's Node service (`services.plugins.csidrivers`).

Set up (`set_up`, on every sync until done; each step skipped once done):
1. the driver must be registered (else the kubelet's "driver name X not found in the list of
   registered CSI drivers", and the pod waits until it registers);
2. with `CSIDriver.attachRequired` (the default when there is no CSIDriver), the
   VolumeAttachment `csi-<sha256>` must be attached (the attach/detach controller and the
   driver's external-attacher do that); its attachment metadata is the publish context;
3. with STAGE_UNSTAGE_VOLUME, NodeStageVolume once per volume on the node, at
   `<data>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount`;
4. NodePublishVolume per pod at `<pod>/volumes/kubernetes.io~csi/<pv>/mount` (the driver
   makes the directory; its parent is ours), with the pod's facts when `podInfoOnMount`;
   then the fsGroup, when the CSIDriver's fsGroupPolicy says the node applies it.
A `vol_data.json` beside each (the kubelet's) records the driver and the volume handle, so
that teardown needs nothing but the disk: after a restart too.

Tear down (`tear_down`, when the pod's volumes are cleaned up): NodeUnpublishVolume of each
of the pod's CSI volumes, then NodeUnstageVolume of those no other pod has published.

Exceptions: `Failure` (an operation failed; `.operation` is the kubelet's prefix of the
FailedMount message, `.message` its error).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from nodelet.adapters import mounts
from nodelet.adapters.csi import client as csi_client
from nodelet.helpers import errors
from nodelet.model.core import apijson, claims, csi, pods, summary
from nodelet.services.plugins import csidrivers

log = logging.getLogger(__name__)


class CsiApi(Protocol):
    """The API objects CSI volumes read. Each raises `helpers.errors.MessageError`."""

    async def csi_driver(self, name: str) -> apijson.JSON | None:
        """The CSIDriver `name`; None when there is none."""

    async def volume_attachment(self, name: str) -> apijson.JSON | None:
        """The VolumeAttachment `name`; None when there is none (yet)."""

    async def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """The data of the Secret (a PV's stage or publish secret), decoded."""


class Failure(Exception):
    """A CSI operation that failed: the FailedMount message is `<operation> for volume
    "<pv>" : <message>`."""

    def __init__(self, operation: str, message: str, *, volume: str = "") -> None:
        super().__init__(f"{operation}: {message}")
        self.operation = operation
        self.message = message
        self.volume = volume  # the PV's or inline volume's name, where the caller lacks it


@dataclass(frozen=True)
class _Volume:
    """A volume to publish: its name (the PV's, or the inline volume's) and source."""

    name: str
    source: csi.CsiSource
    read_only: bool


@dataclass(frozen=True)
class _Record:
    """A pod's CSI volume as its vol_data.json records it."""

    target: Path
    driver: str
    handle: str


# gRPC codes after which the driver may still finish the operation (the kubelet's
# isFinalError): the publication stays recorded as uncertain, to be torn down if not retried.
_NOT_FINAL = frozenset({"CANCELLED", "DEADLINE_EXCEEDED", "UNAVAILABLE", "RESOURCE_EXHAUSTED",
                        "ABORTED"})
# Beside a pod's vol_data.json once NodePublishVolume succeeded (vol_data.json is written
# before the call, as the kubelet's, so that an interrupted publish is torn down too).
PUBLISHED_MARK = ".published"
# Seconds a NodeGetVolumeStats may take: a stats scrape must not wait for a hung driver.
STATS_TIMEOUT = 10.0


class CsiVolumes:
    """The CSI volumes of this node's pods. Work on one volume (a driver's handle) is done
    one operation at a time (the kubelet's nestedpendingoperations): staging and a pod's
    record against the check that no pod uses it before unstaging."""

    def __init__(self, *, drivers: csidrivers.CsiDrivers, api: CsiApi, plugins_dir: Path,
                 pods_dir: Path, node_name: str) -> None:
        self._drivers = drivers
        self._api = api
        self._plugins = plugins_dir
        self._pods = pods_dir
        self._node = node_name
        # Each driver's CSIDriver as last read (for requiresRepublish).
        self._policies: dict[str, csi.DriverPolicy] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def target(self, uid: pods.PodUID, name: str) -> Path:
        return self._pods / uid / "volumes" / csi.POD_PLUGIN_DIR / name / "mount"

    def _lock(self, source: csi.CsiSource) -> asyncio.Lock:
        return self._locks.setdefault((source.driver, source.volume_handle), asyncio.Lock())

    async def set_up(self, pod: pods.Pod, pv: claims.PersistentVolume) -> tuple[Path, bool]:
        """The pod's published volume of a CSI PV (published now if it was not), and whether
        the node is to give it to the pod's fsGroup now (it was just published, and the
        CSIDriver's fsGroupPolicy says so); raises Failure."""
        assert pv.csi is not None
        source = pv.csi
        target = self.target(pod.uid, pv.name)
        published = await asyncio.to_thread(_published, target)
        if published and not await self._republishes(source, "Persistent"):
            return target, False
        driver, node = self._driver(source.driver, "MountVolume.MountDevice failed")
        policy = await self._policy(source, "Persistent")
        context = await self._publish_context(source, policy)
        capability = self._capability(driver, source, pod, policy)
        read_only = pv.read_only or source.read_only
        async with self._lock(source):
            staging = ""
            if "STAGE_UNSTAGE_VOLUME" in driver.capabilities:
                staging = await self._stage(node, source, capability, context)
            secrets = await self._secrets("NodePublishSecretRef", source.publish_secret,
                                          "MountVolume.SetUp failed")
            await self._publish(pod, _Volume(pv.name, source, read_only), node, target,
                                staging=staging, capability=capability, context=context,
                                policy=policy, secrets=secrets, again=published)
        return target, not published and _node_owns(policy, source, capability, read_only)

    async def set_up_inline(self, pod: pods.Pod, name: str, source: csi.CsiSource,
                            secrets: Mapping[str, str]) -> tuple[Path, bool]:
        """An inline (ephemeral) CSI volume of the pod: published once, without attach or
        stage, if the CSIDriver lists the Ephemeral lifecycle mode; as `set_up`."""
        target = self.target(pod.uid, name)
        published = await asyncio.to_thread(_published, target)
        if published and not await self._republishes(source, "Ephemeral"):
            return target, False
        driver, node = self._driver(source.driver, "MountVolume.SetUp failed")
        policy = await self._policy(source, "Ephemeral")
        capability = self._capability(driver, source, pod, policy)
        async with self._lock(source):
            await self._publish(pod, _Volume(name, source, source.read_only), node, target,
                                staging="", capability=capability, context={}, policy=policy,
                                secrets=secrets, again=published)
        return target, not published and _node_owns(policy, source, capability,
                                                    source.read_only)

    async def _republishes(self, source: csi.CsiSource, mode: str) -> bool:
        """Whether the driver's CSIDriver (as last read; read once after a restart) asks for
        requiresRepublish: its published volumes are published again at every sync
        (NodePublishVolume is idempotent), as the kubelet remounts them."""
        policy = self._policies.get(source.driver)
        if policy is None:
            policy = await self._policy(source, mode)
        return policy.requires_republish

    async def _policy(self, source: csi.CsiSource, mode: str) -> csi.DriverPolicy:
        policy = csi.driver_policy(await self._read(self._api.csi_driver(source.driver)))
        self._policies[source.driver] = policy
        error = csi.lifecycle_error(policy, source.driver, mode)
        if error:
            raise Failure("MountVolume.SetUp failed", "kubernetes.io/csi: mounter.SetupAt "
                          f"failed to check volume lifecycle mode: {error}")
        if policy.token_requests:  # refused rather than published without the tokens
            raise Failure("MountVolume.SetUp failed", f"CSIDriver {source.driver} asks for "
                          "service account tokens (tokenRequests), which nodelet does not "
                          "pass to CSI drivers yet")
        return policy

    @staticmethod
    def _capability(driver: csidrivers.Driver, source: csi.CsiSource, pod: pods.Pod,
                    policy: csi.DriverPolicy) -> csi_client.Capability:
        """The volume capability; with VOLUME_MOUNT_GROUP the driver applies the fsGroup
        itself (the kubelet hands it over, and changes no ownership then)."""
        fs_group = pod.spec.security_context.fs_group
        delegated = fs_group is not None and policy.fs_group_policy != "None" and \
            "VOLUME_MOUNT_GROUP" in driver.capabilities
        return csi_client.Capability(
            fs_type=source.fs_type, mount_flags=source.mount_options,
            access_mode=csi.access_mode(source.access_mode, single_node_multi_writer=(
                "SINGLE_NODE_MULTI_WRITER" in driver.capabilities)),
            volume_mount_group=str(fs_group) if delegated else "")

    def _driver(self, name: str, operation: str) -> tuple[csidrivers.Driver,
                                                          csi_client.NodeClient]:
        try:
            return self._drivers.get(name)
        except csidrivers.NotRegistered as exc:
            raise Failure(operation, f"kubernetes.io/csi: {exc.message}") from exc

    async def _read(self, call: Awaitable[apijson.JSON | None]) -> apijson.JSON | None:
        try:
            return await call
        except errors.MessageError as exc:
            raise Failure("MountVolume.SetUp failed", exc.message) from exc

    async def _secrets(self, kind: str, ref: tuple[str, str] | None,
                       operation: str) -> dict[str, str]:
        """The data of a PV's secret reference ({} without one), in the kubelet's words when
        it cannot be read."""
        if ref is None:
            return {}
        try:
            return await self._api.secret_data(*ref)
        except errors.MessageError as exc:
            raise Failure(operation, f"fetching {kind} {ref[0]}/{ref[1]} failed: "
                          f"{exc.message}") from exc

    async def _publish_context(self, source: csi.CsiSource,
                               policy: csi.DriverPolicy) -> dict[str, str]:
        """The attachment's metadata once it is attached (WaitForAttach)."""
        if not policy.attach_required:
            return {}
        name = csi.attachment_name(source.volume_handle, source.driver, self._node)
        attachment = await self._read(self._api.volume_attachment(name))
        status = apijson.obj((attachment or {}).get("status"))
        if attachment is None or status.get("attached") is not True:
            error = apijson.obj(status.get("attachError")).get("message")
            raise Failure("MountVolume.WaitForAttach failed",
                          f"volume {source.volume_handle} has GET error for volume attachment "
                          f"{name}: " + (str(error) if error else "not attached yet"))
        return {str(k): str(v) for k, v in apijson.obj(status.get("attachmentMetadata")).items()}

    async def _stage(self, node: csi_client.NodeClient, source: csi.CsiSource,
                     capability: csi_client.Capability, context: dict[str, str]) -> str:
        """NodeStageVolume once per volume on the node (the caller holds its lock); a
        staging record (vol_data.json) is written once it succeeded."""
        staging = self._staging(source)
        data = staging.parent / csi.DATA_FILE
        if await asyncio.to_thread(data.exists):
            return str(staging)
        secrets = await self._secrets("NodeStageSecretRef", source.stage_secret,
                                      "MountVolume.MountDevice failed")
        await asyncio.to_thread(staging.mkdir, mode=0o750, parents=True, exist_ok=True)
        try:
            await node.stage(source.volume_handle, staging_path=str(staging),
                             capability=capability, publish_context=context,
                             volume_context=dict(source.volume_attributes), secrets=secrets)
        except csi_client.CsiError as exc:
            raise Failure("MountVolume.MountDevice failed", exc.message) from exc
        await asyncio.to_thread(data.write_text, csi.staging_data(source))
        log.info("staged CSI volume %s of %s at %s", source.volume_handle, source.driver,
                 staging)
        return str(staging)

    def _staging(self, source: csi.CsiSource) -> Path:
        return Path(str(csi.staging_path(PurePosixPath(str(self._plugins)), source)))

    async def _publish(self, pod: pods.Pod, volume: _Volume, node: csi_client.NodeClient,
                       target: Path, *, staging: str, capability: csi_client.Capability,
                       context: dict[str, str], policy: csi.DriverPolicy,
                       secrets: Mapping[str, str], again: bool = False) -> None:
        """NodePublishVolume, recorded before (vol_data.json: an interrupted publish is torn
        down too) and marked published after. A final error removes the record (nothing
        is published); after one the driver may still finish, the record stays, so that
        teardown unpublishes it. `again`: a republish, whose failure leaves the
        publication as it is."""
        source = volume.source
        await asyncio.to_thread(target.parent.mkdir, mode=0o750, parents=True, exist_ok=True)
        data = target.parent / csi.DATA_FILE
        await asyncio.to_thread(data.write_text, csi.pod_data(volume.name, source, self._node))
        try:
            await node.publish(
                source.volume_handle, staging_path=staging, target_path=str(target),
                capability=capability, read_only=volume.read_only, publish_context=context,
                volume_context=csi.volume_context(source, pod, policy), secrets=secrets)
        except csi_client.CsiError as exc:
            if not again and exc.code not in _NOT_FINAL:
                await asyncio.to_thread(_remove_unmounted, target.parent)
            raise Failure("MountVolume.SetUp failed", exc.message) from exc
        await asyncio.to_thread((target.parent / PUBLISHED_MARK).touch)
        if not again:
            log.info("published CSI volume %s for pod %s at %s", source.volume_handle,
                     pod.full_name, target)

    def expands(self, pv: claims.PersistentVolume) -> bool:
        """Whether the PV's driver, registered, expands volumes on the node (EXPAND_VOLUME)."""
        try:
            driver, _ = self._drivers.get(pv.csi.driver if pv.csi else "")
        except csidrivers.NotRegistered:
            return False
        return "EXPAND_VOLUME" in driver.capabilities

    async def expand(self, pod: pods.Pod, pv: claims.PersistentVolume, size: int) -> None:
        """NodeExpandVolume of the pod's published volume to `size` bytes (the kubelet's
        in-use expansion); raises Failure."""
        assert pv.csi is not None
        driver, node = self._driver(pv.csi.driver, "MountVolume.NodeExpandVolume failed")
        staging = self._staging(pv.csi)
        staged = "STAGE_UNSTAGE_VOLUME" in driver.capabilities
        policy = self._policies.get(pv.csi.driver) or csi.DriverPolicy()
        try:
            await node.expand(pv.csi.volume_handle, volume_path=str(self.target(pod.uid, pv.name)),
                              staging_path=str(staging) if staged else "", required_bytes=size,
                              capability=self._capability(driver, pv.csi, pod, policy))
        except csi_client.CsiError as exc:
            raise Failure("MountVolume.NodeExpandVolume failed", exc.message,
                          volume=pv.name) from exc
        log.info("expanded CSI volume %s of pod %s to %d bytes", pv.csi.volume_handle,
                 pod.full_name, size)

    async def stats(self, uid: pods.PodUID, pv: claims.PersistentVolume) -> summary.Fs | None:
        """NodeGetVolumeStats of a published volume whose driver offers it; None otherwise
        (not published, no such capability, or the driver's error, which is logged)."""
        assert pv.csi is not None
        target = self.target(uid, pv.name)
        try:
            driver, node = self._drivers.get(pv.csi.driver)
        except csidrivers.NotRegistered:
            return None
        if "GET_VOLUME_STATS" not in driver.capabilities or \
                not await asyncio.to_thread(_published, target):
            return None
        try:
            usage = await node.stats(pv.csi.volume_handle, volume_path=str(target),
                                     limit=STATS_TIMEOUT)
        except csi_client.CsiError as exc:
            log.debug("no stats for CSI volume %s: %s", pv.csi.volume_handle, exc.message)
            return None
        used, total, available = usage.get("BYTES", (0, 0, 0))
        inodes_used, inodes, inodes_free = usage.get("INODES", (0, 0, 0))
        return summary.Fs(time_ns=time.time_ns(), used=used, capacity=total,
                          available=available, inodes=inodes or None,
                          inodes_used=inodes_used if inodes else None,
                          inodes_free=inodes_free if inodes else None)

    def in_use(self) -> list[str]:
        """The unique names (`kubernetes.io/csi/<driver>^<handle>`) of the volumes the
        node's pods have recorded on disk: still in use until torn down, also after a
        restart."""
        return sorted({f"{csi.PLUGIN_NAME}/{r.driver}^{r.handle}" for r in self._records("*")})

    # -- tear down ------------------------------------------------------------------------

    async def tear_down(self, uid: pods.PodUID) -> None:
        """Unpublish every CSI volume of the pod (idempotent, as the spec requires), unstage
        those no other pod uses, then forget the pod's records; raises Failure (the pod's
        cleanup is tried again, records kept) when a driver cannot do it."""
        records = await asyncio.to_thread(self._records, uid)
        for record in records:
            name = record.target.parent.name
            try:
                _, node = self._driver(record.driver, "UnmountVolume.TearDown failed")
                await node.unpublish(record.handle, target_path=str(record.target))
            except Failure as exc:
                raise Failure(exc.operation, exc.message, volume=name) from exc
            except csi_client.CsiError as exc:
                raise Failure("UnmountVolume.TearDown failed", exc.message, volume=name) \
                    from exc
            await asyncio.to_thread((record.target.parent / PUBLISHED_MARK).unlink, True)
        for record in records:
            await self._unstage_unused(uid, record)
        for record in records:
            await asyncio.to_thread(_remove_unmounted, record.target.parent)

    def _records(self, uid: str) -> list[_Record]:
        """The pods' CSI volume records (`uid` "*": every pod's)."""
        out = []
        for data in sorted(self._pods.glob(f"{uid}/volumes/{csi.POD_PLUGIN_DIR}/*/"
                                           f"{csi.DATA_FILE}")):
            with contextlib.suppress(OSError):
                driver, handle = csi.read_data(data.read_text())
                if driver and handle:
                    out.append(_Record(data.parent / "mount", driver, handle))
        return out

    async def _unstage_unused(self, uid: pods.PodUID, record: _Record) -> None:
        source = csi.CsiSource(driver=record.driver, volume_handle=record.handle)
        staging = self._staging(source)
        async with self._lock(source):
            data = staging.parent / csi.DATA_FILE
            if not await asyncio.to_thread(data.exists):
                return
            others = await asyncio.to_thread(self._records, "*")
            if any((r.driver, r.handle) == (record.driver, record.handle)
                   and uid not in r.target.parts for r in others):
                return
            _, node = self._driver(record.driver, "UnmountDevice failed")
            try:
                await node.unstage(record.handle, staging_path=str(staging))
            except csi_client.CsiError as exc:
                raise Failure("UnmountDevice failed", exc.message,
                              volume=record.target.parent.name) from exc
            await asyncio.to_thread(_remove_unmounted, staging.parent)
        log.info("unstaged CSI volume %s of %s", record.handle, record.driver)


def _published(target: Path) -> bool:
    return (target.parent / PUBLISHED_MARK).exists()


def _node_owns(policy: csi.DriverPolicy, source: csi.CsiSource,
               capability: csi_client.Capability, read_only: bool) -> bool:
    """Whether the node changes the volume's ownership (the driver does not)."""
    return not capability.volume_mount_group and csi.applies_fs_group(
        policy, source, read_only=read_only)


def _remove_unmounted(directory: Path) -> None:
    """Remove a volume's directory unless something is still mounted in it (its data would
    go with it)."""
    if mounts.mount_points(directory):
        raise Failure("UnmountVolume.TearDown failed",
                      f"{directory} is still mounted after the driver's unpublish")
    shutil.rmtree(directory, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(directory.parent)  # the plugin directory, when it is empty
