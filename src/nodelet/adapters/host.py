"""Facts about the machine nodelet runs on: its IP address, DNS resolver configuration, and what
the Node reports (CPUs, memory, IDs, OS) from /proc and /etc.

Reading never fails: a file that cannot be read gives an empty value.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import socket
import subprocess
from pathlib import Path

from nodelet.model.core import nodes, usage


def raise_open_file_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit, as the kubelet raises its
    own at start (and the Go runtime does for every program): the systemd default soft limit
    of 1024 would let a few hundred connections to the node server starve CRI calls, log
    files, SQLite and mounts of file descriptors. (soft before, soft now); unchanged when the
    system refuses."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        return soft, soft
    return soft, hard


def set_own_oom_score_adj(value: int) -> None:
    """This process's OOM score adjustment (the kubelet's --oom-score-adj for itself; the
    runtime it starts afterwards inherits it). OSError when the kernel refuses."""
    Path("/proc/self/oom_score_adj").write_text(f"{value}\n")


def open_file_limit() -> int:
    """The soft RLIMIT_NOFILE (a large number when unlimited)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


def host_ip() -> str:
    """The address the node reaches the world from (no packet is sent: UDP connect only routes).

    Falls back to the first address of the hostname, then loopback, on a machine without routes.
    """
    for target in ("10.255.255.255", "192.0.2.1"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.connect((target, 9))
                address: str = sock.getsockname()[0]
                return address
        except OSError:
            continue
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def default_route_ip(*, ipv6: bool = False) -> str | None:
    """The address of the interface the default route of that family leaves by (no packet is
    sent), or None when there is no such route."""
    if not ipv6:
        return host_ip()
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
            sock.connect(("2001:db8::1", 9))
            address: str = sock.getsockname()[0]
            return address
    except OSError:
        return None


def interface_addresses() -> list[str]:
    """Every address on the host's network interfaces (iproute2's `ip -j address show`;
    empty when it cannot be run). Blocking: at start."""
    try:
        done = subprocess.run(["ip", "-j", "address", "show"], capture_output=True, text=True,
                              timeout=10, check=False)
        links = json.loads(done.stdout or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    return [str(info["local"]) for link in links for info in link.get("addr_info", [])
            if "local" in info]


def resolve(name: str) -> list[str]:
    """The addresses `name` resolves to (the system resolver, /etc/hosts included), in its
    order; empty when it does not resolve. Blocking: at start."""
    try:
        found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in found))


# The kubelet reads at most 10 MiB of the node's resolv.conf (maxResolveConfLength).
MAX_RESOLV_CONF_BYTES = 10 * 1024 * 1024


def read_resolv_conf(path: Path) -> str:
    """The node's resolver configuration file (`--resolv-conf`) as text; raises OSError, with
    the kubelet's wording when it is larger than 10 MiB. Blocking: call it off the loop."""
    with path.open("rb") as handle:
        data = handle.read(MAX_RESOLV_CONF_BYTES + 1)
    if len(data) > MAX_RESOLV_CONF_BYTES:
        raise OSError("the read limit is reached")  # k8s.io/utils/io ReadAtMost's words
    return data.decode(errors="replace")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def memory_total(meminfo: str) -> int:
    """Bytes of `MemTotal` in a /proc/meminfo text (0: not found)."""
    for line in meminfo.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "MemTotal:" and fields[1].isdigit():
            return int(fields[1]) * 1024
    return 0


def os_image(os_release: str) -> str:
    """`PRETTY_NAME` of an /etc/os-release text ("" when missing)."""
    for line in os_release.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.partition("=")[2].strip().strip('"')
    return ""


def machine_facts(root: Path = Path("/"), storage: Path | None = None) -> nodes.MachineFacts:
    """CPU count, memory, huge pages, IDs and OS of this machine, read from `root`/proc,
    `root`/sys and `root`/etc; ephemeral storage is the size of `storage`'s filesystem (the
    data dir, as the kubelet's root dir; 0 when None or unreadable)."""
    machine = platform.machine()
    return nodes.MachineFacts(
        cpus=os.cpu_count() or 1,
        memory_bytes=memory_total(_read(root / "proc/meminfo")),
        ephemeral_storage_bytes=filesystem_size(storage) if storage is not None else 0,
        hugepages=hugepages(root / "sys/kernel/mm/hugepages"),
        machine_id=_read(root / "etc/machine-id"),
        boot_id=_read(root / "proc/sys/kernel/random/boot_id"),
        kernel_version=platform.release(),
        os_image=os_image(_read(root / "etc/os-release")),
        architecture=go_arch(machine),
    )


# `uname -m` → Go's GOARCH, which the kubelet reports (kubernetes.io/arch, nodeInfo).
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
           "armv7l": "arm", "armv6l": "arm", "i386": "386", "i686": "386",
           "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64",
           "loongarch64": "loong64", "mips64": "mips64"}


def go_arch(machine: str) -> str:
    """The Go architecture name of `platform.machine()` (unknown ones as they are)."""
    return _GOARCH.get(machine, machine)


def filesystem_size(path: Path) -> int:
    """Bytes of the filesystem holding `path` (its nearest existing parent); 0 if unreadable."""
    for candidate in (path, *path.parents):
        try:
            stat = os.statvfs(candidate)
        except OSError:
            continue
        return stat.f_blocks * stat.f_frsize
    return 0


