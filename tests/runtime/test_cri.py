"""The CRI client against a real containerd (the session `runtime` instance)."""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

import pytest

from conftest import Instance, sandbox_config
from nodelet import settings as settings_
from nodelet.adapters import cni
from nodelet.adapters.cri import client as cri_client
from nodelet.adapters.cri import errors as cri_errors
from nodelet.model.core import runtime as rt
from support.polling import eventually

pytestmark = pytest.mark.runtime


def _exists(path: str) -> bool:
    return Path(path).exists()


async def _remove(instance: Instance, sandbox_id: rt.SandboxID) -> None:
    await instance.client.stop_pod_sandbox(sandbox_id)
    await instance.client.remove_pod_sandbox(sandbox_id)


async def test_version_and_status(runtime: Instance) -> None:
    version = await runtime.client.version()
    assert version.runtime_name == "containerd"
    assert version.runtime_api_version == "v1"
    status = await runtime.client.status()
    assert status.runtime_ready and status.network_ready, status


async def test_local_images_are_present(runtime: Instance) -> None:
    for ref in (settings_.PAUSE_IMAGE, settings_.BUSYBOX_IMAGE):
        image = await runtime.client.image_status(ref)
        assert image is not None and ref in image.repo_tags
    assert await runtime.client.image_status("localhost/nodelet/absent:1") is None
    tags = {t for image in await runtime.client.list_images() for t in image.repo_tags}
    assert {settings_.PAUSE_IMAGE, settings_.BUSYBOX_IMAGE} <= tags


async def test_sandbox_gets_an_ip_in_the_pod_cidr(runtime: Instance) -> None:
    config = sandbox_config(runtime, "ip")
    sandbox_id = await runtime.client.run_pod_sandbox(config)
    try:
        info = await runtime.client.pod_sandbox_status(sandbox_id)
        assert info.state == rt.SandboxState.READY
        assert info.network_mode == rt.NamespaceMode.POD
        assert (info.name, info.uid, info.attempt) == ("ip", "uid-ip", 0)
        pod_cidr = ipaddress.ip_network(runtime.settings.runtime.pod_cidrs[0])
        assert ipaddress.ip_address(info.ip) in pod_cidr
        listed = await runtime.client.list_pod_sandbox_statuses({rt.LABEL_POD_UID: "uid-ip"})
        assert [s.ip for s in listed] == [info.ip]
    finally:
        await _remove(runtime, sandbox_id)


async def test_busybox_container_output_reaches_its_log(runtime: Instance) -> None:
    config = sandbox_config(runtime, "hello")
    sandbox_id = await runtime.client.run_pod_sandbox(config)
    try:
        container = rt.ContainerConfig(
            name="hello", attempt=0, image=settings_.BUSYBOX_IMAGE, log_path="hello/0.log",
            command=("sh", "-c", "echo hello"),
        )
        container_id = await runtime.client.create_container(sandbox_id, container, config)
        await runtime.client.start_container(container_id)

        async def exited() -> rt.ContainerInfo | None:
            info = await runtime.client.container_status(container_id)
            return info if info.state == rt.ContainerState.EXITED else None

        info = await eventually(exited, within=20, what="container exit")
        assert (info.exit_code, info.sandbox_id, info.name) == (0, sandbox_id, "hello")
        log = Path(config.log_directory) / "hello" / "0.log"
        assert info.log_path == str(log)
        assert " stdout F hello" in log.read_text()
        listed = await runtime.client.list_containers(sandbox_id)
        assert [c.id for c in listed] == [container_id]
        await runtime.client.remove_container(container_id)
    finally:
        await _remove(runtime, sandbox_id)


async def test_exec_sync_in_a_running_container(runtime: Instance) -> None:
    config = sandbox_config(runtime, "exec")
    sandbox_id = await runtime.client.run_pod_sandbox(config)
    try:
        container = rt.ContainerConfig(
            name="sleeper", attempt=0, image=settings_.BUSYBOX_IMAGE, log_path="sleeper.log",
            command=("sleep", "3600"),
        )
        container_id = await runtime.client.create_container(sandbox_id, container, config)
        await runtime.client.start_container(container_id)
        result = await runtime.client.exec_sync(container_id, ["sh", "-c", "echo out; exit 3"], 10)
        assert (result.stdout, result.exit_code) == (b"out\n", 3)
        await runtime.client.stop_container(container_id, 0)
        await runtime.client.remove_container(container_id)
    finally:
        await _remove(runtime, sandbox_id)


