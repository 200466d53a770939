"""A KubeletConfiguration file read into flag values and settings (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodelet.model.core import configz
from nodelet.model.parsing import kubeletconfig as kc

HEAD = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}


def parse(fields: dict[str, Any], filename: str = "kubelet.json") -> kc.Overrides:
    return kc.parse(json.dumps({**HEAD, **fields}), filename=filename)


@pytest.mark.parametrize(
    ("fields", "flags"),
    [
        ({"maxPods": 20}, {"max_pods": 20}),
        ({"podCIDR": "10.1.0.0/24"}, {"pod_cidr": ["10.1.0.0/24"]}),
        ({"staticPodPath": "/etc/kubernetes/manifests"},
         {"manifests": "/etc/kubernetes/manifests"}),
        ({"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock"},
         {"runtime_endpoint": "unix:///run/containerd/containerd.sock"}),
        ({"featureGates": {"PodHasNetworkCondition": True}},
         {"feature_gates": "PodHasNetworkCondition=true"}),
        ({"systemReserved": {"cpu": "100m", "memory": "256Mi"}},
         {"system_reserved": "cpu=100m,memory=256Mi"}),
        ({"evictionHard": {"memory.available": "200Mi", "nodefs.available": "5%"}},
         {"eviction_hard": "memory.available<200Mi,nodefs.available<5%"}),
        ({"evictionSoftGracePeriod": {"memory.available": "1m30s"}},
         {"eviction_soft_grace_period": "memory.available=1m30s"}),
        ({"evictionPressureTransitionPeriod": "30s"},
         {"eviction_pressure_transition_period": "30s"}),
        ({"containerLogMaxSize": "5Mi", "containerLogMaxFiles": 3},
         {"container_log_max_size": "5Mi", "container_log_max_files": 3}),
        ({"imageGCHighThresholdPercent": 90, "imageMinimumGCAge": "5m"},
         {"image_gc_high_threshold": 90, "image_minimum_gc_age": "5m"}),
        ({"kubeAPIQPS": 20, "kubeAPIBurst": 40}, {"kube_api_qps": 20.0, "kube_api_burst": 40}),
        ({"seccompDefault": True, "allowedUnsafeSysctls": ["net.core.somaxconn", "kernel.msg*"]},
         {"seccomp_default": True, "allowed_unsafe_sysctls": "net.core.somaxconn,kernel.msg*"}),
        ({"registerWithTaints": [{"key": "a", "value": "b", "effect": "NoSchedule"},
                                 {"key": "c", "effect": "NoExecute"}]},
         {"register_with_taints": "a=b:NoSchedule,c:NoExecute"}),
        ({"clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local", "resolvConf": ""},
         {"cluster_dns": ["10.96.0.10"], "cluster_domain": "cluster.local", "resolv_conf": ""}),
        ({"readOnlyPort": 10266}, {"read_only_port": 10266}),
        # 0 turns the read-only API off, as leaving the field out does (the kubelet's
        # v1beta1 default is 0); null is leaving it out.
        ({"readOnlyPort": 0}, {"read_only_port": 0}),
        ({"readOnlyPort": None}, {"read_only_port": 0}),
        # `address` and `port` are the node server's, as the kubelet's; the read-only API
        # stays on --listen's host (loopback by default).
        ({"address": "10.0.0.5", "port": 10251, "readOnlyPort": 10255},
         {"address": "10.0.0.5", "port": 10251, "read_only_port": 10255}),
        ({"tlsCertFile": "/pki/k.crt", "tlsPrivateKeyFile": "/pki/k.key"},
         {"tls_cert_file": "/pki/k.crt", "tls_private_key_file": "/pki/k.key"}),
        # kubeadm's file: 0s TTLs are the defaults (left to the flags' defaults).
        ({"authentication": {"anonymous": {"enabled": False},
                             "webhook": {"enabled": True, "cacheTTL": "0s"},
                             "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}},
          "authorization": {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "0s",
                                                           "cacheUnauthorizedTTL": "0s"}}},
         {"anonymous_auth": False, "authentication_token_webhook": True,
          "client_ca_file": "/etc/kubernetes/pki/ca.crt", "authorization_mode": "Webhook"}),
        ({"authentication": {"webhook": {"cacheTTL": "1m"}},
          "authorization": {"mode": "AlwaysAllow",
                            "webhook": {"cacheAuthorizedTTL": "10s",
                                        "cacheUnauthorizedTTL": "1s"}}},
         {"authentication_token_webhook_cache_ttl": 60.0, "authorization_mode": "AlwaysAllow",
          "authorization_webhook_cache_authorized_ttl": 10.0,
          "authorization_webhook_cache_unauthorized_ttl": 1.0}),
        ({"maxPods": None}, {}),
        # Zero values the kubelet's v1beta1 defaulting replaces: the defaults (left out).
        ({"maxPods": 0, "kubeAPIBurst": 0, "port": 0, "address": "", "containerLogMaxSize": "",
          "containerRuntimeEndpoint": "", "imageMinimumGCAge": "0s",
          "evictionPressureTransitionPeriod": "0"}, {}),
        # "" is none there, as nodelet's default (/configz writes "" for them).
        ({"staticPodPath": "", "tlsCertFile": "", "tlsPrivateKeyFile": ""}, {}),
        # Pointer fields keep their zero (kubeAPIQPS 0, imageGCHighThresholdPercent 0).
        ({"kubeAPIQPS": 0, "imageGCHighThresholdPercent": 0},
         {"kube_api_qps": 0.0, "image_gc_high_threshold": 0}),
    ],
)
def test_fields_become_flag_values(fields: dict[str, Any], flags: dict[str, Any]) -> None:
    # Every file says whether the read-only API is on: without readOnlyPort it is off.
    assert parse(fields) == kc.Overrides(flags={"read_only_port": 0, **flags}, settings={})


@pytest.mark.parametrize(
    ("fields", "settings"),
    [
        ({"syncFrequency": "1m30s"}, {"sync.resync_period": 90.0}),
        ({"fileCheckFrequency": "500ms"}, {"manifest_resync_period": 0.5}),
        # An explicit update frequency is the report frequency too unless that is set.
        ({"nodeStatusUpdateFrequency": "4s", "nodeLeaseDurationSeconds": 20},
         {"cluster.node_status_period": 4.0, "cluster.lease_duration": 20,
          "cluster.node_report_period": 4.0}),
        ({"nodeStatusUpdateFrequency": "4s", "nodeStatusReportFrequency": "0s"},
         {"cluster.node_status_period": 4.0, "cluster.node_report_period": 4.0}),
        ({"nodeStatusUpdateFrequency": "4s", "nodeStatusReportFrequency": "1m"},
         {"cluster.node_status_period": 4.0, "cluster.node_report_period": 60.0}),
        ({"nodeStatusReportFrequency": "1m"}, {"cluster.node_report_period": 60.0}),
        # kubeadm's zeros: the defaults (left out).
        ({"syncFrequency": "0s", "fileCheckFrequency": "0s", "nodeStatusUpdateFrequency": "0s",
          "nodeStatusReportFrequency": "0s", "nodeLeaseDurationSeconds": 0, "eventBurst": 0,
          "runtimeRequestTimeout": "0s"}, {}),
        ({"eventRecordQPS": 5, "eventBurst": 10},
         {"cluster.event_qps": 5.0, "cluster.event_burst": 10}),
        ({"runtimeRequestTimeout": "2m"}, {"runtime.timeouts.default": 120.0}),
        ({"serializeImagePulls": False}, {}),
        ({"imagePullCredentialsVerificationPolicy": "AlwaysVerify"},
         {"image_credentials.verification_policy": "AlwaysVerify"}),
        ({"imagePullCredentialsVerificationPolicy": ""}, {}),  # the kubelet's default
        ({"imagePullCredentialsVerificationPolicy": "NeverVerifyAllowlistedImages",
          "preloadedImagesVerificationAllowlist": ["registry.test/*", "r.test/app"]},
         {"image_credentials.verification_policy": "NeverVerifyAllowlistedImages",
          "image_credentials.preloaded_allowlist": ("registry.test/*", "r.test/app")}),
    ],
)
def test_fields_without_a_flag_become_settings(fields: dict[str, Any],
                                                settings: dict[str, Any]) -> None:
    assert parse(fields) == kc.Overrides(flags={"read_only_port": 0}, settings=settings)


@pytest.mark.parametrize(
    "fields",
    [
        # configz.FIXED: what nodelet does; a duration compared as a duration.
        {"serverTLSBootstrap": False, "cgroupDriver": "cgroupfs", "cpuCFSQuota": True},
        {"cpuCFSQuotaPeriod": "0.1s", "shutdownGracePeriod": "0"},
        # The Go zero values /configz leaves out, and the kubelet's defaults.
        {"httpCheckFrequency": "0s", "volumeStatsAggPeriod": "0"},
        {"podPidsLimit": 0}, {"podPidsLimit": -1},
        {"iptablesMasqueradeBit": 14, "iptablesDropBit": 15},
        {"crashLoopBackOff": {}, "memorySwap": {"swapBehavior": ""}},
        # `logging` as a /configz round trip writes it, and with the kubelet's defaults.
        {"logging": {"flushFrequency": 0, "verbosity": 0,
                     "options": {"json": {"infoBufferSize": "0"},
                                 "text": {"infoBufferSize": "0"}}}},
        {"logging": {"format": "text", "flushFrequency": "5s", "vmodule": [],
                     "options": {"text": {"splitStream": False, "infoBufferSize": 0}}}},
        {"logging": {"format": "", "flushFrequency": 5_000_000_000, "options": {}}},
        {"logging": {"flushFrequency": "0s", "verbosity": None}},
    ],
)
def test_what_nodelet_does_is_accepted_where_it_has_no_setting(fields: dict[str, Any]) -> None:
    assert parse(fields) == kc.Overrides(flags={"read_only_port": 0}, settings={})


def test_the_image_service_endpoint_is_left_to_the_cli() -> None:
    """The CLI checks it against the runtime endpoint in effect (the command line's
    --runtime-endpoint wins over the file's containerRuntimeEndpoint)."""
    found = parse({"imageServiceEndpoint": "unix:///i.sock",
                   "containerRuntimeEndpoint": "unix:///c.sock"})
    assert found.image_service_endpoint == "unix:///i.sock"
    assert found.flags["runtime_endpoint"] == "unix:///c.sock"
    assert parse({"imageServiceEndpoint": None}).image_service_endpoint == ""


def test_the_docs_name_every_field_a_file_may_give() -> None:
    """docs/cluster.md's section on the config file names what nodelet implements and what it
    accepts without a setting (configz.FIXED), so it cannot go stale by a field."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cluster.md").read_text()
    section = doc.split("## The config file (`--config`)", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in (*kc.SUPPORTED, *configz.FIXED) if f"`{name}" not in section]
    assert not missing, missing


def test_fixed_values_are_read_only() -> None:
    with pytest.raises(TypeError):
        configz.FIXED["cgroupDriver"] = "systemd"  # type: ignore[index]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"maxPod": 3}, "unknown field 'maxPod'"),
        ({"cgroupDriver": "systemd"}, "cgroupDriver: nodelet runs with 'cgroupfs' and has no "
                                      "setting for it; 'systemd' cannot be honoured"),
        ({"cpuCFSQuota": False}, "cpuCFSQuota: nodelet runs with true"),
        ({"cpuCFSQuota": 1}, "cpuCFSQuota: nodelet runs with true"),
        ({"cpuCFSQuotaPeriod": "50ms"}, "cpuCFSQuotaPeriod: nodelet runs with '100ms'"),
        ({"enableDebuggingHandlers": False}, "enableDebuggingHandlers: nodelet runs with true"),
        ({"nodeStatusMaxImages": -1}, "nodeStatusMaxImages: nodelet runs with 50"),
        ({"shutdownGracePeriod": "30s"}, "shutdownGracePeriod: nodelet runs with '0s'"),
        ({"volumeStatsAggPeriod": "1m"}, "volumeStatsAggPeriod: only 0s (the default)"),
        ({"serverTLSBootstrap": True}, "serverTLSBootstrap: nodelet runs with false and has "
                                       "no setting for it; true cannot be honoured"),
        ({"podPidsLimit": 1024}, "field 'podPidsLimit' of KubeletConfiguration is not "
                                 "supported by nodelet"),
        ({"podPidsLimit": 0.0}, "podPidsLimit: must be an integer, not a number (0.0)"),
        ({"podPidsLimit": -1.0}, "podPidsLimit: must be an integer, not a number (-1.0)"),
        ({"podPidsLimit": False}, "podPidsLimit: must be an integer, not a boolean"),
        ({"iptablesDropBit": 32}, "iptablesDropBit: 32 is not in 0..31"),
        ({"memorySwap": {"swapBehavior": "LimitedSwap"}}, "field 'memorySwap'"),
        ({"imageServiceEndpoint": 5}, "imageServiceEndpoint: must be a string"),
        # `logging`: what a /configz round trip writes, and the kubelet's defaults, only.
        ({"logging": {"format": "json"}}, "logging.format: 'json' cannot be honoured: "
                                          "nodelet's own --log-format and -v set how it logs"),
        ({"logging": {"verbosity": 4}}, "logging.verbosity: 4 cannot be honoured"),
        ({"logging": {"verbosity": 0.0}}, "logging.verbosity: 0.0 cannot be honoured"),
        ({"logging": {"vmodule": [{"filePattern": "cli*", "verbosity": 4}]}},
         "logging.vmodule: [{'filePattern': 'cli*', 'verbosity': 4}] cannot be honoured"),
        ({"logging": {"flushFrequency": "1s"}},
         "logging.flushFrequency: '1s' cannot be honoured: nodelet writes each log line at "
         "once (write 0s or 5s or leave the field out)"),
        ({"logging": {"flushFrequency": 1000}}, "logging.flushFrequency: 1000 cannot be"),
        ({"logging": {"flushFrequency": "soon"}}, "logging.flushFrequency: 'soon' is not a "
                                                  "duration"),
        ({"logging": {"options": {"text": {"splitStream": True}}}},
         "logging.options.text.splitStream: true cannot be honoured: nodelet writes all its "
         "log lines to stderr (write false or leave the field out)"),
        ({"logging": {"options": {"json": {"infoBufferSize": "64Ki"}}}},
         "logging.options.json.infoBufferSize: '64Ki' cannot be honoured: nodelet buffers no "
         "log lines"),
        ({"logging": {"options": {"yaml": {}}}}, "logging.options: unknown field 'yaml'"),
        ({"logging": {"options": {"text": {"color": True}}}},
         "logging.options.text: unknown field 'color'"),
        ({"logging": {"sampling": 1}}, "logging: unknown field 'sampling'"),
        ({"logging": "text"}, "logging: must be a mapping"),
        ({"oomScoreAdj": -1001}, "oomScoreAdj: -1001 is not in -1000..1000"),
        ({"authentication": {"oidc": {}}}, "authentication: unknown field 'oidc'"),
        ({"authorization": {"mode": "RBAC"}}, "authorization.mode: 'RBAC' must be"),
        ({"authentication": {"webhook": {"enabled": "yes"}}},
         "authentication.webhook.enabled: must be a boolean"),
        ({"port": 70000}, "port: 70000 is not a port"),
        ({"maxPods": "20"}, "maxPods: must be an integer, not a string ('20')"),
        ({"maxPods": True}, "maxPods: must be an integer, not a boolean"),
        ({"kubeAPIQPS": "fast"}, "kubeAPIQPS: must be a number"),
        ({"seccompDefault": "yes"}, "seccompDefault: must be a boolean"),
        ({"featureGates": {"X": "on"}}, "featureGates.X: must be a boolean"),
        ({"evictionHard": ["memory.available<1Gi"]},
         "evictionHard: must be a mapping of strings to strings, not a list"),
        ({"syncFrequency": "1 minute"}, "syncFrequency: '1 minute' is not a duration"),
        ({"syncFrequency": 60}, 'syncFrequency: must be a duration string (e.g. "1m30s"), '
                                "not an integer"),
        ({"syncFrequency": 0}, "syncFrequency: must be a duration string"),
        ({"nodeLeaseDurationSeconds": -5}, "nodeLeaseDurationSeconds: must be greater than 0"),
        ({"eventRecordQPS": 0}, "eventRecordQPS: must be greater than 0"),
        ({"containerLogMonitorInterval": "0s"},
         "containerLogMonitorInterval: must be greater than 0"),
        ({"evictionSoftGracePeriod": {"memory.available": "soon"}},
         "evictionSoftGracePeriod.memory.available: 'soon' is not a duration"),
        ({"registerWithTaints": [{"key": "a", "effect": "Sometimes"}]},
         "registerWithTaints[0]: taint 'a' has effect 'Sometimes'"),
        ({"registerWithTaints": [{"key": "a", "effect": "NoSchedule", "color": "red"}]},
         "registerWithTaints[0]: unknown field 'color'"),
        ({"serializeImagePulls": True}, "serializeImagePulls: true is not supported"),
        ({"imagePullCredentialsVerificationPolicy": "Sometimes"},
         'invalid configuration: option "Sometimes" specified for '
         "imagePullCredentialsVerificationPolicy"),
        # The allowlist only with its policy (and the default is not it).
        ({"preloadedImagesVerificationAllowlist": ["registry.test/*"]},
         "invalid configuration: can't set `preloadedImagesVerificationAllowlist`"),
        ({"imagePullCredentialsVerificationPolicy": "NeverVerifyAllowlistedImages",
          "preloadedImagesVerificationAllowlist": ["registry.test/app:v1"]},
         "invalid configuration: invalid image pattern in "
         "`preloadedImagesVerificationAllowlist`: neither tag nor digest"),
        ({"readOnlyPort": 65536}, "readOnlyPort: 65536 is not a port (0-65535)"),
        ({"readOnlyPort": "10255"}, "readOnlyPort: must be an integer"),
    ],
)
def test_refused_fields_and_wrong_types_are_named(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(kc.KubeletConfigError) as caught:
        parse(fields)
    assert str(caught.value).startswith("kubelet.json: "), caught.value
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: Pod\n", "must be apiVersion kubelet.config.k8s.io/v1beta1"),
        ("kind: KubeletConfiguration\n", "found apiVersion None"),
        ("", "exactly one KubeletConfiguration document, found 0"),
        ("a: [1\n", "kubelet.yaml"),
    ],
)
def test_bad_documents(text: str, message: str) -> None:
    with pytest.raises(kc.KubeletConfigError, match=None) as caught:
        kc.parse(text, filename="kubelet.yaml")
    assert message in str(caught.value)


def test_yaml_file() -> None:
    text = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            "maxPods: 12\nsyncFrequency: 30s\nfeatureGates:\n  PodHasNetworkCondition: true\n")
    assert kc.parse(text, filename="kubelet.yaml") == kc.Overrides(
        flags={"max_pods": 12, "feature_gates": "PodHasNetworkCondition=true",
               "read_only_port": 0},
        settings={"sync.resync_period": 30.0})


def test_every_supported_field_is_a_kubelet_field() -> None:
    assert set(kc.SUPPORTED) <= kc.FIELDS


@pytest.mark.parametrize(
    ("fields", "flags"),
    [
        # Relative to the file's directory (the kubelet's resolveRelativePaths).
        ({"staticPodPath": "manifests", "resolvConf": "resolv.conf",
          "tlsCertFile": "pki/kubelet.crt", "tlsPrivateKeyFile": "./pki/kubelet.key",
          "authentication": {"x509": {"clientCAFile": "../pki/ca.crt"}}},
         {"manifests": "/etc/kubernetes/manifests", "resolv_conf": "/etc/kubernetes/resolv.conf",
          "tls_cert_file": "/etc/kubernetes/pki/kubelet.crt",
          "tls_private_key_file": "/etc/kubernetes/pki/kubelet.key",
          "client_ca_file": "/etc/pki/ca.crt"}),  # cleaned, as Go's filepath.Join
        # Absolute paths and "" (no resolv.conf) stay as they are.
        ({"staticPodPath": "/srv/manifests", "resolvConf": ""},
         {"manifests": "/srv/manifests", "resolv_conf": ""}),
    ],
)
def test_relative_paths_are_relative_to_the_file(fields: dict[str, Any],
                                                  flags: dict[str, Any]) -> None:
    assert parse(fields, filename="/etc/kubernetes/kubelet.json").flags == {
        "read_only_port": 0, **flags}


@pytest.mark.parametrize(
    ("file", "flags", "merged"),
    [
        ("A=true,B=false", "B=true", "A=true,B=true"),
        ("A=true", "", "A=true"),
        ("", "B=false", "B=false"),
        ("A=true,B=false", "A=false, C=true", "A=false,B=false,C=true"),
    ],
)
def test_command_line_gates_merge_with_the_file_s_key_by_key(file: str, flags: str,
                                                             merged: str) -> None:
    assert kc.merge_feature_gates(file, flags) == merged


def test_a_file_written_from_configz_reads_back() -> None:
    """The node e2e suite restarts the agent with a file it writes from /configz (decoded into
    the kubelet's internal type and encoded again: every pointer field /configz left out comes
    back as its Go zero value). This one was written so from nodelet's /configz (paths
    shortened): it reads back into what nodelet ran with, plus the suite's change."""
    text = """
address: 0.0.0.0
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous: {enabled: false}
  webhook: {cacheTTL: 2m0s, enabled: true}
  x509: {clientCAFile: /pki/ca.crt}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 5m0s, cacheUnauthorizedTTL: 30s}
cgroupDriver: cgroupfs
cgroupRoot: /
cgroupsPerQOS: true
containerLogMaxFiles: 5
containerLogMaxSize: 10Mi
containerLogMaxWorkers: 1
containerLogMonitorInterval: 10s
containerRuntimeEndpoint: unix:///data/containerd/containerd.sock
cpuCFSQuota: true
cpuCFSQuotaPeriod: 100ms
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
enableControllerAttachDetach: true
enableDebugFlagsHandler: false
enableDebuggingHandlers: true
enableProfilingHandler: false
enableServer: true
enableSystemLogHandler: false
enableSystemLogQuery: false
eventBurst: 100
eventRecordQPS: 50
evictionHard: {imagefs.available: 15%, memory.available: 100Mi, nodefs.available: 10%}
evictionPressureTransitionPeriod: 5m0s
failCgroupV1: false
failSwapOn: false
featureGates: {PodReadyToStartContainersCondition: true}
fileCheckFrequency: 30s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageGCHighThresholdPercent: 85
imageGCLowThresholdPercent: 80
imageMinimumGCAge: 2m0s
imagePullCredentialsVerificationPolicy: NeverVerifyPreloadedImages
imageServiceEndpoint: unix:///data/containerd/containerd.sock
kind: KubeletConfiguration
kubeAPIBurst: 100
kubeAPIQPS: 50
localStorageCapacityIsolation: true
logging:
  flushFrequency: 0
  options:
    json: {infoBufferSize: "0"}
    text: {infoBufferSize: "0"}
  verbosity: 0
makeIPTablesUtilChains: false
maxPods: 110
memorySwap: {}
mergeDefaultEvictionSettings: false
nodeLeaseDurationSeconds: 40
nodeStatusMaxImages: 50
nodeStatusReportFrequency: 5m0s
nodeStatusUpdateFrequency: 10s
oomScoreAdj: 0
podPidsLimit: 0
port: 10250
readOnlyPort: 10255
registerNode: true
registryPullQPS: 0
resolvConf: /etc/resolv.conf
rotateCertificates: true
runtimeRequestTimeout: 2m0s
seccompDefault: false
serializeImagePulls: false
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 1m0s
volumeStatsAggPeriod: 0s
"""
    found = kc.parse(text, filename="/work/kubelet-config")
    assert found.settings["manifest_resync_period"] == 30.0  # the suite's change
    assert found.settings["node.oom_score_adj"] == 0
    assert found.flags["manifests"] == "/manifests"
    assert found.flags["port"] == 10250 and found.flags["read_only_port"] == 10255
    assert found.flags["healthz_port"] == 10248
