"""Container environments as values: `$(VAR)` expansion, env valueFrom sources, envFrom, the
kubelet's errors, subPathExpr, and the API server's checks of the env fields of a manifest."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from nodelet.model.core import downward, envvars, pods
from nodelet.model.core import volumes as vol
from nodelet.model.parsing import manifests

CM = manifests.ConfigMap(
    "cfg", "default", data={"host": "db", "port": "5432", "1bad": "x", "ok.name": "y"},
    binary_data={"blob": b"\x00"},
)
SECRET = manifests.Secret("creds", "default", data={"user": b"admin", "pass": b"s3cret"})
OBJECTS: Mapping[tuple[str, str, str], vol.ConfigObject] = {
    ("ConfigMap", "default", "cfg"): CM,
    ("Secret", "default", "creds"): SECRET,
}


def lookup(kind: str, namespace: str, name: str) -> vol.ConfigObject | None:
    return OBJECTS.get((kind, namespace, name))


APP = pods.Container(
    name="app", image="busybox",
    resources=pods.Resources(cpu_request_milli=250, cpu_limit_milli=500,
                             memory_request=32 * 2**20, memory_limit=64 * 2**20),
)
SIDE = pods.Container(name="side", image="busybox")
POD = pods.Pod(
    uid=pods.PodUID("uid-1"), name="web", namespace="default",
    spec=pods.PodSpec(containers=(APP, SIDE), node_name="node-1"),
    labels={"app": "web"}, annotations={"team": "blue"},
    raw={"spec": {"serviceAccountName": "robot", "containers": [
        {"name": "app", "resources": {"limits": {"ephemeral-storage": "2Gi"}}}]}},
)
NODE = downward.Node(name="node-1", host_ips=("192.168.1.2",), cpu_milli=4000,
                     memory=8 * 2**30, ephemeral_storage=100 * 2**30)
FACTS = downward.pod_facts(POD, NODE, ("10.0.0.7", "fd00::7"))


def resolve(
    *env: pods.EnvVar, env_from: tuple[pods.EnvFromSource, ...] = (),
    container: pods.Container = APP,
) -> envvars.Environment:
    spec = pods.Container(name=container.name, image="busybox", env=env, env_from=env_from,
                          resources=container.resources)
    return envvars.resolve(spec, lookup=lookup, facts=FACTS)


def value_from(name: str, **source: Any) -> pods.EnvVar:
    return pods.EnvVar(name, value_from=source)


# -- $(VAR) expansion -------------------------------------------------------------------------

VARS = {"A": "alpha", "EMPTY": "", "B": "$(A)"}


@pytest.mark.parametrize(("text", "expanded"), [
    ("$(A)", "alpha"),
    ("x-$(A)-y", "x-alpha-y"),
    ("$(A)$(A)", "alphaalpha"),
    ("$$(A)", "$(A)"),  # escaped
    ("$$$(A)", "$alpha"),
    ("$$", "$"),
    ("$(UNKNOWN)", "$(UNKNOWN)"),  # unknown references stay as written
    ("$(EMPTY)!", "!"),  # known but empty
    ("$(B)", "$(A)"),  # values are not expanded again
    ("$(A", "$(A"),  # unclosed
    ("$A", "$A"),  # not a reference
    ("trailing $", "trailing $"),
    ("$()", "$()"),
    ("$($(A))", "$($(A))"),  # the name runs to the first ")"
    ("no refs", "no refs"),
    ("", ""),
])
def test_expand(text: str, expanded: str) -> None:
    assert envvars.expand_from(text, VARS) == expanded


def test_command_and_args_are_expanded() -> None:
    container = pods.Container(name="c", image="i", command=("sh", "-c", "echo $(A) $$(A)"),
                               args=("$(MISSING)", "$(EMPTY)"))
    assert envvars.command_and_args(container, VARS) == (
        ("sh", "-c", "echo alpha $(A)"), ("$(MISSING)", ""))


# -- env ----------------------------------------------------------------------------------------

ENV_CASES: list[tuple[str, pods.EnvVar, str | None]] = [
    ("literal", pods.EnvVar("X", "plain"), "plain"),
    ("empty literal", pods.EnvVar("X"), ""),
    ("configMapKeyRef", value_from("X", configMapKeyRef={"name": "cfg", "key": "host"}), "db"),
    ("configMapKeyRef reads data only",
     value_from("X", configMapKeyRef={"name": "cfg", "key": "blob", "optional": True}), None),
    ("secretKeyRef", value_from("X", secretKeyRef={"name": "creds", "key": "pass"}), "s3cret"),
    ("optional missing object",
     value_from("X", configMapKeyRef={"name": "nope", "key": "k", "optional": True}), None),
    ("optional missing key",
     value_from("X", secretKeyRef={"name": "creds", "key": "nope", "optional": True}), None),
    ("metadata.name", value_from("X", fieldRef={"fieldPath": "metadata.name"}), "web"),
    ("metadata.namespace", value_from("X", fieldRef={"fieldPath": "metadata.namespace"}),
     "default"),
    ("metadata.uid", value_from("X", fieldRef={"fieldPath": "metadata.uid"}), "uid-1"),
    ("label", value_from("X", fieldRef={"fieldPath": "metadata.labels['app']"}), "web"),
    ("absent label", value_from("X", fieldRef={"fieldPath": "metadata.labels['no']"}), ""),
    ("annotation", value_from("X", fieldRef={"apiVersion": "v1",
                                             "fieldPath": "metadata.annotations['team']"}), "blue"),
    ("spec.nodeName", value_from("X", fieldRef={"fieldPath": "spec.nodeName"}), "node-1"),
    ("spec.host is spec.nodeName", value_from("X", fieldRef={"fieldPath": "spec.host"}),
     "node-1"),
    ("spec.serviceAccountName",
     value_from("X", fieldRef={"fieldPath": "spec.serviceAccountName"}), "robot"),
    ("status.podIP", value_from("X", fieldRef={"fieldPath": "status.podIP"}), "10.0.0.7"),
    ("status.podIPs", value_from("X", fieldRef={"fieldPath": "status.podIPs"}),
     "10.0.0.7,fd00::7"),
    ("status.hostIP", value_from("X", fieldRef={"fieldPath": "status.hostIP"}), "192.168.1.2"),
    ("status.hostIPs", value_from("X", fieldRef={"fieldPath": "status.hostIPs"}),
     "192.168.1.2"),
    ("own limits.cpu in millicores",
     value_from("X", resourceFieldRef={"resource": "limits.cpu", "divisor": "1m"}), "500"),
    ("own limits.cpu rounded up", value_from("X", resourceFieldRef={"resource": "limits.cpu"}),
     "1"),
    ("own requests.memory in Mi",
     value_from("X", resourceFieldRef={"resource": "requests.memory", "divisor": "1Mi"}), "32"),
    ("own ephemeral-storage limit",
     value_from("X", resourceFieldRef={"resource": "limits.ephemeral-storage",
                                       "divisor": "1Gi"}), "2"),
    ("ephemeral-storage request defaults to the limit",
     value_from("X", resourceFieldRef={"resource": "requests.ephemeral-storage"}),
     str(2 * 2**30)),
    ("another container's unset limit is the node's",
     value_from("X", resourceFieldRef={"containerName": "side", "resource": "limits.memory",
                                       "divisor": "1Gi"}), "8"),
    ("unset cpu limit is the node's",
     value_from("X", resourceFieldRef={"containerName": "side", "resource": "limits.cpu"}), "4"),
    ("unset ephemeral-storage limit is the node's",
     value_from("X", resourceFieldRef={"containerName": "side",
                                       "resource": "limits.ephemeral-storage",
                                       "divisor": "1Gi"}), "100"),
    ("unset request is 0",
     value_from("X", resourceFieldRef={"containerName": "side", "resource": "requests.cpu"}),
     "0"),
]


@pytest.mark.parametrize(("var", "expected"), [(v, e) for _, v, e in ENV_CASES],
                         ids=[case[0] for case in ENV_CASES])
def test_env_value(var: pods.EnvVar, expected: str | None) -> None:
    """Each source gives the kubelet's value; an optional miss leaves the variable out."""
    assert resolve(var).mapping.get("X") == expected


