"""What nodelet asks the runtime for, derived from a pod (pure).

The sandbox and container configs carry the kubelet's CRI labels so that sandboxes and
containers can be matched back to their pod after an agent restart, and the same log layout
(`<log dir>/<container>/<attempt>.log`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

from nodelet.helpers import errors
from nodelet.model.core import envvars, pods, resources, runtime
from nodelet.model.core import security as security_mod

ANNOTATION_RESTART_COUNT = "io.kubernetes.container.restartCount"
ANNOTATION_GRACE_PERIOD = "io.kubernetes.pod.terminationGracePeriod"
# What an instance was created from, to tell when the spec changed under it (the kubelet's
# annotation of the same name holds a hash of the whole container spec; of a running pod's
# containers the API lets only the image change, so that is what the hash covers here).
ANNOTATION_CONTAINER_HASH = "io.kubernetes.container.hash"


def definition_hash(container: pods.Container) -> str:
    """The hash of what may change in a created pod's container: its image."""
    return hashlib.sha256(container.image.encode()).hexdigest()[:8]
LABEL_CONTAINER_KIND = "io.nodelet.container.kind"  # "init" or "regular"

# The CFS period the kubelet uses when mapping CPU limits to a quota (100 ms in µs).
CPU_PERIOD_US = 100_000
# The kubelet's bounds (pkg/kubelet/cm: MinShares, MaxShares, MinQuotaPeriod): the kernel
# refuses shares above 262144 and quotas under 1 ms.
MIN_CPU_SHARES = 2
MAX_CPU_SHARES = 262_144
MIN_CPU_QUOTA_US = 1_000
# The largest quota the kernel takes (max_cfs_runtime, 2^44 - 1 µs: some 17 million CPUs at
# this period): a larger limit is no limit on any machine, and would fail CreateContainer.
MAX_CPU_QUOTA_US = 2**44 - 1


def pod_labels(pod: pods.Pod) -> dict[str, str]:
    """The sandbox labels: the pod's own labels plus the kubelet's CRI labels."""
    labels = dict(pod.labels)
    labels[runtime.LABEL_POD_NAME] = pod.name
    labels[runtime.LABEL_POD_NAMESPACE] = pod.namespace
    labels[runtime.LABEL_POD_UID] = pod.uid
    return labels


def pod_log_directory(logs_root: Path, pod: pods.Pod) -> str:
    """`<root>/<namespace>_<name>_<uid>`, as the kubelet lays out /var/log/pods."""
    return str(logs_root / f"{pod.namespace}_{pod.name}_{pod.uid}")


def hostname(pod: pods.Pod) -> str:
    """The sandbox hostname; empty for hostNetwork pods, which share the node's UTS namespace
    (the kubelet leaves it unset too, and runc refuses to set one there)."""
    if pod.spec.host_network:
        return ""
    # A hostname is a DNS label: at most 63 characters, no trailing dash or dot. With
    # hostnameOverride the kubelet takes it as it is (truncated the same way).
    return (pod.spec.hostname_override or pod.spec.hostname or pod.name)[:63].rstrip("-.")


# The Linux nodename field holds 64 characters (the kubelet's GetNodenameForKernel).
MAX_FQDN_LENGTH = 64


class SandboxConfigError(errors.MessageError):
    """The pod's sandbox config cannot be generated; `message` is the kubelet's text."""


def kernel_hostname(pod: pods.Pod, cluster_domain: str) -> str:
    """The sandbox's hostname: `hostname(pod)`, or with `setHostnameAsFQDN` and a subdomain
    the FQDN `<hostname>.<subdomain>.<namespace>.svc.<cluster domain>` (the kubelet's
    GetNodenameForKernel; without a cluster domain the name ends in "svc.", as there).
    Raises SandboxConfigError when the FQDN is longer than 64 characters."""
    short = hostname(pod)
    if (not short or not pod.spec.set_hostname_as_fqdn or not pod.spec.subdomain
            or pod.spec.hostname_override):
        return short
    fqdn = f"{short}.{pod.spec.subdomain}.{pod.namespace}.svc.{cluster_domain}"
    if len(fqdn) > MAX_FQDN_LENGTH:
        raise SandboxConfigError(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN "
            f"{fqdn} is too long ({MAX_FQDN_LENGTH} characters is the max, {len(fqdn)} "
            "characters requested)")
    return fqdn


def port_mappings(pod: pods.Pod) -> tuple[runtime.PortMapping, ...]:
    return tuple(
        runtime.PortMapping(
            container_port=port.container_port,
            host_port=port.host_port,
            protocol=port.protocol,
            host_ip=port.host_ip,
        )
        for container in pod.spec.containers
        for port in container.ports
        if port.host_port
    )


