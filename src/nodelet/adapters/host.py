"""Facts about the machine nodelet runs on: its IP address, DNS resolver configuration, and what
the Node reports (CPUs, memory, IDs, OS) from /proc and /etc.

Reading never fails: a file that cannot be read gives an empty value.
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from nodelet.model.core import nodes, runtime


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


def host_dns(resolv_conf: Path = Path("/etc/resolv.conf")) -> runtime.DNSConfig:
    """The host's resolver, which pods get when there is no cluster DNS (kubelet's Default)."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    try:
        lines = resolv_conf.read_text().splitlines()
    except OSError:
        return runtime.DNSConfig()
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        if fields[0] == "nameserver":
            servers.append(fields[1])
        elif fields[0] in ("search", "domain"):
            searches = fields[1:]
        elif fields[0] == "options":
            options.extend(fields[1:])
    return runtime.DNSConfig(tuple(servers), tuple(searches), tuple(options))


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
        architecture={"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine),
    )


def filesystem_size(path: Path) -> int:
    """Bytes of the filesystem holding `path` (its nearest existing parent); 0 if unreadable."""
    for candidate in (path, *path.parents):
        try:
            stat = os.statvfs(candidate)
        except OSError:
            continue
        return stat.f_blocks * stat.f_frsize
    return 0


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
