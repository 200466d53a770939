"""`GET /configz` on the node server: the running configuration as a KubeletConfiguration (pure).

The kubelet serves `{"kubeletconfig": <its KubeletConfiguration, v1beta1 field names>}`
(component-base/configz; cmd/kubelet initConfigz); the node e2e framework and operators read it
through `nodes/<name>/proxy/configz`. nodelet answers with the same shape, filled from its
settings for every field it implements (as `model.parsing.kubeletconfig` reads them from a
`--config` file), and with the fixed values of what it does not make configurable (the cgroup
driver, swap, registration) as they behave. Durations are Go duration strings, as the kubelet
writes them (`1m0s`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from nodelet import settings as settings_
from nodelet.model.core.durations import go_duration

_BINARY_UNITS = (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"

# What nodelet does where it has no setting, in the kubelet's field names and values. /configz
# reports them; a `--config` file may repeat them (a file written from /configz, as the node e2e
# suite writes one before it restarts the agent), but asking for another value is refused
# (model.parsing.kubeletconfig).
FIXED: Mapping[str, Any] = MappingProxyType({
    "enableServer": True,  # the node server always runs
    "cgroupsPerQOS": True,  # pods under kubepods/{burstable,besteffort}
    "cgroupDriver": "cgroupfs",
    "cpuCFSQuota": True, "cpuCFSQuotaPeriod": "100ms",  # CPU limits are CFS quotas
    "enableControllerAttachDetach": True,  # the node's annotation says so; no attach here
    "enableDebuggingHandlers": True,  # exec, attach, portForward, run, containerLogs
    "enableProfilingHandler": False, "enableDebugFlagsHandler": False,
    "enableSystemLogHandler": False, "enableSystemLogQuery": False,
    "localStorageCapacityIsolation": True,  # ephemeral-storage limits evict (eviction)
    "makeIPTablesUtilChains": False,  # no KUBE-* chains of its own
    "mergeDefaultEvictionSettings": False,  # an evictionHard given is all there is
    "nodeStatusMaxImages": 50,  # model.core.nodes.MAX_IMAGES
    "registryPullQPS": 0,  # pulls are not rate-limited
    "registerNode": True,  # with an API server, the node registers itself
    "serializeImagePulls": False,  # the images of different pods pull in parallel
    "shutdownGracePeriod": "0s", "shutdownGracePeriodCriticalPods": "0s",  # no node shutdown
    "failSwapOn": False, "failCgroupV1": False,  # it runs with swap and on cgroup v1
    "serverTLSBootstrap": False,  # a self-signed or given serving pair, no serving CSR
    # No exclusive CPUs, memory or NUMA alignment: the kubelet's default policies.
    "cpuManagerPolicy": "none", "memoryManagerPolicy": "None",
    "topologyManagerPolicy": "none", "topologyManagerScope": "container",
})


def byte_quantity(value: int) -> str:
    """Bytes as the shortest exact binary quantity (10485760 → 10Mi), as the kubelet's
    containerLogMaxSize is written."""
    for suffix, size in _BINARY_UNITS:
        if value and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def _quantities(pairs: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(pairs)


def _thresholds(text: str) -> dict[str, str]:
    """`memory.available<100Mi,...` as the kubelet's evictionHard map."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        signal, _, value = item.partition("<")
        out[signal.strip()] = value.strip()
    return out


def _authentication(s: settings_.Settings) -> dict[str, Any]:
    ns = s.node_server
    webhook = ns.authentication_token_webhook
    if webhook is None:
        webhook = s.cluster is not None
    return {
        "x509": {"clientCAFile": str(ns.client_ca_file or "")},
        "webhook": {"enabled": webhook,
                    "cacheTTL": go_duration(ns.authentication_token_webhook_cache_ttl)},
        "anonymous": {"enabled": ns.anonymous_auth},
    }


def _authorization(s: settings_.Settings) -> dict[str, Any]:
    ns = s.node_server
    mode = ns.authorization_mode or ("Webhook" if s.cluster is not None else "AlwaysAllow")
    return {"mode": mode, "webhook": {
        "cacheAuthorizedTTL": go_duration(ns.authorization_webhook_cache_authorized_ttl),
        "cacheUnauthorizedTTL": go_duration(ns.authorization_webhook_cache_unauthorized_ttl)}}


