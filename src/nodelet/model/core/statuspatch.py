"""The pod status PATCH: what nodelet sends to turn the API's copy of a pod status into its own.

Pure functions over v1 PodStatus objects (plain dicts, as `status.to_api` makes and the API
returns); the status sync (`services.status.statussync`) only sends what `status_patch` returns.

Rules, as the kubelet's status manager follows them (`pkg/kubelet/status/status_manager.go`):
- **only what changed**: a strategic merge patch of the fields that differ, None when none does;
- **others' conditions are kept**: only the conditions nodelet owns are written (merged by
  `type`), and DisruptionTarget when nodelet evicted the pod (it shares that type with
  others, so it never removes it); readiness gates and anything else are never in a patch. An owned
  condition nodelet no longer reports (feature gate switched off) is removed with a
  `$patch: delete` entry. A condition whose `status` equals the API's keeps the API's
  `lastTransitionTime` (PodScheduled keeps the scheduler's time);
- **a terminal phase is final**: a pod the API has as Succeeded/Failed is never moved back;
- **and it comes last**: a pod is reported Succeeded/Failed only once none of its containers
  runs (until then the API's phase, reason and message are kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodelet.model.core import apijson, conditions
from nodelet.model.core import status as st

# Conditions nodelet generates and may also remove; PodScheduled is written by the scheduler
# too, so nodelet sets it (as the kubelet does) but never deletes it.
OWNED_CONDITIONS = conditions.WRITTEN_TYPES
REMOVABLE_CONDITIONS = OWNED_CONDITIONS - {st.POD_SCHEDULED}
# Written when nodelet's status has them (the kubelet's PodConditionSharedByKubelet), never
# removed.
SHARED_CONDITIONS = frozenset({st.DISRUPTION_TARGET})
TERMINAL_PHASES = ("Succeeded", "Failed")
# Status fields nodelet owns outright (conditions are merged per type instead).
_OWNED_FIELDS = ("phase", "message", "reason", "hostIP", "podIP", "startTime",
                 "initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses",
                 "qosClass", "observedGeneration", "allocatedResources", "resources")
# What a pod not yet reported terminal keeps of the API's status, and where its containers are.
_PHASE_FIELDS = ("phase", "reason", "message")
_CONTAINER_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
# Lists the API merges by `ip`: sent whole, with `$patch: replace`, when they differ.
_IP_LISTS = ("hostIPs", "podIPs")
# What makes two versions of one condition differ (heartbeat-like fields do not).
_CONDITION_FIELDS = ("status", "reason", "message", "lastTransitionTime", "observedGeneration")


def status_patch(api: Mapping[str, Any], desired: Mapping[str, Any]) -> apijson.Obj | None:
    """The strategic merge patch that turns API status `api` into `desired` for the fields
    nodelet owns; None when nothing differs or when `api` has a terminal phase that `desired`
    would leave (the kubelet refuses that transition)."""
    if api.get("phase") in TERMINAL_PHASES and desired.get("phase") not in TERMINAL_PHASES:
        return None
    desired = _terminal_once_stopped(api, desired)
    patch: apijson.Obj = {}
    for key in _OWNED_FIELDS:
        if api.get(key) != desired.get(key) and not (key not in desired and not api.get(key)):
            patch[key] = desired.get(key)  # None removes it
    if api.get("qosClass"):
        # Immutable once set (kube-apiserver answers 422 to a change): the kubelet's GetPodQOS
        # reads the stored class, which counts pod-level resources that nodelet refuses.
        patch.pop("qosClass", None)
    if "observedGeneration" in patch and \
            (patch["observedGeneration"] or 0) < (api.get("observedGeneration") or 0):
        # Never lowered (the kubelet's status manager keeps the higher one).
        del patch["observedGeneration"]
    for key in _IP_LISTS:
        if (api.get(key) or []) != (desired.get(key) or []):
            patch[key] = [{"$patch": "replace"}, *(desired.get(key) or [])]
    changed = _conditions_patch(api.get("conditions") or [], desired.get("conditions") or [])
    if changed:
        patch["conditions"] = changed
    return patch or None


def _terminal_once_stopped(api: Mapping[str, Any], desired: Mapping[str, Any]
                           ) -> Mapping[str, Any]:
    """`desired`, but with the API's phase, reason and message while it would turn the pod
    Succeeded or Failed with a container still running (a sidecar being stopped after an init
    container failed, a container being killed at activeDeadlineSeconds): the kubelet's
    mergePodStatus never reports a terminal phase while the pod could have running
    containers, since what they hold is released only when they stop."""
    if desired.get("phase") not in TERMINAL_PHASES or api.get("phase") in TERMINAL_PHASES:
        return desired
    if not any("running" in (s.get("state") or {}) for key in _CONTAINER_LISTS
               for s in desired.get(key) or [] if isinstance(s, dict)):
        return desired
    kept = {k: v for k, v in desired.items() if k not in _PHASE_FIELDS}
    return kept | {k: api[k] for k in _PHASE_FIELDS if k in api}


def _conditions_patch(api: list[Any], desired: list[Any]) -> list[apijson.Obj]:
    """The `conditions` entries of the patch: owned conditions that differ from the API's,
    then `$patch: delete` entries for removable ones no longer in `desired`."""
    current = {c.get("type"): c for c in api if isinstance(c, dict)}
    out = [_condition_entry(current.get(c["type"]), c) for c in desired
           if c["type"] in OWNED_CONDITIONS | SHARED_CONDITIONS]
    wanted = {c["type"] for c in desired}
    out.extend({"type": type_, "$patch": "delete"} for type_ in current
               if type_ in REMOVABLE_CONDITIONS and type_ not in wanted)
    return [entry for entry in out if entry is not None]


def _condition_entry(old: Mapping[str, Any] | None, cond: apijson.Obj) -> apijson.Obj | None:
    """The patch entry turning the API's condition `old` into `cond`; None when equal."""
    if old is not None and old.get("status") == cond["status"]:
        # Same status: the API's transition time stands (the kubelet seeds its cache from
        # the API status, so it keeps it too).
        cond = {**cond, "lastTransitionTime": old.get("lastTransitionTime")}
    if old is not None and not _differs(old, cond):
        return None
    # A merged list item keeps the fields a patch leaves out: a reason or message that went
    # away must be sent as null, or the API keeps the stale one.
    cleared = {k: None for k in ("reason", "message") if old and old.get(k) and not cond.get(k)}
    return {**cond, **cleared}


def _differs(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return any((old.get(k) or None) != (new.get(k) or None) for k in _CONDITION_FIELDS)
