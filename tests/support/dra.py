"""The DRA e2e suites' test driver as a test peer.

    async with running_driver(node, cdi_dir=..., kubeconfig=..., log=tmp_path / "dra.log") as d:
        ...  # d.pid, d.tail(), d.cdi_files()

`dra-test-driver` (build/kube/<KUBE_VERSION>/, `kube/build.sh dra-test-driver`, built from
k8s.io/kubernetes/test/e2e/dra/test-driver at the pinned release) runs its kubelet plugin as a
host process, as the suites run it: read in its source at KUBE_VERSION, it publishes a
ResourceSlice of `--num-devices` devices (`device-00`, ...) for `--node-name` with the
credentials of `--kubeconfig`, registers with the node through `<data dir>/plugins_registry`
(type DRAPlugin, serving v1.DRAPlugin on `<data dir>/plugins/test-driver.cdi.k8s.io/`), and
for each prepared claim writes a CDI spec `test-driver.cdi.k8s.io-<claim UID>-<request>.json`
into `--cdi-dir` whose device sets the env vars `claim_<claim>_<request>=true` and one per
opaque config parameter (`user_<key>`, `admin_<key>` from the class); unprepare removes it.
It is stopped by PID (SIGTERM: it stops its servers and removes its sockets).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from support.controlplane import binary, stop_process
from support.polling import eventually

DRIVER = "test-driver.cdi.k8s.io"
STOP_WITHIN = 10.0


@dataclass
class DraDriver:
    process: subprocess.Popen[bytes]
    log: Path
    cdi_dir: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def cdi_files(self) -> list[str]:
        return sorted(p.name for p in self.cdi_dir.glob(f"{DRIVER}-*.json"))

    def stop(self) -> None:
        stop_process(self.process, STOP_WITHIN)


def start(*, node: str, data_dir: Path, cdi_dir: Path, kubeconfig: Path, log: Path,
          devices: int = 2) -> DraDriver:
    cdi_dir.mkdir(parents=True, exist_ok=True)
    # Its socket's directory, as the kubelet's plugins dir is given to a driver's DaemonSet.
    (data_dir / "plugins" / DRIVER).mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(binary("dra-test-driver")), f"--kubeconfig={kubeconfig}", "kubelet-plugin",
             f"--node-name={node}", f"--num-devices={devices}",
             f"--plugin-registration-path={data_dir / 'plugins_registry'}",
             f"--datadir={data_dir / 'plugins'}", f"--cdi-dir={cdi_dir}"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    return DraDriver(process, log, cdi_dir)


@contextlib.asynccontextmanager
async def running_driver(*, node: str, data_dir: Path, cdi_dir: Path, kubeconfig: Path,
                      log: Path, devices: int = 2) -> AsyncIterator[DraDriver]:
    """The driver running, its registration socket made, for the block; stopped by PID
    after."""
    driver = start(node=node, data_dir=data_dir, cdi_dir=cdi_dir, kubeconfig=kubeconfig,
                   log=log, devices=devices)
    registry = data_dir / "plugins_registry"
    try:
        await eventually(lambda: list(registry.glob(f"{DRIVER}*")) or not driver.alive(),
                         within=30, what=f"the DRA test driver's socket in {registry}",
                         seen=lambda _: driver.tail())
        assert driver.alive(), driver.tail()
        yield driver
    finally:
        driver.stop()
