"""The `nodelet` command: run the agent, reset an instance, and read a running agent's API.

Flags map onto `settings.Settings`; everything else lives in the layers below. The handlers of
the commands that read (get, describe, logs, timeline, analyze) are in `readcommands`, and
those of the node server's commands (exec, attach, port-forward, top) in `nodecommands`.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import re
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import nodelet
from nodelet import app, nodecommands, serverflags, settings
from nodelet.adapters import containerd, instancelock
from nodelet.model.core import admission, imagegc, nodeflags, nodeips, resources
from nodelet.model.parsing import kubeletconfig
from nodelet.services.nodehealth import resetting
from nodelet.services.serving import preflight

if TYPE_CHECKING:
    # Imported by `_progress_console`, only for a terminal that shows the progress lines:
    # rich would stay in a daemon's memory for nothing (issue 26).
    from nodelet.services.serving import progress

DEFAULT_SERVER = "http://127.0.0.1:10255"
_T = TypeVar("_T")
_LINKS_DIR = settings.LogSettings().links_dir


def _parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    if int(port) > 65535:
        raise argparse.ArgumentTypeError(f"--listen {value}: the port must be 0 to 65535")
    return host.strip("[]") or "127.0.0.1", int(port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nodelet",
        description="A node agent that runs Kubernetes pods on containerd and reports "
        "PodReadyToStartContainers.",
    )
    parser.add_argument("--version", action="version", version=f"nodelet {nodelet.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the node agent (needs root)")
    run.add_argument("--manifests", type=Path, help="directory of static pod manifests")
    run.add_argument("--data-dir", type=Path, default=settings.DEFAULT_DATA_DIR,
                     help="state of this instance (default: %(default)s)")
    run.add_argument("--registry-config", type=Path, metavar="FILE",
                     help="registry credentials for image pulls, a docker config.json, used "
                          "after the pods' imagePullSecrets (default: <data-dir>/config.json)")
    run.add_argument("--device-plugins-dir", type=Path, metavar="DIR",
                     help="where device plugins find kubelet.sock and put their sockets "
                          "(default: <data-dir>/device-plugins; the kubelet's is "
                          "/var/lib/kubelet/device-plugins)")
    run.add_argument("--pod-resources-dir", type=Path, metavar="DIR",
                     help="where the pod resources API's kubelet.sock is served (default: "
                          "<data-dir>/pod-resources; the kubelet's is "
                          "/var/lib/kubelet/pod-resources)")
    run.add_argument("--plugins-registry-dir", type=Path, metavar="DIR",
                     help="where CSI and DRA drivers put their registration sockets "
                          "(default: <data-dir>/plugins_registry; the kubelet's is "
                          "/var/lib/kubelet/plugins_registry)")
    run.add_argument("--listen", type=_parse_listen, default=("127.0.0.1", 10255),
                     help="HTTP API address HOST:PORT (default: 127.0.0.1:10255)")
    run.add_argument("--read-only-port", type=int, metavar="PORT",
                     help="the read-only HTTP API's port on --listen's host; 0 turns the API "
                          "off (a --config file without readOnlyPort does too, as the "
                          "kubelet's)")
    run.add_argument("--healthz-port", type=int, metavar="PORT",
                     help="the healthz server's port (/healthz alone, without credentials; "
                          "default: 10248, as the kubelet's; 0 turns it off)")
    run.add_argument("--healthz-bind-address", metavar="IP",
                     help="the healthz server's address (default: 127.0.0.1)")
    run.add_argument("--runtime-endpoint",
                     help="CRI endpoint unix:///path; default: start the embedded containerd")
    run.add_argument("--runtime-bin-dir", type=_parse_runtime_bin_dir, metavar="DIR|system",
                     help="the embedded containerd's programs (containerd, its runc shim, ctr, "
                          "runc): a directory such as `make runtime` builds, or `system` for "
                          "those on PATH; default: the checkout's build/runtime/<version> "
                          "when built, else PATH")
    run.add_argument("--runtime-handler", action="append", default=[], metavar="NAME",
                     type=_parse_runtime_handler,
                     help="another name for the embedded containerd's runc, for RuntimeClasses "
                          "whose handler it is (repeat for more; `runc` is always there)")
    run.add_argument("--pod-cidr", action="append", default=[],
                     help="pod IP range for the embedded CNI config (repeat for dual-stack)")
    run.add_argument("--feature-gates", default="",
                     help="K=V,... (PodReadyToStartContainersCondition, PodHasNetworkCondition)")
    run.add_argument("--node-name", help="node name (default: the hostname)")
    run.add_argument("--node-ip", default="", metavar="IP[,IP]",
                     help="the node's IP, or a dual-stack pair v4,v6 (the first the primary), "
                          "as the kubelet's --node-ip: reported as the Node's InternalIP(s); "
                          "default: the node name's address, else the default route's")
    run.add_argument("--kubeconfig", type=Path, help="join a Kubernetes cluster")
    run.add_argument("--bootstrap-kubeconfig", type=Path,
                     help="TLS bootstrap: when --kubeconfig is missing or its certificate "
                          "expired, get a client certificate by CSR with these credentials "
                          "and write --kubeconfig")
    run.add_argument("--cert-dir", type=Path,
                     help="client certificate store (default: <data-dir>/pki)")
    run.add_argument("--rotate-certificates", action=argparse.BooleanOptionalAction,
                     default=True, help="renew the bootstrapped client certificate before "
                                        "it expires (default: on)")
    run.add_argument("--kube-api-qps", type=float, default=50.0,
                     help="API requests per second (default: %(default)s)")
    run.add_argument("--kube-api-burst", type=int, default=100,
                     help="API request burst (default: %(default)s)")
    run.add_argument("--auth-token-file", type=Path,
                     help="bearer token required on every HTTP request")
    serverflags.add_server_flags(run)  # the node server: --port, --address, TLS, auth
    run.add_argument("--cluster-dns", action="append", metavar="IP[,IP...]",
                     help="cluster DNS server IPs for ClusterFirst pods (repeatable; default: "
                          "none, ClusterFirst pods use the node's resolver)")
    run.add_argument("--cluster-domain", metavar="DOMAIN",
                     help="cluster DNS domain, e.g. cluster.local (default: none)")
    run.add_argument("--resolv-conf", metavar="FILE",
                     help='the node\'s resolver config for pods (default: /etc/resolv.conf; ""'
                          ": none)")
    run.add_argument("--allowed-unsafe-sysctls", default="", metavar="NAMES",
                     help="comma-separated sysctls (or prefix* patterns) pods may set beyond "
                          "the safe set; namespaced ones only")
    run.add_argument("--seccomp-default", action="store_true",
                     help="RuntimeDefault seccomp for containers that ask for no profile")
    run.add_argument("--seccomp-profile-root", type=Path, metavar="DIR",
                     help="where Localhost seccomp profiles are found (default: "
                          "<data-dir>/seccomp)")
    run.add_argument("--max-pods", type=int, default=110,
                     help="pods admitted at once (default: %(default)s)")
    run.add_argument("--system-reserved", default="", metavar="RESOURCES",
                     help="held back from pods for the OS, e.g. cpu=100m,memory=256Mi")
    run.add_argument("--kube-reserved", default="", metavar="RESOURCES",
                     help="held back from pods for nodelet and the runtime, same form")
    run.add_argument("--cgroup-root", default="/", metavar="CGROUP",
                     help="the cgroup that holds kubepods and its QoS levels "
                          "(default: %(default)s)")
    run.add_argument("--node-labels", default="", metavar="K=V,...",
                     help="labels of the Node besides the well-known ones (kubernetes.io and "
                          "k8s.io keys only as the kubelet allows them)")
    run.add_argument("--register-with-taints", default="", metavar="K=V:EFFECT,...",
                     help="taints the Node is registered with, e.g. dedicated=edge:NoSchedule")
    run.add_argument("--config", type=Path, metavar="FILE",
                     help="a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1, YAML or "
                          "JSON); flags given on the command line win over it")
    run.add_argument("--container-log-max-size", default="10Mi", metavar="QUANTITY",
                     help="rotate a container's log above this size (default: %(default)s)")
    run.add_argument("--container-log-max-files", type=int, default=5, metavar="N",
                     help="log files kept per container, the current one included "
                          "(default: %(default)s)")
    run.add_argument("--container-logs-dir", type=Path, default=_LINKS_DIR, metavar="DIR",
                     help="where the link to each container's log goes, "
                          "<pod>_<namespace>_<container>-<id>.log, as the kubelet's "
                          "(default: %(default)s)")
    run.add_argument("--minimum-container-ttl-duration", default="0s", metavar="DURATION",
                     help="keep a dead container at least this long after its creation, "
                          "e.g. 90s, 1m30s (default: %(default)s)")
    run.add_argument("--maximum-dead-containers-per-container", type=int, default=1,
                     metavar="N", help="dead instances kept per container, -1: no limit "
                                       "(default: %(default)s)")
    run.add_argument("--maximum-dead-containers", type=int, default=-1, metavar="N",
                     help="dead containers kept on the node, -1: no limit "
                          "(default: %(default)s)")
    run.add_argument("--image-gc-high-threshold", type=int, default=85, metavar="PERCENT",
                     help="image filesystem usage at which unused images are removed; 100: "
                          "never periodically (default: %(default)s)")
    run.add_argument("--image-gc-low-threshold", type=int, default=80, metavar="PERCENT",
                     help="usage that image garbage collection frees down to "
                          "(default: %(default)s)")
    run.add_argument("--image-minimum-gc-age", default="2m", metavar="DURATION",
                     help="never remove an image first seen less than this long ago "
                          "(default: %(default)s)")
    run.add_argument("--eviction-hard", default=settings.EvictionSettings.hard,
                     metavar="THRESHOLDS",
                     help="evict pods at once below these, e.g. memory.available<100Mi,"
                          "nodefs.available<10%%; '' for none (default: %(default)s)")
    run.add_argument("--eviction-soft", default="", metavar="THRESHOLDS",
                     help="evict pods once below these for their grace period")
    run.add_argument("--eviction-soft-grace-period", default="", metavar="GRACES",
                     help="grace period of each soft threshold, e.g. memory.available=1m30s")
    run.add_argument("--eviction-max-pod-grace-period", type=int, default=0, metavar="SECONDS",
                     help="most a pod evicted for a soft threshold gets to stop; 0: its own "
                          "(default: %(default)s)")
    run.add_argument("--eviction-pressure-transition-period", default="5m0s",
                     metavar="DURATION",
                     help="keep a pressure condition this long after it cleared "
                          "(default: %(default)s)")
    run.add_argument("--evict-static-pods", action="store_true",
                     help="let node pressure and local storage limits evict static pods, "
                          "which the kubelet never does (they would stay Failed until their "
                          "manifest changes)")
    run.add_argument("--log-format", choices=("text", "json"), default="text")
    run.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                     help="live per-pod progress lines on stderr; auto: when stderr is a "
                     "terminal and --log-format is text (default: %(default)s)")
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")

    reset = sub.add_parser("reset", help="remove every pod and the runtime state of an instance")
    reset.add_argument("--data-dir", type=Path, default=settings.DEFAULT_DATA_DIR)
    reset.add_argument("--runtime-endpoint")
    reset.add_argument("--runtime-bin-dir", type=_parse_runtime_bin_dir, metavar="DIR|system",
                       help="as for run (its runc removes what a dead containerd left)")
    reset.add_argument("--cgroup-root", default="/", metavar="CGROUP",
                       help="the --cgroup-root the instance ran with (its pod and QoS cgroups "
                            "are removed under it)")
    reset.add_argument("--container-logs-dir", type=Path, default=_LINKS_DIR, metavar="DIR",
                       help="the --container-logs-dir the instance ran with (its links to "
                            "its containers' logs are removed there; default: %(default)s)")

    get = sub.add_parser("get", help="list pods or manifests of a running nodelet")
    get.add_argument("resource", choices=("pods", "pod", "po", "manifests", "events"))
    get.add_argument("-o", "--output", choices=("table", "json"), default="table")
    _add_server_flags(get)

    describe = sub.add_parser("describe", help="show a pod's conditions and events")
    describe.add_argument("resource", choices=("pod", "pods", "po"))
    describe.add_argument("name")
    describe.add_argument("-n", "--namespace", default=None)
    _add_server_flags(describe)
    _add_logs_parser(sub)
    _add_timeline_parser(sub)
    _add_analyze_parser(sub)
    nodecommands.add_parsers(sub)  # exec, attach, port-forward, top: the node server
    return parser


def _add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=DEFAULT_SERVER,
                        help="nodelet HTTP API (default: %(default)s)")
    parser.add_argument("--token-file", type=Path, help="bearer token for the API")


def settings_from_args(args: argparse.Namespace) -> settings.Settings:
    base = settings.Settings(data_dir=args.data_dir.resolve(), manifests_dir=args.manifests)
    cluster = None
    if args.kubeconfig is not None:
        cluster = settings.ClusterSettings(kubeconfig=args.kubeconfig.resolve(),
                                           qps=args.kube_api_qps, burst=args.kube_api_burst,
                                           **_bootstrap_settings(args, base.data_dir))
    elif args.bootstrap_kubeconfig is not None:
        raise settings.SettingsError("--bootstrap-kubeconfig needs --kubeconfig: the file "
                                     "the bootstrapped credentials are written to")
    if args.runtime_handler and args.runtime_endpoint:
        raise settings.SettingsError(
            "--runtime-handler names handlers of the embedded containerd; with "
            "--runtime-endpoint, configure them in that runtime instead")
    host, port = args.listen
    enabled = True
    if args.read_only_port is not None:
        if not 0 <= args.read_only_port < 65536:
            raise settings.SettingsError(
                f"--read-only-port {args.read_only_port}: must be 0 (off) to 65535")
        enabled, port = args.read_only_port != 0, args.read_only_port or port
    return replace(
        base,
        node_name=args.node_name or base.node_name,
        node_ips=_node_ips(args.node_ip),
        registry_config=args.registry_config.resolve() if args.registry_config else None,
        devices=replace(base.devices, plugins_dir=args.device_plugins_dir.resolve()
                        if args.device_plugins_dir else None,
                        pod_resources_dir=args.pod_resources_dir.resolve()
                        if args.pod_resources_dir else None),
        plugins=replace(base.plugins, registry_dir=args.plugins_registry_dir.resolve()
                        if args.plugins_registry_dir else None),
        gates=settings.parse_feature_gates(args.feature_gates),
        runtime=replace(base.runtime, endpoint=args.runtime_endpoint,
                        pod_cidrs=tuple(args.pod_cidr),
                        runtime_bin_dir=_runtime_bin_dir(args, base.runtime),
                        runc_handlers=tuple(dict.fromkeys(
                            h for h in args.runtime_handler if h != "runc"))),
        server=replace(base.server, host=host, port=port, auth_token_file=args.auth_token_file,
                       enabled=enabled, **_healthz(args)),
        node_server=serverflags.node_server_settings(args),
        security=_security_settings(args),
        node=_node_settings(args),
        logs=_log_settings(args),
        gc=_image_gc_settings(args, _container_gc_settings(args, base.gc)),
        eviction=_eviction_settings(args),
        dns=_dns_settings(args),
        cluster=cluster,
    )


def _dns_settings(args: argparse.Namespace) -> settings.DNSSettings:
    """--cluster-dns (repeatable, comma lists; each an IP), --cluster-domain, --resolv-conf
    ("" → None: no host resolver configuration); a flag not given keeps the default."""
    base = settings.DNSSettings()
    servers = tuple(item.strip() for value in args.cluster_dns or ()
                    for item in value.split(",") if item.strip())
    for server in servers:
        try:
            ipaddress.ip_address(server)
        except ValueError:
            raise settings.SettingsError(
                f"--cluster-dns {server}: not an IP address") from None
    resolv_conf = base.resolv_conf if args.resolv_conf is None else \
        (Path(args.resolv_conf) if args.resolv_conf else None)
    return settings.DNSSettings(
        cluster_dns=servers,
        cluster_domain=base.cluster_domain if args.cluster_domain is None
        else args.cluster_domain.strip(),
        resolv_conf=resolv_conf)


def _bootstrap_settings(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    """The TLS bootstrap fields of ClusterSettings (--bootstrap-kubeconfig, --cert-dir)."""
    boot = args.bootstrap_kubeconfig
    return {"bootstrap_kubeconfig": boot.resolve() if boot is not None else None,
            "cert_dir": (args.cert_dir or data_dir / "pki").resolve(),
            "rotate_certificates": args.rotate_certificates}


def _log_settings(args: argparse.Namespace) -> settings.LogSettings:
    if args.container_log_max_files < 2:
        raise settings.SettingsError(
            f"--container-log-max-files {args.container_log_max_files}: must be at least 2")
    try:
        max_size = resources.amounts([("memory", args.container_log_max_size)])["memory"]
    except ValueError as exc:
        raise settings.SettingsError(f"--container-log-max-size: {exc}") from exc
    if max_size < 1:
        raise settings.SettingsError("--container-log-max-size: must be more than 0")
    return settings.LogSettings(max_size=max_size, max_files=args.container_log_max_files,
                                links_dir=args.container_logs_dir.absolute())


def _container_gc_settings(args: argparse.Namespace,
                           gc_settings: settings.GCSettings) -> settings.GCSettings:
    """The container GC flags onto `gc_settings` (the image GC's are left as they are)."""
    for flag, value in (("--maximum-dead-containers-per-container",
                         args.maximum_dead_containers_per_container),
                        ("--maximum-dead-containers", args.maximum_dead_containers)):
        if value < -1:
            raise settings.SettingsError(f"{flag} {value}: must be -1 (no limit) or more")
    return replace(
        gc_settings,
        min_age=_duration("--minimum-container-ttl-duration",
                          args.minimum_container_ttl_duration),
        max_per_pod_container=args.maximum_dead_containers_per_container,
        max_containers=args.maximum_dead_containers,
    )


def _image_gc_settings(args: argparse.Namespace,
                       gc_settings: settings.GCSettings) -> settings.GCSettings:
    """The image GC flags onto `gc_settings`: thresholds in 0..100, low not above high."""
    high, low = args.image_gc_high_threshold, args.image_gc_low_threshold
    for flag, value in (("--image-gc-high-threshold", high), ("--image-gc-low-threshold", low)):
        if not 0 <= value <= 100:
            raise settings.SettingsError(f"{flag} {value}: must be a percentage, 0 to 100")
    if low > high:
        raise settings.SettingsError(
            f"--image-gc-low-threshold {low}: must not be above --image-gc-high-threshold {high}")
    return replace(gc_settings, image_gc_high_percent=high, image_gc_low_percent=low,
                   image_minimum_gc_age=_duration("--image-minimum-gc-age",
                                                  args.image_minimum_gc_age))


def _eviction_settings(args: argparse.Namespace) -> settings.EvictionSettings:
    """The eviction flags (the thresholds themselves are read at start-up, by preflight)."""
    graces = []
    for item in filter(None, (p.strip() for p in args.eviction_soft_grace_period.split(","))):
        signal, sep, value = item.partition("=")
        if not sep:
            raise settings.SettingsError(
                f"--eviction-soft-grace-period: {item!r} is not SIGNAL=DURATION "
                "(e.g. memory.available=1m30s)")
        graces.append((signal.strip(),
                       _duration("--eviction-soft-grace-period", value.strip())))
    if args.eviction_max_pod_grace_period < 0:
        raise settings.SettingsError("--eviction-max-pod-grace-period: must not be negative")
    return settings.EvictionSettings(
        hard=args.eviction_hard, soft=args.eviction_soft, soft_grace_periods=tuple(graces),
        max_pod_grace_period=float(args.eviction_max_pod_grace_period),
        pressure_transition_period=_duration("--eviction-pressure-transition-period",
                                             args.eviction_pressure_transition_period),
        static_pods_critical=not args.evict_static_pods)


# A Go duration as the kubelet's flags take it: 90s, 1m30s, 1.5h, 500ms.
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s)")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(flag: str, text: str) -> float:
    """Seconds of a non-negative Go duration; "0" alone is allowed, as in Go."""
    if text.strip() == "0":
        return 0.0
    parts = _DURATION_PART.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise settings.SettingsError(
            f"{flag} {text!r}: not a duration (write e.g. 0s, 90s, 1m30s, 2h)")
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)


