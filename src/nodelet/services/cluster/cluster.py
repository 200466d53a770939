"""Cluster mode: nodelet as a node of a Kubernetes cluster (`--kubeconfig`).

`ClusterMode` is the one entry point the agent wires in. It owns four API clients: one for
everything, rate-limited by `qps`/`burst` like the kubelet's `--kube-api-qps/--kube-api-burst`;
one for events with its own limit, as the kubelet's event client; one for the Lease and the
node status without a limit, as the kubelet's heartbeat client (nothing may queue the node's
heartbeat); and two for the node server's reviews, each with its own limit
(`review_qps`/`review_burst`): TokenReviews (`api_client()`) and SubjectAccessReviews
(`access_api_client()`), so a flood of unknown tokens never delays the authorization of users
already known. And these loops, each a named, supervised task:

- `node-status`: registers the Node and keeps its status (`nodestatus.NodeReporter`);
- `node-lease`: renews the Lease (`leases.LeaseKeeper`);
- `pod-watch`: the desired pods bound to this node (`apisource.ApiPodSource` → `on_pods`);
- `service-watch`: the Services with a cluster IP, for containers' service environment
  variables (`servicewatch.ServiceWatch`, the kubelet's Service informer);
- `status-sync`: API pod statuses from the status manager (`statussync.StatusSync`);
- `event-sink`: the recorder's events as v1 Events (`eventposting.EventSink`);
- `object-watch:<kind>:<namespace>/<name>`: one watch per ConfigMap or Secret a pod reads
  (`objectwatches.ObjectWatches`), from the first pod reading it to the last;
- `mirror-pods`: the mirror pods of the static pods (`mirrors.MirrorPods`), whose status the
  status sync writes;
- `token-refresh`: wakes (`on_token_due`) the pods whose projected service account tokens are
  due for a refresh (`tokens.TokenManager`, which fetches them through TokenRequest);
- `cert-rotation`: renews the client certificate of a node that joined by TLS bootstrap
  (`certificates.ClientCertificates`, `--bootstrap-kubeconfig`) before it expires;
- `pod-delete`: the final delete (grace 0, UID precondition) of pods deleted in the API, once
  their worker is done (`pod_gone`) and their last status reached the API.

Exceptions: `start()` raises `kubeconfig.KubeconfigError` for an unusable kubeconfig and
`ClusterError` when the API server cannot be reached within `start_timeout`; afterwards API
errors are logged and retried, never raised.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nodelet import settings as settings_mod
from nodelet.adapters import host, kube, kubeconfig
from nodelet.helpers import backoff, errors, ratelimit, tasks
from nodelet.model.core import (
    admission,
    apijson,
    configs,
    health,
    nodes,
    pods,
    runtime,
    statuspatch,
)
from nodelet.services.cluster import certificates, csinode, leases, nodestatus, tokens
from nodelet.services.plugins import csidrivers
from nodelet.services.sources import apisource, objectwatches, servicewatch
from nodelet.services.status import eventposting, mirrors, recording, statuses, statussync

log = logging.getLogger(__name__)

# The Node authorizer's words for a request about an object its graph does not link to the
# node (yet: the graph lags a pod just bound here).
_GRAPH_LAG = "no relationship found between node"

STORAGE = csinode.STORAGE


class ClusterError(Exception):
    """Cluster mode could not start; the message says what to check."""


ClusterSettings = settings_mod.ClusterSettings


@dataclass(frozen=True)
class NodeIdentity:
    """Who this node is: its name, primary IP and pod CIDRs, and what its Node says about it
    (`spec`: capacity, allocatable, labels; None: read from this machine with the default max
    pods and no reservations)."""

    name: str
    host_ip: str
    pod_cidrs: tuple[str, ...] = ()
    spec: nodes.NodeSpec | None = None


@dataclass(frozen=True)
class Listeners:
    """The agent's callbacks: the node's desired pods changed, ConfigMaps or Secrets pods
    read changed, a pod's projected token is due for a rewrite."""

    on_pods: Callable[[Mapping[pods.PodUID, pods.Pod]], None]
    on_objects: Callable[[set[objectwatches.ObjectKey]], None] = lambda keys: None
    on_token_due: Callable[[pods.PodUID], None] = lambda uid: None


