"""The embedded containerd: one private containerd per nodelet data dir, supervised.

Layout under `<data-dir>/containerd/`: `config.toml`, `root/` (images, snapshots, metadata),
`containerd.sock` (CRI and containerd API), `containerd.pid`, `containerd.log`. The state
(task bundles with their rootfs mounts, runc's state, sandboxes' shm) is not in the data dir
but in `/run/nodelet/<16 hex digits of a hash of the resolved data dir>/`, 0711 as
containerd's own `/run/containerd`: runc sets up a pod in a user namespace (hostUsers: false)
as the pod's root, an unprivileged host user, which must traverse every directory on the way
to the rootfs, and a data dir may be anywhere (under /root, 0700, or `mktemp -d`). The CNI
config comes from `nodelet.adapters.cni`.

Lifecycle:
- `start()` adopts a live containerd named by the pid file whose socket answers, or spawns
  one in its own session (so that stopping or killing nodelet never takes pods down), then
  starts a named supervisor task that restarts containerd with back-off when it dies.
- `wait_ready(client)` waits for CRI RuntimeReady and NetworkReady, then (`ensure_images`)
  imports the local pause and busybox archives when the runtime lacks them.
- `detach()` (alias `close()`) only stops supervising: normal nodelet shutdown leaves
  containerd and its pods running. `stop()` terminates containerd (reset, tests).

Errors: `ContainerdError`, with a message naming the log file to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodelet import settings as settings_
from nodelet.adapters import cni, commands, host, hostdirs
from nodelet.adapters.cri import client as cri_client
from nodelet.adapters.cri import errors as cri_errors

log = logging.getLogger(__name__)

# How often the supervisor checks that containerd is alive, and how long stop() waits after
# SIGTERM before SIGKILL (containerd 1.6 usually exits within a second).
_POLL_INTERVAL = 0.1
_STOP_GRACE = 10.0
# How long CRI may take to show an image `ctr` has just imported.
_IMAGE_SEEN_WITHIN = 10.0
# A run this long counts as healthy: the restart back-off starts again from its initial value.
_HEALTHY_RUN = 30.0
# Plugins we never use; skipping them avoids probing (and log noise) at every start.
_DISABLED_PLUGINS = (
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
    # containerd 2.x: NRI listens on one socket per host (/var/run/nri/nri.sock), which two
    # instances would fight over; nodelet uses no NRI plugin.
    "io.containerd.nri.v1.nri",
)


# Where each instance's runtime state lives (see the module docstring).
RUN_ROOT = Path("/run/nodelet")


class ContainerdError(Exception):
    """The embedded containerd could not be started, made ready or given its images."""


# Kubernetes 1.37 supports containerd 2.3+; 1.6 (Debian 12's) still runs nodelet's pods and is
# kept as the other runtime, older releases lack CRI v1 features nodelet uses.
MIN_VERSION = (1, 6, 0)
_VERSION = re.compile(r"\bv?(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Programs:
    """The runtime's programs as absolute paths, and containerd's version."""

    containerd: str
    shim: str
    ctr: str
    runc: str
    version: tuple[int, int, int]

    @property
    def major(self) -> int:
        return self.version[0]

    def describe(self) -> str:
        return f"containerd {'.'.join(map(str, self.version))} ({self.containerd})"


def _program(name: str, bin_dir: Path | None) -> str:
    if bin_dir is not None:
        path = bin_dir / name
        if not os.access(path, os.X_OK):
            raise ContainerdError(
                f"{path} is missing: run `make runtime` to build containerd and runc there, "
                "or choose the containerd on PATH (--runtime-bin-dir system)")
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise ContainerdError(
            f"{name} is not on PATH: install containerd (Debian: apt-get install containerd "
            "runc) or build it (`make runtime`, then --runtime-bin-dir build/runtime/VERSION)")
    return found


def find_programs(settings: settings_.RuntimeSettings) -> Programs:
    """The embedded runtime's programs (`settings.runtime_bin_dir`, else PATH) and the
    version containerd reports; raises ContainerdError naming what is missing or too old."""
    bin_dir = settings.runtime_bin_dir
    containerd = _program("containerd", bin_dir)
    try:
        out = subprocess.run([containerd, "--version"], capture_output=True, text=True,
                             timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ContainerdError(f"cannot run {containerd} --version: {exc}") from exc
    found = _VERSION.search(out)
    if found is None:
        raise ContainerdError(f"{containerd} --version printed no version: {out.strip()!r}")
    version = (int(found[1]), int(found[2]), int(found[3]))
    if version < MIN_VERSION:
        raise ContainerdError(
            f"{containerd} is containerd {'.'.join(map(str, version))}; nodelet needs "
            f"{'.'.join(map(str, MIN_VERSION))} or later (`make runtime` builds 2.x)")
    return Programs(containerd=containerd, shim=_program("containerd-shim-runc-v2", bin_dir),
                    ctr=_program("ctr", bin_dir), runc=_program("runc", bin_dir),
                    version=version)


def state_dir(data_dir: Path) -> Path:
    """The instance's runtime state dir: one per data dir, so that instances never share it,
    and a short name whatever the data dir's length."""
    key = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return RUN_ROOT / key


