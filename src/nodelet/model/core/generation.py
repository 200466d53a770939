"""A pod's whole status from the runtime's view (pure): the kubelet's generateAPIPodStatus.

Conditions come from `conditions`, the phase and container statuses from `phases`; this module
only puts them together with the pod's IPs and start time. lastTransitionTime is not set here:
the status manager sets it when it merges the new status with the old one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from nodelet import settings
from nodelet.model.core import (
    admission,
    conditions,
    eviction,
    extraconditions,
    phases,
    pods,
    preemption,
    resize,
    resources,
    restartall,
    runtime,
    sandboxes,
    status,
    transitions,
)

DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


def pod_ips(
    pod: pods.Pod, sandbox_list: Sequence[runtime.SandboxInfo], host_ip: str,
    host_ips: Sequence[str] = (),
) -> tuple[str, ...]:
    """hostNetwork pods have the node's IPs (`host_ips`, both of a dual-stack node, as the
    kubelet fills a host-network pod's podIPs; else `host_ip`); others the newest ready
    sandbox's IPs."""
    if pod.spec.host_network:
        return tuple(host_ips) or ((host_ip,) if host_ip else ())
    newest = max(sandbox_list, key=lambda s: s.created_at, default=None)
    if newest is None or newest.state is not runtime.SandboxState.READY:
        return ()
    return sandboxes.sandbox_ips(newest)


def _kept_ips(
    sandbox_list: Sequence[runtime.SandboxInfo], old: status.PodStatus | None
) -> tuple[str, ...]:
    """With no sandbox ready (a finished pod, a sandbox that died) the pod keeps the IPs it
    had, as the kubelet's PLEG keeps them (getPodIPs): a Completed pod still shows its IP."""
    if old is None or any(s.state is runtime.SandboxState.READY for s in sandbox_list):
        return ()
    return old.pod_ips


def with_api_conditions(
    pod: pods.Pod, old_conditions: Sequence[status.PodCondition]
) -> tuple[status.PodCondition, ...]:
    """`old_conditions` with the API's conditions of an API pod merged in: for types nodelet
    does not write, the API's copy wins, and one the API no longer has is dropped (the API is
    the only place others write to). Static pods keep `old_conditions` as they are."""
    if pod.source != "api":
        return tuple(old_conditions)
    api = [c for c in map(status.condition_from_api, pod.api_conditions)
           if c is not None and c.type not in conditions.WRITTEN_TYPES]
    by_type = {c.type: c for c in api}
    out = [by_type.pop(c.type, c) for c in old_conditions
           if c.type in conditions.WRITTEN_TYPES or c.type in by_type]
    return (*out, *by_type.values())


def _without_stop_signals(
        statuses: tuple[status.ContainerStatus, ...]) -> tuple[status.ContainerStatus, ...]:
    return tuple(replace(s, stop_signal="") if s.stop_signal else s for s in statuses)


