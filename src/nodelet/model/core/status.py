"""Pod status values: what the status generation produces and the status manager stores.

Times are timezone-aware UTC datetimes with full precision; serialisation to the v1 API
(RFC 3339, whole seconds, as Kubernetes does) happens in `to_api`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from nodelet.model.core import runtime

ConditionStatus = Literal["True", "False", "Unknown"]
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]

# Condition types.
POD_SCHEDULED = "PodScheduled"
POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
POD_HAS_NETWORK = "PodHasNetwork"  # the condition's name in Kubernetes 1.25-1.27
INITIALIZED = "Initialized"
CONTAINERS_READY = "ContainersReady"
READY = "Ready"
DISRUPTION_TARGET = "DisruptionTarget"
# Restarting all of a pod's containers in place (RestartAllContainersOnContainerExits).
ALL_CONTAINERS_RESTARTING = "AllContainersRestarting"
# In-place resize (KEP-1287): a resize the node cannot admit yet, or one being applied.
POD_RESIZE_PENDING = "PodResizePending"
POD_RESIZE_IN_PROGRESS = "PodResizeInProgress"

# Reasons and messages (pkg/kubelet/status/generate.go, pkg/kubelet/types/constants.go).
REASON_POD_SANDBOX_NOT_READY = "PodSandboxNotReady"
REASON_CONTAINERS_NOT_READY = "ContainersNotReady"
REASON_CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
REASON_READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"
REASON_UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
REASON_POD_COMPLETED = "PodCompleted"
REASON_POD_FAILED = "PodFailed"


@dataclass(frozen=True)
class PodCondition:
    type: str
    status: ConditionStatus
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    last_probe_time: datetime | None = None
    # metadata.generation of the pod when nodelet wrote this condition (pod generation
    # tracking, GA in 1.35); 0: not known (not serialised).
    observed_generation: int = 0


@dataclass(frozen=True)
class ContainerStateWaiting:
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ContainerStateRunning:
    started_at: datetime | None = None


@dataclass(frozen=True)
class ContainerStateTerminated:
    exit_code: int
    reason: str = ""
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    container_id: str = ""
    signal: int = 0


ContainerStateValue = ContainerStateWaiting | ContainerStateRunning | ContainerStateTerminated


@dataclass(frozen=True)
class VolumeMountStatus:
    """One of a container's volume mounts as its status shows it (containerStatuses[].
    volumeMounts): `recursive_read_only` is "Enabled" or "Disabled" for a read-only mount,
    "" for a writable one."""

    name: str
    mount_path: str
    read_only: bool = False
    recursive_read_only: str = ""


# The health of one allocated resource (v1 ResourceHealthStatus).
ResourceHealthStatus = Literal["Healthy", "Unhealthy", "Unknown"]


@dataclass(frozen=True)
class ResourceHealth:
    """One device of a resource a container holds, and its health (v1 ResourceHealth); the
    driver's `message` about it ("": none)."""

    resource_id: str
    health: ResourceHealthStatus
    message: str = ""


@dataclass(frozen=True)
class ResourceStatus:
    """The devices a container holds of one resource (containerStatuses[].
    allocatedResourcesStatus[], ResourceHealthStatus): `name` is the resource's name."""

    name: str
    resources: tuple[ResourceHealth, ...] = ()


@dataclass(frozen=True)
class ContainerStatus:
    name: str
    image: str
    state: ContainerStateValue
    ready: bool = False
    started: bool | None = None
    restart_count: int = 0
    image_id: str = ""
    container_id: str = ""
    last_state: ContainerStateValue | None = None
    # The identities of the first process, where the runtime says (containerStatuses[].user).
    user: runtime.ContainerUser | None = None
    # The stop signal in effect (ContainerStopSignals gate); "": not shown.
    stop_signal: str = ""
    # allocatedResources (the requests allocated to it; None: none) and resources (the
    # requests and limits its cgroup has; None: not reported), quantities as written.
    allocated_resources: Mapping[str, str] | None = None
    resources: Mapping[str, Mapping[str, str]] | None = None
    volume_mounts: tuple[VolumeMountStatus, ...] = ()
    # The health of the devices it holds, by resource (allocatedResourcesStatus); empty: none.
    allocated_resources_status: tuple[ResourceStatus, ...] = ()