def test_hostnetwork_pod_ips_are_the_nodes() -> None:
    pod = pods.Pod(uid=pods.PodUID("u"), name="h", namespace="default",
                   spec=pods.PodSpec(containers=(APP,), host_network=True))
    facts = downward.pod_facts(pod, NODE, ())
    assert downward.field_value("status.podIPs", facts) == "192.168.1.2"


def test_env_values_expand_earlier_variables_only() -> None:
    env = resolve(
        pods.EnvVar("LATER_REF", "$(B)"),
        pods.EnvVar("A", "a"),
        pods.EnvVar("B", "$(A)-b"),
        pods.EnvVar("C", "$(B)/$(HOST)/$$(A)"),
        value_from("FROM", configMapKeyRef={"name": "cfg", "key": "port"}),
        pods.EnvVar("D", "$(FROM)"),
        env_from=(pods.EnvFromSource("ConfigMap", "cfg", prefix="CM_"),),
    )
    values = env.mapping
    assert values["LATER_REF"] == "$(B)"
    assert values["B"] == "a-b"
    assert values["C"] == "a-b/$(HOST)/$(A)"
    assert values["D"] == "5432"


def test_value_from_is_not_expanded() -> None:
    objects = {("ConfigMap", "default", "m"): manifests.ConfigMap("m", "default",
                                                                   data={"k": "$(A)"})}
    container = pods.Container(name="app", image="i", env=(
        pods.EnvVar("A", "a"), value_from("V", configMapKeyRef={"name": "m", "key": "k"})))
    env = envvars.resolve(container, lookup=lambda k, ns, n: objects.get((k, ns, n)),
                          facts=FACTS)
    assert env.mapping["V"] == "$(A)"