# What --system-reserved and --kube-reserved may hold back (the kubelet's pid is not offered).
_RESERVABLE = frozenset({"cpu", "memory", "ephemeral-storage"})


def _node_settings(args: argparse.Namespace) -> settings.NodeSettings:
    if args.max_pods < 1:
        raise settings.SettingsError(f"--max-pods {args.max_pods}: must be at least 1")
    node = settings.NodeSettings(
        max_pods=args.max_pods,
        system_reserved=settings.parse_resource_list("--system-reserved", args.system_reserved),
        kube_reserved=settings.parse_resource_list("--kube-reserved", args.kube_reserved),
        cgroup_root=args.cgroup_root,
        labels=_node_flag(nodeflags.parse_labels, args.node_labels),
        register_with_taints=_node_flag(nodeflags.parse_taints, args.register_with_taints),
    )
    if not args.cgroup_root.startswith("/") or ".." in args.cgroup_root.split("/"):
        raise settings.SettingsError(
            f"--cgroup-root {args.cgroup_root!r}: must be an absolute cgroup path without '..'")
    for flag, pairs in (("--system-reserved", node.system_reserved),
                        ("--kube-reserved", node.kube_reserved)):
        unknown = sorted({name for name, _ in pairs} - _RESERVABLE)
        if unknown:
            raise settings.SettingsError(
                f"{flag}: cannot reserve {', '.join(unknown)}: only "
                f"{', '.join(sorted(_RESERVABLE))}")
        try:
            resources.amounts(pairs)
        except ValueError as exc:
            raise settings.SettingsError(f"{flag}: {exc}") from exc
    return node


