"""Translation between CRI v1 protobuf messages and nodelet's plain runtime values.

Pure functions, no I/O. `*_to_pb` builds requests from `nodelet.model.core.runtime` values;
`*_from_pb` turns responses back into them. Nothing protobuf leaves the CRI adapter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nodelet.adapters.cri.gen import api_pb2 as pb
from nodelet.model.core import runtime as rt


def sandbox_config_to_pb(config: rt.SandboxConfig) -> pb.PodSandboxConfig:
    """The PodSandboxConfig for RunPodSandbox (and again for CreateContainer)."""
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(
            name=config.name, uid=config.uid, namespace=config.namespace, attempt=config.attempt
        ),
        hostname=config.hostname,
        log_directory=config.log_directory,
        dns_config=pb.DNSConfig(
            servers=config.dns.servers, searches=config.dns.searches, options=config.dns.options
        ),
        port_mappings=[_port_mapping_to_pb(p) for p in config.port_mappings],
        labels=dict(config.labels),
        annotations=dict(config.annotations),
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=config.cgroup_parent,
            security_context=_sandbox_security_to_pb(config.security),
            sysctls=dict(config.security.sysctls),
        ),
    )


def _namespaces_to_pb(options: rt.NamespaceOptions) -> pb.NamespaceOption:
    return pb.NamespaceOption(
        network=pb.NamespaceMode.Value(options.network.name),
        pid=pb.NamespaceMode.Value(options.pid.name),
        ipc=pb.NamespaceMode.Value(options.ipc.name),
        target_id=options.target_id,
        userns_options=_userns_to_pb(options.user),
    )


def _userns_to_pb(user: rt.UserNamespace | None) -> pb.UserNamespace | None:
    if user is None:
        return None
    mapping = pb.IDMapping(host_id=user.host_id, container_id=0, length=user.length)
    return pb.UserNamespace(mode=pb.NamespaceMode.Value("POD"), uids=[mapping], gids=[mapping])


def _profile_to_pb(profile: rt.SecurityProfile | None) -> pb.SecurityProfile | None:
    if profile is None:
        return None
    return pb.SecurityProfile(
        profile_type=pb.SecurityProfile.ProfileType.Value(profile.type),
        localhost_ref=profile.localhost_ref,
    )


def _legacy_apparmor(profile: rt.SecurityProfile | None) -> str:
    """The deprecated string form of an AppArmor profile."""
    if profile is None:
        return ""
    if profile.type == "Localhost":
        return f"localhost/{profile.localhost_ref}"
    return "runtime/default" if profile.type == "RuntimeDefault" else "unconfined"


def _selinux_to_pb(options: rt.SELinuxOptions | None) -> pb.SELinuxOption | None:
    if options is None:
        return None
    return pb.SELinuxOption(
        user=options.user, role=options.role, type=options.type, level=options.level
    )


def _int64(value: int | None) -> pb.Int64Value | None:
    return None if value is None else pb.Int64Value(value=value)


def _sandbox_security_to_pb(sec: rt.SandboxSecurity) -> pb.LinuxSandboxSecurityContext:
    return pb.LinuxSandboxSecurityContext(
        namespace_options=_namespaces_to_pb(sec.namespaces),
        selinux_options=_selinux_to_pb(sec.selinux),
        run_as_user=_int64(sec.run_as_user),
        run_as_group=_int64(sec.run_as_group),
        readonly_rootfs=sec.readonly_rootfs,
        supplemental_groups=sec.supplemental_groups,
        supplemental_groups_policy=pb.SupplementalGroupsPolicy.Value(
            sec.supplemental_groups_policy),
        privileged=sec.privileged,
        seccomp=_profile_to_pb(sec.seccomp),
        apparmor=_profile_to_pb(sec.apparmor),
    )


def _container_security_to_pb(sec: rt.ContainerSecurity) -> pb.LinuxContainerSecurityContext:
    out = pb.LinuxContainerSecurityContext(
        capabilities=pb.Capability(
            add_capabilities=sec.add_capabilities, drop_capabilities=sec.drop_capabilities
        ),
        privileged=sec.privileged,
        namespace_options=_namespaces_to_pb(sec.namespaces),
        selinux_options=_selinux_to_pb(sec.selinux),
        run_as_user=_int64(sec.run_as_user),
        run_as_group=_int64(sec.run_as_group),
        run_as_username=sec.run_as_username,
        readonly_rootfs=sec.readonly_rootfs,
        supplemental_groups=sec.supplemental_groups,
        supplemental_groups_policy=pb.SupplementalGroupsPolicy.Value(
            sec.supplemental_groups_policy),
        no_new_privs=sec.no_new_privs,
        seccomp=_profile_to_pb(sec.seccomp),
        apparmor=_profile_to_pb(sec.apparmor),
        apparmor_profile=_legacy_apparmor(sec.apparmor),
    )
    # An empty list (Unmasked) and "not set" (the runtime's defaults) are the same on the
    # wire; the kubelet's callers always send its own list for Default.
    out.masked_paths.extend(sec.masked_paths or ())
    out.readonly_paths.extend(sec.readonly_paths or ())
    return out


def _port_mapping_to_pb(port: rt.PortMapping) -> pb.PortMapping:
    return pb.PortMapping(
        protocol=pb.Protocol.Value(port.protocol.upper()),
        container_port=port.container_port,
        host_port=port.host_port,
        host_ip=port.host_ip,
    )


def linux_resources_to_pb(r: rt.LinuxResources) -> pb.LinuxContainerResources:
    return pb.LinuxContainerResources(
        cpu_period=r.cpu_period,
        cpu_quota=r.cpu_quota,
        cpu_shares=r.cpu_shares,
        memory_limit_in_bytes=r.memory_limit_in_bytes,
        oom_score_adj=r.oom_score_adj,
    )


def container_config_to_pb(config: rt.ContainerConfig) -> pb.ContainerConfig:
    """The ContainerConfig for CreateContainer."""
    linux = pb.LinuxContainerConfig()
    if config.security is not None:
        linux.security_context.CopyFrom(_container_security_to_pb(config.security))
    if config.resources is not None:
        linux.resources.CopyFrom(linux_resources_to_pb(config.resources))
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=config.name, attempt=config.attempt),
        image=pb.ImageSpec(image=config.image),
        command=config.command,
        args=config.args,
        working_dir=config.working_dir,
        envs=[pb.KeyValue(key=k, value=v) for k, v in config.envs],
        mounts=[
            pb.Mount(
                container_path=m.container_path,
                host_path=m.host_path,
                readonly=m.readonly,
                propagation=pb.MountPropagation.Value(f"PROPAGATION_{m.propagation.name}"),
                recursive_read_only=m.recursive_read_only,
                image=pb.ImageSpec(image=m.image) if m.image else None,
                image_sub_path=m.image_sub_path,
            )
            for m in config.mounts
        ],
        devices=[pb.Device(container_path=d.container_path, host_path=d.host_path,
                           permissions=d.permissions) for d in config.devices],
        stdin=config.stdin,
        stdin_once=config.stdin_once,
        tty=config.tty,
        labels=dict(config.labels),
        annotations=dict(config.annotations),
        log_path=config.log_path,
        linux=linux,
        CDI_devices=[pb.CDIDevice(name=name) for name in config.cdi_devices],
        stop_signal=signal_to_pb(config.stop_signal),
    )


def signal_to_pb(name: str) -> pb.Signal.ValueType:
    """CRI's Signal for an API signal name (`SIGRTMIN+3` is SIGNAL_SIGRTMINPLUS3); "" is
    the runtime's default. Raises ValueError for a name CRI does not know."""
    if not name:
        return pb.SIGNAL_RUNTIME_DEFAULT
    return pb.Signal.Value("SIGNAL_" + name.replace("+", "PLUS").replace("-", "MINUS"))


