"""Mirror pods: the API's copies of this node's static pods, and what to do to keep them, as
the kubelet decides it (`pkg/kubelet/pod/mirror_client.go`, the static-pod part of `syncPod`,
`deleteOrphanedMirrorPods`).

Pure functions over plain values (static pods as `pods.Pod`, mirror pods as the API's dicts);
`services.status.mirrors` carries out what `plan` returns.

A mirror pod is the static pod as written (name `<name>-<node>`, namespace, labels, annotations,
spec) plus the annotation `kubernetes.io/config.mirror` = the static pod's config hash, and the
Node as its controlling owner. `plan` decides, like the kubelet:
- a static pod without a mirror pod gets one (Create);
- a mirror pod whose hash is not its static pod's (the manifest changed), or that someone deleted
  (it has a `deletionTimestamp`: a static pod cannot be deleted through the API), is deleted and
  created again;
- a mirror pod whose static pod left the manifests is deleted once that pod finished terminating.
The first two only for a static pod its pod worker has started: the kubelet reconciles a mirror
pod in the static pod's own sync (`tryReconcileMirrorPods` in `SyncPod`), and the new version
of an edited manifest is not synced until the old one has terminated (`allowStaticPodStart`),
so the old mirror pod, with the old pod's status, stays through the old pod's grace period.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from nodelet.model.core import apijson, pods

# Metadata the API server assigns: never sent on create.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "managedFields", "generation", "ownerReferences")


@dataclass(frozen=True)
class Create:
    """Create the mirror pod of static pod `pod`."""

    pod: pods.Pod

    @property
    def full_name(self) -> str:
        return self.pod.full_name


@dataclass(frozen=True)
class Delete:
    """Delete mirror pod `namespace/name` (with a precondition on `uid`); `why` is for logs."""

    namespace: str
    name: str
    uid: str
    why: str

    @property
    def full_name(self) -> str:
        return f"{self.namespace}/{self.name}"


Action = Create | Delete


def pod_hash(pod: pods.Pod) -> str:
    """The static pod's config hash (its UID, as the kubelet's)."""
    return pod.annotations.get(pods.ANNOTATION_CONFIG_HASH) or str(pod.uid)


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`obj`'s metadata; empty when there is none (or no object)."""
    meta = obj.get("metadata") if obj is not None else None
    return meta if isinstance(meta, Mapping) else {}


def uid_of(obj: Mapping[str, Any] | None) -> str:
    """The API UID of `obj`; "" when it has none (or there is no object)."""
    return str(_meta(obj).get("uid") or "")


def is_mirror_of(mirror: Mapping[str, Any], pod: pods.Pod) -> bool:
    """True when `mirror` is the current, live mirror pod of static pod `pod`."""
    meta = _meta(mirror)
    annotations = meta.get("annotations") or {}
    return (annotations.get(pods.ANNOTATION_CONFIG_MIRROR) == pod_hash(pod)
            and not meta.get("deletionTimestamp"))


def is_mirror(obj: Mapping[str, Any]) -> bool:
    """True when `obj` is a mirror pod (of any static pod, live or not)."""
    return pods.ANNOTATION_CONFIG_MIRROR in (_meta(obj).get("annotations") or {})


def mirror_object(pod: pods.Pod, *, node_name: str, node_uid: str | None) -> apijson.Obj:
    """The mirror pod to create for static pod `pod`, owned by the Node when `node_uid` is
    known."""
    raw = copy.deepcopy(dict(pod.raw))
    meta = {k: v for k, v in dict(raw.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
    meta.update(name=pod.name, namespace=pod.namespace, labels=dict(pod.labels),
                annotations={**pod.annotations, pods.ANNOTATION_CONFIG_MIRROR: pod_hash(pod)})
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                    "uid": node_uid, "controller": True}]
    spec = dict(raw.get("spec") or {})
    spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def plan(static: Mapping[str, pods.Pod], mirrors: Mapping[str, Mapping[str, Any]],
         terminating: AbstractSet[str], started: AbstractSet[pods.PodUID]) -> list[Action]:
    """What to do, by full name (`namespace/name`): `static` are the static pods to run,
    `mirrors` the mirror pods in the API, `terminating` static pods still being terminated
    (their mirror pods stay, so their last status reaches them), `started` the UIDs of the
    static pods their pod workers have started (only those get or replace a mirror pod).
    Deletes of a replaced mirror pod come right before its Create."""
    actions: list[Action] = []
    for full_name, pod in static.items():
        if pod.uid not in started:
            continue  # waits for the pod of its name before it: the mirror pod stays as is
        mirror = mirrors.get(full_name)
        if mirror is not None and not is_mirror_of(mirror, pod):
            why = "being deleted" if _meta(mirror).get("deletionTimestamp") else "outdated"
            actions.append(_delete(mirror, why))
            mirror = None
        if mirror is None:
            actions.append(Create(pod))
    for full_name, mirror in mirrors.items():
        if full_name not in static and full_name not in terminating:
            actions.append(_delete(mirror, "its static pod is gone"))
    return actions


def _delete(mirror: Mapping[str, Any], why: str) -> Delete:
    meta = _meta(mirror)
    return Delete(str(meta.get("namespace", "")), str(meta.get("name", "")),
                  str(meta.get("uid", "")), why)
