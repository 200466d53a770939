"""Facts about the machine nodelet runs on: its IP address and DNS resolver configuration."""

from __future__ import annotations

import socket
from pathlib import Path

from nodelet.model import runtime


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
