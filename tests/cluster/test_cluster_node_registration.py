"""What the Node says at registration, on the real kube-apiserver (whose NodeRestriction
limits which labels a node may set on itself): the well-known labels, --node-labels,
--register-with-taints, and status.images from the runtime's image list."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.adapters import host
from nodelet.model.core import nodes
from nodelet.model.core import runtime as rt
from support.controlplane import AdminClient, node_path
from support.polling import eventually


class Images:
    """The runtime's ListImages, changeable by the test."""

    def __init__(self) -> None:
        self.images = [
            rt.ImageInfo(id="sha256:p", repo_tags=("localhost/nodelet/pause:1.0",), size=700),
            rt.ImageInfo(id="sha256:b", repo_tags=("localhost/nodelet/busybox:latest",),
                         repo_digests=("localhost/nodelet/busybox@sha256:beef",), size=2_000),
        ]

    async def __call__(self) -> list[rt.ImageInfo]:
        return list(self.images)


async def test_node_registers_with_labels_taints_and_images(
        make_rig: Any, admin: AdminClient) -> None:
    name = make_rig.node_name
    spec = nodes.NodeSpec(
        name=name, host_ip="192.0.2.10",
        machine=nodes.MachineFacts(cpus=2, memory_bytes=2**30, architecture="amd64"),
        labels={"node.kubernetes.io/pool": "edge", "example.com/rack": "r1"},
        taints=(("dedicated", "edge", "NoSchedule"),))
    images = Images()
    async with make_rig(node_spec=spec, images=images):
        node = await admin.get(node_path(name))
        assert node is not None
        labels = node["metadata"]["labels"]
        for key, value in {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                           "kubernetes.io/hostname": name, "beta.kubernetes.io/os": "linux",
                           "beta.kubernetes.io/arch": "amd64",
                           "node.kubernetes.io/pool": "edge", "example.com/rack": "r1"}.items():
            assert labels.get(key) == value, labels
        # The node-lifecycle controller may still hold its not-ready taint of the new node.
        node = await eventually(lambda: admin.get(node_path(name)), within=10,
                                until=lambda n: n["spec"]["taints"] == [
                                    {"key": "dedicated", "value": "edge",
                                     "effect": "NoSchedule"}],
                                seen=lambda n: repr(n["spec"].get("taints")),
                                what="the registration taint, and only it")
        assert node["status"]["images"] == [
            {"names": ["localhost/nodelet/busybox@sha256:beef",
                       "localhost/nodelet/busybox:latest"], "sizeBytes": 2000},
            {"names": ["localhost/nodelet/pause:1.0"], "sizeBytes": 700}]

        # A new image changes the node status, which is sent again.
        images.images.append(rt.ImageInfo(id="sha256:n", repo_tags=("r/new:1",), size=9_000))

        async def first_image() -> Any:
            return ((await admin.get(node_path(name))) or {})["status"]["images"][0]["names"]

        await eventually(first_image, until=lambda names: names == ["r/new:1"], within=10,
                         what="the new image reported first")

    # A restart adopts the Node: labels are brought up to date, taints are left alone (an
    # administrator may have removed the registration taint), as with the kubelet.
    await admin.patch(node_path(name), {"spec": {"taints": None}})
    async with make_rig(node_spec=spec, images=images):
        node = await admin.get(node_path(name))
        assert node is not None
        assert node["metadata"]["labels"]["node.kubernetes.io/pool"] == "edge"
        assert not node["spec"].get("taints")


@pytest.mark.parametrize(("machine", "arch"), [
    ("x86_64", "amd64"), ("aarch64", "arm64"), ("armv7l", "arm"), ("i686", "386"),
    ("ppc64le", "ppc64le"), ("s390x", "s390x"), ("riscv64", "riscv64"), ("weird", "weird")])
def test_go_architecture_names(machine: str, arch: str) -> None:
    assert host.go_arch(machine) == arch
