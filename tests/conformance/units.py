"""What the node suite's `[Serial]` specs ask of systemd, for a machine without it.

The node suite (test/e2e_node/util.go) restarts and stops the node agent through the unit its
own services start it in:

    sudo systemctl list-units '*kubelet*' [--state=running]   # finds `kubelet-\\w+`
    sudo systemctl reset-failed <unit>
    sudo systemctl kill <unit>        # then waits until 127.0.0.1:10248/healthz fails
    sudo systemctl restart <unit>     # then waits until healthz answers and the node is Ready

and, to change the configuration, writes the whole KubeletConfiguration to `kubelet-config`
in its working directory while the agent is stopped (`updateKubeletConfig`): its own kubelet
runs with `--config` of that file. This machine has no systemd (pid 1 is not systemd), so
`UnitServer` stands in for the one unit: `bin_dir()` holds a `systemctl` and a `sudo` (we
are root: it runs its arguments) that the suite finds first on its PATH; `systemctl` sends
its arguments over a unix socket to the server, in the harness process, which stops and
starts the agent through its `Service`, as the unit would. The agent is started again with
the suite's `kubelet-config` once the suite has written one.

Nothing else of systemd is there: the specs that stop the container runtime through D-Bus
(`mirror_pod_grace_period_test.go`) find no bus, on either agent. And it is simpler than a
unit: `kill` signals the agent's own process (not a control group; nodelet's containerd and
the pods are not the agent's to kill, as they are not the kubelet's unit's) and waits until it
has exited, where `systemctl kill` returns at once (the suite waits for healthz to fail
anyway).
"""

from __future__ import annotations

import json
import signal
import socket
import socketserver
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

ENV_SOCKET = "NODE_SUITE_UNITS_SOCKET"


class Service(Protocol):
    """The agent under test as the unit runs it."""

    def running(self) -> bool: ...

    def stop(self, sig: int) -> None:
        """Send `sig` to it and wait until it has exited."""

    def start(self, config: Path | None) -> None:
        """Start it again (`config`: the suite's KubeletConfiguration file, if it wrote one);
        returns once the process is started, as systemd's `restart` of a simple unit does."""


_SYSTEMCTL = """#!{python}
# The node suite's `systemctl`, standing in for systemd (tests/conformance/units.py).
import json, os, socket, sys
with socket.socket(socket.AF_UNIX) as s:
    s.connect(os.environ[{env!r}])
    s.sendall(json.dumps(sys.argv[1:]).encode() + b"\\n")
    answer = json.loads(s.makefile().readline())
sys.stdout.write(answer["out"])
sys.exit(answer["code"])
"""

_SUDO = """#!/bin/sh
# The node suite's `sudo`: the harness runs as root (tests/conformance/units.py).
exec "$@"
"""


@dataclass
class UnitServer:
    """The unit `name` (e.g. `kubelet-nodelet`, which the suite's `kubelet-\\w+` matches) of
    `service`; the shims and the socket in `directory`; `config`: where the suite writes its
    `kubelet-config` (its working directory)."""

    name: str
    service: Service
    directory: Path
    config: Path
    log: list[str] = field(default_factory=list)
    _server: socketserver.ThreadingUnixStreamServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def socket_path(self) -> Path:
        return self.directory / "units.sock"

    def bin_dir(self) -> Path:
        return self.directory / "bin"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with the shims first on PATH and the socket's address."""
        return {**base, "PATH": f"{self.bin_dir()}:{base.get('PATH', '')}",
                ENV_SOCKET: str(self.socket_path)}

    def __enter__(self) -> UnitServer:
        bin_dir = self.bin_dir()
        bin_dir.mkdir(parents=True, exist_ok=True)
        for name, text in (("systemctl", _SYSTEMCTL.format(python=sys.executable,
                                                            env=ENV_SOCKET)),
                           ("sudo", _SUDO)):
            path = bin_dir / name
            path.write_text(text)
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.socket_path.unlink(missing_ok=True)
        units = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                argv = json.loads(self.rfile.readline())
                try:
                    code, out = units.call(argv)
                except Exception as exc:  # the harness's failure, said as systemctl would
                    code, out = 1, f"Job for {units.name}.service failed: {exc}\n"
                self.wfile.write(json.dumps({"code": code, "out": out}).encode() + b"\n")

        self._server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        threading.Thread(target=self._server.serve_forever, name="units", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.socket_path.unlink(missing_ok=True)

    # -- systemctl -----------------------------------------------------------------------------

    def call(self, argv: list[str]) -> tuple[int, str]:
        """`systemctl argv...`: (exit code, output)."""
        with self._lock:  # one job at a time, as systemd queues them
            self.log.append(" ".join(argv))
            options = [a for a in argv if a.startswith("-")]
            words = [a for a in argv if not a.startswith("-")]
            if not words:
                return 1, "systemctl: a command is needed\n"
            command, units = words[0], words[1:]
            if command == "list-units":
                return 0, self._list(running_only="--state=running" in options)
            if not units:
                return 1, f"systemctl {command}: a unit name is needed\n"
            if units[0].removesuffix(".service") != self.name:
                return 5, f"Failed to {command} {units[0]}: Unit {units[0]} not found.\n"
            return self._act(command, options)

    def _list(self, *, running_only: bool) -> str:
        running = self.service.running()
        if running_only and not running:
            return "0 loaded units listed.\n"
        state = "active running" if running else "failed failed"
        return (f"  UNIT LOAD ACTIVE SUB DESCRIPTION\n  {self.name}.service loaded {state} "
                f"the node agent under test\n\n1 loaded units listed.\n")

    def _act(self, command: str, options: list[str]) -> tuple[int, str]:
        if command == "reset-failed":
            return 0, ""
        if command == "is-active":
            running = self.service.running()
            return (0, "active\n") if running else (3, "inactive\n")
        if command == "kill":
            sig = _signal(options)
            if self.service.running():
                self.service.stop(sig)
            return 0, ""
        if command == "stop":
            if self.service.running():
                self.service.stop(signal.SIGTERM)
            return 0, ""
        if command in ("start", "restart"):
            if command == "restart" and self.service.running():
                self.service.stop(signal.SIGTERM)
            if not self.service.running():
                self.service.start(self.config if self.config.exists() else None)
            return 0, ""
        return 1, f"systemctl {command}: not known to this stand-in of systemd\n"


def _signal(options: list[str]) -> int:
    """`--signal=NAME|N` (`-s` is not used by the suite); SIGTERM by default, as systemd.
    ValueError for a signal that is not one."""
    for option in options:
        if option.startswith("--signal="):
            value = option.partition("=")[2]
            if value.isdigit():
                return int(value)
            name = value if value.startswith("SIG") else f"SIG{value}"
            if not isinstance(found := getattr(signal.Signals, name, None), signal.Signals):
                raise ValueError(f"Failed to parse signal string {value}.")
            return int(found)
    return signal.SIGTERM


def call(socket_path: Path, argv: list[str]) -> tuple[int, str]:
    """What the shim does, from Python (tests)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(socket_path))
        s.sendall(json.dumps(argv).encode() + b"\n")
        answer = json.loads(s.makefile().readline())
    return int(answer["code"]), str(answer["out"])