@dataclass(frozen=True)
class ContainerdPaths:
    """Where one instance's containerd keeps everything."""

    base: Path
    state: Path

    @classmethod
    def of(cls, data_dir: Path) -> ContainerdPaths:
        return cls(base=data_dir / "containerd", state=state_dir(data_dir))

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def legacy_state(self) -> Path:
        """Where nodelet kept the state before it moved under RUN_ROOT (reset removes it)."""
        return self.base / "state"

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def pid_file(self) -> Path:
        return self.base / "containerd.pid"

    @property
    def log_file(self) -> Path:
        return self.base / "containerd.log"


def _toml_str(value: str | Path) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_config(data_dir: Path, settings: settings_.RuntimeSettings, snapshotter: str,
                  programs: Programs) -> str:
    """containerd's config.toml for this instance: version 3 for containerd 2.x, version 2
    for 1.x (the same settings, under 2.x's split CRI plugins).

    Every listener is private to the instance: the gRPC and ttrpc sockets live in the data dir,
    the debug and metrics listeners are off, NRI (whose socket is one per host) is off, and the
    CRI streaming server (exec, attach, port-forward; the node server proxies to it) listens on
    loopback, plain HTTP, on a port the kernel picks (its default 10010 would collide between
    instances; containerd puts the bound port into the URLs it hands out, measured on 1.6.20).
    The shim and runc are the ones `programs` names, runc's state under the instance's state
    (`ContainerdPaths.state`, outside the data dir).
    """
    parts = _ConfigParts(data_dir, settings, snapshotter, programs)
    return parts.head() + (parts.v3() if programs.major >= 2 else parts.v2())