# -- envFrom ------------------------------------------------------------------------------------


def test_env_from_prefix_and_invalid_keys() -> None:
    env = resolve(env_from=(
        pods.EnvFromSource("ConfigMap", "cfg"),
        pods.EnvFromSource("Secret", "creds", prefix="DB_"),
    ))
    assert env.mapping == {"host": "db", "ok.name": "y", "port": "5432",
                           "DB_pass": "s3cret", "DB_user": "admin"}
    assert env.skipped == (envvars.SkippedKeys("configMap", "default", "cfg", ("1bad",)),)
    assert env.skipped[0].message == (
        "Keys [1bad] from the EnvFrom configMap default/cfg were skipped since they are "
        "considered invalid environment variable names.")


def test_skipped_keys_message_lists_sorted_keys() -> None:
    objects = {("Secret", "default", "s"): manifests.Secret(
        "s", "default", data={"9z": b"", "..x": b"", "1a": b"", "fine": b"", "nl\n": b""})}
    container = pods.Container(name="app", image="i",
                               env_from=(pods.EnvFromSource("Secret", "s"),))
    env = envvars.resolve(container, lookup=lambda k, ns, n: objects.get((k, ns, n)),
                          facts=FACTS)
    assert env.mapping == {"fine": ""}
    assert env.skipped[0].message == (
        "Keys [..x, 1a, 9z, nl\n] from the EnvFrom secret default/s were skipped since they are "
        "considered invalid environment variable names.")


def test_prefix_can_make_a_key_valid() -> None:
    env = resolve(env_from=(pods.EnvFromSource("ConfigMap", "cfg", prefix="p_"),))
    assert env.mapping["p_1bad"] == "x"
    assert env.skipped == ()


def test_override_order() -> None:
    """env overrides envFrom whatever the order; later envFrom sources and env entries win."""
    env = resolve(
        pods.EnvVar("host", "from-env"),
        pods.EnvVar("DB_user", "first"),
        pods.EnvVar("DB_user", "second"),
        env_from=(
            pods.EnvFromSource("ConfigMap", "cfg"),
            pods.EnvFromSource("Secret", "creds", prefix="DB_"),
            pods.EnvFromSource("ConfigMap", "cfg", prefix="DB_"),
        ),
    )
    values = env.mapping
    assert (values["host"], values["DB_user"], values["DB_host"]) == ("from-env", "second", "db")
    assert len(env.variables) == len(values), "each name once"


