"""VolumeManager on the real file system: directories, tmpfs mounts, hostPath checks, the atomic
`..data` swap, subPath resolution and cleanup (runs as root for the tmpfs mounts)."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import socket
import stat
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from conftest import Instance, sandbox_config
from nodelet import settings as settings_
from nodelet.adapters import commands, mounts
from nodelet.model.core import envvars, pods, runtime, tokens
from nodelet.model.core import volumes as vol
from nodelet.model.parsing import manifests
from nodelet.services.podwork import volumes


async def _token(request: tokens.TokenRequest) -> tokens.Token:
    """A stand-in for the TokenRequest API (tests/cluster cover the real one)."""
    return tokens.Token(f"token-of-{request.pod_name}", datetime(2100, 1, 1, tzinfo=UTC),
                        request.expiration_seconds)


@dataclass
class Env:
    root: Path
    manager: volumes.VolumeManager
    objects: dict[tuple[str, str, str], vol.ConfigObject] = field(default_factory=dict)
    refresh_errors: list[str] = field(default_factory=list)

    def put(self, obj: vol.ConfigObject) -> None:
        kind = "Secret" if isinstance(obj, manifests.Secret) else "ConfigMap"
        self.objects[(kind, obj.namespace, obj.name)] = obj


@pytest_asyncio.fixture(loop_scope="session")
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    if os.geteuid() != 0:
        pytest.fail("volume tests mount tmpfs: run as root")
    objects: dict[tuple[str, str, str], vol.ConfigObject] = {}
    errors: list[str] = []
    manager = volumes.VolumeManager(
        root=tmp_path / "pods",
        node_name="node-1",
        sources=volumes.ApiSources(lookup=lambda kind, ns, name: objects.get((kind, ns, name)),
                                   tokens=_token),
        on_refresh_error=lambda pod, exc: errors.append(exc.event_message),
    )
    env = Env(tmp_path / "pods", manager, objects, errors)
    try:
        yield env
    finally:
        for uid_dir in list(env.root.iterdir()) if env.root.exists() else ():
            await manager.cleanup(pods.PodUID(uid_dir.name))
        assert not mounts.mount_points(tmp_path), "tmpfs left mounted"


def make_pod(
    *volume_specs: tuple[str, str, dict[str, Any]],
    mounts_: tuple[pods.VolumeMount, ...] = (),
    init_mounts: tuple[pods.VolumeMount, ...] | None = None,
    uid: str = "uid-1",
    labels: dict[str, str] | None = None,
) -> pods.Pod:
    app = pods.Container(name="app", image="busybox", volume_mounts=mounts_)
    inits = () if init_mounts is None else (
        pods.Container(name="init", image="busybox", volume_mounts=init_mounts),
    )
    spec = pods.PodSpec(
        containers=(app,), init_containers=inits,
        volumes=tuple(pods.Volume(n, t, s) for n, t, s in volume_specs),
    )
    return pods.Pod(uid=pods.PodUID(uid), name="web", namespace="default", spec=spec,
                    labels=labels or {})


def mount(name: str, path: str, **kw: Any) -> pods.VolumeMount:
    return pods.VolumeMount(name=name, mount_path=path, **kw)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def tmpfs_at(path: Path) -> list[str]:
    return [fs for point, fs in mounts.mount_points(path) if point == path.resolve()]


def expand(
    env: Env, container: pods.Container, prepared: tuple[runtime.Mount, ...],
    variables: dict[str, str] | None = None, uid: str = "uid-1",
) -> tuple[runtime.Mount, ...]:
    """What the container runner does when it creates the container."""
    return volumes.expand_sub_paths(container, prepared, variables or {},
                                    pod_dir=env.root / uid)


def mount_count(path: Path) -> int:
    """How many mounts sit on `path` (stacked ones too)."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return sum(1 for line in lines if line.split()[4] == str(path.resolve()))


async def expect_error(env: Env, pod: pods.Pod, volume: str, message: str) -> None:
    with pytest.raises(volumes.VolumeError) as caught:
        await env.manager.prepare(pod)
    assert (caught.value.volume, caught.value.message) == (volume, message)


# -- emptyDir ------------------------------------------------------------------------------


