"""`nodelet run --config FILE`: a KubeletConfiguration file under the command-line flags."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from nodelet import cli, settings
from nodelet.model.core import configz

GOOD = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 17
featureGates:
  PodHasNetworkCondition: true
containerLogMaxSize: 5Mi
evictionHard:
  memory.available: 200Mi
systemReserved:
  cpu: 100m
registerWithTaints:
  - key: dedicated
    value: edge
    effect: NoSchedule
syncFrequency: 30s
fileCheckFrequency: 5s
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
readOnlyPort: 10266
"""


def settings_for(tmp_path: Path, text: str, *flags: str) -> settings.Settings:
    path = tmp_path / "kubelet.yaml"
    path.write_text(text)
    return cli.settings_from_argv(["run", "--data-dir", str(tmp_path), "--config", str(path),
                                   *flags])


def test_a_good_file_takes_effect(tmp_path: Path) -> None:
    s = settings_for(tmp_path, GOOD)
    assert s.node.max_pods == 17
    assert s.gates.pod_has_network
    assert s.logs.max_size == 5 * 2**20
    assert s.eviction.hard == "memory.available<200Mi"
    assert s.node.system_reserved == (("cpu", "100m"),)
    assert s.node.register_with_taints == (("dedicated", "edge", "NoSchedule"),)
    assert s.sync.resync_period == 30.0 and s.manifest_resync_period == 5.0
    assert s.dns.cluster_dns == ("10.96.0.10",) and s.dns.cluster_domain == "cluster.local"
    assert (s.server.host, s.server.port) == ("127.0.0.1", 10266)
    assert (s.server.healthz_host, s.server.healthz_port) == ("127.0.0.1", 10248)


def test_the_embedded_containerd_s_socket_in_a_file_keeps_it_embedded(tmp_path: Path) -> None:
    """/configz reports the embedded containerd's socket as containerRuntimeEndpoint; a file
    written from it (the node suite's) keeps nodelet on its own containerd, with its
    handlers, not on an outside runtime at that socket."""
    socket = tmp_path.resolve() / "containerd" / "containerd.sock"
    text = GOOD + f"containerRuntimeEndpoint: unix://{socket}\n"
    s = settings_for(tmp_path, text, "--runtime-handler", "test-handler")
    assert s.runtime.endpoint is None and s.runtime.runc_handlers == ("test-handler",)
    outside = settings_for(tmp_path, GOOD + "containerRuntimeEndpoint: unix:///run/c.sock\n")
    assert outside.runtime.endpoint == "unix:///run/c.sock"


def test_the_healthz_server_is_set_by_the_file_or_the_flags(tmp_path: Path) -> None:
    text = GOOD + "healthzPort: 10299\nhealthzBindAddress: 0.0.0.0\n"
    s = settings_for(tmp_path, text)
    assert (s.server.healthz_host, s.server.healthz_port) == ("0.0.0.0", 10299)
    s = settings_for(tmp_path, text, "--healthz-port", "0", "--healthz-bind-address", "::1")
    assert (s.server.healthz_host, s.server.healthz_port) == ("::1", 0)
    with pytest.raises(settings.SettingsError, match="--healthz-port 70000"):
        settings_for(tmp_path, GOOD, "--healthz-port", "70000")
    with pytest.raises(settings.SettingsError, match="not an IP address"):
        settings_for(tmp_path, GOOD, "--healthz-bind-address", "localhost")


def test_flags_on_the_command_line_win(tmp_path: Path) -> None:
    s = settings_for(tmp_path, GOOD, "--max-pods", "110", "--feature-gates",
                     "PodHasNetworkCondition=false", "--listen", "127.0.0.1:10299")
    assert s.node.max_pods == 110  # given, although equal to the default
    assert not s.gates.pod_has_network
    assert s.server.port == 10299
    assert s.logs.max_size == 5 * 2**20  # not given: the file's


