"""Validation equal to kube-apiserver's (pkg/apis/core/validation and apimachinery's
ValidateObjectMeta) for object metadata, ConfigMaps and Secrets, pod-level fields and volumes:
each case is a manifest with one mutation, the field path the API server names and a fragment of
the message. The edge values the API server accepts are accepted, and what nodelet derives from
them for the runtime (sandbox and container configs, CPU shares and quota, tmpfs sizes, DNS) is
computed without error.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from nodelet.model.core import dns, fields, pods, runtime, specs, volumes
from nodelet.model.parsing import manifests

NODE = "node-1"
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
V0 = "spec.volumes[0]"

Obj = dict[str, Any]


def pod_obj(**spec: Any) -> Obj:
    container = {"name": "app", "image": "busybox:1.36"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [container], **spec},
    }


def changed(path: str, value: Any, obj: Obj | None = None) -> Obj:
    """A copy of `obj` (a pod by default) with the field at the dotted `path` set; list items
    are numbers ("spec.containers.0.name")."""
    out = copy.deepcopy(obj if obj is not None else pod_obj())
    *parents, last = path.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def meta(**fields_: Any) -> Obj:
    return changed("metadata", {"name": "web", **fields_})


def vol(**source: Any) -> Obj:
    return pod_obj(volumes=[{"name": "v", **source}])


def projected(*sources: Any, **extra: Any) -> Obj:
    return vol(projected={"sources": list(sources), **extra})


def config_map(**extra: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, **extra}


def secret(**extra: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, **extra}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def case(
    name: str, obj: Obj, path: str, fragment: str, error: type[fields.ManifestError] = (
        fields.InvalidValueError
    ),
) -> Any:
    return pytest.param(obj, path, fragment, error, id=name)


def load(obj: Obj, *, strict: bool = True) -> Any:
    return manifests.load_object(obj, node_name=NODE, strict=strict,
                                 source="file" if strict else "api")


# ---------------------------------------------------------------------------------------------
# metadata (ValidateObjectMeta, ValidatePodSpecificAnnotations)

SIZE = 262144
METADATA = [
    case("name-missing", meta(name=None), "metadata.name", "required"),
    case("name-uppercase", meta(name="Web"), "metadata.name", "DNS-1123 subdomain"),
    case("name-underscore", meta(name="web_1"), "metadata.name", "DNS-1123 subdomain"),
    case("name-too-long", meta(name="a" * 254), "metadata.name", "at most 253"),
    case("name-not-string", meta(name=1), "metadata.name", "a string", fields.FieldTypeError),
    case("generate-name-bad", meta(generateName="Web-"), "metadata.generateName", '"Web-"'),
    case("generate-name-only", changed("metadata", {"generateName": "web-"}), "metadata.name",
         "generateName is not supported", fields.UnsupportedError),
    case("namespace-dots", meta(namespace="kube.system"), "metadata.namespace",
         "DNS-1123 label"),
    case("namespace-64", meta(namespace="a" * 64), "metadata.namespace", "at most 63"),
    case("label-key-space", meta(labels={"bad key": "x"}), "metadata.labels",
         "not a valid qualified name"),
    case("label-key-empty-prefix", meta(labels={"/app": "x"}), "metadata.labels",
         "DNS-1123 subdomain"),
    case("label-key-two-slashes", meta(labels={"a/b/c": "x"}), "metadata.labels",
         "DNS-1123 subdomain"),
    case("label-key-64", meta(labels={"a" * 64: "x"}), "metadata.labels", "qualified name"),
    case("label-key-prefix-upper", meta(labels={"Example.com/a": "x"}), "metadata.labels",
         "DNS-1123 subdomain"),
    case("label-value-space", meta(labels={"app": "a b"}), "metadata.labels",
         '(label "app") is not a valid label value'),
    case("label-value-64", meta(labels={"app": "a" * 64}), "metadata.labels", "at most 63"),
    case("label-value-dash-end", meta(labels={"app": "web-"}), "metadata.labels",
         "label value"),
    case("label-value-number", meta(labels={"app": 1}), "metadata.labels[app]", "quote it",
         fields.FieldTypeError),
    case("labels-list", meta(labels=["app"]), "metadata.labels", "a mapping",
         fields.FieldTypeError),
    case("annotation-key-space", meta(annotations={"bad key": "x"}), "metadata.annotations",
         "qualified name"),
    case("annotation-key-empty", meta(annotations={"": "x"}), "metadata.annotations",
         "qualified name"),
    case("annotation-value-bool", meta(annotations={"a": True}), "metadata.annotations[a]",
         "a string", fields.FieldTypeError),
    case("annotations-too-big", meta(annotations={"a": "x" * SIZE}), "metadata.annotations",
         f"Too long: must have at most {SIZE} bytes"),
    case("annotations-too-big-many", meta(annotations={f"k{i}": "x" * 1000 for i in range(300)}),
         "metadata.annotations", f"must have at most {SIZE} bytes"),
    case("annotations-too-big-utf8", meta(annotations={"a": "é" * (SIZE // 2)}),
         "metadata.annotations", f"must have at most {SIZE} bytes"),
    case("owner-refs-mapping", meta(ownerReferences={"kind": "x"}), "metadata.ownerReferences",
         "a list", fields.FieldTypeError),
    case("owner-ref-no-version", meta(ownerReferences=[{"kind": "ReplicaSet", "name": "r",
                                                        "uid": "u"}]),
         "metadata.ownerReferences.apiVersion", "version must not be empty"),
    case("owner-ref-group-only", meta(ownerReferences=[{"apiVersion": "apps/", "kind": "R",
                                                        "name": "r", "uid": "u"}]),
         "metadata.ownerReferences.apiVersion", "ownerReferences[0]: version must not be empty"),
    case("owner-ref-no-kind", meta(ownerReferences=[{"apiVersion": "v1", "name": "r",
                                                     "uid": "u"}]),
         "metadata.ownerReferences.kind", "must not be empty"),
    case("owner-ref-no-name", meta(ownerReferences=[{"apiVersion": "v1", "kind": "Node",
                                                     "uid": "u"}]),
         "metadata.ownerReferences.name", "must not be empty"),
    case("owner-ref-no-uid", meta(ownerReferences=[{"apiVersion": "v1", "kind": "Node",
                                                    "name": "n"}]),
         "metadata.ownerReferences.uid", "must not be empty"),
    case("owner-ref-event", meta(ownerReferences=[{"apiVersion": "v1", "kind": "Event",
                                                   "name": "e", "uid": "u"}]),
         "metadata.ownerReferences", "Kind=Event is disallowed from being an owner"),
    case("owner-ref-two-controllers", meta(ownerReferences=[
        {"apiVersion": "v1", "kind": "Node", "name": "a", "uid": "1", "controller": True},
        {"apiVersion": "v1", "kind": "Node", "name": "b", "uid": "2", "controller": True}]),
        "metadata.ownerReferences", "Only one reference can have Controller set to true"),
    case("owner-ref-unknown-field", meta(ownerReferences=[{"apiVersion": "v1", "kind": "Node",
                                                           "name": "n", "uid": "u",
                                                           "blockOwnerDeletin": True}]),
         "metadata.ownerReferences[0].blockOwnerDeletin", 'did you mean', fields.UnknownFieldError),
    case("owner-ref-controller-string", meta(ownerReferences=[{"apiVersion": "v1",
                                                               "kind": "Node", "name": "n",
                                                               "uid": "u", "controller": "yes"}]),
         "metadata.ownerReferences[0].controller", "a boolean", fields.FieldTypeError),
    case("finalizers-string", meta(finalizers="kubernetes"), "metadata.finalizers",
         "a list of strings", fields.FieldTypeError),
    case("finalizer-number", meta(finalizers=[1]), "metadata.finalizers[0]", "a string",
         fields.FieldTypeError),
    case("finalizer-space", meta(finalizers=["my finalizer"]), "metadata.finalizers",
         "qualified name"),
    case("finalizer-no-domain", meta(finalizers=["custom"]), "metadata.finalizers[0]",
         "neither a standard finalizer name nor is it fully qualified"),
    case("finalizers-orphan-and-foreground", meta(finalizers=["orphan", "foregroundDeletion"]),
         "metadata.finalizers", "cannot be both set"),
    case("generation-negative", meta(generation=-1), "metadata.generation", "at least 0"),
    case("generation-over-int64", meta(generation=2**63), "metadata.generation",
         "does not fit in an int64", fields.FieldTypeError),
    case("deletion-grace-negative", meta(deletionGracePeriodSeconds=-1),
         "metadata.deletionGracePeriodSeconds", "at least 0"),
    case("deletion-grace-over-int64", meta(deletionGracePeriodSeconds=2**64),
         "metadata.deletionGracePeriodSeconds", "int64", fields.FieldTypeError),
    case("uid-number", meta(uid=5), "metadata.uid", "a string", fields.FieldTypeError),
    case("resource-version-number", meta(resourceVersion=5), "metadata.resourceVersion",
         "a string", fields.FieldTypeError),
    case("managed-fields-operation", meta(managedFields=[{"manager": "m", "operation": "Patch",
                                                          "fieldsType": "FieldsV1"}]),
         "metadata.managedFields[0].operation", "Apply, Update"),
    case("managed-fields-type", meta(managedFields=[{"manager": "m", "operation": "Apply",
                                                     "fieldsType": "FieldsV2"}]),
         "metadata.managedFields[0].fieldsType", "FieldsV1"),
    case("creation-timestamp", meta(creationTimestamp="yesterday"), "metadata.creationTimestamp",
         "RFC 3339"),
    case("deletion-cost-text", meta(annotations={
        "controller.kubernetes.io/pod-deletion-cost": "high"}),
        "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]",
        "must be a 32bit integer"),
    case("deletion-cost-int64", meta(annotations={
        "controller.kubernetes.io/pod-deletion-cost": "2147483648"}),
        "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]", "32bit"),
    case("seccomp-pod-annotation", meta(annotations={
        "seccomp.security.alpha.kubernetes.io/pod": "default"}),
        "metadata.annotations.seccomp.security.alpha.kubernetes.io/pod",
        "must be a valid seccomp profile"),
    case("seccomp-container-annotation-backsteps", meta(annotations={
        "container.seccomp.security.alpha.kubernetes.io/app": "localhost/../x"}),
        "metadata.annotations.container.seccomp.security.alpha.kubernetes.io/app",
        "must not contain '..'"),
    case("apparmor-unknown-container", meta(annotations={
        "container.apparmor.security.beta.kubernetes.io/nope": "runtime/default"}),
        "metadata.annotations[container.apparmor.security.beta.kubernetes.io/nope]",
        'container "nope" not found'),
    case("apparmor-bad-profile", meta(annotations={
        "container.apparmor.security.beta.kubernetes.io/app": "enforce"}),
        "metadata.annotations[container.apparmor.security.beta.kubernetes.io/app]",
        "invalid AppArmor profile name"),
]


# ---------------------------------------------------------------------------------------------
# ConfigMaps and Secrets (ValidateConfigMap, ValidateSecret)

MIB = 1048576
CONFIG_OBJECTS = [
    case("cm-name", changed("metadata.name", "Cfg", config_map()), "metadata.name", "DNS-1123"),
    case("cm-namespace", changed("metadata.namespace", "a_b", config_map()),
         "metadata.namespace", "DNS-1123 label"),
    case("cm-label", changed("metadata.labels", {"a": "b c"}, config_map()), "metadata.labels",
         "label value"),
    case("cm-key-space", config_map(data={"a b": "x"}), "data[a b]", "not a valid key"),
    case("cm-key-dotdot", config_map(data={"..": "x"}), "data[..]", "not a valid key"),
    case("cm-key-dotdot-prefix", config_map(data={"..data": "x"}), "data[..data]",
         "not starting with '..'"),
    case("cm-key-dot", config_map(data={".": "x"}), "data[.]", "not '.'"),
    case("cm-key-slash", config_map(data={"a/b": "x"}), "data[a/b]", "not a valid key"),
    case("cm-key-254", config_map(data={"a" * 254: "x"}), f"data[{'a' * 254}]", "at most 253"),
    case("cm-value-number", config_map(data={"a": 1}), "data[a]", "a string",
         fields.FieldTypeError),
    case("cm-binary-key", config_map(binaryData={"a b": "eA=="}), "binaryData[a b]",
         "not a valid key"),
    case("cm-binary-base64", config_map(binaryData={"b": "%%%"}), "binaryData[b]",
         "not valid base64"),
    case("cm-duplicate-key", config_map(data={"k": "x"}, binaryData={"k": "eA=="}), "data[k]",
         "duplicate of key present in binaryData"),
    case("cm-too-big", config_map(data={"a": "x" * (MIB + 1)}), "",
         f"Too long: must have at most {MIB} bytes"),
    case("cm-too-big-split", config_map(data={"a": "x" * MIB}, binaryData={"b": b64(b"y")}), "",
         f"Too long: must have at most {MIB} bytes"),
    case("cm-too-big-utf8", config_map(data={"a": "é" * (MIB // 2 + 1)}), "",
         "Too long"),
    case("cm-immutable-string", config_map(immutable="true"), "immutable", "a boolean",
         fields.FieldTypeError),
    case("cm-unknown-field", config_map(stringData={}), "stringData", "unknown field",
         fields.UnknownFieldError),
    case("secret-base64", secret(data={"password": "hunter2!"}), "data[password]",
         'the value of key "password" is not valid base64'),
    case("secret-value-number", secret(data={"pin": 1234}), "data[pin]",
         "expected a string, got int", fields.FieldTypeError),
    case("secret-string-data-key", secret(stringData={"bad key": "x"}), "data[bad key]",
         "not a valid key"),
    case("secret-string-data-number", secret(stringData={"pin": 1234}), "stringData[pin]",
         "got int", fields.FieldTypeError),
    case("secret-too-big", secret(data={"a": b64(b"x" * (MIB + 1))}), "data",
         f"Too long: must have at most {MIB} bytes"),
    case("secret-too-big-string-data", secret(data={"a": b64(b"x" * MIB)},
                                              stringData={"b": "y"}), "data", "Too long"),
    case("tls-no-key", secret(type="kubernetes.io/tls", data={"tls.crt": ""}), "data[tls.key]",
         'needs the key "tls.key"'),
    case("tls-no-cert", secret(type="kubernetes.io/tls", stringData={"tls.key": "k"}),
         "data[tls.crt]", 'needs the key "tls.crt"'),
    case("tls-nothing", secret(type="kubernetes.io/tls"), "data[tls.crt]", "required"),
    case("dockerconfigjson-missing", secret(type="kubernetes.io/dockerconfigjson"),
         "data[.dockerconfigjson]", "required"),
    case("dockerconfigjson-not-json", secret(type="kubernetes.io/dockerconfigjson",
                                             stringData={".dockerconfigjson": "{auths"}),
         "data[.dockerconfigjson]", "<secret contents redacted>: not valid JSON"),
    case("dockerconfigjson-list", secret(type="kubernetes.io/dockerconfigjson",
                                         stringData={".dockerconfigjson": "[1]"}),
         "data[.dockerconfigjson]", "not a JSON object"),
    case("dockerconfigjson-binary", secret(type="kubernetes.io/dockerconfigjson",
                                           data={".dockerconfigjson": b64(b'{"a": "\xff"}')}),
         "data[.dockerconfigjson]", "not UTF-8"),
    case("dockercfg-missing", secret(type="kubernetes.io/dockercfg", data={"x": ""}),
         "data[.dockercfg]", "required"),
    case("dockercfg-string", secret(type="kubernetes.io/dockercfg",
                                    stringData={".dockercfg": '"auth"'}),
         "data[.dockercfg]", "not a JSON object"),
    case("basic-auth-empty", secret(type="kubernetes.io/basic-auth"), "data[username]",
         "required"),
    case("ssh-auth-missing", secret(type="kubernetes.io/ssh-auth"), "data[ssh-privatekey]",
         "required"),
    case("ssh-auth-empty", secret(type="kubernetes.io/ssh-auth", data={"ssh-privatekey": ""}),
         "data[ssh-privatekey]", "required"),
    case("sa-token-no-annotation", secret(type="kubernetes.io/service-account-token"),
         "metadata.annotations[kubernetes.io/service-account.name]", "required"),
    case("secret-type-number", secret(type=1), "type", "a string", fields.FieldTypeError),
    case("secret-annotations-too-big", changed("metadata.annotations", {"a": "x" * SIZE},
                                               secret()),
         "metadata.annotations", f"must have at most {SIZE} bytes"),
    case("secret-unknown-field", secret(binaryData={}), "binaryData", "unknown field",
         fields.UnknownFieldError),
]


# ---------------------------------------------------------------------------------------------
# Volumes (ValidateVolumes, validateVolumeSource and the sources' checks)

CM0 = f"{V0}.configMap"
DA0 = f"{V0}.downwardAPI"
PJ0 = f"{V0}.projected"
TOKEN = {"serviceAccountToken": {"path": "token"}}
WITH_SA = {"serviceAccountName": "default"}


def field_item(field_path: str, **extra: Any) -> dict[str, Any]:
    return {"path": "f", "fieldRef": {"fieldPath": field_path}, **extra}


def resource_item(**ref: Any) -> dict[str, Any]:
    return {"path": "r", "resourceFieldRef": {"containerName": "app", **ref}}


def with_sa(obj: Obj) -> Obj:
    return changed("spec.serviceAccountName", "default", obj)


VOLUMES = [
    case("volume-name-missing", pod_obj(volumes=[{"emptyDir": {}}]), f"{V0}.name", "required"),
    case("volume-name-invalid", pod_obj(volumes=[{"name": "Vol_1", "emptyDir": {}}]),
         f"{V0}.name", "DNS-1123 label"),
    case("volume-name-duplicate", pod_obj(volumes=[{"name": "v", "emptyDir": {}},
                                            {"name": "v", "emptyDir": {}}]),
         "spec.volumes[1].name", "duplicate volume name"),
    case("no-source", vol(), V0, "must specify a volume type"),
    case("null-source", vol(emptyDir=None), V0, "emptyDir: {}"),
    case("two-sources", vol(configMap={"name": "a"}, secret={"secretName": "b"}),
         f"{V0}.configMap", "may not specify more than 1 volume type"),
    case("unsupported-source", vol(nfs={"server": "s", "path": "/"}), f"{V0}.nfs",
         'unsupported volume type "nfs"', fields.UnsupportedError),
    case("unknown-source", vol(emptydir={}), f"{V0}.emptydir", 'did you mean',
         fields.UnknownFieldError),
    case("volumes-mapping", pod_obj(volumes={"v": {}}), "spec.volumes", "a list",
         fields.FieldTypeError),
    case("empty-dir-list", vol(emptyDir=[]), f"{V0}.emptyDir", "a mapping",
         fields.FieldTypeError),
    case("empty-dir-unknown", vol(emptyDir={"size": "1Gi"}), f"{V0}.emptyDir.size",
         'did you mean "spec.volumes[0].emptyDir.sizeLimit"', fields.UnknownFieldError),
    case("empty-dir-medium-type", vol(emptyDir={"medium": True}), f"{V0}.emptyDir.medium",
         "a string", fields.FieldTypeError),
    case("empty-dir-medium-value", vol(emptyDir={"medium": "memory"}),
         f"{V0}.emptyDir.medium", "Memory, HugePages"),
    case("empty-dir-size-bad", vol(emptyDir={"sizeLimit": "1 Gi"}), f"{V0}.emptyDir.sizeLimit",
         "not a quantity"),
    case("empty-dir-size-negative", vol(emptyDir={"sizeLimit": "-1Gi"}),
         f"{V0}.emptyDir.sizeLimit", "SizeLimit field must be a valid resource quantity"),
    case("empty-dir-size-exponent", vol(emptyDir={"sizeLimit": "1e9999999999"}),
         f"{V0}.emptyDir.sizeLimit", "the exponent is out of range"),
    case("host-path-missing", vol(hostPath={}), f"{V0}.hostPath.path", "required"),
    case("host-path-empty", vol(hostPath={"path": ""}), f"{V0}.hostPath.path", "required"),
    case("host-path-backsteps", vol(hostPath={"path": "/var/../etc"}), f"{V0}.hostPath.path",
         "must not contain '..'"),
    case("host-path-trailing-backstep", vol(hostPath={"path": "/var/lib/.."}),
         f"{V0}.hostPath.path", "must not contain '..'"),
    case("host-path-type", vol(hostPath={"path": "/x", "type": "Dir"}), f"{V0}.hostPath.type",
         "DirectoryOrCreate"),
    case("host-path-unknown", vol(hostPath={"path": "/x", "readOnly": True}),
         f"{V0}.hostPath.readOnly", "unknown field", fields.UnknownFieldError),
    case("host-path-number", vol(hostPath={"path": 1}), f"{V0}.hostPath.path", "a string",
         fields.FieldTypeError),
    case("cm-name-missing", vol(configMap={}), f"{CM0}.name", "required"),
    case("cm-unknown", vol(configMap={"name": "c", "secretName": "s"}), f"{CM0}.secretName",
         "unknown field", fields.UnknownFieldError),
    case("cm-default-mode-high", vol(configMap={"name": "c", "defaultMode": 0o1000}),
         f"{CM0}.defaultMode", "must be a number between 0 and 0777 (octal), both inclusive"),
    case("cm-default-mode-negative", vol(configMap={"name": "c", "defaultMode": -1}),
         f"{CM0}.defaultMode", "between 0 and 0777"),
    case("cm-default-mode-string", vol(configMap={"name": "c", "defaultMode": "0644"}),
         f"{CM0}.defaultMode", "an integer", fields.FieldTypeError),
    case("cm-default-mode-int32", vol(configMap={"name": "c", "defaultMode": 2**31}),
         f"{CM0}.defaultMode", "does not fit in an int32", fields.FieldTypeError),
    case("cm-items-mapping", vol(configMap={"name": "c", "items": {"key": "a"}}),
         f"{CM0}.items", "a list", fields.FieldTypeError),
    case("cm-item-backsteps", vol(configMap={"name": "c", "items": [{"key": "a",
                                                                     "path": "../x"}]}),
         f"{CM0}.items[0].path", "must not contain '..'"),
    case("cm-item-absolute", vol(configMap={"name": "c", "items": [{"key": "a",
                                                                    "path": "/etc/x"}]}),
         f"{CM0}.items[0].path", "must be a relative path"),
    case("cm-item-reserved", vol(configMap={"name": "c", "items": [{"key": "a",
                                                                    "path": "..data"}]}),
         f"{CM0}.items[0].path", "must not start with '..'"),
    case("cm-item-no-key", vol(configMap={"name": "c", "items": [{"path": "a"}]}),
         f"{CM0}.items[0].key", "required"),
    case("cm-item-no-path", vol(configMap={"name": "c", "items": [{"key": "a"}]}),
         f"{CM0}.items[0].path", "required"),
    case("cm-item-mode", vol(configMap={"name": "c", "items": [{"key": "a", "path": "a",
                                                                "mode": 0o1777}]}),
         f"{CM0}.items[0].mode", "between 0 and 0777"),
    case("cm-item-unknown", vol(configMap={"name": "c", "items": [{"key": "a", "path": "a",
                                                                   "mod": 1}]}),
         f"{CM0}.items[0].mod", 'did you mean', fields.UnknownFieldError),
    case("cm-optional-string", vol(configMap={"name": "c", "optional": "yes"}),
         f"{CM0}.optional", "a boolean", fields.FieldTypeError),
    case("secret-name-missing", vol(secret={}), f"{V0}.secret.secretName", "required"),
    case("secret-name-key", vol(secret={"name": "s"}), f"{V0}.secret.name",
         "unknown field", fields.UnknownFieldError),
    case("secret-default-mode", vol(secret={"secretName": "s", "defaultMode": 1000}),
         f"{V0}.secret.defaultMode", "between 0 and 0777"),
    case("secret-item-path", vol(secret={"secretName": "s", "items": [{"key": "a",
                                                                       "path": "a/../../b"}]}),
         f"{V0}.secret.items[0].path", "must not contain '..'"),
    case("downward-path-backsteps", vol(downwardAPI={"items": [field_item("metadata.name",
                                                                          path="../x")]}),
         f"{DA0}.path", "items[0]: \"../x\": must not contain '..'"),
    case("downward-path-missing", vol(downwardAPI={"items": [{"fieldRef": {
        "fieldPath": "metadata.name"}}]}), f"{DA0}.path", "items[0]: required"),
    case("downward-no-ref", vol(downwardAPI={"items": [{"path": "x"}]}), DA0,
         "one of fieldRef and resourceFieldRef"),
    case("downward-both-refs", vol(downwardAPI={"items": [{
        "path": "x", "fieldRef": {"fieldPath": "metadata.name"},
        "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu"}}]}), DA0,
        "fieldRef and resourceFieldRef can not be specified simultaneously"),
    case("downward-field-unsupported", vol(downwardAPI={"items": [field_item("spec.nodeName")]}),
         f"{DA0}.fieldRef.fieldPath", 'unsupported value "spec.nodeName"'),
    case("downward-field-unknown", vol(downwardAPI={"items": [field_item("metadata.nme")]}),
         f"{DA0}.fieldRef.fieldPath", "error converting fieldPath"),
    case("downward-field-version", vol(downwardAPI={"items": [{
        "path": "x", "fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}]}),
        f"{DA0}.fieldRef.fieldPath", "unsupported pod version: v2"),
    case("downward-field-subscript", vol(downwardAPI={"items": [field_item(
        "metadata.labels['bad key']")]}), f"{DA0}.fieldRef", "qualified name"),
    case("downward-resource-no-container", vol(downwardAPI={"items": [{
        "path": "r", "resourceFieldRef": {"resource": "limits.cpu"}}]}),
        f"{DA0}.resourceFieldRef.containerName", "required"),
    case("downward-resource-bad", vol(downwardAPI={"items": [resource_item(resource="cpu")]}),
         f"{DA0}.resourceFieldRef.resource", "limits.cpu"),
    case("downward-resource-divisor", vol(downwardAPI={"items": [resource_item(
        resource="limits.cpu", divisor="2")]}), f"{DA0}.resourceFieldRef.divisor",
        "only divisor's values 1m and 1 are supported with the cpu resource"),
    case("downward-resource-memory-divisor", vol(downwardAPI={"items": [resource_item(
        resource="requests.memory", divisor="3Mi")]}), f"{DA0}.resourceFieldRef.divisor",
        "supported with the memory resource"),
    case("downward-item-mode", vol(downwardAPI={"items": [field_item("metadata.name",
                                                                     mode=0o1000)]}),
         f"{DA0}.mode", "items[0]: 512 (01000): must be a number between 0 and 0777"),
    case("downward-default-mode", vol(downwardAPI={"defaultMode": 4096}),
         f"{DA0}.defaultMode", "between 0 and 0777"),
    case("downward-item-unknown", vol(downwardAPI={"items": [field_item("metadata.name",
                                                                        fieldref={})]}),
         f"{DA0}.items[0].fieldref", "unknown field", fields.UnknownFieldError),
    case("downward-field-ref-unknown", vol(downwardAPI={"items": [{
        "path": "x", "fieldRef": {"fieldpath": "metadata.name"}}]}),
        f"{DA0}.items[0].fieldRef.fieldpath", "unknown field", fields.UnknownFieldError),
    case("projected-sources-mapping", vol(projected={"sources": {}}), f"{PJ0}.sources",
         "a list", fields.FieldTypeError),
    case("projected-two-kinds", projected({"configMap": {"name": "c"},
                                           "secret": {"name": "s"}}),
         f"{PJ0}.sources[0]", "may not specify more than 1 volume type per source"),
    case("projected-cm-name", projected({"configMap": {}}), f"{PJ0}.sources[0].configMap.name",
         "required"),
    case("projected-cm-unknown", projected({"configMap": {"name": "c", "defaultMode": 1}}),
         f"{PJ0}.sources[0].configMap.defaultMode", "unknown field", fields.UnknownFieldError),
    case("projected-secret-item", projected({"secret": {"name": "s", "items": [
        {"key": "a", "path": "/abs"}]}}), f"{PJ0}.sources[0].secret.items[0].path",
        "must be a relative path"),
    case("projected-duplicate-paths", projected(
        {"configMap": {"name": "c", "items": [{"key": "a", "path": "x"}]}},
        {"secret": {"name": "s", "items": [{"key": "b", "path": "x"}]}}), PJ0,
        '"x": conflicting duplicate paths'),
    case("projected-duplicate-downward", projected(
        {"downwardAPI": {"items": [field_item("metadata.name", path="n")]}},
        {"configMap": {"name": "c", "items": [{"key": "a", "path": "n"}]}}), PJ0,
        "conflicting duplicate paths"),
    case("projected-default-mode", projected(defaultMode=0o1000), f"{PJ0}.defaultMode",
         "between 0 and 0777"),
    case("projected-downward-path", projected({"downwardAPI": {"items": [field_item(
        "metadata.name", path="..x")]}}), f"{PJ0}.sources[0].downwardAPI.path",
        "must not start with '..'"),
    case("token-short", with_sa(projected({"serviceAccountToken": {
        "path": "t", "expirationSeconds": 599}})),
        f"{PJ0}.sources[0].serviceAccountToken.expirationSeconds",
        "may not specify a duration less than 10 minutes"),
    case("token-long", with_sa(projected({"serviceAccountToken": {
        "path": "t", "expirationSeconds": 2**32 + 1}})),
        f"{PJ0}.sources[0].serviceAccountToken.expirationSeconds",
        "may not specify a duration larger than 2^32 seconds"),
    case("token-no-path", with_sa(projected({"serviceAccountToken": {}})), f"{PJ0}.path",
         "serviceAccountToken: required"),
    case("token-absolute-path", with_sa(projected({"serviceAccountToken": {"path": "/t"}})),
         f"{PJ0}.path", "must be a relative path"),
    case("token-unknown", with_sa(projected({"serviceAccountToken": {"path": "t",
                                                                     "audiences": []}})),
         f"{PJ0}.sources[0].serviceAccountToken.audiences", 'did you mean',
         fields.UnknownFieldError),
    case("token-no-service-account", projected(TOKEN),
         f"{PJ0}.sources[0].serviceAccountToken",
         "must not be specified when serviceAccountName is not set"),
    case("projected-trust-bundle", projected({"clusterTrustBundle": {"name": "b",
                                                                     "path": "b"}}),
         f"{PJ0}.sources[0].clusterTrustBundle", 'unsupported projected source',
         fields.UnsupportedError),
    case("projected-unknown-source", projected({"configmap": {"name": "c"}}),
         f"{PJ0}.sources[0].configmap", 'did you mean', fields.UnknownFieldError),
]


# ---------------------------------------------------------------------------------------------
# Numbers: widths of the v1 integer fields, ranges of ValidatePodSpec

NUMBERS = [
    case("grace-negative", pod_obj(terminationGracePeriodSeconds=-1),
         "spec.terminationGracePeriodSeconds", "at least 0"),
    case("grace-400-zeros", pod_obj(terminationGracePeriodSeconds=10**400),
         "spec.terminationGracePeriodSeconds", "a number of 401 digits does not fit in an int64",
         fields.FieldTypeError),
    case("grace-int64-plus-one", pod_obj(terminationGracePeriodSeconds=2**63),
         "spec.terminationGracePeriodSeconds", "does not fit in an int64", fields.FieldTypeError),
    case("grace-string", pod_obj(terminationGracePeriodSeconds="30"),
         "spec.terminationGracePeriodSeconds", "an integer", fields.FieldTypeError),
    case("grace-float", pod_obj(terminationGracePeriodSeconds=1e400),
         "spec.terminationGracePeriodSeconds", "an integer", fields.FieldTypeError),
    case("deadline-zero", pod_obj(activeDeadlineSeconds=0), "spec.activeDeadlineSeconds",
         "must be between 1 and 2147483647"),
    case("deadline-over-int32", pod_obj(activeDeadlineSeconds=2**31),
         "spec.activeDeadlineSeconds", "must be between 1 and 2147483647"),
    case("deadline-over-int64", pod_obj(activeDeadlineSeconds=-(2**63) - 1),
         "spec.activeDeadlineSeconds", "int64", fields.FieldTypeError),
    case("priority-over-int32", pod_obj(priority=2**31), "spec.priority",
         "does not fit in an int32", fields.FieldTypeError),
    case("run-as-user-over-int64", pod_obj(securityContext={"runAsUser": 2**64}),
         "spec.securityContext.runAsUser", "int64", fields.FieldTypeError),
    case("toleration-seconds-over-int64", pod_obj(tolerations=[{
        "key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2**63}]),
        "spec.tolerations[0].tolerationSeconds", "int64", fields.FieldTypeError),
    case("token-seconds-over-int64", with_sa(projected({"serviceAccountToken": {
        "path": "t", "expirationSeconds": 2**63}})),
        f"{PJ0}.sources[0].serviceAccountToken.expirationSeconds", "int64",
        fields.FieldTypeError),
]


# ---------------------------------------------------------------------------------------------
# dnsConfig (validatePodDNSConfig), hostAliases (ValidateHostAliases)

DNS = "spec.dnsConfig"
LONG_SEARCH = ("a" * 63 + ".") * 3 + "b" * 61  # 253 characters; 8 and 8 spaces: 2032
NONE = {"dnsPolicy": "None"}
DNS_AND_ALIASES = [
    case("policy", pod_obj(dnsPolicy="Cluster"), "spec.dnsPolicy", "ClusterFirst"),
    case("none-without-config", pod_obj(**NONE), DNS, "must provide `dnsConfig`"),
    case("none-without-nameservers", pod_obj(dnsConfig={"searches": ["a"]}, **NONE),
         f"{DNS}.nameservers", "at least one DNS nameserver"),
    case("config-list", pod_obj(dnsConfig=["1.1.1.1"]), DNS, "a mapping", fields.FieldTypeError),
    case("config-unknown", pod_obj(dnsConfig={"nameserver": ["1.1.1.1"]}), f"{DNS}.nameserver",
         f'did you mean "{DNS}.nameservers"', fields.UnknownFieldError),
    case("four-nameservers", pod_obj(dnsConfig={"nameservers": ["1.1.1.1"] * 4}),
         f"{DNS}.nameservers", "must not have more than 3 nameservers"),
    case("nameserver-invalid", pod_obj(dnsConfig={"nameservers": ["1.2.3"]}),
         f"{DNS}.nameservers[0]", "must be a valid IP address"),
    case("nameserver-hostname", pod_obj(dnsConfig={"nameservers": ["dns.example.com"]}),
         f"{DNS}.nameservers[0]", "valid IP address"),
    case("nameserver-zone", pod_obj(dnsConfig={"nameservers": ["fe80::1%eth0"]}),
         f"{DNS}.nameservers[0]", "valid IP address"),
    case("nameserver-number", pod_obj(dnsConfig={"nameservers": [8]}), f"{DNS}.nameservers[0]",
         "a string", fields.FieldTypeError),
    case("nameservers-string", pod_obj(dnsConfig={"nameservers": "1.1.1.1"}),
         f"{DNS}.nameservers", "a list", fields.FieldTypeError),
    case("33-searches", pod_obj(dnsConfig={"searches": [f"s{i}.example" for i in range(33)]}),
         f"{DNS}.searches", "must not have more than 32 search paths"),
    case("33-long-searches", pod_obj(dnsConfig={"searches": ["a" * 60 + ".x"] * 33}),
         f"{DNS}.searches", "32"),
    case("searches-2049-chars", pod_obj(dnsConfig={"searches": [LONG_SEARCH] * 8 + ["c" * 17]}),
         f"{DNS}.searches", "must not have more than 2048 characters (including spaces)"),
    case("search-uppercase", pod_obj(dnsConfig={"searches": ["Example.COM"]}),
         f"{DNS}.searches[0]", "not a valid DNS subdomain"),
    case("search-space", pod_obj(dnsConfig={"searches": ["a b"]}), f"{DNS}.searches[0]",
         "DNS subdomain"),
    case("search-double-dot", pod_obj(dnsConfig={"searches": ["a..b"]}), f"{DNS}.searches[0]",
         "DNS subdomain"),
    case("option-no-name", pod_obj(dnsConfig={"options": [{"value": "2"}]}),
         f"{DNS}.options[0]", "must not be empty"),
    case("option-unknown", pod_obj(dnsConfig={"options": [{"name": "ndots", "val": "2"}]}),
         f"{DNS}.options[0].val", "unknown field", fields.UnknownFieldError),
    case("option-value-number", pod_obj(dnsConfig={"options": [{"name": "ndots", "value": 2}]}),
         f"{DNS}.options[0].value", "quote it", fields.FieldTypeError),
    case("alias-ip-invalid", pod_obj(hostAliases=[{"ip": "300.1.1.1", "hostnames": ["a"]}]),
         "spec.hostAliases[0].ip", "must be a valid IP address"),
    case("alias-ip-missing", pod_obj(hostAliases=[{"hostnames": ["a"]}]),
         "spec.hostAliases[0].ip", "valid IP address"),
    case("alias-hostname", pod_obj(hostAliases=[{"ip": "10.0.0.1", "hostnames": ["A_b"]}]),
         "spec.hostAliases[0].hostnames[0]", "DNS-1123 subdomain"),
    case("alias-unknown", pod_obj(hostAliases=[{"ip": "10.0.0.1", "hostname": ["a"]}]),
         "spec.hostAliases[0].hostname", 'did you mean', fields.UnknownFieldError),
]


# ---------------------------------------------------------------------------------------------
# Other pod-level fields of ValidatePodSpec, and the pod securityContext

SC = "spec.securityContext"
POD_FIELDS = [
    case("hostname", pod_obj(hostname="web.example"), "spec.hostname", "DNS-1123 label"),
    case("subdomain", pod_obj(subdomain="Sub"), "spec.subdomain", "DNS-1123 label"),
    case("service-account", pod_obj(serviceAccountName="My SA"), "spec.serviceAccountName",
         "DNS-1123 subdomain"),
    case("deprecated-service-account", pod_obj(serviceAccount="My_SA"),
         "spec.serviceAccountName", "DNS-1123 subdomain"),
    case("node-name", pod_obj(nodeName="Node_1"), "spec.nodeName", "DNS-1123 subdomain"),
    case("priority-class", pod_obj(priorityClassName="High"), "spec.priorityClassName",
         "DNS-1123 subdomain"),
    case("runtime-class", pod_obj(runtimeClassName="run c"), "spec.runtimeClassName",
         "DNS-1123 subdomain"),
    case("runtime-class-empty", pod_obj(runtimeClassName=""), "spec.runtimeClassName",
         "DNS-1123 subdomain"),
    case("preemption-policy", pod_obj(preemptionPolicy="Always"), "spec.preemptionPolicy",
         "PreemptLowerPriority, Never"),
    case("node-selector-key", pod_obj(nodeSelector={"bad key": "x"}), "spec.nodeSelector",
         "qualified name"),
    case("node-selector-value", pod_obj(nodeSelector={"disk": "fast ssd"}), "spec.nodeSelector",
         '(label "disk") is not a valid label value'),
    case("node-selector-number", pod_obj(nodeSelector={"disk": 1}), "spec.nodeSelector[disk]",
         "a string", fields.FieldTypeError),
    case("readiness-gate", pod_obj(readinessGates=[{"conditionType": "bad gate"}]),
         "spec.readinessGates[0].conditionType", "qualified name"),
    case("readiness-gate-empty", pod_obj(readinessGates=[{}]),
         "spec.readinessGates[0].conditionType", "qualified name"),
    case("readiness-gate-unknown", pod_obj(readinessGates=[{"condition": "a"}]),
         "spec.readinessGates[0].condition", "unknown field", fields.UnknownFieldError),
    case("scheduling-gate-name", pod_obj(schedulingGates=[{"name": "bad gate"}]),
         "spec.schedulingGates[0]", "qualified name"),
    case("scheduling-gate-duplicate", pod_obj(schedulingGates=[{"name": "a"}, {"name": "a"}]),
         "spec.schedulingGates[1]", 'duplicate value "a"'),
    case("toleration-exists-value", pod_obj(tolerations=[{"key": "k", "operator": "Exists",
                                                          "value": "v"}]),
         "spec.tolerations[0].operator", "value must be empty when `operator` is 'Exists'"),
    case("toleration-empty-key", pod_obj(tolerations=[{"operator": "Equal", "value": "v"}]),
         "spec.tolerations[0].operator", "operator must be Exists when `key` is empty"),
    case("toleration-seconds", pod_obj(tolerations=[{"key": "k", "effect": "NoSchedule",
                                                     "tolerationSeconds": 5}]),
         "spec.tolerations[0].effect", "effect must be 'NoExecute'"),
    case("toleration-effect", pod_obj(tolerations=[{"key": "k", "effect": "Never"}]),
         "spec.tolerations[0].effect", "NoSchedule, PreferNoSchedule, NoExecute"),
    case("toleration-operator", pod_obj(tolerations=[{"key": "k", "operator": "In"}]),
         "spec.tolerations[0].operator", "Equal, Exists"),
    case("toleration-key", pod_obj(tolerations=[{"key": "bad key", "operator": "Exists"}]),
         "spec.tolerations[0].key", "qualified name"),
    case("toleration-value", pod_obj(tolerations=[{"key": "k", "value": "a b"}]),
         "spec.tolerations[0].operator", "label value"),
    case("restart-policy", pod_obj(restartPolicy="Sometimes"), "spec.restartPolicy",
         "Always, OnFailure, Never"),
    case("pull-secret-extra", pod_obj(imagePullSecrets=[{"name": "s", "namespace": "x"}]),
         "spec.imagePullSecrets[0].namespace", "unknown field", fields.UnknownFieldError),
    case("host-bool", pod_obj(hostNetwork="true"), "spec.hostNetwork", "a boolean",
         fields.FieldTypeError),
    case("sc-unknown", pod_obj(securityContext={"runAsUsr": 1}), f"{SC}.runAsUsr",
         "did you mean", fields.UnknownFieldError),
    case("sc-run-as-user-negative", pod_obj(securityContext={"runAsUser": -1}),
         f"{SC}.runAsUser", "between 0 and 2147483647"),
    case("sc-run-as-user-int32", pod_obj(securityContext={"runAsUser": 2**31}),
         f"{SC}.runAsUser", "between 0 and 2147483647"),
    case("sc-fs-group-string", pod_obj(securityContext={"fsGroup": "1000"}), f"{SC}.fsGroup",
         "an integer", fields.FieldTypeError),
    case("sc-groups-item", pod_obj(securityContext={"supplementalGroups": [-5]}),
         f"{SC}.supplementalGroups[0]", "between 0"),
    case("sc-sysctl-name", pod_obj(securityContext={"sysctls": [{"name": "Net.IPv4",
                                                                 "value": "1"}]}),
         f"{SC}.sysctls[0].name", "not a valid sysctl name"),
    case("sc-seccomp-localhost", pod_obj(securityContext={"seccompProfile": {
        "type": "Localhost"}}), f"{SC}.seccompProfile.localhostProfile", "required"),
    case("sc-selinux-unknown", pod_obj(securityContext={"seLinuxOptions": {"usr": "u"}}),
         f"{SC}.seLinuxOptions.usr", "unknown field", fields.UnknownFieldError),
    case("sc-sysctl-newline", pod_obj(securityContext={"sysctls": [{"name": "net.core.x\n",
                                                                   "value": "1"}]}),
         f"{SC}.sysctls[0].name", "not a valid sysctl name"),
    case("sc-sysctl-host-network", pod_obj(hostNetwork=True, securityContext={"sysctls": [
        {"name": "net.core.somaxconn", "value": "1"}]}), f"{SC}.sysctls[0].name",
        "may not be specified when 'hostNetwork' is true"),
    case("sc-sysctl-host-ipc", pod_obj(hostIPC=True, securityContext={"sysctls": [
        {"name": "kernel/shm_rmid_forced", "value": "1"}]}), f"{SC}.sysctls[0].name",
        "may not be specified when 'hostIPC' is true"),
    case("sc-apparmor-padded", pod_obj(securityContext={"appArmorProfile": {
        "type": "Localhost", "localhostProfile": " p"}}),
        f"{SC}.appArmorProfile.localhostProfile", "must not be padded with whitespace"),
    case("sc-apparmor-too-long", pod_obj(securityContext={"appArmorProfile": {
        "type": "Localhost", "localhostProfile": "p" * 4096}}),
        f"{SC}.appArmorProfile.localhostProfile", "may not be more than 4095"),
    case("share-pid-and-host-pid", pod_obj(hostPID=True, shareProcessNamespace=True),
         "spec.shareProcessNamespace", "cannot both be enabled"),
]


def _check(obj: Obj, path: str, fragment: str, error: type[fields.ManifestError]) -> None:
    with pytest.raises(fields.ManifestError) as info:
        load(obj)
    assert isinstance(info.value, error), (type(info.value).__name__, str(info.value))
    assert info.value.path == path, str(info.value)
    assert fragment in info.value.message, info.value.message


@pytest.mark.parametrize(("obj", "path", "fragment", "error"), METADATA)
def test_metadata(obj: Obj, path: str, fragment: str, error: type[fields.ManifestError]) -> None:
    _check(obj, path, fragment, error)


@pytest.mark.parametrize(("obj", "path", "fragment", "error"), CONFIG_OBJECTS)
def test_config_objects(
    obj: Obj, path: str, fragment: str, error: type[fields.ManifestError]
) -> None:
    _check(obj, path, fragment, error)


@pytest.mark.parametrize(("obj", "path", "fragment", "error"), VOLUMES)
def test_volumes(obj: Obj, path: str, fragment: str, error: type[fields.ManifestError]) -> None:
    _check(obj, path, fragment, error)


@pytest.mark.parametrize(("obj", "path", "fragment", "error"), NUMBERS)
def test_numbers(obj: Obj, path: str, fragment: str, error: type[fields.ManifestError]) -> None:
    _check(obj, path, fragment, error)


@pytest.mark.parametrize(("obj", "path", "fragment", "error"), DNS_AND_ALIASES)
def test_dns_and_host_aliases(
    obj: Obj, path: str, fragment: str, error: type[fields.ManifestError]
) -> None:
    _check(obj, path, fragment, error)


@pytest.mark.parametrize(("obj", "path", "fragment", "error"), POD_FIELDS)
def test_pod_fields(obj: Obj, path: str, fragment: str, error: type[fields.ManifestError]) -> None:
    _check(obj, path, fragment, error)


# ---------------------------------------------------------------------------------------------
# What the API server accepts is accepted (and stays so for pods it sends)

ACCEPTED = [
    pytest.param(meta(generateName="web-"), id="generate-name-with-name"),
    pytest.param(meta(labels={"example.com/app": "a-b_c.d", "x": "", "A" * 63: "B" * 63}),
                 id="labels-edge"),
    pytest.param(meta(annotations={"Example.COM/Key": "v"}), id="annotation-key-any-case"),
    pytest.param(meta(annotations={"a": "x" * (SIZE - 1)}), id="annotations-exactly-256KiB"),
    pytest.param(meta(finalizers=["kubernetes", "example.com/cleanup", "foregroundDeletion"]),
                 id="finalizers"),
    pytest.param(meta(ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": "r", "uid": "u", "controller": True,
                                        "blockOwnerDeletion": True}]), id="owner-reference"),
    pytest.param(meta(generation=0, deletionGracePeriodSeconds=0), id="zero-counters"),
    pytest.param(meta(annotations={"controller.kubernetes.io/pod-deletion-cost": "-2147483648",
                                   "seccomp.security.alpha.kubernetes.io/pod": "localhost/a/b",
                                   "container.apparmor.security.beta.kubernetes.io/app":
                                       "localhost/p"}), id="pod-annotations"),
    pytest.param(pod_obj(terminationGracePeriodSeconds=INT64_MAX), id="grace-int64-max"),
    pytest.param(pod_obj(terminationGracePeriodSeconds=0), id="grace-zero"),
    pytest.param(pod_obj(activeDeadlineSeconds=INT32_MAX), id="deadline-int32-max"),
    pytest.param(pod_obj(priority=-(2**31)), id="priority-int32-min"),
    pytest.param(vol(configMap={"name": "c", "defaultMode": 0o777, "items": [
        {"key": "a", "path": "a/b..c", "mode": 0}]}), id="modes-edge"),
    pytest.param(vol(hostPath={"path": "/var/..lib", "type": ""}), id="host-path-dots-in-name"),
    pytest.param(vol(hostPath={"path": "relative/dir"}), id="host-path-relative"),
    pytest.param(vol(emptyDir={"medium": "HugePages-2Mi"}), id="medium-hugepages-size"),
    pytest.param(vol(emptyDir={"sizeLimit": "1e30"}), id="size-limit-huge"),
    pytest.param(vol(downwardAPI={"items": [
        field_item("metadata.annotations['Example.com/X']"),
        {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu",
                                             "divisor": "1m"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app",
                                             "resource": "requests.memory", "divisor": "1Mi"}},
    ]}), id="downward-items"),
    pytest.param(with_sa(projected(
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}},
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 2**32}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt",
                                                             "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [field_item("metadata.namespace", path="namespace")]}},
        {}, defaultMode=0o644)), id="kube-api-access"),
    pytest.param(pod_obj(dnsConfig={"nameservers": ["1.1.1.1", "2001:db8::1", "010.0.0.1"],
                                    "searches": [f"s{i}.example" for i in range(32)],
                                    "options": [{"name": "ndots", "value": "2"},
                                                {"name": "edns0"}]},
                         dnsPolicy="None"), id="dns-limits"),
    pytest.param(pod_obj(dnsConfig={"searches": ["_sip._tcp.example.com", ".", "example.com."]}),
                 id="dns-relaxed-searches"),
    pytest.param(pod_obj(dnsConfig={"searches": [LONG_SEARCH] * 8 + ["c" * 16]}),
                 id="dns-search-2048-chars"),
    pytest.param(pod_obj(tolerations=[{"operator": "Exists"},
                                      {"key": "k", "value": "v", "effect": "NoExecute",
                                       "tolerationSeconds": -1}]), id="tolerations"),
    pytest.param(pod_obj(schedulingGates=[{"name": "example.com/wait"}],
                         preemptionPolicy="Never", priorityClassName="high",
                         runtimeClassName="runc", nodeSelector={"disk": "ssd", "empty": ""}),
                 id="scheduling-fields"),
    pytest.param(pod_obj(securityContext={"sysctls": [{"name": "kernel.shm_rmid_forced"}]}),
                 id="sysctl-without-value"),
    pytest.param(pod_obj(hostNetwork=True, securityContext={"sysctls": [
        {"name": "kernel.shm_rmid_forced", "value": "1"}]}), id="sysctl-ipc-with-host-network"),
    pytest.param(config_map(data={"a": "x" * (MIB - 1)}, binaryData={"b": b64(b"y")}),
                 id="config-map-exactly-1MiB"),
    pytest.param(config_map(data={"-_.": "x", "a..b": "y"}), id="config-map-keys"),
    pytest.param(secret(data={"a": b64(b"x" * (MIB - 1))}, stringData={"b": "y"}),
                 id="secret-exactly-1MiB"),
    pytest.param(secret(data={"wrapped": "aGVsbG8g\nd29ybGQ=\r\n"}), id="base64-wrapped"),
    pytest.param(secret(type="kubernetes.io/tls", data={"tls.crt": "", "tls.key": ""}),
                 id="tls-empty-values"),
    pytest.param(secret(type="kubernetes.io/basic-auth", stringData={"password": ""}),
                 id="basic-auth-password-only"),
    pytest.param(secret(type="kubernetes.io/dockerconfigjson",
                        stringData={".dockerconfigjson": "null"}), id="dockerconfigjson-null"),
    pytest.param(changed("metadata.annotations",
                         {"kubernetes.io/service-account.name": "default"},
                         secret(type="kubernetes.io/service-account-token")),
                 id="service-account-token"),
    pytest.param(secret(type="example.com/custom"), id="custom-type"),
]


@pytest.mark.parametrize("obj", ACCEPTED)
@pytest.mark.parametrize("strict", [True, False])
def test_accepted(obj: Obj, strict: bool) -> None:
    loaded = load(changed("metadata.uid", "u-1", obj), strict=strict)
    if isinstance(loaded, pods.Pod):
        _derive(loaded)


def _derive(pod: pods.Pod) -> None:
    """What the workers compute from an accepted pod, which must not raise."""
    node_dns = dns.NodeDNS(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local",
                           host=runtime.DNSConfig(servers=("9.9.9.9",)))
    sandbox = specs.sandbox_config(pod, attempt=0, logs_root=Path("/var/log/pods"),
                                   dns=dns.pod_dns(pod, node_dns).config)
    assert sandbox.uid == pod.uid
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        config = specs.container_config(pod, container, attempt=0, kind="regular")
        grace = config.annotations[specs.ANNOTATION_GRACE_PERIOD]
        assert int(grace) == pod.spec.termination_grace_period_seconds
    for volume in pod.spec.volumes:
        if volume.source_type == "emptyDir":
            volumes.tmpfs_size(volume.source)


def test_int64_max_grace_period_is_kept() -> None:
    pod = load(pod_obj(terminationGracePeriodSeconds=INT64_MAX))
    assert pod.spec.termination_grace_period_seconds == INT64_MAX


def test_what_nodelet_cannot_run_fails_later_for_api_pods() -> None:
    """Valid for the API server, refused in a static manifest; a pod the API server sent is
    taken, and the volume fails when it is set up (FailedMount, as in the kubelet)."""
    for obj in (vol(downwardAPI={"items": [resource_item(resource="limits.hugepages-2Mi")]}),
                projected({"clusterTrustBundle": {"signerName": "example.com/s", "path": "b"}})):
        with pytest.raises(fields.ManifestError):
            load(obj)
        load(changed("metadata.uid", "u", obj), strict=False)


def test_negative_grace_from_the_api_server_is_one_second() -> None:
    """The API server takes it with a warning: "will be treated as 1"."""
    pod = load(changed("metadata.uid", "u", pod_obj(terminationGracePeriodSeconds=-5)),
               strict=False)
    assert pod.spec.termination_grace_period_seconds == 1


@pytest.mark.parametrize(
    ("text", "filename"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  terminationGracePeriodSeconds: 1"
         + "0" * 400 + "\n  containers: [{name: c, image: busybox}]\n", "pod.yaml"),
        ('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {'
         '"terminationGracePeriodSeconds": 1' + "0" * 400 + ', "containers": '
         '[{"name": "c", "image": "busybox"}]}}', "pod.json"),
    ],
    ids=["yaml", "json"],
)
def test_400_zeros_are_refused_from_the_file(text: str, filename: str) -> None:
    [document] = manifests.parse_documents(text, filename=filename)
    assert isinstance(document, manifests.ParsedDocument)
    with pytest.raises(fields.FieldTypeError) as info:
        load(dict(document.obj))
    assert info.value.path == "spec.terminationGracePeriodSeconds"
    assert "401 digits" in info.value.message and "0" * 50 not in str(info.value)


@pytest.mark.parametrize(
    ("size_limit", "expected"),
    [("1e30", INT64_MAX), ("8Ei", INT64_MAX), ("1e2147483647", INT64_MAX), ("64Mi", 64 * 2**20),
     ("1e-999999999", 1), ("0", None)],
)
def test_tmpfs_size_saturates_at_int64(size_limit: str, expected: int | None) -> None:
    """A sizeLimit the API server accepts never becomes an integer the runtime cannot take;
    a tiny one is 1n, rounded up to a byte (as Quantity.Value does)."""
    pod = load(vol(emptyDir={"medium": "Memory", "sizeLimit": size_limit}))
    assert volumes.tmpfs_size(pod.spec.volumes[0].source) == expected


@pytest.mark.parametrize(
    ("resources", "shares", "quota"),
    [
        (pods.Resources(cpu_request_milli=10**15, cpu_limit_milli=10**15), 262_144, 2**44 - 1),
        (pods.Resources(cpu_request_milli=1, cpu_limit_milli=1), 2, 1_000),
        (pods.Resources(cpu_request_milli=500, cpu_limit_milli=500), 512, 50_000),
        (pods.Resources(memory_limit=INT64_MAX), 2, 0),
    ],
)
def test_linux_resources_stay_within_the_kernel_bounds(
    resources: pods.Resources, shares: int, quota: int
) -> None:
    """The kubelet's MinShares/MaxShares and MinQuotaPeriod; the kernel's largest quota."""
    out = specs.linux_resources(resources)
    assert out is not None
    assert (out.cpu_shares, out.cpu_quota) == (shares, quota)
    assert all(-(2**63) <= v <= INT64_MAX for v in (out.cpu_period, out.memory_limit_in_bytes))


# ---------------------------------------------------------------------------------------------
# A Secret's value never reaches a message


SECRET_VALUE = "s3cr3t-Value!"


@pytest.mark.parametrize(
    "obj",
    [
        secret(data={"password": SECRET_VALUE}),
        secret(data={"password": 12345678}),
        secret(stringData={"password": 12345678}),
        secret(data={"password": [SECRET_VALUE]}),
        secret(type="kubernetes.io/dockerconfigjson",
               stringData={".dockerconfigjson": SECRET_VALUE}),
        secret(type="kubernetes.io/dockercfg",
               data={".dockercfg": b64(SECRET_VALUE.encode() + b"\xff")}),
    ],
    ids=["bad-base64", "number", "string-data-number", "list", "not-json", "not-utf8"],
)
def test_no_message_shows_a_secret_value(obj: Obj) -> None:
    with pytest.raises(fields.ManifestError) as info:
        load(obj)
    shown = [str(info.value), repr(info.value)]
    cause = info.value.__cause__ or info.value.__context__
    while cause is not None:
        shown.append(str(cause))
        cause = cause.__cause__ or (None if info.value.__suppress_context__ else cause.__context__)
    for text in shown:
        assert SECRET_VALUE not in text and "12345678" not in text, text


def test_messages_do_not_repeat_huge_values() -> None:
    """A bad value of any size is shown shortened (the log gets no megabytes)."""
    with pytest.raises(fields.ManifestError) as info:
        load(vol(emptyDir={"sizeLimit": "1x" + "0" * 100_000}))
    assert len(str(info.value)) < 400


def test_dns_config_reaches_the_sandbox() -> None:
    pod = load(pod_obj(dnsPolicy="None", dnsConfig={
        "nameservers": ["1.1.1.1"], "searches": ["example.com."], "options": [
            {"name": "ndots", "value": "2"}]}))
    node = dns.NodeDNS(host=runtime.DNSConfig(servers=("9.9.9.9",)))
    assert dns.pod_dns(pod, node).config == runtime.DNSConfig(
        servers=("1.1.1.1",), searches=("example.com.",), options=("ndots:2",))


def test_rule_tables_name_every_case_once() -> None:
    every = [*METADATA, *CONFIG_OBJECTS, *VOLUMES, *NUMBERS, *DNS_AND_ALIASES, *POD_FIELDS]
    ids = [p.id for p in every]
    assert len(ids) == len(set(ids))
