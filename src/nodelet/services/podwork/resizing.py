"""In-place resize of a pod's running containers and its pod cgroup (the kubelet's allocation
manager and doPodResizeAction; the rules are `model.core.resize`).

Each sync of a pod first asks `allocate`: a pod whose resources differ from what the node
allocated to it is admitted again with the new amounts beside the other pods; if they fit the
allocation follows the spec (PodResizeInProgress, a ResizeStarted event), otherwise it stays
and PodResizePending says why (Deferred). The rest of the sync works on the allocated pod, so
containers start with what the node gave, not with a resize it could not take.

`actuate` then brings the running containers and the pod cgroup to the allocation: a
container whose changed resource has resizePolicy RestartContainer is stopped (the sync starts
it again), the others get CRI UpdateContainerResources and the pod cgroup is written, in the
kubelet's order. A memory limit below what is in use is refused (PodResizeInProgress reason
Error, a ResizeError event) and nothing is changed; once what runs is what was allocated the
condition goes and a ResizeCompleted event says so.

What runs is remembered per container ID (`PodWork.resize`): a container started by this
agent runs with the allocation of its start; one found running after an agent restart is
taken to run with the allocation (the agent keeps no checkpoint of it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nodelet.adapters import cgroups
from nodelet.adapters.cri import client as cri
from nodelet.model.core import admission, podactions, pods, qoscgroups, resize, runtime, specs
from nodelet.services.status import recording

log = logging.getLogger(__name__)


@dataclass
class ResizeWork:
    """A pod worker's memory of its resources."""

    allocation: resize.Allocation | None = None
    pending: resize.Condition | None = None
    in_progress: resize.Condition | None = None
    # Each running container's own and effective resources as its cgroup has them, by ID.
    actuated: dict[runtime.ContainerID, tuple[pods.Resources, pods.Resources]] = field(
        default_factory=dict)
    # The pod cgroup as last written, and the pod-level resources it was written from.
    pod_cgroup: specs.PodCgroup | None = None
    pod_actuated: pods.Resources | None = None


