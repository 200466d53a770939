"""Kubernetes' sample device plugin as a test peer.

    async with sample_plugin(agent.settings.device_plugins_dir, log=tmp_path / "dp.log") as p:
        ...  # p.pid, p.log

`sample-device-plugin` (build/kube/<KUBE_VERSION>/, `kube/build.sh sample-device-plugin`,
built from k8s.io/kubernetes/test/images/sample-device-plugin at the pinned release) is the
node e2e suite's plugin. Read in its source at KUBE_VERSION: it serves `example.com/resource`
with two healthy devices, `Dev-1` and `Dev-2`, on a socket `dp.<unix time>` in
`$PLUGIN_SOCK_DIR`, and registers with the kubelet's fixed socket
`/var/lib/kubelet/device-plugins/kubelet.sock`; its Allocate makes an empty file `/tmp/<ID>`
per device and answers a mount of it at the same path in the container (and a CDI device
when `CDI_ENABLED` is set, not used here); no envs, no PreStartContainer, no preferred
allocation. When `kubelet.sock` is made again (an agent restart) it starts its server again
and registers again.

Because the registration path is fixed, the plugin runs in a mount namespace of its own
(`unshare --mount`): `/var/lib` there is an empty tmpfs with nodelet's device plugins
directory bind-mounted at `/var/lib/kubelet/device-plugins`, so it sees nodelet's
`kubelet.sock` where it looks and puts its socket in nodelet's directory; nothing changes on
the host. It is stopped by PID (SIGTERM: it stops its server and removes its socket).

    async with health_plugin(directory, RESOURCE, {"dev": "Healthy"}, log=...) as p:
        p.update({"dev": "Unhealthy"})  # a new list through ListAndWatch

`test-device-plugin` (`kube/build.sh test-device-plugin`, kube/kubernetes/testdeviceplugin) is
the kubelet's own device plugin stub, the sample plugin's, serving the resource and devices
it is given, whose health the test changes as the node e2e suite's testdeviceplugin does
(UpdateDevices): each line on its stdin is the new device list. It registers on the
`kubelet.sock` of the directory it is given, so it runs as a plain host process; its Allocate
answers an env `TEST_DEVICE_IDS`. Stopped by PID likewise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from support.controlplane import binary, stop_process
from support.polling import eventually

RESOURCE = "example.com/resource"
DEVICES = ("Dev-1", "Dev-2")
KUBELET_DIR = "/var/lib/kubelet/device-plugins"
STOP_WITHIN = 10.0


@dataclass
class SamplePlugin:
    process: subprocess.Popen[bytes]
    log: Path
    directory: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def sockets(self) -> list[Path]:
        return sorted(self.directory.glob("dp.*"))

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        stop_process(self.process, STOP_WITHIN)


def start(directory: Path, log: Path) -> SamplePlugin:
    """Start the plugin for the device plugins directory `directory` (see the module)."""
    program = binary("sample-device-plugin")
    script = ('set -e; mount -t tmpfs -o mode=0755 nodelet-dp /var/lib; '
              f'mkdir -p {KUBELET_DIR}; mount --bind "$1" {KUBELET_DIR}; exec "$2"')
    unshare = shutil.which("unshare") or "unshare"
    env = {**os.environ, "PLUGIN_SOCK_DIR": KUBELET_DIR}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh",
             str(directory), str(program)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env=env)
    return SamplePlugin(process, log, directory)


@contextlib.asynccontextmanager
async def sample_plugin(directory: Path, *, log: Path) -> AsyncIterator[SamplePlugin]:
    """The plugin running (its socket made) for the block, stopped by PID after."""
    plugin = start(directory, log)
    try:
        await eventually(lambda: plugin.sockets() or not plugin.alive(), within=30,
                         what=f"the sample device plugin's socket in {directory}",
                         seen=lambda _: plugin.tail())
        assert plugin.alive(), plugin.tail()
        yield plugin
    finally:
        plugin.stop()
        for device in DEVICES:  # the files its Allocate made on the host
            with contextlib.suppress(FileNotFoundError):
                Path("/tmp", device).unlink()


@dataclass
class HealthPlugin:
    process: subprocess.Popen[bytes]
    log: Path
    socket: Path

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def alive(self) -> bool:
        return self.process.poll() is None

    def update(self, devices: dict[str, str]) -> None:
        """Send `devices` (ID -> health) as the plugin's new list."""
        assert self.process.stdin is not None
        self.process.stdin.write((_device_list(devices) + "\n").encode())
        self.process.stdin.flush()

    def stop(self) -> None:
        stop_process(self.process, STOP_WITHIN)




def _device_list(devices: dict[str, str]) -> str:
    return ",".join(f"{device}={health}" for device, health in devices.items())


@contextlib.asynccontextmanager
async def health_plugin(directory: Path, resource: str, devices: dict[str, str], *,
                        log: Path, exit_on_allocate: bool = False
                        ) -> AsyncIterator[HealthPlugin]:
    """test-device-plugin serving `resource` with `devices` (ID -> health), registered with
    the agent whose device plugins directory is `directory`, for the block; stopped by PID
    after. `exit_on_allocate`: it exits inside its first Allocate, answering nothing."""
    socket = directory / f"test-device-plugin-{resource.replace('/', '_')}.sock"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(binary("test-device-plugin")), f"--plugin-dir={directory}",
             f"--socket-name={socket.name}", f"--resource={resource}",
             f"--devices={_device_list(devices)}", "-v=2",
             *(["--exit-on-allocate"] if exit_on_allocate else [])],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    plugin = HealthPlugin(process, log, socket)
    try:
        await eventually(lambda: socket.is_socket() or not plugin.alive(), within=30,
                         what=f"the test device plugin's socket {socket}",
                         seen=lambda _: plugin.tail())
        assert plugin.alive(), plugin.tail()
        yield plugin
    finally:
        plugin.stop()
        if process.stdin is not None:
            process.stdin.close()
