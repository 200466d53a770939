"""Sysctl names as the kubelet reads them (pure): normal form, the kernel namespace a sysctl
lives in, and the set every pod may use."""

from __future__ import annotations

# pkg/kubelet/sysctl/safe_sysctls.go: namespaced and isolated, so any pod may set them.
SAFE = (
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
)  # fmt: skip
# pkg/kubelet/sysctl/namespace.go: the sysctl prefixes the kernel namespaces, by namespace.
NAMESPACE_PREFIXES = (
    ("kernel.shm", "ipc"), ("kernel.msg", "ipc"), ("kernel.sem", "ipc"),
    ("fs.mqueue.", "ipc"), ("net.", "net"),
)  # fmt: skip


def namespace(name: str) -> str | None:
    """"net" or "ipc" for a namespaced sysctl, None for one that is node-wide."""
    name = normalize(name)
    return next((ns for prefix, ns in NAMESPACE_PREFIXES if name.startswith(prefix)), None)


def normalize(name: str) -> str:
    """`net/ipv4/ip_forward` → `net.ipv4.ip_forward` (a '/' first separator means '/' is the
    separator and '.' is part of a segment, as the kubelet normalises names)."""
    first = next((c for c in name if c in "./"), ".")
    if first != "/":
        return name
    return name.replace(".", "\0").replace("/", ".").replace("\0", "/")
