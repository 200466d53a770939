"""Pod and container security as the kubelet asks CRI for it (pure).

The facts follow pkg/kubelet/kuberuntime/security_context*.go, kuberuntime_sandbox.go and
pkg/securitycontext:
- the pod's securityContext gives every container its defaults for runAsUser, runAsGroup,
  runAsNonRoot and seLinuxOptions (seccomp and AppArmor profiles likewise, container first);
- `privileged` is passed on (the runtime then grants every capability and device and masks
  nothing); the sandbox is privileged when any container is;
- no_new_privs is set only when `allowPrivilegeEscalation` is explicitly false;
- procMount Default sends the kubelet's own masked and read-only paths, so a pod is hardened
  the same on every runtime; Unmasked sends empty lists;
- seccomp: the container's profile, else the pod's, else RuntimeDefault with
  `seccompDefault`, else Unconfined; Localhost profiles live under the node's profile root;
- PID namespace per container unless `shareProcessNamespace` (POD) or `hostPID` (NODE);
- fsGroup and supplementalGroups become the process's supplementary groups;
- a container without runAsUser runs as the image's user; runAsNonRoot is checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from nodelet.model.core import pods, runtime, sysctls

_T = TypeVar("_T")

# pkg/securitycontext: what the kubelet masks and makes read-only for procMount Default.
DEFAULT_MASKED_PATHS = (
    "/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
    "/sys/firmware", "/sys/devices/virtual/powercap",
)  # fmt: skip
DEFAULT_READONLY_PATHS = (
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
)  # fmt: skip


@dataclass(frozen=True)
class Options:
    """The node's security settings that shape every container (see settings.Security)."""

    seccomp_default: bool = False
    seccomp_profile_root: Path = Path("/var/lib/nodelet/seccomp")


@dataclass(frozen=True)
class ImageUser:
    """The user an image runs as when the container does not say (CRI ImageStatus)."""

    uid: int | None = None
    username: str = ""


# The image gives neither a UID nor a name: it runs as root (the kubelet's getImageUser).
ROOT = ImageUser(uid=0)


def namespaces(pod: pods.Pod,
               user: runtime.UserNamespace | None = None) -> runtime.NamespaceOptions:
    """The kubelet's NamespacesForPod: network and IPC per pod or the node's; PID per
    container unless the pod shares one (POD) or uses the node's (NODE); `user`: the pod's
    user namespace (hostUsers: false), else the node's."""
    spec = pod.spec
    mode = runtime.NamespaceMode
    if spec.host_pid:
        pid = mode.NODE
    elif spec.share_process_namespace:
        pid = mode.POD
    else:
        pid = mode.CONTAINER
    return runtime.NamespaceOptions(
        network=mode.NODE if spec.host_network else mode.POD,
        pid=pid,
        ipc=mode.NODE if spec.host_ipc else mode.POD,
        user=user,
    )


def all_containers(pod: pods.Pod) -> tuple[pods.Container, ...]:
    return (*pod.spec.init_containers, *pod.spec.containers)


def has_privileged_container(pod: pods.Pod) -> bool:
    return any(c.security_context is not None and c.security_context.privileged
               for c in all_containers(pod))


def supplemental_groups(pod: pods.Pod) -> tuple[int, ...]:
    """fsGroup first, then supplementalGroups, as the kubelet orders them."""
    psc = pod.spec.security_context
    first = (psc.fs_group,) if psc.fs_group is not None else ()
    return (*first, *psc.supplemental_groups)


def supplemental_groups_policy(pod: pods.Pod) -> str:
    """The pod's supplementalGroupsPolicy for CRI: Strict uses only the groups above; Merge
    (the default) adds the groups the image's /etc/group gives the user."""
    return pod.spec.security_context.supplemental_groups_policy or "Merge"


def sandbox_security(pod: pods.Pod,
                     user: runtime.UserNamespace | None = None) -> runtime.SandboxSecurity:
    """The kubelet's generatePodSandboxLinuxConfig: the pause process gets the pod's user and
    groups and the runtime's default seccomp profile."""
    psc = pod.spec.security_context
    return runtime.SandboxSecurity(
        namespaces=namespaces(pod, user),
        privileged=has_privileged_container(pod),
        run_as_user=psc.run_as_user,
        # containerd 1.6 refuses a sandbox with a group but no user ("user group is specified
        # without user"), which the kubelet would send for a pod-level runAsGroup alone; the
        # pause process needs no group, and the containers still get it.
        run_as_group=psc.run_as_group if psc.run_as_user is not None else None,
        supplemental_groups=supplemental_groups(pod),
        supplemental_groups_policy=supplemental_groups_policy(pod),
        seccomp=runtime.SecurityProfile("RuntimeDefault"),
        selinux=_selinux(psc.se_linux_options),
        # Dotted names, as the kubelet converts them (runc matches namespaces by prefix).
        sysctls={sysctls.normalize(name): value for name, value in psc.sysctls},
    )


