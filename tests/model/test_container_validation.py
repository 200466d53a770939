"""Container validation against kube-apiserver's rules (pkg/apis/core/validation:
validateContainers, validateInitContainers, validateContainerCommon and what they call).

Each rejected case is (manifest mutation -> field path, fragment of the message): the path is
where kube-apiserver reports the problem, with three deliberate differences where the API server
names a list instead of the item in it (nodelet names the item): `envFrom[i]` for an entry
without or with two sources, `volumeMounts[i].subPath`/`subPathExpr`, and the fields of
`resizePolicy[i]`. Rules that are nodelet's own (the CRI's int64 limits, whitespace inside an
image) say so in their case ids.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodelet.model.core import pods
from nodelet.model.parsing import manifests

NODE = "node-1"
C0 = "spec.containers[0]"
C1 = "spec.containers[1]"
I0 = "spec.initContainers[0]"
EXEC = {"exec": {"command": ["true"]}}
SIDE = {"restartPolicy": "Always"}
RULE_42 = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (),
        **spec: Any) -> dict[str, Any]:
    """A pod with `containers` (default: one busybox "app"), a volume "data" and `spec`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {
            "containers": list(containers) or [ctr()],
            **({"initContainers": list(init)} if init else {}),
            "volumes": [{"name": "data", "emptyDir": {}}],
            **spec,
        },
    }


