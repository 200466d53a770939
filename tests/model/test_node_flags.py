"""--node-labels, --register-with-taints and status.images of the Node (pure)."""

from __future__ import annotations

import pytest

from nodelet.model.core import nodeflags, nodes
from nodelet.model.core import runtime as rt


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("", ()),
        ("role=edge", (("role", "edge"),)),
        (" a=1 , example.com/b= ", (("a", "1"), ("example.com/b", ""))),
        ("node.kubernetes.io/instance-type=m1,kubelet.kubernetes.io/x=y",
         (("node.kubernetes.io/instance-type", "m1"), ("kubelet.kubernetes.io/x", "y"))),
        ("team.node.kubernetes.io/a=b,topology.kubernetes.io/zone=z1",
         (("team.node.kubernetes.io/a", "b"), ("topology.kubernetes.io/zone", "z1"))),
        ("example.k8s.io.evil.com/a=b", (("example.k8s.io.evil.com/a", "b"),)),
    ],
)
def test_node_labels_accepted(text: str, labels: tuple[tuple[str, str], ...]) -> None:
    assert nodeflags.parse_labels(text) == labels


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("role", "'role' is not KEY=VALUE"),
        ("node-restriction.kubernetes.io/team=a", "node-restriction.kubernetes.io/team"),
        ("node-role.kubernetes.io/worker=", "unknown 'kubernetes.io' or 'k8s.io' labels"),
        ("kubernetes.io/role=x", "kubernetes.io/role"),
        ("example.k8s.io/a=b", "example.k8s.io/a"),
        ("bad key=1", "not a valid qualified name"),
        ("a=-bad-", "not a valid label value"),
    ],
)
def test_node_labels_refused(text: str, message: str) -> None:
    with pytest.raises(nodeflags.NodeFlagError) as caught:
        nodeflags.parse_labels(text)
    assert str(caught.value).startswith("--node-labels: ")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "taints"),
    [
        ("", ()),
        ("dedicated=edge:NoSchedule", (("dedicated", "edge", "NoSchedule"),)),
        ("a:NoExecute,example.com/b=1:PreferNoSchedule",
         (("a", "", "NoExecute"), ("example.com/b", "1", "PreferNoSchedule"))),
    ],
)
def test_taints_accepted(text: str, taints: tuple[nodeflags.Taint, ...]) -> None:
    assert nodeflags.parse_taints(text) == taints


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=b", "'a=b' is not KEY[=VALUE]:EFFECT"),
        (":NoSchedule", "is not KEY[=VALUE]:EFFECT"),
        ("a=b:Never", "effect 'Never': must be one of NoSchedule, PreferNoSchedule, NoExecute"),
        ("a b=c:NoSchedule", "not a valid qualified name"),
    ],
)
def test_taints_refused(text: str, message: str) -> None:
    with pytest.raises(nodeflags.NodeFlagError) as caught:
        nodeflags.parse_taints(text)
    assert message in str(caught.value)


MACHINE = nodes.MachineFacts(cpus=2, memory_bytes=2**30, architecture="arm64")


def test_node_object_has_the_well_known_labels_extra_labels_and_taints() -> None:
    spec = nodes.NodeSpec(name="n1", host_ip="192.0.2.1", machine=MACHINE,
                          labels={"role": "edge"},
                          taints=(("dedicated", "edge", "NoSchedule"), ("a", "", "NoExecute")))
    node = nodes.node_object(spec)
    assert node["metadata"]["labels"] == {
        "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "arm64", "role": "edge"}
    assert node["spec"]["taints"] == [
        {"key": "dedicated", "value": "edge", "effect": "NoSchedule"},
        {"key": "a", "effect": "NoExecute"}]


def image(id_: str, size: int, tags: tuple[str, ...] = (), digests: tuple[str, ...] = ()
          ) -> rt.ImageInfo:
    return rt.ImageInfo(id=id_, repo_tags=tags, repo_digests=digests, size=size)


def test_images_largest_first_digests_then_tags_five_names_at_most() -> None:
    many = tuple(f"r/x:{n}" for n in range(6))
    images = [image("sha256:a", 10, ("r/a:1",), ("r/a@sha256:1",)),
              image("sha256:b", 30, many),
              image("sha256:c", 10, ("r/c:1",)),
              image("sha256:d", 20)]
    assert nodes.node_images(images) == [
        {"names": list(many[:5]), "sizeBytes": 30},
        {"names": [], "sizeBytes": 20},
        {"names": ["r/c:1"], "sizeBytes": 10},  # equal sizes: higher ID first
        {"names": ["r/a@sha256:1", "r/a:1"], "sizeBytes": 10},
    ]


@pytest.mark.parametrize(("limit", "count"), [(50, 50), (2, 2), (0, 0), (-1, 60)])
def test_images_are_capped(limit: int, count: int) -> None:
    images = [image(f"sha256:{n}", n) for n in range(60)]
    listed = nodes.node_images(images, max_images=limit)
    assert len(listed) == count
    assert [i["sizeBytes"] for i in listed] == sorted((i["sizeBytes"] for i in listed),
                                                      reverse=True)