def _node_ips(flag: str) -> tuple[str, ...]:
    """--node-ip as the kubelet parses it: entries that are no IP are skipped, with a note."""
    try:
        ips, invalid = nodeips.parse(flag)
    except nodeips.NodeIPError as exc:
        raise settings.SettingsError(str(exc)) from exc
    if invalid:
        print(f"could not parse --node-ip {', '.join(invalid)}: ignored", file=sys.stderr)
    return ips


def _node_flag(parse: Callable[[str], _T], text: str) -> _T:
    try:
        return parse(text)
    except nodeflags.NodeFlagError as exc:
        raise settings.SettingsError(str(exc)) from exc


# -- the --config file ------------------------------------------------------------------------


def settings_from_argv(argv: list[str]) -> settings.Settings:
    """`nodelet run ...` arguments → Settings, with the --config file under the flags given."""
    return _run_settings(build_parser().parse_args(argv), argv)


def _run_settings(args: argparse.Namespace, argv: list[str]) -> settings.Settings:
    if args.config is None:
        return settings_from_args(args)
    overrides = _read_config(args.config)
    given = _given_dests(argv)
    if "listen" in given:  # --listen names the port: the file's readOnlyPort does not count
        overrides = replace(overrides, flags={k: v for k, v in overrides.flags.items()
                                              if k != "read_only_port"})
    actions = {a.dest: a for a in _run_parser(build_parser())._actions}
    embedded = f"unix://{containerd.ContainerdPaths.of(args.data_dir.resolve()).socket}"
    if overrides.flags.get("runtime_endpoint") == embedded:
        # The embedded containerd's own socket, as /configz reports it (a file written from
        # /configz): nodelet goes on running that containerd, not an outside runtime there.
        overrides = replace(overrides, flags={k: v for k, v in overrides.flags.items()
                                              if k != "runtime_endpoint"})
    for dest, value in overrides.flags.items():
        if dest not in actions:
            raise settings.SettingsError(f"--config: no flag for {dest!r}")  # a bug, not input
        if dest not in given:
            convert = actions[dest].type
            setattr(args, dest, convert(value) if isinstance(value, str) and callable(convert)
                    else value)
        elif dest == "feature_gates":  # the kubelet merges these gate by gate
            args.feature_gates = kubeletconfig.merge_feature_gates(value, args.feature_gates)
    config = settings_from_args(args)
    for path, value in overrides.settings.items():
        config = _with_setting(config, path.split("."), value)
    _check_image_credentials_gate(config, overrides)
    _check_image_gc_ages(config)
    _check_image_service_endpoint(config, overrides.image_service_endpoint,
                                  embedded=embedded, flag="runtime_endpoint" in given)
    return config