@dataclass(frozen=True)
class PodStatus:
    phase: PodPhase = "Pending"
    conditions: tuple[PodCondition, ...] = ()
    message: str = ""
    reason: str = ""
    host_ip: str = ""
    # Every node IP, the primary (`host_ip`) first: a dual-stack node's pair (status.hostIPs);
    # empty: `host_ip` alone.
    host_ips: tuple[str, ...] = ()
    pod_ips: tuple[str, ...] = ()
    start_time: datetime | None = None
    container_statuses: tuple[ContainerStatus, ...] = ()
    init_container_statuses: tuple[ContainerStatus, ...] = ()
    ephemeral_container_statuses: tuple[ContainerStatus, ...] = ()
    qos_class: str = ""  # Guaranteed, Burstable or BestEffort ("" when not known)
    # metadata.generation of the pod this status was generated for (status.observedGeneration);
    # 0: not known (not serialised).
    observed_generation: int = 0
    # The pod's allocatedResources (its requests as allocated) and resources (the requests
    # and limits in effect), quantities as written; None: not reported.
    allocated_resources: Mapping[str, str] | None = None
    resources: Mapping[str, Mapping[str, str]] | None = None

    @property
    def pod_ip(self) -> str:
        return self.pod_ips[0] if self.pod_ips else ""

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def format_time(value: datetime | None) -> str | None:
    """RFC 3339 with whole seconds in UTC, as Kubernetes serialises metav1.Time."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_precise(value: datetime | None) -> str | None:
    """RFC 3339 with microseconds, for nodelet's own precise timelines."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def _state_to_api(state: ContainerStateValue | None) -> dict[str, Any]:
    if state is None:
        return {}
    if isinstance(state, ContainerStateWaiting):
        waiting = {"reason": state.reason, "message": state.message}
        return {"waiting": {k: v for k, v in waiting.items() if v}}
    if isinstance(state, ContainerStateRunning):
        return {"running": {"startedAt": format_time(state.started_at)}}
    terminated: dict[str, Any] = {
        "exitCode": state.exit_code,
        "reason": state.reason,
        "message": state.message,
        "startedAt": format_time(state.started_at),
        "finishedAt": format_time(state.finished_at),
        "containerID": state.container_id,
    }
    if state.signal:
        terminated["signal"] = state.signal
    return {"terminated": {k: v for k, v in terminated.items() if v not in ("", None)}}


def _container_status_to_api(status: ContainerStatus) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": status.name,
        "state": _state_to_api(status.state),
        "lastState": _state_to_api(status.last_state),
        "ready": status.ready,
        "restartCount": status.restart_count,
        "image": status.image,
        "imageID": status.image_id,
    }
    if status.container_id:
        out["containerID"] = status.container_id
    if status.started is not None:
        out["started"] = status.started
    if status.user is not None:
        linux: dict[str, Any] = {"uid": status.user.uid, "gid": status.user.gid}
        if status.user.supplemental_groups:
            linux["supplementalGroups"] = list(status.user.supplemental_groups)
        out["user"] = {"linux": linux}
    if status.stop_signal:
        out["stopSignal"] = status.stop_signal
    if status.allocated_resources is not None:
        out["allocatedResources"] = dict(status.allocated_resources)
    if status.resources is not None:
        out["resources"] = {k: dict(v) for k, v in status.resources.items()}
    if status.volume_mounts:
        out["volumeMounts"] = [_volume_mount_to_api(m) for m in status.volume_mounts]
    if status.allocated_resources_status:
        out["allocatedResourcesStatus"] = [_resource_status_to_api(r)
                                           for r in status.allocated_resources_status]
    return out


