"""What the node server serves (`adapters.node_server.NodeBackend`), over the agent's parts.

- Pods, health and `/metrics` come from the agent's read-only view.
- exec / attach / port-forward: the pod is found by namespace and name (and UID when the path
  names one), its running container or newest ready sandbox in the relister's cache (asked
  again from CRI when the cache does not have it yet), and CRI Exec / Attach / PortForward
  return the runtime's session URL.
- `/run`: CRI ExecSync, stdout then stderr.
- `/containerLogs`: the CRI log file under `<data dir>/logs` (as `nodelet logs`), followed
  across rotations and restarts with `services.logs.Follower` on a thread.
- `/stats/summary` and `/metrics/resource`: CRI PodSandboxStats per ready sandbox of the
  agent's pods (containerd 1.6 implements it; ListPodSandboxStats would fail as a whole for
  one sandbox without a cgroup parent), the node's own figures from its cgroup and /proc
  files, CPU rates against the previous scrape (`model.core.summary.with_rates`); and what
  the kubelet adds: running containers only, the `pods` system container (the kubepods
  cgroup), the runtime's filesystems (CRI ImageFsInfo), containers' rootfs and logs on their
  filesystems, the pod's ephemeral storage.
- `server_config`: the server's TLS files and who may do what — client certificates, the
  token file, and in cluster mode TokenReview and SubjectAccessReview
  (`services.serving.webhookauth`, by `--authentication-token-webhook` and `--authorization-mode`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nodelet import settings as settings_
from nodelet.adapters import containerd, host, node_server, nodeusage, servingcerts
from nodelet.adapters.cri import client as cri
from nodelet.helpers import inflight, ratelimit
from nodelet.model.core import configz, crilogs, nodeauth, podjson, qoscgroups, runtime, status
from nodelet.model.core import health as hm
from nodelet.model.core import noderequests as nr
from nodelet.model.core import pods as podmodel
from nodelet.model.core import servingfiles as tlsfiles
from nodelet.model.core import summary as sm
from nodelet.services.pleg import relisting
from nodelet.services.serving import logs, preflight

if TYPE_CHECKING:
    from nodelet.services.serving import webhookauth  # imported by `_webhooks`, when one is on

log = logging.getLogger(__name__)


class AgentView(Protocol):
    def pods(self) -> list[tuple[podmodel.Pod, status.PodStatus | None]]: ...

    def health(self) -> list[hm.HealthCheck]: ...

    def metrics_text(self) -> tuple[bytes, str]: ...

    def probe_metrics_text(self) -> bytes: ...

    async def volume_stats(self, pod: podmodel.Pod) -> list[sm.VolumeUsage]: ...


@dataclass(frozen=True)
class Facts:
    node_name: str
    data_dir: Path
    # The cgroup root the pods' kubepods cgroup is under (the `pods` system container).
    cgroup_root: str = "/"
    # Seconds between polls of a followed log file.
    log_poll_interval: float = logs.POLL_INTERVAL
    # CRI PodSandboxStats calls in flight at once while sampling (each with the CRI client's
    # default deadline): a node of 110 pods must not send 110 at once to a runtime that is
    # busy starting pods.
    stats_concurrency: int = 4


class NodeServing:
    def __init__(self, *, view: AgentView, client: cri.RuntimeClient,
                 relister: relisting.Relister, facts: Facts,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self._view = view
        self._client = client
        self._relister = relister
        self._facts = facts
        self._started_ns = clock()
        self._previous: sm.Summary | None = None
        self._stats_calls = asyncio.Semaphore(max(1, facts.stats_concurrency))
        self._sampling: inflight.Shared[sm.Summary] = inflight.Shared(
            lambda: _Unavailable("the stats sample was abandoned: try again"))

    # -- the view ---------------------------------------------------------------------------

    def pods(self) -> list[tuple[podmodel.Pod, status.PodStatus | None]]:
        return self._view.pods()

    def health(self) -> list[hm.HealthCheck]:
        return self._view.health()

    def metrics_text(self) -> tuple[bytes, str]:
        return self._view.metrics_text()

    # -- finding things -----------------------------------------------------------------------

    def _find(self, ref: nr.PodRef) -> tuple[podmodel.Pod, status.PodStatus | None]:
        for pod, pod_status in self._view.pods():
            if (pod.namespace, pod.name) == (ref.namespace, ref.name) and \
                    ref.uid in ("", pod.uid):
                return pod, pod_status
        raise nr.NotFoundError(f'pod "{ref.name}" not found in namespace "{ref.namespace}"')

    async def _runtime(self, uid: podmodel.PodUID,
                       ready: Callable[[runtime.PodRuntime], bool]) -> runtime.PodRuntime:
        state = self._relister.pod(uid)
        return state if ready(state) else await self._relister.refresh_pod(uid)

    async def _running_container(self, ref: nr.PodRef, name: str) -> runtime.ContainerID:
        pod, _ = self._find(ref)
        if not name:
            names = [c.name for c in pod.spec.containers]
            if len(names) != 1:
                raise nr.NodeRequestError(
                    f"a container name must be specified for pod {pod.name}, choose one of: "
                    f"[{' '.join(names)}]")
            name = names[0]
        if name not in _container_names(pod):
            # The pod has no such container: kube-apiserver's words, as `/containerLogs` says it.
            raise nr.NotFoundError(f"container {name} is not valid for pod {pod.name}")

        def running(state: runtime.PodRuntime) -> bool:
            return any(c.name == name and c.state is runtime.ContainerState.RUNNING
                       for c in state.containers)

        state = await self._runtime(pod.uid, running)
        found = [c for c in state.containers
                 if c.name == name and c.state is runtime.ContainerState.RUNNING]
        if not found:
            # The kubelet's words (GetExec, RunInContainer), which kubectl shows.
            raise nr.NotFoundError(f'container not found ("{name}")')
        return max(found, key=lambda c: c.attempt).id

    async def _ready_sandbox(self, ref: nr.PodRef) -> runtime.SandboxID:
        pod, _ = self._find(ref)

        def ready(state: runtime.PodRuntime) -> bool:
            return any(s.state is runtime.SandboxState.READY for s in state.sandboxes)

        state = await self._runtime(pod.uid, ready)
        found = [s for s in state.sandboxes if s.state is runtime.SandboxState.READY]
        if not found:
            raise nr.NotFoundError(f'pod "{pod.name}" has no ready sandbox')
        return found[0].id

    # -- streaming and run ---------------------------------------------------------------------

    async def stream_url(self, request: nr.StreamRequest) -> str:
        try:
            if request.kind is nr.StreamKind.PORT_FORWARD:
                sandbox = await self._ready_sandbox(request.pod)
                return await self._client.port_forward(sandbox, list(request.ports))
            container = await self._running_container(request.pod, request.container)
            if request.kind is nr.StreamKind.EXEC:
                return await self._client.exec(
                    container, request.command, tty=request.tty, stdin=request.stdin,
                    stdout=request.stdout, stderr=request.stderr)
            return await self._client.attach(container, tty=request.tty, stdin=request.stdin,
                                             stdout=request.stdout, stderr=request.stderr)
        except cri.NotFound as exc:
            raise nr.NotFoundError(str(exc)) from exc

    async def run(self, pod: nr.PodRef, container: str, command: Sequence[str]) -> bytes:
        container_id = await self._running_container(pod, container)
        result = await self._client.exec_sync(container_id, list(command), timeout_s=0)
        return result.stdout + result.stderr

    # -- logs -----------------------------------------------------------------------------------

    async def open_logs(self, pod: nr.PodRef, container: str,
                        options: nr.LogOptions) -> AsyncIterator[bytes]:
        found, pod_status = self._find(pod)
        pod_json = podjson.pod_to_api(found, pod_status)
        try:
            crilogs.choose_container(pod_json, container or None)
        except crilogs.LogsError as exc:
            raise nr.NotFoundError(str(exc)) from exc
        try:
            follower = await asyncio.to_thread(self._follower, pod_json, container, options)
        except crilogs.LogsError as exc:
            # As the kubelet: a log it cannot give (no previous run, no file yet) is a 400,
            # which kube-apiserver shows as BadRequest with these words — the public ones:
            # host paths and advice to run nodelet commands are for this node's operator,
            # and stay in its log.
            log.info("no log for %s/%s container %r: %s", pod.namespace, pod.name, container,
                     exc)
            raise nr.NodeRequestError(exc.public) from exc
        return self._log_chunks(follower, options)

    def _follower(self, pod_json: dict[str, Any], container: str,
                  options: nr.LogOptions) -> logs.Follower:
        """The log's follower (blocking: lists and opens files)."""
        target = logs.locate(pod_json, container=container or None,
                             previous=options.previous, data_dir=self._facts.data_dir)
        return logs.Follower(target, logs.open_reader(target, options.tail_lines,
                                                      final=not options.follow))

    async def _log_chunks(self, follower: logs.Follower,
                          options: nr.LogOptions) -> AsyncIterator[bytes]:
        """What is logged already (from the tail's start), a batch at a time, then with
        `follow` what is logged next."""
        try:
            while True:
                batch = await asyncio.to_thread(_read_batch, follower.reader,
                                                not options.follow)
                yield b"".join(crilogs.render(x, timestamps=options.timestamps)
                               for x in batch if nr.line_wanted(x, options.since))
                if follower.reader.at_end:
                    break
            while options.follow:
                lines = await asyncio.to_thread(follower.poll)
                if lines is None:
                    return
                wanted = [x for x in lines if nr.line_wanted(x, options.since)]
                yield b"".join(crilogs.render(x, timestamps=options.timestamps)
                               for x in wanted)
                if not lines:
                    await asyncio.sleep(self._facts.log_poll_interval)
        finally:
            follower.close()

    # -- stats ------------------------------------------------------------------------------------

    async def summary(self, *, only_cpu_and_memory: bool = False) -> dict[str, Any]:
        current = await self.collect()
        body = sm.summary_to_api(current)
        if only_cpu_and_memory:
            _strip_to_cpu_and_memory(body)
        return body

    async def resource_metrics(self) -> bytes:
        return sm.resource_metrics_text(await self.collect()).encode()

    async def probe_metrics(self) -> bytes:
        return self._view.probe_metrics_text()

    async def collect(self) -> sm.Summary:
        """A fresh sample of the node and its pods, with CPU rates since the previous one.

        Scrapes that arrive while a sample is being taken share it (metrics-server, kubectl
        and Prometheus scraping at once cost one round of CRI calls). No older sample is
        served: a second scrape right after the first must get new figures and CPU rates
        (`nodelet top` asks again for them), and at most one sample is ever in flight."""
        return await self._sampling.run("sample", self._sample)

    async def _sample(self) -> sm.Summary:
        node_task = asyncio.to_thread(nodeusage.read_node, self._facts.node_name,
                                      self._started_ns, self._facts.data_dir)
        node, pod_usages, image_fs = await asyncio.gather(node_task, self._pod_usages(),
                                                          self._image_fs())
        pods_cgroup = await asyncio.to_thread(
            nodeusage.read_cgroup, "pods", qoscgroups.kubepods(self._facts.cgroup_root),
            self._started_ns)
        node = replace(node, image_fs=image_fs,
                       system_containers=(pods_cgroup,) if pods_cgroup is not None else ())
        pod_usages = [await asyncio.to_thread(self._with_storage, pod, image_fs, node.fs)
                      for pod in pod_usages]
        summary = sm.with_rates(sm.Summary(node=node, pods=tuple(pod_usages)), self._previous)
        self._previous = summary
        return summary

    async def _pod_usages(self) -> list[sm.PodUsage]:
        wanted = []
        for pod, _ in self._view.pods():
            state = self._relister.pod(pod.uid)
            ready = [s for s in state.sandboxes if s.state is runtime.SandboxState.READY]
            if ready:
                wanted.append((pod, state, ready[0]))
        results = await asyncio.gather(
            *(self._sandbox_stats(sandbox.id) for _, _, sandbox in wanted),
            return_exceptions=True)
        # A pod whose volumes cannot be measured is served without them.
        volumes = await asyncio.gather(*(self._view.volume_stats(pod) for pod, _, _ in wanted),
                                       return_exceptions=True)
        usages = []
        for (pod, state, sandbox), result, stats in zip(wanted, results, volumes, strict=True):
            if isinstance(result, BaseException):
                log.debug("no stats for pod %s/%s: %s", pod.namespace, pod.name, result)
                continue
            measured = () if isinstance(stats, BaseException) else tuple(stats)
            usages.append(replace(_named(result, pod, state, sandbox), volumes=measured))
        return usages

    async def _image_fs(self) -> sm.Fs | None:
        """The runtime's image filesystem: what it says its images use (CRI ImageFsInfo),
        on the filesystem of its mount point; None when it does not say."""
        try:
            filesystems = await self._client.image_fs_info()
        except cri.CriError as exc:
            log.debug("no image filesystem figures: %s", exc)
            return None
        if not filesystems:
            return None
        first = filesystems[0]
        now = time.time_ns()
        info = await asyncio.to_thread(nodeusage.fs, Path(first.mountpoint), now)
        used = sm.Fs(time_ns=now, used=first.used_bytes, inodes_used=first.inodes_used)
        return sm.on_filesystem(used, info)

    def _with_storage(self, pod: sm.PodUsage, container_fs: sm.Fs | None,
                      root_fs: sm.Fs | None) -> sm.PodUsage:
        """The pod's containers with their rootfs on the runtime's filesystem and their
        logs (their log directory, as `du` counts it) on the data dir's, and the pod's
        ephemeral storage of both, as the kubelet adds them. Blocking: on a thread."""
        pod_logs = self._facts.data_dir / "logs" / f"{pod.namespace}_{pod.name}_{pod.uid}"
        now = time.time_ns()
        containers = []
        for container in pod.containers:
            used, inodes = host.directory_usage(pod_logs / container.name)
            logs = sm.on_filesystem(sm.Fs(time_ns=now, used=used, inodes_used=inodes), root_fs)
            containers.append(replace(container, logs=logs,
                                      rootfs=sm.on_filesystem(container.rootfs, container_fs)))
        return replace(pod, containers=tuple(containers),
                       ephemeral=pod.ephemeral or sm.ephemeral_storage(containers, root_fs,
                                                                       pod.volumes))

    async def _sandbox_stats(self, sandbox: runtime.SandboxID) -> sm.PodUsage:
        async with self._stats_calls:  # the call itself has the CRI client's deadline
            return await self._client.pod_sandbox_stats(sandbox)


