"""A pod from the API server that nodelet cannot read into a `Pod` (a volume type it does
not run, a value its parser refuses): kept as a Pod that admission refuses, so the user reads
why in the API — phase `Failed`, reason `UnsupportedPodSpec`, the message, a Warning event —
through the one path every refusal takes (`core.admission`), rather than finding the pod
`Pending` for ever with the reason only in the node's log.

The API server validated the object, so its metadata is readable even where its spec is not,
and the metadata is all that the refusal needs: the name, namespace and UID for the status
PATCH and the Event's involvedObject, the deletion fields so that deleting the pod still ends
it. Its spec is left empty: nothing of it is ever run.

An update that cannot be read of a pod read before (admitted, maybe running) is not run
either: replacing the pod by an empty stand-in would stop its containers, and admission does
not judge a running pod again. The version read before is kept — with the update's deletion,
so that deleting the pod still ends it — and the caller tells the user why (`instead`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodelet.model.core import fields, pods, status


@dataclass(frozen=True)
class Instead:
    """What is run instead of a pod version that cannot be read: `pod`, which is either a
    stand-in that admission refuses (`stand_in`) or the version read before, kept; `problem`
    says why the version cannot be read (`path: why`)."""

    pod: pods.Pod
    stand_in: bool
    problem: str


def instead(obj: Mapping[str, Any], *, path: str, why: str, read: pods.Pod | None) -> Instead:
    """What to run instead of `obj`, whose spec cannot be read at `path` for `why`; `read`:
    the pod's version read before (None: none). Raises `fields.ManifestError` when not even
    the metadata of `obj` can be read."""
    stand_in = unreadable(obj, path=path, why=why)
    problem = f"{path}: {why}" if path else why
    if read is None:
        return Instead(stand_in, True, problem)
    kept = dataclasses.replace(
        read, deletion_timestamp=stand_in.deletion_timestamp,
        deletion_grace_period_seconds=stand_in.deletion_grace_period_seconds)
    return Instead(kept, False, problem)


def unreadable(obj: Mapping[str, Any], *, path: str, why: str) -> pods.Pod:
    """`obj` (a v1 Pod from the API server, as given to `manifests.pod_from_object`) as a Pod
    without containers whose `refused` holds (`path`, `why`): admission refuses it. Raises
    `fields.ManifestError` when not even its name, namespace and UID can be read."""
    meta = fields.mapping(obj, "metadata", "")
    uid = fields.string(meta, "uid", "metadata", required=True)
    annotations = {**_strings(meta.get("annotations")),
                   pods.ANNOTATION_CONFIG_SOURCE: "api"}
    raw = {**obj, "metadata": {**meta, "annotations": annotations}}
    return pods.Pod(
        uid=pods.PodUID(uid),
        name=fields.string(meta, "name", "metadata", required=True),
        namespace=fields.string(meta, "namespace", "metadata", required=True),
        spec=pods.PodSpec(containers=(), node_name=_node_name(obj)),
        labels=_strings(meta.get("labels")),
        annotations=annotations,
        creation_timestamp=status.parse_time_lenient(meta.get("creationTimestamp")),
        deletion_timestamp=status.parse_time_lenient(meta.get("deletionTimestamp")),
        deletion_grace_period_seconds=_grace(meta.get("deletionGracePeriodSeconds")),
        raw=raw,
        source="api",
        refused=((path, why),),
    )


def _strings(value: Any) -> dict[str, str]:
    """A map of strings as written (labels, annotations); anything else is left out."""
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _grace(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _node_name(obj: Mapping[str, Any]) -> str:
    spec = obj.get("spec")
    found = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return found if isinstance(found, str) else ""