def test_the_read_only_api_is_off_with_port_0_or_without_the_field(tmp_path: Path) -> None:
    """As the kubelet's: `readOnlyPort: 0` turns it off, and a file without the field too
    (its v1beta1 default is 0); `--read-only-port` and `--listen` given on the command line
    win; without a file, nodelet's default is on (127.0.0.1:10255, for its own CLI)."""
    off = GOOD.replace("readOnlyPort: 10266", "readOnlyPort: 0")
    assert not settings_for(tmp_path, off).server.enabled
    without = GOOD.replace("readOnlyPort: 10266\n", "")
    assert not settings_for(tmp_path, without).server.enabled
    again = settings_for(tmp_path, without, "--read-only-port", "10277")
    assert again.server.enabled and (again.server.host, again.server.port) == (
        "127.0.0.1", 10277)
    listen = settings_for(tmp_path, off, "--listen", "127.0.0.1:10288")
    assert listen.server.enabled and listen.server.port == 10288
    assert not settings_for(tmp_path, GOOD, "--read-only-port", "0").server.enabled
    plain = cli.settings_from_argv(["run", "--data-dir", str(tmp_path)])
    assert plain.server.enabled and (plain.server.host, plain.server.port) == (
        "127.0.0.1", 10255)
    assert not cli.settings_from_argv(["run", "--data-dir", str(tmp_path),
                                       "--read-only-port", "0"]).server.enabled
    with pytest.raises(settings.SettingsError, match="--read-only-port 70000"):
        cli.settings_from_argv(["run", "--data-dir", str(tmp_path),
                                "--read-only-port", "70000"])


def test_file_values_get_the_flags_checks(tmp_path: Path) -> None:
    bad = GOOD.replace("maxPods: 17", "maxPods: -1")
    with pytest.raises(settings.SettingsError, match="--max-pods -1: must be at least 1"):
        settings_for(tmp_path, bad)


def test_feature_gates_on_the_command_line_merge_with_the_file_s(tmp_path: Path) -> None:
    """The kubelet adds back the file's gates that the command line does not set."""
    text = GOOD.replace("  PodHasNetworkCondition: true\n",
                        "  PodHasNetworkCondition: true\n  PodVolumesCondition: true\n")
    s = settings_for(tmp_path, text, "--feature-gates", "PodVolumesCondition=false,"
                     "PodTerminationSLI=true")
    assert s.gates.pod_has_network  # the file's, not on the command line
    assert not s.gates.pod_volumes_condition  # the command line wins for its own gates
    assert s.gates.pod_termination_sli


