"""Pod conditions, one small pure function each, like the kubelet's `status/generate.go`.

None of these set `lastTransitionTime`: the status manager does, and only when a condition's
status changes (DESIGN §3). Container status sequences are `None` when the runtime state is
unknown (the kubelet's nil slice), which yields `UnknownContainerStatuses`.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodelet import settings
from nodelet.model.core import extraconditions, pods, runtime, status
from nodelet.model.core import sandboxes as sandbox_rules

Statuses = Sequence[status.ContainerStatus]

# Conditions nodelet always writes; the ready-to-start condition joins them when its gate is on.
_ALWAYS_OWNED = frozenset(
    {status.POD_SCHEDULED, status.READY, status.INITIALIZED, status.CONTAINERS_READY,
     status.ALL_CONTAINERS_RESTARTING, status.POD_RESIZE_PENDING, status.POD_RESIZE_IN_PROGRESS}
)
# Every type nodelet may write to the API, whatever the gates (the ready-to-start condition
# under both of its names). Everything else in an API pod's status belongs to someone else.
WRITTEN_TYPES = (_ALWAYS_OWNED | {status.POD_READY_TO_START_CONTAINERS, status.POD_HAS_NETWORK}
                 | extraconditions.TYPES)


def ready_to_start_type(gates: settings.FeatureGates) -> str | None:
    """The name the ready-to-start condition is reported under, or None when it is not."""
    if not gates.pod_ready_to_start_containers:
        return None
    if gates.pod_has_network:
        return status.POD_HAS_NETWORK
    return status.POD_READY_TO_START_CONTAINERS


def owned_types(gates: settings.FeatureGates) -> frozenset[str]:
    """Condition types nodelet writes (the kubelet's PodConditionByKubelet)."""
    name = ready_to_start_type(gates)
    owned = _ALWAYS_OWNED | extraconditions.owned_types(gates)
    return owned | {name} if name else owned


def ready_to_start_containers(
    pod: pods.Pod,
    sandboxes: Sequence[runtime.SandboxInfo],
    last_sandbox_error: str | None,
    *,
    condition_type: str = status.POD_READY_TO_START_CONTAINERS,
) -> status.PodCondition:
    """True when the pod's sandbox is usable, else False/PodSandboxNotReady saying why.

    Beyond the kubelet: `last_sandbox_error` (why the last attempt to set the sandbox up
    failed: the runtime/CNI error, or the volume that could not be mounted, already phrased as
    "failed to create pod sandbox: ..." or "MountVolume.SetUp failed ...") is appended as
    `<reason>: <error>`.
    """
    change = sandbox_rules.sandbox_change(pod, sandboxes)
    if not change.needed:
        return status.PodCondition(type=condition_type, status="True")
    message = change.reason
    if last_sandbox_error:
        message = f"{message}: {last_sandbox_error}"
    return status.PodCondition(
        type=condition_type,
        status="False",
        reason=status.REASON_POD_SANDBOX_NOT_READY,
        message=message,
    )


def _by_name(statuses: Statuses) -> dict[str, status.ContainerStatus]:
    return {s.name: s for s in statuses}


def _go_list(names: Sequence[str]) -> str:
    """A string slice as Go's %s prints it, which is what the kubelet's messages contain."""
    return "[" + " ".join(names) + "]"


def _not_ready_message(unknown: Sequence[str], unready: Sequence[str], word: str) -> str:
    parts = []
    if unknown:
        parts.append(f"containers with unknown status: {_go_list(unknown)}")
    if unready:
        parts.append(f"containers with {word} status: {_go_list(unready)}")
    return ", ".join(parts)


def _is_sidecar(container: pods.Container) -> bool:
    return container.restart_policy == "Always"


def _has_regular_container_started(pod: pods.Pod, container_statuses: Statuses | None) -> bool:
    names = {c.name for c in pod.spec.containers}
    return any(
        s.name in names
        and isinstance(s.state, status.ContainerStateRunning | status.ContainerStateTerminated)
        for s in container_statuses or ()
    )


def initialized(
    pod: pods.Pod,
    init_statuses: Statuses | None,
    phase: status.PodPhase,
    *,
    container_statuses: Statuses | None = (),
) -> status.PodCondition:
    """Initialized: every init container completed (sidecars: started).

    True immediately for pods without init containers, which is why Initialized precedes the
    sandbox. `container_statuses` (regular containers) lets a pod whose regular containers
    already ran stay initialized while its sidecars restart.
    """
    if init_statuses is None and pod.spec.init_containers:
        return status.PodCondition(
            type=status.INITIALIZED,
            status="False",
            reason=status.REASON_UNKNOWN_CONTAINER_STATUSES,
        )
    known = _by_name(init_statuses or ())
    unknown: list[str] = []
    incomplete: list[str] = []
    for container in pod.spec.init_containers:
        found = known.get(container.name)
        if found is None:
            unknown.append(container.name)
        elif not (found.started if _is_sidecar(container) else found.ready):
            incomplete.append(container.name)
    if phase == "Succeeded" and not unknown:
        return status.PodCondition(
            type=status.INITIALIZED, status="True", reason=status.REASON_POD_COMPLETED
        )
    if _has_regular_container_started(pod, container_statuses):
        return status.PodCondition(type=status.INITIALIZED, status="True")
    message = _not_ready_message(unknown, incomplete, "incomplete")
    if message:
        return status.PodCondition(
            type=status.INITIALIZED,
            status="False",
            reason=status.REASON_CONTAINERS_NOT_INITIALIZED,
            message=message,
        )
    return status.PodCondition(type=status.INITIALIZED, status="True")


def _kept_initialized(new: status.PodCondition,
                      old_conditions: Sequence[status.PodCondition]) -> status.PodCondition:
    """A pod once initialized stays initialized while its init containers show incomplete
    again (an in-place restart of all its containers): the kubelet 1.37's generate.go with
    RestartAllContainersOnContainerExits, on by default."""
    if new.status == "True" or new.reason != status.REASON_CONTAINERS_NOT_INITIALIZED:
        return new
    old = next((c for c in old_conditions if c.type == status.INITIALIZED), None)
    if old is not None and old.status == "True":
        return status.PodCondition(type=status.INITIALIZED, status="True")
    return new


def _terminal(type_: str, phase: status.PodPhase) -> status.PodCondition:
    reason = status.REASON_POD_FAILED if phase == "Failed" else status.REASON_POD_COMPLETED
    return status.PodCondition(type=type_, status="False", reason=reason)


def containers_ready(
    pod: pods.Pod,
    container_statuses: Statuses | None,
    init_statuses: Statuses | None,
    phase: status.PodPhase,
) -> status.PodCondition:
    """ContainersReady: every regular container and every sidecar is ready."""
    if container_statuses is None:
        return status.PodCondition(
            type=status.CONTAINERS_READY,
            status="False",
            reason=status.REASON_UNKNOWN_CONTAINER_STATUSES,
        )
    known = _by_name([*(init_statuses or ()), *container_statuses])
    considered = [*filter(_is_sidecar, pod.spec.init_containers), *pod.spec.containers]
    unknown = [c.name for c in considered if c.name not in known]
    unready = [c.name for c in considered if c.name in known and not known[c.name].ready]
    if (phase == "Succeeded" and not unknown) or phase == "Failed":
        # Containers of a terminal pod may still be stopping: never report them ready.
        return _terminal(status.CONTAINERS_READY, phase)
    message = _not_ready_message(unknown, unready, "unready")
    if message:
        return status.PodCondition(
            type=status.CONTAINERS_READY,
            status="False",
            reason=status.REASON_CONTAINERS_NOT_READY,
            message=message,
        )
    return status.PodCondition(type=status.CONTAINERS_READY, status="True")


def _gate_message(gate: str, existing: Sequence[status.PodCondition]) -> str:
    found = next((c for c in existing if c.type == gate), None)
    if found is None:
        return f'corresponding condition of pod readiness gate "{gate}" does not exist.'
    if found.status != "True":
        return f'the status of pod readiness gate "{gate}" is not "True", but {found.status}'
    return ""


def pod_ready(
    pod: pods.Pod,
    containers_ready_cond: status.PodCondition,
    existing_conditions: Sequence[status.PodCondition],
    phase: status.PodPhase,
) -> status.PodCondition:
    """Ready: ContainersReady (copied when not True) and every readiness gate True.

    `existing_conditions` are the conditions assembled so far, which include the readiness
    gate conditions written by others.
    """
    if containers_ready_cond.status != "True":
        return status.PodCondition(
            type=status.READY,
            status=containers_ready_cond.status,
            reason=containers_ready_cond.reason,
            message=containers_ready_cond.message,
        )
    if phase in ("Succeeded", "Failed"):
        return _terminal(status.READY, phase)
    messages = [_gate_message(g, existing_conditions) for g in pod.spec.readiness_gates]
    message = ", ".join(m for m in messages if m)
    if message:
        return status.PodCondition(
            type=status.READY,
            status="False",
            reason=status.REASON_READINESS_GATES_NOT_READY,
            message=message,
        )
    return status.PodCondition(type=status.READY, status="True")


def pod_scheduled() -> status.PodCondition:
    """PodScheduled: always True on the node (static pods are scheduled by being admitted)."""
    return status.PodCondition(type=status.POD_SCHEDULED, status="True")


def generate_conditions(
    pod: pods.Pod,
    *,
    old_conditions: Sequence[status.PodCondition],
    sandboxes: Sequence[runtime.SandboxInfo],
    last_sandbox_error: str | None,
    container_statuses: Statuses | None,
    init_statuses: Statuses | None,
    phase: status.PodPhase,
    gates: settings.FeatureGates,
    extra: extraconditions.Facts | None = None,
    restarting: status.PodCondition | None = None,
    resizing: Sequence[status.PodCondition] = (),
) -> tuple[status.PodCondition, ...]:
    """All conditions of a pod in the kubelet's order (generateAPIPodStatus); `restarting`:
    AllContainersRestarting, on a pod that can restart all its containers (`restartall`);
    `resizing`: PodResizePending and PodResizeInProgress while a resize waits or runs.

    Conditions nodelet does not own - readiness gates, DisruptionTarget, anything written by
    others, and the ready-to-start condition when its gate is off - are kept from
    `old_conditions` unchanged and in place; then come the ready-to-start condition (when
    gated on), Initialized, Ready, ContainersReady and PodScheduled. The alpha gates beyond
    the KEP then change or add conditions (`extraconditions.apply`, reading `extra`).
    """
    owned = owned_types(gates)
    out = [c for c in old_conditions if c.type not in owned]
    out.extend(resizing)
    ready_type = ready_to_start_type(gates)
    if ready_type is not None:
        out.append(
            ready_to_start_containers(pod, sandboxes, last_sandbox_error, condition_type=ready_type)
        )
    out.append(_kept_initialized(
        initialized(pod, init_statuses, phase, container_statuses=container_statuses),
        old_conditions))
    cr = containers_ready(pod, container_statuses, init_statuses, phase)
    out.append(pod_ready(pod, cr, out, phase))
    out.append(cr)
    out.append(pod_scheduled())
    if restarting is not None:
        out.append(restarting)
    return extraconditions.apply(
        out, pod, sandbox_list=sandboxes, container_statuses=container_statuses, gates=gates,
        facts=extra or extraconditions.Facts(), ready_type=ready_type)