def test_optional_missing_env_from_is_skipped() -> None:
    env = resolve(env_from=(pods.EnvFromSource("Secret", "nope", optional=True),))
    assert env == envvars.Environment()


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("var", "env_from", "message"), [
    (value_from("X", configMapKeyRef={"name": "x", "key": "k"}), (), 'configmap "x" not found'),
    (value_from("X", configMapKeyRef={"name": "cfg", "key": "k"}), (),
     "couldn't find key k in ConfigMap default/cfg"),
    (value_from("X", secretKeyRef={"name": "x", "key": "k"}), (), 'secret "x" not found'),
    (value_from("X", secretKeyRef={"name": "creds", "key": "k"}), (),
     "couldn't find key k in Secret default/creds"),
    (None, (pods.EnvFromSource("ConfigMap", "x"),), 'configmap "x" not found'),
    (None, (pods.EnvFromSource("Secret", "x", prefix="P_"),), 'secret "x" not found'),
    (value_from("X", resourceFieldRef={"containerName": "ghost", "resource": "limits.cpu"}), (),
     'resourceFieldRef: container "ghost" not found in the pod'),
    (value_from("X", fieldRef={"apiVersion": "v2", "fieldPath": "metadata.name"}), (),
     "unsupported pod version: v2"),
])
def test_errors(
    var: pods.EnvVar | None, env_from: tuple[pods.EnvFromSource, ...], message: str
) -> None:
    with pytest.raises(envvars.ConfigError) as caught:
        resolve(*([var] if var else []), env_from=env_from)
    assert caught.value.message == message


def test_a_secret_is_not_a_config_map() -> None:
    """Names are per kind: a Secret called "cfg" does not answer a configMapKeyRef."""
    with pytest.raises(envvars.ConfigError, match='configmap "creds" not found'):
        resolve(value_from("X", configMapKeyRef={"name": "creds", "key": "user"}))


# -- subPathExpr --------------------------------------------------------------------------------


@pytest.mark.parametrize(("sub_path", "expr", "result"), [
    ("", "", ""),
    ("plain/dir", "", "plain/dir"),
    ("", "$(POD)", "web"),
    ("", "logs/$(POD)/$$(POD)", "logs/web/$(POD)"),
    ("", "$(POD)/$(NS)", "web/default"),
])
def test_sub_path(sub_path: str, expr: str, result: str) -> None:
    mount = pods.VolumeMount("v", "/m", sub_path=sub_path, sub_path_expr=expr)
    assert envvars.sub_path(mount, {"POD": "web", "NS": "default"}) == result


@pytest.mark.parametrize(("expr", "message"), [
    ("$(NOPE)", "missing value for NOPE"),
    ("$(EMPTY)/$(B)/$(A)", "missing value for B, EMPTY"),
    ("/$(POD)", "error SubPath `/web` must not be an absolute path"),
    ("$(UP)/x", "unable to provision SubPath `../x`: must not contain '..'"),
])
def test_sub_path_errors(expr: str, message: str) -> None:
    mount = pods.VolumeMount("v", "/m", sub_path_expr=expr)
    with pytest.raises(envvars.ConfigError) as caught:
        envvars.sub_path(mount, {"POD": "web", "EMPTY": "", "A": "a", "UP": ".."})
    assert caught.value.message == message


# -- referenced objects -------------------------------------------------------------------------


def test_referenced_objects() -> None:
    init = pods.Container(name="init", image="i", env=(
        value_from("A", secretKeyRef={"name": "s1", "key": "k"}),
        value_from("B", fieldRef={"fieldPath": "metadata.name"}),
    ))
    app = pods.Container(name="app", image="i", env=(
        value_from("C", configMapKeyRef={"name": "c1", "key": "k"}),),
        env_from=(pods.EnvFromSource("Secret", "s2"), pods.EnvFromSource("ConfigMap", "c2")))
    pod = pods.Pod(uid=pods.PodUID("u"), name="p", namespace="ns",
                   spec=pods.PodSpec(containers=(app,), init_containers=(init,)))
    assert envvars.referenced_objects(pod) == {
        ("Secret", "ns", "s1"), ("ConfigMap", "ns", "c1"), ("Secret", "ns", "s2"),
        ("ConfigMap", "ns", "c2"),
    }