def _container_names(pod: podmodel.Pod) -> set[str]:
    """Every container a session may name: the app, init (sidecars) and ephemeral ones."""
    spec = pod.spec
    return {c.name for c in (*spec.containers, *spec.init_containers,
                             *spec.ephemeral_containers)}


class _Unavailable(nr.NodeRequestError):
    """No answer now (the sample this scrape waited for was abandoned): try again."""

    status = 503


def _read_batch(reader: logs.Reader, final: bool) -> list[crilogs.LogLine]:
    """The next lines already logged, about `logs.BATCH_BYTES` of the file; `final` (not
    following): a last unfinished line is given too, as the kubelet's ReadLogs gives a `P`
    record at the file's end (`printf x` logs only that)."""
    return list(reader.lines(final=final, max_bytes=logs.BATCH_BYTES))


def _named(usage: sm.PodUsage, pod: podmodel.Pod, state: runtime.PodRuntime,
           sandbox: runtime.SandboxInfo) -> sm.PodUsage:
    """The runtime's figures under the pod's API name, with start times from the runtime,
    of its running containers only (`sm.running_only`)."""
    created = {c.id: c.started_at or c.created_at for c in state.containers}
    containers = tuple(replace(c, start_ns=created.get(runtime.ContainerID(c.id), 0))
                       for c in usage.containers)
    running = {c.id for c in state.containers if c.state is runtime.ContainerState.RUNNING}
    return sm.running_only(replace(usage, name=pod.name, namespace=pod.namespace, uid=pod.uid,
                                   start_ns=sandbox.created_at, containers=containers),
                           running)


