"""`nodelet reset`: remove everything one nodelet instance created on this machine.

`reset(settings)` removes, for the instance owning `settings.data_dir`:
1. every container and sandbox, through CRI (which also runs the CNI DEL of each sandbox);
   with the embedded runtime, containerd is adopted or started for this;
2. the embedded containerd itself (stopped), whatever it left running (shims, runc
   containers) when CRI removal could not run, and its state dir outside the data dir
   (`/run/nodelet/<hash>`: unmounted, then deleted);
3. the pod cgroups of every sandbox removed, of every pod the checkpoint knows (a pod
   whose sandbox never came has one: it is made before RunPodSandbox), and, under a cgroup
   root of the instance's own (not the default "/", which another agent may share), every
   other pod cgroup (`pod<uid>` under kubepods and its QoS levels) that no process is in: a
   pod removed while its sandbox was being made may have left one that the running agent's
   container GC had not removed yet;
4. network leftovers: the sandboxes' network namespaces (recorded before removal, plus any
   found attached to the instance's bridge), the bridge's veths and the bridge;
5. the links to its containers' logs (`settings.logs.links_dir`, /var/log/containers: those
   pointing into the data dir's pod logs, never another agent's);
6. mounts under the data dir, deepest first (volume tmpfs, the subPath bind mounts under
   `pods/<uid>/volume-subpaths`, the shared bind of `pods` itself, the runtime's own), then the
   data dir itself (runtime state, CNI config and IPAM allocations, checkpoint: nothing is
   kept).

It is idempotent and works when containerd is dead or was never started. Problems that do not
stop the reset are collected in `ResetReport.errors` rather than raised. A running agent of
the data dir stops it before anything is touched: `instancelock.LockHeld` (its PID).

With an external runtime (`settings.runtime.endpoint`), step 1 removes the sandboxes that carry
the kubelet's pod UID label (all Kubernetes pods of that runtime: it is meant to be dedicated
to this nodelet), the runtime is left running and no host network cleanup is attempted.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from nodelet import settings as settings_
from nodelet.adapters import cgroups, checkpoint, cni, containerd, instancelock, loglinks, mounts
from nodelet.adapters.cri import client as cri_client
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import runtime as rt

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class ResetReport:
    """What reset removed, and what went wrong without stopping it."""

    containers: list[str] = field(default_factory=list)
    sandboxes: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    log_links: list[str] = field(default_factory=list)
    removed_data_dir: bool = False
    errors: list[str] = field(default_factory=list)

    def summary(self, data_dir: Path) -> str:
        """For humans: what was removed, and what could not be."""
        lines = [
            f"reset {data_dir}:",
            f"  removed {len(self.containers)} containers, {len(self.sandboxes)} sandboxes",
            f"  removed {len(self.netns)} network namespaces, "
            f"links: {', '.join(self.links) or '-'}",
            f"  unmounted {len(self.mounts)} mounts, killed {len(self.killed)} processes",
            f"  removed {len(self.log_links)} links to container logs",
            f"  data dir {'removed' if self.removed_data_dir else 'kept'}",
        ]
        lines += [f"  error: {error}" for error in self.errors]
        return "\n".join(lines)


async def reset(settings: settings_.Settings) -> ResetReport:
    """Remove every pod, sandbox, network attachment and runtime state of the instance;
    raises instancelock.LockHeld, having done nothing, while an agent runs on the data dir."""
    report = ResetReport()
    data_dir = settings.data_dir
    cgroup_root = settings.node.cgroup_root
    # Held until the data dir (and the lock file with it) is gone: no agent starts meanwhile.
    lock = instancelock.InstanceLock.acquire(data_dir) if data_dir.is_dir() else None
    try:
        if settings.runtime.endpoint is not None:
            await _reset_external(settings.runtime, cgroup_root, report)
        else:
            await _reset_embedded(data_dir, settings.runtime, cgroup_root, report)
        # A pod that never got a sandbox has its pod cgroup all the same (made before
        # RunPodSandbox): the checkpoint knows the pods the instance runs. A pod removed
        # while its sandbox was made may have left one the checkpoint no longer knows.
        known = set(await asyncio.to_thread(_checkpointed_pods, data_dir))
        for uid in sorted(known):
            await _remove_pod_cgroups(uid, cgroup_root, report)
        if cgroup_root != "/":
            # A root of the instance's own: every pod cgroup under it is the instance's (the
            # default "/" may be shared with another agent, whose pod cgroup is made before
            # its sandbox and so holds no process at first). Idle ones only.
            for uid in sorted(await asyncio.to_thread(cgroups.pod_cgroup_uids, cgroup_root)):
                left = await asyncio.to_thread(cgroups.remove_idle_pod_cgroups, uid,
                                               cgroup_root=cgroup_root)
                report.errors += [f"pod cgroup left behind: {path}" for path in left or ()]
            # An instance with a cgroup root of its own owns kubepods under it too.
            report.errors += [f"QoS cgroup left behind: {path}"
                              for path in cgroups.remove_qos_cgroups(cgroup_root)]
        report.log_links += await asyncio.to_thread(
            loglinks.remove_into, settings.logs.links_dir, data_dir / "logs")
        await _remove_data_dir(data_dir, report)
    finally:
        if lock is not None:
            lock.release()
    return report


async def _reset_external(
    runtime: settings_.RuntimeSettings, cgroup_root: str, report: ResetReport
) -> None:
    assert runtime.endpoint is not None
    try:
        client = await cri_client.RuntimeClient.connect(runtime.endpoint, timeouts=runtime.timeouts)
    except cri_errors.CriError as e:
        report.errors.append(str(e))
        return
    try:
        await _remove_pods(client, set(), cgroup_root, report, labelled_only=True)
    except cri_errors.CriError as e:
        report.errors.append(str(e))
    finally:
        await client.close()


async def _reset_embedded(
    data_dir: Path, runtime: settings_.RuntimeSettings, cgroup_root: str, report: ResetReport
) -> None:
    paths = containerd.ContainerdPaths.of(data_dir)
    netns: set[str] = set()
    if paths.config.exists():
        runner = containerd.EmbeddedContainerd(data_dir=data_dir, settings=runtime)
        try:
            await _remove_pods_embedded(runner, runtime, netns, cgroup_root, report)
        finally:
            await runner.stop()
        report.killed += await containerd.kill_leftovers(data_dir, runtime)
    # Before the data dir: the rootfs overlays mounted here sit on snapshots in it.
    await _remove_tree(paths.state, report)
    await _remove_network(data_dir, netns, report)


async def _remove_pods_embedded(
    runner: containerd.EmbeddedContainerd,
    runtime: settings_.RuntimeSettings,
    netns: set[str],
    cgroup_root: str,
    report: ResetReport,
) -> None:
    """Adopt or start the instance's containerd and remove its pods through CRI."""
    try:
        await runner.start()
        client = await cri_client.RuntimeClient.connect(runner.endpoint, timeouts=runtime.timeouts)
    except (containerd.ContainerdError, cri_errors.CriError) as e:
        report.errors.append(f"cannot reach the embedded containerd, cleaning up by hand: {e}")
        return
    try:
        await runner.wait_ready(client, images=False)
        await _remove_pods(client, netns, cgroup_root, report, labelled_only=False)
    except (containerd.ContainerdError, cri_errors.CriError) as e:
        report.errors.append(str(e))
    finally:
        await client.close()