@dataclass(frozen=True)
class PodCgroup:
    """The pod-level cgroup's limits, as the kubelet's ResourceConfigForPod sets them: CPU
    shares from the requests (2 for BestEffort), a CFS quota and a memory limit only when
    every container declares that limit (None: unlimited)."""

    cpu_shares: int
    cpu_quota_us: int | None = None
    memory_limit: int | None = None
    cpu_period_us: int = CPU_PERIOD_US


def pod_cgroup(pod: pods.Pod) -> PodCgroup:
    """ResourceConfigForPod: shares from the pod's requests, a quota and a memory limit when
    every container has that limit or the pod has it at pod level (spec.resources)."""
    everything = (*pod.spec.init_containers, *pod.spec.containers)
    requests = resources.pod_requests(pod)
    limits = resources.pod_limits(pod)
    if resources.qos_class(pod) == "BestEffort":
        return PodCgroup(cpu_shares=MIN_CPU_SHARES)
    level = pod.spec.resources.written.get("limits", {}) if pod.spec.resources else {}
    quota = cpu_quota(limits.get("cpu", 0)) if "cpu" in level or all(
        c.resources.cpu_limit_milli for c in everything) else None
    memory = limits.get("memory") if "memory" in level or all(
        c.resources.memory_limit for c in everything) else None
    return PodCgroup(cpu_shares=cpu_shares(requests.get("cpu", 0)), cpu_quota_us=quota or None,
                     memory_limit=memory or None)


def effective_resources(pod: pods.Pod, container: pods.Container) -> pods.Resources:
    """The container's resources as its cgroup gets them: with pod-level limits
    (spec.resources), a container without its own cpu or memory limit gets the pod's, and
    without a cpu request it is given that cpu limit (getCPULimit, getMemoryLimit)."""
    own = container.resources
    level = pod.spec.resources
    if level is None or not level.written:
        return own
    cpu_limit = own.cpu_limit_milli or level.cpu_limit_milli
    return dataclasses.replace(
        own, cpu_limit_milli=cpu_limit,
        cpu_request_milli=own.cpu_request_milli or cpu_limit,
        memory_limit=own.memory_limit or level.memory_limit)


def pod_cgroup_parent(pod: pods.Pod, cgroup_root: str = "/") -> str:
    """The pod-level cgroup (cgroupfs layout):
    <cgroup root>/kubepods[/burstable|/besteffort]/pod<uid> (`qoscgroups` has the levels)."""
    qos = resources.qos_class(pod)
    middle = "" if qos == "Guaranteed" else f"/{qos.lower()}"
    return f"{cgroup_root.rstrip('/')}/kubepods{middle}/pod{pod.uid}"


def sandbox_config(
    pod: pods.Pod,
    *,
    attempt: int,
    logs_root: Path,
    dns: runtime.DNSConfig | None = None,
    cgroup_parent: str = "",
    cluster_domain: str = "",
    user: runtime.UserNamespace | None = None,
) -> runtime.SandboxConfig:
    """`dns`: the pod's resolver configuration, as `dns.pod_dns` built it (None: none);
    `cluster_domain` ends a setHostnameAsFQDN hostname; `user`: the pod's user namespace
    (hostUsers: false). Raises SandboxConfigError."""
    return runtime.SandboxConfig(
        name=pod.name,
        namespace=pod.namespace,
        uid=pod.uid,
        attempt=attempt,
        hostname=kernel_hostname(pod, cluster_domain),
        log_directory=pod_log_directory(logs_root, pod),
        security=security_mod.sandbox_security(pod, user),
        dns=dns if dns is not None else runtime.DNSConfig(),
        port_mappings=port_mappings(pod),
        labels=pod_labels(pod),
        annotations=dict(pod.annotations),
        cgroup_parent=cgroup_parent,
    )