def _resource_status_to_api(resource: ResourceStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"name": resource.name}
    if resource.resources:  # omitempty
        out["resources"] = [{"resourceID": h.resource_id, "health": h.health,
                             **({"message": h.message} if h.message else {})}
                            for h in resource.resources]
    return out


def _volume_mount_to_api(mount: VolumeMountStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"name": mount.name, "mountPath": mount.mount_path}
    if mount.read_only:
        out["readOnly"] = True
    if mount.recursive_read_only:
        out["recursiveReadOnly"] = mount.recursive_read_only
    return out


def condition_to_api(cond: PodCondition) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": cond.type,
        "status": cond.status,
        "lastProbeTime": format_time(cond.last_probe_time),
        "lastTransitionTime": format_time(cond.last_transition_time),
    }
    if cond.reason:
        out["reason"] = cond.reason
    if cond.message:
        out["message"] = cond.message
    if cond.observed_generation:
        out["observedGeneration"] = cond.observed_generation
    return out


def condition_from_api(obj: Mapping[str, Any]) -> PodCondition | None:
    """A v1 PodCondition as a value; None when it has no type. Unparsable times and statuses
    other than True/False are read leniently (None, "Unknown"): they were written by others."""
    type_ = obj.get("type")
    if not isinstance(type_, str) or not type_:
        return None
    raw_status = obj.get("status")
    value: ConditionStatus = raw_status if raw_status in ("True", "False") else "Unknown"
    return PodCondition(
        type=type_, status=value, reason=str(obj.get("reason") or ""),
        message=str(obj.get("message") or ""),
        last_transition_time=parse_time_lenient(obj.get("lastTransitionTime")),
        last_probe_time=parse_time_lenient(obj.get("lastProbeTime")),
        observed_generation=_generation(obj.get("observedGeneration")),
    )


def _generation(value: Any) -> int:
    """An observedGeneration written by others: 0 unless a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parse_time_lenient(value: Any) -> datetime | None:
    """A time written by others: None when absent, not a string or not RFC 3339."""
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def to_api(status: PodStatus) -> dict[str, Any]:
    """The v1 PodStatus object, as the API server would serialise it."""
    # Empty lists and maps are left out, as the API server's omitempty leaves them (a pod
    # refused at admission has no conditions and no container statuses).
    out: dict[str, Any] = {"phase": status.phase}
    if status.conditions:
        out["conditions"] = [condition_to_api(c) for c in status.conditions]
    if status.message:
        out["message"] = status.message
    if status.reason:
        out["reason"] = status.reason
    if status.host_ip:
        out["hostIP"] = status.host_ip
        out["hostIPs"] = [{"ip": ip} for ip in status.host_ips or (status.host_ip,)]
    if status.pod_ips:
        out["podIP"] = status.pod_ip
        out["podIPs"] = [{"ip": ip} for ip in status.pod_ips]
    if status.start_time is not None:
        out["startTime"] = format_time(status.start_time)
    if status.init_container_statuses:
        out["initContainerStatuses"] = [
            _container_status_to_api(s) for s in status.init_container_statuses
        ]
    if status.container_statuses:
        out["containerStatuses"] = [_container_status_to_api(s)
                                    for s in status.container_statuses]
    if status.ephemeral_container_statuses:
        out["ephemeralContainerStatuses"] = [
            _container_status_to_api(s) for s in status.ephemeral_container_statuses
        ]
    if status.qos_class:
        out["qosClass"] = status.qos_class
    if status.observed_generation:
        out["observedGeneration"] = status.observed_generation
    if status.allocated_resources:  # a map: omitted when empty
        out["allocatedResources"] = dict(status.allocated_resources)
    if status.resources is not None:  # a struct: `{}` when it has nothing
        out["resources"] = {k: dict(v) for k, v in status.resources.items()}
    return out