async def test_empty_dir_on_disk(env: Env) -> None:
    pod = make_pod(("cache", "emptyDir", {}), mounts_=(mount("cache", "/cache"),),
                   init_mounts=(mount("cache", "/work", read_only=True),))
    result = await env.manager.prepare(pod)
    path = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    assert result == {
        "init": (runtime.Mount("/work", str(path), readonly=True, volume="cache"),),
        "app": (runtime.Mount("/cache", str(path), readonly=False, volume="cache"),),
    }
    assert path.is_dir() and mode_of(path) == 0o777 and not tmpfs_at(path)
    (path / "kept").write_text("data")
    assert await env.manager.prepare(pod) == result  # idempotent, contents survive
    assert (path / "kept").read_text() == "data"


async def test_memory_empty_dir_is_a_sized_tmpfs(env: Env) -> None:
    pod = make_pod(("shm", "emptyDir", {"medium": "Memory", "sizeLimit": "8Mi"}),
                   ("big", "emptyDir", {"medium": "Memory"}))
    await env.manager.prepare(pod)
    await env.manager.prepare(pod)  # no second mount on top
    base = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir"
    assert tmpfs_at(base / "shm") == ["tmpfs"] and tmpfs_at(base / "big") == ["tmpfs"]
    assert os.statvfs(base / "shm").f_blocks * os.statvfs(base / "shm").f_frsize == 8 * 2**20
    half_ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    big = os.statvfs(base / "big")
    assert abs(big.f_blocks * big.f_frsize - half_ram) < 2**22
    assert mode_of(base / "shm") == 0o1777  # tmpfs's own, as the kubelet mounts it
    await env.manager.cleanup(pod.uid)
    assert not mounts.mount_points(env.root)
    assert not (env.root / "uid-1").exists()
    await env.manager.cleanup(pod.uid)  # idempotent


async def test_unsupported_medium(env: Env) -> None:
    pod = make_pod(("huge", "emptyDir", {"medium": "HugePages"}))
    await expect_error(env, pod, "huge",
                       'emptyDir medium "HugePages" is not supported: use "" or "Memory"')


# -- hostPath ------------------------------------------------------------------------------


def host_pod(path: Path | str, type_: str) -> pods.Pod:
    return make_pod(("host", "hostPath", {"path": str(path), "type": type_}),
                    mounts_=(mount("host", "/host"),))


async def test_host_path_or_create(env: Env, tmp_path: Path) -> None:
    target = tmp_path / "host" / "a" / "b"
    result = await env.manager.prepare(host_pod(target, "DirectoryOrCreate"))
    assert target.is_dir() and mode_of(target) == 0o755
    assert result["app"] == (runtime.Mount("/host", str(target), volume="host"),)
    file = tmp_path / "host" / "f.txt"
    await env.manager.prepare(host_pod(file, "FileOrCreate"))
    assert file.is_file() and file.read_bytes() == b"" and mode_of(file) == 0o644
    await expect_error(env, host_pod(tmp_path / "nope" / "f", "FileOrCreate"), "host",
                       f"open {tmp_path}/nope/f: no such file or directory")


@pytest.fixture
def host_things(tmp_path: Path) -> Iterator[dict[str, Path]]:
    things = {"dir": tmp_path / "d", "file": tmp_path / "f", "socket": tmp_path / "s",
              "chardev": Path("/dev/null"), "blockdev": tmp_path / "b"}
    things["dir"].mkdir()
    things["file"].write_text("x")
    os.mknod(things["blockdev"], 0o600 | stat.S_IFBLK, os.makedev(7, 200))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(things["socket"]))
        yield things


# The kubelet's words (pkg/volume/hostpath typeMatchedOrError): the type found, or why none
# was (the differential harness found nodelet's shorter message).
MISSING = ", unable to determine its type: path {path!r} does not exist"
HOST_PATH_CASES = [
    ("Directory", "dir", None), ("Directory", "file", ": {path} is not a directory, it's a File"),
    ("Directory", "missing", ", {path} is not a directory" + MISSING),
    ("DirectoryOrCreate", "file", ": {path} is not a directory, it's a File"),
    ("File", "file", None), ("File", "dir", ": {path} is not a file, it's a Directory"),
    ("File", "missing", ", {path} is not a file" + MISSING),
    ("FileOrCreate", "dir", ": {path} is not a file, it's a Directory"),
    ("Socket", "socket", None), ("Socket", "file", ": {path} is not a socket file, it's a File"),
    ("CharDevice", "chardev", None),
    ("CharDevice", "blockdev", ": {path} is not a character device, it's a BlockDevice"),
    ("BlockDevice", "blockdev", None),
    ("BlockDevice", "chardev", ": {path} is not a block device, it's a CharDevice"),
    ("", "missing", None),
]


