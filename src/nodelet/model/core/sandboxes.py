"""The sandbox decision (DESIGN §3): does a pod need a new sandbox, and why.

This is the kubelet's `PodSandboxChanged` (`pkg/kubelet/kuberuntime/util/util.go`) as one pure
function. Its `reason` is also the message of a `False` PodReadyToStartContainers condition, so
the pod worker and the status generation can never disagree about the sandbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nodelet.model.core import pods, runtime

# Messages, in the order the checks run (pkg/kubelet/types/constants.go, PodSandboxNotReadyMsg*).
MSG_NO_SANDBOX = "no pod sandbox exists"
MSG_MULTIPLE_READY = "multiple pod sandboxes are ready"
MSG_NOT_READY = "pod sandbox is not ready"
MSG_NAMESPACE_MODE = "pod sandbox network namespace mode does not match the pod spec"
MSG_NO_IP = "pod sandbox has no IP address"


@dataclass(frozen=True)
class SandboxChange:
    """The outcome of `sandbox_change`.

    `attempt`: when `needed`, the attempt number the new sandbox gets (0 for the first one,
    otherwise the highest existing attempt + 1); when not needed, the attempt of the sandbox in
    use. `reason`: why a new one is needed ("" when not needed). `sandbox_to_kill`: the newest
    sandbox's id, which is the sandbox in use when not `needed`; None when the pod has no
    sandbox, and - like the kubelet - when only the network namespace mode changed (so no
    `SandboxChanged` event is emitted for that case).
    """

    needed: bool
    attempt: int
    reason: str
    sandbox_to_kill: runtime.SandboxID | None


def expected_network_mode(pod: pods.Pod) -> runtime.NamespaceMode:
    """NODE for `hostNetwork` pods, POD otherwise (the kubelet's NetworkNamespaceForPod)."""
    return runtime.NamespaceMode.NODE if pod.spec.host_network else runtime.NamespaceMode.POD


def newest_first(sandboxes: Sequence[runtime.SandboxInfo]) -> list[runtime.SandboxInfo]:
    """Sandboxes ordered newest first, as the kubelet's PodStatus.SandboxStatuses."""
    return sorted(sandboxes, key=lambda s: (s.created_at, s.attempt), reverse=True)


def sandbox_change(pod: pods.Pod, sandboxes: Sequence[runtime.SandboxInfo]) -> SandboxChange:
    """Whether `pod` needs a new sandbox, given all of its sandboxes known to the runtime.

    The checks run in the kubelet's order; the first one that fails decides the reason.
    """
    if not sandboxes:
        return SandboxChange(needed=True, attempt=0, reason=MSG_NO_SANDBOX, sandbox_to_kill=None)
    ordered = newest_first(sandboxes)
    latest = ordered[0]
    next_attempt = max(s.attempt for s in sandboxes) + 1
    ready_count = sum(1 for s in sandboxes if s.state is runtime.SandboxState.READY)
    reason = ""
    to_kill: runtime.SandboxID | None = latest.id
    if ready_count > 1:
        reason = MSG_MULTIPLE_READY
    elif latest.state is not runtime.SandboxState.READY:
        reason = MSG_NOT_READY
    elif latest.network_mode is not expected_network_mode(pod):
        reason, to_kill = MSG_NAMESPACE_MODE, None
    elif not pod.spec.host_network and not latest.ip:
        # hostNetwork pods use the node's addresses; only their sandbox state matters.
        reason = MSG_NO_IP
    if not reason:
        return SandboxChange(
            needed=False, attempt=latest.attempt, reason="", sandbox_to_kill=latest.id
        )
    return SandboxChange(needed=True, attempt=next_attempt, reason=reason, sandbox_to_kill=to_kill)


def should_create_sandbox(
    pod: pods.Pod, change: SandboxChange, has_container_history: bool
) -> bool:
    """Whether the pod worker should create the sandbox `change` asks for.

    A `restartPolicy: Never` pod whose sandbox went away after its containers ran gets no new
    sandbox (the kubelet's computePodActions): re-running its containers would break the
    policy, so the pod goes terminal instead and its condition stays False.
    """
    if not change.needed:
        return False
    never_restart = pod.spec.restart_policy == "Never"
    return not (never_restart and change.attempt != 0 and has_container_history)


def sandbox_ips(sandbox: runtime.SandboxInfo) -> tuple[str, ...]:
    """The pod IPs of a sandbox: its primary IP first, then the additional ones (dual stack)."""
    return tuple(ip for ip in (sandbox.ip, *sandbox.additional_ips) if ip)
