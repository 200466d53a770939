"""Start-up checks, made before anything is started or written: a setting that cannot work
stops `nodelet run` with a message that says what to change, and leaves no containerd, mount
or file behind.

Exceptions::

    StartupError    a setting that cannot work (token file, the embedded runtime's programs,
                    pod CIDRs, kubeconfig, eviction thresholds, the node server's webhooks
                    without cluster mode, the HTTP API's and the node server's addresses)

The addresses are checked last: they depend on what else runs on the machine, and a flag that
can never work is reported first.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path

from nodelet import settings as settings_mod
from nodelet.adapters import containerd, http_server, kubeconfig
from nodelet.model.core import eviction


class StartupError(Exception):
    """nodelet cannot start as configured; the message names the setting and the fix."""


@dataclass(frozen=True)
class Checked:
    """What the checks read, so that start-up does not read it again."""

    token: str | None
    # --eviction-hard and --eviction-soft, read.
    thresholds: tuple[eviction.Threshold, ...] = ()


def check(settings: settings_mod.Settings) -> Checked:
    token = _token(settings.server.auth_token_file)
    host, port = settings.server.host, settings.server.port
    if settings.server.enabled and token is None and not http_server.is_loopback(host):
        raise StartupError(
            f"--listen {host}:{port} is not a loopback address: the API shows every pod and "
            "event, so it needs --auth-token-file (or listen on 127.0.0.1)")
    if settings.runtime.endpoint is None:
        _embedded_runtime(settings.runtime)
    _pod_cidrs(settings.runtime.pod_cidrs)
    if settings.cluster is not None:
        _kubeconfig(settings.cluster)
    node_auth(settings)
    if settings.manifests_dir is not None and settings.manifests_dir.exists() \
            and not settings.manifests_dir.is_dir():
        raise StartupError(f"--manifests {settings.manifests_dir} is not a directory")
    checked = Checked(token=token, thresholds=_thresholds(settings.eviction))
    if settings.server.enabled:
        _check_port("--listen", host, port)
    node = settings.node_server
    _check_port("--address/--port (the node server)", node.address, node.port)
    return checked


def _embedded_runtime(runtime: settings_mod.RuntimeSettings) -> None:
    """The containerd and runc nodelet would start are there and new enough."""
    try:
        containerd.find_programs(runtime)
    except containerd.ContainerdError as exc:
        raise StartupError(f"--runtime-bin-dir: {exc}") from exc


def _pod_cidrs(cidrs: tuple[str, ...]) -> None:
    for cidr in cidrs:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise StartupError(f"--pod-cidr {cidr}: not a network in CIDR notation "
                               f"(e.g. 10.88.0.0/24): {exc}") from exc


def _kubeconfig(cluster: settings_mod.ClusterSettings) -> None:
    """--kubeconfig must be usable; with --bootstrap-kubeconfig the bootstrap one must be,
    and --kubeconfig may be missing or stale: TLS bootstrap writes it (as the kubelet's,
    which a kubeadm node starts with a kubeconfig that does not exist yet)."""
    path, flag = cluster.kubeconfig, "--kubeconfig"
    if cluster.bootstrap_kubeconfig is not None:
        path, flag = cluster.bootstrap_kubeconfig, "--bootstrap-kubeconfig"
    try:
        kubeconfig.load(path)
    except kubeconfig.KubeconfigError as exc:
        raise StartupError(f"{flag}: {exc}") from exc


AUTHORIZATION_MODES = ("AlwaysAllow", "Webhook")


def node_auth(settings: settings_mod.Settings) -> tuple[str, bool]:
    """The node server's authorization mode and whether tokens go to TokenReview: by default
    Webhook and on in cluster mode (as kubeadm configures the kubelet), AlwaysAllow and off
    standalone. Both webhooks ask the API server, so they need cluster mode."""
    s = settings.node_server
    cluster = settings.cluster is not None
    mode = s.authorization_mode or ("Webhook" if cluster else "AlwaysAllow")
    if mode not in AUTHORIZATION_MODES:
        raise StartupError(
            f"--authorization-mode {mode}: must be one of {', '.join(AUTHORIZATION_MODES)}")
    token_webhook = cluster if s.authentication_token_webhook is None \
        else s.authentication_token_webhook
    if (mode == "Webhook" or token_webhook) and not cluster:
        raise StartupError(
            "--authorization-mode=Webhook and --authentication-token-webhook ask the API "
            "server: they need cluster mode (--kubeconfig)")
    return mode, token_webhook


def _thresholds(s: settings_mod.EvictionSettings) -> tuple[eviction.Threshold, ...]:
    try:
        hard = eviction.parse_thresholds(s.hard)
    except eviction.ThresholdError as exc:
        raise StartupError(f"--eviction-hard: {exc}") from exc
    try:
        graces = eviction.parse_grace_periods(s.soft_grace_periods)
        soft = eviction.parse_thresholds(s.soft, hard=False, grace_periods=graces)
    except eviction.ThresholdError as exc:
        raise StartupError(f"--eviction-soft: {exc}") from exc
    return (*hard, *soft)


def _token(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"--auth-token-file {path}: cannot read it: {exc}") from exc
    if not token:
        raise StartupError(f"--auth-token-file {path} is empty: write the bearer token into it")
    if any(c.isspace() or not c.isprintable() for c in token):
        raise StartupError(f"--auth-token-file {path}: the token must be one word of "
                           "printable characters")
    return token


def _check_port(flag: str, host: str, port: int) -> None:
    """The address can be bound now (port 0 always can); another process on the port is
    reported before containerd is started rather than after."""
    if not 0 <= port <= 65535:
        raise StartupError(f"{flag} {host}:{port}: the port must be 0 to 65535")
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise StartupError(f"{flag} {host}:{port}: cannot resolve {host}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise StartupError(f"{flag} {host}:{port}: cannot listen there: "
                               f"{exc.strerror} (another nodelet or a kubelet on this "
                               "machine?)") from exc