def ctr(name: str = "app", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", **fields}


def c(**fields: Any) -> dict[str, Any]:
    """The pod with container 0 changed: a field set to None is removed."""
    container = {k: v for k, v in ctr(**fields).items() if v is not None}
    return pod(container)


def init(**fields: Any) -> dict[str, Any]:
    return pod(init=(ctr("setup", **fields),))


def env(*entries: dict[str, Any]) -> dict[str, Any]:
    return c(env=list(entries))


def value_from(source: dict[str, Any]) -> dict[str, Any]:
    return env({"name": "X", "valueFrom": source})


def mounts(*entries: dict[str, Any]) -> dict[str, Any]:
    return c(volumeMounts=list(entries))


def res(**fields: Any) -> dict[str, Any]:
    return c(resources=fields)


def ports(*entries: dict[str, Any]) -> dict[str, Any]:
    return c(ports=list(entries))


def with_spec(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj["spec"].update(spec)
    return obj


def hook(kind: str, handler: Any, **spec: Any) -> dict[str, Any]:
    return with_spec(c(lifecycle={kind: handler}), **spec)


def parse(obj: dict[str, Any]) -> pods.Pod:
    return manifests.pod_from_object(copy.deepcopy(obj), node_name=NODE)


# (id, manifest, path, fragment of the message)
REJECTED: list[tuple[str, dict[str, Any], str, str]] = [
    # -- name ---------------------------------------------------------------------------------
    ("name-upper", c(name="App"), f"{C0}.name", "not a valid DNS-1123 label"),
    ("name-empty", c(name=""), f"{C0}.name", "required"),
    ("name-long", c(name="a" * 64), f"{C0}.name", "at most 63"),
    ("name-newline", c(name="app\n"), f"{C0}.name", "not a valid DNS-1123 label"),
    ("name-duplicate", pod(ctr(), ctr()), f"{C1}.name", "duplicate container name"),
    ("name-duplicate-init", pod(ctr(), init=(ctr(),)), f"{I0}.name", "duplicate container name"),
    # -- image --------------------------------------------------------------------------------
    ("image-missing", c(image=None), f"{C0}.image", "required"),
    ("image-empty", c(image=""), f"{C0}.image", "required"),
    ("image-type", c(image=3), f"{C0}.image", "expected a string"),
    ("image-leading-space", c(image=" busybox"), f"{C0}.image",
     "must not have leading or trailing whitespace"),
    ("image-trailing-newline", c(image="busybox\n"), f"{C0}.image",
     "must not have leading or trailing whitespace"),
    ("image-nbsp", c(image="busybox\u00a0"), f"{C0}.image",
     "must not have leading or trailing whitespace"),
    ("nodelet-image-inner-space", c(image="busy box"), f"{C0}.image",
     "must not contain whitespace"),
    ("image-pull-policy", c(imagePullPolicy="Sometimes"), f"{C0}.imagePullPolicy",
     'unsupported value "Sometimes"'),
    # -- ports --------------------------------------------------------------------------------
    ("port-missing", ports({"name": "http"}), f"{C0}.ports[0].containerPort", "required"),
    ("port-zero", ports({"containerPort": 0}), f"{C0}.ports[0].containerPort", "required"),
    ("port-high", ports({"containerPort": 65536}), f"{C0}.ports[0].containerPort",
     "between 1 and 65535"),
    ("port-negative", ports({"containerPort": -1}), f"{C0}.ports[0].containerPort",
     "between 1 and 65535"),
    ("port-string", ports({"containerPort": "80"}), f"{C0}.ports[0].containerPort",
     "expected an integer"),
    ("port-float", ports({"containerPort": 80.0}), f"{C0}.ports[0].containerPort",
     "expected an integer"),
    ("port-bool", ports({"containerPort": True}), f"{C0}.ports[0].containerPort",
     "expected an integer"),
    ("host-port-high", ports({"containerPort": 80, "hostPort": 65536}),
     f"{C0}.ports[0].hostPort", "between 0 and 65535"),
    ("host-port-negative", ports({"containerPort": 80, "hostPort": -1}),
     f"{C0}.ports[0].hostPort", "between 0 and 65535"),
    ("protocol", ports({"containerPort": 80, "protocol": "HTTP"}), f"{C0}.ports[0].protocol",
     "TCP, UDP, SCTP"),
    ("protocol-lowercase", ports({"containerPort": 80, "protocol": "tcp"}),
     f"{C0}.ports[0].protocol", 'unsupported value "tcp"'),
    ("port-name-digits", ports({"containerPort": 80, "name": "1234"}), f"{C0}.ports[0].name",
     "must contain at least one letter (a-z)"),
    ("port-name-long", ports({"containerPort": 80, "name": "a" * 16}), f"{C0}.ports[0].name",
     "must be no more than 15 characters"),
    ("port-name-upper", ports({"containerPort": 80, "name": "Http"}), f"{C0}.ports[0].name",
     "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"),
    ("port-name-double-dash", ports({"containerPort": 80, "name": "a--b"}),
     f"{C0}.ports[0].name", "must not contain consecutive hyphens"),
    ("port-name-dash", ports({"containerPort": 80, "name": "-ab"}), f"{C0}.ports[0].name",
     "must not begin or end with a hyphen"),
    ("port-name-duplicate", ports({"containerPort": 80, "name": "http"},
                                  {"containerPort": 81, "name": "http"}),
     f"{C0}.ports[1].name", 'Duplicate value: "http"'),
    ("port-unknown-field", ports({"containerPort": 80, "hostport": 80}),
     f"{C0}.ports[0].hostport", 'did you mean "spec.containers[0].ports[0].hostPort"'),
    ("host-port-conflict", pod(ctr(ports=[{"containerPort": 80, "hostPort": 8080}]),
                               ctr("b", ports=[{"containerPort": 81, "hostPort": 8080}])),
     f"{C1}.ports[0].hostPort", 'Duplicate value: "TCP//8080"'),
    ("host-port-conflict-in-init", init(ports=[{"containerPort": 80, "hostPort": 53,
                                                "protocol": "UDP"},
                                               {"containerPort": 81, "hostPort": 53,
                                                "protocol": "UDP"}]),
     f"{I0}.ports[1].hostPort", 'Duplicate value: "UDP//53"'),
    ("host-port-conflict-host-network", with_spec(
        pod(ctr(ports=[{"containerPort": 80}]), ctr("b", ports=[{"containerPort": 80}])),
        hostNetwork=True), f"{C1}.ports[0].hostPort", 'Duplicate value: "TCP//80"'),
    # -- env ----------------------------------------------------------------------------------
    ("env-name-missing", env({"value": "x"}), f"{C0}.env[0].name", "required"),
    ("env-name-equals", env({"name": "A=B"}), f"{C0}.env[0].name",
     'printable ASCII characters other than "="'),
    ("env-name-control", env({"name": "A\x01"}), f"{C0}.env[0].name",
     "not a valid environment variable name"),
    ("env-name-newline", env({"name": "A\n"}), f"{C0}.env[0].name",
     "not a valid environment variable name"),
    ("env-name-non-ascii", env({"name": "GRÜN"}), f"{C0}.env[0].name",
     "not a valid environment variable name"),
    ("env-value-type", env({"name": "A", "value": 1}), f"{C0}.env[0].value", "quote it"),
    ("value-from-no-source", value_from({}), f"{C0}.env[0].valueFrom",
     "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or "
     "`fileKeyRef`"),
    ("value-from-two-sources", value_from({
        "configMapKeyRef": {"name": "cm", "key": "k"},
        "secretKeyRef": {"name": "s", "key": "k"}}),
     f"{C0}.env[0].valueFrom", "may not have more than one field specified at a time"),
    ("value-and-value-from", env({"name": "X", "value": "v",
                                  "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
     f"{C0}.env[0].valueFrom", "may not be specified when `value` is not empty"),
    ("field-path-missing", value_from({"fieldRef": {}}),
     f"{C0}.env[0].valueFrom.fieldRef.fieldPath", "required"),
    ("field-path-unknown", value_from({"fieldRef": {"fieldPath": "metadata.nope"}}),
     f"{C0}.env[0].valueFrom.fieldRef.fieldPath", "error converting fieldPath"),
    ("field-path-api-version", value_from({"fieldRef": {"apiVersion": "v2",
                                                        "fieldPath": "metadata.name"}}),
     f"{C0}.env[0].valueFrom.fieldRef.fieldPath", "error converting fieldPath"),
    ("field-path-not-for-env", value_from({"fieldRef": {"fieldPath": "spec.restartPolicy"}}),
     f"{C0}.env[0].valueFrom.fieldRef.fieldPath", 'unsupported value "spec.restartPolicy"'),
    ("field-path-label-key", value_from({"fieldRef": {
        "fieldPath": "metadata.labels['bad key']"}}),
     f"{C0}.env[0].valueFrom.fieldRef", "not a valid qualified name"),
    ("field-ref-unknown-field", value_from({"fieldRef": {"fieldPath": "metadata.name",
                                                         "path": "x"}}),
     f"{C0}.env[0].valueFrom.fieldRef.path", "unknown field"),
    ("resource-ref-missing", value_from({"resourceFieldRef": {}}),
     f"{C0}.env[0].valueFrom.resourceFieldRef.resource", "required"),
    ("resource-ref-unknown", value_from({"resourceFieldRef": {"resource": "limits.gpu"}}),
     f"{C0}.env[0].valueFrom.resourceFieldRef.resource", 'unsupported value "limits.gpu"'),
    ("divisor-cpu", value_from({"resourceFieldRef": {"resource": "limits.cpu",
                                                     "divisor": "2"}}),
     f"{C0}.env[0].valueFrom.resourceFieldRef.divisor",
     "only divisor's values 1m and 1 are supported with the cpu resource"),
    ("divisor-memory", value_from({"resourceFieldRef": {"resource": "requests.memory",
                                                        "divisor": "3Mi"}}),
     f"{C0}.env[0].valueFrom.resourceFieldRef.divisor", "supported with the memory resource"),
    ("divisor-storage", value_from({"resourceFieldRef": {
        "resource": "limits.ephemeral-storage", "divisor": "1m"}}),
     f"{C0}.env[0].valueFrom.resourceFieldRef.divisor",
     "supported with the local ephemeral storage resource"),
    ("divisor-malformed", value_from({"resourceFieldRef": {"resource": "limits.cpu",
                                                           "divisor": "lots"}}),
     f"{C0}.env[0].valueFrom.resourceFieldRef.divisor", "not a quantity"),
    ("config-map-key-ref-name", value_from({"configMapKeyRef": {"name": "Bad_Name",
                                                                "key": "k"}}),
     f"{C0}.env[0].valueFrom.configMapKeyRef.name", "not a valid DNS-1123 subdomain"),
    ("config-map-key-ref-key", value_from({"configMapKeyRef": {"name": "cm"}}),
     f"{C0}.env[0].valueFrom.configMapKeyRef.key", "required"),
    ("secret-key-ref-key", value_from({"secretKeyRef": {"name": "s", "key": "a/b"}}),
     f"{C0}.env[0].valueFrom.secretKeyRef.key", "not a valid key"),
    ("secret-key-ref-optional", value_from({"secretKeyRef": {"name": "s", "key": "k",
                                                             "optional": "yes"}}),
     f"{C0}.env[0].valueFrom.secretKeyRef.optional", "a boolean"),
    ("value-from-type", env({"name": "X", "valueFrom": "metadata.name"}),
     f"{C0}.env[0].valueFrom", "expected a mapping"),
    ("env-from-no-source", c(envFrom=[{"prefix": "P_"}]), f"{C0}.envFrom[0]",
     "must specify one of: `configMapRef` or `secretRef`"),
    ("env-from-two-sources", c(envFrom=[{"configMapRef": {"name": "a"},
                                         "secretRef": {"name": "b"}}]),
     f"{C0}.envFrom[0]", "may not have more than one field specified at a time"),
    ("env-from-prefix", c(envFrom=[{"prefix": "A=", "configMapRef": {"name": "a"}}]),
     f"{C0}.envFrom[0].prefix", "not a valid environment variable name"),
    ("env-from-name-missing", c(envFrom=[{"configMapRef": {}}]),
     f"{C0}.envFrom[0].configMapRef.name", "required"),
    ("env-from-name-invalid", c(envFrom=[{"secretRef": {"name": "A"}}]),
     f"{C0}.envFrom[0].secretRef.name", "not a valid DNS-1123 subdomain"),
    # -- volumeMounts -------------------------------------------------------------------------
    ("mount-name-missing", mounts({"mountPath": "/d"}), f"{C0}.volumeMounts[0].name",
     "required"),
    ("mount-name-undeclared", mounts({"name": "nope", "mountPath": "/d"}),
     f"{C0}.volumeMounts[0].name", 'volume "nope" is not declared'),
    ("mount-path-missing", mounts({"name": "data"}), f"{C0}.volumeMounts[0].mountPath",
     "required"),
    ("mount-path-duplicate", mounts({"name": "data", "mountPath": "/d"},
                                    {"name": "data", "mountPath": "/d", "subPath": "x"}),
     f"{C0}.volumeMounts[1].mountPath", "must be unique"),
    ("sub-path-backstep", mounts({"name": "data", "mountPath": "/d", "subPath": "../x"}),
     f"{C0}.volumeMounts[0].subPath", "must not contain '..'"),
    ("sub-path-inner-backstep", mounts({"name": "data", "mountPath": "/d",
                                        "subPath": "a/../../b"}),
     f"{C0}.volumeMounts[0].subPath", "must not contain '..'"),
    ("sub-path-absolute", mounts({"name": "data", "mountPath": "/d", "subPath": "/etc"}),
     f"{C0}.volumeMounts[0].subPath", "must be a relative path"),
    ("sub-path-expr-backstep", mounts({"name": "data", "mountPath": "/d",
                                       "subPathExpr": "$(POD)/.."}),
     f"{C0}.volumeMounts[0].subPathExpr", "must not contain '..'"),
    ("sub-path-and-expr", mounts({"name": "data", "mountPath": "/d", "subPath": "a",
                                  "subPathExpr": "b"}),
     f"{C0}.volumeMounts[0].subPathExpr", "subPathExpr and subPath are mutually exclusive"),
    ("mount-propagation", mounts({"name": "data", "mountPath": "/d",
                                  "mountPropagation": "Sometimes"}),
     f"{C0}.volumeMounts[0].mountPropagation", 'unsupported value "Sometimes"'),
    ("mount-bidirectional", mounts({"name": "data", "mountPath": "/d",
                                    "mountPropagation": "Bidirectional"}),
     f"{C0}.volumeMounts[0].mountPropagation", "only to privileged containers"),
    ("recursive-read-only", mounts({"name": "data", "mountPath": "/d",
                                    "recursiveReadOnly": "IfPossible"}),
     f"{C0}.volumeMounts[0].recursiveReadOnly", "may only be specified when readOnly is true"),
    # -- resources ----------------------------------------------------------------------------
    ("resource-not-standard", res(limits={"gpu": 1}), f"{C0}.resources.limits[gpu]",
     "must be a standard resource for containers"),
    ("resource-pods", res(requests={"pods": 1}), f"{C0}.resources.requests[pods]",
     "must be a standard resource for containers"),
    ("resource-not-qualified", res(limits={"Example.com/gpu": 1}),
     f"{C0}.resources.limits[Example.com/gpu]", "not a valid DNS-1123 subdomain"),
    ("resource-empty-prefix", res(limits={"/gpu": 1}), f"{C0}.resources.limits[/gpu]",
     "not a valid DNS-1123 subdomain"),
    ("resource-requests-prefix", res(limits={"requests.example.com/gpu": 1}),
     f"{C0}.resources.limits[requests.example.com/gpu]",
     "doesn't follow extended resource name standard"),
    ("extended-fraction", res(limits={"example.com/gpu": "1.5"}),
     f"{C0}.resources.limits[example.com/gpu]", "must be an integer"),
    ("extended-milli", res(limits={"example.com/gpu": "500m"}),
     f"{C0}.resources.limits[example.com/gpu]", "must be an integer"),
    ("extended-overcommit", res(limits={"example.com/gpu": 2}, requests={"example.com/gpu": 1}),
     f"{C0}.resources.requests", "must be equal to example.com/gpu limit of 2"),
    ("extended-without-limit", res(requests={"example.com/gpu": 1}),
     f"{C0}.resources.limits", "Limit must be set for non overcommitable resources"),
    ("request-negative", res(requests={"memory": "-1Mi"}), f"{C0}.resources.requests[memory]",
     "must be greater than or equal to 0"),
    ("limit-negative", res(limits={"cpu": -1}), f"{C0}.resources.limits[cpu]",
     "must be greater than or equal to 0"),
    ("request-over-limit", res(requests={"cpu": "2"}, limits={"cpu": "1"}),
     f"{C0}.resources.requests", "must be less than or equal to cpu limit of 1"),
    ("memory-request-over-limit", res(requests={"memory": "2Gi"}, limits={"memory": "1Gi"}),
     f"{C0}.resources.requests", "must be less than or equal to memory limit of 1Gi"),
    ("quantity-malformed", res(limits={"cpu": "lots"}), f"{C0}.resources.limits[cpu]",
     "not a quantity"),
    ("quantity-type", res(limits={"memory": [1]}), f"{C0}.resources.limits[memory]",
     "a quantity"),
    ("nodelet-cpu-quota", res(limits={"cpu": "1e15"}), f"{C0}.resources.limits[cpu]",
     "too large"),
    ("nodelet-cpu-request-quota", res(requests={"cpu": "92233720368548"}),
     f"{C0}.resources.requests[cpu]", "too large"),
    ("hugepages-indivisible", res(limits={"hugepages-2Mi": "3Mi", "memory": "1Gi"}),
     f"{C0}.resources.limits[hugepages-2Mi]", "is not positive integer multiple of hugepages-2Mi"),
    ("hugepages-bad-size", res(limits={"hugepages-big": "2Mi", "memory": "1Gi"}),
     f"{C0}.resources.limits[hugepages-big]", "is not positive integer multiple"),
    ("hugepages-alone", res(limits={"hugepages-2Mi": "2Mi"}), f"{C0}.resources",
     "HugePages require cpu or memory"),
    ("hugepages-overcommit", res(limits={"hugepages-2Mi": "4Mi", "memory": "1Gi"},
                                 requests={"hugepages-2Mi": "2Mi"}),
     f"{C0}.resources.requests", "must be equal to hugepages-2Mi limit of 4Mi"),
    ("resources-unknown-field", res(limit={"cpu": 1}), f"{C0}.resources.limit",
     'did you mean "spec.containers[0].resources.limits"'),
    ("resources-claims-unknown", res(claims=[{"name": "gpu"}]), f"{C0}.resources.claims[0]",
     "must be one of the pod's spec.resourceClaims"),
    # -- probes -------------------------------------------------------------------------------
    ("probe-no-handler", c(livenessProbe={"periodSeconds": 5}), f"{C0}.livenessProbe",
     "must specify a handler type"),
    ("probe-two-handlers", c(livenessProbe={**EXEC, "tcpSocket": {"port": 80}}),
     f"{C0}.livenessProbe.tcpSocket", "may not specify more than 1 handler type"),
    ("probe-negative", c(livenessProbe={**EXEC, "periodSeconds": -1}),
     f"{C0}.livenessProbe.periodSeconds", "must be greater than or equal to 0"),
    ("probe-int32", c(readinessProbe={**EXEC, "timeoutSeconds": 2**31}),
     f"{C0}.readinessProbe.timeoutSeconds", "at most 2147483647"),
    ("probe-initial-delay-int32", c(startupProbe={**EXEC, "initialDelaySeconds": 10**30}),
     f"{C0}.startupProbe.initialDelaySeconds", "at most 2147483647"),
    ("probe-failure-threshold", c(livenessProbe={**EXEC, "failureThreshold": -3}),
     f"{C0}.livenessProbe.failureThreshold", "must be greater than or equal to 0"),
    ("probe-type", c(livenessProbe={**EXEC, "periodSeconds": "10s"}),
     f"{C0}.livenessProbe.periodSeconds", "expected an integer"),
    ("liveness-success-threshold", c(livenessProbe={**EXEC, "successThreshold": 2}),
     f"{C0}.livenessProbe.successThreshold", "must be 1"),
    ("startup-success-threshold", c(startupProbe={**EXEC, "successThreshold": 2}),
     f"{C0}.startupProbe.successThreshold", "must be 1"),
    ("readiness-grace", c(readinessProbe={**EXEC, "terminationGracePeriodSeconds": 5}),
     f"{C0}.readinessProbe.terminationGracePeriodSeconds",
     "must not be set for readinessProbes"),
    ("liveness-grace-zero", c(livenessProbe={**EXEC, "terminationGracePeriodSeconds": 0}),
     f"{C0}.livenessProbe.terminationGracePeriodSeconds", "greater than 0"),
    ("probe-exec-empty", c(livenessProbe={"exec": {"command": []}}),
     f"{C0}.livenessProbe.exec.command", "required"),
    ("probe-http-port-digits", c(readinessProbe={"httpGet": {"port": "1234"}}),
     f"{C0}.readinessProbe.httpGet.port", "must contain at least one letter (a-z)"),
    ("probe-http-port-zero", c(readinessProbe={"httpGet": {"port": 0}}),
     f"{C0}.readinessProbe.httpGet.port", "between 1 and 65535"),
    ("probe-tcp-port-missing", c(readinessProbe={"tcpSocket": {}}),
     f"{C0}.readinessProbe.tcpSocket.port", "required"),
    ("probe-grpc-named-port", c(livenessProbe={"grpc": {"port": "grpc"}}),
     f"{C0}.livenessProbe.grpc.port", "expected an integer"),
    ("probe-scheme", c(readinessProbe={"httpGet": {"port": 80, "scheme": "FTP"}}),
     f"{C0}.readinessProbe.httpGet.scheme", 'unsupported value "FTP"'),
    ("probe-header-name", c(readinessProbe={"httpGet": {
        "port": 80, "httpHeaders": [{"name": "X_Trace", "value": "1"}]}}),
     f"{C0}.readinessProbe.httpGet.httpHeaders[0].name",
     "a valid HTTP header must consist of alphanumeric characters or '-'"),
    ("probe-unknown-field", c(livenessProbe={**EXEC, "period": 5}),
     f"{C0}.livenessProbe.period", 'unknown field "period"'),
    ("probe-in-init", init(readinessProbe=EXEC), f"{I0}.readinessProbe",
     "may not be set for init containers without restartPolicy=Always"),
    ("liveness-in-init", init(livenessProbe=EXEC), f"{I0}.livenessProbe",
     "may not be set for init containers without restartPolicy=Always"),
    ("sidecar-probe-checked", init(**SIDE, startupProbe={}), f"{I0}.startupProbe",
     "must specify a handler type"),
    # -- lifecycle ----------------------------------------------------------------------------
    ("hook-without-handler", hook("postStart", {}), f"{C0}.lifecycle.postStart",
     "must specify a handler type"),
    ("hook-two-handlers", hook("preStop", {**EXEC, "sleep": {"seconds": 1}}),
     f"{C0}.lifecycle.preStop.sleep", "may not specify more than 1 handler type"),
    ("hook-grpc", hook("preStop", {"grpc": {"port": 80}}), f"{C0}.lifecycle.preStop.grpc",
     'unknown field "spec.containers[0].lifecycle.preStop.grpc"'),
    ("hook-type", hook("postStart", "true"), f"{C0}.lifecycle.postStart",
     "expected a mapping"),
    ("hook-exec-empty", hook("postStart", {"exec": {}}), f"{C0}.lifecycle.postStart.exec.command",
     "required"),
    ("hook-http-port", hook("preStop", {"httpGet": {"path": "/quit"}}),
     f"{C0}.lifecycle.preStop.httpGet.port", "required"),
    ("hook-tcp-port-name", hook("preStop", {"tcpSocket": {"port": "9999"}}),
     f"{C0}.lifecycle.preStop.tcpSocket.port", "must contain at least one letter"),
    ("sleep-negative", hook("preStop", {"sleep": {"seconds": -1}}),
     f"{C0}.lifecycle.preStop.sleep", "non-negative"),
    ("sleep-seconds-type", hook("preStop", {"sleep": {"seconds": "5s"}}),
     f"{C0}.lifecycle.preStop.sleep", "non-negative integer"),
    ("sleep-type", hook("preStop", {"sleep": 5}), f"{C0}.lifecycle.preStop.sleep",
     "expected a mapping"),
    ("sleep-over-default-grace", hook("preStop", {"sleep": {"seconds": 31}}),
     f"{C0}.lifecycle.preStop.sleep",
     "must be non-negative and less than terminationGracePeriodSeconds (30)"),
    ("sleep-over-grace", hook("postStart", {"sleep": {"seconds": 10}},
                              terminationGracePeriodSeconds=5),
     f"{C0}.lifecycle.postStart.sleep", "less than terminationGracePeriodSeconds (5)"),
    ("sleep-unknown-field", hook("preStop", {"sleep": {"second": 1}}),
     f"{C0}.lifecycle.preStop.sleep.second", 'did you mean'),
    ("lifecycle-unknown-field", c(lifecycle={"preStart": EXEC}), f"{C0}.lifecycle.preStart",
     'unknown field "spec.containers[0].lifecycle.preStart"; did you mean'),
    ("stop-signal-without-os", c(lifecycle={"stopSignal": "SIGUSR1"}),
     f"{C0}.lifecycle.stopSignal", "may not be set for containers with empty `spec.os.name`"),
    ("lifecycle-in-init", init(lifecycle={"preStop": EXEC}), f"{I0}.lifecycle",
     "may not be set for init containers without restartPolicy=Always"),
    ("sidecar-hook-checked", init(**SIDE, lifecycle={"preStop": {}}),
     f"{I0}.lifecycle.preStop", "must specify a handler type"),
    # -- termination message, restartPolicy, resizePolicy, stdin ---------------------------
    ("termination-message-policy", c(terminationMessagePolicy="Always"),
     f"{C0}.terminationMessagePolicy", 'unsupported value "Always"'),
    ("termination-message-path-type", c(terminationMessagePath=1),
     f"{C0}.terminationMessagePath", "expected a string"),
    ("restart-policy-regular", c(restartPolicy="Sometimes"), f"{C0}.restartPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"'),
    ("restart-policy-init", init(restartPolicy="Later"), f"{I0}.restartPolicy",
     'Unsupported value: "Later"'),
    ("restart-rules-without-policy", init(restartPolicyRules=[RULE_42]),
     f"{I0}.restartPolicy", "must specify restartPolicy when restart rules are used"),
    ("restart-rules-regular-without-policy", c(restartPolicyRules=[RULE_42]),
     f"{C0}.restartPolicy", "must specify restartPolicy when restart rules are used"),
    ("restart-rule-action", c(restartPolicy="Never", restartPolicyRules=[
        {**RULE_42, "action": "Ignore"}]), f"{C0}.restartPolicyRules[0].action",
     'unsupported value "Ignore"'),
    ("restart-rule-no-exit-codes", c(restartPolicy="Never", restartPolicyRules=[
        {"action": "Restart"}]), f"{C0}.restartPolicyRules[0].exitCodes", "must be specified"),
    ("restart-rule-operator", c(restartPolicy="Never", restartPolicyRules=[
        {"action": "Restart", "exitCodes": {"operator": "Is", "values": [1]}}]),
     f"{C0}.restartPolicyRules[0].exitCodes.operator", 'unsupported value "Is"'),
    ("restart-rule-values", c(restartPolicy="Never", restartPolicyRules=[
        {"action": "Restart", "exitCodes": {"operator": "In", "values": list(range(256))}}]),
     f"{C0}.restartPolicyRules[0].exitCodes.values", "must have at most 255 items"),
    ("restart-rules-many", c(restartPolicy="Never", restartPolicyRules=[RULE_42] * 21),
     f"{C0}.restartPolicyRules", "must have at most 20 items"),
    ("resize-resource", c(resizePolicy=[{"resourceName": "gpu",
                                         "restartPolicy": "NotRequired"}]),
     f"{C0}.resizePolicy[0].resourceName", 'unsupported value "gpu"'),
    ("resize-policy", c(resizePolicy=[{"resourceName": "cpu", "restartPolicy": "Later"}]),
     f"{C0}.resizePolicy[0].restartPolicy", 'unsupported value "Later"'),
    ("resize-duplicate", c(resizePolicy=[
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "cpu", "restartPolicy": "RestartContainer"}]),
     f"{C0}.resizePolicy[1]", 'Duplicate value: "cpu"'),
    ("resize-restart-never", with_spec(c(resizePolicy=[
        {"resourceName": "memory", "restartPolicy": "RestartContainer"}]), restartPolicy="Never"),
     f"{C0}.resizePolicy[0].restartPolicy", "must be 'NotRequired' when `restartPolicy` is"),
    ("stdin-type", c(stdin="yes"), f"{C0}.stdin", "a boolean"),
    ("tty-type", c(tty=1), f"{C0}.tty", "a boolean"),
]


@pytest.mark.parametrize(("obj", "path", "fragment"), [case[1:] for case in REJECTED],
                         ids=[case[0] for case in REJECTED])
def test_rejected_where_the_api_server_rejects(obj: dict[str, Any], path: str,
                                                fragment: str) -> None:
    with pytest.raises(manifests.ManifestError) as info:
        parse(obj)
    assert (info.value.path, fragment in info.value.message) == (path, True), info.value


def test_case_ids_are_unique() -> None:
    ids = [case[0] for case in REJECTED]
    assert len(ids) == len(set(ids))


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("port-name-with-digits", ports({"containerPort": 80, "name": "h2c-8080"})),
    ("port-name-15", ports({"containerPort": 80, "name": "a" * 15})),
    ("port-highest", ports({"containerPort": 65535, "hostPort": 65535})),
    ("same-host-port-other-protocol", ports({"containerPort": 53, "hostPort": 53},
                                            {"containerPort": 53, "hostPort": 53,
                                             "protocol": "UDP"})),
    ("same-host-port-other-ip", ports({"containerPort": 80, "hostPort": 80, "hostIP": "::1"},
                                      {"containerPort": 81, "hostPort": 80})),
    ("same-container-port-twice", ports({"containerPort": 80}, {"containerPort": 80})),
    ("init-containers-share-host-port", pod(init=(
        ctr("a", ports=[{"containerPort": 80, "hostPort": 8080}]),
        ctr("b", ports=[{"containerPort": 80, "hostPort": 8080}])))),
    ("env-relaxed-name", env({"name": "1 weird.name-ok"}, {"name": "~!@#$%^&*()"})),
    ("env-empty-value", env({"name": "A", "value": ""})),
    ("field-ref-defaults-api-version", value_from({"fieldRef": {"fieldPath": "status.podIPs"}})),
    ("field-ref-annotation-case", value_from({"fieldRef": {
        "fieldPath": "metadata.annotations['Example.com/Key']"}})),
    ("field-ref-old-name", value_from({"fieldRef": {"fieldPath": "spec.host"}})),
    ("divisor-milli-cpu", value_from({"resourceFieldRef": {"resource": "requests.cpu",
                                                           "divisor": "1m"}})),
    ("divisor-mebibyte", value_from({"resourceFieldRef": {"resource": "limits.memory",
                                                          "divisor": "1Mi"}})),
    ("env-from-prefix-empty", c(envFrom=[{"prefix": "", "configMapRef": {"name": "a"}}])),
    ("sub-path-dots-in-name", mounts({"name": "data", "mountPath": "/d", "subPath": "a/..b/c.."})),
    ("sub-path-expr", mounts({"name": "data", "mountPath": "/d", "subPathExpr": "$(POD_NAME)"})),
    ("mount-path-relative", mounts({"name": "data", "mountPath": "data"})),
    ("zero-quantities", res(requests={"cpu": "0", "memory": 0}, limits={"cpu": 0})),
    ("extended-resource", res(limits={"example.com/gpu": 2})),
    ("kubernetes-io-resource", res(limits={"kubernetes.io/foo": "1.5"})),
    ("hugepages", res(limits={"hugepages-2Mi": "4Mi", "memory": "1Gi"})),
    ("largest-memory", res(limits={"memory": str(2**63 - 1)})),
    ("memory-beyond-int64", res(limits={"memory": "1e30", "ephemeral-storage": "9Ei"})),
    ("largest-cpu", res(limits={"cpu": "92233720368547.758"})),
    ("probe-defaults", c(livenessProbe={**EXEC, "periodSeconds": 0, "timeoutSeconds": 0,
                                        "successThreshold": 0, "failureThreshold": 0})),
    ("probe-int32-max", c(readinessProbe={**EXEC, "periodSeconds": 2**31 - 1})),
    ("readiness-success-threshold", c(readinessProbe={**EXEC, "successThreshold": 3})),
    ("probe-named-port", c(ports=[{"containerPort": 80, "name": "http"}],
                           readinessProbe={"httpGet": {"port": "http"}})),
    ("sidecar-probes-and-hooks", init(**SIDE, readinessProbe=EXEC,
                                      lifecycle={"preStop": {"sleep": {"seconds": 30}}})),
    ("sleep-zero", hook("preStop", {"sleep": {"seconds": 0}})),
    ("sleep-seconds-unset", hook("preStop", {"sleep": {}})),
    ("sleep-equal-to-grace", hook("preStop", {"sleep": {"seconds": 30}})),
    ("sleep-with-null-grace", hook("preStop", {"sleep": {"seconds": 30}},
                                   terminationGracePeriodSeconds=None)),
    ("hook-tcp-socket", hook("postStart", {"tcpSocket": {"port": 80}})),
    ("hook-null", c(lifecycle={"preStop": None})),
    ("stdin-once-without-stdin", c(stdinOnce=True, tty=True)),
    ("container-restart-policy", c(restartPolicy="Never", restartPolicyRules=[RULE_42])),
    ("container-restart-on-failure", c(restartPolicy="OnFailure")),
    ("init-restart-rules", init(restartPolicy="Never", restartPolicyRules=[
        {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0, 1]}}])),
    ("resize-policy", c(resizePolicy=[{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                      {"resourceName": "memory",
                                       "restartPolicy": "RestartContainer"}])),
]


@pytest.mark.parametrize("obj", [case[1] for case in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_as_the_api_server_accepts(obj: dict[str, Any]) -> None:
    assert parse(obj).spec.containers


def test_huge_cpu_is_rounded_up_exactly() -> None:
    resources = parse(res(requests={"cpu": "1.0000000000000000000000000000001"})).spec
    assert resources.containers[0].resources.cpu_request_milli == 1001


def test_amounts_beyond_int64_saturate() -> None:
    resources = parse(res(limits={"memory": "1e30"})).spec.containers[0].resources
    assert (resources.memory_request, resources.memory_limit) == (2**63 - 1, 2**63 - 1)


def test_extended_resource_request_defaults_to_its_limit() -> None:
    raw = parse(res(limits={"example.com/gpu": 2})).raw
    # Written back as a quantity, as the kubelet and the API server write it.
    assert raw["spec"]["containers"][0]["resources"]["requests"] == {"example.com/gpu": "2"}