def generate_status(
    pod: pods.Pod,
    *,
    sandboxes: Sequence[runtime.SandboxInfo],
    containers: Sequence[runtime.ContainerInfo],
    old: status.PodStatus | None,
    last_sandbox_error: str | None,
    waiting: Mapping[str, tuple[str, str]],
    host_ip: str,
    now: datetime,
    gates: settings.FeatureGates,
    host_ips: Sequence[str] = (),
    ready: Mapping[str, bool] | None = None,
    started: Mapping[str, bool] | None = None,
    failure: tuple[str, str] | None = None,
    terminal: bool = False,
    extra: extraconditions.Facts | None = None,
    resized: resize.View | None = None,
    rro_supported: bool = False,
    device_health: Mapping[str, tuple[status.ResourceStatus, ...]] | None = None,
) -> status.PodStatus:
    """`ready`/`started`: readiness and startup probe results by container name;
    `failure`: (reason, message) of a pod that failed for good (activeDeadlineSeconds passed,
    refused at admission); `terminal`: the last status of a pod being terminated, its
    containers stopped — a pod from the API then gets a terminal phase (`terminal_status`);
    `extra`: what the alpha conditions beyond KEP-3085 read (`extraconditions.Facts`);
    `resized`: the allocation and what runs (`resize.View`; None: the pod's spec as it is);
    `rro_supported`: the pod's runtime handler makes mounts recursively read-only;
    `device_health`: the allocatedResourcesStatus of each app container holding devices, by
    name (the device plugins' `devices.resource_statuses`, then the DRA claims'
    `drahealth.resource_statuses`), shown with the ResourceHealthStatus gate."""
    view = resized or resize.View(allocated=pod)
    init_statuses, container_statuses = _container_statuses(
        pod, containers, old, view, gates=gates, ready=ready, waiting=waiting, started=started,
        rro_supported=rro_supported)
    phase = phases.pod_phase(
        pod, init_statuses, container_statuses, old_phase=old.phase if old else None,
        terminal=terminal,
    )
    if terminal and not pod.is_static:
        phase, init_statuses, container_statuses = terminal_status(
            phase, init_statuses, container_statuses)
    container_statuses = with_device_health(
        container_statuses, device_health if gates.resource_health_status else None)
    if failure is None and old is not None and old.phase == "Failed" and old.reason:
        failure = (old.reason, old.message)  # failed for good, also across agent restarts
    reason = message = ""
    if failure is not None:
        phase, (reason, message) = "Failed", failure
    pod_conditions = conditions.generate_conditions(
        pod,
        old_conditions=with_api_conditions(pod, old.conditions if old else ()),
        sandboxes=sandboxes,
        last_sandbox_error=last_sandbox_error,
        container_statuses=container_statuses,
        init_statuses=init_statuses,
        phase=phase,
        gates=gates,
        extra=extra,
        restarting=restartall.condition(pod, containers, old, phase),
        resizing=() if terminal else resize.conditions(view),
    )
    if failure is not None:
        pod_conditions = _failed_conditions(pod, pod_conditions, old, failure)
    return status.PodStatus(
        phase=phase,
        reason=reason,
        message=message,
        conditions=pod_conditions,
        # A refused pod never ran here: the kubelet's rejectPod writes no node address.
        host_ip="" if _rejected(failure) else host_ip,
        host_ips=() if _rejected(failure) else tuple(host_ips),
        pod_ips=pod_ips(pod, sandboxes, host_ip, host_ips) or _kept_ips(sandboxes, old),
        start_time=old.start_time if old and old.start_time else now,
        # A pod refused at admission never had containers: the kubelet's rejectPod writes
        # none, so `kubectl get pods` shows the reason rather than ContainerCreating.
        container_statuses=() if _rejected(failure) else container_statuses,
        init_container_statuses=() if _rejected(failure) else init_statuses,
        ephemeral_container_statuses=() if _rejected(failure) else _keep_terminated(
            phases.ephemeral_container_statuses(pod, containers, waiting=waiting,
                                                rro_supported=rro_supported),
            old.ephemeral_container_statuses if old else ()),
        qos_class=resources.qos_class(pod),
        allocated_resources=None if _rejected(failure) else resize.pod_allocated(view.allocated),
        resources=None if _rejected(failure) else resize.pod_resources(view.allocated,
                                                                       view.pod_actuated),
    )



def with_device_health(
    statuses: tuple[status.ContainerStatus, ...],
    health: Mapping[str, tuple[status.ResourceStatus, ...]] | None,
) -> tuple[status.ContainerStatus, ...]:
    """The app containers' statuses with the health of the devices each holds, as the
    kubelet's UpdateAllocatedResourcesStatus fills it (containerStatuses only, not the init
    containers'), made anew at each generation: nothing of an old status is kept, and
    without `health` (the gate off) none is shown."""
    found = health or {}
    return tuple(replace(s, allocated_resources_status=found.get(s.name, ()))
                 for s in statuses)


def _container_statuses(
    pod: pods.Pod,
    containers: Sequence[runtime.ContainerInfo],
    old: status.PodStatus | None,
    view: resize.View,
    *,
    gates: settings.FeatureGates,
    ready: Mapping[str, bool] | None,
    waiting: Mapping[str, tuple[str, str]],
    started: Mapping[str, bool] | None,
    rro_supported: bool,
) -> tuple[tuple[status.ContainerStatus, ...], tuple[status.ContainerStatus, ...]]:
    """The init and app containers' statuses: as the runtime shows them, with their resources
    as allocated, and what the old status keeps (terminated states the runtime lost, or the
    statuses of a restart of all containers)."""
    init_statuses, container_statuses = phases.container_statuses(
        pod, containers, ready=ready, waiting=waiting, started=started,
        rro_supported=rro_supported)
    init_statuses = tuple(resize.container_status(s, view) for s in init_statuses)
    container_statuses = tuple(resize.container_status(s, view) for s in container_statuses)
    if not gates.container_stop_signals:  # the kubelet shows them only with its gate
        init_statuses = _without_stop_signals(init_statuses)
        container_statuses = _without_stop_signals(container_statuses)
    if old is not None and restartall.could_restart_all(pod):
        cleaned = restartall.just_cleaned(pod, containers, old)
        return (restartall.reset_statuses(init_statuses, old.init_container_statuses,
                                          just_cleaned=cleaned),
                restartall.reset_statuses(container_statuses, old.container_statuses,
                                          just_cleaned=cleaned))
    if old is not None:
        return (_keep_terminated(init_statuses, old.init_container_statuses),
                _keep_terminated(container_statuses, old.container_statuses))
    return init_statuses, container_statuses