@pytest.mark.parametrize(("type_", "thing", "problem"), HOST_PATH_CASES)
async def test_host_path_types(
    env: Env, host_things: dict[str, Path], tmp_path: Path,
    type_: str, thing: str, problem: str | None,
) -> None:
    path = host_things.get(thing, tmp_path / "missing")
    pod = host_pod(path, type_)
    if problem is None:
        assert (await env.manager.prepare(pod))["app"][0].host_path == str(path)
    else:
        detail = problem.replace("{path!r}", f'"{path}"').replace("{path}", str(path))
        await expect_error(env, pod, "host", f"hostPath type check failed{detail}")


# -- configMap and secret ------------------------------------------------------------------


def config_volume(name: str = "cfg", **source: Any) -> tuple[str, str, dict[str, Any]]:
    return ("config", "configMap", {"name": name, **source})


def data_files(volume_dir: Path) -> dict[str, tuple[str, int]]:
    """What a container sees: user-visible names (through the symlinks), content and mode."""
    out = {}
    for top, dirs, files in os.walk(volume_dir, followlinks=True):
        dirs[:] = [d for d in dirs if not d.startswith("..") or top != str(volume_dir)]
        for name in files:
            path = Path(top) / name
            out[path.relative_to(volume_dir).as_posix()] = (path.read_text(), mode_of(path))
    return out


async def test_config_map_items_modes_and_read_only(env: Env) -> None:
    env.put(manifests.ConfigMap("cfg", "default", data={"a": "alpha", "b": "beta"}))
    pod = make_pod(config_volume(defaultMode=0o440, items=[
        {"key": "a", "path": "conf/a.txt"}, {"key": "b", "path": "b", "mode": 0o600}]),
        mounts_=(mount("config", "/etc/config"),))
    result = await env.manager.prepare(pod)
    directory = env.root / "uid-1" / "volumes" / "kubernetes.io~configmap" / "config"
    assert result["app"] == (runtime.Mount("/etc/config", str(directory), readonly=True,
                                           volume="config"),)
    assert data_files(directory) == {"b": ("beta", 0o600), "conf/a.txt": ("alpha", 0o440)}
    assert (directory / "..data").is_symlink() and (directory / "b").is_symlink()
    assert os.readlink(directory / "b") == "..data/b"
    assert not tmpfs_at(directory)  # configMaps live on disk, as in the kubelet


async def test_secret_is_on_tmpfs_with_default_mode(env: Env) -> None:
    env.put(manifests.Secret("creds", "default", data={"user": b"admin", "pw": b"\xff\x00"}))
    pod = make_pod(("sec", "secret", {"secretName": "creds"}), mounts_=(mount("sec", "/s"),))
    await env.manager.prepare(pod)
    directory = env.root / "uid-1" / "volumes" / "kubernetes.io~secret" / "sec"
    assert tmpfs_at(directory) == ["tmpfs"]
    assert (directory / "pw").read_bytes() == b"\xff\x00"
    assert mode_of(directory / "user") == 0o644


async def test_missing_sources(env: Env) -> None:
    await expect_error(env, make_pod(config_volume("x")), "config", 'configmap "x" not found')
    secret = make_pod(("s", "secret", {"secretName": "y"}), uid="uid-2")
    await expect_error(env, secret, "s", 'secret "y" not found')
    env.put(manifests.ConfigMap("cfg", "default", data={"a": "1"}))
    await expect_error(env, make_pod(config_volume(items=[{"key": "k", "path": "k"}])),
                       "config", "configmap references non-existent config key: k")
    error = volumes.VolumeError("config", 'configmap "x" not found')
    assert error.event_message == \
        'MountVolume.SetUp failed for volume "config" : configmap "x" not found'


async def test_first_failing_volume_is_reported(env: Env) -> None:
    pod = make_pod(("ok", "emptyDir", {}), ("first", "configMap", {"name": "a"}),
                   ("second", "secret", {"secretName": "b"}))
    await expect_error(env, pod, "first", 'configmap "a" not found')


async def test_optional_missing_source_is_an_empty_volume(env: Env) -> None:
    pod = make_pod(config_volume("x", optional=True), mounts_=(mount("config", "/c"),))
    await env.manager.prepare(pod)
    directory = env.root / "uid-1" / "volumes" / "kubernetes.io~configmap" / "config"
    assert data_files(directory) == {}
    env.put(manifests.ConfigMap("x", "default", data={"late": "arrival"}))
    await env.manager.prepare(pod)
    assert data_files(directory) == {"late": ("arrival", 0o644)}


