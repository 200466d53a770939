"""The containers of a pod spec (`spec.containers`, `spec.initContainers`), parsed and checked
as the API server checks them (validateContainers, validateInitContainers,
validateContainerCommon and what they call), with its rules and, mostly, its messages.

Ports, environment, volume mounts, resources, probes and lifecycle hooks are validated when the
manifest is read, with the field path of each container (`spec.containers[0]`). Where the API
server reports a problem of a list item at the list (`envFrom`, `volumeMounts.subPath`,
`resizePolicy`), nodelet names the item (`envFrom[1]`). Checks across containers of one list
(host ports) are here; those across both lists and the volumes are in `podspecs`. Errors are the
`fields.ManifestError` tree.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from nodelet.model.core import fields, handlers, names, pods, probes
from nodelet.model.parsing import (
    apifields,
    defaulting,
    envspecs,
    hookspecs,
    podfields,
    probespecs,
    resourcespecs,
    securityspecs,
)

# What Go's strings.TrimSpace removes (unicode.IsSpace); Python's str.strip also takes \x1c-\x1f.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)
_FORBIDDEN_FOR_INIT = "forbidden: may not be set for init containers without restartPolicy=Always"
_RESIZE_FIELDS = frozenset({"resourceName", "restartPolicy"})
_RESIZE_RESOURCES = ("cpu", "memory")
_RESIZE_POLICIES = ("NotRequired", "RestartContainer")
_RULE_FIELDS = frozenset({"action", "exitCodes"})
_EXIT_CODE_FIELDS = frozenset({"operator", "values"})
_RULE_ACTIONS = ("Restart", "RestartAllContainers")


def _container_port(obj: Mapping[str, Any], path: str) -> int:
    value = obj.get("containerPort")
    if value is None or (type(value) is int and value == 0):
        raise fields.InvalidValueError(
            "required: a port number between 1 and 65535", path=f"{path}.containerPort"
        )
    return cast(int, fields.integer(obj, "containerPort", path, low=1, high=65535))


def _port(obj: Mapping[str, Any], path: str, strict: bool) -> pods.ContainerPort:
    if strict:
        fields.check_fields(obj, apifields.PORT_FIELDS, path)
    number = _container_port(obj, path)
    name = fields.string(obj, "name", path)
    if name:
        names.port_name(name, f"{path}.name")
    return pods.ContainerPort(
        container_port=number,
        protocol=fields.one_of(
            fields.string(obj, "protocol", path) or "TCP", apifields.PROTOCOLS, f"{path}.protocol"
        ),
        host_port=fields.integer(obj, "hostPort", path, low=0, high=65535) or 0,
        host_ip=fields.string(obj, "hostIP", path),
        name=name,
    )


def _ports(obj: Mapping[str, Any], path: str, strict: bool) -> tuple[pods.ContainerPort, ...]:
    """validateContainerPorts: each port, and each name once in the container."""
    ports = fields.items(obj, "ports", path, lambda item, p: _port(item, p, strict))
    seen: set[str] = set()
    for i, port in enumerate(ports):
        if port.name in seen:
            raise fields.InvalidValueError(
                f"Duplicate value: {json.dumps(port.name)}: port names must be unique in a "
                "container", path=f"{path}.ports[{i}].name")
        seen |= {port.name} if port.name else set()
    return ports


def _check_host_ports(
    containers: Sequence[pods.Container], path: str, *, init: bool, host_network: bool
) -> None:
    """AccumulateUniqueHostPorts: one protocol/hostIP/hostPort per host among the regular
    containers together, and within each init container (they run one at a time). With
    hostNetwork a port without hostPort has its containerPort (the API server's default)."""
    seen: set[str] = set()
    for i, container in enumerate(containers):
        seen = set() if init else seen
        for j, port in enumerate(container.ports):
            host_port = port.host_port or (port.container_port if host_network else 0)
            key = f"{port.protocol}/{port.host_ip}/{host_port}"
            if host_port and key in seen:
                raise fields.InvalidValueError(
                    f"Duplicate value: {json.dumps(key)}: another container port already "
                    "uses this host port", path=f"{path}[{i}].ports[{j}].hostPort")
            seen.add(key)


def _env(obj: Mapping[str, Any], path: str, strict: bool) -> pods.EnvVar:
    if strict:
        fields.check_fields(obj, apifields.ENV_FIELDS, path)
    name = fields.string(obj, "name", path, required=True)
    envspecs.env_var_name(name, f"{path}.name")
    value = fields.string(obj, "value", path)
    value_from = envspecs.value_from(obj, path, strict=strict)
    return pods.EnvVar(name=name, value=value, value_from=value_from)


def _mount(obj: Mapping[str, Any], path: str, strict: bool) -> pods.VolumeMount:
    if strict:
        fields.check_fields(obj, apifields.MOUNT_FIELDS, path)
    sub_path, sub_path_expr = envspecs.sub_paths(obj, path)
    return pods.VolumeMount(
        name=fields.string(obj, "name", path, required=True),
        mount_path=fields.string(obj, "mountPath", path, required=True),
        read_only=_read_only(obj, path),
        sub_path=sub_path,
        sub_path_expr=sub_path_expr,
        mount_propagation=_propagation(obj, path),
        recursive_read_only=fields.string(obj, "recursiveReadOnly", path) or "Disabled",
    )


def _device(obj: Mapping[str, Any], path: str, strict: bool) -> pods.VolumeDevice:
    """A volumeDevices item; which volume it names is checked with the pod's (`podspecs`)."""
    if strict:
        fields.check_fields(obj, apifields.VOLUME_DEVICE_FIELDS, path)
    name = fields.string(obj, "name", path, required=True)
    device_path = fields.string(obj, "devicePath", path, required=True)
    if ".." in device_path.split("/"):
        raise fields.InvalidValueError(f"\"{device_path}\": can not contain backsteps ('..')",
                                       path=f"{path}.devicePath")
    return pods.VolumeDevice(name=name, device_path=device_path)


def _read_only(obj: Mapping[str, Any], path: str) -> bool:
    """readOnly, and recursiveReadOnly as the API server checks it. Whether the runtime can
    make a mount recursively read-only is known only on the node: `volumes.recursive_read_only`
    decides when the container is created, as the kubelet does."""
    read_only = fields.boolean(obj, "readOnly", path)
    recursive = fields.string(obj, "recursiveReadOnly", path) or "Disabled"
    where = f"{path}.recursiveReadOnly"
    fields.one_of(recursive, apifields.RECURSIVE_READ_ONLY, where)
    if recursive != "Disabled" and not read_only:
        raise fields.InvalidValueError("may only be specified when readOnly is true", path=where)
    if recursive != "Disabled" and fields.string(obj, "mountPropagation", path) not in ("", "None"):
        raise fields.InvalidValueError(
            "may only be specified when mountPropagation is None or not specified", path=where)
    return read_only


def _propagation(obj: Mapping[str, Any], path: str) -> str:
    value = fields.string(obj, "mountPropagation", path)
    if obj.get("mountPropagation") is not None:  # an empty string is refused too
        fields.one_of(value, apifields.MOUNT_PROPAGATIONS, f"{path}.mountPropagation")
    return value


def _check_propagation(container: pods.Container, path: str) -> None:
    """Bidirectional propagation reaches the host's mounts: privileged containers only."""
    context = container.security_context
    if context is not None and context.privileged:
        return
    for j, mount in enumerate(container.volume_mounts):
        if mount.mount_propagation == "Bidirectional":
            raise fields.InvalidValueError(
                "forbidden: Bidirectional mount propagation is available only to privileged "
                "containers; set securityContext.privileged: true or use HostToContainer",
                path=f"{path}.volumeMounts[{j}].mountPropagation",
            )


def _probe(obj: Mapping[str, Any], kind: probes.ProbeKind, path: str) -> handlers.Probe | None:
    """A probe, validated when the manifest is read (not when a prober first runs it); None
    when not set (`{}` is set, and checked)."""
    key = f"{kind}Probe"
    if obj.get(key) is None:
        return None
    raw = fields.mapping(obj, key, path)
    try:
        return probespecs.parse_probe(raw, kind, path=f"{path}.{key}")
    except probes.ProbeError as exc:
        raise fields.InvalidValueError(exc.message, path=exc.path) from exc


def _container_restart_policy(
    obj: Mapping[str, Any], path: str, init: bool
) -> pods.ContainerRestartPolicy:
    """A container's own restartPolicy (validateContainerRestartPolicy): an init container's
    `Always` makes a sidecar; any of the three overrides the pod's (ContainerRestartRules, beta
    and on by default in 1.35+), and its rules need one."""
    value = fields.string(obj, "restartPolicy", path)
    if not value:
        if obj.get("restartPolicyRules"):
            raise fields.InvalidValueError(
                "required: must specify restartPolicy when restart rules are used",
                path=f"{path}.restartPolicy")
        return ""
    if value not in apifields.RESTART_POLICIES:
        raise fields.InvalidValueError(
            f"Unsupported value: {json.dumps(value)}: supported values: \"Always\", "
            f"\"Never\", \"OnFailure\"{' (Always makes a sidecar)' if init else ''}",
            path=f"{path}.restartPolicy")
    return cast(pods.ContainerRestartPolicy, value)


def _restart_rule(item: Mapping[str, Any], path: str, strict: bool) -> pods.RestartRule:
    if strict:
        fields.check_fields(item, _RULE_FIELDS, path)
    action = fields.string(item, "action", path, required=True)
    fields.one_of(action, _RULE_ACTIONS, f"{path}.action")
    if item.get("exitCodes") is None:
        raise fields.InvalidValueError("required: must be specified", path=f"{path}.exitCodes")
    codes = fields.mapping(item, "exitCodes", path)
    where = f"{path}.exitCodes"
    if strict:
        fields.check_fields(codes, _EXIT_CODE_FIELDS, where)
    operator = fields.one_of(fields.string(codes, "operator", where, required=True),
                             ("In", "NotIn"), f"{where}.operator")
    values = fields.sequence(codes, "values", where)
    if len(values) > 255:
        raise fields.InvalidValueError(f"Too many: {len(values)}: must have at most 255 items",
                                       path=f"{where}.values")
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int):
            raise fields.type_error(f"{where}.values[{i}]", "an integer", value)
    return pods.RestartRule(action=action, operator=cast(Any, operator), values=tuple(values))


