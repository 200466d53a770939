"""The node's IP addresses as the kubelet chooses and reports them (`--node-ip`, the Node's
`status.addresses`; the kubelet's nodeutil.ParseNodeIPArgument, validateNodeIP and the
NodeAddress status setter without a cloud provider). Pure: the host's facts are arguments.

- `parse(flag)`: `--node-ip` is one IP or a dual-stack pair `v4,v6` / `v6,v4` (the first is
  the primary). As the kubelet parses it, entries that are no IP are skipped (and returned, to
  be logged); more than two, two of one family, or `0.0.0.0`/`::` in a pair are errors.
- `refusal(ip, host_addresses)`: why an IP cannot be the node's (loopback, multicast,
  link-local unicast, all zeros, not on one of the host's interfaces), in the kubelet's words.
- `internal_ips(...)`: the InternalIP(s): the given pair; else the given IP; else the node
  name when it is an IP; else the first valid address the node name resolves to (IPv4 first,
  IPv6 first when `--node-ip ::`); else the address of the interface of the default route.
- `addresses(ips, hostname)`: `status.addresses`: each InternalIP, then the Hostname.

Exceptions: `NodeIPError` for a flag the kubelet refuses, or no usable address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Sequence

from nodelet.model.core import apijson

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


class NodeIPError(ValueError):
    """`--node-ip` is refused, or the node has no address to report; the message says why."""


def _ip(text: str) -> IP | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _specified(ip: str) -> bool:
    parsed = _ip(ip)
    return parsed is not None and not parsed.is_unspecified


def parse(flag: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the IPs, the entries that are no IP and were skipped) of `--node-ip`."""
    if not flag.strip():
        return (), ()
    ips: list[IP] = []
    invalid: list[str] = []
    for entry in flag.split(","):
        parsed = _ip(entry)
        if parsed is None:
            invalid.append(entry.strip())
        else:
            ips.append(parsed)
    if len(ips) > 2 or (len(ips) == 2 and ips[0].version == ips[1].version):
        raise NodeIPError(f"bad --node-ip {flag!r}: must contain either a single IP or a "
                          "dual-stack pair of IPs")
    if len(ips) == 2 and any(ip.is_unspecified for ip in ips):
        raise NodeIPError(f"bad --node-ip {flag!r}: dual-stack node IP cannot include "
                          "'0.0.0.0' or '::'")
    return tuple(str(ip) for ip in ips), tuple(invalid)


def refusal(ip: str, host_addresses: Collection[str]) -> str | None:
    """Why `ip` cannot be the node's IP, or None when it can."""
    parsed = _ip(ip)
    if parsed is None:
        return "nodeIP must be a valid IP address"
    if parsed.is_loopback:
        return "nodeIP can't be loopback address"
    if parsed.is_multicast:
        return "nodeIP can't be a multicast address"
    if parsed.is_link_local:
        return "nodeIP can't be a link-local unicast address"
    if parsed.is_unspecified:
        return "nodeIP can't be an all zeros address"
    if not any(_ip(a) == parsed for a in host_addresses):
        return f'node IP: "{parsed}" not found in the host\'s network interfaces'
    return None


def check(ips: Sequence[str], host_addresses: Collection[str]) -> None:
    """NodeIPError naming the first given IP the node cannot use (the kubelet's setter words:
    `failed to validate nodeIP` / `secondaryNodeIP`)."""
    for n, ip in enumerate(ips):
        if not _specified(ip):
            continue  # "0.0.0.0" / "::": only a family preference
        why = refusal(ip, host_addresses)
        if why:
            which = "nodeIP" if n == 0 else "secondaryNodeIP"
            raise NodeIPError(f"failed to validate {which}: {why}")


def internal_ips(ips: Sequence[str], *, node_name: str, resolved: Sequence[str],
                 default_route: str | None, host_addresses: Collection[str]) -> tuple[str, ...]:
    """The node's InternalIP(s); `resolved`: what the node name resolves to; `default_route`:
    the address of the default route's interface in the preferred family (None: none)."""
    given = [ip for ip in ips if _specified(ip)]
    if given:
        # A pair is reported as given; one IP alone (a pair's other member unspecified is
        # refused by `parse`).
        return tuple(given)
    named = _ip(node_name)
    if named is not None:
        return (str(named),)
    prefer_v6 = prefers_ipv6(ips)
    usable = [str(_ip(a)) for a in resolved
              if _ip(a) is not None and refusal(a, host_addresses) is None]
    preferred = [a for a in usable if (ipaddress.ip_address(a).version == 6) == prefer_v6]
    if preferred or usable:
        return ((preferred or usable)[0],)
    if default_route:
        return (default_route,)
    raise NodeIPError(f"can't get ip address of node {node_name}: no address resolves for it "
                      "and no default route; set --node-ip")


def prefers_ipv6(ips: Sequence[str]) -> bool:
    """`--node-ip ::` (or an IPv6 primary): IPv6 addresses first when the node looks."""
    first = _ip(ips[0]) if ips else None
    return first is not None and first.version == 6


def addresses(ips: Sequence[str], hostname: str) -> list[apijson.Obj]:
    """The Node's `status.addresses`, in the kubelet's order."""
    return [*({"type": "InternalIP", "address": ip} for ip in ips),
            {"type": "Hostname", "address": hostname}]
