"""Fuzzing manifests (hypothesis): no input crashes the parser, and no accepted pod crashes what a
pod worker later does with it.

1. Parsing (`parse_documents`, `pod_from_object` strict and not, `load_object`) raises nothing but
   `ManifestError`, whatever the object: random JSON-like trees, and mutations of valid pods and
   config objects (wrong types, huge and negative numbers, strange strings, deeper nesting).
2. For every pod that is accepted, the pure functions its worker applies run without raising
   anything but their documented errors (envvars.ConfigError, volumes.SourceError,
   probes.ProbeError for a port name a container lacks), the status, JSON and tables that serve
   it are built, and every number bound for CRI fits its int32/int64 field (protobuf raises
   ValueError when a value does not).

Profiles: `nodelet-ci` (the default, a few seconds) and `nodelet-long` (minutes, for a hunt):
`NODELET_FUZZ_PROFILE=nodelet-long pytest tests/model/test_fuzz_manifests.py`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodelet import settings as nodelet_settings
from nodelet.model.core import (
    admission,
    dns,
    downward,
    envvars,
    etchosts,
    generation,
    handlers,
    podjson,
    pods,
    probes,
    resources,
    runtime,
    security,
    specs,
)
from nodelet.model.core import volumes as vol
from nodelet.model.parsing import apifields, manifests
from nodelet.model.reports import presenting

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
NODE = "node-1"
NOW = datetime(2025, 1, 1, tzinfo=UTC)

_COMMON = settings(
    deadline=None,
    database=None,  # no .hypothesis directory in the tree; failures print a reproducer
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)
settings.register_profile("nodelet-ci", _COMMON, max_examples=150)
settings.register_profile("nodelet-long", _COMMON, max_examples=5000)
FUZZ = settings.get_profile(os.environ.get("NODELET_FUZZ_PROFILE", "nodelet-ci"))


# ---------------------------------------------------------------------------------------------
# Valid objects to start from


def _full_container(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox:1.36",
        "command": ["sh", "-c", "echo $(GREETING); sleep 3600"],
        "args": ["-x"],
        "workingDir": "/work",
        "ports": [{"name": "http", "containerPort": 8080, "hostPort": 18080, "protocol": "TCP",
                   "hostIP": "127.0.0.1"}, {"containerPort": 53, "protocol": "UDP"}],
        "env": [
            {"name": "GREETING", "value": "hello $(POD_NAME)"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.labels['app']"}}},
            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                               "divisor": "1m"}}},
            {"name": "STORAGE", "valueFrom": {"resourceFieldRef": {
                "resource": "requests.ephemeral-storage", "divisor": "1Mi"}}},
            {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k",
                                                             "optional": True}}},
            {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k",
                                                              "optional": True}}},
        ],
        "envFrom": [{"prefix": "CM_", "configMapRef": {"name": "cm", "optional": True}},
                    {"secretRef": {"name": "s", "optional": True}}],
        "volumeMounts": [
            {"name": "scratch", "mountPath": "/scratch", "subPathExpr": "$(POD_NAME)"},
            {"name": "host", "mountPath": "/host", "readOnly": True,
             "mountPropagation": "HostToContainer"},
            {"name": "config", "mountPath": "/config"},
            {"name": "info", "mountPath": "/info", "subPath": "labels"},
            {"name": "all", "mountPath": "/all"},
        ],
        "resources": {
            "requests": {"cpu": "250m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
            "limits": {"cpu": "1", "memory": "128Mi", "ephemeral-storage": "2Gi",
                       "example.com/gpu": 1, "hugepages-2Mi": "4Mi"},
        },
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http",
                                      "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
                          "initialDelaySeconds": 3, "periodSeconds": 10, "timeoutSeconds": 2,
                          "failureThreshold": 3, "terminationGracePeriodSeconds": 10},
        "readinessProbe": {"tcpSocket": {"port": 8080}, "successThreshold": 2},
        "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
        "lifecycle": {"postStart": {"exec": {"command": ["true"]}},
                      "preStop": {"sleep": {"seconds": 5}}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "stdin": True, "stdinOnce": True, "tty": False,
    }


FULL_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                 "annotations": {"example.com/note": "x"}},
    "spec": {
        "initContainers": [
            {"name": "setup", "image": "busybox", "command": ["true"]},
            {**_full_container("sidecar"), "restartPolicy": "Always",
             "ports": [{"containerPort": 9090}]},
        ],
        "containers": [_full_container("app"), {"name": "other", "image": "busybox@sha256:" +
                                                "a" * 64}],
        "volumes": [
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
            {"name": "config", "configMap": {
                "name": "cm", "optional": True, "defaultMode": 0o640,
                "items": [{"key": "k", "path": "a/k", "mode": 0o600}]}},
            {"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "app",
                                                     "resource": "limits.memory"}}]}},
            {"name": "all", "projected": {"sources": [
                {"secret": {"name": "s", "optional": True}},
                {"configMap": {"name": "cm", "optional": True}},
                {"downwardAPI": {"items": [{"path": "name",
                                            "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
        ],
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 45,
        "activeDeadlineSeconds": 3600,
        "dnsPolicy": "None",
        "dnsConfig": {"nameservers": ["10.0.0.10"], "searches": ["svc.local"],
                      "options": [{"name": "ndots", "value": "2"}]},
        "hostname": "web-0",
        "subdomain": "web",
        "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["db.local"]}],
        "readinessGates": [{"conditionType": "example.com/lb"}],
        "imagePullSecrets": [{"name": "registry"}],
        "securityContext": {"fsGroup": 2000, "supplementalGroups": [3000],
                            "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "os": {"name": "linux"},
    },
}
SMALL_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "small"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}
CONFIG_MAP: dict[str, Any] = {
    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"},
    "data": {"k": "v", "a.conf": "x=1\n"}, "binaryData": {"b": "AAEC"},
}
SECRET: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
    "type": "kubernetes.io/tls",
    "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}, "stringData": {"extra": "v"},
}
TEMPLATES = (FULL_POD, SMALL_POD, CONFIG_MAP, SECRET)


def test_templates_are_valid() -> None:
    for obj in TEMPLATES:
        manifests.load_object(copy.deepcopy(obj), node_name=NODE)


# ---------------------------------------------------------------------------------------------
# Strategies


def _api_field_names() -> list[str]:
    names = {str(v) for value in vars(apifields).values() if isinstance(value, frozenset)
             for v in value}
    return sorted(names | {"exec", "httpGet", "tcpSocket", "grpc", "sleep", "seconds", "port",
                           "command", "periodSeconds", "postStart", "preStop", "fieldPath",
                           "resource", "divisor", "configMapKeyRef", "items", "key", "path"})


# What the loaders hand over: JSON values with string keys (the YAML loader turns number and
# boolean keys into their JSON text, as sigs.k8s.io/yaml does) and integers of at most 4300
# digits (both loaders refuse longer ones), plus what explicit YAML tags make: bytes (!!binary)
# and dates (!!timestamp).
KEYS = st.one_of(st.sampled_from(_api_field_names()), st.text(max_size=8))
STRANGE_STRINGS = st.sampled_from([
    "", " ", "a b", " busybox", "busybox\n", "..", "../x", "a/../../b", "/etc", "a" * 300,
    "\x00", "\u202e", "Ä", "=", "$(X)", "$$(X)", "$(", "1e30", "-1", "1e999999", "9Ei", "1E",
    "0.000000001", "1m", "1n", "+1", ".5", "1.", "hugepages-2Mi", "example.com/gpu", "Always",
    "Never", "None", "TCP", "UDP", "http", "1234", "v1", "metadata.name", "metadata.labels['x']",
    "limits.cpu", "requests.memory", "null", "true", "yes", "0o777", "0x10", "1_000", "\t",
    "a\nb", "${X}", "%", "\\", "'", '"', "{}", "[]", "*", "ALL", "SIGKILL", "Localhost",
])
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2, 15, 65535, 65536, 2**31 - 1, 2**31, 2**63 - 1, 2**63,
                     -(2**63) - 1, 10**30, 10**400, -(10**400), 10**4299]),
    st.floats(allow_nan=True, allow_infinity=True),
)
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=20), STRANGE_STRINGS,
                   st.binary(max_size=8), st.dates(),
                   st.datetimes())
TREES = st.recursive(
    LEAVES,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(KEYS, children, max_size=4)),
    max_leaves=24,
)


def _slots(obj: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key or index) of a JSON-like tree."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield obj, key
            yield from _slots(value)
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield obj, index
            yield from _slots(value)


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value] if depth % 2 else {"x": value}
    return value


@st.composite
def mutated(draw: st.DrawFn, template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of a template with 1-5 random changes: a value replaced (by a random tree, a
    strange string, a number, a deeply nested value), removed, or a key added."""
    obj = copy.deepcopy(template if template is not None else draw(st.sampled_from(TEMPLATES)))
    for _ in range(draw(st.integers(1, 5))):
        slots = list(_slots(obj))
        if not slots:  # everything removed
            break
        parent, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "remove", "add", "nest"]))
        if action == "remove":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(KEYS)] = draw(TREES)
        elif action == "nest":
            parent[key] = _nest(parent[key], draw(st.integers(1, 60)))
        else:
            parent[key] = draw(TREES)
    return obj