def effective(pod: pods.Pod, container: pods.Container) -> pods.SecurityContext:
    """The kubelet's DetermineEffectiveSecurityContext: the container's settings, with the
    pod's for those the container leaves unset."""
    sc = container.security_context or pods.SecurityContext()
    psc = pod.spec.security_context
    return pods.SecurityContext(
        run_as_user=_first(sc.run_as_user, psc.run_as_user),
        run_as_group=_first(sc.run_as_group, psc.run_as_group),
        run_as_non_root=_first(sc.run_as_non_root, psc.run_as_non_root),
        privileged=sc.privileged,
        allow_privilege_escalation=sc.allow_privilege_escalation,
        read_only_root_filesystem=sc.read_only_root_filesystem,
        capabilities=sc.capabilities,
        seccomp_profile=sc.seccomp_profile or psc.seccomp_profile,
        app_armor_profile=sc.app_armor_profile or psc.app_armor_profile,
        se_linux_options=sc.se_linux_options or psc.se_linux_options,
        proc_mount=sc.proc_mount,
        windows_options=sc.windows_options or psc.windows_options,
    )


def _first(value: _T | None, fallback: _T | None) -> _T | None:
    return value if value is not None else fallback


def no_new_privs(sc: pods.SecurityContext) -> bool:
    """The kubelet's AddNoNewPrivileges: only an explicit allowPrivilegeEscalation: false."""
    return sc.allow_privilege_escalation is False


def seccomp(sc: pods.SecurityContext, options: Options) -> runtime.SecurityProfile:
    profile = sc.seccomp_profile
    if profile is None:
        default = "RuntimeDefault" if options.seccomp_default else "Unconfined"
        return runtime.SecurityProfile(default)
    if profile.type == "Localhost":
        ref = str(options.seccomp_profile_root / profile.localhost_profile)
        return runtime.SecurityProfile("Localhost", ref)
    return runtime.SecurityProfile(profile.type)


APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
_APPARMOR_ANNOTATION_TYPES = {"runtime/default": "RuntimeDefault", "unconfined": "Unconfined"}


def apparmor(
    pod: pods.Pod, container: pods.Container, sc: pods.SecurityContext
) -> runtime.SecurityProfile | None:
    """The container's AppArmor profile, in the kubelet's order: the container's field, the
    deprecated per-container annotation, the pod's field; None for the runtime's default.
    (Admission has refused profiles on a host without AppArmor.)"""
    own = container.security_context.app_armor_profile if container.security_context else None
    if own is not None:
        return runtime.SecurityProfile(own.type, own.localhost_profile)
    annotation = pod.annotations.get(APPARMOR_ANNOTATION_PREFIX + container.name, "")
    if annotation.startswith("localhost/"):
        return runtime.SecurityProfile("Localhost", annotation.removeprefix("localhost/"))
    if annotation in _APPARMOR_ANNOTATION_TYPES:
        return runtime.SecurityProfile(_APPARMOR_ANNOTATION_TYPES[annotation])
    profile = sc.app_armor_profile  # the pod's, by now
    return None if profile is None else runtime.SecurityProfile(profile.type,
                                                                profile.localhost_profile)


def _selinux(options: pods.SELinuxOptions | None) -> runtime.SELinuxOptions | None:
    if options is None:
        return None
    return runtime.SELinuxOptions(options.user, options.role, options.type, options.level)


def container_security(
    pod: pods.Pod, container: pods.Container, image_user: ImageUser, options: Options,
    user: runtime.UserNamespace | None = None,
) -> runtime.ContainerSecurity:
    """The LinuxContainerSecurityContext the kubelet sends for this container (`user`: the
    pod's user namespace)."""
    sc = effective(pod, container)
    unmasked = sc.proc_mount == "Unmasked"
    caps = sc.capabilities or pods.Capabilities()
    run_as_user = sc.run_as_user if sc.run_as_user is not None else image_user.uid
    return runtime.ContainerSecurity(
        namespaces=namespaces(pod, user),
        privileged=bool(sc.privileged),
        add_capabilities=caps.add,
        drop_capabilities=caps.drop,
        run_as_user=run_as_user,
        run_as_group=sc.run_as_group,
        run_as_username="" if run_as_user is not None else image_user.username,
        supplemental_groups=supplemental_groups(pod),
        supplemental_groups_policy=supplemental_groups_policy(pod),
        readonly_rootfs=bool(sc.read_only_root_filesystem),
        no_new_privs=no_new_privs(sc),
        masked_paths=() if unmasked else DEFAULT_MASKED_PATHS,
        readonly_paths=() if unmasked else DEFAULT_READONLY_PATHS,
        seccomp=seccomp(sc, options),
        apparmor=apparmor(pod, container, sc),
        selinux=_selinux(sc.se_linux_options),
    )


def image_user(image: runtime.ImageInfo | None) -> ImageUser:
    """The image's user from ImageStatus (containerd splits the config's `User` into a UID or
    a name); an image that names neither runs as root."""
    if image is None or (image.uid is None and not image.username):
        return ROOT
    return ImageUser(uid=image.uid, username="" if image.uid is not None else image.username)


def run_as_non_root_error(
    pod: pods.Pod, container: pods.Container, image_user: ImageUser
) -> str | None:
    """The kubelet's verifyRunAsNonRoot: why this container may not start, or None."""
    sc = effective(pod, container)
    if not sc.run_as_non_root:
        return None
    where = f"(pod: \"{pod.name}_{pod.namespace}({pod.uid})\", container: {container.name})"
    if sc.run_as_user is not None:
        return f"container's runAsUser breaks non-root policy {where}" if sc.run_as_user == 0 \
            else None
    if image_user.uid == 0:
        return f"container has runAsNonRoot and image will run as root {where}"
    if image_user.uid is None and image_user.username:
        return (f"container has runAsNonRoot and image has non-numeric user "
                f"({image_user.username}), cannot verify user is non-root {where}")
    return None