def _restart_rules(obj: Mapping[str, Any], path: str, strict: bool) -> tuple[pods.RestartRule, ...]:
    rules = fields.items(obj, "restartPolicyRules", path,
                         lambda item, p: _restart_rule(item, p, strict))
    if len(rules) > 20:
        raise fields.InvalidValueError(f"Too many: {len(rules)}: must have at most 20 items",
                                       path=f"{path}.restartPolicyRules")
    return rules


def _image(obj: Mapping[str, Any], path: str, strict: bool) -> str:
    """Required; no whitespace around it (validateContainerOnlyForPod). Inside it neither, in
    manifests: no image reference has any (the kubelet would report InvalidImageName)."""
    image = fields.string(obj, "image", path, required=True)
    shown = json.dumps(image if len(image) <= 60 else image[:57] + "...")
    if image != image.strip(_GO_SPACE):
        raise fields.InvalidValueError(
            f"{shown}: must not have leading or trailing whitespace", path=f"{path}.image"
        )
    if strict and any(char in _GO_SPACE for char in image):
        raise fields.InvalidValueError(
            f"{shown}: must not contain whitespace: an image reference has none (the kubelet "
            "would report InvalidImageName)", path=f"{path}.image")
    return image


def _resize_item(item: Mapping[str, Any], path: str, strict: bool,
                 pod_restart: str) -> tuple[str, str]:
    if strict:
        fields.check_fields(item, _RESIZE_FIELDS, path)
    name = fields.string(item, "resourceName", path, required=True)
    fields.one_of(name, _RESIZE_RESOURCES, f"{path}.resourceName")
    policy = fields.string(item, "restartPolicy", path, required=True)
    fields.one_of(policy, _RESIZE_POLICIES, f"{path}.restartPolicy")
    if pod_restart == "Never" and policy != "NotRequired":
        raise fields.InvalidValueError(
            "must be 'NotRequired' when `restartPolicy` is 'Never'", path=f"{path}.restartPolicy"
        )
    return name, policy