def _check_image_service_endpoint(config: settings.Settings, image: str, *, embedded: str,
                                  flag: bool) -> None:
    """The file's imageServiceEndpoint must name the runtime nodelet uses ("" says so too):
    nodelet pulls images through that runtime, so another image endpoint (the file's, when
    --runtime-endpoint overrides its containerRuntimeEndpoint) would be silently ignored."""
    runtime = config.runtime.endpoint or embedded
    if not image or image == runtime:
        return
    source = ("--runtime-endpoint" if flag else "the file's containerRuntimeEndpoint"
              if config.runtime.endpoint else "the embedded containerd")
    raise settings.SettingsError(
        f"--config: imageServiceEndpoint {image!r} is not the runtime endpoint nodelet uses "
        f"({runtime!r}, from {source}): nodelet pulls images through the runtime it runs pods "
        f"with (write {runtime!r} or \"\", or leave the field out)")


def _check_image_gc_ages(config: settings.Settings) -> None:
    """The kubelet validates imageMaximumGCAge (a file field) against imageMinimumGCAge (the
    file's or --image-minimum-gc-age) once both are known."""
    try:
        imagegc.check_ages(timedelta(seconds=config.gc.image_minimum_gc_age),
                           timedelta(seconds=config.gc.image_maximum_gc_age))
    except imagegc.PolicyError as exc:
        raise settings.SettingsError(f"--config: invalid configuration: {exc}") from exc


