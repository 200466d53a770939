"""Conditions beyond KEP-3085, each behind an alpha feature gate (pure; docs/kep3085.md,
"Beyond the KEP"). With every gate off `apply` returns the kubelet's conditions unchanged.

- `PodIPFamilyConditions`: one condition per IP family the node serves, for pods not on the
  host network — `nodelet.dev/IPv4Ready`, `nodelet.dev/IPv6Ready` — True when the sandbox in
  use has an address of that family. The KEP-3085 review asked for extended conditions per
  family ("IPv6 is set up already but IPv4 still coming up").
- `PodReadyToStartContainersAllIPFamilies`: PodReadyToStartContainers itself stays False
  (reason `PodSandboxNo<Family>Address`) while a served family is missing. Only the condition
  changes: the sandbox is still used, as the kubelet would use it (no re-creation loop).
- `PodVolumesCondition`: `nodelet.dev/VolumesReady` (the original KEP's future PodHasVolumes):
  True once every volume is set up, False with the FailedMount message while one is not.
- `PodInitializedAfterSandbox`: Initialized of a pod without init containers turns True only
  once the sandbox is ready (the kubelet sets it before the sandbox exists), so Initialized
  always means "app containers may start".

Why these names: the API conventions ask for PascalCase condition types and, for types not
defined by Kubernetes itself, a DNS-subdomain prefix of the owner (`foo.example.com/CamelCase`,
the pattern `(dns1123Subdomain/)?qualifiedName` of metav1.Condition and of pod readiness gates);
`kubernetes.io` is reserved for the project (the KEP rejected the extended condition
`kubernetes.io/pod-ready-to-start-containers`). The prefix `nodelet.dev` is nodelet's; names are
short and read True-is-good ("Ready" over "PodVolumesReady"), so a kubectl wait works:
`kubectl wait --for=condition=nodelet.dev/IPv6Ready pod/web`.

No exceptions of its own.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from nodelet import settings
from nodelet.model.core import pods, runtime, sandboxes, status

Family = Literal["IPv4", "IPv6"]

DOMAIN = "nodelet.dev"
IPV4_READY = f"{DOMAIN}/IPv4Ready"
IPV6_READY = f"{DOMAIN}/IPv6Ready"
VOLUMES_READY = f"{DOMAIN}/VolumesReady"
FAMILY_TYPES: dict[Family, str] = {"IPv4": IPV4_READY, "IPv6": IPV6_READY}
# Every type this module may write, whatever the gates.
TYPES = frozenset({IPV4_READY, IPV6_READY, VOLUMES_READY})

REASON_FAILED_MOUNT = "FailedMount"  # the event's reason: the message is the event's too
REASON_VOLUMES_NOT_READY = "VolumesNotReady"
VOLUMES_NOT_READY_MESSAGE = "volumes are not set up yet"
WAITING_FOR_SANDBOX = "waiting for the pod sandbox"


@dataclass(frozen=True)
class Facts:
    """What these conditions read beyond the runtime: the families the node serves (its pod
    CIDRs), and the pod's volumes as the volume manager last left them."""

    families: tuple[Family, ...] = ("IPv4",)
    volumes_ready: bool = False  # every volume was set up (since the pod's worker started)
    volume_error: str | None = None  # the last FailedMount message, until volumes are set up


def served_families(pod_cidrs: Sequence[str]) -> tuple[Family, ...]:
    """The IP families of the node's pod CIDRs, in their order; none given is IPv4 (the
    embedded runtime's derived /24). A CIDR that does not parse is skipped."""
    out: list[Family] = []
    for cidr in pod_cidrs:
        try:
            family = family_of(str(ipaddress.ip_network(cidr, strict=False).network_address))
        except ValueError:
            continue
        if family not in out:
            out.append(family)
    return tuple(out) or ("IPv4",)


def family_of(ip: str) -> Family:
    """IPv4 or IPv6; raises ValueError for something that is not an address."""
    return "IPv4" if ipaddress.ip_address(ip).version == 4 else "IPv6"


def owned_types(gates: settings.FeatureGates) -> frozenset[str]:
    """The types this module writes under `gates` (both families whenever the family gate is
    on, so a family the node no longer serves is dropped rather than kept stale)."""
    out: set[str] = set()
    if gates.pod_ip_family_conditions:
        out |= {IPV4_READY, IPV6_READY}
    if gates.pod_volumes_condition:
        out.add(VOLUMES_READY)
    return frozenset(out)


def _sandbox_families(sandbox_list: Sequence[runtime.SandboxInfo]) -> set[Family]:
    """Families of the newest sandbox's addresses."""
    found: set[Family] = set()
    if not sandbox_list:
        return found
    for ip in sandboxes.sandbox_ips(sandboxes.newest_first(sandbox_list)[0]):
        try:
            found.add(family_of(ip))
        except ValueError:
            continue
    return found


def _missing_reason(family: Family) -> str:
    return f"PodSandboxNo{family}Address"


