"""The CSI rules (model/core/csi.py): the kubelet's paths and names, access modes, the volume
context with pod info, who applies the fsGroup, and the node annotation."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import PurePosixPath

import pytest

from nodelet.model.core import csi, pods

SOURCE = csi.CsiSource(driver="csi-mock", volume_handle="vol-1", fs_type="ext4",
                       volume_attributes={"tier": "fast"})
POD = pods.Pod(uid=pods.PodUID("u-1"), name="db", namespace="team",
               spec=pods.PodSpec(containers=()), raw={"spec": {"serviceAccountName": "app"}})


def test_the_kubelets_names_and_paths() -> None:
    digest = hashlib.sha256(b"vol-1csi-mocknode-a").hexdigest()
    assert csi.attachment_name("vol-1", "csi-mock", "node-a") == f"csi-{digest}"
    staged = csi.staging_path(PurePosixPath("/data/plugins"), SOURCE)
    assert staged == PurePosixPath("/data/plugins/kubernetes.io/csi/csi-mock") / \
        hashlib.sha256(b"vol-1").hexdigest() / "globalmount"
    data = json.loads(csi.pod_data("pv-1", SOURCE, "node-a"))
    assert data == {"specVolID": "pv-1", "volumeHandle": "vol-1", "driverName": "csi-mock",
                    "nodeName": "node-a", "volumeLifecycleMode": "Persistent",
                    "attachmentID": f"csi-{digest}"}
    assert csi.read_data(json.dumps(data)) == ("csi-mock", "vol-1")
    assert csi.read_data("not json") == ("", "")


@pytest.mark.parametrize(("mode", "multi", "expected"), [
    ("ReadWriteOnce", False, "SINGLE_NODE_WRITER"),
    ("ReadWriteOnce", True, "SINGLE_NODE_MULTI_WRITER"),
    ("ReadWriteOncePod", True, "SINGLE_NODE_SINGLE_WRITER"),
    ("ReadOnlyMany", False, "MULTI_NODE_READER_ONLY"),
    ("ReadWriteMany", False, "MULTI_NODE_MULTI_WRITER"),
])
def test_access_modes(mode: str, multi: bool, expected: str) -> None:
    assert csi.access_mode(mode, single_node_multi_writer=multi) == expected


def test_the_csidriver_and_what_it_changes() -> None:
    assert csi.driver_policy(None) == csi.DriverPolicy()  # attach required, no pod info
    policy = csi.driver_policy({"spec": {"attachRequired": False, "podInfoOnMount": True,
                                         "fsGroupPolicy": "File"}})
    assert (policy.attach_required, policy.pod_info_on_mount) == (False, True)
    assert csi.volume_context(SOURCE, POD, csi.DriverPolicy()) == {"tier": "fast"}
    assert csi.volume_context(SOURCE, POD, policy) == {
        "tier": "fast", "csi.storage.k8s.io/pod.name": "db",
        "csi.storage.k8s.io/pod.namespace": "team", "csi.storage.k8s.io/pod.uid": "u-1",
        "csi.storage.k8s.io/serviceAccount.name": "app", "csi.storage.k8s.io/ephemeral": "false"}
    # fsGroupPolicy: File always, None never, the default only with an fsType and RWO.
    assert csi.applies_fs_group(policy, SOURCE, read_only=False)
    assert not csi.applies_fs_group(policy, SOURCE, read_only=True)
    assert csi.applies_fs_group(csi.DriverPolicy(), SOURCE, read_only=False)
    no_fs = csi.CsiSource(driver="d", volume_handle="h")
    assert not csi.applies_fs_group(csi.DriverPolicy(), no_fs, read_only=False)
    assert not csi.applies_fs_group(csi.DriverPolicy(fs_group_policy="None"), SOURCE,
                                    read_only=False)


def test_a_pvs_csi_source_and_the_node_annotation() -> None:
    source = csi.csi_source({"accessModes": ["ReadWriteMany"], "mountOptions": ["noatime"],
                             "csi": {"driver": "d", "volumeHandle": "h", "readOnly": True,
                                     "fsType": "xfs", "volumeAttributes": {"a": "1"}}})
    assert source == csi.CsiSource(driver="d", volume_handle="h", read_only=True,
                                   fs_type="xfs", volume_attributes={"a": "1"},
                                   access_mode="ReadWriteMany", mount_options=("noatime",),
                                   access_modes=("ReadWriteMany",))
    secret = csi.csi_source({"csi": {"driver": "d", "volumeHandle": "h", "nodeStageSecretRef":
                                     {"name": "s", "namespace": "ns"}},
                             "accessModes": ["ReadOnlyMany", "ReadWriteOncePod"]})
    assert (secret.stage_secret, secret.publish_secret) == (("ns", "s"), None)
    # The node applies the fsGroup for any RWO or RWOP mode of the PV (hasReadWriteOnce).
    assert csi.applies_fs_group(csi.DriverPolicy(), replace(secret, fs_type="ext4"),
                                read_only=False)
    assert csi.node_ids(drivers={"b": "n2", "a": "n1"}) == '{"a":"n1","b":"n2"}'
    assert csi.node_ids(drivers={}) is None