def _check_resize_policy(obj: Mapping[str, Any], path: str, strict: bool,
                         pod: _PodFacts) -> frozenset[str]:
    """validateResizePolicy; returns the resources whose resize restarts the container."""
    found = fields.items(
        obj, "resizePolicy", path, lambda item, p: _resize_item(item, p, strict, pod.restart)
    )
    names = [name for name, _ in found]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise fields.InvalidValueError(
                f"Duplicate value: {json.dumps(name)}", path=f"{path}.resizePolicy[{i}]"
            )
    return frozenset(name for name, policy in found if policy == "RestartContainer")


def _check_init_only(obj: Mapping[str, Any], path: str, init: bool, restart: str) -> None:
    """Lifecycle hooks and probes: not for init containers that are not sidecars."""
    if not init or restart == "Always":
        return
    for key in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
        if obj.get(key) is not None:
            raise fields.InvalidValueError(_FORBIDDEN_FOR_INIT, path=f"{path}.{key}")


@dataclass(frozen=True)
class _PodFacts:
    """What container checks need of the pod spec, read leniently (the spec's own checks are
    `podspecs`'s), with the API server's defaults: restartPolicy, terminationGracePeriodSeconds
    (None: not an integer, so not checked against) and hostNetwork."""

    restart: str = "Always"
    grace: int | None = 30
    host_network: bool = False
    os_name: str = ""  # spec.os.name ("" when unset or not a string)

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> _PodFacts:
        restart = spec.get("restartPolicy")
        grace = spec.get("terminationGracePeriodSeconds")
        grace = 30 if grace is None else grace
        return cls(
            restart=restart if isinstance(restart, str) and restart else "Always",
            grace=grace if type(grace) is int else None,
            host_network=spec.get("hostNetwork") is True,
            os_name=_os_name(spec),
        )