def family_condition(
    pod: pods.Pod, sandbox_list: Sequence[runtime.SandboxInfo], family: Family,
    served: Sequence[Family],
) -> status.PodCondition:
    """`nodelet.dev/<family>Ready`: True when the sandbox in use has an address of `family`.
    The False message names the family and, without a usable sandbox, why (never a volume
    error: the volumes have their own condition)."""
    type_ = FAMILY_TYPES[family]
    change = sandboxes.sandbox_change(pod, sandbox_list)
    if not change.needed and family in _sandbox_families(sandbox_list):
        return status.PodCondition(type=type_, status="True")
    message = f"pod sandbox has no {family} address"
    message += f": {change.reason}" if change.needed else f" (the node serves {_and(served)})"
    return status.PodCondition(type=type_, status="False", reason=_missing_reason(family),
                               message=message)


def all_families(
    ready: status.PodCondition, pod: pods.Pod, sandbox_list: Sequence[runtime.SandboxInfo],
    served: Sequence[Family],
) -> status.PodCondition:
    """The stricter PodReadyToStartContainers: a True condition turns False, naming the first
    missing family in its reason and every missing one in its message."""
    if ready.status != "True" or pod.spec.host_network:
        return ready
    have = _sandbox_families(sandbox_list)
    missing = [f for f in served if f not in have]
    if not missing:
        return ready
    return status.PodCondition(
        type=ready.type, status="False", reason=_missing_reason(missing[0]),
        message=f"pod sandbox has no {_and(missing)} address (the node serves {_and(served)})")


def volumes_condition(
    pod: pods.Pod, sandbox_list: Sequence[runtime.SandboxInfo], facts: Facts
) -> status.PodCondition:
    """`nodelet.dev/VolumesReady`. A pod whose sandbox is in use had its volumes set up before
    it (the sandbox is only created after them), which is what an agent restart finds."""
    if facts.volume_error:
        return status.PodCondition(type=VOLUMES_READY, status="False",
                                   reason=REASON_FAILED_MOUNT, message=facts.volume_error)
    in_use = not sandboxes.sandbox_change(pod, sandbox_list).needed
    if facts.volumes_ready or in_use or not pod.spec.volumes:
        return status.PodCondition(type=VOLUMES_READY, status="True")
    return status.PodCondition(type=VOLUMES_READY, status="False",
                               reason=REASON_VOLUMES_NOT_READY, message=VOLUMES_NOT_READY_MESSAGE)


def initialized_after_sandbox(
    initialized: status.PodCondition, pod: pods.Pod, sandbox_list: Sequence[runtime.SandboxInfo],
    container_statuses: Sequence[status.ContainerStatus] | None,
) -> status.PodCondition:
    """Initialized of a pod without init containers: True only once the sandbox is ready (or a
    container has run, so a pod whose sandbox is gone stays initialized)."""
    if pod.spec.init_containers or initialized.status != "True" or initialized.reason:
        return initialized
    change = sandboxes.sandbox_change(pod, sandbox_list)
    if not change.needed or _any_started(container_statuses):
        return initialized
    return status.PodCondition(type=status.INITIALIZED, status="False",
                               reason=status.REASON_POD_SANDBOX_NOT_READY,
                               message=f"{WAITING_FOR_SANDBOX}: {change.reason}")


def _any_started(container_statuses: Sequence[status.ContainerStatus] | None) -> bool:
    return any(isinstance(s.state, status.ContainerStateRunning | status.ContainerStateTerminated)
               for s in container_statuses or ())


def apply(
    conditions: Sequence[status.PodCondition],
    pod: pods.Pod,
    *,
    sandbox_list: Sequence[runtime.SandboxInfo],
    container_statuses: Sequence[status.ContainerStatus] | None,
    gates: settings.FeatureGates,
    facts: Facts,
    ready_type: str | None,
) -> tuple[status.PodCondition, ...]:
    """The kubelet's `conditions` with the gated changes: the ready-to-start condition made
    strict, Initialized waiting for the sandbox, and the new conditions placed right after
    the ready-to-start condition (before Initialized when it is not reported)."""
    out: list[status.PodCondition] = []
    for cond in conditions:
        if cond.type == status.INITIALIZED:
            if gates.pod_initialized_after_sandbox:
                cond = initialized_after_sandbox(cond, pod, sandbox_list, container_statuses)
            if ready_type is None:
                out += _new_conditions(pod, sandbox_list, gates, facts)
        elif cond.type == ready_type and gates.pod_ready_needs_all_ip_families:
            cond = all_families(cond, pod, sandbox_list, facts.families)
        out.append(cond)
        if cond.type == ready_type:
            out += _new_conditions(pod, sandbox_list, gates, facts)
    return tuple(out)


def _new_conditions(
    pod: pods.Pod, sandbox_list: Sequence[runtime.SandboxInfo], gates: settings.FeatureGates,
    facts: Facts,
) -> list[status.PodCondition]:
    out = []
    if gates.pod_ip_family_conditions and not pod.spec.host_network:
        out += [family_condition(pod, sandbox_list, f, facts.families) for f in facts.families]
    if gates.pod_volumes_condition:
        out.append(volumes_condition(pod, sandbox_list, facts))
    return out


def _and(items: Sequence[str]) -> str:
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + f" and {items[-1]}"
