"""Merging a freshly generated pod status with the previous one (pure, no I/O).

The kubelet's status manager (`pkg/kubelet/status/status_manager.go`, `updateLastTransitionTime`
and `isPodStatusByKubeletEqual`) decides two things before it stores a status:

- each condition's `lastTransitionTime`: kept from the old condition of the same type when its
  `status` is unchanged (a new reason or message does not bump it), otherwise "now";
- whether the new status differs from the cached one at all, so identical statuses are dropped.

This module does the same on plain values. It raises no exceptions of its own.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from nodelet.model.core import status as st

# Conditions whose transition time the kubelet manages (updateLastTransitionTime). Both names of
# the KEP-3085 condition are listed: the compatibility switch reports it as PodHasNetwork.
KUBELET_OWNED = frozenset(
    {
        st.POD_SCHEDULED,
        st.POD_READY_TO_START_CONTAINERS,
        st.POD_HAS_NETWORK,
        st.INITIALIZED,
        st.CONTAINERS_READY,
        st.READY,
        st.DISRUPTION_TARGET,
        st.ALL_CONTAINERS_RESTARTING,
        st.POD_RESIZE_PENDING,
        st.POD_RESIZE_IN_PROGRESS,
    }
)

# The KEP-3085 condition under either of its names.
READY_TO_START_TYPES = (st.POD_READY_TO_START_CONTAINERS, st.POD_HAS_NETWORK)


def merge_status(old: st.PodStatus | None, new: st.PodStatus, *, now: datetime) -> st.PodStatus:
    """Return `new` with transition times settled against `old`.

    Contract:
    - a kubelet-owned condition keeps the old `last_transition_time` when `old` has a condition
      of the same type with the same `status` (and a time); otherwise it gets `now`. Any time
      already on the new condition is ignored, as the kubelet does;
    - a condition nodelet does not own keeps the time it carries; without one it follows the
      kubelet rule above;
    - `start_time` is preserved once set: the old one wins over the new one.
    """
    conditions = tuple(_settle(c, old, now) for c in new.conditions)
    start_time = new.start_time
    if old is not None and old.start_time is not None:
        start_time = old.start_time
    return dataclasses.replace(new, conditions=conditions, start_time=start_time)


def observed(status: st.PodStatus, generation: int, *,
             owned: frozenset[str] = KUBELET_OWNED) -> st.PodStatus:
    """`status` as generated for a pod at `generation` (pod generation tracking, GA in 1.35):
    `observedGeneration` on the status and on each condition of an `owned` type, as the
    kubelet's generateAPIPodStatus sets them; others' conditions keep theirs."""
    conditions = tuple(dataclasses.replace(c, observed_generation=generation)
                       if c.type in owned else c for c in status.conditions)
    return dataclasses.replace(status, conditions=conditions, observed_generation=generation)


def _settle(cond: st.PodCondition, old: st.PodStatus | None, now: datetime) -> st.PodCondition:
    if cond.type not in KUBELET_OWNED and cond.last_transition_time is not None:
        return cond
    previous = old.condition(cond.type) if old is not None else None
    if previous is not None and previous.status == cond.status and previous.last_transition_time:
        return dataclasses.replace(cond, last_transition_time=previous.last_transition_time)
    return dataclasses.replace(cond, last_transition_time=now)


def statuses_equal(a: st.PodStatus, b: st.PodStatus) -> bool:
    """True when `a` and `b` are the same status for the purpose of storing it.

    Conditions are compared by type, status, reason, message and observed generation only, in
    any order (their transition and probe times are derived, not news); every other field must
    be equal exactly.
    """
    if _condition_keys(a) != _condition_keys(b):
        return False
    return dataclasses.replace(a, conditions=()) == dataclasses.replace(b, conditions=())


def _condition_keys(status: st.PodStatus) -> dict[str, tuple[str, str, str, int]]:
    return {c.type: (c.status, c.reason, c.message, c.observed_generation)
            for c in status.conditions}


def transitions_equal(a: st.PodStatus | None, b: st.PodStatus | None) -> bool:
    """True when `a` and `b` carry the same condition statuses, transition times, start time,
    phase, reason, message and pod IPs.

    This is what the checkpoint stores; the status manager writes it only when this changes.
    """
    if a is None or b is None:
        return a is b
    return (a.start_time, a.phase, a.reason, a.message, a.pod_ips) == (
        b.start_time, b.phase, b.reason, b.message, b.pod_ips
    ) and _transition_keys(a) == _transition_keys(b)


def _transition_keys(status: st.PodStatus) -> dict[str, tuple[str, datetime | None]]:
    return {c.type: (c.status, c.last_transition_time) for c in status.conditions}


def ready_to_start_since(status: st.PodStatus) -> datetime | None:
    """When PodReadyToStartContainers (or PodHasNetwork) last turned True; None if not True."""
    for type_ in READY_TO_START_TYPES:
        cond = status.condition(type_)
        if cond is not None and cond.status == "True":
            return cond.last_transition_time
    return None


def ready_since(status: st.PodStatus) -> datetime | None:
    """When Ready last turned True; None if the pod is not Ready."""
    cond = status.condition(st.READY)
    if cond is not None and cond.status == "True":
        return cond.last_transition_time
    return None