async def test_stop_and_remove_leave_no_netns_veth_or_ip(runtime: Instance) -> None:
    ports_before = await cni.bridge_ports(runtime.data_dir)
    sandbox_id = await runtime.client.run_pod_sandbox(sandbox_config(runtime, "clean"))
    netns = await runtime.client.sandbox_netns_path(sandbox_id)
    runtime.netns_seen.add(netns)
    assert _exists(netns)
    assert len(await cni.bridge_ports(runtime.data_dir)) == len(ports_before) + 1
    assert cni.ipam_allocations(runtime.data_dir)

    await _remove(runtime, sandbox_id)

    assert not _exists(netns)
    assert await cni.bridge_ports(runtime.data_dir) == ports_before
    assert cni.ipam_allocations(runtime.data_dir) == []
    with pytest.raises(cri_errors.NotFound, match=sandbox_id):
        await runtime.client.pod_sandbox_status(sandbox_id)


async def test_unknown_container_is_not_found(runtime: Instance) -> None:
    with pytest.raises(cri_errors.NotFound) as caught:
        await runtime.client.container_status(rt.ContainerID("no-such-container"))
    assert "ContainerStatus no-such-container" in str(caught.value)
    assert caught.value.endpoint == runtime.containerd.endpoint


async def test_nonexistent_endpoint_is_unavailable_within_the_connect_timeout() -> None:
    endpoint = "unix:///tmp/nodelet-no-such-dir/containerd.sock"
    timeouts = settings_.CriTimeouts(connect=1.0)
    started = time.monotonic()
    with pytest.raises(cri_errors.RuntimeUnavailable, match=endpoint):
        await cri_client.RuntimeClient.connect(endpoint, timeouts=timeouts)
    assert time.monotonic() - started < timeouts.connect + 1.0


async def test_image_filesystem_and_container_writable_layer_usage(runtime: Instance) -> None:
    filesystems = await runtime.client.image_fs_info()
    assert filesystems and all(Path(f.mountpoint).is_dir() for f in filesystems)
    assert Path(filesystems[0].mountpoint).is_relative_to(runtime.data_dir)

    async def measured() -> bool:  # containerd sums its snapshots every 10 s (stats period)
        return (await runtime.client.image_fs_info())[0].used_bytes > 0

    await eventually(measured, within=30, what="image filesystem usage")
    config = sandbox_config(runtime, "writer")
    sandbox_id = await runtime.client.run_pod_sandbox(config)
    try:
        container = rt.ContainerConfig(
            name="writer", attempt=0, image=settings_.BUSYBOX_IMAGE, log_path="writer.log",
            command=("sh", "-c", "dd if=/dev/zero of=/big bs=1M count=3 && sleep 3600"),
            labels={rt.LABEL_POD_UID: "uid-writer", rt.LABEL_CONTAINER_NAME: "writer"},
        )
        container_id = await runtime.client.create_container(sandbox_id, container, config)
        await runtime.client.start_container(container_id)

        async def written() -> rt.ContainerStats | None:
            stats = await runtime.client.list_container_stats({rt.LABEL_POD_UID: "uid-writer"})
            ours = [s for s in stats if s.id == container_id]
            layer = ours[0].writable_layer_bytes if ours else None
            return ours[0] if layer is not None and layer >= 3 * 1024 * 1024 else None

        stats = await eventually(written, within=30, what="3 MiB in the writable layer")
        assert (stats.pod_uid, stats.name) == ("uid-writer", "writer")
        assert stats.memory_working_set is not None and stats.memory_working_set > 0
        assert stats.writable_layer_inodes is not None and stats.writable_layer_inodes >= 1
        await runtime.client.stop_container(container_id, 0)
        await runtime.client.remove_container(container_id)
    finally:
        await _remove(runtime, sandbox_id)
