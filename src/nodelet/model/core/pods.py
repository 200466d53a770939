"""Typed pods: the subset of the Kubernetes v1 Pod that nodelet acts on.

A `Pod` keeps the object it was parsed from (`raw`) so that the HTTP API can serve the pod as
the user wrote it (plus the kubelet's defaults and annotations); the typed fields are what the
pod workers and the status generation read. Parsing and validation live in `manifests.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NewType

from nodelet.model.core import affinity, handlers

PodUID = NewType("PodUID", str)

RestartPolicy = Literal["Always", "OnFailure", "Never"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
# A container's own restartPolicy ("" when not set): "Always" makes an init container a sidecar;
# any of them overrides the pod's for a regular one (ContainerRestartRules, `restarts`).
ContainerRestartPolicy = Literal["", "Always", "OnFailure", "Never"]
MessagePolicy = Literal["File", "FallbackToLogsOnError"]
# Where a pod came from: "file" for static pods, "api" for pods bound by the scheduler.
Source = Literal["file", "api"]

# Annotations of static pods, as the kubelet sets them.
ANNOTATION_CONFIG_SOURCE = "kubernetes.io/config.source"
ANNOTATION_CONFIG_HASH = "kubernetes.io/config.hash"
ANNOTATION_CONFIG_SEEN = "kubernetes.io/config.seen"
ANNOTATION_CONFIG_MIRROR = "kubernetes.io/config.mirror"


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str = ""
    # `valueFrom` as written (fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef).
    value_from: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class EnvFromSource:
    """One `envFrom` entry: every key of a ConfigMap or Secret, with an optional prefix."""

    kind: Literal["ConfigMap", "Secret"]
    name: str
    prefix: str = ""
    optional: bool = False


@dataclass(frozen=True)
class Capabilities:
    add: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()


@dataclass(frozen=True)
class SeccompProfile:
    """`seccompProfile` / `appArmorProfile`: RuntimeDefault, Unconfined or Localhost."""

    type: str
    localhost_profile: str = ""


@dataclass(frozen=True)
class SELinuxOptions:
    user: str = ""
    role: str = ""
    type: str = ""
    level: str = ""


@dataclass(frozen=True)
class SecurityContext:
    """A container's `securityContext`; None means "not set" (the pod's value or the default)."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    privileged: bool | None = None
    allow_privilege_escalation: bool | None = None
    read_only_root_filesystem: bool | None = None
    capabilities: Capabilities | None = None
    seccomp_profile: SeccompProfile | None = None
    app_armor_profile: SeccompProfile | None = None
    se_linux_options: SELinuxOptions | None = None
    proc_mount: str | None = None
    # Set only to be refused: nodelet runs Linux containers.
    windows_options: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PodSecurityContext:
    """The pod's `securityContext`: defaults for every container, plus pod-only settings."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    supplemental_groups: tuple[int, ...] = ()
    supplemental_groups_policy: str | None = None
    fs_group: int | None = None
    fs_group_change_policy: str | None = None
    sysctls: tuple[tuple[str, str], ...] = ()
    seccomp_profile: SeccompProfile | None = None
    app_armor_profile: SeccompProfile | None = None
    se_linux_options: SELinuxOptions | None = None
    se_linux_change_policy: str | None = None
    windows_options: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class HostAlias:
    ip: str
    hostnames: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContainerPort:
    container_port: int
    protocol: str = "TCP"
    host_port: int = 0
    host_ip: str = ""
    name: str = ""


@dataclass(frozen=True)
class VolumeMount:
    name: str
    mount_path: str
    read_only: bool = False
    sub_path: str = ""
    # "None" (default), "HostToContainer" or "Bidirectional".
    mount_propagation: str = ""
    sub_path_expr: str = ""
    # "Disabled" (default), "IfPossible" or "Enabled"; only with read_only (validated).
    recursive_read_only: str = "Disabled"


@dataclass(frozen=True)
class VolumeDevice:
    """A raw block volume in a container (volumeDevices): the claim's device at `device_path`."""

    name: str
    device_path: str