def _failed_conditions(
    pod: pods.Pod,
    pod_conditions: tuple[status.PodCondition, ...],
    old: status.PodStatus | None,
    failure: tuple[str, str],
) -> tuple[status.PodCondition, ...]:
    """The conditions of a pod that failed for good: a rejected one has none of the kubelet's
    own, an evicted one is a DisruptionTarget."""
    if _rejected(failure):
        # The kubelet's rejectPod writes phase, reason and message only: none of its own
        # conditions (found by tests/differential); others' (readiness gates) stay.
        return tuple(c for c in with_api_conditions(pod, old.conditions if old else ())
                     if c.type not in transitions.KUBELET_OWNED)
    if _evicted(failure) and all(c.type != status.DISRUPTION_TARGET for c in pod_conditions):
        # Evicted or preempted by the node: TerminationByKubelet, with the kubelet's words.
        message = preemption.DISRUPTION_MESSAGE if failure[0] == preemption.REASON \
            else failure[1]
        return (*pod_conditions, status.PodCondition(
            type=status.DISRUPTION_TARGET, status="True", reason=eviction.DISRUPTION_REASON,
            message=message))
    return pod_conditions

# What the kubelet writes for a container of a terminated pod that the runtime does not show
# as exited (status_manager.go TerminatePod).
UNKNOWN_REASON = "ContainerStatusUnknown"
UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"
UNKNOWN_EXIT_CODE = 137

Statuses = tuple[status.ContainerStatus, ...]


def terminal_status(
    phase: status.PodPhase, init_statuses: Statuses, container_statuses: Statuses
) -> tuple[status.PodPhase, Statuses, Statuses]:
    """The last status of a terminated (non-static) pod, as the kubelet 1.27+ writes it before
    it deletes the pod (TerminatePod): a Pending or Running phase becomes Failed, and
    containers that tried to run but are not terminated are written as terminated with
    `ContainerStatusUnknown` (exit code 137) — all regular containers once the pod
    initialized, and the init containers up to the last one that tried to start."""
    if phase not in ("Succeeded", "Failed"):
        phase = "Failed"
    started_inits = _started_prefix(init_statuses)
    inits = tuple(_unknown_if_running(s) if i < started_inits else s
                  for i, s in enumerate(init_statuses))
    if not init_statuses or any(_tried(s) for s in container_statuses):
        container_statuses = tuple(map(_unknown_if_running, container_statuses))
    return phase, inits, container_statuses


def _tried(s: status.ContainerStatus) -> bool:
    """The container left waiting at least once (the kubelet's evidence of a start)."""
    return not isinstance(s.state, status.ContainerStateWaiting) or isinstance(
        s.last_state, status.ContainerStateTerminated)


def _started_prefix(statuses: Statuses) -> int:
    """How many leading statuses precede the trailing run of never-started ones."""
    return max((i + 1 for i, s in enumerate(statuses) if _tried(s)), default=0)


def _unknown_if_running(s: status.ContainerStatus) -> status.ContainerStatus:
    if isinstance(s.state, status.ContainerStateTerminated):
        return s
    return replace(s, ready=False, started=False, state=status.ContainerStateTerminated(
        exit_code=UNKNOWN_EXIT_CODE, reason=UNKNOWN_REASON, message=UNKNOWN_MESSAGE))


def _keep_terminated(
    statuses: tuple[status.ContainerStatus, ...], old: Sequence[status.ContainerStatus]
) -> tuple[status.ContainerStatus, ...]:
    """A container the runtime no longer has (garbage-collected after it ended) keeps its
    last terminated status, as the kubelet's convertToAPIContainerStatuses keeps it, rather
    than reading as not yet created."""
    ended = {s.name: s for s in old if isinstance(s.state, status.ContainerStateTerminated)}
    return tuple(ended.get(s.name, s) if not s.container_id else s for s in statuses)


def _evicted(failure: tuple[str, str] | None) -> bool:
    """Evicted by the node, or preempted for a critical pod (not refused at admission under
    pressure, which has the same reason): the kubelet marks such a pod with DisruptionTarget
    (TerminationByKubelet)."""
    return failure is not None and failure[0] in (eviction.REASON, preemption.REASON) \
        and not _rejected(failure)


def _rejected(failure: tuple[str, str] | None) -> bool:
    return failure is not None and failure[1].startswith(admission.REJECTED_PREFIX)
