"""Pod admission: whether this node can run a pod as its spec says, before anything of
it is created — the kubelet's admit handlers (pkg/kubelet/lifecycle, pkg/kubelet/sysctl,
pkg/kubelet/kubelet.go canAdmitPod).

A refused pod is `Failed` with the handler's reason and the message "Pod was rejected: …", and
a Warning event with the same reason, as the kubelet reports it. Where the kubelet would
silently run a pod without a setting this node cannot honour (SELinux, AppArmor on a host
without them), nodelet refuses instead: an ignored security setting is a security defect.

The decisions are pure functions. `Admitted` holds the pods they weigh a new one against:
state without I/O, written by the pod syncer and read by the node's health jobs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nodelet.model.core import affinity, pods, resources, runtime, security, sysctls, tokens

# pkg/kubelet/sysctl/safe_sysctls.go (1.32): namespaced and isolated, so always allowed.
REJECTED_PREFIX = "Pod was rejected: "
# A pod that sets what nodelet cannot run (docs/podspec.md's "refused" fields, a spec nodelet
# cannot read at all): the kubelet runs every valid pod and has no reason for this, see
# docs/differential.md.
UNSUPPORTED_REASON = "UnsupportedPodSpec"


@dataclass(frozen=True)
class Node:
    """What admission needs to know about this node."""

    labels: Mapping[str, str]
    name: str = ""
    # Sysctl names or `prefix*` patterns allowed beyond sysctls.SAFE (--allowed-unsafe-sysctls).
    allowed_unsafe_sysctls: tuple[str, ...] = ()
    apparmor_enabled: bool = False
    selinux_enabled: bool = False
    # The runtime handler runs pods in user namespaces (CRI feature; containerd 2.x: yes,
    # 1.6: no, it has none in CRI).
    user_namespaces: bool = False
    # The runtime mounts images as volumes (containerd 2.1+; `mounts_images`).
    image_volumes: bool = True
    # The runtime says it keeps the image's groups out on request (CRI RuntimeFeatures
    # supplemental_groups_policy: containerd 2.0+; 1.6 only merges them).
    supplemental_groups_strict: bool = False
    # lifecycle.stopSignal: the ContainerStopSignals gate is on, and the runtime applies the
    # signal (`applies_stop_signals`).
    stop_signals_gate: bool = False
    stop_signals: bool = False
    # The node's Allocatable (`resources` units); None: resources are not checked.
    allocatable: resources.Amounts | None = None


@dataclass(frozen=True)
class Rejection:
    reason: str
    message: str

    @property
    def status_message(self) -> str:
        """The pod's status.message, as the kubelet's rejectPod writes it."""
        return REJECTED_PREFIX + self.message


def check_allowed_unsafe_sysctls(patterns: tuple[str, ...]) -> None:
    """Settings check, as the kubelet's at start-up: only namespaced sysctls may be allowed."""
    for pattern in patterns:
        if sysctls.namespace(pattern.rstrip("*")) is None:
            raise ValueError(
                f'the sysctl "{pattern}" is not known to be namespaced: only net.*, kernel.shm*, '
                "kernel.msg*, kernel.sem and fs.mqueue.* may be allowed"
            )


def _allowlisted(name: str, allowed: tuple[str, ...]) -> bool:
    for pattern in (*sysctls.SAFE, *allowed):
        pattern = sysctls.normalize(pattern)
        if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
            return True
    return False


def _sysctls(pod: pods.Pod, node: Node) -> Rejection | None:
    for raw_name, _ in pod.spec.security_context.sysctls:
        name = sysctls.normalize(raw_name)
        if not _allowlisted(name, node.allowed_unsafe_sysctls):
            problem = f'"{name}" not allowlisted'
        elif sysctls.namespace(name) == "net" and pod.spec.host_network:
            problem = f'"{name}" not allowed with host net enabled'
        elif sysctls.namespace(name) == "ipc" and pod.spec.host_ipc:
            problem = f'"{name}" not allowed with host ipc enabled'
        else:
            continue
        return Rejection("SysctlForbidden", f"forbidden sysctl: {problem}")
    return None


def _os(pod: pods.Pod, node: Node) -> Rejection | None:
    if pod.spec.os_name and pod.spec.os_name != "linux":
        return Rejection("PodOSNotSupported",
                         "Failed to admit pod as the OS field doesn't match node OS")
    selected = pod.spec.node_selector.get("kubernetes.io/os")
    if selected is not None and selected != node.labels.get("kubernetes.io/os", "linux"):
        return Rejection("PodOSSelectorNodeLabelDoesNotMatch",
                         "Failed to admit pod as the `kubernetes.io/os` label doesn't match "
                         "node label")
    # windowsOptions are not refused: the kubelet on Linux never reads them (only its Windows
    # sandbox config does), and the e2e suite's registry pod sets hostProcess on Linux.
    return None


