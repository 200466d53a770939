"""In-place pod resize (KEP-1287, GA in 1.35; pod-level resources KEP-2837), as the kubelet
does it (pure).

A resize arrives as a pod whose resources (containers', init containers', `spec.resources`)
differ from what the node **allocated** to it. The node first admits the new amounts against
the other pods (`allocated` then follows the spec; a misfit leaves the allocation as it was,
with PodResizePending reason Deferred), then **actuates** them: the pod cgroup and each running
container's cgroup through CRI UpdateContainerResources, or a restart for a resource whose
resizePolicy is RestartContainer. While what runs differs from the allocation the pod carries
PodResizeInProgress; an actuation that fails (a memory limit below what is in use) leaves it
with reason Error and the message.

The order of the writes is the kubelet's (doPodResizeAction): memory before cpu; within each,
the pod cgroup's limit grows before the containers change and shrinks after them, and the
containers that shrink go before those that grow, so that no child's limit ever exceeds its
parent's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from nodelet.model.core import pods, resources, runtime, specs, status

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
DEFERRED = "Deferred"
INFEASIBLE = "Infeasible"
ERROR = "Error"
# The kubelet's event reasons (pkg/kubelet/events).
STARTED_EVENT = "ResizeStarted"
COMPLETED_EVENT = "ResizeCompleted"
ERROR_EVENT = "ResizeError"
DEFERRED_EVENT = "ResizeDeferred"
INFEASIBLE_EVENT = "ResizeInfeasible"

Resource = Literal["memory", "cpu"]


@dataclass(frozen=True)
class Allocation:
    """What the node gave the pod: each container's resources by name, and the pod level."""

    containers: Mapping[str, pods.Resources]
    pod: pods.Resources | None = None


@dataclass(frozen=True)
class Condition:
    """A resize condition's content (both conditions are True while present)."""

    reason: str
    message: str
    generation: int


def allocation(pod: pods.Pod) -> Allocation:
    """The amounts the pod's spec asks for."""
    return Allocation({c.name: c.resources for c in (*pod.spec.init_containers,
                                                    *pod.spec.containers)},
                      pod.spec.resources)


def allocated_pod(pod: pods.Pod, given: Allocation) -> pods.Pod:
    """`pod` as the node runs it: its resources replaced by the allocation (the kubelet's
    allocated pod). A container the allocation lacks keeps its own."""
    if allocation(pod) == given:
        return pod

    def own(c: pods.Container) -> pods.Container:
        return dataclasses.replace(c, resources=given.containers.get(c.name, c.resources))

    spec = dataclasses.replace(
        pod.spec, containers=tuple(map(own, pod.spec.containers)),
        init_containers=tuple(map(own, pod.spec.init_containers)), resources=given.pod)
    return dataclasses.replace(pod, spec=spec)


def differs(a: pods.Resources, b: pods.Resources, resource: Resource) -> bool:
    if resource == "cpu":
        return (a.cpu_request_milli, a.cpu_limit_milli) != (b.cpu_request_milli,
                                                            b.cpu_limit_milli)
    return (a.memory_request, a.memory_limit) != (b.memory_request, b.memory_limit)


def needs_restart(container: pods.Container, running: pods.Resources,
                  wanted: pods.Resources) -> bool:
    """A resource that changes has resizePolicy RestartContainer."""
    return any(differs(running, wanted, r) for r in ("cpu", "memory")
               if r in container.restart_on_resize)


@dataclass(frozen=True)
class PodWrite:
    """A write of the pod cgroup: memory limit, or cpu shares and quota (None: unlimited)."""

    resource: Resource
    cgroup: specs.PodCgroup


@dataclass(frozen=True)
class ContainerWrite:
    """CRI UpdateContainerResources of one running container with `resources` (the other
    resource at what it had before this step)."""

    container_id: runtime.ContainerID
    name: str
    resources: pods.Resources


Step = PodWrite | ContainerWrite


@dataclass(frozen=True)
class Running:
    """A running container that can be resized: its ID and what its cgroup has."""

    container: pods.Container
    container_id: runtime.ContainerID
    actuated: pods.Resources