async def test_update_reaches_files_with_an_atomic_swap(env: Env) -> None:
    env.put(manifests.ConfigMap("cfg", "default", data={"a": "v1", "old": "x"}))
    pod = make_pod(config_volume(), mounts_=(
        mount("config", "/c"), mount("config", "/a.txt", sub_path="a")))
    first = await env.manager.prepare(pod)
    directory = env.root / "uid-1" / "volumes" / "kubernetes.io~configmap" / "config"
    data_before = os.readlink(directory / "..data")
    app = pod.spec.containers[0]
    sub = Path(expand(env, app, first["app"])[1].host_path)
    assert sub == env.root / "uid-1" / "volume-subpaths" / "config" / "app" / "1"
    assert sub.read_text() == "v1" and mount_count(sub) == 1
    assert sub.stat().st_ino == (directory / data_before / "a").stat().st_ino  # not ..data

    assert await env.manager.prepare(pod) == first  # unchanged: no new ..data target
    assert os.readlink(directory / "..data") == data_before

    # A running container's subPath bind mount holds the old inode.
    env.put(manifests.ConfigMap("cfg", "default", data={"a": "v2", "new": "y"}))
    second = await env.manager.prepare(pod)
    assert sub.read_text() == "v1"
    assert data_files(directory) == {"a": ("v2", 0o644), "new": ("y", 0o644)}
    assert not (directory / "old").exists() and not os.path.lexists(directory / "old")
    dotted = sorted(p.name for p in directory.iterdir() if p.name.startswith(".."))
    assert dotted == sorted(["..data", os.readlink(directory / "..data")])  # old dir removed
    # A restarted container mounts the new file, in place of the old bind (none stacked);
    # the main mount never changed its path.
    assert expand(env, app, second["app"])[1].host_path == str(sub)
    assert sub.read_text() == "v2" and mount_count(sub) == 1
    assert second["app"][0] == first["app"][0]


async def test_source_gone_after_set_up_keeps_files(env: Env) -> None:
    env.put(manifests.ConfigMap("cfg", "default", data={"a": "v1"}))
    pod = make_pod(config_volume())
    await env.manager.prepare(pod)
    del env.objects[("ConfigMap", "default", "cfg")]
    await env.manager.prepare(pod)  # no error: the pod keeps running on the old files
    directory = env.root / "uid-1" / "volumes" / "kubernetes.io~configmap" / "config"
    assert data_files(directory) == {"a": ("v1", 0o644)}
    assert env.refresh_errors == [
        'MountVolume.SetUp failed for volume "config" : configmap "cfg" not found'
    ]


# -- subPath -------------------------------------------------------------------------------


async def test_sub_path(env: Env) -> None:
    pod = make_pod(("cache", "emptyDir", {}), mounts_=(
        mount("cache", "/all"), mount("cache", "/logs", sub_path="app/logs"),
        mount("cache", "/ro", sub_path="app", read_only=True)))
    prepared = (await env.manager.prepare(pod))["app"]
    base = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    # The whole volume until the container is created.
    assert [m.host_path for m in prepared] == [str(base)] * 3
    binds = env.root / "uid-1" / "volume-subpaths" / "cache" / "app"
    assert expand(env, pod.spec.containers[0], prepared) == (
        runtime.Mount("/all", str(base), volume="cache"),
        runtime.Mount("/logs", str(binds / "1"), volume="cache"),
        runtime.Mount("/ro", str(binds / "2"), readonly=True, volume="cache"),
    )
    # Created as the kubelet does, with the volume root's mode; the runtime gets bind mounts.
    assert (base / "app" / "logs").is_dir() and mode_of(base / "app" / "logs") == 0o777
    (base / "app" / "logs" / "f").write_text("seen")
    assert (binds / "1" / "f").read_text() == "seen" and (binds / "2" / "logs" / "f").exists()
    assert mount_count(binds / "1") == mount_count(binds / "2") == 1


