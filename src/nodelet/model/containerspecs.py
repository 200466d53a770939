"""The containers of a pod spec (`spec.containers`, `spec.initContainers`), parsed and checked.

Ports, environment, volume mounts, resources and probes are validated when the manifest is
read, with the field path of each container (`spec.containers[0]`). Errors are the
`fields.ManifestError` tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, cast

from nodelet.model import (
    apifields,
    defaulting,
    envspecs,
    fields,
    names,
    podfields,
    pods,
    probes,
    quantities,
    securityspecs,
)


def _port(obj: Mapping[str, Any], path: str, strict: bool) -> pods.ContainerPort:
    if strict:
        fields.check_fields(obj, apifields.PORT_FIELDS, path)
    if obj.get("containerPort") is None:
        raise fields.InvalidValueError(
            "required: a port number 1-65535", path=f"{path}.containerPort"
        )
    number = cast(int, fields.integer(obj, "containerPort", path, low=1, high=65535))
    name = fields.string(obj, "name", path)
    if name and (len(name) > 15 or not names.DNS_LABEL.match(name) or "--" in name):
        raise fields.InvalidValueError(
            f'"{name}" is not a valid port name: at most 15 lowercase letters, digits and '
            "single '-', starting and ending alphanumeric",
            path=f"{path}.name",
        )
    return pods.ContainerPort(
        container_port=number,
        protocol=fields.one_of(
            fields.string(obj, "protocol", path) or "TCP", apifields.PROTOCOLS, f"{path}.protocol"
        ),
        host_port=fields.integer(obj, "hostPort", path, low=0, high=65535) or 0,
        host_ip=fields.string(obj, "hostIP", path),
        name=name,
    )


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
    )


def _read_only(obj: Mapping[str, Any], path: str) -> bool:
    """readOnly, and recursiveReadOnly as the API server checks it: IfPossible gives a plain
    read-only mount on a runtime without recursive read-only mounts (as the kubelet does);
    Enabled cannot be honoured by containerd 1.6 and is refused."""
    read_only = fields.boolean(obj, "readOnly", path)
    recursive = fields.string(obj, "recursiveReadOnly", path) or "Disabled"
    where = f"{path}.recursiveReadOnly"
    fields.one_of(recursive, apifields.RECURSIVE_READ_ONLY, where)
    if recursive != "Disabled" and not read_only:
        raise fields.InvalidValueError("may only be specified when readOnly is true", path=where)
    if recursive != "Disabled" and fields.string(obj, "mountPropagation", path) not in ("", "None"):
        raise fields.InvalidValueError(
            "may only be specified when mountPropagation is None or not specified", path=where)
    if recursive == "Enabled":
        raise fields.UnsupportedError(
            "recursive read-only mounts are not supported by containerd 1.6; use IfPossible "
            "for a read-only mount", path=where)
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


def _quantities(obj: Mapping[str, Any], key: str, path: str) -> dict[str, Decimal]:
    out = {}
    for name, value in fields.mapping(obj, key, path).items():
        item_path = f"{path}.{key}.{name}"
        out[str(name)] = quantity = quantities.parse_quantity(value, path=item_path)
        if quantity < 0:
            raise fields.InvalidValueError("must be greater than or equal to 0", path=item_path)
    return out


def _resources(obj: Mapping[str, Any], path: str, strict: bool) -> pods.Resources:
    res = fields.mapping(obj, "resources", path)
    path = f"{path}.resources"
    if strict:
        fields.check_fields(res, apifields.RESOURCES_FIELDS, path)
    if strict:
        podfields.check_refused(res, "resources", path)
    limits = _quantities(res, "limits", path)
    # The API server defaults a missing request to its limit.
    requests = {**limits, **_quantities(res, "requests", path)}
    for name, request in requests.items():
        if name in limits and request > limits[name]:
            raise fields.InvalidValueError(
                f"must be less than or equal to the {name} limit", path=f"{path}.requests.{name}"
            )

    def milli(values: Mapping[str, Decimal]) -> int:
        return quantities.ceil(values["cpu"] * 1000) if "cpu" in values else 0

    return pods.Resources(
        cpu_request_milli=milli(requests),
        cpu_limit_milli=milli(limits),
        memory_request=quantities.ceil(requests.get("memory", Decimal(0))),
        memory_limit=quantities.ceil(limits.get("memory", Decimal(0))),
    )


def _probe(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    return fields.mapping(obj, key, path) or None


def _container_restart_policy(obj: Mapping[str, Any], path: str, init: bool) -> str:
    value = fields.string(obj, "restartPolicy", path)
    if not value:
        return ""
    if init and value != "Always":
        raise fields.InvalidValueError(
            f'unsupported value "{value}": init containers may only set "Always" (a sidecar)',
            path=f"{path}.restartPolicy",
        )
    return fields.one_of(value, apifields.RESTART_POLICIES, f"{path}.restartPolicy")


def _container(obj: Mapping[str, Any], path: str, *, init: bool, strict: bool) -> pods.Container:
    if strict:
        fields.check_fields(obj, apifields.CONTAINER_FIELDS, path)
    image = fields.string(obj, "image", path, required=True)
    policy = fields.string(obj, "imagePullPolicy", path) or defaulting.default_pull_policy(image)
    message_policy = fields.string(obj, "terminationMessagePolicy", path) or "File"
    fields.one_of(message_policy, apifields.MESSAGE_POLICIES, f"{path}.terminationMessagePolicy")
    if strict:
        podfields.check_refused(obj, "container", path)
    fields.sequence(obj, "resizePolicy", path)
    container = pods.Container(
        name=names.dns_label(fields.string(obj, "name", path, required=True), f"{path}.name"),
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
        ports=fields.items(obj, "ports", path, lambda item, p: _port(item, p, strict)),
        volume_mounts=fields.items(
            obj, "volumeMounts", path, lambda item, p: _mount(item, p, strict)
        ),
        resources=_resources(obj, path, strict),
        restart_policy=_container_restart_policy(obj, path, init),
        termination_message_path=fields.string(obj, "terminationMessagePath", path)
        or "/dev/termination-log",
        termination_message_policy=message_policy,
        readiness_probe=_probe(obj, "readinessProbe", path),
        liveness_probe=_probe(obj, "livenessProbe", path),
        startup_probe=_probe(obj, "startupProbe", path),
        lifecycle=_probe(obj, "lifecycle", path),
        stdin=fields.boolean(obj, "stdin", path),
        stdin_once=fields.boolean(obj, "stdinOnce", path),
        tty=fields.boolean(obj, "tty", path),
        security_context=securityspecs.container_security_context(obj, path, strict=strict),
    )
    _check_probes(container, path, init=init)
    _check_propagation(container, path)
    return container


def _check_probes(container: pods.Container, path: str, *, init: bool) -> None:
    """Probes are validated when the manifest is read, not when a prober first runs them."""
    try:
        parsed = probes.container_probes(container, path=path)
    except probes.ProbeError as exc:
        raise fields.InvalidValueError(exc.message, path=exc.path) from exc
    has_probe = parsed.startup or parsed.liveness or parsed.readiness
    if init and has_probe and container.restart_policy != "Always":
        raise fields.InvalidValueError(
            "init containers may not have probes (only sidecars may)", path=path
        )


def containers(spec: Mapping[str, Any], key: str, *, strict: bool) -> tuple[pods.Container, ...]:
    """The containers of `spec[key]`; `key` is "containers" or "initContainers"."""
    init = key == "initContainers"
    return fields.items(
        spec, key, "spec", lambda item, path: _container(item, path, init=init, strict=strict)
    )