def filesystem_stats(path: Path | str) -> usage.FilesystemStats:
    """Size and free space of the filesystem holding `path` (statvfs; `available` is what an
    unprivileged writer may still use, as cadvisor reports it). Unlike the readers above it
    raises OSError: a filesystem that cannot be read is not an empty one."""
    stat = os.statvfs(path)
    return usage.FilesystemStats(
        capacity=stat.f_blocks * stat.f_frsize,
        available=stat.f_bavail * stat.f_frsize,
        inodes=stat.f_files,
        inodes_free=stat.f_ffree,
    )


def hugepages(sysfs: Path) -> dict[str, int]:
    """Pre-allocated huge pages per size, as resource names (`hugepages-2Mi`) → bytes, from
    `<sysfs>/hugepages-<kB>kB/nr_hugepages` (the kubelet's cadvisor reading)."""
    found = {}
    for entry in sorted(sysfs.glob("hugepages-*kB")) if sysfs.is_dir() else ():
        size_kb = entry.name.removeprefix("hugepages-").removesuffix("kB")
        count = _read(entry / "nr_hugepages")
        if size_kb.isdigit() and count.isdigit():
            found[f"hugepages-{_binary(int(size_kb) * 1024)}"] = int(count) * int(size_kb) * 1024
    return found


def _binary(size: int) -> str:
    """2097152 → 2Mi, 1073741824 → 1Gi (the resource name of a page size)."""
    for suffix, unit in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def apparmor_enabled(root: Path = Path("/")) -> bool:
    """AppArmor is loaded and enabled (what runc needs to apply a profile)."""
    return _read(root / "sys/module/apparmor/parameters/enabled").strip().upper().startswith("Y")


def selinux_enabled(root: Path = Path("/")) -> bool:
    """SELinux is mounted and enforcing or permissive (labels would be applied)."""
    return (root / "sys/fs/selinux/enforce").exists()


# -- pressure signals (the eviction manager's observations) --------------------------------------


def _meminfo_field(meminfo: str, name: str) -> int | None:
    for line in meminfo.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == f"{name}:" and fields[1].isdigit():
            return int(fields[1]) * 1024
    return None


def memory_working_set(root: Path = Path("/")) -> int:
    """Bytes of memory in use as the kubelet counts it for memory.available: the root memory
    cgroup's usage less its inactive file pages (cgroup v1, as cadvisor reads it); on a host
    without that file, MemTotal - MemAvailable. Raises OSError when neither can be read."""
    cgroup = root / "sys/fs/cgroup/memory"
    try:
        usage_bytes = int((cgroup / "memory.usage_in_bytes").read_text())
        stat = dict(line.split() for line in (cgroup / "memory.stat").read_text().splitlines()
                    if line.count(" ") == 1)
        return max(usage_bytes - int(stat.get("total_inactive_file", 0)), 0)
    except (OSError, ValueError):
        pass
    meminfo = (root / "proc/meminfo").read_text()
    total, available = _meminfo_field(meminfo, "MemTotal"), _meminfo_field(meminfo, "MemAvailable")
    if total is None or available is None:
        raise OSError(f"no MemTotal/MemAvailable in {root / 'proc/meminfo'}")
    return max(total - available, 0)


def pid_counts(root: Path = Path("/")) -> tuple[int, int]:
    """(the most processes the kernel allows, how many there are now) for pid.available: the
    smaller of kernel.pid_max and kernel.threads-max, and the number of tasks (threads
    included, as sysinfo counts them) from /proc/loadavg. Raises OSError when unreadable."""
    limits = [int((root / f"proc/sys/kernel/{name}").read_text())
              for name in ("pid_max", "threads-max")]
    fields = (root / "proc/loadavg").read_text().split()
    running = int(fields[3].partition("/")[2])
    return min(limits), running


def directory_usage(path: Path) -> tuple[int, int]:
    """(bytes, inodes) used below `path` on its own filesystem, as `du` counts them (allocated
    blocks, each hard-linked file once; mounts below it are not entered); (0, 0) if it is
    gone. Walks the tree: call it on a thread."""
    try:
        device = os.lstat(path).st_dev
    except OSError:
        return 0, 0
    seen: set[int] = set()
    total = inodes = 0
    for directory, subdirs, files in os.walk(path):
        entered = []
        for names, are_dirs in ((subdirs, True), (files, False)):
            for name in names:
                try:
                    stat = os.lstat(os.path.join(directory, name))
                except OSError:
                    continue  # removed meanwhile
                if stat.st_dev != device:
                    continue  # a mount below: neither counted nor entered
                if are_dirs:
                    entered.append(name)
                if stat.st_ino not in seen:
                    seen.add(stat.st_ino)
                    total += stat.st_blocks * 512
                    inodes += 1
        subdirs[:] = entered
    return total, inodes


def cgroup_processes(parent: str, root: Path = Path("/")) -> int:
    """Tasks in the cgroup `parent` and below it (pids controller; 0 when it cannot be read)."""
    base = root / "sys/fs/cgroup"
    for path in (base / "pids" / parent.lstrip("/") / "pids.current",
                 base / parent.lstrip("/") / "pids.current"):
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            continue
    return 0