async def test_sub_path_dirs_get_the_root_mode_and_fs_group(env: Env) -> None:
    pod = make_pod(("cache", "emptyDir", {}),
                   mounts_=(mount("cache", "/logs", sub_path_expr="$(POD)/logs"),))
    pod = dataclasses.replace(pod, spec=dataclasses.replace(
        pod.spec, security_context=pods.PodSecurityContext(fs_group=2000)))
    prepared = (await env.manager.prepare(pod))["app"]
    base = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    old_umask = os.umask(0o077)  # not applied: the modes are the root's
    try:
        expand(env, pod.spec.containers[0], prepared, {"POD": "web"})
    finally:
        os.umask(old_umask)
    for path in (base, base / "web", base / "web" / "logs"):
        info = path.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_gid) == (0o2777, 2000), path


@pytest.mark.parametrize(("sub_path", "message"), [
    ("/etc", 'subPath "/etc" must not be an absolute path'),
    ("a/../..", "subPath \"a/../..\" must not contain '..'"),
])
async def test_sub_path_must_stay_inside(env: Env, sub_path: str, message: str) -> None:
    pod = make_pod(("cache", "emptyDir", {}), mounts_=(mount("cache", "/x", sub_path=sub_path),))
    await expect_error(env, pod, "cache", message)


async def test_sub_path_symlink_escape_is_refused(env: Env) -> None:
    pod = make_pod(("cache", "emptyDir", {}), mounts_=(mount("cache", "/x", sub_path="evil"),))
    prepared = (await env.manager.prepare(pod))["app"]
    base = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    (base / "evil").symlink_to("/etc")  # what a container could plant in its emptyDir
    with pytest.raises(envvars.ConfigError) as caught:
        expand(env, pod.spec.containers[0], prepared)
    assert caught.value.message == (
        'failed to prepare subPath for volumeMount "cache" of container "app": '
        'subPath "evil" resolves outside the volume: /etc')
    assert not mounts.mount_points(env.root)


async def test_sub_path_expr_is_expanded_when_the_container_starts(env: Env) -> None:
    pod = make_pod(("cache", "emptyDir", {}), mounts_=(
        mount("cache", "/logs", sub_path_expr="logs/$(POD)"), mount("cache", "/all")))
    app = pod.spec.containers[0]
    prepared = (await env.manager.prepare(pod))["app"]
    base = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    assert prepared[0].host_path == str(base)  # the whole volume until the env is known
    target = env.root / "uid-1" / "volume-subpaths" / "cache" / "app" / "0"
    assert expand(env, app, prepared, {"POD": "web"}) == (
        runtime.Mount("/logs", str(target), volume="cache"),
        runtime.Mount("/all", str(base), volume="cache"))
    assert (base / "logs" / "web").is_dir()
    assert target.stat().st_ino == (base / "logs" / "web").stat().st_ino
    with pytest.raises(envvars.ConfigError, match="missing value for POD"):
        expand(env, app, prepared, {"POD": ""})
    (base / "logs" / "evil").symlink_to("/etc")  # what a container could plant there
    with pytest.raises(envvars.ConfigError) as caught:
        expand(env, app, prepared, {"POD": "evil"})
    assert caught.value.message.startswith(
        'failed to prepare subPath for volumeMount "cache" of container "app": ')
    assert caught.value.message.endswith("resolves outside the volume: /etc")


async def test_sub_path_inside_symlinks_are_followed_once(env: Env) -> None:
    # A configMap's keys are symlinks through ..data; a link inside the volume is fine too.
    pod = make_pod(("cache", "emptyDir", {}), mounts_=(mount("cache", "/x", sub_path="link/f"),))
    prepared = (await env.manager.prepare(pod))["app"]
    base = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    (base / "real").mkdir()
    (base / "real" / "f").write_text("inside")
    (base / "link").symlink_to("real")
    target = Path(expand(env, pod.spec.containers[0], prepared)[0].host_path)
    assert target.read_text() == "inside" and target.is_file()


# -- the safe-open primitives: a symlink swapped in after the path was resolved -------------


def test_open_beneath_refuses_symlinks(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "file").write_text("x")
    (tmp_path / "dir" / "link").symlink_to("file")
    (tmp_path / "up").symlink_to("dir")
    fd = mounts.open_beneath(str(tmp_path), "dir/file")
    try:
        assert os.fstat(fd).st_ino == (tmp_path / "dir" / "file").stat().st_ino
    finally:
        os.close(fd)
    for relative, bad in (("up/file", "up"), ("dir/link", "dir/link")):
        with pytest.raises(mounts.MountError) as caught:
            mounts.open_beneath(str(tmp_path), relative)
        assert caught.value.message == f"unexpected symlink found {tmp_path / bad}"


