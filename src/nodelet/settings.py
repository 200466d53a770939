"""All of nodelet's settings: one root dataclass of nested, documented dataclasses.

The CLI only maps flags onto these; every other module receives the part it needs.
Durations are in seconds.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DATA_DIR = Path("/var/lib/nodelet")
PAUSE_IMAGE = "localhost/nodelet/pause:1.0"
BUSYBOX_IMAGE = "localhost/nodelet/busybox:latest"
# `nodelet analyze --kubeconfig` lists pods and events in pages of this many (kubectl's
# --chunk-size); here, not in services.liveanalysis, so that the CLI's parser imports no
# analysis code.
ANALYZE_PAGE_SIZE = 500


@dataclass(frozen=True)
class CriTimeouts:
    """Deadlines of CRI calls."""

    # Ordinary calls (status, list, create, start, stop...). The kubelet uses 2 minutes.
    default: float = 120.0
    # RunPodSandbox runs CNI plugins and may take long; the kubelet allows it 4 minutes.
    run_sandbox: float = 240.0
    # PullImage: the kubelet has no deadline; we bound it so a stuck pull is reported.
    pull_image: float = 600.0
    # Connecting to the socket before the first call.
    connect: float = 10.0


def _checkout() -> Path:
    return Path(__file__).resolve().parents[2]


def built_runtime_dir() -> Path | None:
    """The checkout's `make runtime` output for the containerd version kube/versions.env
    pins, if it was built; None otherwise (an installed nodelet, or nothing built yet)."""
    versions = _checkout() / "kube" / "versions.env"
    try:
        lines = versions.read_text().splitlines()
    except OSError:
        return None
    version = next((line.split("=", 1)[1].strip() for line in lines
                    if line.startswith("CONTAINERD_VERSION=")), None)
    built = _checkout() / "build" / "runtime" / version if version else None
    return built if built is not None and (built / "containerd").is_file() else None


@dataclass(frozen=True)
class RuntimeSettings:
    """The container runtime: an external CRI endpoint, or the embedded containerd."""

    # `unix:///path/to/socket`; None starts and supervises the embedded containerd.
    endpoint: str | None = None
    # Where the embedded runtime's programs are: a directory with containerd,
    # containerd-shim-runc-v2, ctr and runc (`make runtime` builds containerd 2.x and runc
    # into build/runtime/<version>/ of the checkout); None: those on PATH (a distribution's
    # containerd, e.g. Debian 12's 1.6). Default: the checkout's build when it is there.
    runtime_bin_dir: Path | None = field(default_factory=lambda: built_runtime_dir())
    cni_bin_dir: Path = Path("/usr/lib/cni")
    # Pod CIDRs for the embedded CNI config (one per IP family). Empty: a /24 derived from the
    # data dir, so several instances on one machine never share a range.
    pod_cidrs: tuple[str, ...] = ()
    # How long to wait for CRI Status to report RuntimeReady and NetworkReady.
    ready_timeout: float = 60.0
    # Back-off before restarting an embedded containerd that died: initial and cap.
    restart_backoff: float = 1.0
    restart_backoff_max: float = 30.0
    timeouts: CriTimeouts = field(default_factory=CriTimeouts)
    # OCI archives of the pause and busybox images (`make images`), imported into the embedded
    # containerd when missing. Default: `images/out` of the source checkout.
    images_dir: Path = field(default_factory=lambda: _checkout() / "images" / "out")
    # More runtime handlers of the embedded containerd, each runc under another name, for
    # RuntimeClasses that name them (--runtime-handler; the node suite's RuntimeClass specs
    # ask for `test-handler`, as upstream's node e2e containerd config defines it). The
    # default handler `runc` is always there. Default: none.
    runc_handlers: tuple[str, ...] = ()
    # Where the embedded containerd 2.x reads CDI specs (the devices DRA drivers and device
    # plugins name by CDI ID): containerd's own defaults. containerd 1.x has no CDI here.
    cdi_spec_dirs: tuple[Path, ...] = (Path("/etc/cdi"), Path("/var/run/cdi"))


@dataclass(frozen=True)
class FeatureGates:
    # Report the PodReadyToStartContainers condition (KEP-3085). Beta, default on since 1.29;
    # GA in 1.37 and locked on: --feature-gates cannot turn it off (LOCKED_GATES), only code
    # that builds these settings directly (tests of the pre-1.29 behaviour).
    pod_ready_to_start_containers: bool = True
    # Report it under its 1.25-1.27 name PodHasNetwork instead.
    pod_has_network: bool = False
    # Kubernetes' ReloadKubeletServerCertificateFile (beta, on by default since 1.31): the
    # node server's serving pair given as files (--tls-cert-file, --tls-private-key-file) is
    # read again when the files change; off: the pair read at start is served until a restart.
    reload_kubelet_server_certificate_file: bool = True
    # Kubernetes' ReloadKubeletClientCAFile (beta, on by default since 1.36): the same for the
    # client CA file (--client-ca-file), whose certificates replace the old set.
    reload_kubelet_client_ca_file: bool = True
    # Kubernetes' RotateKubeletServerCertificate (beta, on by default since 1.12): the kubelet
    # asks for its serving certificate by CSR only with serverTLSBootstrap, which nodelet does
    # not do (a --config file may only say false); without it the kubelet ignores the gate,
    # as nodelet does: accepted at either value, changes nothing.
    rotate_kubelet_server_certificate: bool = True
    # Beyond KEP-3085 (issue 17, docs/kep3085.md "Beyond the KEP"); alpha, default off, so the
    # default status is exactly the kubelet's.
    # One condition per IP family the node serves (nodelet.dev/IPv4Ready, .../IPv6Ready).
    pod_ip_family_conditions: bool = False
    # PodReadyToStartContainers stays False until the sandbox has every family the node serves.
    pod_ready_needs_all_ip_families: bool = False
    # The nodelet.dev/VolumesReady condition (the original KEP's future PodHasVolumes).
    pod_volumes_condition: bool = False
    # Initialized of a pod without init containers waits for the sandbox.
    pod_initialized_after_sandbox: bool = False
    # The termination SLI (deletionTimestamp -> the sandbox condition False): a histogram, and
    # static pods get a deletionTimestamp when their manifest goes away.
    pod_termination_sli: bool = False
    # Kubernetes' ContainerStopSignals (KEP-4960; alpha, off by default in 1.37):
    # lifecycle.stopSignal is honoured and containerStatuses[].stopSignal shown; off, a pod
    # that sets it is refused at admission (it is never silently dropped).
    container_stop_signals: bool = False
    # Kubernetes' KubeletEnsureSecretPulledImages (beta, on by default since 1.35): a pod may
    # use an image already on the node only with the credentials that pulled it, as
    # `ImageCredentialSettings` says; off: any pod uses any present image.
    kubelet_ensure_secret_pulled_images: bool = True
    # Kubernetes' ResourceHealthStatus (KEP-4680; beta, on by default since 1.36): the health
    # of the devices a container holds in containerStatuses[].allocatedResourcesStatus, its
    # pod's status generated again when one changes; off: not reported. Upstream it depends
    # on DynamicResourceAllocation (kube_features.go: the kubelet refuses it on with DRA off),
    # but DRA is GA and locked on since 1.35, so in 1.37 that check never refuses anything;
    # nodelet has no DRA gate (DRA is always on) and checks nothing.
    resource_health_status: bool = True
    # Kubernetes' ResourceHealthStatusMessage (beta, on by default since 1.36): a DRA
    # driver's message about a device's health is shown with it
    # (allocatedResourcesStatus[].resources[].message); off: health only.
    resource_health_status_message: bool = True


@dataclass(frozen=True)
class SyncSettings:
    """Timing of pod workers and the relist."""

    # Retry after a failed sync: base period and jitter fraction (kubelet: 10 s, 0.5).
    retry_period: float = 10.0
    retry_jitter: float = 0.5
    # Retry when the runtime's network is not ready (kubelet: 1 s).
    network_not_ready_retry: float = 1.0
    # Subscribe to containerd's event stream (issue 13): an exit reaches its pod worker at
    # once and the relist is only a safety net. False: relist every `polling_relist_period`.
    runtime_events: bool = True
    # How often sandboxes and containers are listed from CRI (PLEG relist) while the event
    # subscription is live: the kubelet's relist period with Evented PLEG (KEP-3386), 300 s.
    relist_period: float = 300.0
    # The relist period without events (subscription down, or a runtime without containerd's
    # event service): the kubelet's generic PLEG period, 1 s.
    polling_relist_period: float = 1.0
    # Back-off between event subscription attempts (runtime restarting): initial and cap.
    events_backoff: float = 0.1
    events_backoff_max: float = 5.0
    # A new subscription is live once its probe event comes back; give up (and back off)
    # after this long.
    events_confirm_timeout: float = 5.0
    # CRI lags an exit event by tens of ms (measured: ~40 ms for a killed pause process): the
    # pod is read again, 10 ms doubling, until CRI shows the exit, at most this long.
    event_settle_timeout: float = 2.0
    # A pod with nothing pending is synced again after this long anyway (catches lost wakes;
    # the kubelet's syncFrequency, 1 min). Every change wakes the pod's worker at once.
    resync_period: float = 60.0
    # Container restart back-off (CrashLoopBackOff): initial and cap.
    restart_backoff: float = 10.0
    restart_backoff_max: float = 300.0
    # RunPodSandbox calls in flight at once; more wait for a slot. The limit adapts to the
    # runtime (helpers/adaptivelimit.py): it starts at `initial_parallel_sandboxes`, grows
    # while sandboxes are made as fast as the fastest seen (within twice), shrinks when they
    # take longer, and stays between the min and the max. Equal min and max: a fixed limit.
    min_parallel_sandboxes: int = 2
    initial_parallel_sandboxes: int = 4
    max_parallel_sandboxes: int = 32
    # Image pull back-off (ImagePullBackOff): initial and cap.
    image_backoff: float = 10.0
    image_backoff_max: float = 300.0
    # Stop a container: grace period used when the pod specifies none.
    default_grace_period: float = 30.0


@dataclass(frozen=True)
class SecuritySettings:
    """How the node runs containers' security settings (the kubelet's equivalents in brackets)."""

    # Sysctl names or `prefix*` patterns a pod may set beyond the safe set; only namespaced
    # sysctls (net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*) (allowedUnsafeSysctls).
    allowed_unsafe_sysctls: tuple[str, ...] = ()
    # Containers that ask for no seccomp profile get the runtime's default one instead of
    # none (seccompDefault; off by default, as in the kubelet).
    seccomp_default: bool = False
    # Where `seccompProfile: {type: Localhost, localhostProfile: P}` is looked up;
    # None: `<data dir>/seccomp` (the kubelet: <root dir>/seccomp).
    seccomp_profile_root: Path | None = None


@dataclass(frozen=True)
class ServerSettings:
    """The local HTTP API."""

    host: str = "127.0.0.1"
    port: int = 10255
    # Bearer token file; required when binding anything but loopback. Without one, only
    # requests whose Host header is a loopback name are answered (no DNS rebinding).
    auth_token_file: Path | None = None
    # False: no read-only API at all (--read-only-port 0, or `readOnlyPort: 0` / no
    # readOnlyPort in a --config file, as the kubelet). Default on, for nodelet's own CLI.
    enabled: bool = True
    # The healthz server: `/healthz` alone (`ok`, no checks), without credentials, at this
    # address and port (the kubelet's healthzBindAddress and healthzPort, 127.0.0.1:10248;
    # port 0 turns it off). While the port is taken it is tried again every 5 s; the agent
    # runs on.
    healthz_host: str = "127.0.0.1"
    healthz_port: int = 10248


@dataclass(frozen=True)
class NodeServerSettings:
    """The node's server (the kubelet's port 10250): logs, exec, attach, port-forward, stats,
    always over TLS, every request authenticated and authorized (docs/server.md)."""

    # Listen address and port (kubelet --address 0.0.0.0, --port 10250; 0: any free port).
    address: str = "0.0.0.0"
    port: int = 10250
    # Serving certificate and key (PEM). None: a self-signed pair generated at first start
    # into `<data dir>/pki/nodelet.crt|.key` (the kubelet's <cert-dir>/kubelet.crt), with the
    # node's hostname and IPs as subject alternative names.
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    # Seconds the child process that checks or makes the self-signed pair may take
    # (adapters/servingcerts.py); beyond, the start fails naming the certificate file.
    self_signed_timeout: float = 60.0
    # Client certificates signed by this CA authenticate as CN (user) and O (groups).
    client_ca_file: Path | None = None
    # Seconds between checks of the TLS files above for changes (a stat of each), while the
    # gates ReloadKubeletServerCertificateFile and ReloadKubeletClientCAFile have them read
    # again (nodelet's self-signed pair is not watched). The kubelet watches with fsnotify.
    tls_files_check_period: float = 2.0
    # Seconds between measurements of the claims' volumes for the kubelet_volume_stats_*
    # metrics (the kubelet's volumeStatsAggPeriod, 1 minute).
    volume_stats_period: float = 60.0
    # Bearer tokens, a CSV file as kube-apiserver's --token-auth-file: token,user,uid,"g1,g2".
    token_auth_file: Path | None = None
    # The node-local credential: a token made at every start in `<data dir>/pki/
    # node-local.token` (root-only), accepted from loopback only, allowed everything — for
    # nodelet's own CLI run by root on the node (model/core/nodeauth.LocalToken).
    node_local_credential: bool = True
    # Requests without credentials run as system:anonymous (kubelet --anonymous-auth; off here,
    # so they get 401).
    anonymous_auth: bool = False
    # Bearer tokens checked with the API server's TokenReview (kubelet
    # --authentication-token-webhook). None: on in cluster mode (as kubeadm configures the
    # kubelet), off standalone; true without cluster mode is refused at start.
    authentication_token_webhook: bool | None = None
    # Seconds a TokenReview answer is kept, accepted or not (kubelet
    # --authentication-token-webhook-cache-ttl, 2m; 0: not cached).
    authentication_token_webhook_cache_ttl: float = 120.0
    # "Webhook" (SubjectAccessReview) or "AlwaysAllow" (any authenticated user may do
    # anything) (kubelet --authorization-mode). None: Webhook in cluster mode (as kubeadm),
    # AlwaysAllow standalone; Webhook without cluster mode is refused at start.
    authorization_mode: str | None = None
    # Seconds a SubjectAccessReview answer is kept: allowed (kubelet
    # --authorization-webhook-cache-authorized-ttl, 5m) and denied (...-unauthorized-ttl, 30s).
    authorization_webhook_cache_authorized_ttl: float = 300.0
    authorization_webhook_cache_unauthorized_ttl: float = 30.0
    # Seconds a client may take for its TLS handshake and then for a request's headers (from
    # connecting, or from the end of its previous response); slower ones are disconnected.
    header_timeout: float = 10.0
    # How long a proxied exec/attach/port-forward connection to the runtime's streaming server
    # may take to answer its upgrade, in seconds.
    stream_connect_timeout: float = 10.0
    # Connections held at once (in their TLS handshake or open), in all and from one client
    # address. Beyond the per-address cap a new connection is closed at once; at the total,
    # it takes the place of the oldest one still in its TLS handshake from the address that
    # holds the most connections, if that holds more than the newcomer's (a flood's), else it
    # is closed (adapters/tlsfront.py). The total is also held to an eighth
    # of the open-file limit (each open connection takes three descriptors and a stream one
    # more). Defaults 1024 and 256 (a node's kube-apiserver opens one per kubectl
    # logs/exec/port-forward session).
    max_connections: int = 1024
    max_connections_per_source: int = 256
    # TokenReviews of tokens not in the cache in flight at once (identical ones merged); a
    # request needing another one is answered 429 with `Retry-After: 1` instead of queueing
    # behind them (a flood of random tokens must not build an unbounded queue). Default 8.
    max_token_reviews_in_flight: int = 8
    # The same for SubjectAccessReviews of users already authenticated (client certificates,
    # cached tokens), on a gate and an API client of their own: a flood of unknown tokens
    # never takes their places. Default 8.
    max_access_reviews_in_flight: int = 8
    # TokenReviews of unknown tokens each client address may cause: per second and burst
    # (beyond: 429 with `Retry-After: 1`); 0 qps: no limit. Defaults 5 and 10: a client
    # with one token (metrics-server, Prometheus) needs one review per cache TTL.
    token_reviews_per_source_qps: float = 5.0
    token_reviews_per_source_burst: int = 10


@dataclass(frozen=True)
class CheckpointSettings:
    """The SQLite checkpoint of transition times and events (`<data dir>/checkpoint.db`),
    written behind the event loop on its own thread. Durations in seconds."""

    # How long one write waits for a lock another connection holds (SQLite's busy timeout;
    # sqlite3 waits 5 s by default). Short: a write that gives up stays pending and is retried.
    # Default 1.0.
    busy_timeout: float = 1.0
    # Back-off between attempts while writes fail (disk full, locked): initial and cap,
    # doubling. Defaults 0.5 and 30.0.
    retry_backoff: float = 0.5
    retry_backoff_max: float = 30.0
    # On a clean shutdown, how long to keep trying to write what is still pending before
    # giving up (and logging what is lost). Default 5.0.
    flush_timeout: float = 5.0
    # How long the writer waits after a write was queued before writing, so that the writes
    # of a burst share one transaction (starting 30 pods queued ~200 writes; each one was a
    # transaction and a thread hop). What a crash within it loses is what it lost before
    # the writer thread ran. Default 0.1.
    write_delay: float = 0.1


@dataclass(frozen=True)
class ClusterSettings:
    """Cluster mode. Durations in seconds."""

    kubeconfig: Path
    # Requests per second and burst towards the API server (kubelet: 50 / 100).
    qps: float = 50.0
    burst: int = 100
    # The same for Events, on their own client (kubelet: eventRecordQPS 50, eventBurst 100).
    event_qps: float = 50.0
    event_burst: int = 100
    # The same for the node server's TokenReviews, and again for its SubjectAccessReviews,
    # each on a client of its own, so that a flood of unknown tokens at port 10250 never takes
    # the tokens of pod statuses nor of the authorization of known users. (The Lease and the
    # node status go on a client without a limit, as the kubelet's heartbeat client.)
    review_qps: float = 50.0
    review_burst: int = 100
    # Pod statuses: compare with the API and resend drifted ones (kubelet: 10 s).
    status_resync_period: float = 10.0
    status_retry: float = 0.5
    status_retry_max: float = 30.0
    status_senders: int = 4
    # Node status: computed every `node_status_period`, sent when changed or every
    # `node_report_period` (kubelet: 10 s and 5 min).
    node_status_period: float = 10.0
    node_report_period: float = 300.0
    # Lease (kubelet: 40 s duration, renewed every 10 s with 4 % jitter).
    lease_duration: int = 40
    lease_renew_period: float = 10.0
    # Request deadline; watch length and inactivity timeout; watch reconnect back-off (the
    # pod watch and the watch of each ConfigMap/Secret a pod reads).
    request_timeout: float = 10.0
    watch_timeout: int = 300
    watch_inactivity: float = 120.0
    watch_backoff: float = 0.5
    watch_backoff_max: float = 30.0
    # Final pod delete retry back-off: initial and cap; how long it waits for the last status.
    delete_retry: float = 0.5
    delete_retry_max: float = 30.0
    delete_status_wait: float = 30.0
    # A projected service account token whose refresh failed (the old one still valid) is
    # asked for again after `token_retry`, doubling to `token_retry_max`.
    token_retry: float = 1.0
    token_retry_max: float = 60.0
    # kube-apiserver's caches can lag a pod just bound here. NodeRestriction refuses its
    # TokenRequest before the server's own pod cache has the binding (403 "bound to a pod
    # scheduled on a different node", or 404 for the pod): measured on the real server with
    # 20 new pods at once. The Node authorizer refuses a GET of its claim, PV or
    # ResourceClaim before its graph has the pod (403 "no relationship found between node").
    # Such a request is asked again after `lag_retry` s, doubling, `lag_retries` times,
    # within the same sync (instead of failing it for the 10 s retry period).
    lag_retry: float = 0.1
    lag_retries: int = 4
    # How long `start()` waits for the node registration and the first pod list.
    start_timeout: float = 30.0
    # Back-off before a supervised cluster loop (cert-rotation, token-refresh,
    # service-watch) that crashed is started again: initial and cap.
    loop_restart_backoff: float = 1.0
    loop_restart_backoff_max: float = 30.0
    # TLS bootstrap (--bootstrap-kubeconfig): when `kubeconfig` is missing or its client
    # certificate expired, a CSR is made with these credentials and `kubeconfig` written.
    bootstrap_kubeconfig: Path | None = None
    # The client certificate store: <cert_dir>/kubelet-client-<date>.pem and the
    # kubelet-client-current.pem symlink (--cert-dir; the CLI: <data-dir>/pki).
    cert_dir: Path | None = None
    # Renew the client certificate at 70-90 % of its lifetime (the kubelet's
    # rotateCertificates); only a certificate from `cert_dir` is rotated.
    rotate_certificates: bool = True
    # How long one CSR may wait for approval and its certificate (the kubelet: 3600 s), and
    # the back-off after a failed request (1 s doubling to 5 min).
    csr_timeout: float = 3600.0
    csr_retry: float = 1.0
    csr_retry_max: float = 300.0
    # The lifetime to ask for (spec.expirationSeconds; None: the signer's default).
    csr_expiration_seconds: int | None = None


@dataclass(frozen=True)
class ManifestLimits:
    """Bounds on static pod manifest files: a file that breaks one is refused (shown in
    `/manifests` with the limit) instead of exhausting the agent's memory, CPU or stack."""

    # File size in bytes, checked before the file is read. The kubelet refuses static pod
    # files over 10 MiB (maxConfigLength). Default 10485760.
    max_bytes: int = 10 * 1024 * 1024
    # Nesting depth of mappings and lists in one document (YAML or JSON). Real pods nest under
    # 20 levels; Python recursion, not the data, is the bound (~1000 frames). Default 100.
    max_depth: int = 100
    # Nodes that YAML aliases (`*name`) may add to one file when expanded. Anchors reused a few
    # times stay far below it; an 870-byte "billion laughs" alias bomb expands to ~4e8 nodes.
    # Default 100000.
    max_alias_nodes: int = 100_000


