"""The v1 Pod and PodList objects that the local API serves (pure, no I/O).

A pod is served as it was given (`Pod.raw`: defaulted metadata and spec) with nodelet's view of
its identity (`metadata.uid`, name, namespace) and its current status. Without a status yet it is
`Pending` with no conditions, as a freshly admitted pod is.

Times follow Kubernetes (RFC 3339, whole seconds). With `precise=True` the condition transition
times and `startTime` carry microseconds instead: still valid RFC 3339 (Kubernetes clients parse
fractional seconds), so nodelet's own tools can show precise timelines without annotations.
This module raises no exceptions of its own.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from nodelet.model.core import pods
from nodelet.model.core import status as st


def pod_to_api(
    pod: pods.Pod, status: st.PodStatus | None, *, precise: bool = False
) -> dict[str, Any]:
    """The v1 Pod of `pod` with `status` (None: Pending, no conditions); `pod.raw` is untouched."""
    out: dict[str, Any] = copy.deepcopy(dict(pod.raw))
    out["apiVersion"] = "v1"
    out["kind"] = "Pod"
    out["metadata"] = _metadata(pod, out.get("metadata"), precise=precise)
    out.setdefault("spec", {})
    out["status"] = _status(status or st.PodStatus(), precise=precise)
    return out


def _metadata(pod: pods.Pod, raw: Any, *, precise: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    meta["name"] = pod.name
    meta["namespace"] = pod.namespace
    meta["uid"] = str(pod.uid)
    if pod.annotations:
        meta["annotations"] = {**meta.get("annotations", {}), **pod.annotations}
    # A static pod has none, as in the kubelet's /pods (only the API server sets one); when
    # nodelet first saw it is its `kubernetes.io/config.seen` annotation.
    if pod.creation_timestamp is not None and not pod.is_static:
        meta.setdefault("creationTimestamp", st.format_time(pod.creation_timestamp))
    if pod.deletion_timestamp is not None:
        # Precise: a static pod marked deleted by nodelet (the termination SLI) knows better.
        meta["deletionTimestamp"] = (st.format_precise if precise else st.format_time)(
            pod.deletion_timestamp)
    if pod.deletion_grace_period_seconds is not None:
        meta["deletionGracePeriodSeconds"] = pod.deletion_grace_period_seconds
    return meta


def _status(status: st.PodStatus, *, precise: bool) -> dict[str, Any]:
    out = st.to_api(status)
    if not precise:
        return out
    for cond_json, cond in zip(out.get("conditions", ()), status.conditions, strict=True):
        cond_json["lastTransitionTime"] = st.format_precise(cond.last_transition_time)
    if status.start_time is not None:
        out["startTime"] = st.format_precise(status.start_time)
    return out


def pod_list_to_api(
    items: Iterable[tuple[pods.Pod, st.PodStatus | None]], *, precise: bool = False
) -> dict[str, Any]:
    """A v1 PodList (kubelet `/pods` shape) of the given pods, in the given order."""
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": [pod_to_api(pod, status, precise=precise) for pod, status in items],
    }


class PodListEncoder:
    """The PodList of `pod_list_to_api` as JSON bytes, byte for byte `json.dumps` of it, with
    each pod's part kept and encoded again only when its `Pod` or its status changed. Both are
    immutable (a change is a new object), so "changed" is "not the same object": a client that
    polls `/pods` costs a join, not a deep copy and an encoding of every pod (with 110 pods
    polled 20 times a second, that was most of the agent's CPU; docs/benchmarks.md)."""

    def __init__(self) -> None:
        # (uid, precise) -> the objects encoded and their JSON
        self._parts: dict[tuple[str, bool], tuple[pods.Pod, st.PodStatus | None, str]] = {}

    def encode(self, items: Iterable[tuple[pods.Pod, st.PodStatus | None]], *,
               precise: bool = False) -> bytes:
        parts, listed = [], set()
        for pod, status in items:
            key = (str(pod.uid), precise)
            listed.add(key)
            kept = self._parts.get(key)
            if kept is None or kept[0] is not pod or kept[1] is not status:
                kept = (pod, status, json.dumps(pod_to_api(pod, status, precise=precise)))
                self._parts[key] = kept
            parts.append(kept[2])
        for key in [k for k in self._parts if k[1] == precise and k not in listed]:
            del self._parts[key]
        return (_LIST_HEAD + ", ".join(parts) + "]}").encode()


# `pod_list_to_api`'s PodList without items, encoded up to the items' opening bracket: its
# "items" comes last, so the encoded list is this, the items joined by ", ", and "]}".
_LIST_HEAD = json.dumps(pod_list_to_api(()))[:-len("]}")]
