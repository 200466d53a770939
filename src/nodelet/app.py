"""Wiring: builds the agent from settings and runs it until told to stop.

Start order matters: the checkpoint is restored before anything publishes a status (so a
restarted agent keeps its lastTransitionTimes); the runtime is listed before any pod worker
starts (so existing sandboxes are adopted, never duplicated); the manifest directory is read
once before orphans are judged (so a pod is not killed just because its file was not read yet).

Stopping the agent stops its loops only: containerd and the pods keep running, and the next
agent for the same data dir adopts them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nodelet import settings as settings_mod
from nodelet.adapters import checkpoint as checkpoint_mod
from nodelet.adapters import containerd, host, hostdirs, http_server, instancelock, node_server
from nodelet.adapters.cri import client as cri
from nodelet.adapters.cri import events as cri_events
from nodelet.adapters.events import client as events_client
from nodelet.adapters.podresourcesapi import server as podresourcesserver
from nodelet.helpers import backoff, clocks, errors, tasks
from nodelet.model.core import (
    admission,
    apijson,
    eviction,
    health,
    nodeips,
    nodes,
    pods,
    preemption,
    qoscgroups,
    reads,
    resources,
    runtime,
    security,
    status,
    summary,
)
from nodelet.model.core import events as ev
from nodelet.model.core import runtimeevents as rev
from nodelet.model.reports import histograms as hg
from nodelet.services.cluster import tokens
from nodelet.services.devices import devicemanager, dra, podresourceslister
from nodelet.services.nodehealth import containergc, imagegc, logrotation
from nodelet.services.nodehealth import eviction as evicting
from nodelet.services.nodehealth import qoscgroups as qos_service
from nodelet.services.pleg import relisting, runtimeevents
from nodelet.services.plugins import csidrivers, registration
from nodelet.services.podwork import csivolumes, probing, syncing, volumes, workers
from nodelet.services.serving import metrics, nodeserving, preflight, probemetrics
from nodelet.services.sources import manifestwatching, sources
from nodelet.services.status import checkpointing, recording, statuses

if TYPE_CHECKING:
    # Cluster mode (the API client, CSRs, leases, mirror pods, status sync...) and the live
    # progress lines (rich) are imported where they start, only when configured: a standalone
    # agent without a terminal never runs them, and every module imported stays in the
    # daemon's memory for its whole life (issue 26).
    from nodelet.adapters import kube
    from nodelet.services.cluster import cluster
    from nodelet.services.serving import progress

log = logging.getLogger(__name__)


class Agent:
    """The node agent; also the read-only view the HTTP API serves."""

    def __init__(
        self, settings: settings_mod.Settings, *, console: progress.Console | None = None
    ) -> None:
        self.settings = settings
        # The terminal for live progress lines (None: no progress display, logs only).
        self._console = console
        self._progress: progress.ProgressService | None = None
        self._group = tasks.TaskGroup()
        self._containerd: containerd.EmbeddedContainerd | None = None
        self._client: cri.RuntimeClient | None = None
        self._events_client: events_client.EventsClient | None = None
        self._cri_events: cri_events.CriEventsClient | None = None
        self.runtime_events: runtimeevents.RuntimeEvents | None = None
        self._checkpoint: checkpointing.CheckpointWriter | None = None
        self._server: http_server.HttpServer | None = None
        self._node_server: node_server.NodeServer | None = None
        self._node_stats: nodeserving.NodeServing | None = None
        self._source: sources.ManifestSource | None = None
        self._source_task: tasks.Supervised | None = None
        self._objects: Mapping[tuple[str, str, str], Any] = {}
        self._static_pods: dict[pods.PodUID, pods.Pod] = {}
        # What each worker's pod reads (cached per Pod value), for cluster mode's watches.
        self._reads: dict[pods.PodUID, tuple[pods.Pod, frozenset[tuple[str, str, str]]]] = {}
        self._api_pods: dict[pods.PodUID, pods.Pod] = {}
        self.cluster: cluster.ClusterMode | None = None
        # Device plugins (`_start_pod_work`).
        self.device_manager: devicemanager.DeviceManager | None = None
        self.dra: dra.DraManager | None = None
        self.pod_resources: podresourceslister.PodResourcesService | None = None
        self._pod_resources_server: podresourcesserver.PodResourcesServer | None = None
        # The CSI drivers registered through the plugin registry (`_start_pod_work`).
        self.csi_drivers = csidrivers.CsiDrivers(
            call_timeout=settings.plugins.csi_call_timeout, on_change=self._csi_drivers_changed)
        self._stopped = False
        self._sources_synced = False
        self._orphan_checks: set[pods.PodUID] = set()
        self._checked = preflight.Checked(token=None)
        self._lock: instancelock.InstanceLock | None = None
        self.metrics = metrics.Metrics(termination_sli=settings.gates.pod_termination_sli)

    # -- life cycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start everything; raises preflight.StartupError, before anything is started, for a
        setting that cannot work. Whatever else fails the start (cluster.ClusterError: a denied
        CSR, an API server out of reach) stops what had started before it is raised: no loop,
        server or connection outlives a failed start."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        """The jobs in the order they need each other: status before pod work (which
        publishes), pod work before the sources (which feed it), the node server before the
        cluster (the Node advertises its port), node health after orphans are judged."""
        s = self.settings
        await self._prepare_host()
        if s.server.healthz_port:  # as early as the kubelet's: it answers `ok` alone
            self._group.spawn("healthz", http_server.HealthzServer().run(
                s.server.healthz_host, s.server.healthz_port))
        await self._start_status()
        self._start_progress()
        self._client = await self._connect_runtime()
        self._host_ip = self._host_ips[0]
        self.node_spec = self._node_spec()
        await self._start_pod_work()
        await self._start_source()
        await self._start_node_server()  # before joining: the Node advertises its port
        await self._join_cluster()
        self._terminate_orphans()
        self._start_node_health()  # after the orphans: the container GC judges "gone" too
        self._start_runtime_events()  # after the orphans: its wakes may judge orphans
        self._group.spawn("relist", self.relister.run(self._relist_period))
        await self._start_server()
        log.info("nodelet ready: node %s, runtime %s, %d pods", s.node_name,
                 self.runtime_endpoint, len(self.workers.uids()))

    async def _prepare_host(self) -> None:
        """Settings that cannot work stop the start here (preflight.StartupError, and the
        node's IPs); then the data dir made root's only and locked to this agent
        (adapters.instancelock: one agent per data dir), and the open-file limit."""
        self._checked = preflight.check(self.settings)
        self._host_ips = await asyncio.to_thread(self._node_ips)
        await asyncio.to_thread(self._secure_places)
        try:  # before anything acts on the data dir's containerd, sandboxes or checkpoint
            self._lock = instancelock.InstanceLock.acquire(self.settings.data_dir)
        except instancelock.LockHeld as exc:
            raise preflight.StartupError(str(exc)) from exc
        before, limit = host.raise_open_file_limit()
        if limit != before:
            log.info("open-file limit raised from %d to %d (the hard limit)", before, limit)
        if (adj := self.settings.node.oom_score_adj) is not None:
            try:  # before containerd starts, which inherits it
                host.set_own_oom_score_adj(adj)
            except OSError as exc:  # the kubelet logs this too and goes on
                log.warning("could not set nodelet's oom_score_adj to %d: %s", adj, exc)

    async def _start_status(self) -> None:
        """The status job: the checkpoint, the status manager and the event recorder, restored
        from it, and the metrics that read both."""
        s = self.settings
        # Written on its own thread, retried until written; a corrupt file is replaced.
        self._checkpoint = await checkpointing.CheckpointWriter.open(
            s.data_dir / checkpoint_mod.FILENAME, settings=s.checkpoint,
            observer=self.metrics.observe_checkpoint_write)
        await asyncio.to_thread(self._secure_checkpoint)
        self._checkpoint.start(self._group)
        self.statuses = statuses.StatusManager(checkpoint=self._checkpoint, clock=clocks.utc_now)
        self.statuses.restore()
        self.recorder = recording.EventRecorder(
            checkpoint=self._checkpoint, node_name=s.node_name, clock=clocks.utc_now,
            max_events=s.max_events,
        )
        self.recorder.restore()
        self.statuses.subscribe(self.metrics.observe_status)
        self.recorder.subscribe(self.metrics.observe_event)

    async def _start_pod_work(self) -> None:
        """Pod work and what a sync works with: the relister, volumes, probes, the admitted
        pods with their QoS levels and eviction's pressure, the syncer and its workers; the
        runtime's pods are relisted before any worker starts, so existing sandboxes are
        adopted."""
        assert self._client is not None
        s = self.settings
        # The kubelet's active pods: the syncer keeps them, the QoS levels and eviction follow.
        self.admitted = admission.Admitted()
        self.qos = self._qos_cgroups()
        self.relister = relisting.Relister(client=self._client, on_change=self._runtime_changed)
        self.metrics.watch_runtime(self.relister.pod)
        # DRA drivers prepare the pods' ResourceClaims; a pod's claims stay prepared while
        # it is active as the device manager counts it.
        self.dra = dra.DraManager(
            state_dir=s.data_dir, claims=_ClusterClaims(self),
            active=lambda: {pod.uid for pod in self.admitted.all()} | self.workers.unfinished(),
            ready=lambda: self._sources_synced, call_timeout=s.plugins.dra_call_timeout,
            health=dra.HealthOptions(enabled=s.gates.resource_health_status,
                                     messages=s.gates.resource_health_status_message,
                                     on_change=self._device_health_changed))
        await self.dra.start()
        self._group.spawn("dra-reconcile", self.dra.run())
        # CSI and DRA drivers register through the plugin registry.
        self._group.spawn("plugin-watcher", registration.PluginWatcher(
            directory=s.plugins_registry_dir,
            handlers={registration.CSI_PLUGIN: self.csi_drivers, dra.DRA_PLUGIN: self.dra},
            rescan=s.plugins.rescan_period, call_timeout=s.plugins.registration_timeout).run())
        # Device plugins register on kubelet.sock; the syncer admits and starts with them.
        self.device_manager = devicemanager.DeviceManager(
            directory=s.device_plugins_dir, settings=s.devices, group=self._group,
            # The kubelet's active pods: a pod being terminated, or not synced yet after a
            # restart, keeps its devices (the workers exist by the time anything is admitted).
            pod_view=devicemanager.PodView(
                active=lambda: {p.uid for p in self.admitted.all()} | self.workers.unfinished(),
                ready=lambda: self._sources_synced, running=self._container_running),
            # The kubelet syncs the pods whose devices changed health only with its gate.
            on_health=self._device_health_changed if s.gates.resource_health_status
            else lambda uid: None)
        await self.device_manager.start()
        # The pod resources API: which devices each active pod's containers hold.
        self.pod_resources = podresourceslister.PodResourcesService(
            active=self._active_pods, known=lambda: [pod for pod, _ in self.pods()],
            devices=self.device_manager, claims=self.dra)
        self._pod_resources_server = podresourcesserver.PodResourcesServer(
            s.pod_resources_dir / "kubelet.sock", self.pod_resources)
        await self._pod_resources_server.start()
        log.info("pod resources API on %s", self._pod_resources_server.socket)
        self.volumes = volumes.VolumeManager(
            root=s.data_dir / "pods", node_name=s.node_name,
            csi=csivolumes.CsiVolumes(drivers=self.csi_drivers, api=_ClusterClaims(self),
                                      plugins_dir=s.data_dir / "plugins",
                                      pods_dir=s.data_dir / "pods", node_name=s.node_name),
            sources=volumes.ApiSources(lookup=self._lookup_object, synced=self._object_listed,
                                       tokens=self._service_account_token,
                                       claims=_ClusterClaims(self)),
            node_labels=lambda: nodes.node_labels(self.node_spec),
        )
        await self.volumes.share_root()  # before any pod mounts a volume with propagation
        self.probe_metrics = probemetrics.ProbeMetrics()
        self.probes = probing.ProbeManager(
            client=self._client, group=self._group, recorder=self.recorder, on_change=self._wake,
            on_attempt=self.probe_metrics.observe,
        )
        # Built before the syncer, whose admission weighs its pressure; it runs with the
        # node's other health jobs (`_start_node_health`).
        self.eviction = self._eviction_manager()
        self.syncer = syncing.PodSyncer(
            runtime=syncing.Runtime(client=self._client, relister=self.relister,
                                    events_live=self._events_live),
            managers=syncing.Managers(statuses=self.statuses, volumes=self.volumes,
                                      probes=self.probes, recorder=self.recorder,
                                      devices=self.device_manager, claims=self.dra),
            settings=s, clock=clocks.utc_now, observer=self.metrics,
            cluster=syncing.ClusterLinks(lookup=self._lookup_object),
            health=syncing.NodeHealth(
                qos=self.qos, pressure=self.eviction.conditions, admitted=self.admitted,
                preempt=lambda pod: self.workers.fail(pod.uid, preemption.REASON,
                                                      preemption.MESSAGE)),
            node=await self._node_facts(),
        )
        await self.qos.start(self._group)
        self.workers = workers.PodWorkers(
            syncer=self.syncer, recorder=self.recorder, group=self._group, sync=s.sync,
            on_gone=self._gone, on_start=self._started,
            deletion_clock=clocks.utc_now if s.gates.pod_termination_sli else None,
        )
        await self.relister.relist()

    async def _node_facts(self) -> syncing.NodeFacts:
        """What a pod's sync knows of this node, the runtime's status and version included."""
        assert self._client is not None
        s = self.settings
        runtime_status = await self._client.status()
        return syncing.NodeFacts(
            host_ip=self._host_ip, host_ips=self._host_ips,
            memory_capacity=self.node_spec.machine.memory_bytes,
            logs_root=s.data_dir / "logs", pods_root=s.data_dir / "pods",
            admission=self._admission_facts(runtime_status, await self._client.version()),
            runtime=runtime_status,
            security=security.Options(seccomp_default=s.security.seccomp_default,
                                      seccomp_profile_root=s.seccomp_profile_root))

    def _start_node_health(self) -> None:
        """The node's own upkeep: the container GC, log rotation, the image GC and eviction."""
        assert self._client is not None
        s = self.settings
        self.container_gc = self._container_gc()
        self._group.spawn("container-gc", self.container_gc.run())
        self.log_rotator = logrotation.LogRotator(
            client=self._client, settings=s.logs, running=self._running_containers,
            clock=clocks.utc_now)
        self._group.spawn("log-rotation", self.log_rotator.run())
        # Never removes the sandbox image nodelet's embedded containerd runs pods with.
        records = self.syncer.pull_records
        self.image_gc = imagegc.ImageGC(
            client=self._client, recorder=self.recorder, settings=s.gc,
            protected=(settings_mod.PAUSE_IMAGE,), clock=clocks.utc_now,
            on_removed=records.forget if records is not None else None)
        self._group.spawn("image-gc", self.image_gc.run())
        self._group.spawn("eviction", self.eviction.run())
        self._group.spawn("volume-stats", self._measure_volumes())

    def _secure_places(self) -> None:
        """The data dir and its pods, logs and keys: root's only (adapters.hostdirs), fixed
        at every start; a directory above it that another user could swap is warned about."""
        data_dir = self.settings.data_dir
        try:
            changes = hostdirs.secure_data_dir(data_dir)
        except (hostdirs.HostDirError, OSError) as exc:
            raise preflight.StartupError(f"--data-dir {data_dir}: {exc}") from exc
        for change in changes:
            log.warning("%s was mode %04o, owner %d:%d: made %04o and nodelet's", change.path,
                        change.mode, change.uid, change.gid, change.made)
        for place in hostdirs.exposed_ancestors(data_dir):
            log.warning("the data dir %s is under %s: that user could replace it", data_dir,
                        place)

    def _secure_checkpoint(self) -> None:
        """The checkpoint and SQLite's files next to it: 0600 (SQLite makes them with the
        umask's mode, its WAL and shared-memory files with the database's)."""
        db = self.settings.data_dir / checkpoint_mod.FILENAME
        hostdirs.secure_files((db, db.with_name(db.name + "-wal"),
                               db.with_name(db.name + "-shm")))

    def _start_runtime_events(self) -> None:
        """Subscribe to containerd's events on the CRI socket (SyncSettings.runtime_events)."""
        assert self._client is not None
        if not self.settings.sync.runtime_events:
            return
        self._events_client = events_client.EventsClient.open(self.runtime_endpoint)
        self._cri_events = cri_events.CriEventsClient.open(self.runtime_endpoint)
        source = runtimeevents.FirstSupported(("cri", self._cri_events),
                                              ("containerd", self._events_client))
        self.runtime_events = runtimeevents.RuntimeEvents(
            source=source, client=self._client, relister=self.relister,
            group=self._group, settings=self.settings.sync, on_change=self._runtime_changed,
            on_oom=self._runtime_oom)
        self._group.spawn("runtime-events", self.runtime_events.run())

    def _events_live(self) -> bool:
        return self.runtime_events is not None and self.runtime_events.live

    def _relist_period(self) -> float:
        """Long while runtime events arrive, polling without them."""
        if self.runtime_events is not None:
            return self.runtime_events.period()
        return self.settings.sync.polling_relist_period

    def _node_ips(self) -> tuple[str, ...]:
        """The node's InternalIP(s): --node-ip checked against the host's interfaces, or
        chosen as the kubelet chooses (model/core/nodeips.py). Blocking."""
        s = self.settings
        on_host = host.interface_addresses()
        try:
            nodeips.check(s.node_ips, on_host)
            return nodeips.internal_ips(
                s.node_ips, node_name=s.node_name, resolved=host.resolve(s.node_name),
                default_route=host.default_route_ip(ipv6=nodeips.prefers_ipv6(s.node_ips)),
                host_addresses=on_host)
        except nodeips.NodeIPError as exc:
            raise preflight.StartupError(f"--node-ip: {exc}") from exc

    def _node_spec(self) -> nodes.NodeSpec:
        """This node: the machine's capacity, less the reservations of `settings.node`."""
        s = self.settings
        spec = nodes.NodeSpec(name=s.node_name, host_ip=self._host_ip, host_ips=self._host_ips,
                              machine=host.machine_facts(storage=s.data_dir),
                              max_pods=s.node.max_pods, pod_cidrs=s.runtime.pod_cidrs,
                              labels=dict(s.node.labels), taints=s.node.register_with_taints)
        held = resources.reserved(
            (*s.node.system_reserved, *s.node.kube_reserved),
            eviction.allocatable_holds(self._checked.thresholds, nodes.capacity(spec)))
        return dataclasses.replace(spec, reserved=held)

    def _qos_cgroups(self) -> qos_service.QosCgroups:
        """kubepods with node allocatable, its QoS levels following the admitted pods
        (started before any pod cgroup is made)."""
        node = self.settings.node
        return qos_service.QosCgroups(
            cgroup_root=node.cgroup_root, period=node.qos_update_period,
            node=qoscgroups.node_allocatable(nodes.capacity(self.node_spec),
                                             (*node.system_reserved, *node.kube_reserved)),
            active=self.admitted.all)

    def _running_containers(self) -> list[runtime.ContainerInfo]:
        return [c for uid in self.relister.uids() for c in self.relister.pod(uid).containers
                if c.state is runtime.ContainerState.RUNNING]

    def _admission_facts(self, status: runtime.RuntimeStatus,
                         version: runtime.VersionInfo) -> admission.Node:
        spec = self.node_spec
        return admission.Node(
            # hostUsers: false, as far as the default runtime handler can.
            user_namespaces=status.handler("").user_namespaces,
            image_volumes=admission.mounts_images(version),
            supplemental_groups_strict=status.supplemental_groups_policy,
            stop_signals_gate=self.settings.gates.container_stop_signals,
            stop_signals=admission.applies_stop_signals(version),
            labels=nodes.node_labels(spec),
            name=self.settings.node_name,
            allocatable=nodes.allocatable(spec),
            allowed_unsafe_sysctls=self.settings.security.allowed_unsafe_sysctls,
            apparmor_enabled=host.apparmor_enabled(),
            # Only the embedded containerd is known to apply SELinux labels (enable_selinux).
            selinux_enabled=host.selinux_enabled() and self.settings.runtime.endpoint is None,
        )

    async def _connect_runtime(self) -> cri.RuntimeClient:
        """The runtime's client: the embedded containerd started (or adopted), or the one at
        --runtime-endpoint; one that cannot be started or reached stops the start with
        preflight.StartupError (the runtime's own words)."""
        runtime = self.settings.runtime
        try:
            if runtime.endpoint is None:
                self._containerd = containerd.EmbeddedContainerd(self.settings.data_dir,
                                                                 runtime)
                await self._containerd.start()
                endpoint = self._containerd.endpoint
            else:
                endpoint = runtime.endpoint
            client = await cri.RuntimeClient.connect(
                endpoint, timeouts=runtime.timeouts, observer=self.metrics.observe_operation)
        except containerd.ContainerdError as exc:
            raise preflight.StartupError(f"the embedded containerd: {exc}") from exc
        except cri.CriError as exc:
            flag = "--runtime-endpoint" if runtime.endpoint is not None else "the runtime"
            raise preflight.StartupError(f"{flag}: {exc}") from exc
        if self._containerd is not None:
            await self._containerd.wait_ready(client)
        await _check_cgroup_driver(client, endpoint)
        self.runtime_endpoint = endpoint
        return client

    async def _join_cluster(self) -> None:
        """With --kubeconfig: register the Node, keep its Lease, run the pods bound to it."""
        s = self.settings
        if s.cluster is None:
            return
        assert self._client is not None
        from nodelet.services.cluster import (  # cluster mode only: see the imports above
            cluster,
            nodestatus,
        )

        self.cluster = cluster.ClusterMode(
            settings=s.cluster, statuses=self.statuses, recorder=self.recorder,
            clock=clocks.utc_now,
            node=cluster.NodeIdentity(name=s.node_name, host_ip=self._host_ip,
                                      pod_cidrs=s.runtime.pod_cidrs, spec=self.node_spec),
            views=nodestatus.NodeViews(runtime=self._client, pressure=self.eviction.conditions,
                                       images=self._client.list_images,
                                       volumes_in_use=self.volumes.volumes_in_use,
                                       extended=self._device_resources,
                                       reset_extended=lambda: self.device_manager is not None
                                       and self.device_manager.new_node),
            listeners=cluster.Listeners(on_pods=self._on_api_pods, on_objects=self._wake_readers,
                                        on_token_due=lambda uid: self.workers.wake(uid)),
        )
        await self.cluster.csi_drivers_changed(self.csi_drivers.drivers())  # registered so far
        self.syncer.join_cluster(self.cluster)
        self.cluster.set_static_pods(self._static_pods)  # read before: their mirror pods
        self._track_readers()  # and the objects they read
        await self.cluster.start()  # lists the pods once (→ on_pods) before returning
        for uid, pod in self._static_pods.items():  # their workers started before
            if self.workers.started(uid):
                self.cluster.static_pod_started(pod)

    async def _start_source(self) -> None:
        s = self.settings
        if s.manifests_dir is None:
            return
        source = self._source = sources.ManifestSource(
            directory=s.manifests_dir, node_name=s.node_name, on_update=self._on_source,
            clock=clocks.utc_now, limits=s.manifest_limits,
        )
        await source.scan()
        watcher = manifestwatching.ManifestWatcher(
            source=source, directory=s.manifests_dir, settings=s)
        # Supervised: if reading manifests ever crashes, it starts again (and /healthz fails
        # meanwhile) instead of leaving later manifest changes unseen.
        self._source_task = self._group.supervise(
            "manifest-source", watcher.run,
            backoff=backoff.Backoff(s.manifest_restart_backoff, s.manifest_restart_backoff_max))

    def _terminate_orphans(self) -> None:
        """After every source was read once: terminate what the runtime holds and no source
        wants, and forget checkpointed statuses of pods that are gone."""
        self._sources_synced = True
        for uid in self.relister.uids() - self.workers.uids():
            self._terminate_orphan(uid)
        for uid in self.statuses.restored_uids() - self.workers.uids():
            self.statuses.forget(uid)

    def _terminate_orphan(self, uid: pods.PodUID) -> None:
        state = self.relister.pod(uid)
        self.workers.terminate_orphan(pods.Pod(
            uid=uid, name=state.name, namespace=state.namespace,
            spec=pods.PodSpec(containers=(), termination_grace_period_seconds=int(
                self.settings.sync.default_grace_period)),
        ))

    def _eviction_manager(self) -> evicting.EvictionManager:
        assert self._client is not None
        s = self.settings
        return evicting.EvictionManager(
            settings=s.eviction, thresholds=self._checked.thresholds,
            node=evicting.Node(
                stats=self._client, memory_capacity=self.node_spec.machine.memory_bytes,
                paths=evicting.Paths(data_dir=s.data_dir, logs_root=s.data_dir / "logs",
                                     volumes_dir=self.volumes.volumes_dir)),
            control=evicting.PodControl(
                active=self.admitted.all,
                evict=lambda pod, message, grace: self.workers.fail(
                    pod.uid, eviction.REASON, message, grace=grace)),
            recorder=self.recorder,
            reclaimers=evicting.Reclaimers(
                containers=lambda: self.container_gc.collect(evict_terminated=True),
                images=lambda: self.image_gc.delete_unused()))

    def _container_gc(self) -> containergc.ContainerGC:
        assert self._client is not None
        return containergc.ContainerGC(
            client=self._client, settings=self.settings.gc,
            logs_root=self.settings.data_dir / "logs", removable=self._pod_content_removable,
            terminated=self.statuses.terminal, clock=time.time,
            links_dir=self.settings.logs.links_dir,
            cgroup_root=self.settings.node.cgroup_root)

    def _pod_content_removable(self, uid: pods.PodUID) -> bool:
        """For the container GC: no source wants the pod and no worker is terminating it
        (the worker removes its own pod's things), judged only after every source was read
        once — never because a manifest was not read yet."""
        return self._sources_synced and uid not in self.workers.uids()

    def _start_progress(self) -> None:
        if self._console is not None:
            from nodelet.services.serving import (
                progress,  # with a terminal only: see the imports above
            )

            self._progress = progress.ProgressService(
                statuses=self.statuses, recorder=self.recorder, console=self._console,
                clock=clocks.utc_now)
            self._progress.start(self._group)

    async def _start_server(self) -> None:
        server_settings = self.settings.server
        if not server_settings.enabled:
            log.info("the read-only HTTP API is off (--read-only-port 0)")
            return
        # The node's stats as the node server has them: the kubelet's read-only port serves
        # /stats/summary and the resource and probe metrics too, without credentials.
        self._server = http_server.HttpServer(
            self, feature_gates=settings_mod.feature_gate_items(self.settings.gates),
            stats=self._node_stats)
        await self._server.start(server_settings.host, server_settings.port,
                                 self._checked.token)

    async def _start_node_server(self) -> None:
        """The node server (port 10250): logs, exec, attach, port-forward, stats."""
        assert self._client is not None
        s = self.settings
        config = await asyncio.to_thread(nodeserving.server_config, s,
                                         host_ips=list(self._host_ips),
                                         api_client=self._api_client,
                                         access_client=self._access_api_client)
        backend = nodeserving.NodeServing(
            view=self, client=self._client, relister=self.relister,
            facts=nodeserving.Facts(node_name=s.node_name, data_dir=s.data_dir,
                                    cgroup_root=s.node.cgroup_root))
        self._node_stats = backend
        self._node_server = node_server.NodeServer(backend, config)
        try:
            await self._node_server.start()
        except node_server.NodeServerError as exc:
            raise preflight.StartupError(str(exc)) from exc
        self.node_spec = dataclasses.replace(self.node_spec,
                                             kubelet_port=self._node_server.port)

    def _api_client(self) -> kube.KubeClient | None:
        """Cluster mode's API client, for the node server's TokenReviews and
        SubjectAccessReviews (None before the cluster is joined)."""
        return self.cluster.api_client() if self.cluster is not None else None

    def _access_api_client(self) -> kube.KubeClient | None:
        """Cluster mode's client for the node server's SubjectAccessReviews."""
        return self.cluster.access_api_client() if self.cluster is not None else None

    @property
    def node_server_port(self) -> int:
        assert self._node_server is not None
        return self._node_server.port

    async def stop(self) -> None:
        """Stop the agent's loops; the runtime and the pods keep running. Once: a second call
        (after a failed start stopped it) does nothing."""
        if self._stopped:
            return
        self._stopped = True
        # The servers first: a request in flight may still need the API clients (a token or
        # access review) and the runtime client.
        if self._node_server is not None:
            await self._node_server.stop()
        if self._server is not None:
            await self._server.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        await self._group.close()
        await self.csi_drivers.close()  # after the workers: no call is in flight
        if self.dra is not None:
            await self.dra.close()
        if self._pod_resources_server is not None:
            await self._pod_resources_server.stop()
        if self.device_manager is not None:  # likewise
            await self.device_manager.stop()
        if self._progress is not None:
            self._progress.stop()
        if self._client is not None:
            await self._client.close()
        if self._events_client is not None:
            await self._events_client.close()
        if self._cri_events is not None:
            await self._cri_events.close()
        if self._containerd is not None:
            await self._containerd.detach()
        if self._checkpoint is not None:  # after the loops: flushes what they wrote last
            await self._checkpoint.close()
        if self._lock is not None:  # last: the next agent or a reset may act from here on
            self._lock.release()

    @property
    def server_port(self) -> int:
        assert self._server is not None
        return self._server.port

    # -- callbacks ----------------------------------------------------------------------------

    def _active_pods(self) -> list[pods.Pod]:
        """The kubelet's active pods: the admitted ones, and those whose containers may still
        run though they are not (being terminated, or not synced yet since a restart)."""
        admitted = self.admitted.all()
        running = self.workers.unfinished() - {pod.uid for pod in admitted}
        return admitted + [pod for pod, _ in self.pods() if pod.uid in running]

    def _device_resources(self) -> tuple[Mapping[str, int], Mapping[str, int]]:
        """The device plugins' resources for the Node: (capacity, allocatable)."""
        if self.device_manager is None:
            return {}, {}
        found = self.device_manager.node_resources()
        return found.capacity, found.allocatable

    def _container_running(self, uid: str, name: str) -> bool:
        """Whether the runtime, as last relisted, has the pod's container `name` running."""
        return any(c.name == name and c.state is runtime.ContainerState.RUNNING
                   for c in self.relister.pod(pods.PodUID(uid)).containers)

    def _device_health_changed(self, uid: str) -> None:
        """A device the pod holds changed health: its worker syncs, so that its status says
        so at once (the kubelet's SyncLoop on its container manager's updates). The device
        manager starts before the workers: a pod not synced yet shows it at its first sync."""
        workers_ = getattr(self, "workers", None)
        if workers_ is not None:
            workers_.wake(pods.PodUID(uid))

    def _runtime_changed(self, uid: pods.PodUID) -> None:
        self.metrics.runtime_changed(uid)  # before the wake: it starts the status update clock
        self._wake(uid)

    def _runtime_oom(self, uid: pods.PodUID, container: str) -> None:
        """containerd saw the OOM killer act in a container of the pod: a Warning event (the
        container's status gets reason OOMKilled from CRI when it exits)."""
        pod = self.workers.pod(uid)
        if pod is not None:
            self.recorder.record(pod, "Warning", ev.OOM_KILLING, rev.oom_message(container),
                                 container=container)

    def _wake(self, uid: pods.PodUID) -> None:
        """The runtime state of a pod changed: wake its worker; a pod no source wants (its
        sandbox appeared after the pod was gone) is an orphan and is terminated."""
        if uid in self.workers.uids():
            self.workers.wake(uid)
        elif self._sources_synced and uid not in self._orphan_checks:
            self._orphan_checks.add(uid)
            self._group.spawn(f"orphan-check:{uid[:8]}", self._check_orphan(uid))

    async def _check_orphan(self, uid: pods.PodUID) -> None:
        """The relist's list may predate a worker's last removals: ask the runtime again
        before calling the pod an orphan."""
        try:
            state = await self.relister.refresh_pod(uid)
            if (state.sandboxes or state.containers) and uid not in self.workers.uids():
                self._terminate_orphan(uid)
        except cri.CriError as exc:  # the next relist that sees the pod asks again
            log.warning("cannot check possibly orphaned pod %s: %s", uid, exc)
        finally:
            self._orphan_checks.discard(uid)

    def _on_source(self, snapshot: sources.SourceSnapshot) -> None:
        previous, self._objects = self._objects, snapshot.objects
        self._static_pods = dict(snapshot.pods)
        self.workers.update({**self._static_pods, **self._api_pods})
        self._track_readers()
        if self.cluster is not None:
            self.cluster.set_static_pods(self._static_pods)  # their mirror pods follow
        self._wake_readers({key for key in set(previous) | set(self._objects)
                            if previous.get(key) != self._objects.get(key)})

    def _on_api_pods(self, desired: Mapping[pods.PodUID, pods.Pod]) -> None:
        self._api_pods = dict(desired)
        self.workers.update({**self._static_pods, **self._api_pods})
        self._track_readers()

    def _track_readers(self) -> None:
        """Cluster mode watches the ConfigMaps and Secrets the pods read, from when a pod
        arrives until its worker is done (the kubelet's RegisterPod / UnregisterPod)."""
        if self.cluster is None:
            return
        held = {uid: self.workers.pod(uid) for uid in self.workers.uids()}
        reading = {}
        for uid, pod in (held | self._static_pods | self._api_pods).items():
            cached = self._reads.get(uid)
            if pod is not None:
                reading[uid] = cached if cached is not None and cached[0] is pod else (
                    pod, frozenset(reads.referenced_objects(pod)))
        self._reads = reading
        self.cluster.set_readers({uid: keys for uid, (_, keys) in reading.items()})

    def _wake_readers(self, changed: set[tuple[str, str, str]]) -> None:
        """Pods waiting for a ConfigMap or Secret (of a volume, env vars, or a pull secret) go on
        as soon as it appears, and updates reach mounted files without waiting for the periodic
        resync."""
        if not changed:
            return
        for uid in self.workers.uids():
            pod = self.workers.pod(uid)
            if pod is not None and reads.referenced_objects(pod) & changed:
                self.workers.wake(uid)

    def _object_listed(self, kind: str, namespace: str, name: str) -> bool:
        return self.cluster is None or self.cluster.object_listed(kind, namespace, name)

    async def _service_account_token(self, request: tokens.Request) -> tokens.Token:
        """Projected tokens come from the API server; without one there are none."""
        if self.cluster is None:
            raise tokens.FetchError("failed to fetch token: nodelet runs without an API "
                                    "server (no --kubeconfig)")
        return await self.cluster.service_account_token(request)

    def _lookup_object(self, kind: str, namespace: str, name: str) -> Any:
        if self.cluster is not None:
            found = self.cluster.lookup_object(kind, namespace, name)
            if found is not None:
                return found
        return self._objects.get((kind, namespace, name))

    async def _measure_volumes(self) -> None:
        """The claims' volumes measured every volume_stats_period, for the metrics."""
        while True:
            measured = []
            for uid in sorted(self.workers.uids()):
                pod = self.workers.pod(uid)
                for volume in await self.volumes.volume_stats(pod, directories=False) \
                        if pod else ():
                    if volume.claim is not None:
                        measured.append((*volume.claim, volume.fs))
            self.metrics.set_volume_stats(measured)
            await asyncio.sleep(self.settings.node_server.volume_stats_period)

    async def volume_stats(self, pod: pods.Pod) -> list[summary.VolumeUsage]:
        """The figures of the pod's volumes (the node server's /stats/summary)."""
        return await self.volumes.volume_stats(pod)

    async def _csi_drivers_changed(self) -> None:
        if self.cluster is not None:
            await self.cluster.csi_drivers_changed(self.csi_drivers.drivers())

    def _started(self, pod: pods.Pod) -> None:
        """A pod's worker started it: a static pod's mirror pod is made now, as the kubelet
        makes it in the pod's own sync (an edited manifest's new version waits for the old
        one to terminate, and the old mirror pod stays until then)."""
        if self.cluster is not None:
            self.cluster.static_pod_started(pod)

    def _gone(self, uid: pods.PodUID) -> None:
        self.statuses.forget(uid)
        self.probe_metrics.forget(uid)
        if self.cluster is not None:
            self.cluster.pod_gone(uid)  # the final DELETE (grace 0, UID precondition)
            self._track_readers()  # its ConfigMaps and Secrets are no longer watched for it
        self.metrics.forget(uid)

    # -- the view served over HTTP -----------------------------------------------------------

    def pods(self) -> list[tuple[pods.Pod, status.PodStatus | None]]:
        listed = []
        for uid in sorted(self.workers.uids()):
            pod = self.workers.pod(uid)
            if pod is not None:
                listed.append((pod, self.statuses.get(uid)))
        return listed

    def events(self, pod: str | None = None, namespace: str | None = None) -> list[ev.Event]:
        return self.recorder.events(pod_name=pod, namespace=namespace)

    def manifests(self) -> list[health.ManifestReport]:
        return list(self._source.snapshot.reports) if self._source else []

    def _source_health(self) -> list[health.HealthCheck]:
        task = self._source_task
        if task is None:
            return []
        return [health.HealthCheck("manifest-source", task.up, task.error or "")]

    def health(self) -> list[health.HealthCheck]:
        period = self._relist_period()
        last = self.relister.last_success
        fresh = last is not None and time.monotonic() - last < max(10.0, 5 * period)
        return [
            health.HealthCheck("runtime", fresh, self.relister.last_error
                               or ("" if fresh else "no successful relist recently")),
            health.HealthCheck("pod-workers", self.workers.alive(), ""),
            *((self.runtime_events.health(),) if self.runtime_events is not None else ()),
            *self._source_health(),
            *((self._checkpoint.health(),) if self._checkpoint is not None else ()),
            *(self.cluster.health() if self.cluster is not None else ()),
        ]

    def metrics_text(self) -> tuple[bytes, str]:
        text, content_type = self.metrics.render()
        if self.pod_resources is not None:
            text += self.pod_resources.metrics_text().encode()
        if self.dra is not None:
            text += self.dra.metrics_text().encode()
        return text, content_type

    def probe_metrics_text(self) -> bytes:
        """`/metrics/probes` of the node server."""
        return self.probe_metrics.render()

    def sandbox_metrics(self) -> hg.SandboxMetrics:
        return self.metrics.sandbox_metrics()


async def run(
    settings: settings_mod.Settings, stop: asyncio.Event, *, console: progress.Console | None = None
) -> None:
    """Run the agent until `stop` is set; with `console`, draw live progress lines on it."""
    agent = Agent(settings, console=console)
    try:
        await agent.start()
        await stop.wait()
    finally:
        await agent.stop()
    kept = "containerd and the pods keep running" if settings.runtime.endpoint is None \
        else "the pods keep running"
    log.info("nodelet stopped; %s: the next `nodelet run` adopts them, `nodelet reset "
             "--data-dir %s` removes them", kept, settings.data_dir)


async def _check_cgroup_driver(client: cri.RuntimeClient, endpoint: str) -> None:
    """As the 1.37 kubelet asks the runtime its cgroup driver (KEP-4033): nodelet lays out
    pod and QoS cgroups as cgroupfs paths, so a runtime on the systemd driver would put
    containers elsewhere than the limits nodelet sets. A runtime that does not say (containerd
    1.6) is taken to use cgroupfs, its default."""
    driver = await client.cgroup_driver()
    if driver not in (None, "cgroupfs"):
        await client.close()
        raise preflight.StartupError(
            f"the runtime at {endpoint} uses the {driver} cgroup driver; nodelet manages pod "
            "cgroups with cgroupfs: configure the runtime for cgroupfs (containerd: "
            "SystemdCgroup = false in its runc options)")


class _ClusterClaims:
    """The volume manager's claim reader: the API through cluster mode, once it runs."""

    def __init__(self, app: Agent) -> None:
        self._app = app

    async def claim(self, namespace: str, name: str) -> apijson.JSON:
        return await self._cluster().claim(namespace, name)

    async def volume(self, name: str) -> apijson.JSON:
        return await self._cluster().volume(name)

    async def resource_claim(self, namespace: str, name: str) -> apijson.JSON:
        return await self._cluster().resource_claim(namespace, name)

    async def delete_resource_slices(self, driver: str = "") -> None:
        if self._app.settings.cluster is None:  # standalone: no ResourceSlices to delete
            return
        await self._cluster().delete_resource_slices(driver)

    async def csi_driver(self, name: str) -> apijson.JSON | None:
        return await self._cluster().csi_driver(name)

    async def volume_attachment(self, name: str) -> apijson.JSON | None:
        return await self._cluster().volume_attachment(name)

    async def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        return await self._cluster().secret_data(namespace, name)

    async def patch_claim_status(self, namespace: str, name: str,
                                 patch: apijson.JSON) -> None:
        await self._cluster().patch_claim_status(namespace, name, patch)

    def _cluster(self) -> cluster.ClusterMode:
        if self._app.cluster is None:
            raise errors.MessageError("nodelet runs without an API server (no --kubeconfig)")
        return self._app.cluster
