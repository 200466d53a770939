"""Resource usage of the node, its pods and containers, and the kubelet's Summary API (pure).

The values are what the stats service gathers (CRI ListPodSandboxStats / ListContainerStats,
the node's cgroup and /proc files); `summary_to_api` renders them as the kubelet's
`/stats/summary` (k8s.io/kubelet/pkg/apis/stats/v1alpha1: `node`, `pods`, camelCase fields,
omitted when unknown). `cpu_rates` turns two cumulative CPU samples into `usageNanoCores`, as
the kubelet's CRI stats provider does between two scrapes. Times are nanoseconds since the
epoch, as CRI reports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from nodelet.model.core import apijson


@dataclass(frozen=True)
class Cpu:
    time_ns: int
    usage_core_ns: int | None = None
    usage_nano_cores: int | None = None


@dataclass(frozen=True)
class Memory:
    time_ns: int
    working_set: int | None = None
    usage: int | None = None
    rss: int | None = None
    available: int | None = None
    page_faults: int | None = None
    major_page_faults: int | None = None


@dataclass(frozen=True)
class Interface:
    name: str
    rx_bytes: int | None = None
    rx_errors: int | None = None
    tx_bytes: int | None = None
    tx_errors: int | None = None


@dataclass(frozen=True)
class Network:
    time_ns: int
    default: Interface | None = None
    others: tuple[Interface, ...] = ()


@dataclass(frozen=True)
class Fs:
    time_ns: int
    used: int | None = None
    inodes_used: int | None = None
    capacity: int | None = None
    available: int | None = None
    inodes: int | None = None
    inodes_free: int | None = None


@dataclass(frozen=True)
class ContainerUsage:
    """One running container (CRI ContainerStats, with the labels naming its pod)."""

    id: str
    name: str
    labels: Mapping[str, str]
    start_ns: int = 0
    cpu: Cpu | None = None
    memory: Memory | None = None
    rootfs: Fs | None = None
    logs: Fs | None = None


@dataclass(frozen=True)
class VolumeUsage:
    """One volume of a pod (the kubelet's VolumeStats): its pod volume name, the claim it
    comes from (namespace, name; empty for other volumes) and its file system's figures."""

    name: str
    fs: Fs
    claim: tuple[str, str] | None = None
    # Counted in the pod's ephemeral storage (the kubelet's IsLocalEphemeralVolume).
    local_ephemeral: bool = False


@dataclass(frozen=True)
class PodUsage:
    """One pod's sandbox: the pod cgroup's CPU and memory, its network namespace's interfaces,
    its process count, and its containers."""

    sandbox_id: str
    name: str
    namespace: str
    uid: str
    start_ns: int = 0
    cpu: Cpu | None = None
    memory: Memory | None = None
    network: Network | None = None
    process_count: int | None = None
    containers: tuple[ContainerUsage, ...] = ()
    ephemeral: Fs | None = None
    volumes: tuple[VolumeUsage, ...] = ()


@dataclass(frozen=True)
class SystemContainer:
    """A system container of the node (the kubelet's `pods`: the cgroup all pods are in)."""

    name: str
    start_ns: int
    cpu: Cpu | None = None
    memory: Memory | None = None


@dataclass(frozen=True)
class NodeUsage:
    name: str
    start_ns: int
    cpu: Cpu | None = None
    memory: Memory | None = None
    network: Network | None = None
    fs: Fs | None = None
    # The runtime's filesystems (CRI ImageFsInfo): images, and containers' writable layers
    # (the same one unless the runtime splits them).
    image_fs: Fs | None = None
    container_fs: Fs | None = None
    max_pids: int | None = None
    cur_procs: int | None = None
    system_containers: tuple[SystemContainer, ...] = ()


@dataclass(frozen=True)
class Summary:
    node: NodeUsage
    pods: tuple[PodUsage, ...] = field(default_factory=tuple)


# -- what the kubelet adds to the runtime's figures ----------------------------------------------


def running_only(pod: PodUsage, running: Set[str]) -> PodUsage:
    """The pod with only its running containers (by ID), as the kubelet reports them
    (removeTerminatedContainers): the exited instance of a restarted container is not listed
    beside the new one under the same name."""
    return replace(pod, containers=tuple(c for c in pod.containers if c.id in running))


def on_filesystem(used: Fs | None, info: Fs | None) -> Fs | None:
    """What `used` says is used (bytes, inodes) with the size and free space of the
    filesystem it is on (`info`), as the kubelet completes a container's rootfs and logs."""
    if used is None or info is None:
        return used
    return replace(used, capacity=info.capacity, available=info.available,
                   inodes=info.inodes, inodes_free=info.inodes_free)


def ephemeral_storage(containers: Sequence[ContainerUsage], info: Fs | None,
                      volumes: Sequence[VolumeUsage] = ()) -> Fs | None:
    """The pod's ephemeral-storage as the kubelet adds it up (calcEphemeralStorage): each
    container's writable layer and logs and the local ephemeral volumes, on the filesystem
    `info`."""
    if info is None:
        return None
    used = [fs for c in containers for fs in (c.rootfs, c.logs) if fs is not None]
    used += [v.fs for v in volumes if v.local_ephemeral]
    return replace(info, time_ns=max([info.time_ns, *(fs.time_ns for fs in used)]),
                   used=sum(fs.used or 0 for fs in used),
                   inodes_used=sum(fs.inodes_used or 0 for fs in used))


# -- CPU rates -----------------------------------------------------------------------------------


def cpu_rate(previous: Cpu | None, current: Cpu | None) -> Cpu | None:
    """`current` with `usage_nano_cores` from the cumulative usage since `previous`; as the
    runtime gave it when there is no earlier sample to compare (containerd 1.6 says 0 for its
    own first sample, so a runtime's 0 without a previous sample of ours counts as unknown)."""
    if current is None:
        return current
    if previous is None:
        return current if current.usage_nano_cores else replace(current, usage_nano_cores=None)
    elapsed = current.time_ns - previous.time_ns
    if current.usage_core_ns is None or previous.usage_core_ns is None or elapsed <= 0 \
            or current.usage_core_ns < previous.usage_core_ns:
        return current if current.usage_nano_cores else replace(current, usage_nano_cores=None)
    used = current.usage_core_ns - previous.usage_core_ns
    return replace(current, usage_nano_cores=used * 1_000_000_000 // elapsed)


def with_rates(summary: Summary, previous: Summary | None) -> Summary:
    """Every CPU figure of `summary` with its rate against the same object in `previous`."""
    if previous is None:
        return summary
    old_pods = {p.sandbox_id: p for p in previous.pods}
    pods = []
    for pod in summary.pods:
        old = old_pods.get(pod.sandbox_id)
        old_containers = {c.id: c for c in old.containers} if old else {}
        containers = tuple(
            replace(c, cpu=cpu_rate(old_containers[c.id].cpu if c.id in old_containers
                                    else None, c.cpu))
            for c in pod.containers)
        pods.append(replace(pod, cpu=cpu_rate(old.cpu if old else None, pod.cpu),
                            containers=containers))
    old_system = {c.name: c for c in previous.node.system_containers}
    system = tuple(replace(c, cpu=cpu_rate(old_system[c.name].cpu if c.name in old_system
                                           else None, c.cpu))
                   for c in summary.node.system_containers)
    node = replace(summary.node, cpu=cpu_rate(previous.node.cpu, summary.node.cpu),
                   system_containers=system)
    return Summary(node=node, pods=tuple(pods))


# -- JSON ----------------------------------------------------------------------------------------


def _time(ns: int) -> str:
    """RFC 3339 with whole seconds, as metav1.Time is serialised."""
    return datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields(time_ns: int, pairs: Sequence[tuple[str, int | None]]) -> apijson.Obj:
    body: apijson.Obj = {"time": _time(time_ns)}
    body.update({name: value for name, value in pairs if value is not None})
    return body


def cpu_to_api(cpu: Cpu) -> apijson.Obj:
    return _fields(cpu.time_ns, [("usageNanoCores", cpu.usage_nano_cores),
                                 ("usageCoreNanoSeconds", cpu.usage_core_ns)])


def memory_to_api(memory: Memory) -> apijson.Obj:
    return _fields(memory.time_ns, [
        ("availableBytes", memory.available), ("usageBytes", memory.usage),
        ("workingSetBytes", memory.working_set), ("rssBytes", memory.rss),
        ("pageFaults", memory.page_faults), ("majorPageFaults", memory.major_page_faults)])


def fs_to_api(fs: Fs) -> apijson.Obj:
    return _fields(fs.time_ns, [
        ("availableBytes", fs.available), ("capacityBytes", fs.capacity),
        ("usedBytes", fs.used), ("inodesFree", fs.inodes_free), ("inodes", fs.inodes),
        ("inodesUsed", fs.inodes_used)])


def _interface(interface: Interface) -> apijson.Obj:
    body: apijson.Obj = {"name": interface.name}
    body.update({k: v for k, v in (("rxBytes", interface.rx_bytes),
                                   ("rxErrors", interface.rx_errors),
                                   ("txBytes", interface.tx_bytes),
                                   ("txErrors", interface.tx_errors)) if v is not None})
    return body


def network_to_api(network: Network) -> apijson.Obj:
    """The default interface's figures inline (as the kubelet's NetworkStats embeds them),
    and every interface, the default one first, under `interfaces`."""
    body: apijson.Obj = {"time": _time(network.time_ns)}
    if network.default is not None:
        body.update(_interface(network.default))
    every = ((network.default,) if network.default else ()) + network.others
    if every:
        body["interfaces"] = [_interface(i) for i in every]
    return body


def _optional(body: apijson.Obj, key: str, value: Any, render: Any) -> None:
    if value is not None:
        body[key] = render(value)


def volume_to_api(volume: VolumeUsage) -> apijson.Obj:
    body = fs_to_api(volume.fs) | {"name": volume.name}
    if volume.claim is not None:
        body["pvcRef"] = {"name": volume.claim[1], "namespace": volume.claim[0]}
    return body


def container_to_api(container: ContainerUsage) -> apijson.Obj:
    body: apijson.Obj = {"name": container.name, "startTime": _time(container.start_ns)}
    _optional(body, "cpu", container.cpu, cpu_to_api)
    _optional(body, "memory", container.memory, memory_to_api)
    _optional(body, "rootfs", container.rootfs, fs_to_api)
    _optional(body, "logs", container.logs, fs_to_api)
    return body


def pod_to_api(pod: PodUsage) -> apijson.Obj:
    body: apijson.Obj = {
        "podRef": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "startTime": _time(pod.start_ns),
        "containers": [container_to_api(c) for c in sorted(pod.containers,
                                                           key=lambda c: c.name)],
    }
    _optional(body, "cpu", pod.cpu, cpu_to_api)
    _optional(body, "memory", pod.memory, memory_to_api)
    _optional(body, "network", pod.network, network_to_api)
    _optional(body, "ephemeral-storage", pod.ephemeral, fs_to_api)
    if pod.volumes:
        body["volume"] = [volume_to_api(v) for v in sorted(pod.volumes, key=lambda v: v.name)]
    if pod.process_count is not None:
        body["process_stats"] = {"process_count": pod.process_count}
    return body


def system_container_to_api(container: SystemContainer) -> apijson.Obj:
    body: apijson.Obj = {"name": container.name, "startTime": _time(container.start_ns)}
    _optional(body, "cpu", container.cpu, cpu_to_api)
    _optional(body, "memory", container.memory, memory_to_api)
    return body


def node_to_api(node: NodeUsage) -> apijson.Obj:
    body: apijson.Obj = {"nodeName": node.name, "startTime": _time(node.start_ns)}
    if node.system_containers:
        body["systemContainers"] = [system_container_to_api(c)
                                    for c in sorted(node.system_containers,
                                                    key=lambda c: c.name)]
    _optional(body, "cpu", node.cpu, cpu_to_api)
    _optional(body, "memory", node.memory, memory_to_api)
    _optional(body, "network", node.network, network_to_api)
    _optional(body, "fs", node.fs, fs_to_api)
    if node.image_fs is not None:
        body["runtime"] = {"imageFs": fs_to_api(node.image_fs),
                           "containerFs": fs_to_api(node.container_fs or node.image_fs)}
    if node.max_pids is not None and node.cur_procs is not None:
        body["rlimit"] = {"time": _time(node.start_ns if node.cpu is None else node.cpu.time_ns),
                          "maxpid": node.max_pids, "curproc": node.cur_procs}
    return body


def summary_to_api(summary: Summary) -> apijson.Obj:
    """The kubelet's `/stats/summary` body."""
    pods = sorted(summary.pods, key=lambda p: (p.namespace, p.name))
    return {"node": node_to_api(summary.node), "pods": [pod_to_api(p) for p in pods]}


# -- `nodelet top` -------------------------------------------------------------------------------


def cores_text(nano_cores: int | None) -> str:
    """`kubectl top`'s CPU column: millicores (`12m`), `<unknown>` without a rate."""
    return "<unknown>" if nano_cores is None else f"{nano_cores // 1_000_000}m"


def bytes_text(value: int | None) -> str:
    """`kubectl top`'s memory column: mebibytes (`5Mi`)."""
    return "<unknown>" if value is None else f"{value // (1024 * 1024)}Mi"


# -- /metrics/resource ---------------------------------------------------------------------------

_RESOURCE_HELP = (
    ("container_cpu_usage_seconds_total", "counter",
     "[STABLE] Cumulative cpu time consumed by the container in core-seconds"),
    ("container_memory_working_set_bytes", "gauge",
     "[STABLE] Current working set of the container in bytes"),
    ("container_start_time_seconds", "gauge",
     "[STABLE] Start time of the container since unix epoch in seconds"),
    ("node_cpu_usage_seconds_total", "counter",
     "[STABLE] Cumulative cpu time consumed by the node in core-seconds"),
    ("node_memory_working_set_bytes", "gauge",
     "[STABLE] Current working set of the node in bytes"),
    ("pod_cpu_usage_seconds_total", "counter",
     "[STABLE] Cumulative cpu time consumed by the pod in core-seconds"),
    ("pod_memory_working_set_bytes", "gauge",
     "[STABLE] Current working set of the pod in bytes"),
    ("scrape_error", "gauge",
     "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise"),
)


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: Mapping[str, str], value: float, time_ns: int) -> str:
    inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
    # Shortest exact form, as Prometheus' Go client writes floats; integers as integers.
    shown = str(int(value)) if float(value).is_integer() else repr(float(value))
    return f"{name}{{{inner}}} {shown} {time_ns // 1_000_000}" if inner \
        else f"{name} {shown} {time_ns // 1_000_000}"


def _usage_samples(prefix: str, labels: Mapping[str, str], cpu: Cpu | None,
                   memory: Memory | None) -> list[str]:
    samples = []
    if cpu is not None and cpu.usage_core_ns is not None:
        samples.append(_sample(f"{prefix}_cpu_usage_seconds_total", labels,
                               cpu.usage_core_ns / 1e9, cpu.time_ns))
    if memory is not None and memory.working_set is not None:
        samples.append(_sample(f"{prefix}_memory_working_set_bytes", labels,
                               memory.working_set, memory.time_ns))
    return samples


def resource_metrics_text(summary: Summary) -> str:
    """The kubelet's `/metrics/resource` (what metrics-server scrapes), in Prometheus text."""
    samples = _usage_samples("node", {}, summary.node.cpu, summary.node.memory)
    for pod in sorted(summary.pods, key=lambda p: (p.namespace, p.name)):
        pod_labels = {"namespace": pod.namespace, "pod": pod.name}
        samples += _usage_samples("pod", pod_labels, pod.cpu, pod.memory)
        for container in sorted(pod.containers, key=lambda c: c.name):
            labels = {"container": container.name, **pod_labels}
            samples += _usage_samples("container", labels, container.cpu, container.memory)
            if container.start_ns:
                samples.append(_sample("container_start_time_seconds", labels,
                                       container.start_ns / 1e9, container.start_ns))
    lines = []
    for name, kind, text in _RESOURCE_HELP:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        lines += [s for s in samples if s.split("{")[0].split(" ")[0] == name]
    lines.append("scrape_error 0")
    return "\n".join(lines) + "\n"
