"""The embedded containerd: isolation, dual-stack, supervision and adoption."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import signal
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import Instance, InstanceFactory, runtime_bin_dir_for_tests, sandbox_config
from nodelet import app
from nodelet import settings as settings_
from nodelet.adapters import cni, containerd
from nodelet.adapters.cri import client as cri_client
from nodelet.adapters.cri import errors as cri_errors
from nodelet.services.serving import preflight
from support.polling import eventually

pytestmark = pytest.mark.runtime


def test_instances_get_distinct_bridges_and_ranges() -> None:
    a, b = Path("/tmp/nl-a"), Path("/tmp/nl-b")
    assert cni.bridge_name(a) != cni.bridge_name(b)
    assert len(cni.bridge_name(a)) <= 15
    assert cni.default_pod_cidr(a) != cni.default_pod_cidr(b)
    network = ipaddress.ip_network(cni.default_pod_cidr(a))
    assert network.prefixlen == 24 and 100 <= network.network_address.packed[1] <= 199


def test_each_data_dir_has_its_own_short_state_dir_under_run(tmp_path: Path) -> None:
    """Outside the data dir, so a pod in a user namespace reaches its rootfs wherever the data
    dir is; named by the resolved path, so a relative or symlinked name finds the same one."""
    data, link = tmp_path / "data", tmp_path / "link"
    data.mkdir()
    link.symlink_to(data)
    state = containerd.state_dir(data)
    assert state.parent == containerd.RUN_ROOT and len(state.name) == 16
    assert containerd.state_dir(link) == state
    assert containerd.state_dir(Path(os.path.relpath(data))) == state
    assert containerd.state_dir(tmp_path / "other") != state
    text = containerd.render_config(data, settings_.RuntimeSettings(), "overlayfs", programs(2))
    assert tomllib.loads(text)["state"] == str(state)
    assert f'Root = "{state}/runc"' in text


def programs(major: int) -> containerd.Programs:
    return containerd.Programs(containerd="/bin/containerd", shim="/bin/shim", ctr="/bin/ctr",
                               runc="/bin/runc", version=(major, 0, 0))


@pytest.mark.parametrize(("major", "version", "cri", "sandbox"), [
    (1, 2, 'plugins."io.containerd.grpc.v1.cri"', "sandbox_image = "),
    (2, 3, 'plugins."io.containerd.cri.v1.runtime"', "sandbox = "),
], ids=["containerd-1.x", "containerd-2.x"])
def test_config_keeps_listeners_private_and_restricts_oom_score_adj(
        tmp_path: Path, major: int, version: int, cri: str, sandbox: str) -> None:
    text = containerd.render_config(tmp_path, settings_.RuntimeSettings(), "overlayfs",
                                    programs(major))
    parsed = tomllib.loads(text)
    assert parsed["version"] == version
    assert "restrict_oom_score_adj = true" in text
    assert f"[{cri}]" in text
    assert f'address = "{tmp_path}/containerd/containerd.sock"' in text
    assert f'{sandbox}"{settings_.PAUSE_IMAGE}"' in text
    assert 'stream_server_port = "0"' in text
    assert 'stream_server_address = "127.0.0.1"' in text
    assert "enable_tls_streaming = false" in text
    assert 'runtime_path = "/bin/shim"' in text and 'BinaryName = "/bin/runc"' in text
    assert "io.containerd.nri.v1.nri" in parsed["disabled_plugins"]


@pytest.mark.parametrize(("version", "period"), [
    ((2, 4, 2), "10s"), ((2, 3, 4), "10s"), ((2, 2, 9), None), ((1, 6, 20), None),
])
def test_cpu_samples_are_taken_every_10_s_where_containerd_takes_them(
        tmp_path: Path, version: tuple[int, int, int], period: str | None) -> None:
    found = dataclasses.replace(programs(version[0]), version=version)
    parsed = tomllib.loads(containerd.render_config(
        tmp_path, settings_.RuntimeSettings(), "overlayfs", found))
    table = parsed["plugins"].get("io.containerd.cri.v1.runtime") or \
        parsed["plugins"]["io.containerd.grpc.v1.cri"]
    assert table.get("stats_collect_period") == period


def test_a_missing_or_old_containerd_is_refused_with_what_to_do(tmp_path: Path) -> None:
    missing = dataclasses.replace(settings_.RuntimeSettings(), runtime_bin_dir=tmp_path)
    with pytest.raises(containerd.ContainerdError, match="make runtime"):
        containerd.find_programs(missing)
    old = tmp_path / "containerd"
    old.write_text("#!/bin/sh\necho containerd github.com/containerd/containerd v1.5.9\n")
    old.chmod(0o755)
    with pytest.raises(containerd.ContainerdError, match=r"containerd 1\.5\.9; nodelet needs 1\.6"):
        containerd.find_programs(missing)


async def test_the_state_of_an_older_nodelet_is_refused_with_what_to_do(
    tmp_path: Path,
) -> None:
    """A data dir whose runtime state is still where an older nodelet kept it (its pods may
    run from it) is refused before any containerd is adopted or started."""
    (tmp_path / "containerd" / "state").mkdir(parents=True)
    settings = dataclasses.replace(settings_.RuntimeSettings(),
                                   runtime_bin_dir=runtime_bin_dir_for_tests())
    runner = containerd.EmbeddedContainerd(data_dir=tmp_path, settings=settings)
    with pytest.raises(containerd.ContainerdError, match=r"nodelet reset --data-dir"):
        await runner.start()
    assert not runner.paths.config.exists()  # nothing written, nothing started


async def test_dual_stack_sandbox_gets_both_families(instances: InstanceFactory) -> None:
    # A random unique-local /64 and an IPv4 /24 outside the derived 10.100-199 ranges.
    v6 = f"fd{os.getpid() % 256:02x}:{os.urandom(2).hex()}::/64"
    instance = await instances(pod_cidrs=(f"10.250.{os.getpid() % 250}.0/24", v6))
    sandbox_id = await instance.client.run_pod_sandbox(sandbox_config(instance, "dual"))
    instance.netns_seen.add(await instance.client.sandbox_netns_path(sandbox_id))
    info = await instance.client.pod_sandbox_status(sandbox_id)
    addresses = [ipaddress.ip_address(a) for a in (info.ip, *info.additional_ips)]
    assert sorted(a.version for a in addresses) == [4, 6], info
    assert any(a in ipaddress.ip_network(v6) for a in addresses)
    await instance.client.stop_pod_sandbox(sandbox_id)
    await instance.client.remove_pod_sandbox(sandbox_id)


def test_more_runtime_handlers_are_runc_under_other_names(tmp_path: Path) -> None:
    for major, table in ((2, "io.containerd.cri.v1.runtime"), (1, "io.containerd.grpc.v1.cri")):
        settings = dataclasses.replace(settings_.RuntimeSettings(),
                                       runc_handlers=("test-handler",))
        parsed = tomllib.loads(containerd.render_config(tmp_path, settings, "overlayfs",
                                                        programs(major)))
        runtimes = parsed["plugins"][table]["containerd"]["runtimes"]
        assert sorted(runtimes) == ["runc", "test-handler"]
        assert runtimes["test-handler"] == runtimes["runc"]


async def test_a_sandbox_runs_on_a_named_runtime_handler(instances: InstanceFactory) -> None:
    instance = await instances(runc_handlers=("test-handler",))
    status = await instance.client.status()
    assert "test-handler" in {h.name for h in status.handlers} or not status.handlers
    sandbox_id = await instance.client.run_pod_sandbox(sandbox_config(instance, "handled"),
                                                       runtime_handler="test-handler")
    instance.netns_seen.add(await instance.client.sandbox_netns_path(sandbox_id))
    await instance.client.stop_pod_sandbox(sandbox_id)
    await instance.client.remove_pod_sandbox(sandbox_id)
    with pytest.raises(cri_errors.CriError, match="absent"):  # handlers are looked up
        await instance.client.run_pod_sandbox(sandbox_config(instance, "unhandled"),
                                              runtime_handler="absent")


async def test_killed_containerd_is_restarted_and_the_client_recovers(
    instances: InstanceFactory,
) -> None:
    instance = await instances()
    old_pid = instance.containerd.pid
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)

    async def restarted() -> bool:
        return instance.containerd.restarts >= 1 and instance.containerd.pid != old_pid

    await eventually(restarted, within=20, what="containerd restart")
    # Calls fail until the new containerd answers: "not yet", not a failure.
    status = await eventually(instance.client.status, within=20, what="CRI status after restart",
                              ignoring=(cri_errors.CriError,))
    assert status.runtime_ready
    sandbox_id = await instance.client.run_pod_sandbox(sandbox_config(instance, "after"))
    instance.netns_seen.add(await instance.client.sandbox_netns_path(sandbox_id))
    await instance.client.stop_pod_sandbox(sandbox_id)
    await instance.client.remove_pod_sandbox(sandbox_id)


async def test_second_start_adopts_the_running_containerd(instances: InstanceFactory) -> None:
    instance = await instances()
    await instance.containerd.detach()
    second = containerd.EmbeddedContainerd(
        data_dir=instance.data_dir, settings=instance.settings.runtime
    )
    await second.start()
    try:
        assert second.adopted
        assert second.pid == instance.containerd.pid
        assert (await instance.client.status()).runtime_ready
    finally:
        await second.detach()


async def test_the_runtime_says_its_cgroup_driver(runtime: Instance) -> None:
    """CRI RuntimeConfig (KEP-4033): containerd 2.x says cgroupfs, 1.6 lacks the call."""
    expected = "cgroupfs" if runtime.containerd.programs.major >= 2 else None
    assert await runtime.client.cgroup_driver() == expected


async def test_a_runtime_on_the_systemd_driver_is_refused(instances: InstanceFactory) -> None:
    """A real containerd 2.x whose runc runs with SystemdCgroup = true: nodelet, which lays out
    cgroupfs paths, refuses it with what to change, as the 1.37 kubelet refuses a mismatch."""
    instance = await instances()
    if instance.containerd.programs.major < 2:
        pytest.skip("containerd 1.6 has no RuntimeConfig call (the other runtime's pass)")
    await instance.containerd.stop()
    config = instance.containerd.paths.config
    systemd = config.with_name("systemd.toml")
    systemd.write_text(config.read_text().replace(
        "BinaryName = ", "SystemdCgroup = true\n  BinaryName = ", 1))
    process = subprocess.Popen([instance.containerd.programs.containerd, "--config", str(systemd)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = await eventually(
            lambda: cri_client.RuntimeClient.connect(instance.containerd.endpoint,
                                                     timeouts=settings_.CriTimeouts()),
            within=30, what="containerd on the systemd driver answers",
            ignoring=(cri_errors.CriError,))
        assert await client.cgroup_driver() == "systemd"
        with pytest.raises(preflight.StartupError, match="SystemdCgroup = false"):
            await app._check_cgroup_driver(client, instance.containerd.endpoint)
    finally:
        process.terminate()
        process.wait(timeout=20)