async def _remove_pods(
    client: cri_client.RuntimeClient,
    netns: set[str],
    cgroup_root: str,
    report: ResetReport,
    *,
    labelled_only: bool,
) -> None:
    """Stop and remove containers, then sandboxes, recording each sandbox's netns first."""
    for c in await client.list_containers():
        if labelled_only and rt.LABEL_POD_UID not in c.labels:
            continue
        await _quietly(client.stop_container(c.id, 0), report)
        await _quietly(client.remove_container(c.id), report)
        report.containers.append(c.id)
    for s in await client.list_pod_sandboxes():
        if labelled_only and rt.LABEL_POD_UID not in s.labels:
            continue
        path = await _quietly(client.sandbox_netns_path(s.id), report)
        if path:
            netns.add(path)
        await _quietly(client.stop_pod_sandbox(s.id), report)
        await _quietly(client.remove_pod_sandbox(s.id), report)
        report.sandboxes.append(s.id)
        uid = s.labels.get(rt.LABEL_POD_UID)
        if uid:
            await _remove_pod_cgroups(uid, cgroup_root, report)


def _checkpointed_pods(data_dir: Path) -> list[str]:
    """The UIDs of the pods whose status the checkpoint keeps (none when it is unreadable)."""
    path = data_dir / checkpoint.FILENAME
    if not path.exists():
        return []
    try:
        store = checkpoint.Checkpoint.open(path)
    except checkpoint.CheckpointError:
        return []
    try:
        return sorted(store.load_pod_statuses())
    except checkpoint.CheckpointError:
        return []
    finally:
        store.close()