def plan(pod_cgroup_now: specs.PodCgroup | None, pod_cgroup_wanted: specs.PodCgroup,
         running: Sequence[Running], wanted: Mapping[str, pods.Resources]) -> list[Step]:
    """The writes that take the pod from what runs to what is allocated, in the kubelet's
    order (module docstring). `wanted`: each container's effective resources."""
    steps: list[Step] = []
    current = {r.container_id: r.actuated for r in running}
    for resource in ("memory", "cpu"):
        grow, shrink = _pod_direction(pod_cgroup_now, pod_cgroup_wanted, resource)
        if grow:
            steps.append(PodWrite(resource, pod_cgroup_wanted))
        changes = []
        for r in running:
            target = wanted[r.container.name]
            if not differs(current[r.container_id], target, resource):
                continue
            new = _with(current[r.container_id], target, resource)
            bigger = _amount(new, resource) >= _amount(current[r.container_id], resource)
            changes.append((bigger, ContainerWrite(r.container_id, r.container.name, new)))
            current[r.container_id] = new
        steps.extend(write for _, write in sorted(changes, key=lambda c: c[0]))
        if shrink:
            steps.append(PodWrite(resource, pod_cgroup_wanted))
    return steps


def _with(now: pods.Resources, target: pods.Resources, resource: Resource) -> pods.Resources:
    if resource == "cpu":
        return dataclasses.replace(now, cpu_request_milli=target.cpu_request_milli,
                                   cpu_limit_milli=target.cpu_limit_milli)
    return dataclasses.replace(now, memory_request=target.memory_request,
                               memory_limit=target.memory_limit)


def _amount(r: pods.Resources, resource: Resource) -> tuple[int, int]:
    """Limit first (0: unlimited, the largest), then request."""
    if resource == "cpu":
        return (r.cpu_limit_milli or 1 << 62, r.cpu_request_milli)
    return (r.memory_limit or 1 << 62, r.memory_request)


def _pod_direction(now: specs.PodCgroup | None, wanted: specs.PodCgroup,
                   resource: Resource) -> tuple[bool, bool]:
    """(write before the containers, write after them) for the pod cgroup."""
    if now is None:
        return False, False
    if resource == "memory":
        before, after = now.memory_limit or 1 << 62, wanted.memory_limit or 1 << 62
        return after > before, after < before
    if (now.cpu_shares, now.cpu_quota_us) == (wanted.cpu_shares, wanted.cpu_quota_us):
        return False, False
    before_q, after_q = now.cpu_quota_us or 1 << 62, wanted.cpu_quota_us or 1 << 62
    if after_q != before_q:
        return after_q > before_q, after_q < before_q
    return wanted.cpu_shares > now.cpu_shares, wanted.cpu_shares < now.cpu_shares


def memory_decreases(pod_cgroup_now: specs.PodCgroup | None,
                     pod_cgroup_wanted: specs.PodCgroup,
                     steps: Sequence[Step],
                     actuated: Mapping[runtime.ContainerID, pods.Resources]
                     ) -> tuple[int | None, dict[runtime.ContainerID, int]]:
    """The memory limits this plan lowers or adds, which must stay above what is in use
    (validateMemoryResizeAction): the pod's new limit (None: not lowered) and each
    container's by ID."""
    pod_limit = None
    if any(isinstance(s, PodWrite) and s.resource == "memory" for s in steps) and \
            pod_cgroup_wanted.memory_limit and (
                pod_cgroup_now is None or not pod_cgroup_now.memory_limit
                or pod_cgroup_wanted.memory_limit < pod_cgroup_now.memory_limit):
        pod_limit = pod_cgroup_wanted.memory_limit
    containers = {}
    for step in steps:
        if isinstance(step, ContainerWrite) and step.resources.memory_limit:
            before = actuated[step.container_id].memory_limit
            if not before or step.resources.memory_limit < before:
                containers[step.container_id] = step.resources.memory_limit
    return pod_limit, containers


def usage_error(pod_limit: int | None, pod_usage: int | None,
                containers: Mapping[runtime.ContainerID, tuple[str, int, int | None]]) -> str:
    """The kubelet's refusal of limits below use ("" when none): `containers` maps an ID to
    (name, new limit, usage)."""
    errors = []
    if pod_limit is not None:
        if pod_usage is None:
            errors.append("missing pod memory usage")
        elif pod_usage >= pod_limit:
            errors.append(f"attempting to set pod memory limit ({pod_limit}) below current "
                          f"usage ({pod_usage})")
    for name, limit, used in containers.values():
        if used is None:
            errors.append(f'missing container "{name}" memory usage')
        elif used >= limit:
            errors.append(f'attempting to set container "{name}" memory limit ({limit}) below '
                          f"current usage ({used})")
    if not errors:
        return ""
    shown = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f"cannot decrease memory limits: {shown}"


