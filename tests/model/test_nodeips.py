"""--node-ip and the Node's addresses as the kubelet parses, checks and chooses them
(model/core/nodeips.py), table-driven."""

from __future__ import annotations

import pytest

from nodelet.model.core import nodeips

HOST = ("127.0.0.1", "::1", "192.0.2.2", "198.51.100.7", "fd00:77::7", "fe80::1")


@pytest.mark.parametrize(("flag", "ips", "invalid"), [
    ("", (), ()),
    ("192.0.2.2", ("192.0.2.2",), ()),
    (" 192.0.2.2 ", ("192.0.2.2",), ()),
    ("192.0.2.2,fd00:77::7", ("192.0.2.2", "fd00:77::7"), ()),
    ("fd00:77:0::7,192.0.2.2", ("fd00:77::7", "192.0.2.2"), ()),  # the primary first
    ("::", ("::",), ()),
    ("0.0.0.0", ("0.0.0.0",), ()),
    ("192.0.2.2,nonsense", ("192.0.2.2",), ("nonsense",)),  # skipped, as the kubelet does
    ("nonsense", (), ("nonsense",)),
])
def test_parse(flag: str, ips: tuple[str, ...], invalid: tuple[str, ...]) -> None:
    assert nodeips.parse(flag) == (ips, invalid)


@pytest.mark.parametrize(("flag", "words"), [
    ("192.0.2.2,198.51.100.7", "must contain either a single IP or a dual-stack pair"),
    ("fd00::1,fd00::2", "must contain either a single IP or a dual-stack pair"),
    ("192.0.2.2,fd00::1,198.51.100.7", "must contain either a single IP or a dual-stack pair"),
    ("0.0.0.0,fd00::1", "dual-stack node IP cannot include '0.0.0.0' or '::'"),
    ("192.0.2.2,::", "dual-stack node IP cannot include '0.0.0.0' or '::'"),
])
def test_parse_refuses(flag: str, words: str) -> None:
    with pytest.raises(nodeips.NodeIPError, match=words):
        nodeips.parse(flag)


@pytest.mark.parametrize(("ip", "why"), [
    ("192.0.2.2", None),
    ("fd00:77::7", None),
    ("127.0.0.1", "nodeIP can't be loopback address"),
    ("::1", "nodeIP can't be loopback address"),
    ("224.0.0.5", "nodeIP can't be a multicast address"),
    ("fe80::1", "nodeIP can't be a link-local unicast address"),
    ("169.254.3.4", "nodeIP can't be a link-local unicast address"),
    ("203.0.113.9", 'node IP: "203.0.113.9" not found in the host\'s network interfaces'),
])
def test_refusal(ip: str, why: str | None) -> None:
    assert nodeips.refusal(ip, HOST) == why


def test_check_names_the_secondary() -> None:
    nodeips.check(("192.0.2.2", "fd00:77::7"), HOST)
    nodeips.check(("::",), HOST)  # a family preference only
    with pytest.raises(nodeips.NodeIPError, match="failed to validate secondaryNodeIP: node IP"):
        nodeips.check(("192.0.2.2", "fd00:99::9"), HOST)
    with pytest.raises(nodeips.NodeIPError, match="failed to validate nodeIP: nodeIP can't be "
                                                  "loopback"):
        nodeips.check(("127.0.0.1",), HOST)


@pytest.mark.parametrize(("given", "name", "resolved", "route", "chosen"), [
    (("192.0.2.2", "fd00:77::7"), "n1", (), "198.51.100.7", ("192.0.2.2", "fd00:77::7")),
    (("198.51.100.7",), "n1", ("192.0.2.2",), "192.0.2.2", ("198.51.100.7",)),
    ((), "192.0.2.2", (), "198.51.100.7", ("192.0.2.2",)),  # the node name is an IP
    # The node name's address, when on the host; IPv4 first; loopback (Debian's 127.0.1.1
    # for the hostname) and addresses elsewhere are skipped.
    ((), "n1", ("fd00:77::7", "198.51.100.7"), "192.0.2.2", ("198.51.100.7",)),
    ((), "n1", ("127.0.1.1", "203.0.113.9"), "192.0.2.2", ("192.0.2.2",)),
    (("::",), "n1", ("198.51.100.7", "fd00:77::7"), "fd00:77::7", ("fd00:77::7",)),
    ((), "n1", (), "192.0.2.2", ("192.0.2.2",)),  # the default route's interface
])
def test_internal_ips(given: tuple[str, ...], name: str, resolved: tuple[str, ...],
                      route: str, chosen: tuple[str, ...]) -> None:
    assert nodeips.internal_ips(given, node_name=name, resolved=resolved,
                                default_route=route, host_addresses=HOST) == chosen


def test_no_address_at_all_is_an_error() -> None:
    with pytest.raises(nodeips.NodeIPError, match="can't get ip address of node n1"):
        nodeips.internal_ips((), node_name="n1", resolved=(), default_route=None,
                             host_addresses=HOST)


def test_addresses_in_the_kubelets_order() -> None:
    assert nodeips.addresses(("192.0.2.2", "fd00:77::7"), "n1") == [
        {"type": "InternalIP", "address": "192.0.2.2"},
        {"type": "InternalIP", "address": "fd00:77::7"},
        {"type": "Hostname", "address": "n1"}]