class Resizer:
    def __init__(self, *, client: cri.RuntimeClient, recorder: recording.EventRecorder,
                 node: Callable[[], admission.Node], cgroup_parent: Callable[[pods.Pod], str],
                 memory_capacity: int) -> None:
        """`node()`: what admission knows of this node; `cgroup_parent(pod)`: the pod cgroup;
        `memory_capacity`: the node's memory in bytes, which Burstable OOM scores weigh."""
        self._client = client
        self._memory_capacity = memory_capacity
        self._recorder = recorder
        self._node = node
        self._cgroup_parent = cgroup_parent

    # -- allocation ---------------------------------------------------------------------

    def allocate(self, pod: pods.Pod, work: ResizeWork,
                 others: Sequence[pods.Pod]) -> pods.Pod:
        """The pod as allocated, after admitting a resize of it beside `others`."""
        wanted = resize.allocation(pod)
        if work.allocation is None:
            work.allocation = wanted
        if wanted == work.allocation:
            work.pending = None
            return pod
        candidate = resize.allocated_pod(pod, wanted)
        rejection = admission.admit(candidate, self._node(), others)
        if rejection is not None:
            reason = resize.DEFERRED
            pending = resize.Condition(reason, rejection.message, pod.generation)
            if (work.pending and (work.pending.reason, work.pending.message)) != \
                    (reason, rejection.message):
                self._recorder.record(pod, "Warning", resize.DEFERRED_EVENT, resize.event_message(
                    f"Pod resize {rejection.reason}", candidate, pod.generation,
                    rejection.message))
            work.pending = pending
            return resize.allocated_pod(pod, work.allocation)
        work.allocation = wanted
        work.pending = None
        work.in_progress = resize.Condition("", "", pod.generation)
        self._recorder.record(pod, "Normal", resize.STARTED_EVENT, resize.event_message(
            "Pod resize started", pod, pod.generation))
        return pod

    # -- actuation ----------------------------------------------------------------------

    def pod_cgroup_written(self, pod: pods.Pod, work: ResizeWork) -> None:
        """The pod cgroup was made with the allocated pod's limits (before its sandbox)."""
        work.pod_cgroup = specs.pod_cgroup(pod)
        work.pod_actuated = pod.spec.resources

    def _running(self, pod: pods.Pod, state: runtime.PodRuntime,
                 work: ResizeWork) -> list[resize.Running]:
        if not state.sandboxes:
            return []
        sandbox = state.sandboxes[0].id
        out = []
        for container in (*pod.spec.init_containers, *pod.spec.containers):
            latest = podactions.latest_instance(state, sandbox, container.name)
            if latest is None or latest.state is not runtime.ContainerState.RUNNING:
                continue
            if latest.id not in work.actuated:  # started with the allocation of then: now's
                work.actuated[latest.id] = (container.resources,
                                            specs.effective_resources(pod, container))
            out.append(resize.Running(container, latest.id, work.actuated[latest.id][1]))
        live = {r.container_id for r in out}
        for gone in set(work.actuated) - live:
            del work.actuated[gone]
        return out

    async def actuate(self, pod: pods.Pod, state: runtime.PodRuntime,
                      work: ResizeWork) -> set[str]:
        """Bring the running containers and the pod cgroup to the allocation of `pod` (the
        allocated pod); returns the containers stopped for a restart."""
        running = self._running(pod, state, work)
        if work.pod_cgroup is None:
            work.pod_cgroup, work.pod_actuated = specs.pod_cgroup(pod), pod.spec.resources
        wanted = {c.name: specs.effective_resources(pod, c)
                  for c in (*pod.spec.init_containers, *pod.spec.containers)}
        restart = [r for r in running
                   if resize.needs_restart(r.container, r.actuated, wanted[r.container.name])]
        stopped = set()
        for r in restart:
            self._recorder.record(pod, "Normal", "Killing",
                                  f"Container {r.container.name} resize requires restart",
                                  container=r.container.name)
            await self._client.stop_container(r.container_id, int(podactions.grace_period(pod)))
            work.actuated.pop(r.container_id, None)
            stopped.add(r.container.name)
        rest = [r for r in running if r.container.name not in stopped]
        target = specs.pod_cgroup(pod)
        steps = resize.plan(work.pod_cgroup, target, rest, wanted)
        if steps and not await self._apply(pod, work, steps, target):
            return stopped
        if work.pod_cgroup != target:  # a change no step needed (a shares-only request)
            work.pod_cgroup = target
        work.pod_actuated = pod.spec.resources
        if work.in_progress is not None and not stopped:
            generation = work.in_progress.generation
            work.in_progress = None
            self._recorder.record(pod, "Normal", resize.COMPLETED_EVENT, resize.event_message(
                "Pod resize completed", pod, generation))
        return stopped

    async def _apply(self, pod: pods.Pod, work: ResizeWork, steps: list[resize.Step],
                     target: specs.PodCgroup) -> bool:
        parent = self._cgroup_parent(pod)
        actuated = {cid: effective for cid, (_, effective) in work.actuated.items()}
        pod_limit, lowered = resize.memory_decreases(work.pod_cgroup, target, steps, actuated)
        error = ""
        if pod_limit is not None or lowered:
            names = {s.container_id: s.name for s in steps
                     if isinstance(s, resize.ContainerWrite)}
            pod_usage = await asyncio.to_thread(cgroups.memory_usage, parent)
            usage = {cid: (names[cid], limit,
                           await asyncio.to_thread(cgroups.memory_usage, f"{parent}/{cid}"))
                     for cid, limit in lowered.items()}
            error = resize.usage_error(pod_limit, pod_usage, usage)
        if not error:
            try:
                await self._write(pod, work, steps, parent)
            except (OSError, cri.CriError) as exc:
                error = str(exc)
        if not error:
            return True
        generation = work.in_progress.generation if work.in_progress else pod.generation
        if work.in_progress is None or work.in_progress.message != error:
            self._recorder.record(pod, "Warning", resize.ERROR_EVENT, resize.event_message(
                "Pod resize error", pod, generation, error))
        work.in_progress = resize.Condition(resize.ERROR, error, generation)
        log.warning("resize of %s: %s", pod.full_name, error)
        return False

    async def _write(self, pod: pods.Pod, work: ResizeWork, steps: list[resize.Step],
                     parent: str) -> None:
        everything = {c.name: c for c in (*pod.spec.init_containers, *pod.spec.containers)}
        for step in steps:
            if isinstance(step, resize.PodWrite):
                limits = qoscgroups.pod_limits(step.cgroup)
                part = (qoscgroups.Limits(memory_limit=limits.memory_limit)
                        if step.resource == "memory" else
                        qoscgroups.Limits(cpu_shares=limits.cpu_shares,
                                          cpu_quota_us=limits.cpu_quota_us))
                await asyncio.to_thread(cgroups.apply, parent, part)
                work.pod_cgroup = _merged(work.pod_cgroup, step)
                continue
            container = everything[step.name]
            # With its OOM score, as the kubelet sends it: a Burstable score follows the
            # memory request.
            await self._client.update_container_resources(
                step.container_id, specs.cri_resources(step.resources, specs.oom_score_adj(
                    pod, container, self._memory_capacity)))
            work.actuated[step.container_id] = (container.resources, step.resources)

    def view(self, pod: pods.Pod, state: runtime.PodRuntime,
             work: ResizeWork) -> resize.View:
        """What the status shows of the allocation (`pod` is the allocated pod)."""
        running = {r.container.name: work.actuated[r.container_id][0]
                   for r in self._running(pod, state, work)}
        return resize.View(allocated=pod, actuated=running,
                           pod_actuated=work.pod_actuated if work.pod_cgroup else
                           pod.spec.resources,
                           pending=work.pending, in_progress=work.in_progress)


def _merged(now: specs.PodCgroup | None, step: resize.PodWrite) -> specs.PodCgroup:
    wanted = step.cgroup
    if now is None:
        return wanted
    if step.resource == "memory":
        return specs.PodCgroup(cpu_shares=now.cpu_shares, cpu_quota_us=now.cpu_quota_us,
                               memory_limit=wanted.memory_limit)
    return specs.PodCgroup(cpu_shares=wanted.cpu_shares, cpu_quota_us=wanted.cpu_quota_us,
                           memory_limit=now.memory_limit)
