"""What of a pod's status and events two agents must agree on, and how two views differ.

`pod_view` keeps, from a v1 Pod as an agent's `/pods` serves it: the phase, reason and
message; each condition's type, status, reason and message; each container's state (kind,
reason, message, exit code), last state, restart count, ready and started; the QoS class;
the IP families. `event_view` keeps each event's type, reason and message, once per distinct
event in the order they first happened (counts and repeats depend on timing). What must
differ between agents is scrubbed from every text: UIDs, container and sandbox IDs, IP
addresses, timestamps, back-off delays. `transition_order` gives the True conditions grouped
by lastTransitionTime; `orders_agree` accepts two orders unless one has a condition strictly
before another that the other has strictly after. `differences` lists the paths at which
two views differ. Pure functions over plain JSON values.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

_SCRUB = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<uid>"),  # a static pod's UID: the config hash
    (re.compile(r"\b[0-9a-f]{64}\b"), "<id>"),
    (re.compile(r"\b[0-9a-f]{12,63}\b"), "<id>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b"), "<ip>"),
    # How far a back-off has doubled depends on when it is seen, not on the agent.
    (re.compile(r"\bback-off \d+s\b"), "back-off <delay>"),
)


def scrub(text: str) -> str:
    for pattern, replacement in _SCRUB:
        text = pattern.sub(replacement, text)
    return text


def _state(state: dict[str, Any] | None) -> dict[str, Any]:
    if not state:
        return {}
    kind, detail = next(iter(state.items()))
    kept: dict[str, Any] = {"kind": kind}
    for key in ("reason", "message", "exitCode", "signal"):
        if key in detail and detail[key] not in ("", None):
            kept[key] = scrub(str(detail[key])) if isinstance(detail[key], str) else detail[key]
    return kept


def _container(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": status.get("name"),
        "state": _state(status.get("state")),
        "lastState": _state(status.get("lastState")),
        "restartCount": status.get("restartCount", 0),
        "ready": bool(status.get("ready")),
        "started": status.get("started"),
    }


def _family(ip: str) -> str:
    return f"IPv{ipaddress.ip_address(ip).version}"


def pod_view(pod: dict[str, Any]) -> dict[str, Any]:
    status = pod.get("status") or {}
    conditions = sorted(status.get("conditions") or [], key=lambda c: c["type"])
    return {
        "phase": status.get("phase"),
        "reason": status.get("reason", ""),
        "message": scrub(status.get("message", "")),
        "qosClass": status.get("qosClass"),
        "ipFamilies": [_family(i["ip"]) for i in status.get("podIPs") or []],
        "conditions": [{"type": c["type"], "status": c["status"],
                        "reason": c.get("reason", ""), "message": scrub(c.get("message", ""))}
                       for c in conditions],
        "initContainerStatuses": [_container(c) for c in
                                  status.get("initContainerStatuses") or []],
        "containerStatuses": [_container(c) for c in status.get("containerStatuses") or []],
    }


def transition_order(pod: dict[str, Any]) -> list[list[str]]:
    """The types of the conditions that are True, grouped by lastTransitionTime (whole
    seconds), earliest first: the order they turned True in. A False condition's time says
    when it last turned, which for a state too short for one agent to see (a container that
    ran for a millisecond made ContainersReady True, then False) is timing, not behaviour."""
    groups: dict[str, list[str]] = {}
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True":
            groups.setdefault(str(c.get("lastTransitionTime", "")), []).append(c["type"])
    return [sorted(groups[t]) for t in sorted(groups)]


def orders_agree(a: list[list[str]], b: list[list[str]]) -> bool:
    rank_a = {t: i for i, group in enumerate(a) for t in group}
    rank_b = {t: i for i, group in enumerate(b) for t in group}
    common = sorted(set(rank_a) & set(rank_b))
    return not any((rank_a[x] < rank_a[y]) and (rank_b[x] > rank_b[y])
                   for x in common for y in common)


_FIELD_PATH = re.compile(r"spec\.(?:initContainers|containers|ephemeralContainers)\{(.+)\}")
# The kubelet's container events name their container in the involved object's fieldPath,
# nodelet's (which have no fieldPath yet) in the message: one is rewritten into the other,
# and the fieldPath is not compared (docs/differential.md, "Events").
_BY_FIELD_PATH = {"Container created": "Created container {}",
                  "Container started": "Started container {}"}
# With KubeletEnsureSecretPulledImages (on in 1.37) the kubelet adds this to Pulled; nodelet
# does not check pull credentials of present images, so it does not say so.
_ACCESS = " and can be accessed by the pod"


def _message(e: dict[str, str]) -> str:
    message = e.get("message", "")
    named = _FIELD_PATH.fullmatch(e.get("fieldPath", ""))
    if named and message in _BY_FIELD_PATH:
        message = _BY_FIELD_PATH[message].format(named.group(1))
    return scrub(message.removesuffix(_ACCESS))


def event_view(events: list[dict[str, str]]) -> list[dict[str, str]]:
    """Distinct events, in the order they first happened (`events` oldest first)."""
    seen: list[dict[str, str]] = []
    for e in events:
        kept = {"type": e.get("type", ""), "reason": e.get("reason", ""), "message": _message(e)}
        if kept not in seen:
            seen.append(kept)
    return seen


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths at which `a` and `b` differ, each with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b)):
            found += differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        found = []
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found += differences(x, y, f"{path}[{index}]")
        return found
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]