@dataclass(frozen=True)
class LogSettings:
    """Container log rotation (the kubelet's containerLogMaxSize, containerLogMaxFiles,
    containerLogMonitorInterval, containerLogMaxWorkers) and the links to the logs."""

    # A running container's log is rotated once it is larger than this (bytes; 10 MiB).
    max_size: int = 10 * 1024 * 1024
    # Files kept per container log, the current one included (at least 2; default 5).
    max_files: int = 5
    # Seconds between checks (10 s), and rotations at once (1).
    monitor_period: float = 10.0
    max_workers: int = 1
    # Where the link to each started container's log goes, named
    # `<pod>_<namespace>_<container>-<container ID>.log` (adapters/loglinks.py): the kubelet's
    # /var/log/containers, which log shippers read (fixed in the kubelet; --container-logs-dir
    # here, so that tests keep their links to themselves).
    links_dir: Path = Path("/var/log/containers")


@dataclass(frozen=True)
class GCSettings:
    """Garbage collection of what the node accumulates (the kubelet's GC policies)."""

    # Seconds between image collections (the kubelet's ImageGCPeriod, 300).
    image_gc_period: float = 300.0
    # Unused images are removed once the image filesystem is this full (percent, 85;
    # --image-gc-high-threshold; 100 turns the periodic collection off) ...
    image_gc_high_percent: int = 85
    # ... until it is only this full (percent, 80; --image-gc-low-threshold).
    image_gc_low_percent: int = 80
    # An image first seen less than this many seconds ago is never removed: it may have just
    # been pulled for a container about to start (120; --image-minimum-gc-age).
    image_minimum_gc_age: float = 120.0
    # Whatever the disk usage, each collection removes the images no container has used for
    # more than this many seconds, none before the collector has run that long; an image
    # never used goes at the first collection after that, or, appearing later, at the first
    # collection that sees it (the kubelet's freeOldImages); 0 is off (0, the kubelet's
    # imageMaximumGCAge; a --config field only, greater than the minimum age).
    image_maximum_gc_age: float = 0.0
    # Seconds between collections of dead containers and sandboxes (ContainerGCPeriod, 60).
    container_gc_period: float = 60.0
    # A dead container is kept at least this many seconds after it was created
    # (0; --minimum-container-ttl-duration).
    min_age: float = 0.0
    # Dead instances kept per container of a pod, for `--previous` logs and lastState;
    # -1: no limit (1; --maximum-dead-containers-per-container).
    max_per_pod_container: int = 1
    # Dead containers kept on the whole node; -1: no limit (-1; --maximum-dead-containers).
    max_containers: int = -1