def _check_image_credentials_gate(config: settings.Settings,
                                  overrides: kubeletconfig.Overrides) -> None:
    """The kubelet refuses the image credential fields when their feature gate is off."""
    if config.gates.kubelet_ensure_secret_pulled_images:
        return
    for field_name, path in (
            ("imagePullCredentialsVerificationPolicy", "image_credentials.verification_policy"),
            ("preloadedImagesVerificationAllowlist", "image_credentials.preloaded_allowlist")):
        if overrides.settings.get(path):
            raise settings.SettingsError(
                f"--config: invalid configuration: `{field_name}` must not be set if "
                "KubeletEnsureSecretPulledImages feature gate is not enabled")


def _read_config(path: Path) -> kubeletconfig.Overrides:
    limit = settings.ManifestLimits().max_bytes
    try:
        if path.stat().st_size > limit:
            raise settings.SettingsError(f"--config {path}: larger than {limit} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise settings.SettingsError(f"--config {path}: cannot read: {exc}") from exc
    try:
        return kubeletconfig.parse(text, filename=str(path))
    except kubeletconfig.KubeletConfigError as exc:
        raise settings.SettingsError(f"--config {exc}") from exc


def _run_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run: argparse.ArgumentParser = sub.choices["run"]
    return run


def _given_dests(argv: list[str]) -> set[str]:
    """The `run` flags on the command line: parsed again with no defaults."""
    parser = build_parser()
    for action in _run_parser(parser)._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def _with_setting(obj: Any, path: list[str], value: Any) -> Any:
    """`obj` (nested frozen dataclasses) with the field at `path` set; a cluster-mode
    setting without cluster mode is left out (it has nothing to act on)."""
    head, *rest = path
    if not rest:
        return replace(obj, **{head: value})
    inner = getattr(obj, head)
    if inner is None:
        return obj
    return replace(obj, **{head: _with_setting(inner, rest, value)})


def _security_settings(args: argparse.Namespace) -> settings.SecuritySettings:
    sysctls = tuple(filter(None, (s.strip() for s in args.allowed_unsafe_sysctls.split(","))))
    try:
        admission.check_allowed_unsafe_sysctls(sysctls)
    except ValueError as exc:
        raise settings.SettingsError(f"--allowed-unsafe-sysctls: {exc}") from exc
    root = args.seccomp_profile_root
    return settings.SecuritySettings(
        allowed_unsafe_sysctls=sysctls, seccomp_default=args.seccomp_default,
        seccomp_profile_root=root.resolve() if root is not None else None,
    )


# Attributes every LogRecord has (read off a blank one, so a newer Python's are known too);
# any other attribute of a record came from `extra={...}`. `message` and `asctime` are set by
# formatters.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: `ts`, `level`, `logger`, `msg`, `exc` and `stack` when
    present, and every `extra={...}` field of the record (pod and sandbox IDs as context).

    An extra field named like one of the line's own keys is written as `extra_<name>`. A value
    JSON cannot encode is written as its `str` (or, for containers JSON cannot take, `repr`),
    so formatting never fails."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS:
                entry[f"extra_{key}" if key in entry else key] = _json_safe(value)
        return json.dumps(entry, default=str)


def _json_safe(value: object) -> object:
    """`value` if JSON can encode it (objects it cannot are written as their `str`), else its
    `repr` (dicts with keys JSON cannot take, cycles, NaN and infinities, which strict JSON
    parsers refuse)."""
    try:
        json.dumps(value, default=str, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _progress_console(args: argparse.Namespace) -> progress.Console | None:
    """The terminal for live progress lines, or None for plain (structured) logs only."""
    wanted = args.progress == "always" or (
        args.progress == "auto" and sys.stderr.isatty() and args.log_format == "text")
    if not wanted:
        return None
    from nodelet.services.serving import progress  # only when wanted: see the imports above

    return progress.Console(stderr=True)


def _setup_logging(fmt: str, verbose: bool, console: progress.Console | None = None) -> None:
    handler: logging.Handler = logging.StreamHandler()
    if console is not None and fmt == "text":
        from rich import logging as rich_logging  # with the progress lines only, as they are

        # Records go above the live progress lines. Events and sync retries (INFO, WARNING)
        # only repeat what the lines show, every retry, so without -v only errors are printed.
        handler = rich_logging.RichHandler(console=console, show_path=False)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        handler.setLevel(logging.DEBUG if verbose else logging.ERROR)
    elif fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])


