"""A pod's whole status from the runtime's view (pure): the kubelet's generateAPIPodStatus.

Conditions come from `conditions`, the phase and container statuses from `phases`; this module
only puts them together with the pod's IPs and start time. lastTransitionTime is not set here:
the status manager sets it when it merges the new status with the old one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from nodelet import settings
from nodelet.model.core import (
    admission,
    conditions,
    eviction,
    phases,
    pods,
    resources,
    runtime,
    sandboxes,
    status,
)

DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


def pod_ips(
    pod: pods.Pod, sandbox_list: Sequence[runtime.SandboxInfo], host_ip: str
) -> tuple[str, ...]:
    """hostNetwork pods have the node's IP; others the newest ready sandbox's IPs."""
    if pod.spec.host_network:
        return (host_ip,) if host_ip else ()
    newest = max(sandbox_list, key=lambda s: s.created_at, default=None)
    if newest is None or newest.state is not runtime.SandboxState.READY:
        return ()
    return sandboxes.sandbox_ips(newest)


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
    ready: Mapping[str, bool] | None = None,
    started: Mapping[str, bool] | None = None,
    failure: tuple[str, str] | None = None,
) -> status.PodStatus:
    """`ready`/`started`: readiness and startup probe results by container name;
    `failure`: (reason, message) of a pod that failed for good (activeDeadlineSeconds passed,
    refused at admission)."""
    init_statuses, container_statuses = phases.container_statuses(
        pod, containers, ready=ready, waiting=waiting, started=started
    )
    if old is not None:
        init_statuses = _keep_terminated(init_statuses, old.init_container_statuses)
        container_statuses = _keep_terminated(container_statuses, old.container_statuses)
    phase = phases.pod_phase(
        pod, init_statuses, container_statuses, old_phase=old.phase if old else None
    )
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
    )
    if _evicted(failure) and all(c.type != status.DISRUPTION_TARGET for c in pod_conditions):
        assert failure is not None
        pod_conditions = (*pod_conditions, status.PodCondition(
            type=status.DISRUPTION_TARGET, status="True", reason=eviction.DISRUPTION_REASON,
            message=failure[1]))
    return status.PodStatus(
        phase=phase,
        reason=reason,
        message=message,
        conditions=pod_conditions,
        host_ip=host_ip,
        pod_ips=pod_ips(pod, sandboxes, host_ip),
        start_time=old.start_time if old and old.start_time else now,
        # A pod refused at admission never had containers: the kubelet's rejectPod writes
        # none, so `kubectl get pods` shows the reason rather than ContainerCreating.
        container_statuses=() if _rejected(failure) else container_statuses,
        init_container_statuses=() if _rejected(failure) else init_statuses,
        qos_class=resources.qos_class(pod),
    )


def _keep_terminated(
    statuses: tuple[status.ContainerStatus, ...], old: Sequence[status.ContainerStatus]
) -> tuple[status.ContainerStatus, ...]:
    """A container the runtime no longer has (garbage-collected after it ended) keeps its
    last terminated status, as the kubelet's convertToAPIContainerStatuses keeps it, rather
    than reading as not yet created."""
    ended = {s.name: s for s in old if isinstance(s.state, status.ContainerStateTerminated)}
    return tuple(ended.get(s.name, s) if not s.container_id else s for s in statuses)


def _evicted(failure: tuple[str, str] | None) -> bool:
    """Evicted by the node (not refused at admission under pressure, which has the same
    reason): the kubelet marks such a pod with DisruptionTarget (TerminationByKubelet)."""
    return failure is not None and failure[0] == eviction.REASON and not _rejected(failure)


def _rejected(failure: tuple[str, str] | None) -> bool:
    return failure is not None and failure[1].startswith(admission.REJECTED_PREFIX)