def test_make_dirs_beneath_stays_inside(tmp_path: Path) -> None:
    base, outside = tmp_path / "volume", tmp_path / "outside"
    base.mkdir()
    outside.mkdir()
    (base / "out").symlink_to(outside)
    with pytest.raises(mounts.MountError, match="resolves outside"):
        mounts.make_dirs_beneath(str(base), "out/new", mode=0o750, gid=0)
    assert list(outside.iterdir()) == []
    mounts.make_dirs_beneath(str(base), "a/b", mode=0o2750, gid=1234)
    assert [(mode_of(p), p.stat().st_gid) for p in (base / "a", base / "a" / "b")] == \
        [(0o2750, 1234)] * 2


async def test_swapping_a_symlink_in_never_mounts_the_host(env: Env) -> None:
    """A container swaps its subPath directory with a symlink to / (atomically, as fast as it
    can) while containers are created: each attempt either is refused or binds the volume's
    own directory, never the host's root."""
    pod = make_pod(("cache", "emptyDir", {}), mounts_=(mount("cache", "/x", sub_path="sub"),))
    prepared = (await env.manager.prepare(pod))["app"]
    base = env.root / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    (base / "sub").mkdir()
    (base / "sub" / "marker").write_text("volume")
    (base / "other").symlink_to("/")
    stop = threading.Event()
    swapper = threading.Thread(target=keep_exchanging, args=(base / "sub", base / "other", stop))
    swapper.start()
    refused: list[str] = []
    try:
        for _ in range(300):
            try:
                target = Path(expand(env, pod.spec.containers[0], prepared)[0].host_path)
            except envvars.ConfigError as exc:
                refused.append(exc.message)
                continue
            assert (target / "marker").read_text() == "volume"
    finally:
        stop.set()
        swapper.join()
    # Refused by the resolution (or by realpath's readlink racing the swap: EINVAL), or by
    # the O_NOFOLLOW walk when the swap came after the resolution.
    reasons = ("resolves outside the volume: /", "unexpected symlink found", "Invalid argument")
    assert all(any(r in m for r in reasons) for m in refused), set(refused)


def keep_exchanging(a: Path, b: Path, stop: threading.Event) -> None:
    """renameat2(RENAME_EXCHANGE) in a loop: both names always exist."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    while not stop.is_set():
        if libc.renameat2(at_fdcwd, bytes(a), at_fdcwd, bytes(b), rename_exchange):
            raise OSError(ctypes.get_errno(), "renameat2")


# -- mount propagation ------------------------------------------------------------------------


def propagation_of(path: Path) -> list[str]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    found = [line.split(" - ")[0].split()[6:] for line in lines
             if line.split()[4] == str(path.resolve())]
    return found[-1] if found else []


async def test_share_root_binds_the_pods_dir_once(env: Env) -> None:
    await env.manager.share_root()
    assert mounts.is_mount_point(env.root) and mount_count(env.root) == 1
    assert any(f.startswith("shared:") for f in propagation_of(env.root))
    await env.manager.share_root()  # already shared: nothing stacked
    assert mount_count(env.root) == 1
    await mounts.unmount_all(env.root)
    assert not mounts.is_mount_point(env.root)


def test_make_rshared_does_not_hide_mounts_below(tmp_path: Path) -> None:
    below = tmp_path / "pods" / "volume"
    below.mkdir(parents=True)
    mounts._mount(str(below), str(below), mounts._MS_BIND)  # a volume mounted before
    try:
        with pytest.raises(mounts.MountError, match="would hide the mounts below"):
            mounts.make_rshared(tmp_path / "pods")
        assert not mounts.is_mount_point(tmp_path / "pods")
    finally:
        mounts.detach(below)


async def test_mount_points_are_found_under_names_the_kernel_escapes(tmp_path: Path) -> None:
    # /proc/self/mountinfo writes a space, tab, newline or backslash octal-escaped; only the
    # lines holding the path so written are parsed.
    top = tmp_path / "a b\\c"
    inner = top / "tab\there"
    near = tmp_path / "a b\\cd"  # shares the name's start: not under `top`
    for path in (inner, near):
        path.mkdir(parents=True)
        await mounts.mount_tmpfs(path, size=None, mode=0o755, limit=10)
    try:
        assert mounts.mount_points(top) == [(inner, "tmpfs")]
        assert mounts.is_tmpfs(inner) and mounts.is_mount_point(inner)
        assert not mounts.is_tmpfs(top) and not mounts.is_mount_point(top)
        assert mounts.mounts_under(tmp_path) == [inner, near]  # deepest first
    finally:
        for path in (inner, near):
            mounts.detach(path)
    assert mounts.mount_points(tmp_path) == []


def mountinfo_of(path: Path) -> str:
    """The line of the mount on `path`, without its IDs and mount point."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    found = [line for line in lines if line.split()[4] == str(path.resolve())]
    assert len(found) == 1, found
    return " ".join(found[0].split()[5:])


