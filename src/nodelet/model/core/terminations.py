"""The termination SLI of KEP-3085 (pure): from the deletion request to the sandbox condition
(PodReadyToStartContainers, or PodHasNetwork) turning False.

The KEP measures it from `deletionTimestamp`; the API server sets that field to the time of the
request plus the grace period (the time by which the pod is to be gone), so the request itself
is `deletionTimestamp - deletionGracePeriodSeconds`. A static pod has no API deletion: with the
`PodTerminationSLI` gate its pod gets the same two fields when its manifest goes away
(`mark_deleted`), so every pod is measured the same way. No exceptions of its own.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta

from nodelet.model.core import pods, status

# The kubelet's minimumGracePeriodInSeconds for stopping a container.
MIN_GRACE_SECONDS = 2
SANDBOX_TYPES = (status.POD_READY_TO_START_CONTAINERS, status.POD_HAS_NETWORK)


def requested_at(deletion_timestamp: datetime | None, grace_seconds: int | None) -> datetime | None:
    """When the deletion was asked for (None: the pod is not being deleted)."""
    if deletion_timestamp is None:
        return None
    return deletion_timestamp - timedelta(seconds=grace_seconds or 0)


def mark_deleted(pod: pods.Pod, now: datetime, grace_seconds: float) -> pods.Pod:
    """`pod` as the API server marks a graceful deletion asked for at `now` (a pod already
    marked is returned unchanged)."""
    if pod.deletion_timestamp is not None:
        return pod
    grace = math.ceil(grace_seconds)
    return replace(pod, deletion_timestamp=now + timedelta(seconds=grace),
                   deletion_grace_period_seconds=grace)


def sandbox_condition(pod_status: status.PodStatus) -> status.PodCondition | None:
    """The KEP-3085 condition under either of its names."""
    return next((c for c in map(pod_status.condition, SANDBOX_TYPES) if c is not None), None)


def stopped_after(requested: datetime | None,
                  condition: status.PodCondition | None) -> datetime | None:
    """When the sandbox condition turned False for the deletion: its lastTransitionTime when it
    is False and changed no earlier than the request (whole-second API times compared at
    their second)."""
    if requested is None or condition is None or condition.status != "False":
        return None
    changed = condition.last_transition_time
    if changed is None or changed < requested.replace(microsecond=0):
        return None
    return changed


def latency(pod: pods.Pod, pod_status: status.PodStatus) -> timedelta | None:
    """The termination SLI of `pod` (None while it is not measured: not deleted, or the
    condition has not turned False since)."""
    requested = requested_at(pod.deletion_timestamp, pod.deletion_grace_period_seconds)
    stopped = stopped_after(requested, sandbox_condition(pod_status))
    if requested is None or stopped is None:
        return None
    return max(stopped - requested, timedelta(0))