def signal_from_pb(value: int) -> str:
    """The API name of a CRI Signal; "" for the runtime default (the runtime did not say)."""
    if value == pb.SIGNAL_RUNTIME_DEFAULT:
        return ""
    name = pb.Signal.Name(value).removeprefix("SIGNAL_")  # type: ignore[arg-type]
    return name.replace("PLUS", "+").replace("MINUS", "-")


def sandbox_from_pb(item: pb.PodSandbox) -> rt.SandboxInfo:
    """A ListPodSandbox item. The list carries no network status: ip is "" and mode POD."""
    return rt.SandboxInfo(
        id=rt.SandboxID(item.id),
        name=item.metadata.name,
        namespace=item.metadata.namespace,
        uid=item.metadata.uid,
        attempt=item.metadata.attempt,
        state=rt.SandboxState(item.state),
        created_at=item.created_at,
        labels=dict(item.labels),
        annotations=dict(item.annotations),
    )


def sandbox_status_from_pb(status: pb.PodSandboxStatus) -> rt.SandboxInfo:
    """A PodSandboxStatus, including IPs and the network namespace mode."""
    return rt.SandboxInfo(
        id=rt.SandboxID(status.id),
        name=status.metadata.name,
        namespace=status.metadata.namespace,
        uid=status.metadata.uid,
        attempt=status.metadata.attempt,
        state=rt.SandboxState(status.state),
        created_at=status.created_at,
        network_mode=rt.NamespaceMode(status.linux.namespaces.options.network),
        ip=status.network.ip,
        additional_ips=tuple(p.ip for p in status.network.additional_ips),
        labels=dict(status.labels),
        annotations=dict(status.annotations),
    )


def netns_path_from_info(info: Mapping[str, str]) -> str:
    """The network namespace path from containerd's verbose PodSandboxStatus info, or "".

    CRI v1 dropped the namespace path from the status; containerd still reports the OCI
    runtime spec of the sandbox under info["info"], whose network namespace names the path.
    """
    try:
        spec = json.loads(info.get("info", "{}")).get("runtimeSpec") or {}
        namespaces = spec.get("linux", {}).get("namespaces", [])
    except (ValueError, AttributeError):
        return ""
    for ns in namespaces:
        if isinstance(ns, dict) and ns.get("type") == "network":
            return str(ns.get("path", ""))
    return ""


