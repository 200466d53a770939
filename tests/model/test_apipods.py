"""A pod from the API server that nodelet cannot read is refused through admission, as every
pod nodelet cannot run (`Failed`, `UnsupportedPodSpec`, the message), not dropped; an update
that cannot be read of a pod read before keeps that pod running as it was."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from nodelet import settings
from nodelet.model.core import admission, generation, statuspatch, transitions
from nodelet.model.core import status as st
from nodelet.model.parsing import apipods, manifests

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def api_pod(**spec: Any) -> dict[str, Any]:
    """A pod as the API server serves it to the node (less its status)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "claim", "namespace": "team", "uid": "u-1", "generation": 1,
                     "labels": {"app": "db"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def read(obj: dict[str, Any], previous: Any = None) -> apipods.Instead:
    """What the API pod source runs for `obj`: the parse error of `pod_from_object` in."""
    with pytest.raises(manifests.ManifestError) as info:
        manifests.pod_from_object(obj, node_name="n", source="api", strict=False)
    return apipods.instead(obj, path=info.value.path, why=info.value.message, read=previous)


CLAIM = {"volumes": [{"name": "data", "nfs": {"server": "files", "path": "/data"}}]}


@pytest.mark.parametrize(("spec", "path", "why"), [
    (CLAIM, "spec.volumes[0].nfs", 'unsupported volume type "nfs"'),
    ({"volumes": [{"name": "d", "iscsi": {"targetPortal": "x", "iqn": "y", "lun": 0}}]},
     "spec.volumes[0].iscsi", 'unsupported volume type "iscsi"'),
])
def test_an_unreadable_pod_is_refused_at_admission_with_the_path(
        spec: dict[str, Any], path: str, why: str) -> None:
    found = read(api_pod(**spec))
    assert found.stand_in and found.problem.startswith(f"{path}: {why}")
    rejection = admission.admit(found.pod, admission.Node(labels={}))
    assert rejection is not None
    assert rejection.reason == admission.UNSUPPORTED_REASON == "UnsupportedPodSpec"
    assert rejection.status_message == f"Pod was rejected: {found.problem}"


def test_the_stand_in_has_the_pods_metadata_and_runs_nothing() -> None:
    obj = api_pod(**CLAIM)
    pod = read(obj).pod
    assert (pod.uid, pod.name, pod.namespace, pod.source) == ("u-1", "claim", "team", "api")
    assert pod.labels == {"app": "db"} and pod.generation == 1
    assert pod.creation_timestamp == datetime(2026, 1, 1, tzinfo=UTC)
    assert pod.spec.containers == () and pod.spec.volumes == ()
    assert pod.spec.node_name == "n" and pod.deletion_timestamp is None
    # Served back (/pods) as the API has it, with the source annotation of every API pod.
    assert pod.raw["spec"] == obj["spec"]
    assert pod.annotations == {"kubernetes.io/config.source": "api"}


def test_a_deleted_unreadable_pod_can_still_be_ended() -> None:
    obj = api_pod(**CLAIM)
    obj["metadata"] |= {"deletionTimestamp": "2026-01-01T00:01:00Z",
                        "deletionGracePeriodSeconds": 5}
    pod = read(obj).pod
    assert pod.deletion_timestamp == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert pod.deletion_grace_period_seconds == 5


def test_the_refusal_reads_as_the_kubelets_rejectpod_in_the_api() -> None:
    """Failed with reason and message, no container statuses, none of the kubelet's
    conditions; the qosClass the API server set is left alone (it is immutable)."""
    found = read(api_pod(**CLAIM))
    rejection = admission.admit(found.pod, admission.Node(labels={}))
    assert rejection is not None
    status = generation.generate_status(
        found.pod, sandboxes=(), containers=(), old=None, last_sandbox_error=None, waiting={},
        host_ip="10.0.0.1", now=NOW, gates=settings.FeatureGates(),
        failure=(rejection.reason, rejection.status_message))
    assert (status.phase, status.reason) == ("Failed", "UnsupportedPodSpec")
    assert status.message.startswith(
        "Pod was rejected: spec.volumes[0].nfs: unsupported volume type")
    assert status.container_statuses == () and status.init_container_statuses == ()
    assert not {c.type for c in status.conditions} & transitions.KUBELET_OWNED
    api = {"phase": "Pending", "qosClass": "Burstable",
           "conditions": [{"type": "PodScheduled", "status": "True"}]}
    patch = statuspatch.status_patch(api, st.to_api(status))
    assert patch is not None and "qosClass" not in patch
    assert (patch["phase"], patch["reason"]) == ("Failed", "UnsupportedPodSpec")


def test_an_unreadable_update_keeps_the_pod_read_before() -> None:
    """Replacing a running pod by an empty stand-in would stop its containers (admission does
    not judge it again): it runs on as read, and the problem is said."""
    before = manifests.pod_from_object(api_pod(), node_name="n", source="api", strict=False)
    update = api_pod(**CLAIM)
    found = read(update, before)
    assert not found.stand_in and found.pod == before
    assert found.problem.startswith("spec.volumes[0].nfs: ")
    # ... but its deletion is heard, so that deleting it ends it.
    update["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    deleted = read(update, before).pod
    assert deleted.spec is before.spec
    assert deleted.deletion_timestamp == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def test_a_problem_without_a_path_is_the_message_alone() -> None:
    found = apipods.instead(api_pod(), path="", why="nodelet cannot read this pod", read=None)
    rejection = admission.admit(found.pod, admission.Node(labels={}))
    assert rejection is not None and rejection.message == "nodelet cannot read this pod"


@pytest.mark.parametrize("key", ["name", "namespace", "uid"])
def test_without_a_name_namespace_or_uid_there_is_nothing_to_refuse(key: str) -> None:
    obj = copy.deepcopy(api_pod())
    del obj["metadata"][key]
    with pytest.raises(manifests.ManifestError) as info:
        apipods.instead(obj, path="spec", why="x", read=None)
    assert info.value.path == f"metadata.{key}"