async def _run(config: settings.Settings, console: progress.Console | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await app.run(config, stop, console=console)


def _cmd_run(args: argparse.Namespace) -> int:
    console = _progress_console(args)
    _setup_logging(args.log_format, args.verbose, console)
    config = _run_settings(args, args.argv)
    asyncio.run(_run(config, console))
    return 0


_SYSTEM = Path("system")


def _healthz(args: argparse.Namespace) -> dict[str, Any]:
    """--healthz-port and --healthz-bind-address, over the settings' defaults."""
    found: dict[str, Any] = {}
    if args.healthz_port is not None:
        if not 0 <= args.healthz_port < 65536:
            raise settings.SettingsError(
                f"--healthz-port {args.healthz_port}: must be 0 (off) to 65535")
        found["healthz_port"] = args.healthz_port
    if args.healthz_bind_address is not None:
        try:
            ipaddress.ip_address(args.healthz_bind_address)
        except ValueError as exc:
            raise settings.SettingsError(
                f"--healthz-bind-address {args.healthz_bind_address!r}: not an IP address"
            ) from exc
        found["healthz_host"] = args.healthz_bind_address
    return found


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _parse_runtime_handler(value: str) -> str:
    """A RuntimeClass handler's name: a DNS label, as the API requires of `handler`."""
    if not _DNS_LABEL.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r}: a runtime handler is a DNS label (lower-case letters, digits and "
            f"'-', at most 63, starting and ending with a letter or digit)")
    return value


