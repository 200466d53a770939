"""The node suite's stand-in for systemd (tests/conformance/units.py): its `systemctl` shim,
run as the suite runs it, stops and restarts a real process and hands it the suite's config."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import units  # noqa: E402  (tests/conformance/units.py)


@dataclass
class SleepService:
    """A `sleep` process as the unit's agent; `configs`: what each start was given."""

    process: subprocess.Popen[bytes] | None = None
    configs: list[Path | None] = field(default_factory=list)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)
        self.process.wait(timeout=10)

    def start(self, config: Path | None) -> None:
        self.configs.append(config)
        self.process = subprocess.Popen(["sleep", "600"])


def systemctl(server: units.UnitServer, *args: str) -> subprocess.CompletedProcess[str]:
    """The shim as the suite runs it: `sudo systemctl ...` with the server's PATH."""
    env = server.env({"PATH": "/usr/bin:/bin"})
    return subprocess.run(["sudo", "systemctl", *args], env=env, capture_output=True,
                          text=True, timeout=30, check=False)


def test_the_suite_s_systemctl_stops_and_restarts_the_agent(tmp_path: Path) -> None:
    service = SleepService()
    service.start(None)
    config = tmp_path / "work" / "kubelet-config"
    try:
        with units.UnitServer("kubelet-test", service, tmp_path / "units", config) as server:
            listed = systemctl(server, "list-units", "*kubelet*", "--state=running")
            assert listed.returncode == 0 and "kubelet-test.service" in listed.stdout

            assert systemctl(server, "reset-failed", "kubelet-test").returncode == 0
            assert systemctl(server, "kill", "kubelet-test").returncode == 0
            assert not service.running()
            gone = systemctl(server, "list-units", "*kubelet*", "--state=running")
            assert "kubelet-test" not in gone.stdout
            assert "kubelet-test.service" in systemctl(server, "list-units").stdout

            config.parent.mkdir()
            config.write_text("kind: KubeletConfiguration\n")  # the suite's, while stopped
            assert systemctl(server, "restart", "kubelet-test").returncode == 0
            assert service.running() and service.configs == [None, config]

            assert systemctl(server, "kill", "--signal=SIGKILL", "kubelet-test").returncode == 0
            assert service.process is not None
            assert service.process.returncode == -signal.SIGKILL

            bad = systemctl(server, "kill", "--signal=NOPE", "kubelet-test")
            assert bad.returncode == 1 and "Failed to parse signal string NOPE" in bad.stdout

            unknown = systemctl(server, "restart", "containerd")
            assert unknown.returncode == 5 and "not found" in unknown.stdout
            assert server.log[:2] == ["list-units *kubelet* --state=running",
                                      "reset-failed kubelet-test"]
    finally:
        if service.running():
            service.stop(signal.SIGKILL)
