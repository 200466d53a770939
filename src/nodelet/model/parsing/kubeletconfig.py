"""A KubeletConfiguration file (`--config`), read into settings overrides (pure).

The file is YAML or JSON (a `.json` name is read as JSON), one object with
`apiVersion: kubelet.config.k8s.io/v1beta1` and `kind: KubeletConfiguration`; its fields are
those of `k8s.io/kubelet/config/v1beta1` (`FIELDS`). Rules:

- a field nodelet implements is turned into what its flag would have given (`Overrides.flags`,
  by argparse destination, so the CLI runs the same checks on it as on the flag), or, for a
  field without a flag, into the setting's value (`Overrides.settings`, by dotted settings
  path, e.g. `sync.resync_period`). A flag given on the command line wins over the file (the
  kubelet's rule), which the CLI decides;
- a KubeletConfiguration field nodelet has no setting for may only say what nodelet does, as
  a file written from its /configz does: the value in `configz.FIXED` (`cgroupDriver:
  cgroupfs`, `serverTLSBootstrap: false`, ...), or the Go zero value or the kubelet's default
  of a field /configz leaves out (the rules beside `_UNSET_WHEN_ZERO`: `podPidsLimit` 0 or
  -1, `logging` as text at verbosity 0, ...). Another value is an error that names the field
  and what nodelet does, as is an unknown field or a value of the wrong type (the message
  names the expected type);
- `imageServiceEndpoint` is returned apart (`Overrides.image_service_endpoint`): one runtime
  serves pods and images, so the CLI checks it against the runtime endpoint in effect;
- `null` is the same as leaving the field out, and so is the zero value (`0`, `"0s"`, `""`)
  of a field the kubelet's v1beta1 defaulting (SetDefaults_KubeletConfiguration) fills in when
  zero (`ZERO_IS_DEFAULT`; kubeadm writes e.g. `syncFrequency: 0s`); as there,
  `nodeStatusReportFrequency` left out or zero follows an explicit `nodeStatusUpdateFrequency`;
- `readOnlyPort` is always in `Overrides.flags` (`read_only_port`): the field's port, or 0
  (off) when it is left out, as the kubelet's v1beta1 default is 0 (the CLI lets `--listen`
  or `--read-only-port` on the command line win);
- relative paths (`PATH_FIELDS`: staticPodPath, resolvConf, tlsCertFile, tlsPrivateKeyFile,
  authentication.x509.clientCAFile) are relative to the file's directory, as the kubelet's
  resolveRelativePaths makes them;
- durations are Go durations ("1m30s", "500ms"), returned in seconds for settings and as
  written for flags; quantities are checked by the flag they go to.

`merge_feature_gates(file, flags)` is the kubelet's rule for `--feature-gates` given with a
file: the file's gates stay, the command line's win gate by gate.

`KubeletConfigError` (a ValueError) is the one exception; its message starts with the file name.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nodelet.model.core import configz, nodeflags, pullrecords
from nodelet.model.core.durations import duration_seconds
from nodelet.model.parsing import manifests

API_VERSION = configz.API_VERSION
KIND = configz.KIND


class KubeletConfigError(ValueError):
    """The config file cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Overrides:
    """What the file sets: flag values by argparse destination, settings by dotted path."""

    flags: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    # The file's imageServiceEndpoint ("" when left out: the runtime endpoint). nodelet pulls
    # through the runtime it runs pods with, so the CLI checks that this names the runtime
    # endpoint in effect (the file's containerRuntimeEndpoint, or the command line's).
    image_service_endpoint: str = ""


# --- value types -----------------------------------------------------------------------------


def _type_error(name: str, expected: str, value: Any) -> KubeletConfigError:
    got = "null" if value is None else type(value).__name__
    shown = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
             "list": "a list", "dict": "a mapping"}.get(got, got)
    return KubeletConfigError(f"{name}: must be {expected}, not {shown} ({value!r})")


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _type_error(name, "a string", value)
    return value


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(name, "an integer", value)
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_error(name, "a number", value)
    return float(value)


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _type_error(name, "a boolean (true or false)", value)
    return value


