"""Manifest parsing and validation: documents, pods, static pod conventions, config objects."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import pytest

from nodelet.model.core import handlers, pods, quantities
from nodelet.model.parsing import manifests

NODE = "node-1"


def pod_obj(**spec_extra: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "busybox:1.36", "command": ["sleep", "3600"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [container], **spec_extra},
    }


def with_change(path: str, value: Any, obj: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of a pod object with one field set ("spec.containers.0.image"); None deletes."""
    out = copy.deepcopy(obj or pod_obj())
    *parents, last = path.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    elif value is None:
        del node[last]
    else:
        node[last] = value
    return out


# --- documents ---------------------------------------------------------------------------------

TWO_PODS = """\
# leading comment
---
apiVersion: v1
kind: Pod
metadata: {name: a}
spec: {containers: [{name: c, image: busybox}]}
---
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
"""


def test_parse_documents_splits_and_skips_empty() -> None:
    docs = manifests.parse_documents(TWO_PODS, filename="pods.yaml")
    assert [(type(d).__name__, d.index, d.line) for d in docs] == [
        ("ParsedDocument", 0, 2),
        ("ParsedDocument", 2, 8),
    ]
    assert [d.kind for d in docs if isinstance(d, manifests.ParsedDocument)] == ["Pod", "ConfigMap"]


@pytest.mark.parametrize(
    ("filename", "text", "expected"),
    [
        pytest.param(
            "bad.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n   labels: x\n",
            [("bad.yaml", 0, 5, "invalid YAML: mapping values are not allowed here")],
            id="yaml syntax",
        ),
        pytest.param(
            "bad.yaml",
            "kind: ConfigMap\n---\nkind: Pod\nkind: Pod\n",
            [("bad.yaml", 1, 4, "invalid YAML: duplicate key 'kind'")],
            id="duplicate key",
        ),
        pytest.param(
            "list.yaml",
            "- a\n- b\n",
            [("list.yaml", 0, 1, "expected a Kubernetes object")],
            id="not a mapping",
        ),
        pytest.param(
            "bad.json",
            '{\n  "kind": "Pod",\n  "apiVersion": v1\n}',
            [("bad.json", 0, 3, "invalid JSON: Expecting value")],
            id="json syntax",
        ),
    ],
)
def test_parse_documents_problems(
    filename: str, text: str, expected: list[tuple[str, int, int, str]]
) -> None:
    docs = manifests.parse_documents(text, filename=filename)
    problems = [d for d in docs if isinstance(d, manifests.ManifestProblem)]
    assert [(p.filename, p.index, p.line) for p in problems] == [e[:3] for e in expected]
    for problem, (*_, message) in zip(problems, expected, strict=True):
        assert problem.message.startswith(message)
        assert str(problem).startswith(f"{filename}:{problem.line}: document {problem.index}: ")


def test_a_bad_document_does_not_hide_the_others() -> None:
    text = "kind: [\n---\napiVersion: v1\nkind: Pod\n"
    docs = manifests.parse_documents(text, filename="m.yaml")
    assert [type(d).__name__ for d in docs] == ["ManifestProblem", "ParsedDocument"]