def _parse_runtime_bin_dir(value: str) -> Path:
    return _SYSTEM if value == "system" else Path(value).resolve()


def _runtime_bin_dir(args: argparse.Namespace, base: settings.RuntimeSettings) -> Path | None:
    """--runtime-bin-dir: `system` is PATH (None); absent keeps the default."""
    chosen: Path | None = args.runtime_bin_dir
    if chosen is None:
        return base.runtime_bin_dir
    return None if chosen == _SYSTEM else chosen


def _cmd_reset(args: argparse.Namespace) -> int:
    _setup_logging("text", False)
    config = settings.Settings(data_dir=args.data_dir.resolve())
    config = replace(config, runtime=replace(config.runtime, endpoint=args.runtime_endpoint,
                                             runtime_bin_dir=_runtime_bin_dir(args,
                                                                              config.runtime)),
                     node=replace(config.node, cgroup_root=args.cgroup_root),
                     logs=replace(config.logs, links_dir=args.container_logs_dir.absolute()))
    try:
        report = asyncio.run(resetting.reset(config))
    except instancelock.LockHeld as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    print(report.summary(config.data_dir))
    return 1 if report.errors else 0


def _add_logs_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("logs", help="print (and follow) a container's logs")
    parser.add_argument("name", metavar="POD", help="pod name (or its manifest's name)")
    parser.add_argument("-c", "--container", help="container (required if the pod has several)")
    parser.add_argument("-f", "--follow", action="store_true", help="stream new lines")
    parser.add_argument("-p", "--previous", action="store_true",
                        help="the run before the current one (after a restart)")
    parser.add_argument("--timestamps", action="store_true", help="prefix each line's CRI time")
    parser.add_argument("--tail", type=int, default=-1, metavar="N",
                        help="only the last N lines (default: all)")
    parser.add_argument("-n", "--namespace", default=None)
    parser.add_argument("--data-dir", type=Path, default=settings.DEFAULT_DATA_DIR,
                        help="the agent's data dir, which holds the logs (default: %(default)s)")
    _add_server_flags(parser)