def _duration(name: str, value: Any) -> str:
    """The duration as written (for a flag that takes a Go duration), checked."""
    text = _string_typed(name, value, 'a duration string (e.g. "1m30s")')
    if duration_seconds(text) is None:
        raise KubeletConfigError(
            f'{name}: {text!r} is not a duration (write e.g. "0s", "90s", "1m30s", "2h")')
    return text


def _seconds(name: str, value: Any) -> float:
    seconds = duration_seconds(_duration(name, value))
    assert seconds is not None
    return seconds


def _string_typed(name: str, value: Any, expected: str) -> str:
    if not isinstance(value, str):
        raise _type_error(name, expected, value)
    return value


def _string_list(name: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _type_error(name, "a list of strings", value)
    return [_string(f"{name}[{i}]", item) for i, item in enumerate(value)]


def _string_map(name: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _type_error(name, "a mapping of strings to strings", value)
    return {str(k): _string(f"{name}.{k}", v) for k, v in value.items()}


def _bool_map(name: str, value: Any) -> dict[str, bool]:
    if not isinstance(value, dict):
        raise _type_error(name, "a mapping of names to booleans", value)
    return {str(k): _boolean(f"{name}.{k}", v) for k, v in value.items()}


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise KubeletConfigError(f"{name}: must be greater than 0, not {value:g}")


# --- field conversions -----------------------------------------------------------------------


def _joined(separator: str) -> Callable[[str, Any], str]:
    def convert(name: str, value: Any) -> str:
        return ",".join(f"{k}{separator}{v}" for k, v in _string_map(name, value).items())
    return convert


def _soft_graces(name: str, value: Any) -> str:
    graces = _string_map(name, value)
    for signal, text in graces.items():
        _duration(f"{name}.{signal}", text)
    return ",".join(f"{k}={v}" for k, v in graces.items())


def _gates(name: str, value: Any) -> str:
    return ",".join(f"{k}={str(v).lower()}" for k, v in _bool_map(name, value).items())


def _taints(name: str, value: Any) -> str:
    if not isinstance(value, list):
        raise _type_error(name, "a list of taints ({key, value, effect})", value)
    out = []
    for i, item in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise _type_error(where, "a taint ({key, value, effect})", item)
        unknown = sorted(set(item) - {"key", "value", "effect", "timeAdded"})
        if unknown:
            raise KubeletConfigError(f"{where}: unknown field {unknown[0]!r}")
        key = _string(f"{where}.key", item.get("key"))
        taint_value = _string(f"{where}.value", item.get("value") or "")
        effect = _string(f"{where}.effect", item.get("effect"))
        try:
            nodeflags.check_taint(key, taint_value, effect, where)
        except nodeflags.NodeFlagError as exc:
            raise KubeletConfigError(str(exc)) from exc
        out.append(f"{key}={taint_value}:{effect}" if taint_value else f"{key}:{effect}")
    return ",".join(out)


def _pod_cidr(name: str, value: Any) -> list[str]:
    return [_string(name, value)]


def _positive_int(name: str, value: Any) -> int:
    number = _integer(name, value)
    _positive(name, number)
    return number


def _positive_number(name: str, value: Any) -> float:
    number = _number(name, value)
    _positive(name, number)
    return number


def _positive_seconds(name: str, value: Any) -> float:
    seconds = _seconds(name, value)
    _positive(name, seconds)
    return seconds


def _serialize_image_pulls(name: str, value: Any) -> bool:
    if _boolean(name, value):
        raise KubeletConfigError(
            f"{name}: true is not supported: nodelet pulls the images of different pods in "
            "parallel (write false, or leave the field out)")
    return False


@dataclass(frozen=True)
class _Flag:
    dest: str
    convert: Callable[[str, Any], Any]


@dataclass(frozen=True)
class _Setting:
    path: str
    convert: Callable[[str, Any], Any]


# Fields nodelet implements → the flag (argparse destination) or setting they set.
SUPPORTED: dict[str, _Flag | _Setting] = {
    "staticPodPath": _Flag("manifests", _string),
    "containerRuntimeEndpoint": _Flag("runtime_endpoint", _string),
    "clusterDNS": _Flag("cluster_dns", _string_list),
    "clusterDomain": _Flag("cluster_domain", _string),
    "resolvConf": _Flag("resolv_conf", _string),
    "podCIDR": _Flag("pod_cidr", _pod_cidr),
    "maxPods": _Flag("max_pods", _integer),
    "kubeAPIQPS": _Flag("kube_api_qps", _number),
    "kubeAPIBurst": _Flag("kube_api_burst", _integer),
    "featureGates": _Flag("feature_gates", _gates),
    "systemReserved": _Flag("system_reserved", _joined("=")),
    "kubeReserved": _Flag("kube_reserved", _joined("=")),
    "cgroupRoot": _Flag("cgroup_root", _string),
    "containerLogMaxSize": _Flag("container_log_max_size", _string),
    "containerLogMaxFiles": _Flag("container_log_max_files", _integer),
    "imageGCHighThresholdPercent": _Flag("image_gc_high_threshold", _integer),
    "imageGCLowThresholdPercent": _Flag("image_gc_low_threshold", _integer),
    "imageMinimumGCAge": _Flag("image_minimum_gc_age", _duration),
    # No flag in the kubelet; 0 (its default) is off. Checked against the minimum age by the
    # CLI, once the command line's --image-minimum-gc-age is known.
    "imageMaximumGCAge": _Setting("gc.image_maximum_gc_age", _seconds),
    "evictionHard": _Flag("eviction_hard", _joined("<")),
    "evictionSoft": _Flag("eviction_soft", _joined("<")),
    "evictionSoftGracePeriod": _Flag("eviction_soft_grace_period", _soft_graces),
    "evictionPressureTransitionPeriod": _Flag("eviction_pressure_transition_period",
                                              _duration),
    "evictionMaxPodGracePeriod": _Flag("eviction_max_pod_grace_period", _integer),
    "seccompDefault": _Flag("seccomp_default", _boolean),
    "allowedUnsafeSysctls": _Flag("allowed_unsafe_sysctls",
                                  lambda n, v: ",".join(_string_list(n, v))),
    "registerWithTaints": _Flag("register_with_taints", _taints),
    "rotateCertificates": _Flag("rotate_certificates", _boolean),
    "healthzPort": _Flag("healthz_port", lambda n, v: _port(n, v, allow_zero=True)),
    "healthzBindAddress": _Flag("healthz_bind_address", _string),
    "syncFrequency": _Setting("sync.resync_period", _positive_seconds),
    "fileCheckFrequency": _Setting("manifest_resync_period", _positive_seconds),
    "runtimeRequestTimeout": _Setting("runtime.timeouts.default", _positive_seconds),
    "containerLogMonitorInterval": _Setting("logs.monitor_period", _positive_seconds),
    "containerLogMaxWorkers": _Setting("logs.max_workers", _positive_int),
    "nodeStatusUpdateFrequency": _Setting("cluster.node_status_period", _positive_seconds),
    "nodeStatusReportFrequency": _Setting("cluster.node_report_period", _positive_seconds),
    "nodeLeaseDurationSeconds": _Setting("cluster.lease_duration", _positive_int),
    "eventRecordQPS": _Setting("cluster.event_qps", _positive_number),
    "eventBurst": _Setting("cluster.event_burst", _positive_int),
    "serializeImagePulls": _Setting("", _serialize_image_pulls),
    "imagePullCredentialsVerificationPolicy": _Setting(
        "image_credentials.verification_policy", _string),
    "preloadedImagesVerificationAllowlist": _Setting(
        "image_credentials.preloaded_allowlist", lambda n, v: tuple(_string_list(n, v))),
    # The node server (port 10250): as the kubelet's `address` and `port`.
    "address": _Flag("address", _string),
    "port": _Flag("port", lambda n, v: _port(n, v, allow_zero=True)),
    "tlsCertFile": _Flag("tls_cert_file", _string),
    "tlsPrivateKeyFile": _Flag("tls_private_key_file", _string),
    "oomScoreAdj": _Setting("node.oom_score_adj", lambda n, v: _in_range(n, v, -1000, 1000)),
}

# Fields nodelet has no setting for, and what a file may say of them (a file written from
# /configz says what nodelet does, and the Go zero values of the fields /configz leaves out):
# - configz.FIXED: that value, nothing else (a duration compared as one: "0.1s" is "100ms");
# - these durations: zero, which the kubelet's defaulting turns into its default (nodelet
#   has no static pod URL, CPU manager or volume stats cache, and its exec/attach/port-forward
#   streams are the runtime's, with the runtime's idle timeout);
_UNSET_WHEN_ZERO = frozenset({"httpCheckFrequency", "cpuManagerReconcilePeriod",
                              "volumeStatsAggPeriod", "streamingConnectionIdleTimeout"})
# - `podPidsLimit`: the integer 0 or -1, no limit (the kubelet sets pids.max only when it is
#   above 0);
# - `iptablesMasqueradeBit`, `iptablesDropBit`: any bit 0..31, which marks nothing: nodelet
#   makes no iptables chains (`makeIPTablesUtilChains` is false, and then the kubelet uses
#   them for nothing either);
# - `imageServiceEndpoint`: "" or the runtime endpoint in effect (one runtime serves both),
#   which the CLI checks (Overrides.image_service_endpoint) once the command line's
#   --runtime-endpoint is known;
# - `crashLoopBackOff`, `memorySwap`: empty (the crash back-off doubles from 10 s to 5 min, as
#   the kubelet's default; nodelet sets no swap limit, so an explicit `swapBehavior` is
#   refused: on a host with swap, the kubelet's default NoSwap would also cap memory+swap at
#   the memory limit on cgroup v1, which nodelet does not);
# - `logging`: the text format at verbosity 0, without vmodule, with the default flush and
#   buffer figures and one output stream (_LOGGING; nodelet's own --log-format and -v say
#   more).

# Fields whose zero value the kubelet's v1beta1 defaulting replaces by the default (they are not
# pointers there): "0s", 0 or "" here means "leave it out". Pointer fields (kubeAPIQPS,
# eventRecordQPS, containerLogMaxFiles, imageGCHighThresholdPercent, ...) keep their zero.
# The same for the paths whose "" is "none" there as nodelet's default is (no static pod
# directory, a self-signed serving pair): /configz writes "" for them.
ZERO_IS_DEFAULT = frozenset({
    "syncFrequency", "fileCheckFrequency", "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency", "imageMinimumGCAge", "runtimeRequestTimeout",
    "evictionPressureTransitionPeriod", "nodeLeaseDurationSeconds", "eventBurst", "maxPods",
    "kubeAPIBurst", "port", "address", "containerLogMaxSize", "containerRuntimeEndpoint",
    "imagePullCredentialsVerificationPolicy", "staticPodPath", "tlsCertFile",
    "tlsPrivateKeyFile",
})

# Every top-level duration field (metav1.Duration) of KubeletConfiguration: their zero is any
# zero duration ("0s", "0"), and a fixed value (configz.FIXED) is compared as a duration.
_DURATIONS = frozenset({
    "syncFrequency", "fileCheckFrequency", "httpCheckFrequency",
    "streamingConnectionIdleTimeout", "nodeStatusUpdateFrequency", "nodeStatusReportFrequency",
    "imageMinimumGCAge", "imageMaximumGCAge", "volumeStatsAggPeriod",
    "cpuManagerReconcilePeriod", "runtimeRequestTimeout", "cpuCFSQuotaPeriod",
    "evictionPressureTransitionPeriod", "containerLogMonitorInterval", "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
})

# Path fields, by flag destination (the kubelet's KubeletConfigurationPathRefs, those nodelet
# reads); `client_ca_file` is authentication.x509.clientCAFile.
PATH_FIELDS = ("manifests", "resolv_conf", "tls_cert_file", "tls_private_key_file",
               "client_ca_file")

# Fields read on their own: `readOnlyPort` is the read-only API's --read-only-port (0 or
# absent: off, the kubelet's default in a file), `authentication` and `authorization` are
# objects of several flags.
_LISTEN_FIELDS = ("readOnlyPort", "authentication", "authorization")
# Read apart from the settings: the document's type, and `imageServiceEndpoint`
# (Overrides.image_service_endpoint).
_READ_APART = ("apiVersion", "kind", "imageServiceEndpoint")

# Every top-level field of k8s.io/kubelet/config/v1beta1 KubeletConfiguration: the ones not
# in SUPPORTED (or _LISTEN_FIELDS) are refused by name as "not supported".
FIELDS = frozenset({
    "enableServer", "staticPodPath", "podLogsDir", "syncFrequency", "fileCheckFrequency",
    "httpCheckFrequency", "staticPodURL", "staticPodURLHeader", "address", "port",
    "readOnlyPort", "tlsCertFile", "tlsPrivateKeyFile", "tlsCipherSuites",
    "tlsCurvePreferences", "tlsMinVersion", "rotateCertificates", "serverTLSBootstrap",
    "authentication", "authorization", "registryPullQPS", "registryBurst",
    "imagePullCredentialsVerificationPolicy", "preloadedImagesVerificationAllowlist",
    "eventRecordQPS", "eventBurst", "enableDebuggingHandlers", "enableContentionProfiling",
    "healthzPort", "healthzBindAddress", "oomScoreAdj", "clusterDomain", "clusterDNS",
    "streamingConnectionIdleTimeout", "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency", "nodeLeaseDurationSeconds", "imageMinimumGCAge",
    "imageMaximumGCAge", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
    "volumeStatsAggPeriod", "kubeletCgroups", "systemCgroups", "cgroupRoot", "cgroupsPerQOS",
    "cgroupDriver", "cpuManagerPolicy", "singleProcessOOMKill", "cpuManagerPolicyOptions",
    "cpuManagerReconcilePeriod", "draManagerReconcilePeriod", "memoryManagerPolicy",
    "topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
    "qosReserved", "runtimeRequestTimeout", "hairpinMode", "maxPods", "podCIDR",
    "podPidsLimit", "resolvConf", "runOnce", "cpuCFSQuota", "cpuCFSQuotaPeriod",
    "nodeStatusMaxImages", "maxOpenFiles", "contentType", "kubeAPIQPS", "kubeAPIBurst",
    "serializeImagePulls", "maxParallelImagePulls", "evictionHard", "evictionSoft",
    "evictionSoftGracePeriod", "evictionPressureTransitionPeriod",
    "evictionMaxPodGracePeriod", "evictionMinimumReclaim", "mergeDefaultEvictionSettings",
    "podsPerCore", "enableControllerAttachDetach", "protectKernelDefaults",
    "makeIPTablesUtilChains", "iptablesMasqueradeBit", "iptablesDropBit", "featureGates",
    "failSwapOn", "memorySwap", "containerLogMaxSize", "containerLogMaxFiles",
    "containerLogMaxWorkers", "containerLogMonitorInterval",
    "configMapAndSecretChangeDetectionStrategy", "systemReserved", "kubeReserved",
    "reservedSystemCPUs", "showHiddenMetricsForVersion", "systemReservedCgroup",
    "kubeReservedCgroup", "enforceNodeAllocatable", "allowedUnsafeSysctls",
    "volumePluginDir", "providerID", "kernelMemcgNotification", "logging",
    "enableSystemLogHandler", "enableSystemLogQuery", "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods", "shutdownGracePeriodByPodPriority", "crashLoopBackOff",
    "reservedMemory", "enableProfilingHandler", "enableDebugFlagsHandler", "seccompDefault",
    "memoryThrottlingFactor", "memoryReservationPolicy", "registerWithTaints", "registerNode",
    "tracing", "localStorageCapacityIsolation", "containerRuntimeEndpoint",
    "imageServiceEndpoint", "failCgroupV1", "userNamespaces",
})


# --- the file --------------------------------------------------------------------------------


def parse(text: str, *, filename: str) -> Overrides:
    """The overrides of config file `filename` with content `text`; relative paths in it are
    made relative to the directory of `filename`."""
    try:
        overrides = _overrides(_document(text, filename))
    except KubeletConfigError as exc:
        raise KubeletConfigError(f"{filename}: {exc}") from exc
    return replace(overrides, flags=_resolved(overrides.flags, posixpath.dirname(filename)))


def _resolved(flags: Mapping[str, Any], root: str) -> dict[str, Any]:
    """The kubelet's resolveRelativePaths: a non-empty relative path joined to `root` (and
    cleaned, as Go's filepath.Join does)."""
    out = dict(flags)
    for dest in PATH_FIELDS:
        value = out.get(dest)
        if isinstance(value, str) and value and not posixpath.isabs(value):
            out[dest] = posixpath.normpath(posixpath.join(root, value))
    return out


def merge_feature_gates(file: str, flags: str) -> str:
    """`--feature-gates` over the file's `featureGates` (both `K=V,...`): the kubelet adds
    back the gates set in the file and not on the command line, so the flags win key by key."""
    merged: dict[str, str] = {}
    for text in (file, flags):
        for item in filter(None, (part.strip() for part in text.split(","))):
            merged[item.partition("=")[0].strip()] = item
    return ",".join(merged.values())


def _document(text: str, filename: str) -> Mapping[str, Any]:
    documents = manifests.parse_documents(text, filename=filename)
    if len(documents) != 1:
        raise KubeletConfigError(
            f"must hold exactly one {KIND} document, found {len(documents)}")
    document = documents[0]
    if isinstance(document, manifests.ManifestProblem):
        raise KubeletConfigError(document.message)
    obj = document.obj
    if obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
        raise KubeletConfigError(
            f"must be apiVersion {API_VERSION}, kind {KIND}; found apiVersion "
            f"{obj.get('apiVersion')!r}, kind {obj.get('kind')!r}")
    return obj


def _overrides(obj: Mapping[str, Any]) -> Overrides:
    flags: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    for name, value in obj.items():
        if name in _READ_APART or name in _LISTEN_FIELDS or value is None:
            continue
        target = SUPPORTED.get(name)
        if target is None:
            _check_unsettable(name, value)
            continue
        if name in ZERO_IS_DEFAULT and _is_zero(name, value):
            continue  # the kubelet's defaulting: zero is the default
        converted = target.convert(name, value)
        if isinstance(target, _Flag):
            flags[target.dest] = converted
        elif target.path:
            settings[target.path] = converted
    update, report = "cluster.node_status_period", "cluster.node_report_period"
    if update in settings and report not in settings:
        # SetDefaults_KubeletConfiguration: an unset report frequency follows an explicit
        # update frequency (backward compatibility there), 5 min only when both are unset.
        settings[report] = settings[update]
    _check_image_credentials(settings)
    flags["read_only_port"] = _read_only_port(obj)
    flags.update(_authentication(obj.get("authentication")))
    flags.update(_authorization(obj.get("authorization")))
    image = obj.get("imageServiceEndpoint")
    return Overrides(flags=flags, settings=settings, image_service_endpoint=(
        "" if image is None else _string("imageServiceEndpoint", image)))


def _check_image_credentials(settings: Mapping[str, Any]) -> None:
    """The kubelet's checks of the two fields together (the policy's default when left out)."""
    policy = settings.get("image_credentials.verification_policy") or pullrecords.DEFAULT_POLICY
    try:
        pullrecords.check_settings(policy,
                                   settings.get("image_credentials.preloaded_allowlist", ()))
    except ValueError as exc:
        raise KubeletConfigError(str(exc)) from exc


def _is_zero(name: str, value: Any) -> bool:
    """The Go zero value of the field's own type: 0 (not false), "", or a zero duration
    ("0s", "0") for a duration field; a value of another type is left to the field's check."""
    if name in _DURATIONS:
        return isinstance(value, str) and duration_seconds(value) == 0
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == 0
    return isinstance(value, str) and not value


def _check_unsettable(name: str, value: Any) -> None:
    """A field nodelet has no setting for: fine when it says what nodelet does (configz.FIXED,
    _UNSET_WHEN_ZERO and the rules beside it), else refused by name."""
    if name in configz.FIXED:
        _check_fixed(name, value, configz.FIXED[name])
    elif name in _UNSET_WHEN_ZERO:
        if not _is_zero(name, value):
            raise KubeletConfigError(
                f"{name}: only 0s (the default) is supported, not {value!r}")
    elif name == "podPidsLimit":
        if _integer(name, value) not in (0, -1):
            raise _refused(name)
    elif name in ("iptablesMasqueradeBit", "iptablesDropBit"):
        _in_range(name, value, 0, 31)
    elif name in ("crashLoopBackOff", "memorySwap"):
        if not isinstance(value, dict) or any(v not in (None, "") for v in value.values()):
            raise _refused(name)
    elif name == "logging":
        _check_logging(value)
    else:
        raise _refused(name)


def _check_fixed(name: str, value: Any, fixed: Any) -> None:
    if isinstance(fixed, str) and name in _DURATIONS:
        same = isinstance(value, str) and duration_seconds(value) == duration_seconds(fixed)
    else:
        same = type(value) is type(fixed) and value == fixed
    if not same:
        shown = _shown(fixed)
        raise KubeletConfigError(
            f"{name}: nodelet runs with {shown} and has no setting for it; "
            f"{_shown(value)} cannot be honoured (write {shown} or leave the field out)")


def _shown(value: Any) -> str:
    """A value as a message shows it: booleans as YAML writes them, the rest as Python's."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


# `logging` (component-base's LoggingConfiguration), field by field: the values a file may
# give, as (allowed values, how to write them, why nothing else can be honoured). They are
# what a /configz round trip writes (Go zero values) and the kubelet's defaults.
_HOW_NODELET_LOGS = "nodelet's own --log-format and -v set how it logs"
_LOGGING: dict[str, tuple[tuple[Any, ...], str, str]] = {
    "format": (("", "text"), "text", _HOW_NODELET_LOGS),
    "verbosity": ((0,), "0", _HOW_NODELET_LOGS),
    "vmodule": (([],), "[]", _HOW_NODELET_LOGS),
    # 0 (which the kubelet's defaulting makes 5s; a round trip writes 0) or 5s, a duration
    # string or, in JSON, nanoseconds.
    "flushFrequency": ((0, 5_000_000_000), "0s or 5s",
                       "nodelet writes each log line at once"),
    "splitStream": ((False,), "false", "nodelet writes all its log lines to stderr"),
    "infoBufferSize": ((0, "0"), '"0"', "nodelet buffers no log lines"),
}


def _check_logging(value: Any) -> None:
    """`logging`: text at verbosity 0, no vmodule, the default flush and buffer figures, one
    output stream; other values and unknown fields are refused by name."""
    section = _section("logging", value, frozenset(
        {"format", "flushFrequency", "verbosity", "vmodule", "options"}))
    for key in ("format", "verbosity", "vmodule", "flushFrequency"):
        _check_logging_value(f"logging.{key}", key, section.get(key))
    options = _section("logging.options", section.get("options"), frozenset({"json", "text"}))
    for output in ("json", "text"):
        where = f"logging.options.{output}"
        routing = _section(where, options.get(output),
                           frozenset({"splitStream", "infoBufferSize"}))
        for key in ("splitStream", "infoBufferSize"):
            _check_logging_value(f"{where}.{key}", key, routing.get(key))


def _check_logging_value(name: str, key: str, value: Any) -> None:
    allowed, shown, why = _LOGGING[key]
    if value is None:
        return
    if isinstance(value, str) and key == "flushFrequency":
        value = _duration(name, value)
        if duration_seconds(value) in (0, 5):
            return
    if any(type(value) is type(ok) and value == ok for ok in allowed):
        return
    raise KubeletConfigError(f"{name}: {_shown(value)} cannot be honoured: {why} "
                             f"(write {shown} or leave the field out)")


def _in_range(name: str, value: Any, low: int, high: int) -> int:
    number = _integer(name, value)
    if not low <= number <= high:
        raise KubeletConfigError(f"{name}: {number} is not in {low}..{high}")
    return number


def _refused(name: str) -> KubeletConfigError:
    if name in FIELDS:
        return KubeletConfigError(
            f"field {name!r} of {KIND} is not supported by nodelet (remove it; supported: "
            f"{', '.join(sorted({*SUPPORTED, *_LISTEN_FIELDS}))})")
    return KubeletConfigError(f"unknown field {name!r} (not a field of {API_VERSION} {KIND})")


def _port(name: str, value: Any, *, allow_zero: bool) -> int:
    number = _integer(name, value)
    if not (0 if allow_zero else 1) <= number <= 65535:
        raise KubeletConfigError(f"{name}: {number} is not a port "
                                 f"({0 if allow_zero else 1}-65535)")
    return number


def _read_only_port(obj: Mapping[str, Any]) -> int:
    """`readOnlyPort` as --read-only-port: the read-only API's port on --listen's host (the
    kubelet's `address` is the node server's, so nodelet's read-only API stays on loopback
    unless --listen says otherwise). 0 turns it off, and so does leaving the field out: the
    kubelet's v1beta1 default is 0 (its 10255 is only the flag's default)."""
    port = obj.get("readOnlyPort")
    return 0 if port is None else _port("readOnlyPort", port, allow_zero=True)


def _section(name: str, value: Any, fields: frozenset[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _type_error(name, "a mapping", value)
    unknown = sorted(set(value) - fields)
    if unknown:
        raise KubeletConfigError(f"{name}: unknown field {unknown[0]!r} (known: "
                                 f"{', '.join(sorted(fields))})")
    return value


def _cache_ttl(name: str, value: Any) -> float | None:
    """A webhook cache TTL; None when absent or 0 (the kubelet's defaulting then fills in its
    default, so "0s", as kubeadm's files print it, is the default)."""
    if value is None:
        return None
    seconds = _seconds(name, value)
    return seconds or None


def _authentication(value: Any) -> dict[str, Any]:
    """`authentication`: x509.clientCAFile, webhook.enabled, webhook.cacheTTL,
    anonymous.enabled → the node server's flags."""
    section = _section("authentication", value, frozenset({"x509", "webhook", "anonymous"}))
    x509 = _section("authentication.x509", section.get("x509"), frozenset({"clientCAFile"}))
    webhook = _section("authentication.webhook", section.get("webhook"),
                       frozenset({"enabled", "cacheTTL"}))
    anonymous = _section("authentication.anonymous", section.get("anonymous"),
                         frozenset({"enabled"}))
    flags: dict[str, Any] = {}
    if x509.get("clientCAFile"):
        flags["client_ca_file"] = _string("authentication.x509.clientCAFile",
                                          x509["clientCAFile"])
    if webhook.get("enabled") is not None:
        flags["authentication_token_webhook"] = _boolean("authentication.webhook.enabled",
                                                         webhook["enabled"])
    ttl = _cache_ttl("authentication.webhook.cacheTTL", webhook.get("cacheTTL"))
    if ttl is not None:
        flags["authentication_token_webhook_cache_ttl"] = ttl
    if anonymous.get("enabled") is not None:
        flags["anonymous_auth"] = _boolean("authentication.anonymous.enabled",
                                           anonymous["enabled"])
    return flags


def _authorization(value: Any) -> dict[str, Any]:
    """`authorization`: mode (AlwaysAllow or Webhook), webhook.cacheAuthorizedTTL and
    webhook.cacheUnauthorizedTTL → the node server's flags."""
    section = _section("authorization", value, frozenset({"mode", "webhook"}))
    webhook = _section("authorization.webhook", section.get("webhook"),
                       frozenset({"cacheAuthorizedTTL", "cacheUnauthorizedTTL"}))
    flags: dict[str, Any] = {}
    if section.get("mode") is not None:
        mode = _string("authorization.mode", section["mode"])
        if mode not in ("AlwaysAllow", "Webhook"):
            raise KubeletConfigError(
                f"authorization.mode: {mode!r} must be AlwaysAllow or Webhook")
        flags["authorization_mode"] = mode
    for field_name, dest in (("cacheAuthorizedTTL", "authorization_webhook_cache_authorized_ttl"),
                             ("cacheUnauthorizedTTL",
                              "authorization_webhook_cache_unauthorized_ttl")):
        ttl = _cache_ttl(f"authorization.webhook.{field_name}", webhook.get(field_name))
        if ttl is not None:
            flags[dest] = ttl
    return flags