def _os_name(spec: Mapping[str, Any]) -> str:
    os_ = spec.get("os")
    name = os_.get("name") if isinstance(os_, Mapping) else None
    return name if isinstance(name, str) else ""


def _container(
    obj: Mapping[str, Any], path: str, *, init: bool, strict: bool, pod: _PodFacts
) -> pods.Container:
    if strict:
        fields.check_fields(obj, apifields.CONTAINER_FIELDS, path)
    name = names.dns_label(fields.string(obj, "name", path, required=True), f"{path}.name")
    image = _image(obj, path, strict)
    policy = fields.string(obj, "imagePullPolicy", path) or defaulting.default_pull_policy(image)
    message_policy = cast(pods.MessagePolicy, fields.one_of(
        fields.string(obj, "terminationMessagePolicy", path) or "File",
        apifields.MESSAGE_POLICIES, f"{path}.terminationMessagePolicy"))
    if strict:
        podfields.check_refused(obj, "container", path)
    restart_on_resize = _check_resize_policy(obj, path, strict, pod)
    restart = _container_restart_policy(obj, path, init)
    rules = _restart_rules(obj, path, strict)
    _check_init_only(obj, path, init, restart)
    lifecycle = hookspecs.lifecycle(obj, path, grace=pod.grace, strict=strict,
                                    os_name=pod.os_name)
    container = pods.Container(
        name=name,
        image=image,
        image_pull_policy=cast(
            pods.PullPolicy,
            fields.one_of(policy, apifields.PULL_POLICIES, f"{path}.imagePullPolicy"),
        ),
        command=fields.string_list(obj, "command", path),
        args=fields.string_list(obj, "args", path),
        working_dir=fields.string(obj, "workingDir", path),
        env=fields.items(obj, "env", path, lambda item, p: _env(item, p, strict)),
        env_from=fields.items(
            obj, "envFrom", path, lambda item, p: envspecs.env_from(item, p, strict=strict)
        ),
        ports=_ports(obj, path, strict),
        volume_mounts=fields.items(
            obj, "volumeMounts", path, lambda item, p: _mount(item, p, strict)
        ),
        volume_devices=fields.items(
            obj, "volumeDevices", path, lambda item, p: _device(item, p, strict)
        ),
        resources=resourcespecs.resources(obj, path, strict=strict),
        restart_on_resize=restart_on_resize,
        restart_policy=restart,
        restart_rules=rules,
        termination_message_path=fields.string(obj, "terminationMessagePath", path)
        or "/dev/termination-log",
        termination_message_policy=message_policy,
        readiness_probe=_probe(obj, "readiness", path),
        liveness_probe=_probe(obj, "liveness", path),
        startup_probe=_probe(obj, "startup", path),
        lifecycle=lifecycle,
        stdin=fields.boolean(obj, "stdin", path),
        stdin_once=fields.boolean(obj, "stdinOnce", path),
        tty=fields.boolean(obj, "tty", path),
        security_context=securityspecs.container_security_context(obj, path, strict=strict),
    )
    _check_propagation(container, path)
    return container


def ephemeral_containers(spec: Mapping[str, Any]) -> tuple[pods.Container, ...]:
    """`spec.ephemeralContainers` of a pod the API server accepted (it validated them: no
    probes, ports, lifecycle or resources), each with its targetContainerName."""
    pod = _PodFacts.of(spec)

    def one(item: Mapping[str, Any], path: str) -> pods.Container:
        container = _container(item, path, init=False, strict=False, pod=pod)
        target = fields.string(item, "targetContainerName", path)
        return dataclasses.replace(container, target_container_name=target)

    return fields.items(spec, "ephemeralContainers", "spec", one)


def containers(spec: Mapping[str, Any], key: str, *, strict: bool) -> tuple[pods.Container, ...]:
    """The containers of `spec[key]`; `key` is "containers" or "initContainers"."""
    init = key == "initContainers"
    pod = _PodFacts.of(spec)
    found = fields.items(
        spec, key, "spec",
        lambda item, path: _container(item, path, init=init, strict=strict, pod=pod),
    )
    _check_host_ports(found, f"spec.{key}", init=init, host_network=pod.host_network)
    return found