class ClusterMode:
    """Nodelet's part of a cluster. `await start()`, later `await stop()`.

    With `settings.bootstrap_kubeconfig`, `start()` first makes sure `settings.kubeconfig`
    holds a client certificate (TLS bootstrap: `certificates`); `ClusterError` names a CSR
    that was denied.

    Callbacks into the agent:
    - `on_pods(desired)`: the complete set of API pods to run (see `apisource`); called from
      the event loop, synchronously, after every change to it;
    - `on_objects(keys)`: ConfigMaps/Secrets (kind, namespace, name) whose content changed;
      wake the pods that read them.
    Calls from the agent:
    - `set_readers(readers)`: the complete map pod UID → ConfigMaps/Secrets the pod reads;
      exactly those are watched; may be called before `start()`;
    - `lookup_object(kind, namespace, name)`: the volume manager's lookup;
    - `pod_gone(uid)`: a pod worker finished terminating `uid` (after `statuses.forget`);
    - `set_static_pods(pods)`: the complete set of static pods (from the manifests), whose
      mirror pods are kept in the API; may be called before `start()`;
    - `static_pod_started(pod)`: the pod worker of a static pod started it: only then is its
      mirror pod made or replaced; heard once `start()` returned (call it then for the static
      pods started before).
    """

    certificates: certificates.ClientCertificates | None = None  # TLS bootstrap only

    def __init__(
        self,
        *,
        settings: ClusterSettings,
        node: NodeIdentity,
        statuses: statuses.StatusManager,
        recorder: recording.EventRecorder,
        views: nodestatus.NodeViews,
        listeners: Listeners,
        clock: Callable[[], datetime],
    ) -> None:
        """`node`: who this node is; `views`: what the Node's status reads from it;
        `listeners`: the agent's callbacks for what the API says."""
        self._views = views
        self.settings = settings
        self._node_name = node.name
        self._host_ip = node.host_ip
        self._pod_cidrs = node.pod_cidrs
        self._statuses = statuses
        self._recorder = recorder
        self._on_pods = listeners.on_pods
        self._on_objects = listeners.on_objects
        self._on_token_due = listeners.on_token_due
        self.tokens: tokens.TokenManager | None = None
        self._clock = clock
        self._node_spec = node.spec
        self._group = tasks.TaskGroup()
        self._unsubscribe: list[Callable[[], None]] = []
        self._deleting: set[pods.PodUID] = set()
        self._clients: list[kube.KubeClient] = []
        self._static_pods: dict[pods.PodUID, pods.Pod] = {}
        self._readers: Mapping[pods.PodUID, AbstractSet[objectwatches.ObjectKey]] = {}
        # API pods removed from the API whose workers are still finishing: they read no
        # object and send no status any more (the Node authorizer refuses both for a pod it
        # no longer knows, as 403s).
        self._api_removed: set[pods.PodUID] = set()
        self.mirrors: mirrors.MirrorPods | None = None
        self.objects: objectwatches.ObjectWatches | None = None
        # The Services (None until start()): `service_source()`.
        self.services: servicewatch.ServiceWatch | None = None
        # The registered CSI drivers, written to the API once the Node is registered.
        self._csi_drivers: list[csidrivers.Driver] = []
        self._node_registered = False

    # -- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        client_settings = kube.ClientSettings(
            request_timeout=s.request_timeout, watch_timeout=s.watch_timeout,
            watch_inactivity=s.watch_inactivity, watch_backoff=s.watch_backoff,
            watch_backoff_max=s.watch_backoff_max)
        await self._bootstrap(client_settings)
        config = kubeconfig.load(s.kubeconfig)
        self.client = kube.KubeClient(config, limiter=ratelimit.TokenBucket(s.qps, s.burst),
                                      settings=client_settings)
        self.event_client = kube.KubeClient(
            config, limiter=ratelimit.TokenBucket(s.event_qps, s.event_burst),
            settings=client_settings)
        # As the kubelet's HeartbeatClient: no client-side rate limit for the Lease and the
        # node status, so no burst of other calls (pod statuses, reviews) delays them.
        self.heartbeat_client = kube.KubeClient(
            config, limiter=ratelimit.TokenBucket(0, 1), settings=client_settings)
        self.review_client = kube.KubeClient(
            config, limiter=ratelimit.TokenBucket(s.review_qps, s.review_burst),
            settings=client_settings)
        self.access_review_client = kube.KubeClient(
            config, limiter=ratelimit.TokenBucket(s.review_qps, s.review_burst),
            settings=client_settings)
        self._clients = [self.client, self.event_client, self.heartbeat_client,
                         self.review_client, self.access_review_client]
        self._build()
        try:
            await asyncio.wait_for(self._first_contact(), s.start_timeout)
        except (TimeoutError, kube.KubeError) as exc:
            await self.stop()
            raise ClusterError(
                f"cannot join the cluster at {config.server} as node {self._node_name} "
                f"within {s.start_timeout:.0f}s: {exc or 'timed out'}; check --kubeconfig and "
                "that the API server is reachable") from exc
        self._start_loops()
        if self.certificates is not None and s.rotate_certificates:
            self._supervise("cert-rotation",
                            functools.partial(self.certificates.run, self._use_config))

    async def _bootstrap(self, client_settings: kube.ClientSettings) -> None:
        """TLS bootstrap (`--bootstrap-kubeconfig`): a client certificate in `kubeconfig`."""
        if self.settings.bootstrap_kubeconfig is None:
            return
        self.certificates = certificates.ClientCertificates(
            settings=self.settings, node_name=self._node_name, client_settings=client_settings,
            clock=self._clock)
        try:
            await self.certificates.bootstrap()
        except (certificates.CertificateError, kube.KubeError) as exc:
            raise ClusterError(f"TLS bootstrap of node {self._node_name} failed: {exc}") from exc

    async def _use_config(self, config: kubeconfig.KubeConfig) -> None:
        """A rotated client certificate: new connections of every client use it (one TLS
        context, made on a thread: it writes the key to a temp dir)."""
        tls = await asyncio.to_thread(config.ssl_context)
        for client in self._clients:
            client.use_config(config, tls=tls)

    def _supervise(self, name: str, start: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run the loop `start()` as task `name`, started again after a back-off whenever
        it crashes (a crash is logged): these loops must not stop silently."""
        s = self.settings
        self._group.supervise(name, start, backoff=backoff.Backoff(
            s.loop_restart_backoff, s.loop_restart_backoff_max))

    def _build(self) -> None:
        s = self.settings
        spec = self._node_spec or nodes.NodeSpec(
            name=self._node_name, host_ip=self._host_ip, machine=host.machine_facts(),
            pod_cidrs=self._pod_cidrs)
        self.node = nodestatus.NodeReporter(
            client=self.heartbeat_client, spec=spec, views=self._views, clock=self._clock,
            monotonic=time.monotonic, update_period=s.node_status_period,
            report_period=s.node_report_period)
        self.lease = leases.LeaseKeeper(
            client=self.heartbeat_client, node_name=self._node_name,
            node_uid=self._current_node_uid,
            clock=self._clock, timing=leases.LeaseTiming(
                duration=s.lease_duration, renew_period=s.lease_renew_period))
        self.source = apisource.ApiPodSource(
            client=self.client, node_name=self._node_name, on_pods=self._on_pods)
        self.source.on_removed = self._removed
        self.source.on_unreadable_update = self._unreadable_update
        mirror_pods = self.mirrors = mirrors.MirrorPods(
            client=self.client, node_name=self._node_name, node_uid=lambda: self.node.uid,
            on_retarget=lambda uid: self.status_sync.retarget(uid), retry=s.status_retry,
            retry_max=s.status_retry_max)
        mirror_pods.set_static_pods(self._static_pods)
        self.source.on_mirrors = mirror_pods.set_mirrors
        self.status_sync = statussync.StatusSync(
            client=self.client, api_object=self.source.api_object,
            settings=statussync.StatusSyncSettings(
                resync_period=s.status_resync_period, retry=s.status_retry,
                retry_max=s.status_retry_max, senders=s.status_senders),
            mirror_uid=mirror_pods.mirror_uid)
        self.events = eventposting.EventSink(client=self.event_client)
        self.objects = objectwatches.ObjectWatches(
            client=self.client, group=self._group, on_change=self._on_objects)
        self.services = servicewatch.ServiceWatch(self.client, wait_timeout=s.request_timeout)
        self.tokens = tokens.TokenManager(
            fetch=self._fetch_token, clock=self._clock, on_due=self._on_token_due,
            retry=s.token_retry, retry_max=s.token_retry_max,
            lag_retry=s.lag_retry, lag_retries=s.lag_retries)
        self._apply_readers()  # read before start(): static pods'

    def _unreadable_update(self, pod: pods.Pod, problem: str) -> None:
        """An update of a running pod that nodelet cannot read: the pod runs on as it was
        read before (`apisource`); the user hears why through a Warning event."""
        self._recorder.record(pod, "Warning", admission.UNSUPPORTED_REASON,
                              f"Pod update cannot be run, the pod runs on as before: {problem}")

    async def _current_node_uid(self) -> str | None:
        """The Node's UID as the API has it now (None: there is no Node), for its Lease."""
        try:
            found = await self.heartbeat_client.get_node(self._node_name)
        except kube.NotFound:
            return None
        return str(found.get("metadata", {}).get("uid") or "") or None

    async def _first_contact(self) -> None:
        """Register the node, and list the pods once, so that the first desired set is known
        before the agent judges orphans (as the manifest dir is read once before)."""
        await self.node.register()
        self._node_registered = True
        await self.csi_drivers_changed(self._csi_drivers)
        await self.lease.renew()
        self._group.spawn("pod-watch", self.source.run())
        if self.services is not None:  # not waited for: pods wait in service_env
            self._supervise("service-watch", self.services.run)
        await self.source.reflector.listed.wait()

    def _start_loops(self) -> None:
        self._unsubscribe = [
            self._statuses.subscribe(self.status_sync.on_status),
            self._recorder.subscribe(self.events.on_event),
        ]
        self._group.spawn("node-status", self._node_loop())
        self._group.spawn("node-lease", self._lease_loop())
        self._group.spawn("status-sync", self.status_sync.run())
        self._group.spawn("event-sink", self.events.run())
        if self.tokens is not None:
            self._supervise("token-refresh", self.tokens.run)
        if self.mirrors is not None:
            self._group.spawn("mirror-pods", self.mirrors.run())
        # Statuses set before the sync subscribed (static pods start before the cluster is
        # joined) are sent too.
        for pod, status in self._statuses.pods():
            self.status_sync.on_status(pod, status)

    async def _node_loop(self) -> None:
        while True:
            await asyncio.sleep(self.node.update_period)
            try:
                await self.node.update()
            except kube.KubeError as exc:
                log.warning("cannot update the status of node %s: %s", self._node_name, exc)

    async def _lease_loop(self) -> None:
        await asyncio.sleep(backoff.jittered(self.settings.lease_renew_period, 0.04))
        await self.lease.run()

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        await self._group.close()
        for client in self._clients:
            await client.close()
        self._clients = []

    # -- calls from the agent ---------------------------------------------------------------------

    def api_client(self) -> kube.KubeClient | None:
        """The node server's TokenReviews' client, with its own rate limit (None before
        `start()` made it)."""
        return self.review_client if self._clients else None

    def access_api_client(self) -> kube.KubeClient | None:
        """The node server's SubjectAccessReviews' client, with a rate limit of its own
        (None before `start()` made it)."""
        return self.access_review_client if self._clients else None

    def lookup_object(self, kind: str, namespace: str, name: str) -> configs.ConfigObject | None:
        """The object as its watch last saw it; None: absent, not listed yet, or no pod
        reads it."""
        if self.objects is None:
            return None
        return self.objects.lookup(kind, namespace, name)

    def object_listed(self, kind: str, namespace: str, name: str) -> bool:
        """Whether None from `lookup_object` is the API's word, not "not read yet"."""
        return self.objects is None or self.objects.listed(kind, namespace, name)

    async def service_account_token(self, request: tokens.Request) -> tokens.Token:
        """A pod's projected token (the volume manager's token source); raises
        `tokens.FetchError` with the API's words."""
        if self.tokens is None:
            raise tokens.FetchError("failed to fetch token: cluster mode has not started")
        return await self.tokens.token(request)

    async def _fetch_token(self, request: tokens.Request) -> apijson.Obj:
        return await self.client.create_token(request.namespace, request.service_account,
                                              request.body())

    async def claim(self, namespace: str, name: str) -> apijson.JSON:
        """The PersistentVolumeClaim (the volume manager's claim reader); raises
        `errors.MessageError` with the API's words."""
        return await self._read("persistentvolumeclaims", namespace, name)

    async def resource_claim(self, namespace: str, name: str) -> apijson.JSON:
        """The ResourceClaim (the DRA manager's claim reader), read each time as the kubelet
        GETs it; raises `errors.MessageError` with the API's words."""
        try:
            return await self._get_of_pod(
                kube.group_path("resource.k8s.io/v1", "resourceclaims", namespace, name))
        except kube.NotFound as exc:
            raise errors.MessageError(
                f'resourceclaims.resource.k8s.io "{name}" not found') from exc
        except kube.KubeError as exc:
            raise errors.MessageError(str(exc)) from exc

    async def delete_resource_slices(self, driver: str = "") -> None:
        """Delete this node's ResourceSlices, of `driver` only when given (the kubelet's
        wipeResourceSlices); raises `errors.MessageError` with the API's words."""
        selector = f"spec.nodeName={self._node_name}" + (
            f",spec.driver={driver}" if driver else "")
        try:
            await self.client.request(
                "DELETE", kube.group_path("resource.k8s.io/v1", "resourceslices"),
                params={"fieldSelector": selector})
        except kube.NotFound:
            return
        except kube.KubeError as exc:
            raise errors.MessageError(str(exc)) from exc

    async def volume(self, name: str) -> apijson.JSON:
        """The PersistentVolume `name`, as `claim`."""
        return await self._read("persistentvolumes", "", name)

    async def csi_drivers_changed(self, drivers: Sequence[csidrivers.Driver]) -> None:
        """The registered CSI drivers changed: the Node's annotation and labels and the
        CSINode follow (once the Node is registered; kept until then)."""
        self._csi_drivers = list(drivers)
        if not self._node_registered or self.node.node is None:
            return
        try:
            await csinode.sync(self.client, node=self.node.node, drivers=self._csi_drivers)
        except kube.KubeError as exc:
            log.warning("cannot update the CSI drivers of node %s: %s", self._node_name, exc)

    async def csi_driver(self, name: str) -> apijson.JSON | None:
        """The CSIDriver `name`, None when there is none (CSI volumes' API reader)."""
        return await self._optional(kube.group_path(STORAGE, "csidrivers", "", name))

    async def volume_attachment(self, name: str) -> apijson.JSON | None:
        """The VolumeAttachment `name`, None when there is none."""
        return await self._optional(kube.group_path(STORAGE, "volumeattachments", "", name))

    async def patch_claim_status(self, namespace: str, name: str,
                                 patch: apijson.JSON) -> None:
        """A merge patch of the claim's status (a node expansion done)."""
        path = kube.core_path("persistentvolumeclaims", namespace, name) + "/status"
        try:
            await self.client.request("PATCH", path, body=patch,
                                      content_type="application/merge-patch+json")
        except kube.KubeError as exc:
            raise errors.MessageError(str(exc)) from exc

    async def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """A Secret's data, decoded (a CSI PV's stage or publish secret, which the Node
        authorizer lets the node read through the PV of its pod)."""
        found = await self._read("secrets", namespace, name)
        data = apijson.obj(found.get("data"))
        return {str(k): base64.b64decode(str(v)).decode(errors="replace")
                for k, v in data.items()}

    async def _optional(self, path: str) -> apijson.JSON | None:
        try:
            return await self.client.request("GET", path)
        except kube.NotFound:
            return None
        except kube.KubeError as exc:
            raise errors.MessageError(str(exc)) from exc

    async def _read(self, plural: str, namespace: str, name: str) -> apijson.JSON:
        # Read each time, as the kubelet's populator GETs them (the Node authorizer lets a
        # node read the claims and volumes of its pods only: no watch of them all).
        try:
            return await self._get_of_pod(kube.core_path(plural, namespace, name))
        except kube.NotFound as exc:
            raise errors.MessageError(f'{plural} "{name}" not found') from exc
        except kube.KubeError as exc:
            raise errors.MessageError(str(exc)) from exc

    async def _get_of_pod(self, path: str) -> apijson.JSON:
        """GET an object a pod of this node names. The Node authorizer allows it once its
        graph, which an informer feeds, has the pod: a refusal in its "no relationship"
        words is asked again (`ClusterSettings.lag_retry`); raises `kube.KubeError`."""
        s = self.settings
        for attempt in range(s.lag_retries + 1):
            try:
                return await self.client.request("GET", path)
            except kube.KubeError as exc:
                if attempt == s.lag_retries or exc.status != 403 or _GRAPH_LAG not in str(exc):
                    raise
                log.info("GET %s refused before the Node authorizer's graph has the pod, "
                         "asking again: %s", path, exc)
                await asyncio.sleep(s.lag_retry * 2 ** attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def runtime_handler(self, runtime_class: str) -> str:
        """The CRI handler of the RuntimeClass named `runtime_class` (the kubelet's
        LookupRuntimeHandler); raises runtime.RuntimeClassError with the API's words (none of
        that name, or the API out of reach)."""
        try:
            found = await self.client.get_runtime_class(runtime_class)
        except kube.KubeError as exc:
            raise runtime.RuntimeClassError(str(exc)) from exc
        return str(found.get("handler") or "")

    async def objects_fetched(self, keys: set[tuple[str, str, str]]) -> None:
        """Until the watched ConfigMaps and Secrets of `keys` were listed once (bounded by
        `request_timeout`): a missing one is then absent, not "not read yet"."""
        if self.objects is not None:
            await self.objects.fetched(keys, within=self.settings.request_timeout)

    def set_readers(
        self, readers: Mapping[pods.PodUID, AbstractSet[objectwatches.ObjectKey]]
    ) -> None:
        """The complete map pod UID → ConfigMaps/Secrets it reads (the kubelet's RegisterPod
        and UnregisterPod): each object is watched while at least one pod reads it."""
        self._readers = dict(readers)
        self._apply_readers()

    def _apply_readers(self) -> None:
        """As the kubelet's UnregisterPod on the pod's removal from the API (not when its
        worker is done): a pod gone from the API reads nothing."""
        if self.objects is not None:
            self.objects.set_readers({uid: keys for uid, keys in self._readers.items()
                                      if uid not in self._api_removed})

    def set_static_pods(self, desired: Mapping[pods.PodUID, pods.Pod]) -> None:
        """The complete set of static pods to run; their mirror pods follow."""
        self._static_pods = {uid: p for uid, p in desired.items() if p.is_static}
        if self.mirrors is not None:
            self.mirrors.set_static_pods(self._static_pods)

    def static_pod_started(self, pod: pods.Pod) -> None:
        """The pod worker of static pod `pod` started it: its mirror pod follows."""
        if self.mirrors is not None:
            self.mirrors.pod_started(pod)

    def pod_gone(self, uid: pods.PodUID) -> None:
        """The worker of `uid` is done. A pod deleted in the API is now deleted for good; a
        static pod that left the manifests loses its mirror pod."""
        if self.tokens is not None:
            self.tokens.forget_pod(uid)  # its service account tokens are of no more use
        if self.mirrors is not None:
            self.mirrors.pod_gone(uid)
        self._api_removed.discard(uid)
        self.status_sync.done(uid)
        obj = self.source.api_object(uid)
        if obj is None:
            self.status_sync.forget(uid)  # a static pod (an API pod's was forgotten already)
            return
        if not obj.get("metadata", {}).get("deletionTimestamp"):
            return
        if uid in self._deleting:
            return
        self._deleting.add(uid)
        meta = obj["metadata"]
        self._group.spawn(f"pod-delete:{meta.get('namespace')}/{meta.get('name')}",
                          self._delete(uid, meta["namespace"], meta["name"]))

    async def _delete(self, uid: pods.PodUID, namespace: str, name: str) -> None:
        s = self.settings
        retry = backoff.Backoff(s.delete_retry, s.delete_retry_max)
        try:
            if not await self._terminal_in_api(uid, namespace, name, retry):
                return  # the pod left the API meanwhile
            retry.reset()
            while True:
                try:
                    await self.client.delete_pod(namespace, name, uid=uid, grace=0)
                    log.info("deleted pod %s/%s (%s) from the API", namespace, name, uid)
                    return
                except (kube.NotFound, kube.Conflict):
                    return  # gone already, or replaced by a new pod of the same name
                except kube.KubeError as exc:
                    delay = retry.next_delay()
                    log.warning("cannot delete pod %s/%s, retrying in %.1fs: %s", namespace,
                                name, delay, exc)
                    await asyncio.sleep(delay)
        finally:
            self._deleting.discard(uid)

    async def _terminal_in_api(self, uid: pods.PodUID, namespace: str, name: str,
                               retry: backoff.Backoff) -> bool:
        """Wait until the API has the pod's terminal phase (True) or the pod is gone from it
        (False). The last status (containers terminated, condition False, a terminal phase)
        goes first: as the kubelet 1.27+ (canBeDeleted), a pod is never deleted before the
        API has it Succeeded or Failed; the status sync retries a failed PATCH meanwhile."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.delete_status_wait):
                    await self.status_sync.wait_in_sync(uid)
            if self.source.api_object(uid) is None:
                return False
            phase = self.status_sync.api_phase(uid)
            if phase in statuspatch.TERMINAL_PHASES:
                return True
            delay = retry.next_delay()
            log.warning("not deleting pod %s/%s yet: its phase in the API is %s, not terminal; "
                        "checking again in %.1fs", namespace, name, phase, delay)
            await asyncio.sleep(delay)

    def _removed(self, uids: set[pods.PodUID]) -> None:
        """Pods left the API (deleted for good): no status, token or object read for them
        any more, though their workers may still be finishing (`pod_gone` ends that)."""
        for uid in uids:
            self.status_sync.removed(uid)
            if self.tokens is not None:
                self.tokens.forget_pod(uid)
        self._api_removed |= {uid for uid in uids if uid in self._readers}
        self._apply_readers()

    # -- views ----------------------------------------------------------------------------------

    def api_pod(self, uid: pods.PodUID) -> apijson.Obj | None:
        return self.source.api_object(uid)

    def health(self) -> list[health.HealthCheck]:
        reflector = self.source.reflector
        return [
            health.HealthCheck("api-watch", reflector.last_error is None,
                               reflector.last_error or ""),
            health.HealthCheck("node-lease", self.lease.last_error is None,
                               self.lease.last_error or ""),
        ]