def _node_selector(pod: pods.Pod, node: Node) -> Rejection | None:
    """nodeSelector and required node affinity, for static pods: pods from the API were
    placed by the scheduler against the Node's live labels, which may hold labels an
    administrator set that this node does not know of."""
    if not pod.is_static:
        return None
    selected = all(node.labels.get(k) == v for k, v in pod.spec.node_selector.items())
    if selected and affinity.matches(pod.spec.required_node_affinity, node.labels, node.name):
        return None
    return Rejection("NodeAffinity",
                     "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                     "affinity/selector")


def _apparmor_required(pod: pods.Pod) -> bool:
    profiles = [pod.spec.security_context.app_armor_profile]
    profiles += [c.security_context.app_armor_profile for c in security.all_containers(pod)
                 if c.security_context is not None]
    annotated = any(k.startswith(security.APPARMOR_ANNOTATION_PREFIX) and v != "unconfined"
                    for k, v in pod.annotations.items())
    return annotated or any(p is not None and p.type != "Unconfined" for p in profiles)


def _apparmor(pod: pods.Pod, node: Node) -> Rejection | None:
    if node.apparmor_enabled or not _apparmor_required(pod):
        return None
    return Rejection("AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host")


def _selinux(pod: pods.Pod, node: Node) -> Rejection | None:
    """seLinuxOptions go to the runtime as the kubelet passes them; without SELinux on the
    host the runtime ignores them (containerd's enable_selinux is off), as under the kubelet,
    whose pods with seLinuxOptions run on such nodes ([NodeConformance] EmptyDir tests set
    them). seLinuxChangePolicy changes nothing without SELinux either; with it, volumes are
    relabelled by the runtime (Recursive), so MountOption, which would need SELinux mount
    options, is refused."""
    psc = pod.spec.security_context
    if node.selinux_enabled and psc.se_linux_change_policy == "MountOption":
        return Rejection("SELinux", "seLinuxChangePolicy MountOption is not supported: volumes "
                         "are relabelled recursively by the runtime")
    return None


def _user_namespaces(pod: pods.Pod, node: Node) -> Rejection | None:
    if pod.spec.host_users is not False or node.user_namespaces:
        return None
    return Rejection("UserNamespacesNotSupported",
                     "can't set `spec.hostUsers: false`, runtime does not support user "
                     "namespaces")


def _containerd_from(version: runtime.VersionInfo, release: tuple[int, int]) -> bool:
    """True for containerd `release` or later, and for any other runtime (left to say)."""
    if version.runtime_name != "containerd":
        return True
    found = re.match(r"v?(\d+)\.(\d+)", version.runtime_version)
    return found is not None and (int(found[1]), int(found[2])) >= release


def mounts_images(version: runtime.VersionInfo) -> bool:
    """Whether the runtime mounts an image volume (CRI Mount.image): containerd from 2.1; an
    older one would drop the field without a word. Other runtimes are left to say."""
    return _containerd_from(version, (2, 1))


def applies_stop_signals(version: runtime.VersionInfo) -> bool:
    """Whether the runtime stops a container with CRI's stop_signal: containerd from 2.3 (2.2
    drops the field without a word). Other runtimes are left to say."""
    return _containerd_from(version, (2, 3))


STOP_SIGNALS_REASON = "ContainerStopSignalsNotSupported"


def _stop_signals(pod: pods.Pod, node: Node) -> Rejection | None:
    asking = [c.name for c in (*pod.spec.init_containers, *pod.spec.containers)
              if c.lifecycle.stop_signal]
    if not asking:
        return None
    if not node.stop_signals_gate:
        return Rejection(STOP_SIGNALS_REASON, (
            f"container {asking[0]!r} sets lifecycle.stopSignal, which needs the "
            "ContainerStopSignals feature gate (alpha, off by default): start the node with "
            "--feature-gates=ContainerStopSignals=true, or set STOPSIGNAL in the image"))
    if not node.stop_signals:
        return Rejection(STOP_SIGNALS_REASON, (
            f"container {asking[0]!r} sets lifecycle.stopSignal, which this runtime would "
            "drop (it needs containerd 2.3 or later): set STOPSIGNAL in the image instead"))
    return None


def _image_volumes(pod: pods.Pod, node: Node) -> Rejection | None:
    if node.image_volumes or all(v.source_type != "image" for v in pod.spec.volumes):
        return None
    return Rejection("ImageVolumesNotSupported",
                     "image volumes need a runtime that mounts images (containerd 2.1 or "
                     "later); this one would not mount them")


def _supplemental_groups_policy(pod: pods.Pod, node: Node) -> Rejection | None:
    policy = pod.spec.security_context.supplemental_groups_policy
    if policy != "Strict" or node.supplemental_groups_strict:
        return None
    return Rejection("SupplementalGroupsPolicyNotSupported",
                     "SupplementalGroupsPolicy=Strict is not supported in this node")


def _refused_fields(pod: pods.Pod, node: Node) -> Rejection | None:
    """A pod from the API that sets fields nodelet cannot run (see docs/podspec.md), or that
    it cannot read at all (`parsing.apipods`)."""
    if not pod.refused:
        return None
    path, why = pod.refused[0]
    return Rejection(UNSUPPORTED_REASON, f"{path}: {why}" if path else why)


def _static_tokens(pod: pods.Pod, node: Node) -> Rejection | None:
    """A static pod cannot have a service account token: a TokenRequest is bound to a pod
    the API server knows, and kube-apiserver's NodeRestriction refuses mirror pods that
    reference a service account. The kubelet would fail the volume for ever; nodelet says so
    once, at admission."""
    found = tokens.static_pod_tokens(pod)
    if not found:
        return None
    return Rejection(UNSUPPORTED_REASON,
                     f"{found[0]}: a static pod cannot use a service account token (tokens "
                     "are requested from the API server for the pods it bound to this node); "
                     "create the pod through the API server, or mount a Secret instead")


def _resources(pod: pods.Pod, node: Node, others: Sequence[pods.Pod]) -> Rejection | None:
    if node.allocatable is None:
        return None
    found = resources.misfit(pod, others, node.allocatable)
    return None if found is None else Rejection(found.reason, found.message)


def _host_ports(pod: pods.Pod, node: Node, others: Sequence[pods.Pod]) -> Rejection | None:
    if not resources.ports_conflict(pod, others):
        return None
    return Rejection(resources.PORTS_REASON, resources.PORTS_MESSAGE)


_HANDLERS: tuple[Callable[[pods.Pod, Node], Rejection | None], ...] = (
    _refused_fields, _static_tokens, _sysctls, _os,
)  # fmt: skip
# The kubelet's predicate handler: resources, then node affinity, then host ports.
_PREDICATES: tuple[Callable[[pods.Pod, Node, Sequence[pods.Pod]], Rejection | None], ...] = (
    _resources, lambda pod, node, _: _node_selector(pod, node), _host_ports,
)  # fmt: skip
_SECURITY: tuple[Callable[[pods.Pod, Node], Rejection | None], ...] = (
    _apparmor, _selinux, _user_namespaces, _image_volumes, _supplemental_groups_policy,
    _stop_signals,
)  # fmt: skip


def admit(pod: pods.Pod, node: Node, others: Sequence[pods.Pod] = (), *,
          critical: bool = False) -> Rejection | None:
    """The first handler's refusal, or None when the node can run the pod beside `others`
    (the pods already admitted and not terminated), in the kubelet's order: sysctls and OS,
    the predicates (resources, node affinity, host ports), then what the runtime cannot do.
    A `critical` pod is not refused for resources: room is made for it (`preemption`)."""
    return first_handlers(pod, node) or predicates(pod, node, others, critical=critical)


def first_handlers(pod: pods.Pod, node: Node) -> Rejection | None:
    """The handlers before the kubelet's resource allocation (refused fields, sysctls, OS):
    device plugin resources are allocated after these, before `predicates`."""
    for handler in _HANDLERS:
        rejection = handler(pod, node)
        if rejection is not None:
            return rejection
    return None


def predicates(pod: pods.Pod, node: Node, others: Sequence[pods.Pod] = (), *,
               critical: bool = False) -> Rejection | None:
    """`admit` after `first_handlers`: the predicates, then what the runtime cannot do."""
    for predicate in _PREDICATES:
        if critical and predicate is _resources:
            continue
        rejection = predicate(pod, node, others)
        if rejection is not None:
            return rejection
    for handler in _SECURITY:
        rejection = handler(pod, node)
        if rejection is not None:
            return rejection
    return None


class Admitted:
    """The pods admitted and not yet terminated: the kubelet's active pods. Admission weighs a
    new pod (and a resize) against them; the QoS levels and the eviction manager follow them.

    Written only by the pod syncer, as pods are admitted, resized and terminated; read by the
    node's health jobs, which therefore need no way back into pod work.
    """

    def __init__(self) -> None:
        self._pods: dict[pods.PodUID, pods.Pod] = {}

    def all(self) -> list[pods.Pod]:
        return list(self._pods.values())

    def others(self, uid: pods.PodUID) -> list[pods.Pod]:
        """Every admitted pod but `uid`."""
        return [p for u, p in self._pods.items() if u != uid]

    def get(self, uid: pods.PodUID) -> pods.Pod | None:
        return self._pods.get(uid)

    def put(self, pod: pods.Pod) -> None:
        self._pods[pod.uid] = pod

    def remove(self, uid: pods.PodUID) -> bool:
        """Forget `uid`; whether it was admitted (its resources are free again)."""
        return self._pods.pop(uid, None) is not None
