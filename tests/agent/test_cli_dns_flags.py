"""`--cluster-dns`, `--cluster-domain` and `--resolv-conf` onto `Settings.dns`."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodelet import cli, settings


def dns_of(tmp_path: Path, *flags: str) -> settings.DNSSettings:
    args = cli.build_parser().parse_args(["run", "--data-dir", str(tmp_path), *flags])
    return cli.settings_from_args(args).dns


def test_defaults(tmp_path: Path) -> None:
    assert dns_of(tmp_path) == settings.DNSSettings(
        cluster_dns=(), cluster_domain="", resolv_conf=Path("/etc/resolv.conf"))


def test_flags(tmp_path: Path) -> None:
    dns = dns_of(tmp_path, "--cluster-dns", "10.96.0.10,fd00::a", "--cluster-dns", "10.96.0.11",
                 "--cluster-domain", "cluster.local", "--resolv-conf", "/run/resolv.conf")
    assert dns == settings.DNSSettings(cluster_dns=("10.96.0.10", "fd00::a", "10.96.0.11"),
                                       cluster_domain="cluster.local",
                                       resolv_conf=Path("/run/resolv.conf"))


def test_empty_resolv_conf_means_none(tmp_path: Path) -> None:
    assert dns_of(tmp_path, "--resolv-conf", "").resolv_conf is None


def test_cluster_dns_must_be_ip_addresses(tmp_path: Path) -> None:
    with pytest.raises(settings.SettingsError, match="--cluster-dns kube-dns: not an IP"):
        dns_of(tmp_path, "--cluster-dns", "10.96.0.10,kube-dns")
