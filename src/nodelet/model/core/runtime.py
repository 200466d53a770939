"""Plain values describing what the container runtime holds and what nodelet asks of it.

These mirror the parts of CRI v1 that nodelet uses, without any protobuf or gRPC: the CRI
adapter converts to and from them, and the pure core (sandbox decisions, status generation)
reads them. Times are integer nanoseconds since the epoch, as CRI reports them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NewType

from nodelet.model.core import pods

SandboxID = NewType("SandboxID", str)
ContainerID = NewType("ContainerID", str)

# The kubelet's CRI labels: how sandboxes and containers are matched back to pods.
LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_POD_UID = "io.kubernetes.pod.uid"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"


class SandboxState(enum.Enum):
    READY = 0
    NOTREADY = 1


class NamespaceMode(enum.Enum):
    """CRI NamespaceMode: POD for a pod's own namespace, NODE for the host's."""

    POD = 0
    CONTAINER = 1
    NODE = 2
    TARGET = 3


class ContainerState(enum.Enum):
    CREATED = 0
    RUNNING = 1
    EXITED = 2
    UNKNOWN = 3


@dataclass(frozen=True)
class SandboxInfo:
    """One pod sandbox as the runtime reports it (ListPodSandbox + PodSandboxStatus)."""

    id: SandboxID
    name: str
    namespace: str
    uid: str
    attempt: int
    state: SandboxState
    created_at: int
    network_mode: NamespaceMode = NamespaceMode.POD
    ip: str = ""
    additional_ips: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerInfo:
    """One container as the runtime reports it (ListContainers + ContainerStatus)."""

    id: ContainerID
    sandbox_id: SandboxID
    name: str
    attempt: int
    image: str
    image_ref: str
    state: ContainerState
    created_at: int
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    log_path: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    # ContainerStatus only (not ListContainers): the identities the first process got, where
    # the runtime says (containerd 2.0+), and the stop signal in effect (its API name, e.g.
    # "SIGTERM"; "" where the runtime does not say: containerd before 2.3).
    user: ContainerUser | None = None
    stop_signal: str = ""


@dataclass(frozen=True)
class ContainerUser:
    """CRI LinuxContainerUser: the uid, gid and supplemental groups of a container's first
    process (the pod's containerStatuses[].user.linux)."""

    uid: int
    gid: int
    supplemental_groups: tuple[int, ...] = ()


@dataclass(frozen=True)
class RuntimeCondition:
    type: str
    status: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class HandlerFeatures:
    """What one runtime handler can do (CRI Status' runtime_handlers; containerd 2.x)."""

    name: str  # "" is the default handler
    recursive_read_only_mounts: bool = False
    user_namespaces: bool = False


class RuntimeClassError(Exception):
    """A pod's RuntimeClass cannot be read: there is none of that name, or the API is out of
    reach (the message is the API's)."""


@dataclass(frozen=True)
class RuntimeStatus:
    """CRI Status: RuntimeReady and NetworkReady plus anything else the runtime reports."""

    conditions: tuple[RuntimeCondition, ...]
    # Empty: the runtime does not say (containerd 1.6), so it supports none of them.
    handlers: tuple[HandlerFeatures, ...] = ()
    # RuntimeFeatures: SupplementalGroupsPolicy (Strict) and ContainerStatus.user
    # (containerd 2.0+).
    supplemental_groups_policy: bool = False

    def handler(self, name: str) -> HandlerFeatures:
        """The features of runtime handler `name` ("" the default): none when unknown."""
        return next((h for h in self.handlers if h.name == name), HandlerFeatures(name))

    def condition(self, type_: str) -> RuntimeCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def runtime_ready(self) -> bool:
        cond = self.condition("RuntimeReady")
        return cond is not None and cond.status

    @property
    def network_ready(self) -> bool:
        cond = self.condition("NetworkReady")
        return cond is not None and cond.status


@dataclass(frozen=True)
class VersionInfo:
    runtime_name: str
    runtime_version: str
    runtime_api_version: str


@dataclass(frozen=True)
class PortMapping:
    container_port: int
    host_port: int = 0
    protocol: str = "TCP"  # TCP, UDP or SCTP
    host_ip: str = ""


@dataclass(frozen=True)
class DNSConfig:
    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class LinuxResources:
    """CRI LinuxContainerResources subset; 0 means "not set"."""

    cpu_period: int = 0
    cpu_quota: int = 0
    cpu_shares: int = 0
    memory_limit_in_bytes: int = 0
    oom_score_adj: int = 0


class MountPropagation(enum.Enum):
    """CRI MountPropagation: private, rslave (HostToContainer) or rshared (Bidirectional)."""

    PRIVATE = 0
    HOST_TO_CONTAINER = 1
    BIDIRECTIONAL = 2


@dataclass(frozen=True)
class UserNamespace:
    """A pod's user namespace: IDs 0..length-1 inside are host IDs host_id.. (users and
    groups alike)."""

    host_id: int
    length: int


@dataclass(frozen=True)
class NamespaceOptions:
    """CRI NamespaceOption: which namespaces a sandbox or container gets."""

    network: NamespaceMode = NamespaceMode.POD
    pid: NamespaceMode = NamespaceMode.CONTAINER
    ipc: NamespaceMode = NamespaceMode.POD
    # A user namespace of the pod's own (hostUsers: false); None: the node's.
    user: UserNamespace | None = None
    # With pid TARGET: the container whose PID namespace it joins (an ephemeral container's
    # targetContainerName).
    target_id: str = ""


@dataclass(frozen=True)
class SecurityProfile:
    """CRI SecurityProfile (seccomp or AppArmor): RuntimeDefault, Unconfined or Localhost."""

    type: str  # "RuntimeDefault", "Unconfined" or "Localhost"
    localhost_ref: str = ""


@dataclass(frozen=True)
class SELinuxOptions:
    user: str = ""
    role: str = ""
    type: str = ""
    level: str = ""


@dataclass(frozen=True)
class SandboxSecurity:
    """CRI LinuxSandboxSecurityContext plus the pod's sysctls (LinuxPodSandboxConfig)."""

    namespaces: NamespaceOptions = field(default_factory=NamespaceOptions)
    privileged: bool = False
    run_as_user: int | None = None
    run_as_group: int | None = None
    supplemental_groups: tuple[int, ...] = ()
    # "Merge" (also when unset: the image's groups of the user are added) or "Strict".
    supplemental_groups_policy: str = "Merge"
    readonly_rootfs: bool = False
    seccomp: SecurityProfile | None = None
    apparmor: SecurityProfile | None = None
    selinux: SELinuxOptions | None = None
    sysctls: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerSecurity:
    """CRI LinuxContainerSecurityContext, as the kubelet fills it in.

    `masked_paths`/`readonly_paths` None lets the runtime choose; the kubelet always sends them
    (its defaults for procMount Default, empty lists for Unmasked).
    """

    namespaces: NamespaceOptions = field(default_factory=NamespaceOptions)
    privileged: bool = False
    add_capabilities: tuple[str, ...] = ()
    drop_capabilities: tuple[str, ...] = ()
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_username: str = ""
    supplemental_groups: tuple[int, ...] = ()
    supplemental_groups_policy: str = "Merge"
    readonly_rootfs: bool = False
    no_new_privs: bool = False
    masked_paths: tuple[str, ...] | None = None
    readonly_paths: tuple[str, ...] | None = None
    seccomp: SecurityProfile | None = None
    apparmor: SecurityProfile | None = None
    selinux: SELinuxOptions | None = None


@dataclass(frozen=True)
class AuthConfig:
    """CRI AuthConfig: registry credentials for one pull."""

    username: str = ""
    # Secrets stay out of reprs (logs, tracebacks).
    password: str = field(default="", repr=False)
    auth: str = field(default="", repr=False)  # base64 "user:password", as in a docker config
    server_address: str = ""
    identity_token: str = field(default="", repr=False)
    registry_token: str = field(default="", repr=False)


@dataclass(frozen=True)
class SandboxConfig:
    """What RunPodSandbox is asked to create."""

    name: str
    namespace: str
    uid: str
    attempt: int
    hostname: str
    log_directory: str
    dns: DNSConfig = field(default_factory=DNSConfig)
    port_mappings: tuple[PortMapping, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""
    security: SandboxSecurity = field(default_factory=SandboxSecurity)


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    readonly: bool = False
    propagation: MountPropagation = MountPropagation.PRIVATE
    # Read-only for its submounts too (CRI's recursive_read_only; runc's rro).
    recursive_read_only: bool = False
    # The pod's volume and its recursiveReadOnly request ("Disabled", "IfPossible",
    # "Enabled"), resolved into `recursive_read_only` when the container is created.
    volume: str = ""
    recursive_request: str = "Disabled"
    # An image volume (KEP-4639): the image whose files are mounted (no host path), its pull
    # policy, and the directory of it to mount ("" its root).
    image: str = ""
    image_pull_policy: str = ""
    image_sub_path: str = ""
    # A raw block volume (volumeDevices): `host_path` is the device (a symlink to it under the
    # pod's directory), given to the runtime as a device at `container_path`, not mounted.
    block_device: bool = False


@dataclass(frozen=True)
class Device:
    """A host device in a container (CRI Device): cgroup permissions "r", "w", "m"."""

    container_path: str
    host_path: str
    permissions: str = "mrw"


@dataclass(frozen=True)
class ContainerConfig:
    """What CreateContainer is asked to create inside a sandbox."""

    name: str
    attempt: int
    image: str
    log_path: str  # relative to the sandbox's log_directory
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    envs: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    devices: tuple[Device, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    resources: LinuxResources | None = None
    security: ContainerSecurity | None = None
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    # lifecycle.stopSignal by its API name ("SIGUSR1", "SIGRTMIN+3"); "": the image's
    # STOPSIGNAL, else SIGTERM (the runtime's default).
    stop_signal: str = ""
    # Devices by fully qualified CDI name (vendor.com/class=name), from device plugins.
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecResult:
    stdout: bytes
    stderr: bytes
    exit_code: int


@dataclass(frozen=True)
class ImageInfo:
    id: str
    repo_tags: tuple[str, ...]
    repo_digests: tuple[str, ...] = ()
    size: int = 0
    # The user the image runs as when the container does not say: a UID, else a name ("" and
    # None for neither, which means root).
    uid: int | None = None
    username: str = ""
    # The runtime asks that the image never be garbage collected (CRI Image.pinned; containerd
    # pins its sandbox image).
    pinned: bool = False


@dataclass(frozen=True)
class FilesystemUsage:
    """What the runtime says one of its filesystems holds (CRI ImageFsInfo): the mount point
    and the bytes and inodes its images (or containers' layers) use there."""

    mountpoint: str
    used_bytes: int
    inodes_used: int | None = None


@dataclass(frozen=True)
class ContainerStats:
    """One container's resource usage (CRI ContainerStats); None where the runtime gave none."""

    id: ContainerID
    labels: Mapping[str, str]
    cpu_usage_core_ns: int | None = None
    memory_working_set: int | None = None
    # The container's writable layer (its rootfs changes) in bytes and inodes.
    writable_layer_bytes: int | None = None
    writable_layer_inodes: int | None = None

    @property
    def pod_uid(self) -> str:
        return self.labels.get(LABEL_POD_UID, "")

    @property
    def name(self) -> str:
        return self.labels.get(LABEL_CONTAINER_NAME, "")


@dataclass(frozen=True)
class PodRuntime:
    """One pod's sandboxes (newest first) and containers, as the runtime reports them."""

    uid: pods.PodUID
    sandboxes: tuple[SandboxInfo, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()

    def _label(self, key: str) -> str:
        for labels in [s.labels for s in self.sandboxes] + [c.labels for c in self.containers]:
            return labels.get(key, "")
        return ""

    @property
    def name(self) -> str:
        return self._label(LABEL_POD_NAME)

    @property
    def namespace(self) -> str:
        return self._label(LABEL_POD_NAMESPACE)