def cpu_shares(request_milli: int) -> int:
    """CPU shares for a request, as the kubelet's MilliCPUToShares (clamped to 2..262144)."""
    return min(max(request_milli * 1024 // 1000, MIN_CPU_SHARES), MAX_CPU_SHARES)


def cpu_quota(limit_milli: int) -> int:
    """The CFS quota (µs per CPU_PERIOD_US) for a limit, as MilliCPUToQuota; 0: no limit."""
    if not limit_milli:
        return 0
    return min(max(limit_milli * CPU_PERIOD_US // 1000, MIN_CPU_QUOTA_US), MAX_CPU_QUOTA_US)


# The kubelet's OOM score adjustments (pkg/kubelet/qos/policy.go).
GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000
# system-node-critical's priority: such pods are the last to be killed.
_NODE_CRITICAL_PRIORITY = 2_000_001_000


def cri_resources(resources_: pods.Resources, oom_score: int) -> runtime.LinuxResources:
    """A container's cgroup limits and OOM score as CRI carries them, at creation and at each
    resize (the kubelet's generateLinuxContainerResources): the minimum CPU shares when it
    has no resources."""
    return dataclasses.replace(
        linux_resources(resources_) or runtime.LinuxResources(cpu_shares=MIN_CPU_SHARES),
        oom_score_adj=oom_score)


def oom_score_adj(pod: pods.Pod, container: pods.Container, memory_capacity: int) -> int:
    """GetContainerOOMScoreAdjust: -997 for Guaranteed (and node-critical) pods, 1000 for
    BestEffort, and for Burstable 1000 - 1000 * request / capacity (the pod-level request
    beyond the containers' shared out among them; a sidecar no higher than the smallest app
    container), kept within 3..999."""
    if (pod.spec.priority or 0) >= _NODE_CRITICAL_PRIORITY:
        return GUARANTEED_OOM_SCORE_ADJ
    qos = resources.qos_class(pod)
    if qos == "Guaranteed":
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == "BestEffort" or memory_capacity <= 0:
        return BEST_EFFORT_OOM_SCORE_ADJ if qos == "BestEffort" else 999
    everything = (*pod.spec.init_containers, *pod.spec.containers)
    extra = 0
    level = pod.spec.resources
    if level is not None and "memory" in level.written.get("requests", {}):
        aggregate = resources.pod_amounts(pod, resources.container_requests).get("memory", 0)
        extra = max(level.memory_request - aggregate, 0) // len(everything)

    def adj(request: int) -> int:
        return 1000 - (1000 * (request + extra)) // memory_capacity

    score = adj(container.resources.memory_request)
    if container.restart_policy == "Always" and container in pod.spec.init_containers:
        score = min(score, adj(min(c.resources.memory_request for c in pod.spec.containers)))
    if score < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    return score - 1 if score == BEST_EFFORT_OOM_SCORE_ADJ else score


def linux_resources(resources: pods.Resources) -> runtime.LinuxResources | None:
    """Requests/limits → CRI resources, as the kubelet maps them (shares from the request)."""
    if resources.compute == (0, 0, 0, 0):
        return None
    quota = cpu_quota(resources.cpu_limit_milli)
    return runtime.LinuxResources(
        cpu_period=CPU_PERIOD_US if quota else 0,
        cpu_quota=quota,
        cpu_shares=cpu_shares(resources.cpu_request_milli),
        memory_limit_in_bytes=resources.memory_limit,
    )


def container_config(
    pod: pods.Pod,
    container: pods.Container,
    *,
    attempt: int,
    kind: str,
    mounts: tuple[runtime.Mount, ...] = (),
    security: runtime.ContainerSecurity | None = None,
    envs: tuple[tuple[str, str], ...] = (),
    memory_capacity: int = 0,
) -> runtime.ContainerConfig:
    """`envs` is the container's environment as `envvars.resolve` built it; `$(VAR)` references
    in command and args are expanded from it here, before CreateContainer, as the kubelet does;
    `memory_capacity` (the node's memory, bytes) sizes a Burstable container's OOM score."""
    command, args = envvars.command_and_args(container, dict(envs))
    labels = {
        runtime.LABEL_POD_NAME: pod.name,
        runtime.LABEL_POD_NAMESPACE: pod.namespace,
        runtime.LABEL_POD_UID: pod.uid,
        runtime.LABEL_CONTAINER_NAME: container.name,
        LABEL_CONTAINER_KIND: kind,
    }
    annotations = {
        ANNOTATION_RESTART_COUNT: str(attempt),
        ANNOTATION_GRACE_PERIOD: str(pod.spec.termination_grace_period_seconds),
        ANNOTATION_CONTAINER_HASH: definition_hash(container),
    }
    return runtime.ContainerConfig(
        name=container.name,
        attempt=attempt,
        image=container.image,
        log_path=f"{container.name}/{attempt}.log",
        command=command,
        args=args,
        working_dir=container.working_dir,
        envs=envs,
        mounts=tuple(m for m in mounts if not m.block_device),
        # makeBlockVolumes: read-only for a read-only claim, else read, write and mknod.
        devices=tuple(runtime.Device(m.container_path, m.host_path,
                                     "r" if m.readonly else "mrw")
                      for m in mounts if m.block_device),
        labels=labels,
        annotations=annotations,
        resources=cri_resources(effective_resources(pod, container),
                                oom_score_adj(pod, container, memory_capacity)),
        security=security,
        stdin=container.stdin,
        stdin_once=container.stdin_once,
        tty=container.tty,
        stop_signal=container.lifecycle.stop_signal,
    )