def test_parse_json_and_timestamps_stay_strings() -> None:
    (doc,) = manifests.parse_documents(json.dumps(pod_obj()), filename="p.json")
    assert isinstance(doc, manifests.ParsedDocument)
    assert doc.kind == "Pod"
    (doc,) = manifests.parse_documents(
        "metadata: {creationTimestamp: 2024-01-01T00:00:00Z}", filename="p.yaml"
    )
    assert isinstance(doc, manifests.ParsedDocument)
    assert doc.obj["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z"


def test_empty_file_has_no_documents() -> None:
    assert manifests.parse_documents("# nothing\n", filename="e.yaml") == []
    assert manifests.parse_documents("", filename="e.yaml") == []


# --- a valid pod -------------------------------------------------------------------------------


def test_static_pod_conventions() -> None:
    obj = pod_obj()
    pod = manifests.pod_from_object(obj, node_name=NODE)
    assert pod.name == "web-node-1"
    assert pod.namespace == "default"
    assert pod.labels == {"app": "web"}
    assert pod.is_static
    assert pod.spec.node_name == NODE
    assert len(pod.uid) == 32
    assert pod.annotations == {
        pods.ANNOTATION_CONFIG_SOURCE: "file",
        pods.ANNOTATION_CONFIG_HASH: pod.uid,
    }
    meta = pod.raw["metadata"]
    assert (meta["name"], meta["namespace"], meta["uid"]) == ("web-node-1", "default", pod.uid)
    assert meta["annotations"] == pod.annotations
    assert obj == pod_obj(), "the input is not modified"


def test_config_hash_is_stable_and_tracks_content_and_node() -> None:
    first = manifests.pod_from_object(pod_obj(), node_name=NODE).uid
    assert manifests.pod_from_object(pod_obj(), node_name=NODE).uid == first
    assert manifests.pod_from_object(pod_obj(), node_name="node-2").uid != first
    changed = with_change("spec.containers.0.image", "busybox:1.37")
    assert manifests.pod_from_object(changed, node_name=NODE).uid != first
    reordered = dict(reversed(list(pod_obj().items())))
    assert manifests.pod_from_object(reordered, node_name=NODE).uid == first


def test_uid_in_manifest_is_kept() -> None:
    obj = with_change("metadata.uid", "fixed-uid")
    pod = manifests.pod_from_object(obj, node_name=NODE)
    assert pod.uid == "fixed-uid"
    assert pod.annotations[pods.ANNOTATION_CONFIG_HASH] == "fixed-uid"


def test_raw_is_the_defaulted_v1_pod() -> None:
    obj = pod_obj(
        volumes=[
            {"name": "cfg", "configMap": {"name": "c"}},
            {"name": "h", "hostPath": {"path": "/"}},
        ]
    )
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    obj["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    spec = manifests.pod_from_object(obj, node_name=NODE).raw["spec"]
    assert {k: spec[k] for k in manifests._SPEC_DEFAULTS} == {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
        "securityContext": {},
    }
    # The API server's admission sets these; a static pod, like the kubelet's, has none.
    assert "priority" not in spec and "preemptionPolicy" not in spec
    assert spec["tolerations"] == [{"operator": "Exists", "effect": "NoExecute"}]
    assert spec["nodeName"] == NODE
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert container["resources"]["requests"] == {"cpu": "1"}
    assert spec["volumes"][0]["configMap"]["defaultMode"] == 0o644
    assert spec["volumes"][1]["hostPath"]["type"] == ""


def test_typed_fields() -> None:
    obj = pod_obj(
        restartPolicy="Never",
        hostNetwork=True,
        terminationGracePeriodSeconds=5,
        dnsPolicy="None",
        dnsConfig={"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
        readinessGates=[{"conditionType": "example.com/lb"}],
        initContainers=[{"name": "sidecar", "image": "busybox", "restartPolicy": "Always"}],
        volumes=[{"name": "data", "emptyDir": {}}],
    )
    container = obj["spec"]["containers"][0]
    container["env"] = [
        {"name": "A", "value": "1"},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    container["volumeMounts"] = [{"name": "data", "mountPath": "/data", "readOnly": True}]
    container["readinessProbe"] = {"exec": {"command": ["true"]}}
    container["resources"] = {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": 1}}
    spec = manifests.pod_from_object(obj, node_name=NODE).spec
    assert (spec.restart_policy, spec.host_network, spec.termination_grace_period_seconds) == (
        "Never",
        True,
        5,
    )
    assert spec.dns_config == pods.PodDNSConfig(nameservers=("1.1.1.1",), options=("ndots:2",))
    assert spec.readiness_gates == ("example.com/lb",)
    assert spec.init_containers[0].restart_policy == "Always"
    assert spec.volumes == (pods.Volume(name="data", source_type="emptyDir", source={}),)
    app = spec.containers[0]
    assert app.command == ("sleep", "3600")
    assert app.env == (
        pods.EnvVar("A", "1"),
        pods.EnvVar("NODE", "", {"fieldRef": {"fieldPath": "spec.nodeName"}}),
    )
    assert app.volume_mounts == (pods.VolumeMount("data", "/data", read_only=True),)
    assert app.readiness_probe == handlers.Probe(handlers.ExecAction(("true",)))
    assert app.resources == pods.Resources(
        cpu_request_milli=250, cpu_limit_milli=1000, memory_request=64 * 2**20, memory_limit=0,
        written={"limits": {"cpu": "1"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
    )


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("localhost:5000/busybox", "Always"),
        ("localhost:5000/busybox:1.0", "IfNotPresent"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),
        ("busybox:latest@sha256:" + "a" * 64, "Always"),
    ],
)
def test_default_pull_policy(image: str, policy: str) -> None:
    obj = with_change("spec.containers.0.image", image)
    assert manifests.pod_from_object(obj, node_name=NODE).spec.containers[0].image_pull_policy == (
        policy
    )


def test_explicit_pull_policy_wins() -> None:
    obj = with_change("spec.containers.0.imagePullPolicy", "Never")
    assert manifests.pod_from_object(obj, node_name=NODE).spec.containers[0].image_pull_policy == (
        "Never"
    )


def test_kubectl_dry_run_output_is_accepted() -> None:
    """What `kubectl run --dry-run=client -o yaml` prints: nulls and empty objects."""
    text = """\
apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  labels:
    run: web
  name: web
spec:
  containers:
  - image: busybox
    name: web
    resources: {}
  dnsPolicy: ClusterFirst
  restartPolicy: Always
status: {}
"""
    (doc,) = manifests.parse_documents(text, filename="web.yaml")
    assert isinstance(doc, manifests.ParsedDocument)
    assert manifests.pod_from_object(doc.obj, node_name=NODE).name == "web-node-1"


def test_real_static_pod_with_many_fields_is_accepted() -> None:
    """A kubeadm-style static pod: fields nodelet ignores must not be rejected."""
    probe = {"httpGet": {"host": "127.0.0.1", "path": "/livez", "port": 6443, "scheme": "HTTPS"}}
    obj = pod_obj(
        hostNetwork=True,
        priority=2000001000,
        priorityClassName="system-node-critical",
        securityContext={"seccompProfile": {"type": "RuntimeDefault"}},
        tolerations=[{"operator": "Exists"}],
        nodeSelector={"kubernetes.io/os": "linux"},
        volumes=[{"name": "certs", "hostPath": {"path": "/etc/ssl/certs", "type": "Directory"}}],
        enableServiceLinks=False,
        hostUsers=True,
        os={"name": "linux"},
    )
    obj["metadata"]["annotations"] = {"kubeadm.kubernetes.io/endpoint": "10.0.0.1:6443"}
    obj["metadata"]["namespace"] = "kube-system"
    obj["spec"]["containers"][0].update(
        livenessProbe=probe,
        startupProbe=probe,
        readinessProbe=probe,
        resources={"requests": {"cpu": "250m", "ephemeral-storage": "1Gi"}},
        volumeMounts=[{"name": "certs", "mountPath": "/etc/ssl/certs", "readOnly": True}],
        securityContext={"allowPrivilegeEscalation": False},
        lifecycle={"preStop": {"exec": {"command": ["sleep", "5"]}}},
        envFrom=[{"configMapRef": {"name": "x"}}],
        stdin=False,
        tty=False,
        terminationMessagePolicy="FallbackToLogsOnError",
    )
    pod = manifests.pod_from_object(obj, node_name=NODE)
    assert pod.full_name == "kube-system/web-node-1"
    assert pod.annotations["kubeadm.kubernetes.io/endpoint"] == "10.0.0.1:6443"


def test_api_source_keeps_name_and_uid() -> None:
    obj = with_change("metadata.uid", "1234-abcd")
    obj["spec"]["nodeName"] = "other"
    obj["spec"]["newFieldFromTheFuture"] = True
    pod = manifests.pod_from_object(obj, node_name=NODE, source="api", strict=False)
    assert (pod.name, pod.uid, pod.spec.node_name) == ("web", "1234-abcd", "other")
    assert pods.ANNOTATION_CONFIG_HASH not in pod.annotations
    assert not pod.is_static


# --- errors ------------------------------------------------------------------------------------

C0 = "spec.containers[0]"

ERROR_CASES: list[Any] = [
    # (object, error class, path, fragment of the message)
    (with_change("apiVersion", "apps/v1"), manifests.UnsupportedError, "apiVersion", '"v1"'),
    (with_change("kind", "Deployment"), manifests.UnsupportedError, "kind", '"Deployment"'),
    (with_change("kind", None), manifests.InvalidValueError, "kind", "required"),
    (with_change("metadata", None), manifests.InvalidValueError, "metadata", "required"),
    (with_change("metadata.name", None), manifests.InvalidValueError, "metadata.name", "required"),
    (with_change("metadata.name", "Web"), manifests.InvalidValueError, "metadata.name", "DNS-1123"),
    (with_change("metadata.name", "a" * 254), manifests.InvalidValueError, "metadata.name", "253"),
    (
        with_change("metadata.namespace", "kube.system"),
        manifests.InvalidValueError,
        "metadata.namespace",
        "DNS-1123 label",
    ),
    (
        with_change("metadata.labels", {"app": 1}),
        manifests.FieldTypeError,
        "metadata.labels[app]",
        "quote it",
    ),
    (
        with_change("metadata.labels", {"app": "a b"}),
        manifests.InvalidValueError,
        "metadata.labels",
        "label value",
    ),
    (
        with_change("metadata.nmae", "x"),
        manifests.UnknownFieldError,
        "metadata.nmae",
        'did you mean "metadata.name"',
    ),
    (with_change("spec", None), manifests.InvalidValueError, "spec", "required"),
    (
        with_change("spec.containrs", []),
        manifests.UnknownFieldError,
        "spec.containrs",
        'unknown field "spec.containrs"; did you mean "spec.containers"?',
    ),
    (
        with_change("spec.containers", []),
        manifests.InvalidValueError,
        "spec.containers",
        "at least",
    ),
    (with_change("spec.containers", {}), manifests.FieldTypeError, "spec.containers", "a list"),
    (
        with_change("spec.containers.0.imagePullPolcy", "Always"),
        manifests.UnknownFieldError,
        f"{C0}.imagePullPolcy",
        f'did you mean "{C0}.imagePullPolicy"',
    ),
    (
        with_change("spec.containers.0.image", None),
        manifests.InvalidValueError,
        f"{C0}.image",
        "required",
    ),
    (
        with_change("spec.containers.0.image", ""),
        manifests.InvalidValueError,
        f"{C0}.image",
        "required",
    ),
    (
        with_change("spec.containers.0.image", 3),
        manifests.FieldTypeError,
        f"{C0}.image",
        "a string",
    ),
    (
        with_change("spec.containers.0.name", "App_1"),
        manifests.InvalidValueError,
        f"{C0}.name",
        "label",
    ),
    (
        with_change("spec.containers.0.command", "sleep 10"),
        manifests.FieldTypeError,
        f"{C0}.command",
        'expected a list of strings, got a string ("sleep 10")',
    ),
    (
        with_change("spec.containers.0.args", ["-c", 1]),
        manifests.FieldTypeError,
        f"{C0}.args[1]",
        "a string",
    ),
    (
        with_change("spec.containers.0.ports", [{"containerPort": "80"}]),
        manifests.FieldTypeError,
        f"{C0}.ports[0].containerPort",
        "an integer",
    ),
    (
        with_change("spec.containers.0.ports", ["80"]),
        manifests.FieldTypeError,
        f"{C0}.ports[0]",
        "a mapping",
    ),
    (
        with_change("spec.containers.0.ports", [{"containerPort": 70000}]),
        manifests.InvalidValueError,
        f"{C0}.ports[0].containerPort",
        "between 1 and 65535",
    ),
    (
        with_change("spec.containers.0.ports", [{"containerPort": 0}]),
        manifests.InvalidValueError,
        f"{C0}.ports[0].containerPort",
        "between 1 and 65535",
    ),
    (
        with_change("spec.containers.0.ports", [{"containerPort": 80, "protocol": "HTTP"}]),
        manifests.InvalidValueError,
        f"{C0}.ports[0].protocol",
        "TCP, UDP, SCTP",
    ),
    (
        with_change("spec.containers.0.ports", [{"name": "http"}]),
        manifests.InvalidValueError,
        f"{C0}.ports[0].containerPort",
        "required",
    ),
    (
        with_change("spec.containers.0.imagePullPolicy", "Sometimes"),
        manifests.InvalidValueError,
        f"{C0}.imagePullPolicy",
        "Always, IfNotPresent, Never",
    ),
    (
        with_change("spec.containers.0.env", [{"name": "A", "value": True}]),
        manifests.FieldTypeError,
        f"{C0}.env[0].value",
        "quote it",
    ),
    (
        with_change("spec.containers.0.env", [{"value": "x"}]),
        manifests.InvalidValueError,
        f"{C0}.env[0].name",
        "required",
    ),
    (
        with_change("spec.containers.0.resources", {"limits": {"cpu": "lots"}}),
        manifests.InvalidValueError,
        f"{C0}.resources.limits[cpu]",
        "not a quantity",
    ),
    (
        with_change(
            "spec.containers.0.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
        ),
        manifests.InvalidValueError,
        f"{C0}.resources.requests",
        "must be less than or equal to cpu limit of 1",
    ),
    (
        with_change("spec.containers.0.resources", {"requests": {"memory": "-1Mi"}}),
        manifests.InvalidValueError,
        f"{C0}.resources.requests[memory]",
        "greater than or equal to 0",
    ),
    (
        with_change("spec.containers.0.volumeMounts", [{"name": "nope", "mountPath": "/x"}]),
        manifests.InvalidValueError,
        f"{C0}.volumeMounts[0].name",
        'volume "nope" is not declared',
    ),
    (
        with_change("spec.containers.0.restartPolicy", "Sometimes"),
        manifests.InvalidValueError,
        f"{C0}.restartPolicy",
        'Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"',
    ),
    (
        pod_obj(initContainers=[{"name": "i", "image": "busybox", "restartPolicy": "Later"}]),
        manifests.InvalidValueError,
        "spec.initContainers[0].restartPolicy",
        "(Always makes a sidecar)",
    ),
    (
        pod_obj(initContainers=[{"name": "app", "image": "busybox"}]),
        manifests.InvalidValueError,
        "spec.initContainers[0].name",
        "duplicate container name",
    ),
    (
        with_change("spec.restartPolicy", "Sometimes"),
        manifests.InvalidValueError,
        "spec.restartPolicy",
        "Always, OnFailure, Never",
    ),
    (
        with_change("spec.terminationGracePeriodSeconds", -1),
        manifests.InvalidValueError,
        "spec.terminationGracePeriodSeconds",
        "at least 0",
    ),
    (
        with_change("spec.terminationGracePeriodSeconds", 1.5),
        manifests.FieldTypeError,
        "spec.terminationGracePeriodSeconds",
        "an integer",
    ),
    (
        with_change("spec.hostNetwork", "yes"),
        manifests.FieldTypeError,
        "spec.hostNetwork",
        "a boolean",
    ),
    (
        with_change("spec.dnsPolicy", "Cluster"),
        manifests.InvalidValueError,
        "spec.dnsPolicy",
        "ClusterFirst",
    ),
    (
        with_change("spec.dnsPolicy", "None"),
        manifests.InvalidValueError,
        "spec.dnsConfig",
        "must provide `dnsConfig`",
    ),
    (
        pod_obj(readinessGates=["example.com/lb"]),
        manifests.FieldTypeError,
        "spec.readinessGates[0]",
        "a mapping",
    ),
    (
        pod_obj(volumes=[{"name": "v", "nfs": {"server": "x", "path": "/"}}]),
        manifests.UnsupportedError,
        "spec.volumes[0].nfs",
        'unsupported volume type "nfs"',
    ),
    (
        pod_obj(volumes=[{"name": "v"}]),
        manifests.InvalidValueError,
        "spec.volumes[0]",
        "must specify a volume type",
    ),
    (
        pod_obj(volumes=[{"name": "v", "emptyDir": None}]),
        manifests.InvalidValueError,
        "spec.volumes[0]",
        "emptyDir: {}",
    ),
    (
        pod_obj(volumes=[{"name": "v", "emptyDir": {}, "hostPath": {"path": "/"}}]),
        manifests.InvalidValueError,
        "spec.volumes[0].hostPath",
        "more than 1 volume type",
    ),
    (
        pod_obj(volumes=[{"name": "v", "emptydir": {}}]),
        manifests.UnknownFieldError,
        "spec.volumes[0].emptydir",
        'did you mean "spec.volumes[0].emptyDir"',
    ),
    (
        pod_obj(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]),
        manifests.InvalidValueError,
        "spec.volumes[1].name",
        "duplicate volume name",
    ),
    (
        pod_obj(volumes=[{"name": "v", "hostPath": {}}]),
        manifests.InvalidValueError,
        "spec.volumes[0].hostPath.path",
        "required",
    ),
    (
        pod_obj(volumes=[{"name": "v", "configMap": {}}]),
        manifests.InvalidValueError,
        "spec.volumes[0].configMap.name",
        "required",
    ),
    (
        with_change("status", {}, with_change("extra", 1)),
        manifests.UnknownFieldError,
        "extra",
        'unknown field "extra"',
    ),
]


@pytest.mark.parametrize(
    ("obj", "error", "path", "fragment"),
    ERROR_CASES,
    ids=[f"{i}-{case[2]}" for i, case in enumerate(ERROR_CASES)],
)
def test_invalid_pods(
    obj: dict[str, Any], error: type[manifests.ManifestError], path: str, fragment: str
) -> None:
    with pytest.raises(error) as info:
        manifests.pod_from_object(obj, node_name=NODE)
    assert info.value.path == path
    assert fragment in info.value.message
    assert str(info.value).startswith(f"{path}: ")


def test_all_errors_are_manifest_errors_and_value_errors() -> None:
    for cls in (
        manifests.UnknownFieldError,
        manifests.FieldTypeError,
        manifests.InvalidValueError,
        manifests.UnsupportedError,
    ):
        assert issubclass(cls, manifests.ManifestError)
    assert issubclass(manifests.ManifestError, ValueError)


def test_strict_false_ignores_unknown_fields() -> None:
    obj = with_change("spec.containers.0.futureField", 1, with_change("spec.futureField", 1))
    assert manifests.pod_from_object(obj, node_name=NODE, strict=False).name == "web-node-1"


def test_static_name_too_long_for_node() -> None:
    obj = with_change("metadata.name", "a" * 250)
    with pytest.raises(manifests.InvalidValueError) as info:
        manifests.pod_from_object(obj, node_name=NODE)
    assert info.value.path == "metadata.name"


def test_api_pod_needs_uid() -> None:
    with pytest.raises(manifests.InvalidValueError) as info:
        manifests.pod_from_object(pod_obj(), node_name=NODE, source="api")
    assert info.value.path == "metadata.uid"


# --- quantities --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "millis", "nbytes"),
    [
        ("100m", 100, 1),
        ("0.5", 500, 1),
        ("1", 1000, 1),
        (2, 2000, 2),
        (0.25, 250, 1),
        ("128Mi", 128 * 2**20 * 1000, 128 * 2**20),
        ("1G", 10**12, 10**9),
        ("1e3", 10**6, 1000),
        ("1Ki", 1024000, 1024),
        ("1.5Gi", 1536 * 2**20 * 1000, 1536 * 2**20),
        ("500u", 1, 1),
        ("1E", 2**63 - 1, 10**18),  # 10**21 millicores: saturated at the int64 bound
        ("0", 0, 0),
    ],
)
def test_quantities(value: Any, millis: int, nbytes: int) -> None:
    assert manifests.cpu_millis(value) == millis
    assert manifests.memory_bytes(value) == nbytes


@pytest.mark.parametrize("value", ["", "1.2.3", "12 Mi", "1mi", "Mi", "one", True, None, [1]])
def test_bad_quantities(value: Any) -> None:
    with pytest.raises(manifests.ManifestError):
        manifests.parse_quantity(value, path="x")


def test_parse_quantity_is_exact() -> None:
    assert manifests.parse_quantity("0.1") == Decimal("0.1")


# --- ConfigMap and Secret ----------------------------------------------------------------------


def test_config_map() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "ns"},
        "data": {"app.conf": "x=1"},
        "binaryData": {"blob": "AAE="},
    }
    got = manifests.config_object_from_object(obj)
    assert got == manifests.ConfigMap(
        name="cfg", namespace="ns", data={"app.conf": "x=1"}, binary_data={"blob": b"\x00\x01"}
    )


def test_secret_merges_string_data() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": "aGk=", "b": "b2xk"},
        "stringData": {"b": "new"},
    }
    got = manifests.config_object_from_object(obj)
    assert isinstance(got, manifests.Secret)
    assert (got.namespace, got.type, dict(got.data)) == (
        "default",
        "Opaque",
        {"a": b"hi", "b": b"new"},
    )