def _add_timeline_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("timeline", help="a pod's start-up timeline with precise times")
    parser.add_argument("name", metavar="POD")
    parser.add_argument("-n", "--namespace", default=None)
    parser.add_argument(
        "-f", "--file", type=Path, default=None,
        help="read the pod from saved JSON instead of the agent (a Pod, a PodList, or `kubectl "
             "get -w -o json` output: its last copy), e.g. a deleted pod's final status")
    _add_server_flags(parser)


def _add_analyze_parser(sub: Any) -> None:
    analyze = sub.add_parser(
        "analyze", help="pod startup latencies and stuck sandboxes from dumps or a cluster",
        description="Dumps: files or directories (kubectl get -o json|yaml, cluster-info "
        "dump), maybe gzip; - reads stdin. Or a live cluster with --kubeconfig.")
    analyze.add_argument("inputs", nargs="*", metavar="FILE|DIR|-",
                         help="dumps of Pods and Events (any List, JSON or YAML)")
    analyze.add_argument("--events", action="append", default=[], metavar="FILE",
                         help="more input, usually kubectl get events -A -o json")
    analyze.add_argument("-o", "--output", choices=("table", "json", "html"), default="table")
    analyze.add_argument("--output-file", type=Path, help="write the report here, not stdout")
    live = analyze.add_argument_group("live cluster")
    live.add_argument("--kubeconfig", type=Path, help="read pods and events from this "
                      "cluster instead of files")
    live.add_argument("-n", "--namespace", help="only this namespace (default: default)")
    live.add_argument("-A", "--all-namespaces", action="store_true")
    live.add_argument("-l", "--selector", default="", help="label selector of the pods")
    live.add_argument("--chunk-size", type=int, default=settings.ANALYZE_PAGE_SIZE, metavar="N",
                      help="list in pages of N objects, as kubectl (default: %(default)s)")
    live.add_argument("--watch", action="store_true", help="follow the cluster: print each "
                      "pod's sandbox-ready time as it happens (until Ctrl-C)")
    live.add_argument("--metrics-address", metavar="HOST:PORT", help="with --watch: serve "
                      "the running numbers as Prometheus histograms on /metrics")


def main(argv: list[str] | None = None) -> int:
    argv, command = nodecommands.split_command(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    if command:
        args.exec_command = command
    args.argv = sys.argv[1:] if argv is None else list(argv)
    handlers: Mapping[str, Callable[[argparse.Namespace], int]] = {
        "run": _cmd_run, "reset": _cmd_reset, **nodecommands.HANDLERS}
    errors: tuple[type[Exception], ...] = (settings.SettingsError, preflight.StartupError,
                                           *nodecommands.ERRORS)
    if args.command not in handlers:
        # get, describe, logs, timeline, analyze: their module is imported only when one of
        # them runs (see its docstring).
        from nodelet import readcommands

        handlers, errors = readcommands.HANDLERS, (*errors, *readcommands.ERRORS)
    try:
        return handlers[args.command](args)
    except errors as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