async def test_a_tmpfs_is_mounted_and_unmounted_as_the_commands_do(tmp_path: Path) -> None:
    # mount(2) and umount2(2) directly, as mount(8) and umount(8) call them.
    by_command, by_call = tmp_path / "command", tmp_path / "call"
    for path in (by_command, by_call):
        path.mkdir()
    status, output = await commands.run(["mount", "-t", "tmpfs", "-o", "mode=1777,size=1048576",
                                         "tmpfs", str(by_command)], limit=10)
    assert status == 0, output
    await mounts.mount_tmpfs(by_call, size=1048576, mode=0o1777, limit=10)
    assert mountinfo_of(by_call) == mountinfo_of(by_command)
    assert mode_of(by_call) == mode_of(by_command) == 0o1777
    for path in (by_command, by_call):
        await mounts.unmount(path, limit=10, fstype="tmpfs")
    assert mounts.mount_points(tmp_path) == []


async def test_a_refused_tmpfs_mount_or_unmount_reads_as_the_commands_say(
        tmp_path: Path) -> None:
    # The kernel's refusal sends the call to mount(8) / umount(8): their words, as always.
    missing = tmp_path / "missing"
    with pytest.raises(mounts.MountError) as caught:
        await mounts.mount_tmpfs(missing, size=None, mode=0o755, limit=10)
    assert caught.value.message.startswith(
        f"mount tmpfs on {missing} failed (32): mount: {missing}: mount point does not exist")
    with pytest.raises(mounts.MountError) as caught:
        await mounts.unmount(tmp_path, limit=10, fstype="tmpfs")
    assert caught.value.message == (
        f"unmount {tmp_path} failed (32): umount: {tmp_path}: not mounted.")


# -- projected and downwardAPI -------------------------------------------------------------