@dataclass(frozen=True)
class Resources:
    """Requests and limits in canonical units: CPU in millicores, memory in bytes.
    `other_requests`: the requests of every other resource (ephemeral-storage and
    hugepages-<size> in bytes, extended resources as counts), for admission."""

    cpu_request_milli: int = 0
    cpu_limit_milli: int = 0
    memory_request: int = 0
    memory_limit: int = 0
    other_requests: Mapping[str, int] = field(default_factory=dict)
    # limits.ephemeral-storage in bytes (0: none): enforced by eviction, as the kubelet does.
    ephemeral_storage_limit: int = 0
    # The ResourceRequirements as written, requests defaulted from limits ({"limits": {...},
    # "requests": {...}}, quantities as strings): what the status echoes (allocatedResources,
    # resources), so "10m" of memory stays 10m rather than a rounded byte.
    written: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # resources.claims: the pod's resourceClaims entries the container uses, as (name,
    # request); an empty request: every request of the claim.
    claims: tuple[tuple[str, str], ...] = ()

    @property
    def compute(self) -> tuple[int, int, int, int]:
        """CPU and memory requests and limits: what QoS and the runtime's limits read."""
        return (self.cpu_request_milli, self.cpu_limit_milli, self.memory_request,
                self.memory_limit)


@dataclass(frozen=True)
class Container:
    name: str
    image: str
    image_pull_policy: PullPolicy = "IfNotPresent"
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    env: tuple[EnvVar, ...] = ()
    env_from: tuple[EnvFromSource, ...] = ()
    ports: tuple[ContainerPort, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    volume_devices: tuple[VolumeDevice, ...] = ()
    resources: Resources = field(default_factory=Resources)
    # The resources ("cpu", "memory") whose in-place resize restarts the container
    # (resizePolicy RestartContainer; the others are NotRequired).
    restart_on_resize: frozenset[str] = frozenset()
    # An init container's "Always" makes it a sidecar (restartable init container); otherwise
    # the container's own policy over the pod's, with `restart_rules` (model/core/restarts.py).
    restart_policy: ContainerRestartPolicy = ""
    restart_rules: tuple[RestartRule, ...] = ()
    termination_message_path: str = "/dev/termination-log"
    termination_message_policy: MessagePolicy = "File"
    readiness_probe: handlers.Probe | None = None
    liveness_probe: handlers.Probe | None = None
    startup_probe: handlers.Probe | None = None
    lifecycle: handlers.Lifecycle = field(default_factory=handlers.Lifecycle)
    security_context: SecurityContext | None = None
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    # An ephemeral container's targetContainerName: it joins that container's PID namespace.
    target_container_name: str = ""


@dataclass(frozen=True)
class RestartRule:
    """One of a container's restartPolicyRules: `action` ("Restart") when its exit code is
    (`In`) or is not (`NotIn`) one of `values`."""

    action: str
    operator: Literal["In", "NotIn"]
    values: tuple[int, ...] = ()


@dataclass(frozen=True)
class Volume:
    """A pod volume: its name and its single source, kept as written (`{"emptyDir": {...}}`)."""

    name: str
    source_type: str
    source: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PodDNSConfig:
    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Toleration:
    """One of spec.tolerations: the node reads them only at admission under pressure (a
    BestEffort pod tolerating the memory-pressure taint is admitted under MemoryPressure)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, key: str, effect: str) -> bool:
        """Whether it tolerates a taint `key` (with no value) of `effect`."""
        if self.effect and self.effect != effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        return self.key == key and (self.operator == "Exists" or not self.value)


@dataclass(frozen=True)
class PodResourceClaim:
    """A `spec.resourceClaims` entry: a ResourceClaim named, or one made from a template."""

    name: str
    resource_claim_name: str = ""
    template_name: str = ""


@dataclass(frozen=True)
class PodSpec:
    containers: tuple[Container, ...]
    # spec.resources (PodLevelResources): the pod's own cpu/memory/hugepages requests and
    # limits, which size the pod cgroup and cap containers without limits of their own.
    resources: Resources | None = None
    # spec.overhead (the RuntimeClass admission copies it from the pod's RuntimeClass): what
    # running the pod costs beyond its containers, in `resources.Amounts` units. Added to the
    # pod's requests and to its non-zero limits: admission, the pod cgroup, QoS shares.
    overhead: Mapping[str, int] = field(default_factory=dict)
    init_containers: tuple[Container, ...] = ()
    # Added to a running API pod (`kubectl debug`, the ephemeralcontainers subresource):
    # started once each, never restarted, no probes, ports or resources.
    ephemeral_containers: tuple[Container, ...] = ()
    volumes: tuple[Volume, ...] = ()
    restart_policy: RestartPolicy = "Always"
    host_network: bool = False
    hostname: str = ""
    subdomain: str = ""
    dns_policy: str = "ClusterFirst"
    dns_config: PodDNSConfig | None = None
    # Variables of the namespace's Services in the containers (the `kubernetes` one always).
    enable_service_links: bool = True
    # With a subdomain, the sandbox's hostname is the pod's FQDN (see specs.kernel_hostname).
    set_hostname_as_fqdn: bool = False
    # spec.hostnameOverride (GA in 1.37): the sandbox's hostname as given, a DNS subdomain,
    # instead of hostname/subdomain; "" when not set.
    hostname_override: str = ""
    termination_grace_period_seconds: int = 30
    active_deadline_seconds: int | None = None
    readiness_gates: tuple[str, ...] = ()
    node_name: str = ""
    # Standalone there are no RuntimeClass objects: the name is the CRI runtime handler.
    runtime_class_name: str = ""
    host_pid: bool = False
    host_ipc: bool = False
    share_process_namespace: bool = False
    security_context: PodSecurityContext = field(default_factory=PodSecurityContext)
    # None: not set (the pod shares the host's user namespace); False asks for its own.
    host_users: bool | None = None
    host_aliases: tuple[HostAlias, ...] = ()
    # Names of Secrets (in the pod's namespace) with registry credentials for pulls.
    image_pull_secrets: tuple[str, ...] = ()
    os_name: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # Required node affinity: ORed terms, checked at admission (static pods).
    required_node_affinity: tuple[affinity.Term, ...] = ()
    # spec.priority (set from priorityClassName by the API server): ranks pods for eviction;
    # None when unset (0 for eviction, as the kubelet reads it).
    priority: int | None = None
    tolerations: tuple[Toleration, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()


@dataclass(frozen=True)
class Pod:
    """A pod nodelet is asked to run.

    `uid` is the API server's UID in cluster mode, or for static pods the config hash (as the
    kubelet does); a changed manifest therefore yields a new UID and replaces the pod.
    """

    uid: PodUID
    name: str
    namespace: str
    spec: PodSpec
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    # The object as given (a v1 Pod dict), used to serve it back through the API.
    raw: Mapping[str, Any] = field(default_factory=dict)
    source: Source = "file"
    # Pods from the API: the conditions of the API object's status that nodelet does not write
    # (readiness gates, DisruptionTarget, anything written by others), as v1 JSON. Only those:
    # nodelet's own status PATCHes then leave the Pod value equal, so they wake no worker.
    api_conditions: tuple[Mapping[str, Any], ...] = ()
    # Pods from the API: fields set that nodelet cannot run, as (path, why); such a pod is
    # refused at admission (static manifests are refused when they are read).
    refused: tuple[tuple[str, str], ...] = ()
    # Pods from the API: its status has a terminal phase (Succeeded, Failed). Such a pod is
    # never run again, but stays known until it is deleted: its exited containers and their
    # logs are kept, as the kubelet keeps them, also after an agent restart.
    terminal_in_api: bool = False
    # Pods from the API: status.resourceClaimStatuses, the ResourceClaims made from the pod's
    # templates, as (entry name, claim name; "" when none was made on purpose).
    resource_claim_statuses: tuple[tuple[str, str], ...] = ()

    @property
    def full_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def generation(self) -> int:
        """metadata.generation (the API server counts spec changes); 0 when not set, as for
        static pods from files."""
        meta = self.raw.get("metadata")
        value = meta.get("generation") if isinstance(meta, Mapping) else None
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    @property
    def is_static(self) -> bool:
        return self.source == "file"


def default_pull_policy(image: str) -> PullPolicy:
    """Always for ":latest" or untagged images, IfNotPresent otherwise (a tag or a digest)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    if tag == "latest" or (not tag and not digest):
        return "Always"
    return "IfNotPresent"