def _strip_to_cpu_and_memory(body: dict[str, Any]) -> None:
    """metrics-server's `only_cpu_and_memory=true`: network, filesystems and process counts
    left out."""
    keep = {"nodeName", "podRef", "name", "startTime", "cpu", "memory", "containers",
            "systemContainers"}
    for entry in [body["node"], *body["pods"]]:
        for key in [k for k in entry if k not in keep]:
            del entry[key]
        for container in entry.get("containers", []):
            for key in [k for k in container if k not in keep]:
                del container[key]


# -- configuration --------------------------------------------------------------------------------


def server_config(
    settings: settings_.Settings,
    *,
    host_ips: Sequence[str] = (),
    api_client: webhookauth.ClientOf | None = None,
    access_client: webhookauth.ClientOf | None = None,
    authenticators: Sequence[nodeauth.Authenticator] = (),
    authorizer: nodeauth.Authorizer | None = None,
) -> node_server.NodeServerConfig:
    """The node server's configuration from the settings: the serving pair (`_serving_pair`)
    and the TLS files read again when they change (`tlsfiles.watch`: the given pair and
    client CA, as the gates say), the authenticators (client certificates, the token file,
    then TokenReview when the token webhook is on, then `authenticators`) and the authorizer:
    `authorizer` if given, else by the authorization mode — SubjectAccessReview (Webhook) or
    any authenticated user (AlwaysAllow). The webhooks ask the API server through cluster
    mode's review clients (None until it started): TokenReviews through `api_client()`,
    SubjectAccessReviews through `access_client()` (default: `api_client`), each with its own
    cap on reviews in flight.

    Blocking (reads files, may generate a key). Raises preflight.StartupError for a token
    file, certificate or auth setting that cannot work."""
    s = settings.node_server
    webhooks, webhook_authorizer = _webhooks(settings, api_client, access_client or api_client)
    return node_server.NodeServerConfig(
        address=s.address, port=s.port, node_name=settings.node_name,
        tls=_serving_pair(settings, host_ips),
        authenticators=(*_node_local(settings), *_local_authenticators(s), *webhooks,
                        *authenticators),
        authorizer=nodeauth.LocalFirst(
            authorizer or webhook_authorizer or nodeauth.AllowAuthenticated()),
        anonymous=s.anonymous_auth, stream_connect_timeout=s.stream_connect_timeout,
        header_timeout=s.header_timeout, max_connections=connection_cap(s),
        max_connections_per_source=max(1, s.max_connections_per_source),
        configz=configz.configz(settings, runtime_endpoint=_runtime_endpoint(settings)),
        reload=tlsfiles.watch(settings.gates, pair_given=s.tls_cert_file is not None,
                                  client_ca_given=s.client_ca_file is not None),
        reload_period=s.tls_files_check_period)


