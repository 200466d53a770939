"""The runtime manager: one sync (or termination) of one pod against the CRI runtime.

`PodSyncer.sync` follows the kubelet's SyncPod: publish the status as the runtime shows it;
decide (purely, `model.core.sandboxes`) whether a new sandbox is needed; if so kill what is left
of the old one and run a new one; publish again at once, so PodReadyToStartContainers turns
True before any image is pulled or container started; then bring init and app containers to
what the spec asks. Only the pod's worker calls it, so calls for one pod never overlap.

Failures that should be retried raise `SyncError`; the worker retries with jittered back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from nodelet import settings as settings_mod
from nodelet.adapters import cgroups, host, loglinks, pullrecordfiles
from nodelet.adapters.cri import client as cri
from nodelet.helpers import adaptivelimit, backoff
from nodelet.model.core import (
    admission,
    crilogs,
    downward,
    etchosts,
    eviction,
    extraconditions,
    generation,
    objectrefs,
    observers,
    podactions,
    pods,
    preemption,
    pullrecords,
    reads,
    resize,
    restartall,
    runtime,
    sandboxes,
    security,
    specs,
    status,
)
from nodelet.model.core import events as ev
from nodelet.model.core import volumes as vol
from nodelet.services.devices import devicemanager, dra
from nodelet.services.nodehealth import containergc, qoscgroups
from nodelet.services.pleg import relisting
from nodelet.services.podwork import (
    containers,
    hooks,
    images,
    killing,
    names,
    probing,
    pullmanager,
    resizing,
    userns,
    volumes,
)
from nodelet.services.serving import logs
from nodelet.services.status import recording, statuses

log = logging.getLogger(__name__)

# How many times a termination kills what it finds running before it fails and is retried.
_KILL_ROUNDS = 3

Mounts = Mapping[str, tuple[runtime.Mount, ...]]


# Preemption: how often the preempted pods are looked at while the critical pod waits for
# them to stop, and how long beyond their grace periods it waits at most (seconds).
PREEMPTION_POLL = 0.2
PREEMPTION_MARGIN = 10.0


def _all_stopped(state: runtime.PodRuntime) -> bool:
    return all(c.state is runtime.ContainerState.EXITED for c in state.containers) and all(
        s.state is not runtime.SandboxState.READY for s in state.sandboxes)


class SyncError(Exception):
    """A sync step failed; the pod is retried after the sync back-off."""


class NetworkNotReady(SyncError):
    """The runtime's network is not ready; the pod is retried soon (kubelet: after 1 s)."""


@dataclass
class _Restart:
    backoff: backoff.Backoff
    # The container definition it backs off (specs.definition_hash): a new one starts afresh,
    # as the kubelet keys its back-off by the container's hash.
    definition: str = ""

    def state(self) -> podactions.RestartState:
        return podactions.RestartState(self.backoff.current)


@dataclass
class PodWork:
    """What a pod worker remembers between syncs (none of it is in the runtime)."""

    last_sandbox_error: str | None = None
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)
    restarts: dict[str, _Restart] = field(default_factory=dict)
    # Monotonic time of the last RunPodSandbox return (for the detection-latency measure).
    sandbox_returned_at: float | None = None
    # Set once the pod failed for good (activeDeadlineSeconds passed, or refused at admission):
    # (reason, message); the pod is Failed and stays so.
    failure: tuple[str, str] | None = None
    # Passed admission (checked before the pod's first sync only).
    admitted: bool = False
    # Seconds the containers get when the pod is stopped for `failure` (eviction), instead of
    # the pod's own grace period.
    grace_override: float | None = None
    # The last sync ended normally, with the relister's copy of the pod read after its own
    # changes: the next one may start from that copy while runtime events arrive.
    state_known: bool = False
    # Sandboxes this worker stopped (StopPodSandbox also releases a dead sandbox's network).
    stopped_sandboxes: set[runtime.SandboxID] = field(default_factory=set)
    # The volumes as the last setup left them (the nodelet.dev/VolumesReady condition): all
    # set up once, and the FailedMount message while one is not.
    volumes_ready: bool = False
    volume_error: str | None = None
    # The pod's user namespace (hostUsers: false), once known.
    userns: runtime.UserNamespace | None = None
    # The pod's own wake-ups, by rule (POSIX times of the syncer's clock): every rule that
    # depends on time schedules one, so nothing waits for the periodic resync (docs/timing.md).
    timers: dict[str, float] = field(default_factory=dict)
    # The resources allocated to the pod and what its cgroups have (in-place resize).
    resize: resizing.ResizeWork = field(default_factory=resizing.ResizeWork)
    # The CRI runtime handler of the pod's RuntimeClass, once looked up in the cluster's API
    # (immutable both in the pod and in the class).
    runtime_handler: str | None = None
    # The pod came back (the same UID) while it was being terminated (the kubelet's
    # restartRequested): it starts again after, so its exited containers and stopped
    # sandboxes stay, and its containers' restart counts go on from them.
    restart_requested: bool = False

    def wake_at(self, rule: str, at: float) -> None:
        """Sync the pod again at `at` for `rule` (the earlier of two times for one rule)."""
        self.timers[rule] = min(at, self.timers.get(rule, at))


@dataclass
class _Run:
    """One sync's container pass: what every container action reads, and the errors of the
    containers that failed to start."""

    pod: pods.Pod
    sandbox: runtime.SandboxInfo
    state: runtime.PodRuntime
    work: PodWork
    mounts: Mounts
    pod_ip: str
    errors: list[str] = field(default_factory=list)
    # The pod's image volumes, made present once, before the sync's first container start.
    image_volumes: containers.ImagePulls | None = None


@dataclass(frozen=True)
class NodeFacts:
    host_ip: str  # the primary node IP
    logs_root: Path
    # Per-pod state that is not a volume (termination-message files): <pods_root>/<uid>/.
    pods_root: Path
    admission: admission.Node = field(default_factory=lambda: admission.Node(labels={}))
    security: security.Options = field(default_factory=security.Options)
    # What the runtime's handlers can do (CRI Status; empty: the runtime does not say).
    runtime: runtime.RuntimeStatus = field(
        default_factory=lambda: runtime.RuntimeStatus(conditions=()))
    # Every node IP, the primary first (a dual-stack node's InternalIPs); empty: `host_ip`.
    host_ips: tuple[str, ...] = ()
    # The machine's memory in bytes (the containers' OOM score; 0: unknown).
    memory_capacity: int = 0

    @property
    def all_ips(self) -> tuple[str, ...]:
        return self.host_ips or ((self.host_ip,) if self.host_ip else ())