@dataclass(frozen=True)
class EvictionSettings:
    """Node-pressure eviction (the kubelet's eviction manager). Thresholds are written as the
    kubelet's flags write them: `SIGNAL<QUANTITY` or `SIGNAL<PERCENT%`, comma-separated, with
    the signals memory.available, nodefs.available, nodefs.inodesFree, imagefs.available,
    imagefs.inodesFree, pid.available."""

    # Met: pods are evicted at once, with no grace period (--eviction-hard; the kubelet's
    # Linux defaults). Memory and nodefs thresholds are also held out of Allocatable.
    hard: str = ("memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,"
                 "imagefs.available<15%")
    # Met for their grace period (signal → seconds): pods are evicted with at most
    # `max_pod_grace_period` seconds to stop (--eviction-soft, --eviction-soft-grace-period).
    soft: str = ""
    soft_grace_periods: tuple[tuple[str, float], ...] = ()
    max_pod_grace_period: float = 0.0
    # A pressure condition stays True this long after its signal cleared, so it does not
    # flap (--eviction-pressure-transition-period, 300).
    pressure_transition_period: float = 300.0
    # Seconds between observations (the kubelet's housekeeping interval, 10).
    monitoring_period: float = 10.0
    # The kubelet never evicts static pods (they are critical: it would not admit them
    # again). A standalone node runs only static pods; false lets it evict them, so a pod
    # filling the disk cannot take the node down. An evicted static pod stays Failed until
    # its manifest changes.
    static_pods_critical: bool = True