@dataclass(frozen=True)
class _ConfigParts:
    data_dir: Path
    settings: settings_.RuntimeSettings
    snapshotter: str
    programs: Programs

    def head(self) -> str:
        p = ContainerdPaths.of(self.data_dir)
        disabled = ", ".join(_toml_str(x) for x in _DISABLED_PLUGINS)
        return f"""version = {3 if self.programs.major >= 2 else 2}
root = {_toml_str(p.root)}
state = {_toml_str(p.state)}
disabled_plugins = [{disabled}]

[grpc]
  address = {_toml_str(p.socket)}

[ttrpc]
  address = {_toml_str(str(p.socket) + ".ttrpc")}

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = {_toml_str(p.base / "opt")}
"""

    def runtime(self) -> str:
        return f"""  # These machines lack CAP_SYS_RESOURCE: without this every sandbox fails with
  # "failed to update /proc/self/oom_score_adj: Permission denied".
  restrict_oom_score_adj = true
  # Pods' seLinuxOptions are applied where the host has SELinux (admission refuses them
  # elsewhere); containerd would otherwise drop them without a word.
  enable_selinux = {"true" if host.selinux_enabled() else "false"}
"""

    def stats(self) -> str:
        """containerd 2.3+ samples every container's and sandbox's CPU for its own
        usageNanoCores, by default each second: with 30 idle pods that was 1.8 of its 2.3
        CPU-seconds a minute (bench/eventdriven.py). nodelet computes rates between its own
        scrapes (as the kubelet's CRI stats provider), so a sample each 10 s is enough."""
        if self.programs.version < (2, 3, 0):
            return ""
        return '  stats_collect_period = "10s"\n'

    def cdi(self) -> str:
        """CDI on, reading the specs of `cdi_spec_dirs` (containerd 2.x's defaults unless
        set): the CDI devices of DRA claims and device plugins are resolved there."""
        dirs = ", ".join(_toml_str(d) for d in self.settings.cdi_spec_dirs)
        return f"  enable_cdi = true\n  cdi_spec_dirs = [{dirs}]\n"

    def runc(self, table: str) -> str:
        """The `runc` handler, and the same runc under each name of `runc_handlers`."""
        state = ContainerdPaths.of(self.data_dir).state
        return "".join(f"""
{table}.containerd.runtimes.{name}]
  runtime_type = "io.containerd.runc.v2"
  runtime_path = {_toml_str(self.programs.shim)}

{table}.containerd.runtimes.{name}.options]
  # runc's state of this instance's containers stays under the instance's own state dir.
  Root = {_toml_str(state / "runc")}
  BinaryName = {_toml_str(self.programs.runc)}
""" for name in ("runc", *self.settings.runc_handlers))

    def cni(self, table: str, bin_dirs: str) -> str:
        return f"""
{table}.cni]
  {bin_dirs}
  conf_dir = {_toml_str(cni.conf_dir(self.data_dir))}
  max_conf_num = 1
"""

    def v3(self) -> str:
        images = '[plugins."io.containerd.cri.v1.images"'
        runtime = '[plugins."io.containerd.cri.v1.runtime"'
        return f"""
{images}]
  snapshotter = {_toml_str(self.snapshotter)}

{images}.pinned_images]
  sandbox = {_toml_str(settings_.PAUSE_IMAGE)}

{runtime}]
{self.runtime()}{self.stats()}{self.cdi()}
{runtime}.containerd]
  default_runtime_name = "runc"
{self.runc(runtime)}{self.cni(runtime, f"bin_dirs = [{_toml_str(self.settings.cni_bin_dir)}]")}
[plugins."io.containerd.grpc.v1.cri"]
{_STREAMING}"""

    def v2(self) -> str:
        cri = '[plugins."io.containerd.grpc.v1.cri"'
        return f"""
{cri}]
  sandbox_image = {_toml_str(settings_.PAUSE_IMAGE)}
{self.runtime()}{_STREAMING}
{cri}.containerd]
  snapshotter = {_toml_str(self.snapshotter)}
  default_runtime_name = "runc"
{self.runc(cri)}{self.cni(cri, f"bin_dir = {_toml_str(self.settings.cni_bin_dir)}")}"""


_STREAMING = """  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_tls_streaming = false
"""


