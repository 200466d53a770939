"""fsGroup on the volumes nodelet writes, on the real file system: the kubelet's
SetVolumeOwnership (group, group bits, setgid directories), also for files written later."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nodelet.model.core import pods
from nodelet.model.core import volumes as vol
from nodelet.model.parsing import manifests
from nodelet.services.podwork import volumes

FS_GROUP = 2345


def pod_with(volume: pods.Volume, *, fs_group: int | None = FS_GROUP) -> pods.Pod:
    spec = pods.PodSpec(
        containers=(pods.Container(name="app", image="busybox"),), volumes=(volume,),
        security_context=pods.PodSecurityContext(fs_group=fs_group))
    return pods.Pod(uid=pods.PodUID("uid-fs"), name="web", namespace="default", spec=spec)


def owned(root: Path) -> dict[str, tuple[int, int]]:
    """Relative path → (gid, permission bits) of everything under root, links excluded."""
    out = {}
    for top, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(top) / name
            info = path.lstat()
            if not stat.S_ISLNK(info.st_mode):
                out[path.relative_to(root).as_posix()] = (info.st_gid, info.st_mode & 0o7777)
    return out


@pytest.mark.parametrize(("mode", "expected"), [
    (0o644, 0o664), (0o400, 0o660), (0o755, 0o775),
])
def test_owned_mode_of_writable_files(mode: int, expected: int) -> None:
    assert vol.owned_mode(mode, is_dir=False, read_only=False) == expected


def test_owned_mode_of_read_only_volumes_and_directories() -> None:
    assert vol.owned_mode(0o400, is_dir=False, read_only=True) == 0o440
    assert vol.owned_mode(0o755, is_dir=True, read_only=True) == 0o2755
    assert vol.owned_mode(0o777, is_dir=True, read_only=False) == 0o2777


async def test_config_map_files_belong_to_the_fs_group_also_after_an_update(
    tmp_path: Path
) -> None:
    objects = {("ConfigMap", "default", "cfg"): manifests.ConfigMap(
        "cfg", "default", data={"a": "1"})}
    sources = volumes.ApiSources(lookup=lambda kind, ns, name: objects.get((kind, ns, name)))
    manager = volumes.VolumeManager(root=tmp_path / "pods", node_name="n", sources=sources)
    pod = pod_with(pods.Volume("config", "configMap", {"name": "cfg", "defaultMode": 0o400}))
    await manager.prepare(pod)
    directory = tmp_path / "pods" / "uid-fs" / "volumes" / "kubernetes.io~configmap" / "config"
    first = owned(directory)
    assert first and all(gid == FS_GROUP for gid, _ in first.values())
    assert {bits for path, (_, bits) in first.items() if path.endswith("/a")} == {0o440}
    objects[("ConfigMap", "default", "cfg")] = manifests.ConfigMap(
        "cfg", "default", data={"a": "2", "b": "3"})
    await manager.prepare(pod)
    second = owned(directory)
    assert set(second) != set(first)  # a new timestamped directory was written
    assert all(gid == FS_GROUP for gid, _ in second.values()), second
    assert (directory / "b").read_text() == "3"


async def test_empty_dir_is_the_groups_and_setgid(tmp_path: Path) -> None:
    manager = volumes.VolumeManager(root=tmp_path / "pods", node_name="n")
    await manager.prepare(pod_with(pods.Volume("scratch", "emptyDir", {})))
    directory = tmp_path / "pods" / "uid-fs" / "volumes" / "kubernetes.io~empty-dir" / "scratch"
    info = directory.stat()
    assert (info.st_gid, info.st_mode & 0o7777) == (FS_GROUP, 0o2777)


async def test_without_fs_group_nothing_changes(tmp_path: Path) -> None:
    manager = volumes.VolumeManager(root=tmp_path / "pods", node_name="n")
    await manager.prepare(pod_with(pods.Volume("scratch", "emptyDir", {}), fs_group=None))
    directory = tmp_path / "pods" / "uid-fs" / "volumes" / "kubernetes.io~empty-dir" / "scratch"
    assert (directory.stat().st_gid, directory.stat().st_mode & 0o7777) == (0, 0o777)