async def _remove_pod_cgroups(
    uid: str, cgroup_root: str, report: ResetReport, *, within: float = 5.0
) -> None:
    """The pod-level cgroup runc made under the sandbox's cgroup parent (any QoS class); the
    shims may take a moment to leave it, so this retries briefly before reporting it."""
    deadline = time.monotonic() + within
    while True:
        left = cgroups.remove_pod_cgroups(uid, cgroup_root=cgroup_root)
        if not left or time.monotonic() > deadline:
            report.errors += [f"pod cgroup left behind: {path}" for path in left]
            return
        await asyncio.sleep(0.1)


async def _quietly(call: Awaitable[T], report: ResetReport) -> T | None:
    """Await a CRI call; an object already gone is fine, other failures are recorded."""
    try:
        return await call
    except cri_errors.NotFound:
        return None
    except cri_errors.CriError as e:
        report.errors.append(str(e))
        return None


async def _remove_network(data_dir: Path, recorded: set[str], report: ResetReport) -> None:
    """Delete the instance's netns, veths and bridge, whatever CNI DEL did or did not do."""
    names = {Path(p).name for p in recorded} | set(await cni.instance_netns(data_dir))
    for name in sorted(names):
        try:
            if await cni.delete_netns(name):
                report.netns.append(name)
        except OSError as e:
            report.errors.append(str(e))
    links = [name for _, name in await cni.bridge_ports(data_dir)] + [cni.bridge_name(data_dir)]
    for link in links:
        try:
            if await cni.delete_link(link):
                report.links.append(link)
        except OSError as e:
            report.errors.append(str(e))


async def _remove_data_dir(data_dir: Path, report: ResetReport) -> None:
    report.removed_data_dir = await _remove_tree(data_dir, report)


async def _remove_tree(top: Path, report: ResetReport) -> bool:
    """Unmount what is left under `top`, then delete it (never `/` or a top dir); False when
    it was not there or could not be deleted (said in the report)."""
    report.mounts += [str(p) for p in await mounts.unmount_all(top)]
    left = mounts.mounts_under(top)
    if left:
        report.errors.append(f"still mounted, {top} kept: {', '.join(map(str, left))}")
        return False
    try:
        return await asyncio.to_thread(_delete_tree, top)
    except OSError as e:
        report.errors.append(f"cannot delete {top}: {e}")
        return False


def _delete_tree(top: Path) -> bool:
    """Delete `top`; False when there was none. Refuses `/` and top-level dirs."""
    if len(top.resolve().parts) < 3:
        raise OSError(f"refusing to delete {top}: too close to /")
    if not top.exists():
        return False
    shutil.rmtree(top)
    return True
