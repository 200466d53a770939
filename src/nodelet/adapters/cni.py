"""The CNI configuration of an embedded containerd: bridge + host-local IPAM + portmap.

Everything is derived from the instance's data dir so that several nodelet instances (and test
runs) on one machine never share a bridge, an address range or an IPAM store:

- bridge name `nl` + 8 hex digits of a hash of the data dir path (fits IFNAMSIZ);
- default pod CIDR `10.X.Y.0/24`, X in 100..199 and Y from the same hash;
- IPAM allocations under `<data-dir>/cni/ipam`, the conflist under `<data-dir>/cni/net.d`.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

# The plugins (Debian containernetworking-plugins 1.1) and containerd 1.6 both speak 1.0.0.
CNI_VERSION = "1.0.0"
NETWORK_NAME = "nodelet"
CONFLIST_NAME = "10-nodelet.conflist"


def _digest(data_dir: Path) -> bytes:
    return hashlib.sha256(str(data_dir.resolve()).encode()).digest()


def bridge_name(data_dir: Path) -> str:
    """The instance's bridge: `nl` + 8 hex digits (10 chars; Linux allows 15)."""
    return "nl" + _digest(data_dir).hex()[:8]


def default_pod_cidr(data_dir: Path) -> str:
    """An IPv4 /24 inside 10.100.0.0-10.199.255.0, chosen by the data dir path."""
    h = _digest(data_dir)
    return f"10.{100 + h[0] % 100}.{h[1]}.0/24"


def conf_dir(data_dir: Path) -> Path:
    return data_dir / "cni" / "net.d"


def ipam_dir(data_dir: Path) -> Path:
    """host-local keeps one file per allocated IP here, under a directory per network."""
    return data_dir / "cni" / "ipam"


def conflist(data_dir: Path, pod_cidrs: Sequence[str]) -> dict[str, object]:
    """The network configuration list; `pod_cidrs` empty means the derived IPv4 /24.

    Raises ValueError for a malformed CIDR. One range set per CIDR gives each pod one address
    per family (dual-stack when an IPv4 and an IPv6 CIDR are given).
    """
    cidrs = pod_cidrs or [default_pod_cidr(data_dir)]
    networks = [ipaddress.ip_network(c, strict=False) for c in cidrs]
    routes = [{"dst": "0.0.0.0/0" if n.version == 4 else "::/0"} for n in networks]
    return {
        "cniVersion": CNI_VERSION,
        "name": NETWORK_NAME,
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge_name(data_dir),
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(n)}] for n in networks],
                    "routes": routes,
                    "dataDir": str(ipam_dir(data_dir)),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def write_conflist(data_dir: Path, pod_cidrs: Sequence[str]) -> Path:
    """Write the conflist atomically (containerd watches the directory) and return its path."""
    directory = conf_dir(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    ipam_dir(data_dir).mkdir(parents=True, exist_ok=True)
    path = directory / CONFLIST_NAME
    tmp = directory / f".{CONFLIST_NAME}.tmp"
    tmp.write_text(json.dumps(conflist(data_dir, pod_cidrs), indent=2) + "\n")
    os.replace(tmp, path)
    return path


def ipam_allocations(data_dir: Path) -> list[Path]:
    """Files of IPs still allocated by host-local for this instance (lock files excluded)."""
    store = ipam_dir(data_dir) / NETWORK_NAME
    if not store.is_dir():
        return []
    # Besides one file per IP, host-local keeps a "lock" and "last_reserved_ip.<range>" files.
    return sorted(
        p for p in store.iterdir() if p.name != "lock" and not p.name.startswith("last_reserved")
    )


# -- leftovers of the instance's network (used by reset and tests) ---------------------------

NETNS_DIR = Path("/var/run/netns")


async def _ip(*args: str) -> tuple[int, str]:
    """Run `ip ARGS` (10 s limit); returns (exit status, stdout+stderr)."""
    proc = await asyncio.create_subprocess_exec(
        "ip", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 10.0)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return -1, "ip timed out"
    return proc.returncode or 0, out.decode(errors="replace")


def _links(output: str) -> list[tuple[int, str, int]]:
    """(ifindex, name, peer ifindex or 0) from `ip -o link` output."""
    links = []
    for line in output.splitlines():
        match = re.match(r"(\d+): ([^:@\s]+)(?:@if(\d+))?:", line)
        if match:
            links.append((int(match[1]), match[2], int(match[3] or 0)))
    return links


async def bridge_exists(data_dir: Path) -> bool:
    status, _ = await _ip("link", "show", "dev", bridge_name(data_dir))
    return status == 0


async def bridge_ports(data_dir: Path) -> list[tuple[int, str]]:
    """(ifindex, name) of the host-side veths attached to the instance's bridge."""
    status, out = await _ip("-o", "link", "show", "master", bridge_name(data_dir))
    return [(index, name) for index, name, _ in _links(out)] if status == 0 else []


def cni_netns_names() -> list[str]:
    """Names of the network namespaces containerd created (all instances): cni-<uuid>."""
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith("cni-"))
    except FileNotFoundError:
        return []


async def instance_netns(data_dir: Path) -> list[str]:
    """containerd netns whose interfaces are veth peers of this instance's bridge ports."""
    ports = {index for index, _ in await bridge_ports(data_dir)}
    found = []
    for name in cni_netns_names():
        status, out = await _ip("-n", name, "-o", "link", "show")
        if status == 0 and any(peer in ports for _, _, peer in _links(out)):
            found.append(name)
    return found


async def delete_netns(path_or_name: str) -> bool:
    """Delete a netns by name or /var/run/netns path; True when it existed."""
    name = Path(path_or_name).name
    if not (NETNS_DIR / name).exists():
        return False
    status, out = await _ip("netns", "delete", name)
    if status != 0:
        raise OSError(f"ip netns delete {name} failed: {out.strip()}")
    return True


async def delete_link(name: str) -> bool:
    """Delete a network interface; True when it existed."""
    status, _ = await _ip("link", "show", "dev", name)
    if status != 0:
        return False
    status, out = await _ip("link", "delete", "dev", name)
    if status != 0:
        raise OSError(f"ip link delete {name} failed: {out.strip()}")
    return True
