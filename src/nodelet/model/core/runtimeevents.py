"""The runtime's events as plain values, and what each one means for a pod (pure).

The agent listens to CRI's GetContainerEvents where the runtime offers it (containerd 1.7+;
the kubelet's Evented PLEG, KEP-3386), translated by `from_cri`, and else to containerd's own
event service (issue 13; containerd 1.6 has no CRI events). Only the events that report a
change nobody in nodelet asked for count:

- `/tasks/exit` of a task's init process: a container exited, or a sandbox's pause process
  (containerd runs it as the task whose ID is the sandbox ID);
- `/tasks/oom`: the OOM killer acted in a container's memory cgroup (the exit follows);
- `/containers/delete`: a container or sandbox was removed.

Task starts and container creations are left out on purpose: in the `k8s.io` namespace they
are the agent's own actions, whose results the pod worker reads itself right after them
(`Relister.refresh_pod`); one made by someone else belongs to a pod no source wants and is found
by the safety-net relist. Exits of exec'd processes (ExecSync, exec probes) carry the exec ID as
their process ID and are ignored.

CRI answers from containerd's CRI plugin, which learns about an exit from the same event
stream: right after the event, a CRI list may still say RUNNING / READY. `settled` says whether
a pod's runtime state read after the event already shows it, so the reader knows to read again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from nodelet.model.core import runtime

# The containerd namespace of CRI's sandboxes, containers and their events.
CRI_NAMESPACE = "k8s.io"


class Kind(enum.Enum):
    TASK_EXIT = "/tasks/exit"
    TASK_OOM = "/tasks/oom"
    CONTAINER_DELETE = "/containers/delete"


# The topics subscribed to, in a stable order.
TOPICS = tuple(kind.value for kind in Kind)


@dataclass(frozen=True)
class RuntimeEvent:
    """One event about a containerd container (a CRI container or sandbox: same ID).

    `process_id` is the exited process (TASK_EXIT only): the container ID for the init process,
    an exec ID otherwise. `exited_at` and `timestamp` are Unix seconds (0: not given).
    """

    kind: Kind
    object_id: str
    process_id: str = ""
    exit_status: int = 0
    exited_at: float = 0.0
    timestamp: float = 0.0


def subscription_filters(namespace: str, topics: tuple[str, ...] = TOPICS) -> list[str]:
    """containerd filter expressions for `topics` in `namespace` (one filter per topic: the
    filters are alternatives, the conditions inside one filter must all hold)."""
    return [f'namespace=="{namespace}",topic=="{topic}"' for topic in topics]


def concerns_pod(event: RuntimeEvent) -> bool:
    """Whether the event may change a pod's runtime state (an exec process's exit does not)."""
    if event.kind is Kind.TASK_EXIT:
        return event.process_id in ("", event.object_id)
    return bool(event.object_id)


def settled(event: RuntimeEvent, state: runtime.PodRuntime) -> bool:
    """Whether `state`, read after `event`, already shows it (see the module docstring)."""
    sandbox = next((s for s in state.sandboxes if s.id == event.object_id), None)
    container = next((c for c in state.containers if c.id == event.object_id), None)
    if event.kind is Kind.CONTAINER_DELETE:
        return sandbox is None and container is None
    if event.kind is Kind.TASK_EXIT:
        if sandbox is not None:
            return sandbox.state is not runtime.SandboxState.READY
        if container is not None:
            return container.state is not runtime.ContainerState.RUNNING
    return True


def container_name(event: RuntimeEvent, state: runtime.PodRuntime) -> str:
    """The CRI container name of the event's container ("" for a sandbox or unknown ID)."""
    for container in state.containers:
        if container.id == event.object_id:
            return container.name
    return ""


def is_sandbox(event: RuntimeEvent, state: runtime.PodRuntime) -> bool:
    """Whether the event is about one of the pod's sandboxes (its pause task).

    An OOM in a pod whose memory is limited arrives for the container and, on cgroup v1, for
    the pause task too (the pod's cgroup ran out as well): only the container's is reported.
    """
    return any(s.id == event.object_id for s in state.sandboxes)


def oom_message(container: str) -> str:
    """The message of the OOMKilling event, in the kernel's words (as node-problem-detector
    passes them on) and naming the container ("" when the event named no known container)."""
    victim = f"container {container}" if container else "a process of the pod"
    return f"Memory cgroup out of memory: killed {victim}"


# CRI's GetContainerEvents (containerd 1.7+, the source of the kubelet's Evented PLEG): the
# event types by their CRI names.
CRI_STOPPED = "CONTAINER_STOPPED_EVENT"
CRI_DELETED = "CONTAINER_DELETED_EVENT"
OOM_KILLED = "OOMKilled"


def from_cri(event_type: str, object_id: str, *, exit_code: int = 0, reason: str = "",
             at: float = 0.0) -> tuple[RuntimeEvent, ...]:
    """One CRI container event (`object_id`: a container's or a sandbox's ID) as the events
    above: a stop is its init process's exit, after an OOM kill when the container's status
    says OOMKilled (CRI has no OOM event of its own); a deletion is a deletion. Creations and
    starts are the agent's own actions (module docstring) and give none. containerd sends a
    CRI event after its CRI store changed, so `settled` holds at once."""
    if event_type == CRI_STOPPED:
        exit_ = RuntimeEvent(Kind.TASK_EXIT, object_id, process_id=object_id,
                             exit_status=exit_code, exited_at=at, timestamp=at)
        oom = RuntimeEvent(Kind.TASK_OOM, object_id, timestamp=at)
        return (oom, exit_) if reason == OOM_KILLED else (exit_,)
    if event_type == CRI_DELETED:
        return (RuntimeEvent(Kind.CONTAINER_DELETE, object_id, timestamp=at),)
    return ()
