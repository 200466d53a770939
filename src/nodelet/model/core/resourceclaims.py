"""Dynamic resource allocation on the node (pure): what the kubelet's DRA manager decides
(pkg/kubelet/cm/dra: manager.go, claiminfo.go, state/), as plain values.

- `claim_name`: which ResourceClaim a pod's `spec.resourceClaims` entry stands for (its
  `resourceClaimName`, or the claim made from its template, named in the pod's
  `status.resourceClaimStatuses`), in the kubelet's words when it cannot be told.
- `checked_claim`: a ResourceClaim read from the API, checked as the kubelet checks it before
  preparing (made for this pod, reserved for it, allocated), with the drivers to call.
- `cdi_devices`: the CDI devices a container gets from the prepared claims it names in
  `resources.claims` (all the claim's devices, or those of the request it names).
- `ClaimInfo`, `encode_checkpoint` / `decode_checkpoint`: the claims prepared on this node,
  the pods using each, and their devices, kept across restarts (the kubelet's
  `dra_manager_state`; nodelet's own JSON layout with a checksum).

Exceptions::

    ClaimError       a claim cannot be used by the pod (its message is the kubelet's)
    CheckpointError  the checkpoint cannot be read (corrupt, or not this format)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import pods

CHECKPOINT_NAME = "dra_manager_state"
# A result's skipNodeOperations entry that skips every node operation.
_SKIP_ALL = "All"
_SKIP_PREPARE = "NodePrepareResources"
_SKIP_UNPREPARE = "NodeUnprepareResources"


class ClaimError(errors.MessageError):
    """A pod cannot use one of its claims (yet)."""


class CheckpointError(errors.MessageError):
    """The DRA checkpoint cannot be read."""


@dataclass(frozen=True)
class ClaimRef:
    """A ResourceClaim as a driver is told of it."""

    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class PreparedDevice:
    """One device a driver prepared: the claim's requests it serves (none: every request),
    its pool and name, and the CDI devices a container using it gets."""

    request_names: tuple[str, ...] = ()
    pool: str = ""
    device: str = ""
    cdi_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckedClaim:
    """A claim the pod may use: which one, and which drivers prepare and unprepare it."""

    ref: ClaimRef
    prepare_drivers: tuple[str, ...]
    unprepare_drivers: tuple[str, ...]


@dataclass
class ClaimInfo:
    """A claim known to the node (the kubelet's ClaimInfo): the pods that use it, whether its
    drivers prepared it, and the devices each driver prepared."""

    ref: ClaimRef
    prepare_drivers: tuple[str, ...]
    unprepare_drivers: tuple[str, ...]
    pod_uids: set[str] = field(default_factory=set)
    prepared: bool = False
    devices: dict[str, tuple[PreparedDevice, ...]] = field(default_factory=dict)


def claim_name(pod: pods.Pod, claim: pods.PodResourceClaim) -> tuple[str, bool] | None:
    """(name of the ResourceClaim, whether it must be checked to be made for `pod`): the
    claim named, or the one made from the template (resourceclaim.Name); None when the
    controller made none on purpose (its status entry names no claim): nothing to prepare."""
    if claim.resource_claim_name:
        return claim.resource_claim_name, False
    if claim.template_name:
        for name, made in pod.resource_claim_statuses:
            if name == claim.name:
                return (made, True) if made else None
        raise ClaimError(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
    raise ClaimError(f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{claim.name}": '
                     "none of the supported fields are set")


def claim_names(pod: pods.Pod) -> list[str]:
    """The ResourceClaims of every `spec.resourceClaims` entry whose claim is known (a
    template's claim that was never made has none)."""
    return [name for claim in pod.spec.resource_claims
            if (name := known_name(pod, claim)) is not None]


def known_name(pod: pods.Pod, claim: pods.PodResourceClaim) -> str | None:
    """The ResourceClaim of `claim`, None when there is none (yet, or on purpose)."""
    try:
        made = claim_name(pod, claim)
    except ClaimError:
        return None
    return made[0] if made is not None else None


def checked_claim(pod: pods.Pod, name: str, must_check_owner: bool,
                  obj: Mapping[str, Any]) -> CheckedClaim:
    """The ResourceClaim `obj` (v1 JSON) that `pod` names `name`, checked as the kubelet's
    prepareResources checks it; ClaimError in its words when the pod may not use it."""
    meta = obj.get("metadata") or {}
    namespace, uid = str(meta.get("namespace", "")), str(meta.get("uid", ""))
    if must_check_owner:
        if namespace != pod.namespace:
            raise ClaimError(f"ResourceClaim {namespace}/{name} is not in the same namespace "
                             f"as Pod {pod.namespace}/{pod.name}")
        owners = meta.get("ownerReferences") or ()
        if not any(o.get("uid") == pod.uid and o.get("controller") for o in owners):
            raise ClaimError(f"ResourceClaim {namespace}/{name} was not created for Pod "
                             f"{pod.namespace}/{pod.name} (Pod is not owner)")
    status = obj.get("status") or {}
    if not any(r.get("uid") == pod.uid for r in status.get("reservedFor") or ()):
        raise ClaimError(f"pod {pod.name} ({pod.uid}) is not allowed to use ResourceClaim "
                         f"{name} ({uid})")
    allocation = status.get("allocation")
    if not allocation:
        raise ClaimError(f"ResourceClaim {name}: not allocated")
    results = (allocation.get("devices") or {}).get("results") or ()
    return CheckedClaim(ClaimRef(namespace, uid, name),
                        _drivers(results, _SKIP_PREPARE), _drivers(results, _SKIP_UNPREPARE))


def _drivers(results: Iterable[Mapping[str, Any]], operation: str) -> tuple[str, ...]:
    """The drivers of an allocation's results that take part in `operation`: a driver is
    skipped only when every one of its results skips it (DriverState.Skips)."""
    taking: dict[str, bool] = {}
    for result in results:
        driver = str(result.get("driver", ""))
        skips = result.get("skipNodeOperations") or ()
        skipped = _SKIP_ALL in skips or operation in skips
        taking[driver] = taking.get(driver, False) or not skipped
    return tuple(sorted(d for d, take in taking.items() if take and d))


def container_claim_names(pod: pods.Pod, container: pods.Container) -> list[str]:
    """The ResourceClaims `container` names through `resources.claims` (once each)."""
    named = {name for name, _request in container.resources.claims}
    return [name for claim in pod.spec.resource_claims
            if claim.name in named and (name := known_name(pod, claim)) is not None]


def cdi_devices(pod: pods.Pod, container: pods.Container,
                prepared: Mapping[str, ClaimInfo]) -> tuple[str, ...]:
    """The CDI devices `container` gets from the claims it names (GetResources): `prepared`
    holds the pod's claims by ResourceClaim name. A claim named without a request gives all
    its devices; with one, the devices that serve that request (or serve every request)."""
    requests: dict[str, list[str]] = {}
    for name, request in container.resources.claims:
        requests.setdefault(name, []).append(request)
    found: list[str] = []
    for claim in pod.spec.resource_claims:
        if claim.name not in requests:
            continue
        made = known_name(pod, claim)
        info = prepared.get(made) if made is not None else None
        if info is None:
            continue
        for request in requests[claim.name]:
            for driver in sorted(info.devices):
                for device in info.devices[driver]:
                    if not request or not device.request_names \
                            or request in device.request_names:
                        found.extend(device.cdi_ids)
    return tuple(dict.fromkeys(found))


# The kubelet's dra_resource_claims_in_use label value for every driver together.
ANY_DRIVER = "<any>"


def claims_in_use(infos: Iterable[ClaimInfo]) -> dict[str, int]:
    """The prepared claims by driver, and all of them under ANY_DRIVER (always there): a
    claim with devices of two drivers counts once for each, and once in all."""
    counts: dict[str, int] = {ANY_DRIVER: 0}
    for info in infos:
        if not info.prepared:
            continue
        counts[ANY_DRIVER] += 1
        for driver in {*info.prepare_drivers, *info.unprepare_drivers}:
            counts[driver] = counts.get(driver, 0) + 1
    return counts


def metrics_text(infos: Iterable[ClaimInfo]) -> str:
    """`dra_resource_claims_in_use` in the Prometheus text format, as the kubelet shows it."""
    name = "dra_resource_claims_in_use"
    lines = [f"# HELP {name} [ALPHA] The number of ResourceClaims that are currently in use on "
             "the node, by driver name (driver_name label value) and across all drivers "
             "(special value <any> for driver_name). Note that the sum of all by-driver counts "
             "is not the total number of in-use ResourceClaims because the same ResourceClaim "
             "might use devices from different drivers. Instead, use the count for the <any> "
             "driver_name.",
             f"# TYPE {name} gauge"]
    lines += [f'{name}{{driver_name="{driver}"}} {count}'
              for driver, count in sorted(claims_in_use(infos).items())]
    return "".join(f"{line}\n" for line in lines)


# -- checkpoint ---------------------------------------------------------------------------

def _checksum(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canonical).hexdigest()


def encode_checkpoint(infos: Iterable[ClaimInfo]) -> bytes:
    """The checkpoint file's bytes: every claim known to the node."""
    entries = [{
        "namespace": i.ref.namespace, "uid": i.ref.uid, "name": i.ref.name,
        "prepareDrivers": list(i.prepare_drivers),
        "unprepareDrivers": list(i.unprepare_drivers),
        "podUIDs": sorted(i.pod_uids), "prepared": i.prepared,
        "devices": {driver: [{"requestNames": list(d.request_names), "pool": d.pool,
                              "device": d.device, "cdiDeviceIDs": list(d.cdi_ids)}
                             for d in devices]
                    for driver, devices in sorted(i.devices.items())},
    } for i in sorted(infos, key=lambda i: (i.ref.namespace, i.ref.name))]
    data = {"kind": "DRACheckpoint", "claims": entries}
    return json.dumps({"data": data, "checksum": _checksum(data)}, indent=1).encode()


def decode_checkpoint(blob: bytes) -> list[ClaimInfo]:
    """The claims of a checkpoint; CheckpointError when the bytes are not one or its checksum
    does not match."""
    try:
        whole = json.loads(blob)
        data = whole["data"]
        if _checksum(data) != whole["checksum"]:
            raise CheckpointError("DRA checkpoint is corrupt: checksum mismatch")
        return [ClaimInfo(
            ref=ClaimRef(str(e["namespace"]), str(e["uid"]), str(e["name"])),
            prepare_drivers=tuple(map(str, e["prepareDrivers"])),
            unprepare_drivers=tuple(map(str, e["unprepareDrivers"])),
            # Prepared again at the next sandbox, as the kubelet's restored claims are: the
            # driver's CDI specs may be gone with a reboot (NodePrepareResources is
            # idempotent).
            pod_uids=set(map(str, e["podUIDs"])), prepared=False,
            devices={str(driver): tuple(PreparedDevice(
                tuple(map(str, d["requestNames"])), str(d["pool"]), str(d["device"]),
                tuple(map(str, d["cdiDeviceIDs"]))) for d in devices)
                for driver, devices in e["devices"].items()})
            for e in data["claims"]]
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"DRA checkpoint cannot be read: {exc}") from exc
