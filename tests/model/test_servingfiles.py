"""Which of the node server's TLS files are read again, and when (model.core.servingfiles), and
the kubelet's gates that decide it: ReloadKubeletServerCertificateFile,
ReloadKubeletClientCAFile (and RotateKubeletServerCertificate, which changes nothing without
serverTLSBootstrap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodelet import cli, settings
from nodelet.model.core import configz
from nodelet.model.core import servingfiles as sf

ON = settings.FeatureGates()
OFF = settings.parse_feature_gates(
    "ReloadKubeletServerCertificateFile=false,ReloadKubeletClientCAFile=false")


def test_the_gates_default_as_in_kubernetes_1_37() -> None:
    items = dict(settings.feature_gate_items(settings.FeatureGates()))
    assert items["ReloadKubeletServerCertificateFile"] is True  # beta since 1.31
    assert items["ReloadKubeletClientCAFile"] is True  # beta since 1.36
    assert items["RotateKubeletServerCertificate"] is True  # beta since 1.12


@pytest.mark.parametrize("value", ["true", "false"])
def test_rotate_kubelet_server_certificate_is_accepted_at_either_value(value: str) -> None:
    gates = settings.parse_feature_gates(f"RotateKubeletServerCertificate={value}")
    assert gates.rotate_kubelet_server_certificate is (value == "true")
    # Without serverTLSBootstrap the kubelet ignores it: what is reloaded does not change.
    assert sf.watch(gates, pair_given=True, client_ca_given=True) == sf.Watch(True, True)


@pytest.mark.parametrize(("gates", "pair_given", "ca_given", "expected"), [
    (ON, True, True, sf.Watch(pair=True, client_ca=True)),
    (ON, False, True, sf.Watch(pair=False, client_ca=True)),  # the self-signed pair
    (ON, True, False, sf.Watch(pair=True, client_ca=False)),
    (ON, False, False, sf.Watch()),
    (OFF, True, True, sf.Watch()),
    (settings.parse_feature_gates("ReloadKubeletClientCAFile=false"), True, True,
     sf.Watch(pair=True, client_ca=False)),
    (settings.parse_feature_gates("ReloadKubeletServerCertificateFile=false"), True, True,
     sf.Watch(pair=False, client_ca=True)),
])
def test_what_is_watched(gates: settings.FeatureGates, pair_given: bool, ca_given: bool,
                         expected: sf.Watch) -> None:
    assert sf.watch(gates, pair_given=pair_given, client_ca_given=ca_given) == expected
    assert expected.any == (expected.pair or expected.client_ca)


A = sf.Stamp(device=1, inode=10, mtime_ns=100, size=50)


@pytest.mark.parametrize(("seen", "now", "failing", "due", "changed"), [
    (None, {"c": A}, False, True, ("c",)),  # never read
    ({"c": A}, {"c": A}, False, False, ()),
    ({"c": A}, {"c": A}, True, True, ()),  # the last content did not load: tried again
    ({"c": A}, {"c": sf.Stamp(1, 10, 101, 50)}, False, True, ("c",)),  # rewritten in place
    ({"c": A}, {"c": sf.Stamp(1, 10, 100, 51)}, False, True, ("c",)),
    ({"c": A}, {"c": sf.Stamp(1, 11, 100, 50)}, False, True, ("c",)),  # renamed over
    ({"c": A}, {"c": None}, False, True, ("c",)),  # removed
    ({"c": A, "k": A}, {"c": A, "k": sf.Stamp(1, 10, 200, 50)}, False, True, ("k",)),
])
def test_when_the_files_are_read_again(seen: sf.Stamps | None, now: sf.Stamps, failing: bool,
                                       due: bool, changed: tuple[str, ...]) -> None:
    assert sf.due(seen, now, failing=failing, since_read=1, resync=30) is due
    assert sf.changed(seen, now) == changed


@pytest.mark.parametrize(("period", "checks"), [
    (2.0, 30),  # the default check period: read every minute, as upstream's resync
    (0.05, 1200), (7.0, 9), (60.0, 1), (600.0, 1), (0.0, 1),
])
def test_the_files_are_read_about_every_minute_whatever_their_stamps(period: float,
                                                                     checks: int) -> None:
    """A rewrite that keeps the inode, the size and (within the filesystem's granularity)
    the mtime is not seen by a stat: it is read at the periodic resync."""
    assert sf.resync_checks(period) == checks
    stamps = {"c": A}
    assert not sf.due(stamps, stamps, failing=False, since_read=checks - 1, resync=checks) \
        or checks == 1
    assert sf.due(stamps, stamps, failing=False, since_read=checks, resync=checks)


def test_the_suite_s_feature_gates_in_a_config_file(tmp_path: Path) -> None:
    """The node e2e suite's ReloadKubeletClientCAFileTest replaces the whole featureGates map
    with these three, and sets the files."""
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "tlsCertFile: kubelet.cert\ntlsPrivateKeyFile: kubelet.key\n"
        "authentication:\n  x509:\n    clientCAFile: kubelet-client-ca.cert\n"
        "featureGates:\n  ReloadKubeletClientCAFile: true\n"
        "  ReloadKubeletServerCertificateFile: true\n  RotateKubeletServerCertificate: false\n")
    s = cli.settings_from_argv(["run", "--data-dir", str(tmp_path), "--config", str(config)])
    gates = s.gates
    assert gates.reload_kubelet_client_ca_file and gates.reload_kubelet_server_certificate_file
    assert not gates.rotate_kubelet_server_certificate
    ns = s.node_server
    assert ns.tls_cert_file == tmp_path / "kubelet.cert"
    assert ns.client_ca_file == tmp_path / "kubelet-client-ca.cert"
    reported = configz.kubelet_configuration(s, runtime_endpoint="unix:///x")["featureGates"]
    assert reported["RotateKubeletServerCertificate"] is False
    assert reported["ReloadKubeletClientCAFile"] is True
