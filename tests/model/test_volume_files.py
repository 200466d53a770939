"""Volume contents as values: file sets, modes, paths, projections, downward API values."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from nodelet.model.core import pods, runtime
from nodelet.model.core import volumes as vol
from nodelet.model.core.volumes import FileSpec
from nodelet.model.parsing import manifests

CM = manifests.ConfigMap(
    "cfg", "default", data={"a": "alpha", "b.conf": "x=1"}, binary_data={"bin": b"\x00\x01"}
)
SECRET = manifests.Secret("creds", "default", data={"user": b"admin", "pass": b"s3cr\xc3\xa9t"})
OBJECTS: Mapping[tuple[str, str, str], vol.ConfigObject] = {
    ("ConfigMap", "default", "cfg"): CM,
    ("Secret", "default", "creds"): SECRET,
}


def lookup(kind: str, namespace: str, name: str) -> vol.ConfigObject | None:
    return OBJECTS.get((kind, namespace, name))


def make_pod(
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    volumes: tuple[pods.Volume, ...] = (),
) -> pods.Pod:
    app = pods.Container(
        name="app", image="busybox",
        resources=pods.Resources(cpu_request_milli=250, cpu_limit_milli=500,
                                 memory_request=32 * 2**20, memory_limit=64 * 2**20),
    )
    bare = pods.Container(name="bare", image="busybox")
    spec = pods.PodSpec(containers=(app, bare), volumes=volumes, node_name="node-1")
    return pods.Pod(
        uid=pods.PodUID("uid-1"), name="web", namespace="default", spec=spec,
        labels=labels or {}, annotations=annotations or {},
        raw={"spec": {"serviceAccountName": "robot"}},
    )


FACTS = vol.PodFacts(
    pod=make_pod(labels={"app": "web", "tier": "front"}, annotations={"note": 'say "hi"'}),
    node_name="node-x", pod_ip="10.0.0.7", host_ip="192.168.1.2",
    node_cpu_milli=2000, node_memory=8 * 2**30,
)

# -- configMap and secret ------------------------------------------------------------------

CONFIG_MAP_CASES: list[tuple[str, dict[str, Any], vol.ConfigObject | None, vol.Payload]] = [
    ("all keys, default mode", {"name": "cfg"}, CM, {
        "a": FileSpec(b"alpha", 0o644), "b.conf": FileSpec(b"x=1", 0o644),
        "bin": FileSpec(b"\x00\x01", 0o644),
    }),
    ("defaultMode", {"name": "cfg", "defaultMode": 0o400}, CM, {
        "a": FileSpec(b"alpha", 0o400), "b.conf": FileSpec(b"x=1", 0o400),
        "bin": FileSpec(b"\x00\x01", 0o400),
    }),
    ("items with path and mode", {"name": "cfg", "defaultMode": 0o440, "items": [
        {"key": "a", "path": "dir/first"}, {"key": "bin", "path": "b", "mode": 0o600},
    ]}, CM, {"dir/first": FileSpec(b"alpha", 0o440), "b": FileSpec(b"\x00\x01", 0o600)}),
    ("item paths are cleaned", {"name": "cfg", "items": [{"key": "a", "path": "./x//y"}]}, CM,
     {"x/y": FileSpec(b"alpha")}),
    ("optional and missing: empty", {"name": "gone", "optional": True}, None, {}),
    ("optional, missing key skipped", {"name": "cfg", "optional": True, "items": [
        {"key": "nope", "path": "n"}, {"key": "a", "path": "a"},
    ]}, CM, {"a": FileSpec(b"alpha", 0o644)}),
    ("a Secret under the name is not a ConfigMap", {"name": "x", "optional": True}, SECRET, {}),
]


@pytest.mark.parametrize(("source", "obj", "expected"),
                         [c[1:] for c in CONFIG_MAP_CASES], ids=[c[0] for c in CONFIG_MAP_CASES])
def test_config_map_payload(
    source: dict[str, Any], obj: vol.ConfigObject | None, expected: vol.Payload
) -> None:
    assert vol.config_map_payload(source, obj) == expected


SECRET_CASES: list[tuple[str, dict[str, Any], vol.Payload]] = [
    ("all keys", {"secretName": "creds"}, {
        "user": FileSpec(b"admin"), "pass": FileSpec(b"s3cr\xc3\xa9t"),
    }),
    ("items", {"secretName": "creds", "items": [{"key": "user", "path": "u", "mode": 0o400}]},
     {"u": FileSpec(b"admin", 0o400)}),
    ("defaultMode", {"secretName": "creds", "defaultMode": 0o600,
                     "items": [{"key": "pass", "path": "p"}]},
     {"p": FileSpec(b"s3cr\xc3\xa9t", 0o600)}),
]


@pytest.mark.parametrize(("source", "expected"), [c[1:] for c in SECRET_CASES],
                         ids=[c[0] for c in SECRET_CASES])
def test_secret_payload(source: dict[str, Any], expected: vol.Payload) -> None:
    assert vol.secret_payload(source, SECRET) == expected


ERROR_CASES: list[tuple[str, Any, str]] = [
    ("missing configmap", lambda: vol.config_map_payload({"name": "gone"}, None),
     'configmap "gone" not found'),
    ("missing secret", lambda: vol.secret_payload({"secretName": "gone"}, None),
     'secret "gone" not found'),
    ("missing configmap key",
     lambda: vol.config_map_payload({"name": "cfg", "items": [{"key": "k", "path": "k"}]}, CM),
     "configmap references non-existent config key: k"),
    ("missing secret key",
     lambda: vol.secret_payload({"secretName": "creds", "items": [{"key": "k", "path": "k"}]},
                                SECRET),
     "secret references non-existent secret key: k"),
    ("absolute item path",
     lambda: vol.config_map_payload({"name": "cfg", "items": [{"key": "a", "path": "/etc/a"}]},
                                    CM),
     "invalid path: must not be absolute path: /etc/a"),
    ("item path with ..",
     lambda: vol.config_map_payload({"name": "cfg", "items": [{"key": "a", "path": "x/../../a"}]},
                                    CM),
     "invalid path: must not contain '..': x/../../a"),
    ("item path like the writer's",
     lambda: vol.config_map_payload({"name": "cfg", "items": [{"key": "a", "path": "..data"}]},
                                    CM),
     "invalid path: must not start with '..': ..data"),
    ("file and directory",
     lambda: vol.config_map_payload({"name": "cfg", "items": [
         {"key": "a", "path": "x"}, {"key": "b.conf", "path": "x/y"}]}, CM),
     "conflicting paths: x is both a file and a directory"),
    ("path naming the volume itself",
     lambda: vol.config_map_payload({"name": "cfg", "items": [{"key": "a", "path": "./"}]}, CM),
     "invalid path: must name a file: ./"),
    ("bad mode", lambda: vol.config_map_payload({"name": "cfg", "defaultMode": 0o1777}, CM),
     "defaultMode 1023 is not valid: a file mode between 0 and 0777"),
]


@pytest.mark.parametrize(("call", "message"), [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
def test_payload_errors(call: Any, message: str) -> None:
    with pytest.raises(vol.SourceError) as caught:
        call()
    assert caught.value.message == message


# -- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("sub_path", "message"), [
    ("data", None),
    ("a/b/c.txt", None),
    ("./a", None),
    ("/etc", 'subPath "/etc" must not be an absolute path'),
    ("..", "subPath \"..\" must not contain '..'"),
    ("a/../../b", "subPath \"a/../../b\" must not contain '..'"),
    ("a..b", None),
])
def test_check_sub_path(sub_path: str, message: str | None) -> None:
    if message is None:
        vol.check_sub_path(sub_path)
        return
    with pytest.raises(vol.SourceError) as caught:
        vol.check_sub_path(sub_path)
    assert caught.value.message == message


# -- downward API --------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "quoted"), [
    ("plain", '"plain"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("line\nbreak\ttab", '"line\\nbreak\\ttab"'),
    ("\x01", '"\\x01"'),
    ("héllo ✓", '"héllo ✓"'),
    ("\u200b", '"\\u200b"'),
])
def test_go_quote(value: str, quoted: str) -> None:
    assert vol.go_quote(value) == quoted


@pytest.mark.parametrize(("field_path", "value"), [
    ("metadata.name", "web"),
    ("metadata.namespace", "default"),
    ("metadata.uid", "uid-1"),
    ("metadata.labels", 'app="web"\ntier="front"'),
    ("metadata.annotations", 'note="say \\"hi\\""'),
    ("metadata.labels['tier']", "front"),
    ("metadata.labels['absent']", ""),
    ("metadata.annotations['note']", 'say "hi"'),
    ("spec.nodeName", "node-1"),
    ("spec.serviceAccountName", "robot"),
    ("status.podIP", "10.0.0.7"),
    ("status.hostIP", "192.168.1.2"),
])
def test_field_value(field_path: str, value: str) -> None:
    assert vol.field_value(field_path, FACTS) == value


def test_field_value_unsupported() -> None:
    with pytest.raises(vol.SourceError, match=re.escape('unsupported fieldPath "status.phase"')):
        vol.field_value("status.phase", FACTS)


def test_empty_labels_give_an_empty_file() -> None:
    facts = vol.PodFacts(pod=make_pod(), node_name="n")
    assert vol.field_value("metadata.labels", facts) == ""


@pytest.mark.parametrize(("ref", "value"), [
    ({"containerName": "app", "resource": "limits.cpu"}, "1"),
    ({"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}, "500"),
    ({"containerName": "app", "resource": "requests.cpu", "divisor": "1m"}, "250"),
    ({"containerName": "app", "resource": "requests.cpu"}, "1"),
    ({"containerName": "app", "resource": "limits.memory"}, str(64 * 2**20)),
    ({"containerName": "app", "resource": "requests.memory", "divisor": "1Mi"}, "32"),
    ({"containerName": "bare", "resource": "limits.cpu"}, "2"),
    ({"containerName": "bare", "resource": "limits.memory", "divisor": "1Gi"}, "8"),
    ({"containerName": "bare", "resource": "requests.memory"}, "0"),
    # An unset (zero) divisor is 1, as in the kubelet.
    ({"containerName": "app", "resource": "limits.cpu", "divisor": "0"}, "1"),
    ({"containerName": "app", "resource": "limits.ephemeral-storage"}, "0"),
])
def test_resource_value(ref: dict[str, str], value: str) -> None:
    assert vol.resource_value(ref, FACTS) == value


@pytest.mark.parametrize(("ref", "message"), [
    ({"containerName": "ghost", "resource": "limits.cpu"}, 'container "ghost" not found'),
    ({"containerName": "app", "resource": "limits.hugepages-2Mi"}, "unsupported resource"),
    ({"containerName": "app", "resource": "limits.cpu", "divisor": "-1"}, "must be positive"),
])
def test_resource_value_errors(ref: dict[str, str], message: str) -> None:
    with pytest.raises(vol.SourceError, match=message):
        vol.resource_value(ref, FACTS)


def test_downward_payload() -> None:
    source = {"defaultMode": 0o440, "items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "meta/name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o600},
        {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu",
                                             "divisor": "1m"}},
    ]}
    assert vol.downward_payload(source, FACTS) == {
        "labels": FileSpec(b'app="web"\ntier="front"', 0o440),
        "meta/name": FileSpec(b"web", 0o600),
        "cpu": FileSpec(b"500", 0o440),
    }


def test_downward_item_needs_one_reference() -> None:
    with pytest.raises(vol.SourceError, match="exactly one of fieldRef, resourceFieldRef"):
        vol.downward_payload({"items": [{"path": "x"}]}, FACTS)


# -- projected -----------------------------------------------------------------------------


def test_projected_merges_sources_in_order() -> None:
    source = {"defaultMode": 0o400, "sources": [
        {"configMap": {"name": "cfg", "items": [{"key": "a", "path": "a"}]}},
        {"secret": {"name": "creds", "items": [{"key": "user", "path": "user", "mode": 0o600}]}},
        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath":
                                                              "metadata.namespace"}}]}},
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
        {"configMap": {"name": "absent", "optional": True}},
        {"secret": {"name": "creds", "items": [{"key": "pass", "path": "a"}]}},
    ]}
    assert vol.projected_payload(source, lookup, FACTS, {"token": b"jwt"}) == {
        "a": FileSpec(b"s3cr\xc3\xa9t", 0o400),
        "user": FileSpec(b"admin", 0o600),
        "ns": FileSpec(b"default", 0o400),
        "token": FileSpec(b"jwt", 0o400),
    }


@pytest.mark.parametrize(("sources", "message"), [
    ([{"configMap": {"name": "gone"}}], 'configmap "gone" not found'),
    ([{"secret": {"name": "gone"}}], 'secret "gone" not found'),
    ([{"clusterTrustBundle": {"path": "ca"}}], 'unsupported projected source "clusterTrustBundle"'),
    ([{"serviceAccountToken": {"path": "token"}}], 'no service account token for path "token"'),
    ([{"configMap": {"name": "cfg"}, "secret": {"name": "creds"}}], "exactly one type"),
])
def test_projected_errors(sources: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(vol.SourceError, match=message):
        vol.projected_payload({"sources": sources}, lookup, FACTS)


def test_content_payload_dispatches_on_the_type() -> None:
    volume = pods.Volume("v", "configMap", {"name": "cfg", "items": [{"key": "a", "path": "x"}]})
    assert vol.content_payload(volume, lookup, FACTS) == {"x": FileSpec(b"alpha")}
    volume = pods.Volume("v", "secret", {"secretName": "creds", "items": [
        {"key": "user", "path": "u"}]})
    assert vol.content_payload(volume, lookup, FACTS) == {"u": FileSpec(b"admin")}


def test_referenced_objects() -> None:
    pod = make_pod(volumes=(
        pods.Volume("a", "configMap", {"name": "cfg"}),
        pods.Volume("b", "secret", {"secretName": "creds"}),
        pods.Volume("c", "projected", {"sources": [
            {"configMap": {"name": "p-cfg"}}, {"secret": {"name": "p-sec"}},
            {"downwardAPI": {"items": []}},
        ]}),
        pods.Volume("d", "emptyDir", {}),
    ))
    assert vol.referenced_objects(pod) == {
        ("ConfigMap", "default", "cfg"), ("Secret", "default", "creds"),
        ("ConfigMap", "default", "p-cfg"), ("Secret", "default", "p-sec"),
    }


# -- emptyDir and hostPath -----------------------------------------------------------------


@pytest.mark.parametrize(("source", "size"), [
    ({}, None),
    ({"medium": "Memory"}, None),
    ({"medium": "Memory", "sizeLimit": "64Mi"}, 64 * 2**20),
    ({"medium": "Memory", "sizeLimit": "1G"}, 10**9),
    ({"medium": "Memory", "sizeLimit": "0"}, None),
])
def test_tmpfs_size(source: dict[str, Any], size: int | None) -> None:
    assert vol.tmpfs_size(source) == size


def test_unsupported_medium_and_bad_size() -> None:
    with pytest.raises(vol.SourceError, match='medium "HugePages" is not supported'):
        vol.empty_dir_medium({"medium": "HugePages"})
    with pytest.raises(vol.SourceError, match="sizeLimit"):
        vol.tmpfs_size({"sizeLimit": "lots"})


@pytest.mark.parametrize(("source", "result"), [
    ({"path": "/data"}, ("/data", "")),
    ({"path": "/data", "type": "DirectoryOrCreate"}, ("/data", "DirectoryOrCreate")),
    ({"path": "data"}, 'hostPath path "data" must be absolute'),
    ({"path": "/data", "type": "Folder"}, 'hostPath type "Folder" is not valid'),
])
def test_host_path(source: dict[str, Any], result: tuple[str, str] | str) -> None:
    if isinstance(result, tuple):
        assert vol.host_path(source) == result
        return
    with pytest.raises(vol.SourceError, match=result):
        vol.host_path(source)


@pytest.mark.parametrize(("request_", "read_only", "supported", "expected"), [
    ("Disabled", True, True, False),
    ("IfPossible", True, True, True),
    ("IfPossible", True, False, False),  # a plain read-only mount, as the kubelet
    ("Enabled", True, True, True),
    ("Enabled", True, False, "not supported by the runtime"),
    ("Enabled", False, True, False),  # content volumes are read-only anyway; validated before
])
def test_recursive_read_only_is_resolved_as_the_kubelets(
        request_: str, read_only: bool, supported: bool, expected: bool | str) -> None:
    mount = runtime.Mount("/v", "/host/v", readonly=read_only, volume="v",
                          recursive_request=request_)
    if isinstance(expected, str):
        with pytest.raises(vol.SourceError, match=expected):
            vol.recursive_read_only(mount, supported)
        return
    assert vol.recursive_read_only(mount, supported).recursive_read_only is expected