@pytest.mark.parametrize(
    ("change", "path", "fragment"),
    [
        ({"kind": "Secret", "data": {"a": "not base64!"}}, "data[a]", "base64"),
        ({"kind": "ConfigMap", "data": {"bad key": "x"}}, "data[bad key]", "not a valid key"),
        ({"kind": "ConfigMap", "data": {"a": 1}}, "data[a]", "a string"),
        ({"kind": "ConfigMap", "dta": {}}, "dta", 'did you mean "data"'),
        ({"kind": "Service"}, "kind", '"Service"'),
    ],
)
def test_invalid_config_objects(change: dict[str, Any], path: str, fragment: str) -> None:
    obj = {"apiVersion": "v1", "metadata": {"name": "x"}, **change}
    with pytest.raises(manifests.ManifestError) as info:
        manifests.config_object_from_object(obj)
    assert info.value.path == path
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("Pod", pods.Pod), ("ConfigMap", manifests.ConfigMap), ("Secret", manifests.Secret)],
)
def test_load_object_dispatches_by_kind(kind: str, expected: type) -> None:
    obj = (
        pod_obj()
        if kind == "Pod"
        else {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}}
    )
    assert isinstance(manifests.load_object(obj, node_name=NODE), expected)


def test_load_object_names_other_kinds() -> None:
    with pytest.raises(manifests.UnsupportedError) as info:
        manifests.load_object({"apiVersion": "apps/v1", "kind": "Deployment"}, node_name=NODE)
    assert 'unsupported kind "Deployment"' in info.value.message
    assert "Pod, ConfigMap, Secret" in info.value.message


