"""Pod and container security as the kubelet asks CRI for it (pure).

The facts follow pkg/kubelet/kuberuntime/security_context*.go and pkg/securitycontext: the
pod's securityContext gives each container its defaults; `privileged` means every capability and
device and no masked paths; `allowPrivilegeEscalation` sets no_new_privs only when it is
explicitly false; procMount Default sends the kubelet's own masked and read-only paths; PID
namespaces are per container unless `shareProcessNamespace` (or `hostPID`).
"""

from __future__ import annotations

from nodelet.model import pods, runtime


def namespaces(pod: pods.Pod) -> runtime.NamespaceOptions:
    """The kubelet's namespacesForPod: network and IPC per pod or the node's; PID per
    container unless the pod shares one (POD) or uses the node's (NODE)."""
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
    )


def sandbox_security(pod: pods.Pod) -> runtime.SandboxSecurity:
    return runtime.SandboxSecurity(namespaces=namespaces(pod))
