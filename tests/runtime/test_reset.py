"""`reset` removes everything an instance created, whether containerd is alive or not."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import Instance, InstanceFactory, leftovers, sandbox_config
from nodelet import settings as settings_
from nodelet.adapters import cgroups, checkpoint, cni, mounts
from nodelet.model.core import pods, qoscgroups, specs
from nodelet.model.core import runtime as rt
from nodelet.model.core import status as st
from nodelet.services.nodehealth import resetting
from nodelet.services.podwork import volumes

pytestmark = pytest.mark.runtime


def _exists(path: str) -> bool:
    return Path(path).exists()


async def _run_pod(instance: Instance, name: str) -> rt.SandboxID:
    """A sandbox with a running busybox container, its netns recorded."""
    config = sandbox_config(instance, name)
    sandbox_id = await instance.client.run_pod_sandbox(config)
    instance.netns_seen.add(await instance.client.sandbox_netns_path(sandbox_id))
    container = rt.ContainerConfig(
        name="sleep", attempt=0, image=settings_.BUSYBOX_IMAGE, log_path="sleep.log",
        command=("sleep", "3600"),
    )
    container_id = await instance.client.create_container(sandbox_id, container, config)
    await instance.client.start_container(container_id)
    return sandbox_id


async def _assert_clean(instance: Instance, report: resetting.ResetReport) -> None:
    left = await leftovers(instance)
    assert not any(left.values()), f"left behind: {left}; report: {report}"
    assert mounts.mounts_under(instance.data_dir) == []
    pid = instance.containerd.pid
    assert pid is None or not _exists(f"/proc/{pid}")


async def test_reset_leaves_nothing(instances: InstanceFactory) -> None:
    instance = await instances()
    await _run_pod(instance, "one")
    await _run_pod(instance, "two")
    state = instance.containerd.paths.state
    assert mounts.mounts_under(state)  # rootfs and shm mounts exist, outside the data dir
    await instance.client.close()
    await instance.containerd.detach()

    report = await resetting.reset(instance.settings)

    assert not report.errors, report.errors
    assert len(report.sandboxes) == 2 and len(report.containers) == 2
    assert report.removed_data_dir and not state.exists()
    await _assert_clean(instance, report)


async def test_reset_after_containerd_died(instances: InstanceFactory) -> None:
    instance = await instances()
    await _run_pod(instance, "orphan")
    await instance.client.close()
    await instance.containerd.detach()
    assert instance.containerd.pid is not None
    os.kill(instance.containerd.pid, signal.SIGKILL)

    report = await resetting.reset(instance.settings)

    assert not report.errors, report.errors
    assert report.sandboxes  # reset started containerd again and removed the pod via CRI
    await _assert_clean(instance, report)


async def test_reset_is_idempotent_and_needs_no_runtime() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="nl-", dir="/tmp"))
    settings = settings_.Settings(data_dir=data_dir)
    first = await resetting.reset(settings)
    second = await resetting.reset(settings)
    assert first.errors == second.errors == []
    assert first.removed_data_dir and not second.removed_data_dir
    assert not _exists(str(data_dir))
    assert not await cni.bridge_exists(data_dir)


async def test_reset_unmounts_volumes_sub_path_binds_and_the_shared_pods_dir() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="nl-", dir="/tmp"))
    manager = volumes.VolumeManager(root=data_dir / "pods", node_name="node-1")
    await manager.share_root()
    app = pods.Container(name="app", image="busybox", volume_mounts=(
        pods.VolumeMount("mem", "/m", sub_path="a/b"), pods.VolumeMount("disk", "/d", sub_path="c"),
    ))
    pod = pods.Pod(uid=pods.PodUID("uid-1"), name="web", namespace="default", spec=pods.PodSpec(
        containers=(app,), volumes=(pods.Volume("mem", "emptyDir", {"medium": "Memory"}),
                                    pods.Volume("disk", "emptyDir", {}))))
    prepared = await manager.prepare(pod)
    volumes.expand_sub_paths(app, prepared["app"], {}, pod_dir=data_dir / "pods" / "uid-1")
    # The pods dir, the tmpfs, two subPath binds.
    assert len(mounts.mounts_under(data_dir)) == 4

    report = await resetting.reset(settings_.Settings(data_dir=data_dir))

    assert not report.errors, report.errors
    assert len(report.mounts) == 4 and report.removed_data_dir
    assert mounts.mounts_under(data_dir) == [] and not data_dir.exists()


async def test_reset_removes_pod_and_qos_cgroups_under_the_instance_cgroup_root(
        instances: InstanceFactory) -> None:
    instance = await instances()
    root = f"/nodelet-reset-{instance.data_dir.name}"
    uid = "uid-cg"
    parent = f"{qoscgroups.qos_parent('BestEffort', root)}/pod{uid}"
    config = sandbox_config(instance, "cg", uid=uid, cgroup_parent=parent,
                            labels={rt.LABEL_POD_UID: uid, rt.LABEL_POD_NAME: "cg"})
    instance.netns_seen.add(await instance.client.sandbox_netns_path(
        await instance.client.run_pod_sandbox(config)))
    made = [h / parent.lstrip("/") for h in _hierarchies() if (h / parent.lstrip("/")).is_dir()]
    assert made, f"runc made no cgroup {parent}"
    await instance.client.close()
    await instance.containerd.detach()

    settings = replace(instance.settings, node=replace(instance.settings.node, cgroup_root=root))
    report = await resetting.reset(settings)

    assert not report.errors, report.errors
    assert not [path for path in made if path.exists()]
    kubepods = qoscgroups.kubepods(root).lstrip("/")
    assert not [h for h in _hierarchies() if (h / kubepods).exists()]
    for hierarchy in _hierarchies():  # the root itself was the test's to make and remove
        with contextlib.suppress(OSError):
            (hierarchy / root.lstrip("/")).rmdir()


def _hierarchies() -> list[Path]:
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return [base]
    return [p for p in base.iterdir() if p.is_dir() and not p.is_symlink()]


async def test_reset_removes_the_pod_cgroup_of_a_pod_that_never_got_a_sandbox(
        tmp_path: Path) -> None:
    """The pod cgroup is made before RunPodSandbox: a pod whose sandbox never came (a missing
    runtime handler) has one, and only the checkpoint knows the pod."""
    data_dir, uid = tmp_path / "data", f"uid-never-{os.getpid()}"
    data_dir.mkdir()
    root = f"/nodelet-reset-{tmp_path.name}"
    store = checkpoint.Checkpoint.open(data_dir / checkpoint.FILENAME)
    store.save_pod_status(pods.PodUID(uid), "never", "default", st.PodStatus(phase="Pending"))
    store.close()
    parent = f"{qoscgroups.qos_parent('BestEffort', root)}/pod{uid}"
    cgroups.apply_pod_cgroup(parent, specs.PodCgroup(cpu_shares=2))
    made = [h / parent.lstrip("/") for h in _hierarchies() if (h / parent.lstrip("/")).is_dir()]
    assert made, f"no cgroup {parent} was made"

    report = await resetting.reset(settings_.Settings(
        data_dir=data_dir, node=settings_.NodeSettings(cgroup_root=root)))

    assert not report.errors, report.errors
    assert not [path for path in made if path.exists()]
    for hierarchy in _hierarchies():
        with contextlib.suppress(OSError):
            (hierarchy / root.lstrip("/")).rmdir()