def _cluster_fields(s: settings_.Settings) -> dict[str, Any]:
    c = s.cluster
    if c is None:
        return {}
    return {
        # int32 fields in KubeletConfiguration: a client that decodes it (the node e2e
        # suite) refuses `50.0`.
        "kubeAPIQPS": round(c.qps), "kubeAPIBurst": c.burst,
        "eventRecordQPS": round(c.event_qps), "eventBurst": c.event_burst,
        "nodeStatusUpdateFrequency": go_duration(c.node_status_period),
        "nodeStatusReportFrequency": go_duration(c.node_report_period),
        "nodeLeaseDurationSeconds": c.lease_duration,
        "rotateCertificates": c.rotate_certificates,
    }


def kubelet_configuration(s: settings_.Settings, *, runtime_endpoint: str) -> dict[str, Any]:
    """The KubeletConfiguration (v1beta1 field names) that `s` amounts to."""
    ns, gc, ev = s.node_server, s.gc, s.eviction
    config: dict[str, Any] = {
        "apiVersion": API_VERSION, "kind": KIND, **FIXED,
        "staticPodPath": str(s.manifests_dir or ""),
        "syncFrequency": go_duration(s.sync.resync_period),
        "fileCheckFrequency": go_duration(s.manifest_resync_period),
        "address": ns.address, "port": ns.port,
        "readOnlyPort": s.server.port if s.server.enabled else 0,
        "tlsCertFile": str(ns.tls_cert_file or ""),
        "tlsPrivateKeyFile": str(ns.tls_private_key_file or ""),
        "authentication": _authentication(s), "authorization": _authorization(s),
        "clusterDomain": s.dns.cluster_domain, "clusterDNS": list(s.dns.cluster_dns),
        "resolvConf": str(s.dns.resolv_conf or ""),
        "maxPods": s.node.max_pods, "cgroupRoot": s.node.cgroup_root,
        "healthzPort": s.server.healthz_port, "healthzBindAddress": s.server.healthz_host,
        "systemReserved": _quantities(s.node.system_reserved),
        "kubeReserved": _quantities(s.node.kube_reserved),
        "registerWithTaints": [{"key": k, "value": v, "effect": e}
                               for k, v, e in s.node.register_with_taints],
        "containerRuntimeEndpoint": runtime_endpoint, "imageServiceEndpoint": runtime_endpoint,
        "runtimeRequestTimeout": go_duration(s.runtime.timeouts.default),
        "imagePullCredentialsVerificationPolicy": s.image_credentials.verification_policy,
        "imageMinimumGCAge": go_duration(gc.image_minimum_gc_age),
        "imageMaximumGCAge": go_duration(gc.image_maximum_gc_age),
        "imageGCHighThresholdPercent": gc.image_gc_high_percent,
        "imageGCLowThresholdPercent": gc.image_gc_low_percent,
        "evictionHard": _thresholds(ev.hard), "evictionSoft": _thresholds(ev.soft),
        "evictionSoftGracePeriod": {k: go_duration(v) for k, v in ev.soft_grace_periods},
        "evictionPressureTransitionPeriod": go_duration(ev.pressure_transition_period),
        "evictionMaxPodGracePeriod": int(ev.max_pod_grace_period),
        "containerLogMaxSize": byte_quantity(s.logs.max_size),
        "containerLogMaxFiles": s.logs.max_files,
        "containerLogMonitorInterval": go_duration(s.logs.monitor_period),
        "containerLogMaxWorkers": s.logs.max_workers,
        "seccompDefault": s.security.seccomp_default,
        "allowedUnsafeSysctls": list(s.security.allowed_unsafe_sysctls),
        "featureGates": dict(settings_.feature_gate_items(s.gates)),
    }
    if s.node.oom_score_adj is not None:  # else nodelet leaves its own as inherited
        config["oomScoreAdj"] = s.node.oom_score_adj
    if s.image_credentials.preloaded_allowlist:  # omitempty, as the kubelet writes it
        config["preloadedImagesVerificationAllowlist"] = list(
            s.image_credentials.preloaded_allowlist)
    return config | _cluster_fields(s)


def configz(s: settings_.Settings, *, runtime_endpoint: str) -> dict[str, Any]:
    """The body of `GET /configz`."""
    return {"kubeletconfig": kubelet_configuration(s, runtime_endpoint=runtime_endpoint)}