async def test_projected(env: Env) -> None:
    env.put(manifests.ConfigMap("ca", "default", data={"ca.crt": "CERT"}))
    env.put(manifests.Secret("creds", "default", data={"token": b"t0k"}))
    pod = make_pod(("api", "projected", {"defaultMode": 0o420, "sources": [
        {"serviceAccountToken": {"path": "sa-token"}},
        {"configMap": {"name": "ca"}},
        {"secret": {"name": "creds", "items": [{"key": "token", "path": "auth/token"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}), mounts_=(mount("api", "/var/run/secrets/kubernetes.io/serviceaccount"),))
    result = await env.manager.prepare(pod)
    directory = env.root / "uid-1" / "volumes" / "kubernetes.io~projected" / "api"
    assert result["app"][0].readonly and tmpfs_at(directory) == ["tmpfs"]
    assert data_files(directory) == {
        "auth/token": ("t0k", 0o420), "ca.crt": ("CERT", 0o420), "namespace": ("default", 0o420),
        "sa-token": (f"token-of-{pod.name}", 0o420),
    }


async def test_downward_api_follows_pod_ip(env: Env) -> None:
    pod = make_pod(("info", "downwardAPI", {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}},
        {"path": "node", "fieldRef": {"fieldPath": "spec.nodeName"}},
    ]}), labels={"b": "2", "a": 'q"uote'})
    await env.manager.prepare(pod, host_ip="192.168.0.1")
    directory = env.root / "uid-1" / "volumes" / "kubernetes.io~downward-api" / "info"
    assert data_files(directory) == {
        "labels": ('a="q\\"uote"\nb="2"', 0o644), "ip": ("", 0o644), "node": ("node-1", 0o644),
    }
    await env.manager.prepare(pod, pod_ip="10.1.0.5")
    assert (directory / "ip").read_text() == "10.1.0.5"


async def test_downward_api_unsupported_field(env: Env) -> None:
    pod = make_pod(("info", "downwardAPI", {"items": [
        {"path": "p", "fieldRef": {"fieldPath": "status.phase"}}]}))
    message = re.escape('unsupported fieldPath "status.phase"')
    with pytest.raises(volumes.VolumeError, match=message):
        await env.manager.prepare(pod)


# -- cleanup -------------------------------------------------------------------------------


async def test_cleanup_leaves_nothing(env: Env, tmp_path: Path) -> None:
    env.put(manifests.Secret("creds", "default", data={"k": b"v"}))
    env.put(manifests.ConfigMap("cfg", "default", data={"k": "v"}))
    host = tmp_path / "hostdir"
    pod = make_pod(
        ("mem", "emptyDir", {"medium": "Memory"}), ("disk", "emptyDir", {}),
        ("sec", "secret", {"secretName": "creds"}), config_volume(),
        ("host", "hostPath", {"path": str(host), "type": "DirectoryOrCreate"}),
        mounts_=(mount("disk", "/d", sub_path="sub"), mount("host", "/h", sub_path="keep"),
                 mount("mem", "/m", sub_path="m")),
    )
    prepared = await env.manager.prepare(pod)
    (host / "keep").write_text("mine")
    expand(env, pod.spec.containers[0], prepared["app"])
    expand(env, pod.spec.containers[0], prepared["app"])  # a restart: the binds are reused
    # Two tmpfs, three subPath binds (one of a file of the hostPath), each mounted once.
    assert len(mounts.mount_points(env.root)) == 5
    assert all(mount_count(p) == 1 for p, _ in mounts.mount_points(env.root))
    await env.manager.cleanup(pod.uid)
    assert not mounts.mount_points(tmp_path)
    assert not (env.root / "uid-1").exists()
    assert (host / "keep").read_text() == "mine"  # hostPath contents are never touched
    await env.manager.cleanup(pod.uid)
    await env.manager.cleanup(pods.PodUID("never-seen"))


# -- end to end: a busybox container on the real runtime sees the files --------------------


@pytest.mark.runtime
async def test_container_sees_volumes_and_updates(runtime: Instance, env: Env) -> None:
    env.put(manifests.ConfigMap("cfg", "default", data={"a": "v1"}))
    env.put(manifests.Secret("creds", "default", data={"pw": b"hunter2"}))
    pod = make_pod(
        config_volume(), ("sec", "secret", {"secretName": "creds"}),
        ("mem", "emptyDir", {"medium": "Memory", "sizeLimit": "4Mi"}),
        mounts_=(mount("config", "/etc/config"), mount("config", "/a.txt", sub_path="a"),
                 mount("sec", "/secret"), mount("mem", "/mem")),
        uid="uid-e2e",
    )
    container_mounts = await env.manager.prepare(pod)
    config = sandbox_config(runtime, "volumes")
    sandbox_id = await runtime.client.run_pod_sandbox(config)
    try:
        container = runtime_model_config(
            expand(env, pod.spec.containers[0], container_mounts["app"], uid="uid-e2e"))
        container_id = await runtime.client.create_container(sandbox_id, container, config)
        await runtime.client.start_container(container_id)

        async def run(script: str) -> str:
            result = await runtime.client.exec_sync(container_id, ["sh", "-c", script], 10)
            assert result.exit_code == 0, result
            return result.stdout.decode()

        assert await run("cat /etc/config/a /a.txt /secret/pw") == "v1v1hunter2"
        assert await run("grep -E ' /(mem|secret) ' /proc/mounts | cut -d' ' -f2,3 | sort") \
            == "/mem tmpfs\n/secret tmpfs\n"
        assert await run("touch /etc/config/x 2>/dev/null || echo read-only") == "read-only\n"
        assert await run("echo w > /mem/f && cat /mem/f") == "w\n"

        env.put(manifests.ConfigMap("cfg", "default", data={"a": "v2"}))
        await env.manager.prepare(pod)
        # The directory mount follows the ..data swap; the subPath mount keeps the old file.
        assert await run("cat /etc/config/a /a.txt") == "v2v1"
        await runtime.client.stop_container(container_id, 0)
        await runtime.client.remove_container(container_id)
    finally:
        await runtime.client.stop_pod_sandbox(sandbox_id)
        await runtime.client.remove_pod_sandbox(sandbox_id)
    await env.manager.cleanup(pod.uid)
    assert not mounts.mount_points(env.root)


def runtime_model_config(container_mounts: tuple[runtime.Mount, ...]) -> runtime.ContainerConfig:
    return runtime.ContainerConfig(
        name="app", attempt=0, image=settings_.BUSYBOX_IMAGE, log_path="app/0.log",
        command=("sleep", "3600"), mounts=container_mounts,
    )