# Random but valid values, so that accepted pods are many and varied.
DNS_LABELS = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
QUANTITIES = st.builds(
    lambda digits, fraction, suffix: f"{digits}{fraction}{suffix}",
    st.integers(0, 10**20), st.sampled_from(["", ".5", ".001", ".000000001"]),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ei", "e3", "e18", "e30", "n"]),
)


@st.composite
def valid_pods(draw: st.DrawFn) -> dict[str, Any]:
    """FULL_POD with random valid numbers, quantities and names, then maybe a few mutations."""
    obj = copy.deepcopy(FULL_POD)
    spec = obj["spec"]
    grace = draw(st.one_of(st.integers(0, 2**63 - 1), st.sampled_from([0, 1, 2**63 - 1])))
    spec["terminationGracePeriodSeconds"] = grace
    spec["activeDeadlineSeconds"] = draw(st.integers(1, 2**31 - 1))
    for container in spec["containers"][:1] + spec["initContainers"][1:]:
        container["name"] = f'{draw(DNS_LABELS)}-{container["name"]}'  # unique
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        for name in ("memory", "ephemeral-storage"):
            limits[name] = requests[name] = draw(QUANTITIES)
            if draw(st.booleans()):
                del requests[name]  # defaulted to the limit
        requests["cpu"] = limits["cpu"] = draw(
            st.sampled_from(["1", "0", "92233720368547.758", "0.001", "1n", "1e-9"]))
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            for key in ("initialDelaySeconds", "periodSeconds", "timeoutSeconds",
                        "failureThreshold"):
                container[probe][key] = draw(st.integers(0, 2**31 - 1))
        container["lifecycle"]["preStop"]["sleep"]["seconds"] = draw(st.integers(0, grace))
        container["ports"][0]["hostPort"] = draw(st.integers(0, 65535))
    if draw(st.booleans()):
        obj = draw(mutated(obj))
    return obj


