"""What of a pod's status and events two agents must agree on, and how two views differ.

`pod_view` is the whole `status` of a v1 Pod as an agent's `/pods` serves it, every field
and list in its order, with only what depends on the run rather than the agent replaced by
what it is (`_RUN`, below, each with its reason): times by `<time>` (whether one is there is
compared; the order conditions turned True is compared by `transition_order`), IP
addresses by their family, container and image IDs and UIDs by a placeholder, back-off
delays. `event_view` keeps each event's type, reason, message and involved field path (the
container it is about), once per distinct event in the order they first happened (counts
and repeats depend on timing), scrubbed likewise. `transition_order` gives the True
conditions grouped by lastTransitionTime; `orders_agree` accepts two orders unless one has a
condition strictly before another that the other has strictly after. `differences` lists
the paths at which two views differ. Pure functions over plain JSON values.
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


# Fields whose value depends on the run, not on the agent: when something happened (whether it
# did is kept) and which address the runtime handed out (its family is kept).
_TIMES = frozenset({"startTime", "lastTransitionTime", "lastProbeTime", "startedAt",
                    "finishedAt"})
_ADDRESSES = frozenset({"podIP", "hostIP"})
_ADDRESS_LISTS = frozenset({"podIPs", "hostIPs"})


def _family(ip: str) -> str:
    return f"IPv{ipaddress.ip_address(ip).version}"


def _run_free(key: str, value: Any) -> Any:
    """`value` (of field `key`) with what depends on the run replaced (see `_TIMES`...)."""
    if key in _TIMES:  # the epoch is the kubelet's "never" for a container's start
        return value if not value or value.startswith("1970-01-01T") else "<time>"
    if key in _ADDRESSES and isinstance(value, str) and value:
        return _family(value)
    if key in _ADDRESS_LISTS and isinstance(value, list):
        return [{**i, "ip": _family(i["ip"])} if isinstance(i, dict) and "ip" in i else i
                for i in value]
    if isinstance(value, dict):
        return {k: _run_free(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_run_free(key, v) for v in value]
    return scrub(value) if isinstance(value, str) else value


def pod_view(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod's whole status, free of what depends on the run."""
    view = dict(_run_free("status", pod.get("status") or {}))
    view["metadata"] = _run_free("metadata", pod.get("metadata") or {})
    view["spec"] = _run_free("spec", pod.get("spec") or {})
    return view


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


def event_view(events: list[dict[str, str]]) -> list[dict[str, str]]:
    """Distinct events, in the order they first happened (`events` oldest first)."""
    seen: list[dict[str, str]] = []
    for e in events:
        kept = {"type": e.get("type", ""), "reason": e.get("reason", ""),
                "message": scrub(e.get("message", "")), "fieldPath": e.get("fieldPath", "")}
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