async def _wait_until(predicate: Callable[[], bool], limit: float) -> bool:
    """Poll `predicate` until it holds or `limit` seconds pass; returns its last value."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_POLL_INTERVAL)
    return True


async def _exit_of(pid: int | None) -> None:
    """Return once process `pid` has ended, woken by the kernel through a pidfd: nothing runs
    meanwhile (a poll every 0.1 s was a good part of an idle agent's CPU). Returns at once when
    no pidfd can be had (the process is gone, a kernel before 5.3): the caller polls then."""
    if pid is None:
        return
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _settle, ended)
    try:
        await ended
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _make_dirs(*dirs: Path) -> None:
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)


def _remove_tree(top: Path) -> None:
    """Remove a small tree of empty directories (the overlay check's scratch space)."""
    for d in sorted(top.glob("**/"), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()


async def overlay_works(scratch: Path) -> bool:
    """Whether an overlay mount works on the file system of `scratch` (a fresh directory)."""
    dirs = {name: scratch / name for name in ("lower", "upper", "work", "merged")}
    _make_dirs(*dirs.values())
    options = f"lowerdir={dirs['lower']},upperdir={dirs['upper']},workdir={dirs['work']}"
    status, _ = await commands.run(
        ["mount", "-t", "overlay", "overlay", "-o", options, str(dirs["merged"])], limit=10
    )
    if status == 0:
        await commands.run(["umount", str(dirs["merged"])], limit=10)
    _remove_tree(scratch)
    return status == 0


def _is_containerd(pid: int, config: Path) -> bool:
    """Whether `pid` is a live (not zombie) containerd started with `config`."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return (
        state not in ("Z", "X")
        and Path(cmdline[0].decode()).name == "containerd"
        and str(config).encode() in cmdline
    )


async def _socket_answers(path: Path) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def _check_archive(ref: str, archive: Path) -> None:
    if not archive.is_file():
        raise ContainerdError(f"image archive {archive} for {ref} is missing: run `make images`")


def _popen(argv: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    """Start containerd in a session of its own, so that nodelet's death does not reach it.

    Not asyncio's subprocess: its transport kills the child when garbage-collected.
    """
    with log_file.open("ab") as log:
        try:
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        except OSError as e:
            raise ContainerdError(f"cannot run {argv[0]}: {e}") from e


class EmbeddedContainerd:
    """A private containerd for one data dir. See the module docstring for the lifecycle."""

    def __init__(self, data_dir: Path, settings: settings_.RuntimeSettings) -> None:
        self._data_dir = data_dir
        self._settings = settings
        self._paths = ContainerdPaths.of(data_dir)
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._adopted = False
        self._supervisor: asyncio.Task[None] | None = None
        self._restarts = 0
        self._programs: Programs | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self._paths.socket}"

    @property
    def paths(self) -> ContainerdPaths:
        return self._paths

    @property
    def pid(self) -> int | None:
        """The pid of the containerd being supervised (None before start or after stop)."""
        return self._pid

    @property
    def adopted(self) -> bool:
        """Whether start() found containerd already running rather than spawning it."""
        return self._adopted

    @property
    def programs(self) -> Programs:
        """The programs this instance runs (known once `start` began)."""
        if self._programs is None:
            raise ContainerdError(f"containerd for {self._data_dir} was not started")
        return self._programs

    @property
    def restarts(self) -> int:
        """How many times the supervisor restarted containerd."""
        return self._restarts

    # -- start ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Write the configuration, adopt or spawn containerd, and start supervising it.

        Returns once containerd's socket accepts connections (CRI readiness: wait_ready).
        """
        if self._supervisor is not None:
            raise ContainerdError(f"containerd for {self._data_dir} is already supervised")
        self._programs = await asyncio.to_thread(find_programs, self._settings)
        log.info("embedded runtime: %s", self._programs.describe())
        self._refuse_legacy_state()
        await self._write_config()
        pid = await self._adoptable_pid()
        if pid is not None:
            self._pid, self._adopted = pid, True
            log.info("adopted containerd pid %d for %s", pid, self._data_dir)
        else:
            await self._spawn()
        self._supervisor = asyncio.create_task(
            self._supervise(), name=f"containerd-supervisor {self._data_dir}"
        )

    async def _write_config(self) -> None:
        _make_dirs(self._paths.base, self._paths.root)
        for directory in (self._data_dir, self._paths.base):
            hostdirs.secure_dir(directory, hostdirs.DATA_MODE)
        self._make_state_dir()
        cni.write_conflist(self._data_dir, self._settings.pod_cidrs)
        snapshotter = await self._choose_snapshotter()
        text = render_config(self._data_dir, self._settings, snapshotter, self.programs)
        tmp = self._paths.config.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self._paths.config)

    def _make_state_dir(self) -> None:
        """RUN_ROOT and the instance's state dir in it, root's and 0711: a pod in a user
        namespace (hostUsers: false) is set up by runc as its own root, an unprivileged host
        user, which must reach its rootfs there; traversable, not listable, as containerd's
        own /run/containerd."""
        state = self._paths.state
        try:
            for directory in (RUN_ROOT, state):
                hostdirs.secure_dir(directory, hostdirs.RUNTIME_DIR_MODE)
        except (hostdirs.HostDirError, OSError) as exc:
            raise ContainerdError(f"cannot make the runtime's state dir {state}: {exc}") from exc
        log.info("runtime state of %s: %s", self._data_dir, state)

    def _refuse_legacy_state(self) -> None:
        """An older nodelet kept the runtime's state in the data dir: its containerd (which
        would be adopted) and its pods' tasks live there, which a containerd of the new
        layout would not know (their processes would run on, holding IPs and ports). Refused
        before anything is adopted or started, with what to do."""
        legacy = self._paths.legacy_state
        if legacy.exists():
            raise ContainerdError(
                f"{legacy} is the runtime state of an older nodelet, whose pods may still "
                f"run from it; nodelet now keeps it in {self._paths.state}. Remove those pods "
                f"and that state with `nodelet reset --data-dir {self._data_dir}`, then start "
                "again")

    async def _choose_snapshotter(self) -> str:
        # overlayfs is much faster than copying (native), but not every file system takes it.
        if await overlay_works(self._paths.base / "overlay-check"):
            return "overlayfs"
        log.warning("overlay mounts fail under %s; using the native snapshotter", self._data_dir)
        return "native"

    async def _adoptable_pid(self) -> int | None:
        try:
            pid = int(self._paths.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if _is_containerd(pid, self._paths.config) and await _socket_answers(self._paths.socket):
            return pid
        return None

    async def _spawn(self) -> None:
        """Start containerd in its own session and wait until its socket answers."""
        with contextlib.suppress(FileNotFoundError):
            self._paths.socket.unlink()
        argv = [self.programs.containerd, "--config", str(self._paths.config)]
        self._proc = _popen(argv, self._paths.log_file)
        self._pid, self._adopted = self._proc.pid, False
        self._paths.pid_file.write_text(f"{self._proc.pid}\n")
        log.info("started containerd pid %d for %s", self._proc.pid, self._data_dir)
        await self._wait_socket()

    async def _wait_socket(self) -> None:
        deadline = time.monotonic() + self._settings.ready_timeout
        while not await _socket_answers(self._paths.socket):
            if not self._alive():
                raise ContainerdError(f"containerd exited at start; see {self._paths.log_file}")
            if time.monotonic() > deadline:
                raise ContainerdError(
                    f"containerd socket {self._paths.socket} did not answer within "
                    f"{self._settings.ready_timeout:g}s; see {self._paths.log_file}"
                )
            await asyncio.sleep(_POLL_INTERVAL)

    def _alive(self) -> bool:
        """Whether the supervised containerd still runs (reaps our own child when it died)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self._pid is not None and _is_containerd(self._pid, self._paths.config)

    # -- supervision ---------------------------------------------------------------------

    async def _supervise(self) -> None:
        """Restart containerd with back-off whenever it dies, until detach() or stop()."""
        backoff = self._settings.restart_backoff
        try:
            while True:
                started = time.monotonic()
                await _exit_of(self._pid)
                await _wait_until(lambda: not self._alive(), math.inf)
                if time.monotonic() - started > _HEALTHY_RUN:
                    backoff = self._settings.restart_backoff
                log.error(
                    "containerd pid %s for %s died; restarting in %gs (log: %s)",
                    self._pid, self._data_dir, backoff, self._paths.log_file,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._settings.restart_backoff_max)
                await self._respawn()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("containerd supervisor for %s crashed", self._data_dir)
            raise

    async def _respawn(self) -> None:
        # An adopted containerd that died is replaced by one of our own: after an agent
        # restart every containerd is adopted, and a node whose runtime stays dead is useless.
        try:
            await self._spawn()
            self._restarts += 1
        except ContainerdError as e:
            log.error("restarting containerd failed: %s", e)

    async def _cancel_supervisor(self) -> None:
        task, self._supervisor = self._supervisor, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, _STOP_GRACE)

    async def detach(self) -> None:
        """Stop supervising and leave containerd (and its pods) running."""
        await self._cancel_supervisor()
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            # Still our child: someone must reap it when it ends (a later `nodelet reset`, or
            # `stop` of another runner for the same data dir, may kill it while this process
            # lives on). A daemon thread waits for it; when this process exits first, init
            # inherits containerd as usual.
            threading.Thread(target=proc.wait, name=f"reap-containerd-{proc.pid}",
                             daemon=True).start()

    close = detach

    async def stop(self) -> None:
        """Terminate containerd: SIGTERM, then SIGKILL after a grace period. Idempotent."""
        await self._cancel_supervisor()
        pid = self._pid if self._pid is not None else await self._adoptable_pid()
        if pid is not None and (self._proc is not None or _is_containerd(pid, self._paths.config)):
            await self._terminate(pid)
        self._proc, self._pid = None, None
        with contextlib.suppress(FileNotFoundError):
            self._paths.pid_file.unlink()

    async def _terminate(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if await _wait_until(lambda: not self._alive_pid(pid), _STOP_GRACE):
            return
        log.warning("containerd pid %d ignored SIGTERM; killing it", pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        await _wait_until(lambda: not self._alive_pid(pid), _STOP_GRACE)

    def _alive_pid(self, pid: int) -> bool:
        if self._proc is not None and self._proc.pid == pid:
            return self._proc.poll() is None
        return _is_containerd(pid, self._paths.config)

    # -- readiness and images --------------------------------------------------------------

    async def wait_ready(self, client: cri_client.RuntimeClient, *, images: bool = True) -> None:
        """Wait until CRI Status reports RuntimeReady and NetworkReady (settings.ready_timeout),
        then (unless `images` is False) import the local images the runtime lacks.
        """
        await self._wait_status(client)
        if images:
            await self.ensure_images(client)

    async def _wait_status(self, client: cri_client.RuntimeClient) -> None:
        deadline = time.monotonic() + self._settings.ready_timeout
        seen = "no answer"
        while time.monotonic() < deadline:
            try:
                status = await client.status()
            except cri_errors.CriError as e:
                seen = str(e)
            else:
                if status.runtime_ready and status.network_ready:
                    return
                seen = ", ".join(f"{c.type}={c.status} {c.message}" for c in status.conditions)
            await asyncio.sleep(_POLL_INTERVAL)
        raise ContainerdError(
            f"containerd at {self.endpoint} not ready after {self._settings.ready_timeout:g}s "
            f"(last status: {seen}); see {self._paths.log_file}"
        )

    async def ensure_images(self, client: cri_client.RuntimeClient) -> None:
        """Import the pause and busybox archives from settings.images_dir when missing."""
        wanted = {
            settings_.PAUSE_IMAGE: self._settings.images_dir / "pause.tar",
            settings_.BUSYBOX_IMAGE: self._settings.images_dir / "busybox.tar",
        }
        for ref, archive in wanted.items():
            if await client.image_status(ref) is None:
                await self._import(ref, archive)
                await self._wait_image(client, ref, archive)

    async def _wait_image(self, client: cri_client.RuntimeClient, ref: str,
                          archive: Path) -> None:
        """containerd 2.x's CRI learns of an imported image from its own event stream, a
        moment after `ctr` returns (measured: once in about ten fresh instances)."""
        deadline = time.monotonic() + _IMAGE_SEEN_WITHIN
        while await client.image_status(ref) is None:
            if time.monotonic() > deadline:
                raise ContainerdError(f"{archive} imported, but {ref} is still missing "
                                      f"after {_IMAGE_SEEN_WITHIN:g}s; see {self._paths.log_file}")
            await asyncio.sleep(_POLL_INTERVAL)

    async def _import(self, ref: str, archive: Path) -> None:
        _check_archive(ref, archive)
        socket = str(self._paths.socket)
        argv = [self.programs.ctr, "--address", socket, "-n", "k8s.io", "images", "import",
                str(archive)]
        status, output = await commands.run(argv, limit=self._settings.timeouts.pull_image)
        if status != 0:
            raise ContainerdError(f"importing {archive} failed ({status}): {output.strip()}")
        log.info("imported %s from %s", ref, archive)


# -- leftovers of a containerd instance (used by reset and tests) ------------------------------


def _shim_pids(socket: Path) -> list[int]:
    """containerd shims started by the containerd listening on `socket`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and str(socket).encode() in argv:
            pids.append(int(entry.name))
    return pids


async def kill_leftovers(data_dir: Path, settings: settings_.RuntimeSettings) -> list[str]:
    """Kill what a dead containerd left running: its runc containers and shims.

    Only for reset, after CRI removal (the clean way) failed or could not run. Returns the
    container IDs force-deleted.
    """
    paths = ContainerdPaths.of(data_dir)
    removed: list[str] = []
    try:
        runc = _program("runc", settings.runtime_bin_dir)
    except ContainerdError as exc:
        log.warning("reset: %s", exc)
        return removed
    for state in (paths.state, paths.legacy_state):
        if (state / "runc" / "k8s.io").is_dir():
            removed += await _force_delete(runc, state / "runc" / "k8s.io")
    for pid in _shim_pids(paths.socket):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return removed


async def _force_delete(runc: str, runc_root: Path) -> list[str]:
    """Force-delete every container runc knows under `runc_root`; the IDs deleted."""
    removed = []
    status, out = await commands.run([runc, "--root", str(runc_root), "list", "-q"], limit=30)
    for container_id in out.split() if status == 0 else []:
        status, _ = await commands.run(
            [runc, "--root", str(runc_root), "delete", "--force", container_id], limit=30
        )
        if status == 0:
            removed.append(container_id)
    return removed