@dataclass(frozen=True)
class NodeSettings:
    """What the node offers pods: Allocatable = capacity - system - kube reservations - the
    hard eviction thresholds of memory and nodefs (the kubelet's node allocatable; see
    EvictionSettings), checked at admission and reported in the Node's status."""

    # Pods admitted at once (kubelet --max-pods, default 110).
    max_pods: int = 110
    # Resource name → quantity held back for the OS and for the node agent and runtime
    # (kubelet --system-reserved / --kube-reserved, e.g. (("cpu", "100m"), ("memory", "256Mi"))).
    system_reserved: tuple[tuple[str, str], ...] = ()
    kube_reserved: tuple[tuple[str, str], ...] = ()
    # The cgroup that holds `kubepods` and its QoS levels (kubelet --cgroup-root, "/": the
    # pods go under /kubepods). Agents that share a machine but not their pods (tests) each
    # take their own, so they never overwrite each other's QoS limits.
    cgroup_root: str = "/"
    # Seconds between rewrites of the QoS levels' limits, besides those on pod admission and
    # removal (the kubelet's periodic QoS cgroup update: 60).
    qos_update_period: float = 60.0
    # Labels of the Node besides the well-known ones (--node-labels k=v,...; the kubelet's
    # rules on the kubernetes.io and k8s.io namespaces apply: model/core/nodeflags.py).
    labels: tuple[tuple[str, str], ...] = ()
    # Taints the Node is registered with, (key, value, effect) (--register-with-taints).
    register_with_taints: tuple[tuple[str, str, str], ...] = ()
    # nodelet's own OOM score adjustment, -1000..1000, set at start (the kubelet's
    # oomScoreAdj, whose default is -999); None (the default): left as inherited.
    oom_score_adj: int | None = None