def event_message(prefix: str, pod: pods.Pod, generation: int, error: str = "") -> str:
    """The kubelet's resize event message: `<prefix>: {"initContainers":[...],
    "containers":[...],"generation":N,"error":"..."}` with each container's resources as
    allocated (pod-level resources are not in it, as in 1.37)."""
    summary: dict[str, object] = {}
    for key, containers in (("initContainers", pod.spec.init_containers),
                            ("containers", pod.spec.containers)):
        if containers:
            summary[key] = [{"name": c.name, "resources": _written(c.resources)}
                            for c in containers]
    summary["generation"] = generation
    if error:
        summary["error"] = error
    return f"{prefix}: {json.dumps(summary, separators=(',', ':'))}"


def _written(r: pods.Resources) -> dict[str, dict[str, str]]:
    return {key: dict(sorted(values.items())) for key, values in sorted(r.written.items())}


# -- status ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """What the status says of resources: the allocated pod, what the running containers'
    cgroups have (each container's own resources as applied, by name) and the pod level as
    applied, and the two conditions' contents (None: absent)."""

    allocated: pods.Pod
    actuated: Mapping[str, pods.Resources] = dataclasses.field(default_factory=dict)
    pod_actuated: pods.Resources | None = None
    pending: Condition | None = None
    in_progress: Condition | None = None


def container_status(s: status.ContainerStatus, view: View) -> status.ContainerStatus:
    """allocatedResources (the allocated requests; absent without any) and resources (what
    the cgroup has for a running container, the allocation otherwise; {} for none)."""
    found = next((c for c in (*view.allocated.spec.init_containers,
                              *view.allocated.spec.containers) if c.name == s.name), None)
    if found is None:
        return s
    running = isinstance(s.state, status.ContainerStateRunning)
    shown = view.actuated.get(s.name, found.resources) if running else found.resources
    # `resources` only for a container the runtime has made: the kubelet fills it from the
    # runtime's status (convertContainerStatusResources), none before.
    return dataclasses.replace(
        s, allocated_resources=dict(found.resources.written.get("requests", {})) or None,
        resources=_written(shown) if s.container_id else None)


def pod_allocated(pod: pods.Pod) -> dict[str, str]:
    """status.allocatedResources: the pod's requests (PodRequests), the pod-level ones as
    written."""
    out = {name: _quantity(name, value) for name, value in resources.pod_requests(pod).items()}
    if pod.spec.resources is not None:  # as written, unless the overhead was added to it
        out.update((name, text) for name, text in
                   pod.spec.resources.written.get("requests", {}).items()
                   if name not in pod.spec.overhead)
    return dict(sorted(out.items()))


def pod_resources(pod: pods.Pod, actuated: pods.Resources | None) -> dict[str, dict[str, str]]:
    """status.resources: the pod-level requirements in effect (as applied), or the pod's
    requests and limits added up from its containers'."""
    if actuated is not None and actuated.written:
        return _written(actuated)
    out = {}
    limits = {n: _quantity(n, v) for n, v in resources.pod_limits(pod).items()}
    requests = {n: _quantity(n, v) for n, v in resources.pod_requests(pod).items()
                if n in ("cpu", "memory")}
    if limits:
        out["limits"] = dict(sorted(limits.items()))
    if requests:
        out["requests"] = dict(sorted(requests.items()))
    return out


def _quantity(name: str, value: int) -> str:
    """A canonical quantity: cpu in millicores, bytes in the largest binary unit that divides
    them (as a sum of "64Mi" quantities prints)."""
    if name == "cpu":
        return f"{value}m"
    for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def conditions(view: View) -> tuple[status.PodCondition, ...]:
    """PodResizePending and PodResizeInProgress (True while present)."""
    out = []
    for type_, cond in ((status.POD_RESIZE_PENDING, view.pending),
                        (status.POD_RESIZE_IN_PROGRESS, view.in_progress)):
        if cond is not None:
            out.append(status.PodCondition(
                type=type_, status="True", reason=cond.reason, message=cond.message,
                observed_generation=cond.generation))
    return tuple(out)