@dataclass(frozen=True)
class Runtime:
    """How a sync reads and changes the runtime: the CRI client, the relister's copy of the
    pods' runtime state, and whether the runtime's event stream is live (then that copy is
    current)."""

    client: cri.RuntimeClient
    relister: relisting.Relister
    events_live: Callable[[], bool] = lambda: False


@dataclass(frozen=True)
class Managers:
    """The pod's other managers a sync hands work to: status, volumes, probes, events."""

    statuses: statuses.StatusManager
    volumes: volumes.VolumeManager
    probes: probing.ProbeManager
    recorder: recording.EventRecorder
    # Device plugins' devices: allocated at admission, given at container start (None: none).
    devices: devicemanager.DeviceManager | None = None
    # DRA claims: prepared before the sandbox, their CDI devices given at container start,
    # unprepared once the containers stopped (None: no DRA manager).
    claims: dra.DraManager | None = None


@dataclass(frozen=True)
class ClusterLinks:
    """Where a sync finds API objects: `lookup` finds ConfigMaps and Secrets (volumes, env,
    pull secrets) among the cluster's and the standalone ones."""

    lookup: vol.Lookup | None = None


class ClusterView(Protocol):
    """What a joined cluster gives a pod's sync (`services.cluster.cluster.ClusterMode`)."""

    async def objects_fetched(self, keys: set[objectrefs.ObjectKey]) -> None:
        """Return once the objects of `keys` were listed once (or the wait timed out)."""

    @property
    def services(self) -> names.ServiceSource | None:
        """The Services for service links (None until cluster mode started)."""

    async def runtime_handler(self, runtime_class: str) -> str:
        """The CRI handler of the RuntimeClass `runtime_class`; raises
        runtime.RuntimeClassError with the API's words."""


@dataclass(frozen=True)
class NodeHealth:
    """The node's own jobs a sync works with: the QoS cgroup levels (None: not managed), the
    pressure conditions that are True (MemoryPressure...), which admission weighs, and the
    admitted pods, which the sync keeps and those jobs follow."""

    qos: qoscgroups.QosCgroups | None = None
    pressure: Callable[[], frozenset[str]] = frozenset
    admitted: admission.Admitted = field(default_factory=admission.Admitted)
    # Stops a pod preempted for a critical one: Failed with reason Preempting (the pod
    # workers' `fail`); False when it is terminating already.
    preempt: Callable[[pods.Pod], bool] = lambda pod: False