# -- manifest validation ------------------------------------------------------------------------

C0 = "spec.containers[0]"


def pod_with(**container_extra: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "busybox", **container_extra}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [container], "volumes": [{"name": "v", "emptyDir": {}}]}}


def parse(**container_extra: Any) -> pods.Container:
    obj = pod_with(**container_extra)
    return manifests.pod_from_object(copy.deepcopy(obj), node_name="n").spec.containers[0]


def test_parsed_env_from_and_sub_path_expr() -> None:
    container = parse(
        envFrom=[{"configMapRef": {"name": "cfg"}, "prefix": "CM_"},
                 {"secretRef": {"name": "creds", "optional": True}}],
        volumeMounts=[{"name": "v", "mountPath": "/m", "subPathExpr": "$(POD)"}],
        env=[{"name": "1 odd name.ok", "value": "x"},
             {"name": "R", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                              "divisor": "1Mi"}}}],
    )
    assert container.env_from == (pods.EnvFromSource("ConfigMap", "cfg", prefix="CM_"),
                                  pods.EnvFromSource("Secret", "creds", optional=True))
    assert container.volume_mounts[0].sub_path_expr == "$(POD)"
    assert container.env[0].name == "1 odd name.ok"


VF = f"{C0}.env[0].valueFrom"


def env_with(value_from: Any, value: str = "") -> dict[str, Any]:
    item: dict[str, Any] = {"name": "X", "valueFrom": value_from}
    if value:
        item["value"] = value
    return {"env": [item]}