def test_problem_from_error_keeps_location() -> None:
    (doc,) = manifests.parse_documents(
        "---\n" + json.dumps(with_change("kind", "Job")), filename="j.yaml"
    )
    assert isinstance(doc, manifests.ParsedDocument)
    with pytest.raises(manifests.ManifestError) as info:
        manifests.load_object(doc.obj, node_name=NODE)
    problem = manifests.ManifestProblem.from_error(doc, info.value)
    assert (problem.filename, problem.index, problem.line, problem.path) == ("j.yaml", 0, 1, "kind")


def test_static_name_uses_lowercased_node_name() -> None:
    assert manifests.pod_from_object(pod_obj(), node_name="Node-A").name == "web-node-a"


def test_raw_carries_the_schemes_defaults_and_canonical_quantities() -> None:
    """What the kubelet's decoding of a static pod adds (SetObjectDefaults_Pod): probe
    timings, httpGet path and scheme, the gRPC service, field selectors' apiVersion, a
    resource selector's divisor; quantities written back canonically."""
    obj = pod_obj()
    container = obj["spec"]["containers"][0]
    container["readinessProbe"] = {"httpGet": {"port": 80}}
    container["livenessProbe"] = {"grpc": {"port": 81}, "periodSeconds": 5}
    container["env"] = [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "M", "valueFrom": {"resourceFieldRef": {
                            "resource": "limits.memory"}}}]
    container["resources"] = {"requests": {"cpu": "1000", "memory": "1.5Gi"}}
    spec = manifests.pod_from_object(obj, node_name=NODE).raw["spec"]
    got = spec["containers"][0]
    assert got["readinessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
        "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert got["livenessProbe"]["grpc"] == {"port": 81, "service": ""}
    assert got["livenessProbe"]["periodSeconds"] == 5
    assert got["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert got["env"][1]["valueFrom"]["resourceFieldRef"]["divisor"] == "0"
    assert got["resources"]["requests"] == {"cpu": "1k", "memory": "1536Mi"}


@pytest.mark.parametrize(("written", "canonical"), [
    ("1000", "1k"), ("1500", "1500"), ("0.5", "500m"), ("100m", "100m"), ("1000000m", "1k"),
    ("0.1", "100m"), ("1", "1"), (2, "2"), ("2G", "2G"), ("0", "0"),
    ("32Mi", "32Mi"), ("1.5Gi", "1536Mi"), ("1024Ki", "1Mi"), ("2000Ki", "2000Ki"),
    ("0.5Ki", "512"), ("1024", "1024"),
    ("1e3", "1e3"), ("1500e-3", "1500e-3"), ("1e21", "1e21"), ("1E", "1E"), ("2000P", "2E"),
])
def test_quantities_are_written_back_canonically(written: object, canonical: str) -> None:
    """resource.Quantity's String(): binary amounts of 1024 and more by the largest power of
    1024 that divides them, the others as an integer times the largest power of 1000."""
    assert quantities.canonical(written) == canonical