@dataclass(frozen=True)
class DNSSettings:
    """The pods' resolver configuration (the kubelet's clusterDNS, clusterDomain, resolvConf;
    `model/core/dns.py` has the rules for each dnsPolicy)."""

    # IP addresses of the cluster DNS Service (--cluster-dns, repeatable or comma-separated;
    # at most 3 are used). Empty (the default): ClusterFirst pods fall back to the node's
    # resolver, with a MissingClusterDNS Warning event, as the kubelet.
    cluster_dns: tuple[str, ...] = ()
    # The cluster's DNS domain (--cluster-domain, e.g. "cluster.local"; default "": no cluster
    # search paths). Cluster-DNS pods search <namespace>.svc.<domain>, svc.<domain>, <domain>.
    cluster_domain: str = ""
    # The node's resolver configuration that Default pods get and cluster-DNS pods take their
    # extra search paths from (--resolv-conf, default /etc/resolv.conf), read at each sandbox
    # creation. None (--resolv-conf ""): no host configuration; Default pods then get
    # `nameserver 127.0.0.1` and `search .`, as with the kubelet.
    resolv_conf: Path | None = Path("/etc/resolv.conf")


@dataclass(frozen=True)
class ImageCredentialSettings:
    """Who may use an image that is already on the node (with the KubeletEnsureSecretPulledImages
    gate on; `model/core/pullrecords.py` has the rules). Config file only, as in the kubelet."""

    # imagePullCredentialsVerificationPolicy: NeverVerify, NeverVerifyPreloadedImages (the
    # default: images the node did not pull itself are not verified), NeverVerifyAllowlistedImages
    # or AlwaysVerify.
    verification_policy: str = "NeverVerifyPreloadedImages"
    # preloadedImagesVerificationAllowlist: image names (no tag or digest), or prefixes ending
    # in `/*`, never verified; only with NeverVerifyAllowlistedImages.
    preloaded_allowlist: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginSettings:
    """Plugins that register through `<data dir>/plugins_registry` (CSI and DRA drivers)."""

    # Seconds between rescans of the registry directory (besides inotify's events), and the
    # deadline of the registration calls (GetInfo, NotifyRegistrationStatus).
    rescan_period: float = 5.0
    registration_timeout: float = 10.0
    # The registry directory; None: `<data dir>/plugins_registry` (the kubelet's
    # /var/lib/kubelet/plugins_registry under its root dir).
    registry_dir: Path | None = None
    # Deadline of a CSI Node service call (stage, publish, ...): the kubelet's csiTimeout.
    csi_call_timeout: float = 120.0
    # Deadline of a DRA driver call (NodePrepareResources, NodeUnprepareResources): the
    # kubelet's default for DRA plugins.
    dra_call_timeout: float = 45.0