# ---------------------------------------------------------------------------------------------
# Property 1: parsing raises nothing but ManifestError


def _parse(obj: Any, *, strict: bool) -> pods.Pod | manifests.ConfigMap | manifests.Secret | None:
    try:
        return manifests.load_object(obj, node_name=NODE, strict=strict,
                                     source="file" if strict else "api")
    except manifests.ManifestError:
        return None


HUGE_PORT = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {containers: [{name: app, image: busybox, ports: [{containerPort: 0x%s}]}]}
""" % ("f" * 4000)
MIXED_KEYS = """\
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {1: one, true: 'yes', app: web}}
spec: {containers: [{name: app, image: busybox}]}
"""


def test_yaml_integers_beyond_4300_digits_are_refused_with_their_line() -> None:
    (problem,) = manifests.parse_documents(HUGE_PORT, filename="web.yaml")
    assert isinstance(problem, manifests.ManifestProblem)
    assert problem.line == 4
    assert "integer out of range: more than 4300 digits" in problem.message


def test_yaml_number_and_boolean_keys_become_their_json_text() -> None:
    (document,) = manifests.parse_documents(MIXED_KEYS, filename="web.yaml")
    assert isinstance(document, manifests.ParsedDocument)
    pod = manifests.pod_from_object(document.obj, node_name=NODE)
    assert pod.labels == {"1": "one", "true": "yes", "app": "web"}


@FUZZ
@given(TREES)
def test_random_trees_are_refused_cleanly(obj: Any) -> None:
    if isinstance(obj, dict):
        _parse(obj, strict=True)
        _parse({**obj, "apiVersion": "v1", "kind": "Pod"}, strict=False)


@FUZZ
@given(mutated())
def test_mutated_objects_are_refused_cleanly_or_run(obj: dict[str, Any]) -> None:
    for strict in (True, False):
        found = _parse(copy.deepcopy(obj), strict=strict)
        if isinstance(found, pods.Pod):
            exercise(found)


@FUZZ
@given(valid_pods())
def test_valid_pods_run(obj: dict[str, Any]) -> None:
    found = _parse(obj, strict=True)
    if isinstance(found, pods.Pod):
        exercise(found)


@FUZZ
@given(mutated(), st.sampled_from(["yaml", "json"]), st.data())
def test_documents_never_raise(obj: dict[str, Any], form: str, data: st.DataObject) -> None:
    text = json.dumps(obj, default=str) if form == "json" else yaml.safe_dump(obj)
    if text and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(text) - 1))
        text = text[:at] + data.draw(st.text(max_size=5)) + text[at + 1:]
    for found in manifests.parse_documents(text, filename=f"pod.{form}"):
        if isinstance(found, manifests.ParsedDocument):
            _parse(dict(found.obj), strict=True)


# ---------------------------------------------------------------------------------------------
# Property 2: what a worker does with an accepted pod


def _in(value: int, bounds: tuple[int, int], what: str) -> None:
    assert bounds[0] <= value <= bounds[1], f"{what} = {value} does not fit {bounds}"


def _lookup(kind: str, namespace: str, name: str) -> None:
    return None


def _check_cri(config: runtime.ContainerConfig) -> None:
    if config.resources is not None:
        for name, value in dataclasses.asdict(config.resources).items():
            if isinstance(value, int):
                _in(value, INT64, f"resources.{name}")
    security_ = config.security
    if security_ is not None:
        for name in ("run_as_user", "run_as_group"):
            value = getattr(security_, name)
            if value is not None:
                _in(value, INT64, name)
        for gid in security_.supplemental_groups:
            _in(gid, INT64, "supplemental group")


def _container(pod: pods.Pod, container: pods.Container, facts: downward.PodFacts) -> None:
    try:
        environment = envvars.resolve(container, lookup=_lookup, facts=facts)
        for mount in container.volume_mounts:
            envvars.sub_path(mount, environment.mapping)
    except envvars.ConfigError:
        environment = envvars.Environment()
    context = security.container_security(pod, container, security.ROOT, security.Options())
    security.run_as_non_root_error(pod, container, security.ROOT)
    config = specs.container_config(pod, container, attempt=0, kind="regular",
                                    security=context, envs=environment.variables)
    _check_cri(config)
    parsed = probes.container_probes(container)
    found: list[handlers.Handler | handlers.Hook] = [
        p.handler for p in (parsed.startup, parsed.liveness, parsed.readiness) if p
    ]
    found += [h for kind in handlers.HOOK_KINDS
              if (h := container.lifecycle.hook(kind)) is not None]
    for handler in found:
        if isinstance(handler, handlers.HTTPGetAction | handlers.TCPSocketAction):
            try:
                port = probes.resolve_port(handler.port, container)
            except probes.ProbeError:
                continue
            if isinstance(handler, handlers.HTTPGetAction):
                probes.http_url(handler, pod_ip="10.0.0.1", port=port)


def _volumes(pod: pods.Pod, facts: downward.PodFacts) -> None:
    for volume in pod.spec.volumes:
        try:
            if volume.source_type == "hostPath":
                vol.host_path(volume.source)
            elif volume.source_type == "emptyDir":
                vol.empty_dir_medium(volume.source)
                size = vol.tmpfs_size(volume.source)
                _in(size or 0, INT64, "tmpfs size")
            else:
                vol.content_payload(volume, _lookup, facts)
        except vol.SourceError:
            pass
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        for mount in container.volume_mounts:
            vol.mount_propagation(mount.mount_propagation)


def _served(pod: pods.Pod) -> None:
    status = generation.generate_status(
        pod, sandboxes=(), containers=(), old=None, last_sandbox_error=None, waiting={},
        host_ip="10.0.0.1", now=NOW, gates=nodelet_settings.FeatureGates(),
    )
    listed = podjson.pod_list_to_api([(pod, status), (pod, None)], precise=True)
    json.dumps(listed)  # what the HTTP API sends
    presenting.pods_table(listed, NOW, all_namespaces=True)
    presenting.describe_pod(listed["items"][0], {"items": []}, NOW)


def exercise(pod: pods.Pod) -> None:
    """Everything a worker and the API do with an accepted pod, without I/O."""
    node = downward.Node(name=NODE, host_ips=("10.0.0.1",), cpu_milli=2000, memory=2**33)
    facts = downward.pod_facts(pod, node, ["10.244.0.5"])
    admission.admit(pod, admission.Node(labels={"kubernetes.io/os": "linux"}, name=NODE))
    resources.qos_class(pod)
    sandbox = specs.sandbox_config(pod, attempt=1, logs_root=Path("/var/log/pods"),
                                   dns=dns.pod_dns(pod, dns.NodeDNS()).config,
                                   cgroup_parent=specs.pod_cgroup_parent(pod))
    for mapping in sandbox.port_mappings:
        _in(mapping.container_port, INT32, "container port")
        _in(mapping.host_port, INT32, "host port")
    security.sandbox_security(pod)
    etchosts.content(pod, ["10.244.0.5"], node_hosts="127.0.0.1 localhost\n",
                     cluster_domain="cluster.local")
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        _container(pod, container, facts)
    _volumes(pod, facts)
    # Grace periods up to int64 reach CRI clamped by the client: tests/runtime/test_cri_timeouts.py
    _served(pod)


def test_the_full_template_is_exercised() -> None:
    pod = manifests.pod_from_object(copy.deepcopy(FULL_POD), node_name=NODE)
    exercise(pod)
    assert [c.name for c in pod.spec.containers] == ["app", "other"]