class PodSyncer:
    def __init__(
        self,
        *,
        runtime: Runtime,
        managers: Managers,
        settings: settings_mod.Settings,
        node: NodeFacts,
        clock: Callable[[], datetime],
        observer: observers.SyncObserver | None = None,
        cluster: ClusterLinks = ClusterLinks(),
        health: NodeHealth = NodeHealth(),
    ) -> None:
        client, recorder, lookup = runtime.client, managers.recorder, cluster.lookup
        # The cluster this node joined (standalone: none), told by `join_cluster`.
        self._cluster: ClusterView | None = None
        self._pressure = health.pressure
        self._preempt = health.preempt
        self._events_live = runtime.events_live
        self._static_pods_critical = settings.eviction.static_pods_critical
        self._client = client
        self._relister = runtime.relister
        self._statuses = managers.statuses
        self._volumes = managers.volumes
        self._probes = managers.probes
        self._devices = managers.devices
        self._claims = managers.claims
        self._recorder = recorder
        self._settings = settings
        self._node = node
        self._clock = clock
        self._observer = observer or observers.NoObserver()
        # The IP families the node serves (its pod CIDRs), for the per-family conditions.
        self._families = extraconditions.served_families(settings.runtime.pod_cidrs)
        # Pods admitted and not yet terminated, which admission weighs a new pod against.
        self._admitted = health.admitted
        # The QoS levels' shares follow `_admitted` (None: no QoS cgroups are managed).
        self._qos = health.qos
        # The runtime, not the agent, sets the pace: sandboxes created all at once each take
        # several times longer (measured: 0.26 s at 4 in flight, 2 s at 30 on 2 cores), and
        # how many it makes at its best depends on the machine.
        self.sandbox_slots = adaptivelimit.AdaptiveLimit(adaptivelimit.LimitSettings(
            initial=settings.sync.initial_parallel_sandboxes,
            minimum=settings.sync.min_parallel_sandboxes,
            maximum=settings.sync.max_parallel_sandboxes))
        self._dns = names.PodDNS(settings=settings.dns, recorder=recorder,
                                 node_ips=node.all_ips)
        self._userns = userns.UserNamespaces(node.pods_root)
        # Which credentials pulled each image (None: the feature gate is off); image GC
        # tells it what it removed.
        self.pull_records = _pull_records(settings, client, clock)
        # Pull secrets come from `lookup`, the volume manager's ConfigMap/Secret lookup.
        self._puller = images.ImagePuller(
            client=client, recorder=recorder, sync=settings.sync,
            lookup=lookup,
            node_config=settings.registry_config_file,
            pull_records=self.pull_records,
        )
        self._resizer = resizing.Resizer(
            client=client, recorder=recorder, node=lambda: self._node.admission,
            cgroup_parent=lambda pod: specs.pod_cgroup_parent(
                pod, self._settings.node.cgroup_root),
            memory_capacity=node.memory_capacity)
        self._containers = containers.ContainerRunner(
            client=client, recorder=recorder, puller=self._puller,
            hooks=hooks.HookRunner(client=client), lookup=lookup or vol.no_objects,
            services=self._services,
            devices=containers.DeviceSources(plugins=managers.devices, claims=managers.claims),
            node=containers.NodeContext(
                pods_root=node.pods_root, security=node.security,
                downward=_downward_node(settings.node_name, node),
                memory_capacity=node.memory_capacity, log_links=settings.logs.links_dir),
        )
        self._killer = killing.PodKiller(client=client, recorder=recorder,
                                         runner=self._containers, host_ip=node.host_ip,
                                         host_ips=node.all_ips)

    # -- status ---------------------------------------------------------------------------

    def publish(self, pod: pods.Pod, state: runtime.PodRuntime, work: PodWork, *,
                terminal: bool = False) -> None:
        """Generate the pod's status from the runtime's view and hand it to the status manager;
        `terminal`: the last status of a terminated pod (a terminal phase, see generation)."""
        if work.resize.allocation is not None:
            pod = resize.allocated_pod(pod, work.resize.allocation)
        generated = generation.generate_status(
            pod,
            sandboxes=state.sandboxes,
            containers=[self._containers.with_message(pod, c) for c in state.containers],
            old=self._statuses.last_known(pod.uid),
            last_sandbox_error=work.last_sandbox_error,
            waiting=work.waiting,
            host_ip=self._node.host_ip,
            host_ips=self._node.all_ips,
            now=self._clock(),
            gates=self._settings.gates,
            ready=self._probes.readiness(pod.uid),
            started=self._probes.started(pod.uid),
            failure=work.failure,
            terminal=terminal,
            extra=extraconditions.Facts(families=self._families,
                                        volumes_ready=work.volumes_ready,
                                        volume_error=work.volume_error),
            resized=self._resizer.view(pod, state, work.resize),
            rro_supported=self._rro_supported(pod, work),
            device_health=self._device_health(pod),
        )
        self._statuses.set_status(pod, generated)

    def _device_health(self, pod: pods.Pod) -> dict[str, tuple[status.ResourceStatus, ...]]:
        """Each container's allocatedResourcesStatus: its device plugins' devices, then its
        DRA claims' (the kubelet's UpdateAllocatedResourcesStatus, in that order)."""
        found: dict[str, tuple[status.ResourceStatus, ...]] = {}
        parts = [] if self._devices is None else [self._devices.resource_statuses(pod.uid)]
        if self._claims is not None and pod.spec.resource_claims:
            parts.append(self._claims.resource_statuses(pod))
        for part in parts:
            for name, entries in part.items():
                found[name] = found.get(name, ()) + entries
        return found

    def _rro_supported(self, pod: pods.Pod, work: PodWork) -> bool:
        """Whether the pod's runtime handler, where known already, makes mounts recursively
        read-only (a RuntimeClass not yet looked up in the cluster: not known, so no)."""
        handler = self._known_handler(pod, work)
        return handler is not None and \
            self._node.runtime.handler(handler).recursive_read_only_mounts

    # -- sync -----------------------------------------------------------------------------

    async def sync(self, pod: pods.Pod, work: PodWork) -> float | None:
        """One sync; returns seconds until the pod wants another one (None: only on events)."""
        state = await self._current_state(pod, work)
        await self._admit(pod, work)
        pod = self._allocated(pod, work)
        self._check_deadline(pod, work)
        self.publish(pod, state, work)
        action = podactions.pod_action(pod, state, terminal=self._terminal(pod),
                                       network_problem=self._relister.network_problem)
        if isinstance(action, podactions.StopPod):
            await self._stop_terminal(pod, state, work)
            return None
        if isinstance(action, podactions.WaitForNetwork):
            self._recorder.record(pod, "Warning", "NetworkNotReady", action.problem)
            raise NetworkNotReady(action.problem)
        await self._objects_ready(pod)
        await self._user_namespace(pod, work)
        self._puller.check_pull_secrets(pod)
        # Volumes come first, as in the kubelet: a missing ConfigMap keeps the sandbox from
        # being created, so PodReadyToStartContainers stays False and says why.
        mounts = await self._prepare_volumes(pod, state, work)
        if isinstance(action, podactions.CreateSandbox):
            state = await self._replace_sandbox(pod, state, action.change, work)
            # Downward API files may carry the pod IP, which only the new sandbox knows.
            mounts = await self._prepare_volumes(pod, state, work)
        if restartall.resetting(pod, state.containers, self._statuses.last_known(pod.uid)):
            # The condition True is published (above); the next sync, finding every
            # container removed, publishes them waiting and starts them again.
            await self._reset_containers(pod, state, work)
            self.publish(pod, await self._relister.refresh_pod(pod.uid), work)
            return 0.0
        if not self._terminal(pod) and await self._resizer.actuate(pod, state, work.resize):
            state = await self._relister.refresh_pod(pod.uid)  # stopped to be restarted
        before = state.containers
        collected = await self._collect_dead(pod, state)  # before starts: policy's dead + 1
        errors, tried = await self._sync_containers(pod, state, work, mounts)
        acted = bool(tried)
        if acted or collected or isinstance(action, podactions.CreateSandbox):
            # Read again only what this sync changed: an idle resync costs no more CRI calls.
            state = await self._relister.refresh_pod(pod.uid)
        self.publish(pod, state, work)
        # Probes start as soon as the container is seen running — also one this sync
        # started, which no later event reports (the kubelet's probe workers are waiting).
        self._probe_running(pod, state, work)
        if errors and not self._terminal(pod):
            raise SyncError("; ".join(errors))
        if errors:  # a start that failed for good ended the pod: stopped at the next sync
            log.info("pod %s is done after %s", pod.full_name, "; ".join(errors))
        if self._terminal(pod) or podactions.newly_exited(before, state.containers) \
                or (acted and self._more_to_start(pod, state, work, tried)):
            # This sync's own refresh saw the change, so the relist will not report it:
            # act on it now rather than at the next resync.
            return 0.0
        work.state_known = True
        return None

    async def _current_state(self, pod: pods.Pod, work: PodWork) -> runtime.PodRuntime:
        """What the runtime holds for the pod. While the runtime's events arrive, the
        relister's copy is current (every event refreshes its pod before waking the worker,
        this worker read the pod again after its own last change, and the copy never goes
        back to an older read), so a pod whose last sync ended normally is not asked for
        again — as the kubelet's pod workers read the PLEG cache. Otherwise (first sync, a
        failed one, no events) the runtime is asked, and so it is whenever the copy says the
        pod needs a new sandbox: a sandbox is created, and the old ones killed, only on the
        runtime's own answer (a READY sandbox the copy lacked would get a second beside it)."""
        trusted, work.state_known = work.state_known and self._events_live(), False
        if trusted:
            state = self._relister.pod(pod.uid)
            if self._terminal(pod) or not sandboxes.sandbox_change(pod, state.sandboxes).needed:
                return state
        return await self._relister.refresh_pod(pod.uid)

    async def _user_namespace(self, pod: pods.Pod, work: PodWork) -> None:
        """The pod's own ID range (hostUsers: false), before its sandbox and containers."""
        if pod.spec.host_users is not False or work.userns is not None:
            return
        try:
            work.userns = await self._userns.of(pod)
        except (userns.UserNamespaceError, OSError) as exc:
            message = f"failed to create pod sandbox: user namespace: {exc}"
            work.last_sandbox_error = message
            self._recorder.record(pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                                  f"Failed to create pod sandbox: user namespace: {exc}")
            raise SyncError(f"user namespace of {pod.full_name}: {exc}") from exc

    def join_cluster(self, view: ClusterView) -> None:
        """From now on pods wait for the API objects they read, and get service links."""
        self._cluster = view

    async def _objects_ready(self, pod: pods.Pod) -> None:
        if self._cluster is not None:
            await self._cluster.objects_fetched(reads.referenced_objects(pod))

    async def _handler(self, pod: pods.Pod, work: PodWork) -> str:
        """The CRI runtime handler of the pod's RuntimeClass, looked up once per pod: in a
        cluster the class's `handler` (the kubelet's LookupRuntimeHandler); standalone, where
        there are no RuntimeClass objects, the name itself. Raises runtime.RuntimeClassError."""
        known = self._known_handler(pod, work)
        if known is not None:
            return known
        assert self._cluster is not None  # only a cluster's RuntimeClass is looked up
        work.runtime_handler = await self._cluster.runtime_handler(pod.spec.runtime_class_name)
        return work.runtime_handler

    def _known_handler(self, pod: pods.Pod, work: PodWork) -> str | None:
        """The pod's runtime handler without asking the API: the default handler (""), a
        standalone node's class name, or the one looked up for it; None: not looked up yet."""
        name = pod.spec.runtime_class_name
        if not name or self._cluster is None:
            return name
        return work.runtime_handler

    def _services(self) -> names.ServiceSource | None:
        return self._cluster.services if self._cluster is not None else None

    def _terminal(self, pod: pods.Pod) -> bool:
        """In a terminal phase: by its status here, or (after a restart) by the API's."""
        return pod.terminal_in_api or self._statuses.terminal(pod.uid)

    async def _admit(self, pod: pods.Pod, work: PodWork) -> None:
        """A pod this node cannot run as its spec says is Failed before anything is created
        (the kubelet's admit handlers). As in the kubelet, a pod is admitted once in the
        agent's life: a running pod is not judged again when it changes, e.g. when `kubectl
        debug` adds an ephemeral container; after a restart every pod not finished is judged
        again (its devices may be gone with a node reboot). Resources and host ports are
        judged beside the pods admitted before it and not yet terminated."""
        if work.admitted or work.failure is not None:
            return
        if pod.terminal_in_api:  # finished: it holds nothing of the node's
            work.admitted = True
            return
        old = self._statuses.last_known(pod.uid)
        finished = old is not None and old.phase in ("Succeeded", "Failed")
        rejection = None
        # A Failed pod stays so, with its reason; one nodelet cannot run (refused fields, or
        # an API pod it cannot read) is judged whatever its last status says.
        if not finished or pod.refused:
            rejection = await self._judge(pod)
        if rejection is None:
            work.admitted = True
            if not finished:
                self._admitted.put(pod)
                self._qos_changed()
            return
        work.failure = (rejection.reason, rejection.status_message)
        self._recorder.record(pod, "Warning", rejection.reason, rejection.message)
        log.warning("pod %s (%s) rejected: %s: %s", pod.full_name, pod.uid, rejection.reason,
                    rejection.message)

    async def _judge(self, pod: pods.Pod) -> admission.Rejection | None:
        """The admit handlers' refusal, or None: the eviction manager's first, as in the
        kubelet, then the node's; a critical pod that does not fit makes room by preempting
        others (the kubelet's CriticalPodAdmissionHandler) or is refused if none can."""
        others = self._admitted.others(pod.uid)
        critical = eviction.is_critical(pod, static_pods_critical=self._static_pods_critical)
        node = self._admission_node()
        # The kubelet's order: its resource allocation (device plugins) after the first
        # handlers, before the predicates.
        rejection = eviction.admission_rejection(
            pod, self._pressure(), static_pods_critical=self._static_pods_critical,
        ) or admission.first_handlers(pod, node) or (
            await self._devices.admit(pod) if self._devices is not None else None
        ) or admission.predicates(pod, node, others, critical=critical)
        allocatable = node.allocatable
        if rejection is not None or not critical or allocatable is None:
            return rejection
        needed = preemption.requirements(pod, others, allocatable)
        if not needed:
            return None
        try:
            victims = preemption.choose(pod, others, needed,
                                        static_pods_critical=self._static_pods_critical)
        except preemption.NoPreemption as exc:
            return preemption.refusal(exc)
        for victim in victims:
            log.warning("preempting pod %s (%s) to admit critical pod %s: needs %s",
                        victim.full_name, victim.uid, pod.full_name,
                        preemption.describe(needed))
            self._recorder.record(victim, "Warning", preemption.REASON, preemption.MESSAGE)
            self._preempt(victim)
        await self._stopped(victims)
        for victim in victims:
            self._admitted.remove(victim.uid)  # its resources are the critical pod's now
        self._qos_changed()
        return None

    def _admission_node(self) -> admission.Node:
        """The node as admission weighs it: its allocatable with the device plugins'
        resources (none below what containers hold)."""
        node = self._node.admission
        if self._devices is None or node.allocatable is None:
            return node
        return dataclasses.replace(
            node, allocatable=self._devices.admission_allocatable(dict(node.allocatable)))

    async def _stopped(self, victims: Sequence[pods.Pod]) -> None:
        """Wait until the preempted pods' containers and sandboxes are stopped, as the
        kubelet's preemption returns only once they are killed (their own workers stop them,
        within their grace periods); given up on after those and PREEMPTION_MARGIN seconds,
        with a warning (the kubelet, too, admits the pod when a kill fails)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(podactions.grace_period(v) for v in victims) \
            + PREEMPTION_MARGIN
        for victim in victims:
            while True:
                state = await self._relister.refresh_pod(victim.uid)
                if _all_stopped(state):
                    break
                if loop.time() > deadline:
                    log.warning("preempted pod %s (%s) still runs; admitting the critical pod",
                                victim.full_name, victim.uid)
                    break
                await asyncio.sleep(PREEMPTION_POLL)

    def _allocated(self, pod: pods.Pod, work: PodWork) -> pods.Pod:
        """The pod as this node allocated it, a resize admitted or left pending first
        (`resizing`); admission then weighs other pods against this allocation."""
        admitted = self._admitted.get(pod.uid)
        if admitted is None or self._terminal(pod):
            return pod
        pod = self._resizer.allocate(pod, work.resize, self._admitted.others(pod.uid))
        if resize.allocation(admitted) != resize.allocation(pod):
            self._admitted.put(pod)
            self._qos_changed()
        return pod

    def _check_deadline(self, pod: pods.Pod, work: PodWork) -> None:
        """activeDeadlineSeconds, counted from the pod's start time (now, for the first sync,
        whose status sets it): a wake-up at the deadline, or the pod fails once it passed."""
        current = self._statuses.last_known(pod.uid)
        started = current.start_time if current is not None else None
        now = self._now()
        left = podactions.deadline_left(
            pod, started.timestamp() if started is not None else now, now)
        if left is None or work.failure is not None:
            return
        if left > 0:
            work.wake_at("activeDeadlineSeconds", now + left)
            return
        work.failure = (generation.DEADLINE_EXCEEDED, generation.DEADLINE_MESSAGE)
        self._recorder.record(pod, "Normal", "DeadlineExceeded",
                              "Pod was active on the node longer than the specified deadline")

    def wake_in(self, work: PodWork) -> float | None:
        """Seconds until the pod's next own wake-up (None: none is due). A wake-up that is due
        is given once (0) and then dropped: the sync it causes schedules what it still needs."""
        now = self._now()
        due = [rule for rule, at in work.timers.items() if at <= now]
        for rule in due:
            del work.timers[rule]
        if due:
            return 0.0
        return min(work.timers.values()) - now if work.timers else None

    def _now(self) -> float:
        return self._clock().timestamp()

    async def _stop_terminal(
        self, pod: pods.Pod, state: runtime.PodRuntime, work: PodWork
    ) -> None:
        """A pod in a terminal phase keeps nothing running: its sandboxes are stopped too, so
        the condition turns False and the pod's IP is released (as the kubelet does). A sandbox
        whose pause process died is NOTREADY but keeps its network until it is stopped."""
        if self._admitted.remove(pod.uid):  # its resources are free again
            self._qos_changed()
        if podactions.something_runs(state, stopped=work.stopped_sandboxes):
            self._probes.forget_pod(pod.uid)
            grace = work.grace_override if work.grace_override is not None \
                else podactions.grace_period(pod)
            await self._killer.kill(pod, state, grace=grace,
                                     stopped=work.stopped_sandboxes)
            self.publish(pod, await self._relister.refresh_pod(pod.uid), work)
            # As the kubelet tears down a terminated pod's volumes: an emptyDir's space is
            # given back (an evicted pod's above all) while the pod object stays.
            try:
                await self._volumes.cleanup(pod.uid)
            except volumes.VolumeError as exc:
                raise SyncError(f"volumes of terminated pod {pod.full_name}: {exc}") from exc

    async def _prepare_volumes(
        self, pod: pods.Pod, state: runtime.PodRuntime, work: PodWork
    ) -> Mounts:
        ips = generation.pod_ips(pod, state.sandboxes, self._node.host_ip,
                                   self._node.all_ips)
        try:
            mounts = await self._volumes.prepare(
                pod, pod_ip=ips[0] if ips else "", host_ip=self._node.host_ip
            )
        except volumes.VolumeError as exc:
            self._observer.volume_failed(pod, exc.event_message)
            work.last_sandbox_error = work.volume_error = exc.event_message
            self._recorder.record(pod, "Warning", ev.FAILED_MOUNT, exc.event_message)
            self.publish(pod, state, work)
            raise SyncError(f"volumes of {pod.full_name}: {exc}") from exc
        if work.last_sandbox_error and work.last_sandbox_error.startswith("MountVolume"):
            work.last_sandbox_error = None
        work.volumes_ready, work.volume_error = True, None
        return mounts

    async def _replace_sandbox(
        self,
        pod: pods.Pod,
        state: runtime.PodRuntime,
        change: sandboxes.SandboxChange,
        work: PodWork,
    ) -> runtime.PodRuntime:
        if change.sandbox_to_kill is not None:
            self._recorder.record(
                pod, "Normal", ev.SANDBOX_CHANGED,
                "Pod sandbox changed, it will be killed and re-created.",
            )
        if state.sandboxes:
            await self._killer.kill(pod, state, grace=podactions.grace_period(pod),
                                     stopped=work.stopped_sandboxes)
            work.restarts.clear()
            work.waiting.clear()
        fresh_pod = not state.sandboxes and not state.containers
        await self._prepare_claims(pod)
        # The slot covers the sandbox's preparation, its creation and reading it back until
        # the condition is published: a burst's first sandboxes are not prepared behind
        # every other pod's preparation (with the QoS update shared, 100 pods' first
        # RunPodSandbox came 0.45 s -> 0.12 s after their manifests), and the next creation
        # does not load the runtime while this one's status is read.
        async with self.sandbox_slots.hold():
            sandbox_id = await self._run_sandbox(pod, change.attempt, work)
            try:
                info = await self._client.pod_sandbox_status(sandbox_id)
            except cri.CriError as exc:
                self._recorder.record(
                    pod, "Warning", ev.FAILED_POD_SANDBOX_STATUS,
                    f"Unable to get pod sandbox status: {exc}",
                )
                raise SyncError(f"pod sandbox status of {pod.full_name}: {exc}") from exc
            if fresh_pod:
                state = self._relister.note_sandbox(pod.uid, info)
            else:  # old sandboxes and containers were just stopped: read their states back
                state = await self._relister.refresh_pod(pod.uid)
            # The kubelet's OnPodSandboxReady: the condition turns True now, before pulls and
            # container starts, not at the end of this sync.
            self.publish(pod, state, work)
        self._observer.sandbox_ready(pod, work.sandbox_returned_at)
        return state

    async def _prepare_claims(self, pod: pods.Pod) -> None:
        """The pod's ResourceClaims prepared by their DRA drivers before its sandbox is made
        (the kubelet's PrepareDynamicResources); no sandbox until they are."""
        if self._claims is None or not pod.spec.resource_claims:
            return
        try:
            await self._claims.prepare(pod)
        except dra.PrepareError as exc:
            self._recorder.record(pod, "Warning", ev.FAILED_PREPARE_DYNAMIC_RESOURCES,
                                  f"Failed to prepare dynamic resources: {exc.message}")
            raise SyncError(f"pod {pod.full_name}: {exc.message}") from exc

    async def _run_sandbox(self, pod: pods.Pod, attempt: int, work: PodWork) -> runtime.SandboxID:
        config = await self._new_sandbox_config(pod, attempt, work)
        await asyncio.to_thread(Path(config.log_directory).mkdir, parents=True, exist_ok=True)
        await self._pod_cgroup(pod, config.cgroup_parent)
        self._resizer.pod_cgroup_written(pod, work.resize)
        self._observer.sandbox_starting(pod)
        started = time.monotonic()
        try:
            sandbox_id = await self._client.run_pod_sandbox(
                config, runtime_handler=await self._handler(pod, work))
        except cri.CriError as exc:
            self._observer.sandbox_failed(pod, str(exc), exc.code, time.monotonic() - started)
            work.last_sandbox_error = f"failed to create pod sandbox: {exc.detail}"
            self._recorder.record(
                pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                f"Failed to create pod sandbox: {exc.detail}",
            )
            state = await self._relister.refresh_pod(pod.uid)
            self.publish(pod, state, work)
            raise SyncError(f"create pod sandbox for {pod.full_name}: {exc.detail}") from exc
        work.sandbox_returned_at = time.monotonic()
        self._observer.sandbox_created(pod, work.sandbox_returned_at - started)
        work.last_sandbox_error = None
        log.info("created sandbox %s for pod %s (attempt %d)", sandbox_id, pod.full_name,
                 attempt)
        return sandbox_id

    async def _pod_cgroup(self, pod: pods.Pod, parent: str) -> None:
        """The pod-level cgroup with the pod's limits, before its sandbox (the kubelet's
        pod container manager), after its QoS level counted it (as the kubelet updates the
        QoS cgroups before making a pod's); a failure is logged and the pod runs with its
        containers' own limits."""
        if self._qos is not None:
            await self._qos.update()
        try:
            await asyncio.to_thread(cgroups.apply_pod_cgroup, parent, specs.pod_cgroup(pod))
        except OSError as exc:
            log.warning("pod cgroup %s of %s: %s", parent, pod.full_name, exc)

    def _qos_changed(self) -> None:
        if self._qos is not None:
            self._qos.changed()

    def _sandbox_config(self, pod: pods.Pod, attempt: int,
                        work: PodWork) -> runtime.SandboxConfig:
        """The config CreateContainer is given (it reads neither DNS nor the hostname)."""
        return specs.sandbox_config(
            pod, attempt=attempt, logs_root=self._node.logs_root,
            cgroup_parent=specs.pod_cgroup_parent(pod, self._settings.node.cgroup_root),
            user=work.userns,
        )

    async def _new_sandbox_config(self, pod: pods.Pod, attempt: int,
                                  work: PodWork) -> runtime.SandboxConfig:
        """RunPodSandbox's config, with the pod's DNS (`names`) and its FQDN hostname. An
        unreadable node resolv.conf, a too long FQDN or a RuntimeClass that cannot be read
        fails the sandbox, as the kubelet's generatePodSandboxConfig and createPodSandbox do."""
        try:
            await self._handler(pod, work)  # looked up before anything is made for it
            return specs.sandbox_config(
                pod, attempt=attempt, logs_root=self._node.logs_root,
                dns=await self._dns.config(pod),
                cgroup_parent=specs.pod_cgroup_parent(pod, self._settings.node.cgroup_root),
                cluster_domain=self._settings.dns.cluster_domain, user=work.userns)
        except (names.DNSError, specs.SandboxConfigError, runtime.RuntimeClassError) as exc:
            message = str(exc)
            work.last_sandbox_error = f"failed to create pod sandbox: {message}"
            self._recorder.record(pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX,
                                  f"Failed to create pod sandbox: {message}")
            self.publish(pod, await self._relister.refresh_pod(pod.uid), work)
            raise SyncError(f"sandbox config of {pod.full_name}: {message}") from exc

    async def _collect_dead(self, pod: pods.Pod, state: runtime.PodRuntime) -> bool:
        """The container GC's per-pod rule on this pod, in each sync before containers are
        started: a crash-looping container keeps only its newest dead instances (for
        lastState and `--previous` logs) between two collections, and sandboxes older than
        the newest go once empty. Failures only log: the collector tries again."""
        result = await containergc.collect_pod(self._client, state,
                                               containergc.policy(self._settings.gc),
                                               now=self._now(),
                                               links_dir=self._settings.logs.links_dir)
        if result.errors:
            log.warning("pod %s: dead containers or sandboxes left for the collector: %s",
                        pod.full_name, "; ".join(result.errors))
        return bool(result.containers_removed or result.sandboxes_removed or result.errors)

    async def _reset_containers(self, pod: pods.Pod, state: runtime.PodRuntime,
                                work: PodWork) -> None:
        """Restart all containers in place, the removing half (`restartall.reset_order`):
        stop each instance still running at once (no preStop, the minimum grace period, as
        the kubelet's override of 0) and remove every instance, keeping its log files (the
        next attempts count on from them) and the sandbox."""
        pod_ip = next(iter(generation.pod_ips(pod, state.sandboxes, self._node.host_ip,
                                              self._node.all_ips)), "")
        for removal in restartall.reset_order(pod, state.containers):
            name = removal.info.name
            self._probes.forget_container(pod.uid, name)
            work.waiting.pop(name, None)
            if removal.stop:
                self._recorder.record(pod, "Normal", ev.KILLING,
                                      restartall.KILL_MESSAGE.format(name=name), container=name)
                await self._containers.stop(pod, None, removal.info, pod_ip=pod_ip,
                                            grace=restartall.KILL_GRACE_SECONDS)
            with contextlib.suppress(cri.NotFound):  # the collector may have been first
                await self._client.remove_container(removal.info.id)

    # -- containers -----------------------------------------------------------------------

    async def _sync_containers(
        self, pod: pods.Pod, state: runtime.PodRuntime, work: PodWork, mounts: Mounts
    ) -> tuple[list[str], set[str]]:
        """Execute `podactions.container_actions`: returns the errors of containers that
        failed to start (their siblings are still started, as the kubelet does) and the
        containers it started or killed (the runtime changed). A container that must wait
        (CrashLoopBackOff, an image pull's back-off) schedules the pod's wake-up for then."""
        sandbox = state.sandboxes[0]
        facts = self._container_facts(pod, sandbox, work, state)
        run = _Run(pod, sandbox, state, work, mounts, sandbox.ip or self._node.host_ip)
        tried: set[str] = set()
        actions = podactions.container_actions(pod, state, facts)
        if podactions.completed_with_sidecars(actions):
            # The pod is done but for its sidecars: stop them (and the sandbox) as the
            # kubelet's KillPod does; the phase then follows from the exited containers.
            await self._killer.kill(pod, state, grace=podactions.grace_period(pod),
                                     stopped=work.stopped_sandboxes)
            return run.errors, {a.container.name for a in actions if a.kind == "init"}
        for action in actions:
            if isinstance(action, podactions.KillUnhealthy | podactions.Replace |
                          podactions.Start):
                tried.add(action.container.name)
            if isinstance(action, podactions.KillUnhealthy):
                action = await self._kill_unhealthy(run, action, facts)
            elif isinstance(action, podactions.Replace):
                action = await self._replace(run, action, facts)
            delay = await self._execute(run, action)
            if delay is not None:
                # A back-off's wait counts from the facts it was decided on; a start's (an
                # image's back-off) from its return, after a pull that may have taken long.
                since = facts.now if isinstance(action, podactions.BackOff) else self._now()
                work.wake_at(f"{type(action).__name__}:{action.container.name}",
                             since + delay)
        return run.errors, tried

    def _container_facts(self, pod: pods.Pod, sandbox: runtime.SandboxInfo,
                         work: PodWork, state: runtime.PodRuntime) -> podactions.ContainerFacts:
        return podactions.ContainerFacts(
            sandbox_id=sandbox.id, now=self._now(),
            liveness_failed=self._probes.liveness_failed(pod.uid),
            started=self._probes.started(pod.uid),
            restarts=_current_restarts(pod, work),
            attempt_floor=self._attempt_floor(pod, state),
        )

    def _attempt_floor(self, pod: pods.Pod, state: runtime.PodRuntime) -> dict[str, int]:
        """After a reset removed every instance of a container, its next attempt follows the
        highest that left a log file, as the kubelet reads it from the log directory (only
        pods that can restart all their containers lose instances that way)."""
        if not restartall.could_restart_all(pod):
            return {}
        have = {c.name for c in state.containers}
        root = Path(specs.pod_log_directory(self._node.logs_root, pod))
        return {c.name: restartall.next_attempt_floor(_logged_attempts(root / c.name))
                for c in (*pod.spec.init_containers, *pod.spec.containers)
                if c.name not in have}

    def _more_to_start(self, pod: pods.Pod, state: runtime.PodRuntime, work: PodWork,
                       tried: set[str]) -> bool:
        """Whether, with what this sync started now running, a container it did not try may
        start (a sidecar without a startup probe lets the next one go once it runs, which no
        event reports): then the pod is synced again at once. One it tried and that is still
        not running (an image still being pulled, backed off) waits for its own wake-up."""
        if not state.sandboxes:
            return False
        facts = self._container_facts(pod, state.sandboxes[0], work, state)
        return any(isinstance(a, podactions.Start) and a.container.name not in tried
                   for a in podactions.container_actions(pod, state, facts))

    def _probe_running(self, pod: pods.Pod, state: runtime.PodRuntime, work: PodWork) -> None:
        """Probe every running container of the sandbox in use (a no-op for one probed
        already); `initialDelaySeconds` count from the container's own start."""
        if not state.sandboxes or work.failure is not None or self._terminal(pod):
            return
        sandbox = state.sandboxes[0]
        pod_ip = sandbox.ip or self._node.host_ip
        for container in (*pod.spec.init_containers, *pod.spec.containers):
            latest = podactions.latest_instance(state, sandbox.id, container.name)
            if latest is not None and latest.state is runtime.ContainerState.RUNNING:
                self._probes.ensure(pod, container, latest.id, pod_ip=pod_ip,
                                    started_at=latest.started_at / 1e9)

    async def _execute(self, run: _Run, action: podactions.ContainerAction) -> float | None:
        """Carry out one container action; returns seconds until it wants another sync."""
        pod, name = run.pod, action.container.name
        if isinstance(action, podactions.KeepRunning):
            if action.reset_backoff:
                run.work.restarts.pop(name, None)
            return None
        # An exited instance's probe results must not carry over to the next one.
        self._probes.forget_container(pod.uid, name)
        if isinstance(action, podactions.BackOff):
            run.work.waiting[name] = (podactions.CRASH_LOOP_BACK_OFF, action.message)
            # The kubelet's event at each sync that finds the container backing off.
            self._recorder.record(pod, "Warning", ev.BACK_OFF, (
                f"Back-off restarting failed container {name} in pod "
                f"{pod.name}_{pod.namespace}({pod.uid})"), container=name)
            return action.wait
        if isinstance(action, podactions.Start):
            return await self._start(run, action)
        return None

    async def _start(self, run: _Run, action: podactions.Start) -> float | None:
        pod, container = run.pod, action.container
        if action.restart:
            self._step_backoff(run.work, container)
        if run.image_volumes is None:
            run.image_volumes = await self._containers.pull_image_volumes(pod)
        try:
            return await self._containers.start(
                pod, run.sandbox, self._sandbox_config(pod, run.sandbox.attempt, run.work),
                container,
                attempt=action.attempt, kind=action.kind,
                mounts=await self._container_mounts(pod, run.state, container, run.mounts,
                                                    run.work),
                waiting=run.work.waiting, pod_ip=run.pod_ip, state=run.state,
                image_volumes=run.image_volumes,
                volume_groups=self._volumes.extra_groups(pod),
            )
        except containers.ContainerError as exc:
            run.errors.append(str(exc))
            return None

    def _step_backoff(self, work: PodWork, container: pods.Container) -> None:
        sync = self._settings.sync
        definition = specs.definition_hash(container)
        restart = work.restarts.get(container.name)
        if restart is None or restart.definition != definition:
            restart = work.restarts[container.name] = _Restart(
                backoff.Backoff(sync.restart_backoff, sync.restart_backoff_max),
                definition=definition)
        restart.backoff.next_delay()

    async def _container_mounts(
        self, pod: pods.Pod, state: runtime.PodRuntime, container: pods.Container,
        mounts: Mounts, work: PodWork,
    ) -> tuple[runtime.Mount, ...]:
        """The container's volumes (recursiveReadOnly resolved for the pod's runtime handler),
        then the pod's managed /etc/hosts (the kubelet's makeMounts); raises ContainerError
        when a mount cannot be made as asked or the hosts file cannot be written."""
        try:
            handler = await self._handler(pod, work)
        except runtime.RuntimeClassError as exc:
            raise containers.ContainerError(
                f"runtime class of pod {pod.full_name}: {exc}") from exc
        supported = self._node.runtime.handler(handler).recursive_read_only_mounts
        try:
            own = tuple(vol.recursive_read_only(m, supported)
                        for m in mounts.get(container.name, ()))
        except vol.SourceError as exc:
            self._containers.config_error(pod, container, exc.message, work.waiting)
        if not etchosts.needs_hosts_file(container):
            return own
        ips = generation.pod_ips(pod, state.sandboxes, self._node.host_ip,
                                   self._node.all_ips)
        try:
            hosts = await names.hosts_mount(
                self._node.pods_root, pod, ips,
                cluster_domain=self._settings.dns.cluster_domain)
        except OSError as exc:
            raise containers.ContainerError(
                f"write the hosts file of pod {pod.full_name}: {exc}") from exc
        return own if hosts is None else (*own, hosts)

    async def _kill_unhealthy(
        self, run: _Run, action: podactions.KillUnhealthy, facts: podactions.ContainerFacts
    ) -> podactions.ContainerAction:
        """A liveness (or startup) probe gave up on the container: stop it, then start it
        again (or back off) unless its restart policy says never (`after_probe_kill`)."""
        pod, container = run.pod, action.container
        restarted = ", will be restarted" if action.restart else ""
        self._recorder.record(
            pod, "Normal", ev.KILLING,
            f"Container {container.name} failed {action.probe} probe{restarted}",
            container=container.name)
        # Its readiness probe runs on while it is stopped (through its preStop hook), as the
        # kubelet's; the probe that failed has stopped itself. Its results go with it.
        await self._containers.stop(pod, container, action.latest, pod_ip=run.pod_ip,
                                    grace=action.grace)
        self._probes.forget_container(pod.uid, container.name)
        return podactions.after_probe_kill(pod, action, run.state, facts)

    async def _replace(
        self, run: _Run, action: podactions.Replace, facts: podactions.ContainerFacts
    ) -> podactions.ContainerAction:
        """A pod update changed the container's definition (its image): stop the running
        instance within the pod's grace period and start the new one at once."""
        pod, container = run.pod, action.container
        self._recorder.record(pod, "Normal", ev.KILLING,
                              f"Container {container.name} definition changed, will be restarted",
                              container=container.name)
        self._probes.forget_container(pod.uid, container.name)
        await self._containers.stop(pod, container, action.latest, pod_ip=run.pod_ip,
                                    grace=action.grace)
        return podactions.after_replace(pod, action, run.state, facts)

    # -- termination ----------------------------------------------------------------------

    async def terminate(self, pod: pods.Pod, work: PodWork) -> None:
        """Stop containers (grace period), stop and remove the sandbox; publish the last status."""
        # No liveness kill or Unhealthy event while the pod shuts down.
        self._probes.forget_pod(pod.uid)
        if self._admitted.remove(pod.uid):
            self._qos_changed()
        state = await self._relister.refresh_pod(pod.uid)
        try:
            state = await self._kill_all(pod, state, work)
            # After every container stopped, before the status says so (the kubelet's
            # order: the claims' deallocation follows the pod's terminal status).
            if self._claims is not None:
                await self._claims.unprepare(pod)
            # The last status: containers terminated, sandbox stopped, the condition False,
            # and (API pods) a terminal phase, which the final delete waits for.
            # (Published before removal: without the containers it would read as Pending.)
            self.publish(pod, state, work, terminal=True)
            if not work.restart_requested:
                await self._remove_containers(state)
            await self._volumes.cleanup(pod.uid)
            # By UID under every QoS level: an orphan's spec (and so its QoS) is unknown.
            await asyncio.to_thread(cgroups.remove_pod_cgroups, pod.uid,
                                    cgroup_root=self._settings.node.cgroup_root)
            await asyncio.to_thread(shutil.rmtree, self._node.pods_root / pod.uid, True)
            self._userns.release(pod.uid)
            # The pod's log directory (every container's logs, rotated ones too), and every
            # link to them: those of the containers removed now and of those removed before
            # with their logs kept (a restart of all containers in place).
            log_directory = Path(specs.pod_log_directory(self._node.logs_root, pod))
            if not work.restart_requested:  # the kept containers' logs stay with them
                await asyncio.to_thread(loglinks.remove_into, self._settings.logs.links_dir,
                                        log_directory)
                await asyncio.to_thread(shutil.rmtree, log_directory, True)
        except dra.PrepareError as exc:
            raise SyncError(f"pod {pod.full_name}: {exc.message}") from exc
        except (cri.CriError, volumes.VolumeError) as exc:
            self._recorder.record(pod, "Warning", ev.FAILED_KILL_POD, f"error killing pod: {exc}")
            raise SyncError(f"kill pod {pod.full_name}: {exc}") from exc
        self._puller.forget_pod(pod.uid)

    async def _kill_all(self, pod: pods.Pod, state: runtime.PodRuntime,
                        work: PodWork) -> runtime.PodRuntime:
        """Kill what runs of `pod` within its grace period, and again what started after the
        runtime was read (a cancelled sync's CreateContainer or StartContainer that the runtime
        finished anyway), within what is left of the same grace; the state after."""
        grace = podactions.grace_period(pod)
        deadline = time.monotonic() + grace
        for _ in range(_KILL_ROUNDS):
            await self._killer.kill(pod, state, grace=grace, stopped=work.stopped_sandboxes)
            state = await self._relister.refresh_pod(pod.uid)
            running = sorted(c.name for c in state.containers
                             if c.state is runtime.ContainerState.RUNNING)
            if not running:
                return state
            log.info("pod %s (%s): %s started while the pod was being killed; killing them "
                     "too", pod.full_name, pod.uid, ", ".join(running))
            grace = max(deadline - time.monotonic(), 0.0)
            work.stopped_sandboxes.clear()  # a sandbox is stopped again with what runs in it
        # The kubelet's words when containers still run after KillPod; the termination is
        # tried again.
        raise SyncError(f"detected running containers after a successful KillPod, CRI "
                        f"violation: [{' '.join(running)}]")

    async def _remove_containers(self, state: runtime.PodRuntime) -> None:
        """Remove a terminated pod's containers and sandboxes (a pod that starts again keeps
        them: the kubelet leaves them to its garbage collection)."""
        for container in state.containers:
            await self._client.remove_container(container.id)
        for sandbox in state.sandboxes:
            await self._client.remove_pod_sandbox(sandbox.id)


def _current_restarts(pod: pods.Pod, work: PodWork) -> dict[str, podactions.RestartState]:
    """The back-offs of the containers' current definitions (an older one's is forgotten)."""
    definitions = {c.name: specs.definition_hash(c)
                   for c in (*pod.spec.init_containers, *pod.spec.containers)}
    return {name: r.state() for name, r in work.restarts.items()
            if r.definition == definitions.get(name)}


def _logged_attempts(directory: Path) -> list[int]:
    """The attempts that left a log file in a container's log directory."""
    try:
        return logs.attempts(directory)
    except crilogs.LogsError:
        return []


def _downward_node(name: str, node: NodeFacts) -> downward.Node:
    """The node as env vars see it: an unset limit is the node's allocatable amount (the
    kubelet's defaultPodLimitsForDownwardAPI); the machine's when allocatable is not known."""
    allocatable = node.admission.allocatable
    if allocatable is None:
        machine = host.machine_facts()
        allocatable = {"cpu": machine.cpus * 1000, "memory": machine.memory_bytes}
    return downward.Node(name=name, host_ips=node.all_ips,
                         cpu_milli=allocatable.get("cpu", 0),
                         memory=allocatable.get("memory", 0),
                         ephemeral_storage=allocatable.get("ephemeral-storage", 0))


def _pull_records(settings: settings_mod.Settings, client: cri.RuntimeClient,
                  clock: Callable[[], datetime]) -> pullmanager.PullManager | None:
    """The node's pulled-image records, under the data dir as the kubelet's are under its root
    dir; None when the KubeletEnsureSecretPulledImages gate is off."""
    if not settings.gates.kubelet_ensure_secret_pulled_images:
        return None
    wanted = settings.image_credentials
    return pullmanager.PullManager(
        store=pullrecordfiles.PullRecordFiles(settings.data_dir / pullrecordfiles.DIRECTORY),
        verification=pullrecords.check_settings(wanted.verification_policy,
                                                 wanted.preloaded_allowlist),
        images=client, clock=clock)