@pytest.mark.parametrize(("extra", "path", "message"), [
    ({"env": [{"name": "A=B", "value": "x"}]}, f"{C0}.env[0].name",
     '"A=B" is not a valid environment variable name: use only printable ASCII characters '
     'other than "="'),
    ({"env": [{"name": "TAB\there"}]}, f"{C0}.env[0].name",
     '"TAB\\there" is not a valid environment variable name'),
    ({"env": [{"name": "caf\u00e9"}]}, f"{C0}.env[0].name", "not a valid environment variable"),
    (env_with({}), VF,
     "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or "
     "`fileKeyRef`"),
    (env_with({"fieldRef": {"fieldPath": "metadata.name"},
               "secretKeyRef": {"name": "s", "key": "k"}}), VF,
     "may not have more than one field specified at a time"),
    (env_with({"fieldRef": {"fieldPath": "metadata.name"}}, value="x"), VF,
     "may not be specified when `value` is not empty"),
    (env_with({"configMapKeyRef": {"key": "k"}}), f"{VF}.configMapKeyRef.name", "required"),
    (env_with({"configMapKeyRef": {"name": "Bad_Name", "key": "k"}}),
     f"{VF}.configMapKeyRef.name", "not a valid DNS-1123 subdomain"),
    (env_with({"secretKeyRef": {"name": "s"}}), f"{VF}.secretKeyRef.key", "required"),
    (env_with({"secretKeyRef": {"name": "s", "key": "a/b"}}), f"{VF}.secretKeyRef.key",
     '"a/b" is not a valid key'),
    (env_with({"secretKeyRef": {"name": "s", "key": "k", "optional": "yes"}}),
     f"{VF}.secretKeyRef.optional", "expected a boolean"),
    (env_with({"configMapKeyRef": {"name": "c", "key": "k", "extra": 1}}),
     f"{VF}.configMapKeyRef.extra", "unknown field"),
    (env_with({"fieldRef": {}}), f"{VF}.fieldRef.fieldPath", "required"),
    (env_with({"fieldRef": {"fieldPath": "status.phase"}}), f"{VF}.fieldRef.fieldPath",
     'unsupported value "status.phase": must be one of metadata.name'),
    (env_with({"fieldRef": {"fieldPath": "metadata.labels"}}), f"{VF}.fieldRef.fieldPath",
     'unsupported value "metadata.labels"'),
    (env_with({"fieldRef": {"fieldPath": "spec.containers"}}), f"{VF}.fieldRef.fieldPath",
     "error converting fieldPath: field label not supported: spec.containers"),
    (env_with({"fieldRef": {"fieldPath": "metadata.name['x']"}}), f"{VF}.fieldRef.fieldPath",
     "error converting fieldPath: field label does not support subscript: metadata.name['x']"),
    (env_with({"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}),
     f"{VF}.fieldRef.fieldPath", "error converting fieldPath: unsupported pod version: v2"),
    (env_with({"fieldRef": {"fieldPath": "metadata.labels['bad key']"}}), f"{VF}.fieldRef",
     "not a valid qualified name"),
    (env_with({"resourceFieldRef": {"divisor": "1m"}}), f"{VF}.resourceFieldRef.resource",
     "required"),
    (env_with({"resourceFieldRef": {"resource": "limits.hugepages-2Mi"}}),
     f"{VF}.resourceFieldRef.resource", 'unsupported value "limits.hugepages-2Mi"'),
    (env_with({"resourceFieldRef": {"resource": "limits.cpu", "divisor": "2"}}),
     f"{VF}.resourceFieldRef.divisor",
     "only divisor's values 1m and 1 are supported with the cpu resource"),
    (env_with({"resourceFieldRef": {"resource": "requests.memory", "divisor": "1m"}}),
     f"{VF}.resourceFieldRef.divisor", "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, "
     "1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource"),
    (env_with({"resourceFieldRef": {"resource": "limits.ephemeral-storage", "divisor": "3"}}),
     f"{VF}.resourceFieldRef.divisor", "supported with the local ephemeral storage resource"),
    (env_with({"fileKeyRef": {"path": "a", "volumeName": "v"}}), f"{VF}.fileKeyRef.key",
     "required"),
    ({"envFrom": [{}]}, f"{C0}.envFrom[0]", "must specify one of: `configMapRef` or `secretRef`"),
    ({"envFrom": [{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}]},
     f"{C0}.envFrom[0]", "may not have more than one field specified at a time"),
    ({"envFrom": [{"configMapRef": {}}]}, f"{C0}.envFrom[0].configMapRef.name", "required"),
    ({"envFrom": [{"secretRef": {"name": "UPPER"}}]}, f"{C0}.envFrom[0].secretRef.name",
     "not a valid DNS-1123 subdomain"),
    ({"envFrom": [{"configMapRef": {"name": "a"}, "prefix": "P="}]},
     f"{C0}.envFrom[0].prefix", "not a valid environment variable name"),
    ({"envFrom": [{"configMapRef": {"name": "a"}, "prefx": "P_"}]},
     f"{C0}.envFrom[0].prefx", 'did you mean "spec.containers[0].envFrom[0].prefix"'),
    ({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "a",
                        "subPathExpr": "$(B)"}]},
     f"{C0}.volumeMounts[0].subPathExpr", "subPathExpr and subPath are mutually exclusive"),
    ({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPathExpr": "/$(B)"}]},
     f"{C0}.volumeMounts[0].subPathExpr", '"/$(B)": must be a relative path'),
    ({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPathExpr": "$(B)/../x"}]},
     f"{C0}.volumeMounts[0].subPathExpr", "\"$(B)/../x\": must not contain '..'"),
    ({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "../x"}]},
     f"{C0}.volumeMounts[0].subPath", "must not contain '..'"),
])
def test_manifest_validation(extra: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(manifests.ManifestError) as caught:
        parse(**extra)
    assert caught.value.path == path
    assert message in caught.value.message


def test_divisors_the_api_server_allows() -> None:
    for resource, divisor in (("limits.cpu", "1m"), ("requests.cpu", "1"),
                              ("limits.memory", "1Gi"), ("requests.memory", "1k"),
                              ("limits.ephemeral-storage", "1M"), ("limits.cpu", "0")):
        parse(**env_with({"resourceFieldRef": {"resource": resource, "divisor": divisor}}))