@dataclass(frozen=True)
class DeviceSettings:
    """Device plugins (the kubelet's device manager)."""

    # Where plugins find the Registration socket (kubelet.sock) and put their own, and where
    # the device checkpoint is kept; None: `<data dir>/device-plugins` (the kubelet's
    # /var/lib/kubelet/device-plugins under its root dir).
    plugins_dir: Path | None = None
    # Where the pod resources API's socket (kubelet.sock) is served; None:
    # `<data dir>/pod-resources` (the kubelet's /var/lib/kubelet/pod-resources).
    pod_resources_dir: Path | None = None
    # Deadline of a call to a plugin (dial, options, Allocate, GetPreferredAllocation), s.
    call_timeout: float = 10.0
    # Deadline of PreStartContainer: the kubelet's 30 s.
    pre_start_timeout: float = 30.0
    # How long a resource whose plugin went away keeps its capacity (all of it unhealthy) for
    # the plugin to come back, s: the kubelet's endpointStopGracePeriod, 5 min.
    stop_grace_period: float = 300.0


@dataclass(frozen=True)
class Settings:
    data_dir: Path = DEFAULT_DATA_DIR
    # Directory of static pod manifests; None runs no static pods.
    manifests_dir: Path | None = None
    node_name: str = field(default_factory=lambda: socket.gethostname().lower())
    # The node's IP, or a dual-stack pair "v4,v6" (the first the primary), as the kubelet's
    # --node-ip (model/core/nodeips.py): checked against the host's interfaces at start and
    # reported as the Node's InternalIP(s). Empty (the default): the node name's address if it
    # resolves to one of the host's, else the default route's; "::" prefers IPv6 for those.
    node_ips: tuple[str, ...] = ()
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    gates: FeatureGates = field(default_factory=FeatureGates)
    sync: SyncSettings = field(default_factory=SyncSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    node_server: NodeServerSettings = field(default_factory=NodeServerSettings)
    node: NodeSettings = field(default_factory=NodeSettings)
    logs: LogSettings = field(default_factory=LogSettings)
    gc: GCSettings = field(default_factory=GCSettings)
    eviction: EvictionSettings = field(default_factory=EvictionSettings)
    dns: DNSSettings = field(default_factory=DNSSettings)
    image_credentials: ImageCredentialSettings = field(default_factory=ImageCredentialSettings)
    plugins: PluginSettings = field(default_factory=PluginSettings)
    devices: DeviceSettings = field(default_factory=DeviceSettings)
    # Join a Kubernetes cluster (--kubeconfig); None runs standalone.
    cluster: ClusterSettings | None = None
    # Watch the manifest directory with inotify (services/sources/manifestwatching.py);
    # false: poll it.
    manifest_watch: bool = True
    # While watched: the least seconds between two reads of a burst of changes, and how long
    # a write in progress (not closed yet) must pause before it is read; a finished change is
    # read at once. The most seconds from a write's first event to its read (a writer that
    # never pauses).
    manifest_debounce: float = 0.05
    manifest_debounce_max: float = 0.5
    # While watched: a full re-read this often, in seconds, as a safety net for a missed event
    # (the kubelet's fileCheckFrequency, 20 s).
    manifest_resync_period: float = 20.0
    # Seconds between rescans while the directory is NOT watched (manifest_watch false, or the
    # watch failed: no inotify instance or watch left, no parent directory); the watch is
    # tried again at each rescan.
    manifest_poll_period: float = 0.2
    # Limits on each manifest file (size, nesting, YAML aliases).
    manifest_limits: ManifestLimits = field(default_factory=ManifestLimits)
    # Back-off before restarting the manifest-reading task after it crashed: initial and cap,
    # in seconds (doubling; reset after it ran longer than the cap). /healthz fails meanwhile.
    manifest_restart_backoff: float = 1.0
    manifest_restart_backoff_max: float = 30.0
    # Events kept in the checkpoint (oldest dropped first).
    max_events: int = 5000
    # Writing the checkpoint: lock wait, retry back-off, shutdown flush.
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    # The node's registry credentials, a docker config.json (`{"auths": {...}}`), read at each
    # pull and used after the pod's imagePullSecrets (the kubelet reads config.json from its
    # root dir). None: `<data_dir>/config.json`; a missing file means no node credentials.
    registry_config: Path | None = None

    @property
    def registry_config_file(self) -> Path:
        return self.registry_config or self.data_dir / "config.json"

    @property
    def seccomp_profile_root(self) -> Path:
        return self.security.seccomp_profile_root or self.data_dir / "seccomp"

    @property
    def device_plugins_dir(self) -> Path:
        return self.devices.plugins_dir or self.data_dir / "device-plugins"

    @property
    def plugins_registry_dir(self) -> Path:
        return self.plugins.registry_dir or self.data_dir / "plugins_registry"

    @property
    def pod_resources_dir(self) -> Path:
        return self.devices.pod_resources_dir or self.data_dir / "pod-resources"


_GATES = {
    "PodReadyToStartContainersCondition": "pod_ready_to_start_containers",
    "PodHasNetworkCondition": "pod_has_network",
    "ReloadKubeletServerCertificateFile": "reload_kubelet_server_certificate_file",
    "ReloadKubeletClientCAFile": "reload_kubelet_client_ca_file",
    "RotateKubeletServerCertificate": "rotate_kubelet_server_certificate",
    "PodIPFamilyConditions": "pod_ip_family_conditions",
    "PodReadyToStartContainersAllIPFamilies": "pod_ready_needs_all_ip_families",
    "PodVolumesCondition": "pod_volumes_condition",
    "PodInitializedAfterSandbox": "pod_initialized_after_sandbox",
    "PodTerminationSLI": "pod_termination_sli",
    "ContainerStopSignals": "container_stop_signals",
    "KubeletEnsureSecretPulledImages": "kubelet_ensure_secret_pulled_images",
    "ResourceHealthStatus": "resource_health_status",
    "ResourceHealthStatusMessage": "resource_health_status_message",
}


# Gates locked to their default in the release nodelet behaves as (1.37), by flag name: setting
# one to the other value is refused with the kubelet's message (component-base featuregate).
LOCKED_GATES = {"PodReadyToStartContainersCondition": True}
# Gates that need others on, by flag name (kube_features.go's dependencies): one on while a
# gate it needs is off is refused with component-base's words.
GATE_DEPENDENCIES = {"ResourceHealthStatusMessage": ("ResourceHealthStatus",)}


def feature_gate_items(gates: FeatureGates) -> tuple[tuple[str, bool], ...]:
    """Every feature gate by its flag name with its value, sorted by name (for /healthz and
    the web UI)."""
    return tuple(sorted((name, bool(getattr(gates, attr))) for name, attr in _GATES.items()))


class SettingsError(ValueError):
    """A setting given on the command line is invalid; the message says which and why."""


def parse_resource_list(flag: str, text: str) -> tuple[tuple[str, str], ...]:
    """`cpu=100m,memory=256Mi` as the kubelet's --system-reserved (values checked later, as
    quantities, where the model reads them)."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise SettingsError(f"{flag}: {item!r} is not NAME=QUANTITY (e.g. cpu=100m)")
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)


def parse_feature_gates(text: str, base: FeatureGates | None = None) -> FeatureGates:
    """`K=V,K=V` as the kubelet's --feature-gates; unknown gates and non-booleans are errors."""
    values = dict((base or FeatureGates()).__dict__)
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        if key not in _GATES:
            known = ", ".join(sorted(_GATES))
            raise SettingsError(f"unknown feature gate {key!r} (known gates: {known})")
        if not sep or raw.strip().lower() not in ("true", "false"):
            raise SettingsError(f"feature gate {key} needs =true or =false, got {item!r}")
        value = raw.strip().lower() == "true"
        if key in LOCKED_GATES and value != LOCKED_GATES[key]:
            locked = str(LOCKED_GATES[key]).lower()
            raise SettingsError(f"cannot set feature gate {key} to {str(value).lower()}, "
                                f"feature is locked to {locked}")
        values[_GATES[key]] = value
    for gate, needs in GATE_DEPENDENCIES.items():
        off = [need for need in needs if not values[_GATES[need]]]
        if values[_GATES[gate]] and off:
            raise SettingsError(f"{gate} is enabled, but depends on features that are "
                                f"disabled: [{' '.join(off)}]")
    return FeatureGates(**values)