def test_relative_paths_are_relative_to_the_file_and_zeros_are_defaults(
        tmp_path: Path) -> None:
    text = GOOD + ("staticPodPath: manifests\nresolvConf: etc/resolv.conf\n"
                   "nodeStatusUpdateFrequency: 0s\nnodeLeaseDurationSeconds: 0\n")
    text = text.replace("maxPods: 17", "maxPods: 0").replace("syncFrequency: 30s",
                                                             "syncFrequency: 0s")
    config_dir = tmp_path / "conf"
    config_dir.mkdir()
    (config_dir / "kubelet.yaml").write_text(text)
    s = cli.settings_from_argv(["run", "--data-dir", str(tmp_path / "data"), "--config",
                                str(config_dir / "kubelet.yaml"), "--kubeconfig",
                                str(tmp_path / "kubeconfig")])
    assert s.manifests_dir is not None and s.manifests_dir.resolve() == config_dir / "manifests"
    assert s.dns.resolv_conf == config_dir / "etc" / "resolv.conf"
    defaults = settings.Settings()
    assert s.node.max_pods == defaults.node.max_pods
    assert s.sync.resync_period == defaults.sync.resync_period
    assert s.cluster is not None and s.cluster.node_status_period == 10.0
    assert s.cluster.lease_duration == 40


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "cgroupDriver: systemd\n",
         "cgroupDriver: nodelet runs with 'cgroupfs' and has no setting for it"),
        (GOOD + "cpuManagerPolicy: static\n",
         "cpuManagerPolicy: nodelet runs with 'none' and has no setting for it; 'static' "
         "cannot be honoured"),
        (GOOD + "maxPodz: 3\n", "unknown field 'maxPodz'"),
        (GOOD.replace("maxPods: 17", "maxPods: seventeen"),
         "maxPods: must be an integer, not a string"),
    ],
)
def test_nodelet_run_with_a_bad_file_exits_2_naming_the_field(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-m", "nodelet.cli", "run", "--data-dir", str(data), "--config",
         str(path), "--progress", "never"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert f"Error: --config {path}: " in done.stderr and message in done.stderr, done.stderr
    assert not data.exists()  # refused before any side effect


def test_the_sample_config_in_deploy_is_accepted(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[2] / "deploy" / "kubelet-config.yaml"
    s = cli.settings_from_argv(["run", "--data-dir", str(tmp_path), "--config", str(sample),
                                "--kubeconfig", str(tmp_path / "kubeconfig")])
    assert s.runtime.endpoint == "unix:///run/containerd/containerd.sock"
    assert s.manifests_dir == Path("/etc/kubernetes/manifests")
    assert s.dns.cluster_dns == ("10.96.0.10",)
    assert s.cluster is not None and s.cluster.node_status_period == 10.0
    assert s.node.system_reserved == (("cpu", "100m"), ("memory", "256Mi"))
    # The node server as kubeadm configures the kubelet's; the read-only API on loopback.
    assert (s.node_server.address, s.node_server.port) == ("0.0.0.0", 10250)
    assert s.node_server.client_ca_file == Path("/etc/kubernetes/pki/ca.crt")
    assert s.node_server.authorization_mode == "Webhook"
    assert s.node_server.authentication_token_webhook is True
    assert (s.server.host, s.server.port) == ("127.0.0.1", 10255)


def test_image_credential_verification_is_read_and_needs_its_gate(tmp_path: Path) -> None:
    head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    chosen = head + ("imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\n"
                     "preloadedImagesVerificationAllowlist: [registry.test/team/*]\n")
    s = settings_for(tmp_path, chosen)
    assert s.gates.kubelet_ensure_secret_pulled_images  # beta, on by default
    assert s.image_credentials == settings.ImageCredentialSettings(
        "NeverVerifyAllowlistedImages", ("registry.test/team/*",))
    assert settings_for(tmp_path, head).image_credentials == settings.ImageCredentialSettings()
    with pytest.raises(settings.SettingsError, match="`imagePullCredentialsVerificationPolicy` "
                       "must not be set if KubeletEnsureSecretPulledImages feature gate is not"):
        settings_for(tmp_path, chosen, "--feature-gates",
                     "KubeletEnsureSecretPulledImages=false")


def test_the_image_service_endpoint_must_name_the_runtime_in_effect(tmp_path: Path) -> None:
    """One runtime serves nodelet's pods and images, so a file's imageServiceEndpoint must be
    the runtime endpoint nodelet uses: the file's containerRuntimeEndpoint, or the command
    line's --runtime-endpoint, which wins over it (the kubelet would then pull from the file's
    image endpoint, nodelet from the flag's runtime)."""
    embedded = f"unix://{tmp_path.resolve() / 'containerd' / 'containerd.sock'}"
    own = GOOD + f"containerRuntimeEndpoint: {embedded}\nimageServiceEndpoint: {embedded}\n"
    assert settings_for(tmp_path, own).runtime.endpoint is None  # the embedded containerd
    assert settings_for(tmp_path, GOOD + f"imageServiceEndpoint: {embedded}\n",
                        ).runtime.endpoint is None
    outside = GOOD + ("containerRuntimeEndpoint: unix:///run/c.sock\n"
                      "imageServiceEndpoint: unix:///run/c.sock\n")
    assert settings_for(tmp_path, outside).runtime.endpoint == "unix:///run/c.sock"
    assert settings_for(tmp_path, outside, "--runtime-endpoint", "unix:///run/c.sock",
                        ).runtime.endpoint == "unix:///run/c.sock"
    empty = GOOD + "containerRuntimeEndpoint: unix:///run/c.sock\nimageServiceEndpoint: ''\n"
    assert settings_for(tmp_path, empty, "--runtime-endpoint", "unix:///run/other.sock",
                        ).runtime.endpoint == "unix:///run/other.sock"
    # The flag names the file's image endpoint: the kubelet would use it for both too.
    split = GOOD + ("containerRuntimeEndpoint: unix:///run/c.sock\n"
                    "imageServiceEndpoint: unix:///run/i.sock\n")
    assert settings_for(tmp_path, split, "--runtime-endpoint", "unix:///run/i.sock",
                        ).runtime.endpoint == "unix:///run/i.sock"
    refused = [
        (own, ("--runtime-endpoint", "unix:///run/c.sock"),
         f"imageServiceEndpoint '{embedded}' is not the runtime endpoint nodelet uses "
         "('unix:///run/c.sock', from --runtime-endpoint)"),
        (split, (), "imageServiceEndpoint 'unix:///run/i.sock' is not the runtime endpoint "
         "nodelet uses ('unix:///run/c.sock', from the file's containerRuntimeEndpoint)"),
        (GOOD + "imageServiceEndpoint: unix:///run/i.sock\n", (),
         f"('{embedded}', from the embedded containerd): nodelet pulls images through the "
         f"runtime it runs pods with (write '{embedded}' or \"\", or leave the field out)"),
    ]
    for text, flags, message in refused:
        with pytest.raises(settings.SettingsError) as caught:
            settings_for(tmp_path, text, *flags)
        assert message in str(caught.value), caught.value


@pytest.mark.parametrize("flags", [
    # Without --manifests, --tls-*: /configz writes "" for them, which reads back as unset.
    (),
    ("--manifests", "/etc/m", "--cgroup-root", "/n", "--kube-reserved", "cpu=50m",
     "--image-gc-high-threshold", "90", "--image-minimum-gc-age", "5m",
     "--eviction-soft", "memory.available<300Mi",
     "--eviction-soft-grace-period", "memory.available=1m30s", "--seccomp-default",
     "--allowed-unsafe-sysctls", "net.core.somaxconn", "--tls-cert-file", "/p/k.crt",
     "--tls-private-key-file", "/p/k.key", "--client-ca-file", "/p/ca.crt",
     "--port", "10251", "--kube-api-qps", "20"),
])
def test_configz_reads_back_as_the_same_settings(tmp_path: Path, flags: tuple[str, ...]) -> None:
    """What /configz says nodelet runs with is a --config file that gives back the same
    settings (the node e2e suite restarts the agent with such a file)."""
    base = ["run", "--data-dir", str(tmp_path), "--kubeconfig", str(tmp_path / "kubeconfig")]
    first = tmp_path / "first.yaml"  # for the settings that have no flag
    first.write_text(GOOD + "oomScoreAdj: -999\nimageMaximumGCAge: 1h\neventRecordQPS: 7\n"
                            "containerLogMonitorInterval: 20s\nruntimeRequestTimeout: 1m\n")
    ran = cli.settings_from_argv([*base, "--config", str(first), *flags])
    embedded = f"unix://{tmp_path.resolve() / 'containerd' / 'containerd.sock'}"
    written = tmp_path / "configz.json"
    written.write_text(json.dumps(configz.configz(ran, runtime_endpoint=embedded)
                                  ["kubeletconfig"]))
    back = cli.settings_from_argv([*base, "--config", str(written)])
    # /configz says what the node server's defaults amount to with a cluster (token webhook
    # and Webhook authorization), which the file then says explicitly.
    assert (ran.node_server.authentication_token_webhook,
            ran.node_server.authorization_mode) == (None, None)
    assert back == replace(ran, node_server=replace(
        ran.node_server, authentication_token_webhook=True, authorization_mode="Webhook"))
    assert back.node.oom_score_adj == -999 and back.runtime.endpoint is None
