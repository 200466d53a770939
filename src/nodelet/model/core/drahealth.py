"""The health of the devices DRA drivers prepared, as their health streams report it, and what
a container's status shows of it (KEP-4680 for DRA: the kubelet's pkg/kubelet/cm/dra
healthinfo.go and UpdateAllocatedResourcesStatus).

- A driver's **report** lists the devices it watches. Each one's health holds for its
  timeout (the driver's, or 30 s) from when the node received it; past that it reads
  `Unknown`. A device the driver stopped listing is dropped once its timeout passed (`Unknown`
  from then on, told as a change when it was not already). A driver keeps at most 16384
  devices here: a driver that invents names cannot grow the node's memory and checkpoint.
- A driver whose stream ended is forgotten (`clear`): its devices read `Unknown`.
- A **container** that names claims in `resources.claims` gets, in
  `allocatedResourcesStatus`, one entry per claim (and request) it names, `claim:<name>` or
  `claim:<name>/<request>`, with every device prepared for it: its first CDI device ID (else
  `<driver>/<pool>/<device>`) as the resource ID, its health, and the driver's message.

The cache is kept in `<data dir>/dra_health_state` (JSON), so that a restart keeps what the
drivers said until their reports time out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import pods, status
from nodelet.model.core import resourceclaims as rc

CHECKPOINT_NAME = "dra_health_state"
DEFAULT_TIMEOUT = 30.0
MAX_DEVICES_PER_DRIVER = 16384
# v1.ResourceHealthMessageMaxLength, in bytes: longer messages are cut, ending in "...".
MESSAGE_MAX = 1024
UNKNOWN: status.ResourceHealthStatus = "Unknown"


class CheckpointError(errors.MessageError):
    """The health checkpoint cannot be read."""


@dataclass(frozen=True)
class DeviceHealth:
    """One device's health as its driver last reported it: `received` is when the node got
    the report (Unix seconds), `timeout` how long it holds."""

    pool: str
    device: str
    health: status.ResourceHealthStatus = UNKNOWN
    received: float = 0.0
    timeout: float = DEFAULT_TIMEOUT
    message: str = ""

    @property
    def key(self) -> str:
        return f"{self.pool}/{self.device}"


def truncated(message: str) -> str:
    """A driver's message as a pod status may hold it: at most MESSAGE_MAX bytes of UTF-8, as
    the API server counts them (a longer one is cut at a character's end, "..." added)."""
    data = message.encode()
    if len(data) <= MESSAGE_MAX:
        return message
    return data[:MESSAGE_MAX - 3].decode(errors="ignore") + "..."


def timeout_of(seconds: int) -> float:
    """A report's health_check_timeout_seconds: 0 or less is the default."""
    return float(seconds) if seconds > 0 else DEFAULT_TIMEOUT


class HealthCache:
    """What each driver last reported of its devices (the kubelet's healthInfoCache)."""

    def __init__(self, drivers: Mapping[str, Mapping[str, DeviceHealth]] | None = None) -> None:
        self._drivers: dict[str, dict[str, DeviceHealth]] = {
            name: dict(devices) for name, devices in (drivers or {}).items()}

    def get(self, driver: str, pool: str, device: str, now: float) -> DeviceHealth:
        """The device's health now: `Unknown` (no message) when not reported, or when its
        report is older than its timeout."""
        found = self._drivers.get(driver, {}).get(f"{pool}/{device}")
        if found is None or now - found.received > found.timeout:
            return DeviceHealth(pool, device)
        return found

    def update(self, driver: str, reported: Iterable[DeviceHealth],
               now: float) -> tuple[list[DeviceHealth], bool]:
        """Take a driver's report: (the devices whose health, message or timeout changed,
        or that went `Unknown`; whether anything of the cache changed, to be saved)."""
        devices = self._drivers.setdefault(driver, {})
        changed: list[DeviceHealth] = []
        seen: set[str] = set()
        for report in reported:
            report = replace(report, received=now)
            seen.add(report.key)
            old = devices.get(report.key)
            if old is None and len(devices) >= MAX_DEVICES_PER_DRIVER:
                continue
            if old is None or (old.health, old.message, old.timeout) != \
                    (report.health, report.message, report.timeout):
                changed.append(report)
            devices[report.key] = report
        dropped = False
        for key, old in list(devices.items()):
            if key in seen or now - old.received <= old.timeout:
                continue
            if old.health != UNKNOWN:
                changed.append(replace(old, health=UNKNOWN, message="", received=now))
            del devices[key]
            dropped = True
        return changed, bool(changed) or dropped

    def clear(self, driver: str) -> list[DeviceHealth]:
        """Forget the driver (its stream ended): the devices it had, which read `Unknown`
        from now on."""
        return list(self._drivers.pop(driver, {}).values())

    def encode(self) -> bytes:
        return json.dumps({driver: {"devices": {key: _device_to_json(d)
                                                for key, d in sorted(devices.items())}}
                           for driver, devices in sorted(self._drivers.items())},
                          sort_keys=True).encode()

    @classmethod
    def decode(cls, blob: bytes) -> HealthCache:
        try:
            data = json.loads(blob)
            return cls({driver: {key: _device_from_json(d)
                                 for key, d in entry["devices"].items()}
                        for driver, entry in data.items()})
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CheckpointError(f"DRA health checkpoint is corrupt: {exc}") from exc


def _device_to_json(d: DeviceHealth) -> dict[str, Any]:
    return {"pool": d.pool, "device": d.device, "health": d.health, "received": d.received,
            "timeout": d.timeout, "message": d.message}


def _device_from_json(d: Mapping[str, Any]) -> DeviceHealth:
    health = d["health"]
    if health not in ("Healthy", "Unhealthy", UNKNOWN):
        raise ValueError(f"unknown health {health!r}")
    return DeviceHealth(str(d["pool"]), str(d["device"]), health, float(d["received"]),
                        float(d["timeout"]), str(d["message"]))


def resource_statuses(pod: pods.Pod, container: pods.Container,
                      prepared: Mapping[str, rc.ClaimInfo],
                      health: Callable[[str, str, str], DeviceHealth],
                      *, messages: bool = True) -> tuple[status.ResourceStatus, ...]:
    """The allocatedResourcesStatus entries of `container` for the claims it names:
    `prepared` holds the pod's claims by ResourceClaim name, `health(driver, pool, device)`
    says a device's health now; `messages` (ResourceHealthStatusMessage) shows the drivers'
    messages. A claim not prepared (yet), or without a device for the request, gives none."""
    by_name = {claim.name: claim for claim in pod.spec.resource_claims}
    out: dict[str, status.ResourceStatus] = {}
    for name, request in container.resources.claims:
        claim = by_name.get(name)
        made = rc.known_name(pod, claim) if claim is not None else None
        info = prepared.get(made) if made is not None else None
        if info is None:
            continue
        base = request.split("/", 1)[0]
        entries: dict[str, status.ResourceHealth] = {}
        for driver in sorted(info.devices):
            for device in info.devices[driver]:
                if request and device.request_names and base not in device.request_names:
                    continue
                resource_id = device.cdi_ids[0] if device.cdi_ids else \
                    f"{driver}/{device.pool}/{device.device}"
                if resource_id in entries:
                    continue
                found = health(driver, device.pool, device.device)
                entries[resource_id] = status.ResourceHealth(
                    resource_id, found.health, found.message if messages else "")
        if entries:
            key = f"claim:{name}/{request}" if request else f"claim:{name}"
            out[key] = status.ResourceStatus(key, tuple(entries.values()))
    return tuple(out.values())


def pods_using(infos: Iterable[rc.ClaimInfo], driver: str,
               devices: Iterable[DeviceHealth]) -> set[str]:
    """The UIDs of the pods whose claims hold any of `devices` of `driver`."""
    keys = {(d.pool, d.device) for d in devices}
    return {uid for info in infos
            for device in info.devices.get(driver, ())
            if (device.pool, device.device) in keys
            for uid in info.pod_uids}