def _runtime_endpoint(settings: settings_.Settings) -> str:
    """The CRI endpoint in use: the given one, or the embedded containerd's socket."""
    if settings.runtime.endpoint:
        return settings.runtime.endpoint
    return f"unix://{containerd.ContainerdPaths.of(settings.data_dir).socket}"


def connection_cap(s: settings_.NodeServerSettings) -> int:
    """`max_connections`, held to an eighth of the open-file limit (at least 16): an open
    connection takes three descriptors (its socket, and the socketpair to the TLS front) and
    a stream to the runtime one more, and the rest of the agent needs its own."""
    bound = max(16, host.open_file_limit() // 8)
    if s.max_connections > bound:
        log.warning("the node server holds at most %d connections, not %d: the open-file "
                    "limit is %d (raise LimitNOFILE)", bound, s.max_connections,
                    host.open_file_limit())
    return max(1, min(s.max_connections, bound))


def _serving_pair(settings: settings_.Settings, host_ips: Sequence[str]) -> node_server.TlsFiles:
    """The given serving pair, or the self-signed one in the data dir (made at first start
    for the node's name and IPs; an empty IP, a node without one, is left out)."""
    s = settings.node_server
    if (s.tls_cert_file is None) != (s.tls_private_key_file is None):
        raise preflight.StartupError(
            "--tls-cert-file and --tls-private-key-file go together: give both or neither")
    if s.tls_cert_file is not None and s.tls_private_key_file is not None:
        return node_server.TlsFiles(s.tls_cert_file, s.tls_private_key_file, s.client_ca_file)
    ips = [ip for ip in host_ips if ip]
    for ip in ips:
        try:
            ipaddress.ip_address(ip)
        except ValueError as exc:
            raise preflight.StartupError(
                f"the node's IP {ip!r} is not an IP address: give the node server's "
                "certificate with --tls-cert-file and --tls-private-key-file") from exc
    try:
        pair = servingcerts.ensure_self_signed(
            servingcerts.self_signed_paths(settings.data_dir),
            hostname=settings.node_name, ips=ips, timeout=s.self_signed_timeout)
    except servingcerts.CertificateError as exc:
        raise preflight.StartupError(str(exc)) from exc
    return node_server.TlsFiles(pair.cert, pair.key, s.client_ca_file)


def _node_local(settings: settings_.Settings) -> list[nodeauth.Authenticator]:
    """The node-local credential, made anew (`servingcerts.write_local_token`), unless
    turned off (--node-local-credential=false)."""
    if not settings.node_server.node_local_credential:
        return []
    try:
        return [nodeauth.LocalToken(servingcerts.write_local_token(settings.data_dir))]
    except servingcerts.CertificateError as exc:
        raise preflight.StartupError(str(exc)) from exc


def _local_authenticators(s: settings_.NodeServerSettings) -> list[nodeauth.Authenticator]:
    """Client certificates of the client CA, then the token file."""
    found: list[nodeauth.Authenticator] = []
    if s.client_ca_file is not None:
        found.append(nodeauth.CertificateAuthenticator())
    if s.token_auth_file is not None:
        found.append(_token_file(s.token_auth_file))
    return found


def _webhooks(settings: settings_.Settings, api_client: webhookauth.ClientOf | None,
              access_client: webhookauth.ClientOf | None
              ) -> tuple[list[nodeauth.Authenticator], nodeauth.Authorizer | None]:
    """Cluster mode's TokenReview authenticator and SubjectAccessReview authorizer, as the
    settings ask (`preflight.node_auth`: both on by default in cluster mode), each with its
    own cap on reviews in flight; unknown tokens are limited per client address too."""
    s = settings.node_server
    mode, token_webhook = preflight.node_auth(settings)
    if mode != "Webhook" and not token_webhook:
        return [], None
    if api_client is None or access_client is None:
        raise preflight.StartupError("the node server's webhooks need the API client")
    # Imported only when a webhook is on (cluster mode): the reviews' API client would stay
    # in a standalone agent's memory for nothing (issue 26).
    from nodelet.services.serving import webhookauth

    found: list[nodeauth.Authenticator] = []
    authorizer: nodeauth.Authorizer | None = None
    if token_webhook:
        found.append(webhookauth.TokenReviewAuthenticator(
            api_client, ttl=s.authentication_token_webhook_cache_ttl,
            gate=webhookauth.ReviewGate(s.max_token_reviews_in_flight),
            per_source=ratelimit.PerKey(s.token_reviews_per_source_qps,
                                        s.token_reviews_per_source_burst)))
    if mode == "Webhook":
        authorizer = webhookauth.SubjectAccessReviewAuthorizer(
            access_client, authorized_ttl=s.authorization_webhook_cache_authorized_ttl,
            unauthorized_ttl=s.authorization_webhook_cache_unauthorized_ttl,
            gate=webhookauth.ReviewGate(s.max_access_reviews_in_flight))
    return found, authorizer


def _token_file(path: Path) -> nodeauth.TokenFile:
    try:
        return nodeauth.TokenFile.parse(path.read_text(), source=str(path))
    except OSError as exc:
        raise preflight.StartupError(
            f"--token-auth-file {path}: cannot read: {exc.strerror}") from exc
    except nodeauth.TokenFileError as exc:
        raise preflight.StartupError(f"--token-auth-file: {exc}") from exc