def container_from_pb(item: pb.Container) -> rt.ContainerInfo:
    """A ListContainers item: no times beyond creation, no exit code."""
    return rt.ContainerInfo(
        id=rt.ContainerID(item.id),
        sandbox_id=rt.SandboxID(item.pod_sandbox_id),
        name=item.metadata.name,
        attempt=item.metadata.attempt,
        image=item.image.image,
        image_ref=item.image_ref,
        state=rt.ContainerState(item.state),
        created_at=item.created_at,
        labels=dict(item.labels),
        annotations=dict(item.annotations),
    )


def container_status_from_pb(status: pb.ContainerStatus, sandbox_id: str) -> rt.ContainerInfo:
    """A ContainerStatus; CRI does not repeat the sandbox ID there, so the caller passes it."""
    return rt.ContainerInfo(
        id=rt.ContainerID(status.id),
        sandbox_id=rt.SandboxID(sandbox_id),
        name=status.metadata.name,
        attempt=status.metadata.attempt,
        image=status.image.image,
        image_ref=status.image_ref,
        state=rt.ContainerState(status.state),
        created_at=status.created_at,
        started_at=status.started_at,
        finished_at=status.finished_at,
        exit_code=status.exit_code,
        reason=status.reason,
        message=status.message,
        log_path=status.log_path,
        labels=dict(status.labels),
        annotations=dict(status.annotations),
        user=_user_from_pb(status),
        stop_signal=signal_from_pb(status.stop_signal),
    )


def _user_from_pb(status: pb.ContainerStatus) -> rt.ContainerUser | None:
    if not status.HasField("user") or not status.user.HasField("linux"):
        return None
    linux = status.user.linux
    return rt.ContainerUser(linux.uid, linux.gid, tuple(linux.supplemental_groups))


def runtime_status_from_pb(response: pb.StatusResponse) -> rt.RuntimeStatus:
    return rt.RuntimeStatus(
        conditions=tuple(
            rt.RuntimeCondition(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in response.status.conditions
        ),
        handlers=tuple(
            rt.HandlerFeatures(h.name, h.features.recursive_read_only_mounts,
                               h.features.user_namespaces)
            for h in response.runtime_handlers
        ),
        supplemental_groups_policy=response.features.supplemental_groups_policy,
    )


def version_from_pb(response: pb.VersionResponse) -> rt.VersionInfo:
    return rt.VersionInfo(
        runtime_name=response.runtime_name,
        runtime_version=response.runtime_version,
        runtime_api_version=response.runtime_api_version,
    )


def image_from_pb(image: pb.Image) -> rt.ImageInfo:
    return rt.ImageInfo(
        id=image.id,
        repo_tags=tuple(image.repo_tags),
        repo_digests=tuple(image.repo_digests),
        size=image.size,
        uid=image.uid.value if image.HasField("uid") else None,
        username=image.username,
        pinned=image.pinned,
    )


def _uint64(message: Any, name: str) -> int | None:
    """An optional UInt64Value field: its value, or None when the runtime left it unset."""
    return getattr(message, name).value if message.HasField(name) else None


def filesystem_from_pb(usage: pb.FilesystemUsage) -> rt.FilesystemUsage:
    return rt.FilesystemUsage(
        mountpoint=usage.fs_id.mountpoint,
        used_bytes=_uint64(usage, "used_bytes") or 0,
        inodes_used=_uint64(usage, "inodes_used"),
    )


def container_stats_from_pb(stats: pb.ContainerStats) -> rt.ContainerStats:
    layer = stats.writable_layer if stats.HasField("writable_layer") else None
    return rt.ContainerStats(
        id=rt.ContainerID(stats.attributes.id),
        labels=dict(stats.attributes.labels),
        cpu_usage_core_ns=_uint64(stats.cpu, "usage_core_nano_seconds")
        if stats.HasField("cpu") else None,
        memory_working_set=_uint64(stats.memory, "working_set_bytes")
        if stats.HasField("memory") else None,
        writable_layer_bytes=_uint64(layer, "used_bytes") if layer is not None else None,
        writable_layer_inodes=_uint64(layer, "inodes_used") if layer is not None else None,
    )


def auth_to_pb(auth: rt.AuthConfig) -> pb.AuthConfig:
    return pb.AuthConfig(
        username=auth.username,
        password=auth.password,
        auth=auth.auth,
        server_address=auth.server_address,
        identity_token=auth.identity_token,
        registry_token=auth.registry_token,
    )


def exec_result_from_pb(response: pb.ExecSyncResponse) -> rt.ExecResult:
    return rt.ExecResult(
        stdout=response.stdout, stderr=response.stderr, exit_code=response.exit_code
    )


def label_filter(labels: Mapping[str, str] | None) -> dict[str, str]:
    """A CRI label selector (match labels only, ANDed)."""
    return dict(labels or {})
