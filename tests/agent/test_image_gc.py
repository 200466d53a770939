"""Image garbage collection on real containerd: an unused image is removed when a small data-dir
filesystem (a tmpfs made here) crosses the high threshold, and an in-use image never is, nor
the pause image; an image too young waits for the minimum age, and when nothing more can be
freed the Node gets the kubelet's FreeDiskSpaceFailed event. With a maximum age
(imageMaximumGCAge), an image no container used for longer than it goes whatever the disk
usage, but not before the collector has run that long; images of running and of exited
containers stay."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
import pytest_asyncio

from conftest import AgentFactory, Instance, InstanceFactory
from nodelet import cli, settings
from nodelet.adapters import host
from nodelet.helpers import clocks
from nodelet.model.core import imagegc
from nodelet.services.nodehealth import imagegc as imagegc_service
from support.clocks import FakeClock
from support.disks import tiny_tmpfs
from support.harness import all_ready, pod_manifest
from support.polling import eventually

IMAGES_DIR = Path(__file__).resolve().parents[2] / "images"
VICTIM = "localhost/nodelet/gc-victim:1"
# An image only an exited container uses (busybox with a marker file, so another image ID).
DONE = "localhost/nodelet/gc-done:1"
# The tmpfs holds containerd's root (pause, busybox, the victim: content and unpacked
# snapshots), its state and log. 8 MiB of random data makes the victim the one image big
# enough to bring usage from just above 85 % back under 80 %.
FS_SIZE = "48m"
VICTIM_BYTES = 8 * 2**20
MIN_AGE = 2.0


def _image_builder() -> ModuleType:
    """images/build.py, the script that builds the pause and busybox archives."""
    spec = importlib.util.spec_from_file_location("nodelet_image_build", IMAGES_DIR / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def victim_archive(out: Path) -> Path:
    """An OCI archive of an image no pod uses: one layer of incompressible data."""
    build = _image_builder()
    entries = [build.Entry("data", "dir"),
               build.Entry("data/blob", "file", 0o644, os.urandom(VICTIM_BYTES))]
    build.write_archive(build.layout_files(VICTIM, entries, {"Cmd": ["/data/blob"]}), out)
    return out


def done_archive(out: Path) -> Path:
    """An OCI archive of busybox (Debian's busybox-static, as images/out/busybox.tar) with a
    marker file: an image of its own that runs `true`."""
    build = _image_builder()
    binary = Path("/bin/busybox")
    entries = [*build.busybox_entries(binary, build.available_applets(binary)),
               build.Entry("gc-done", "file", 0o644, b"done\n")]
    build.write_archive(build.layout_files(DONE, entries, {"Cmd": ["true"],
                                                          "Env": [build.PATH_ENV]}), out)
    return out


async def import_image(instance: Instance, archive: Path) -> None:
    """Import as the embedded containerd imports its own images (ctr, namespace k8s.io)."""
    proc = await asyncio.create_subprocess_exec(
        "ctr", "--address", str(instance.containerd.paths.socket), "-n", "k8s.io", "images",
        "import", str(archive), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, out.decode()


def fill_to(directory: Path, percent: int) -> tuple[Path, int]:
    """Grow `directory/filler` until the filesystem is `percent` % used as image GC counts
    (half a percent into it); returns the filler and the usage reached."""
    fs = host.filesystem_stats(directory)
    wanted_available = fs.capacity * (100 - percent) // 100 + fs.capacity // 200
    missing = fs.available - wanted_available
    chunk = b"\0" * 2**16
    with (directory / "filler").open("ab") as out:
        while missing > 0:
            missing -= out.write(chunk[:missing])
    return directory / "filler", host.filesystem_stats(directory).used_percent


@pytest.fixture
def small_fs() -> Iterator[Path]:
    """A small tmpfs; unmounted after everything on it (request it before `instances`)."""
    root = Path(tempfile.mkdtemp(prefix="nlgc-", dir="/tmp"))
    try:
        with tiny_tmpfs(root / "fs", size=FS_SIZE) as mounted:
            yield mounted
    finally:
        (root / "fs").rmdir()
        root.rmdir()


@pytest_asyncio.fixture(loop_scope="session")
async def gc_instance(small_fs: Path, instances: InstanceFactory) -> AsyncIterator[Instance]:
    """A private containerd whose data dir, and so its image filesystem, is on `small_fs`."""
    data_dir = small_fs / "d"
    data_dir.mkdir()
    yield await instances(data_dir=data_dir)


async def tags(instance: Instance) -> set[str]:
    return {tag for image in await instance.client.list_images() for tag in image.repo_tags}


async def test_unused_image_is_collected_and_used_ones_never(
    small_fs: Path, gc_instance: Instance, make_agent: AgentFactory, tmp_path: Path
) -> None:
    assert (await gc_instance.client.image_fs_info())[0].mountpoint.startswith(str(small_fs))
    agent = await make_agent(endpoint=gc_instance.containerd.endpoint, gc=settings.GCSettings(
        image_gc_period=3600, image_minimum_gc_age=MIN_AGE))
    agent.write("busy.yaml", pod_manifest("busy"))
    await agent.wait_status("busy", all_ready, what="a busybox pod running")
    await import_image(gc_instance, victim_archive(tmp_path / "victim.tar"))
    assert {VICTIM, settings.BUSYBOX_IMAGE, settings.PAUSE_IMAGE} <= await tags(gc_instance)
    image_gc = agent.agent_or_fail().image_gc
    recorder = agent.agent_or_fail().recorder
    filler, percent = fill_to(small_fs, 86)
    try:
        # Just seen: younger than the minimum age, so nothing is eligible yet.
        young = await image_gc.collect()
        assert percent == young.usage_percent == 86, young
        assert young.freed == 0 and young.amount_to_free > 0
        assert young.error == imagegc.failure_message(young.amount_to_free, 0)
        assert VICTIM in await tags(gc_instance)
        # Once old enough it goes, and only it: busybox runs the pod, pause is the sandbox's.
        done = await eventually(image_gc.collect, until=lambda r: r.ok, every=0.5,
                                within=30, what="the victim collected once old enough")
        assert done.freed >= done.amount_to_free and len(done.removed) == 1, done
        left = await tags(gc_instance)
        assert VICTIM not in left and {settings.BUSYBOX_IMAGE, settings.PAUSE_IMAGE} <= left
        assert host.filesystem_stats(small_fs).used_percent < 80
        # Nothing left to free: the Node hears it, and of a second failure in a row too.
        _, percent = fill_to(small_fs, 96)
        full = await image_gc.collect()
        again = await image_gc.collect()
        assert percent == full.usage_percent and not full.ok and full.freed == 0, full
        node_events = {(e.kind, e.reason, e.type, e.message) for e in recorder.events()
                       if e.kind == "Node"}
        assert ("Node", imagegc.FREE_DISK_SPACE_FAILED, "Warning", full.error) in node_events
        assert ("Node", imagegc.IMAGE_GC_FAILED, "Warning", again.error) in node_events
        assert await image_gc.delete_unused() == 0
        assert {settings.BUSYBOX_IMAGE, settings.PAUSE_IMAGE} <= await tags(gc_instance)
    finally:
        filler.unlink(missing_ok=True)


@pytest.mark.parametrize(("flags", "error"), [
    (["--image-gc-high-threshold", "101"], "--image-gc-high-threshold 101: must be a percentage"),
    (["--image-gc-low-threshold", "-1"], "--image-gc-low-threshold -1: must be a percentage"),
    (["--image-gc-low-threshold", "90"],
     "--image-gc-low-threshold 90: must not be above --image-gc-high-threshold 85"),
    (["--image-minimum-gc-age", "soon"], "--image-minimum-gc-age 'soon': not a duration"),
])
def test_image_gc_flags_are_checked(flags: list[str], error: str) -> None:
    with pytest.raises(settings.SettingsError, match=error):
        cli.settings_from_args(cli.build_parser().parse_args(["run", *flags]))


def test_image_gc_flags_reach_the_settings() -> None:
    args = cli.build_parser().parse_args([
        "run", "--image-gc-high-threshold", "90", "--image-gc-low-threshold", "50",
        "--image-minimum-gc-age", "1m30s"])
    gc = cli.settings_from_args(args).gc
    assert (gc.image_gc_high_percent, gc.image_gc_low_percent, gc.image_minimum_gc_age) == (
        90, 50, 90.0)
    default = cli.settings_from_args(cli.build_parser().parse_args(["run"])).gc
    assert (default.image_gc_high_percent, default.image_gc_low_percent,
            default.image_minimum_gc_age) == (85, 80, 120.0)


def _config(tmp_path: Path, fields: str, *flags: str) -> settings.Settings:
    path = tmp_path / "kubelet.yaml"
    path.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                    + fields)
    return cli.settings_from_argv(["run", "--config", str(path), *flags])


def test_the_max_age_comes_from_the_config_file(tmp_path: Path) -> None:
    # The node e2e suite's pair (test/e2e_node/image_gc_test.go).
    gc = _config(tmp_path, "imageMaximumGCAge: 1m\nimageMinimumGCAge: 1s\n").gc
    assert (gc.image_maximum_gc_age, gc.image_minimum_gc_age) == (60.0, 1.0)
    assert _config(tmp_path, "imageMaximumGCAge: 0s\n").gc.image_maximum_gc_age == 0.0
    assert cli.settings_from_args(cli.build_parser().parse_args(["run"])).gc \
        .image_maximum_gc_age == 0.0  # off by default, as in the kubelet


@pytest.mark.parametrize(("fields", "flags", "error"), [
    # The minimum age's default is 2m.
    ("imageMaximumGCAge: 1m\n", (), "--config: invalid configuration: imageMaximumGCAge 1m0s "
     "must be greater than imageMinimumGCAge 2m0s"),
    ("imageMaximumGCAge: 1m\nimageMinimumGCAge: 1m\n", (),
     "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 1m0s"),
    # The command line's minimum age wins over the file's, and is checked against the file's
    # maximum age.
    ("imageMaximumGCAge: 3m\nimageMinimumGCAge: 1s\n", ("--image-minimum-gc-age", "5m"),
     "imageMaximumGCAge 3m0s must be greater than imageMinimumGCAge 5m0s"),
])
def test_a_max_age_not_above_the_min_age_is_refused(
    tmp_path: Path, fields: str, flags: tuple[str, ...], error: str
) -> None:
    with pytest.raises(settings.SettingsError, match=error):
        _config(tmp_path, fields, *flags)


# -- the maximum age --------------------------------------------------------------------------

# The loop's collector starts once its pod runs (busybox in use from its first look), so
# the maximum age need not outlast the pod's start: short.
MAX_AGE = 3.0


async def test_images_unused_longer_than_the_max_age_go_whatever_the_usage(
    instances: InstanceFactory, make_agent: AgentFactory, tmp_path: Path
) -> None:
    """The collection loop (`ImageGC.run`, as `nodelet run` runs it) with a short period and
    maximum age, started once the pod runs: an image found then and never used goes, busybox
    (the running pod's) and pause stay. Before the pod's container exists busybox is unused
    too: a collector started with the agent would remove it on a slow start."""
    instance = await instances()  # a private one: every unused image there goes
    agent = await make_agent(endpoint=instance.containerd.endpoint, gc=settings.GCSettings(
        image_gc_high_percent=100))  # the agent's own collector stays out of the way
    agent.write("busy.yaml", pod_manifest("busy"))
    await agent.wait_status("busy", all_ready, what="a busybox pod running")
    await import_image(instance, victim_archive(tmp_path / "victim.tar"))
    collector = imagegc_service.ImageGC(
        client=instance.client, recorder=agent.agent_or_fail().recorder,
        settings=settings.GCSettings(image_gc_period=0.5, image_minimum_gc_age=1.0,
                                     image_maximum_gc_age=MAX_AGE),
        protected=(settings.PAUSE_IMAGE,), clock=clocks.utc_now)
    loop = asyncio.create_task(collector.run(), name="test-image-gc")
    try:
        left = await eventually(lambda: tags(instance), until=lambda t: VICTIM not in t,
                                within=MAX_AGE + 30, every=0.5,
                                what="the never-used image removed once past the maximum age")
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    assert {settings.BUSYBOX_IMAGE, settings.PAUSE_IMAGE} <= left
    busy = agent.status_of("busy")
    assert busy is not None and busy.phase == "Running", busy


async def test_max_age_counts_from_the_start_and_spares_images_in_use(
    instances: InstanceFactory, make_agent: AgentFactory, tmp_path: Path
) -> None:
    """A collector on a clock the test moves, over real containerd and real pods: nothing
    before the maximum age has passed since its start; then the never-used image goes, and
    the images of a running and an exited container and the pause image stay."""
    instance = await instances()
    await import_image(instance, done_archive(tmp_path / "done.tar"))
    agent = await make_agent(endpoint=instance.containerd.endpoint, gc=settings.GCSettings(
        image_gc_high_percent=100))  # the agent's own collector stays out of the way
    agent.write("busy.yaml", pod_manifest("busy"))
    agent.write("done.yaml", pod_manifest("done", command="true", restart_policy="Never")
                .replace(settings.BUSYBOX_IMAGE, DONE))
    await agent.wait_status("busy", all_ready, what="a busybox pod running")
    await agent.wait_status("done", lambda s: s.phase == "Succeeded", what="done Succeeded")
    await import_image(instance, victim_archive(tmp_path / "victim.tar"))
    (victim_id,) = [i.id for i in await instance.client.list_images() if VICTIM in i.repo_tags]
    clock = FakeClock(datetime(2026, 12, 7, 12, 0, tzinfo=UTC))
    collector = imagegc_service.ImageGC(
        client=instance.client, recorder=agent.agent_or_fail().recorder,
        settings=settings.GCSettings(image_minimum_gc_age=1.0, image_maximum_gc_age=60.0),
        protected=(settings.PAUSE_IMAGE,), clock=clock)
    first = await collector.collect()
    clock.now += timedelta(seconds=60)
    not_yet = await collector.collect()
    assert first.ok and not_yet.ok and first.expired == not_yet.expired == (), (first, not_yet)
    assert {VICTIM, DONE} <= await tags(instance)
    clock.now += timedelta(seconds=1)
    expired = await collector.collect()
    assert expired.ok and expired.expired == (victim_id,), expired
    left = await tags(instance)
    assert VICTIM not in left and {DONE, settings.BUSYBOX_IMAGE, settings.PAUSE_IMAGE} <= left
