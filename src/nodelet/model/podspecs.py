"""The pod spec: its fields, volumes and the checks across them (unique names, declared volumes,
host ports), parsed into `pods.PodSpec`. Errors are the `fields.ManifestError` tree.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any, cast

from nodelet.model import (
    affinity,
    apifields,
    containerspecs,
    fields,
    names,
    podfields,
    pods,
    securityspecs,
)

# ---------------------------------------------------------------------------------------------
# Volumes


def _volume_source(obj: Mapping[str, Any], path: str, strict: bool) -> str:
    keys = [str(k) for k in obj if k != "name"]
    if strict:
        fields.check_fields(obj, apifields.VOLUME_SOURCES | {"name"}, path)
    given = [k for k in keys if k in apifields.VOLUME_SOURCES and obj[k] is not None]
    if not given:
        nulls = [k for k in keys if k in apifields.VOLUME_SOURCES]
        hint = f'; "{nulls[0]}" is null, write `{nulls[0]}: {{}}` for its defaults' if nulls else ""
        raise fields.InvalidValueError(
            f"must specify a volume type (one of {', '.join(apifields.SUPPORTED_VOLUMES)}){hint}",
            path=path,
        )
    if len(given) > 1:
        raise fields.InvalidValueError(
            f"may not specify more than 1 volume type (found {', '.join(given)})", path=path
        )
    if given[0] not in apifields.SUPPORTED_VOLUMES:
        raise fields.UnsupportedError(
            f'unsupported volume type "{given[0]}": nodelet supports '
            f"{', '.join(apifields.SUPPORTED_VOLUMES)}",
            path=f"{path}.{given[0]}",
        )
    return given[0]


_REQUIRED_SOURCE_FIELDS = {"hostPath": "path", "configMap": "name", "secret": "secretName"}


def _volume(obj: Mapping[str, Any], path: str, strict: bool) -> pods.Volume:
    name = names.dns_label(fields.string(obj, "name", path, required=True), f"{path}.name")
    source_type = _volume_source(obj, path, strict)
    source = fields.mapping(obj, source_type, path)
    source_path = f"{path}.{source_type}"
    required = _REQUIRED_SOURCE_FIELDS.get(source_type)
    if required:
        fields.string(source, required, source_path, required=True)
    if source_type == "projected":
        fields.sequence(source, "sources", source_path)
    return pods.Volume(name=name, source_type=source_type, source=source)


# ---------------------------------------------------------------------------------------------
# Pod spec


def _unique_names(spec: pods.PodSpec) -> None:
    seen: dict[str, str] = {}
    named = [("initContainers", c) for c in spec.init_containers]
    named += [("containers", c) for c in spec.containers]
    counters: dict[str, int] = {}
    for key, container in named:
        index = counters[key] = counters.get(key, -1) + 1
        path = f"spec.{key}[{index}].name"
        if container.name in seen:
            raise fields.InvalidValueError(
                f'duplicate container name "{container.name}" (also {seen[container.name]}): '
                "names must be unique across initContainers and containers",
                path=path,
            )
        seen[container.name] = path


def _check_volumes(spec: pods.PodSpec) -> None:
    declared: dict[str, int] = {}
    for i, volume in enumerate(spec.volumes):
        if volume.name in declared:
            first = f"spec.volumes[{declared[volume.name]}]"
            raise fields.InvalidValueError(
                f'duplicate volume name "{volume.name}" (also {first})',
                path=f"spec.volumes[{i}].name",
            )
        declared[volume.name] = i
    groups = (("initContainers", spec.init_containers), ("containers", spec.containers))
    for key, containers in groups:
        for i, container in enumerate(containers):
            _check_mounts(container, f"spec.{key}[{i}]", declared)


def _check_mounts(container: pods.Container, path: str, declared: Mapping[str, int]) -> None:
    paths: set[str] = set()
    for j, mount in enumerate(container.volume_mounts):
        mount_path = f"{path}.volumeMounts[{j}]"
        if mount.name not in declared:
            known = ", ".join(declared) or "none"
            raise fields.InvalidValueError(
                f'volume "{mount.name}" is not declared in spec.volumes (declared: {known})',
                path=f"{mount_path}.name",
            )
        if mount.mount_path in paths:
            raise fields.InvalidValueError(
                f'mountPath "{mount.mount_path}" must be unique', path=f"{mount_path}.mountPath"
            )
        paths.add(mount.mount_path)


def _check_host_ports(spec: pods.PodSpec) -> None:
    """With hostNetwork the container port is the host port: they must agree."""
    if not spec.host_network:
        return
    for i, container in enumerate(spec.containers):
        for j, port in enumerate(container.ports):
            if port.host_port and port.host_port != port.container_port:
                raise fields.InvalidValueError(
                    "must match containerPort when hostNetwork is true",
                    path=f"spec.containers[{i}].ports[{j}].hostPort",
                )


def _dns_config(spec: Mapping[str, Any], policy: str) -> pods.PodDNSConfig | None:
    raw = fields.mapping(spec, "dnsConfig", "spec")
    if policy == "None" and not raw.get("nameservers"):
        raise fields.InvalidValueError(
            'required when dnsPolicy is "None": at least one nameserver', path="spec.dnsConfig"
        )
    if not raw:
        return None

    def option(item: Mapping[str, Any], path: str) -> str:
        name = fields.string(item, "name", path, required=True)
        value = fields.string(item, "value", path)
        return f"{name}:{value}" if value else name

    return pods.PodDNSConfig(
        nameservers=fields.string_list(raw, "nameservers", "spec.dnsConfig"),
        searches=fields.string_list(raw, "searches", "spec.dnsConfig"),
        options=fields.items(raw, "options", "spec.dnsConfig", option),
    )


def _legacy_ip(value: str, path: str) -> str:
    """An IP checked as the API server checks legacy fields (hostAliases): IPv4 parts may
    have leading zeros; IPv6 zones are not IPs."""
    parts = value.split(".")
    dotted = len(parts) == 4 and all(p.isascii() and p.isdigit() for p in parts)
    candidate = ".".join(str(int(p)) for p in parts) if dotted else value
    try:
        valid = "%" not in value and ipaddress.ip_address(candidate) is not None
    except ValueError:
        valid = False
    if not valid:
        raise fields.InvalidValueError(
            f'"{value}" must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)', path=path
        )
    return value


def _host_alias(item: Mapping[str, Any], path: str, strict: bool) -> pods.HostAlias:
    if strict:
        fields.check_fields(item, apifields.HOST_ALIAS_FIELDS, path)
    hostnames = fields.string_list(item, "hostnames", path)
    for j, hostname in enumerate(hostnames):
        names.dns_subdomain(hostname, f"{path}.hostnames[{j}]")
    ip = _legacy_ip(fields.string(item, "ip", path), f"{path}.ip")
    return pods.HostAlias(ip=ip, hostnames=hostnames)


def _readiness_gate(item: Mapping[str, Any], path: str) -> str:
    gate = fields.string(item, "conditionType", path, required=True)
    names.qualified_name(gate, f"{path}.conditionType")
    return gate


def _image_pull_secrets(spec: Mapping[str, Any], strict: bool) -> tuple[str, ...]:
    """Names of the Secrets in `imagePullSecrets`, in order, each once. The API server only
    checks that nothing but `name` is set (an empty name gets a warning, and the kubelet skips
    it); a static manifest must name each Secret."""

    def name(item: Mapping[str, Any], path: str) -> str:
        if strict:
            fields.check_fields(item, apifields.LOCAL_REFERENCE_FIELDS, path)
        return fields.string(item, "name", path, required=strict)

    found = fields.items(spec, "imagePullSecrets", "spec", name)
    return tuple(dict.fromkeys(n for n in found if n))


def _type_only(spec: Mapping[str, Any]) -> None:
    """Fields nodelet does not read, checked for their type as the API server would."""
    for key in apifields.SPEC_MAPPINGS:
        fields.mapping(spec, key, "spec")
    for key in apifields.SPEC_LISTS:
        fields.sequence(spec, key, "spec")
    for key in apifields.SPEC_STRINGS:
        fields.string(spec, key, "spec")
    for key in apifields.SPEC_BOOLS:
        fields.boolean(spec, key, "spec")
    fields.integer(spec, "priority", "spec")


def pod_spec(obj: Mapping[str, Any], *, strict: bool) -> pods.PodSpec:
    """The `spec` of the v1 pod `obj`, each field checked on its own (see `validate_spec`)."""
    if obj.get("spec") is None:
        raise fields.InvalidValueError(
            "required: a mapping with at least one container", path="spec"
        )
    spec = fields.mapping(obj, "spec", "")
    if strict:
        fields.check_fields(spec, apifields.SPEC_FIELDS, "spec")
    if strict:  # pods from the API: at admission (`Pod.refused`), so they are reported
        podfields.check_refused(spec, "spec", "spec")
    _type_only(spec)
    containers = containerspecs.containers(spec, "containers", strict=strict)
    if not containers:
        raise fields.InvalidValueError("required: at least one container", path="spec.containers")
    restart = fields.string(spec, "restartPolicy", "spec") or "Always"
    dns_policy = fields.one_of(
        fields.string(spec, "dnsPolicy", "spec") or "ClusterFirst",
        apifields.DNS_POLICIES,
        "spec.dnsPolicy",
    )
    hostname = fields.string(spec, "hostname", "spec")
    subdomain = fields.string(spec, "subdomain", "spec")
    grace = fields.integer(spec, "terminationGracePeriodSeconds", "spec", low=0)
    return pods.PodSpec(
        containers=containers,
        init_containers=containerspecs.containers(spec, "initContainers", strict=strict),
        volumes=fields.items(spec, "volumes", "spec", lambda v, p: _volume(v, p, strict)),
        restart_policy=cast(
            pods.RestartPolicy,
            fields.one_of(restart, apifields.RESTART_POLICIES, "spec.restartPolicy"),
        ),
        host_network=fields.boolean(spec, "hostNetwork", "spec"),
        hostname=hostname and names.dns_label(hostname, "spec.hostname"),
        subdomain=subdomain and names.dns_label(subdomain, "spec.subdomain"),
        dns_policy=dns_policy,
        dns_config=_dns_config(spec, dns_policy),
        termination_grace_period_seconds=30 if grace is None else grace,
        active_deadline_seconds=fields.integer(spec, "activeDeadlineSeconds", "spec", low=1),
        readiness_gates=fields.items(spec, "readinessGates", "spec", _readiness_gate),
        host_aliases=fields.items(
            spec, "hostAliases", "spec", lambda item, path: _host_alias(item, path, strict)
        ),
        node_name=fields.string(spec, "nodeName", "spec"),
        runtime_class_name=fields.string(spec, "runtimeClassName", "spec"),
        image_pull_secrets=_image_pull_secrets(spec, strict),
        host_pid=fields.boolean(spec, "hostPID", "spec"),
        host_ipc=fields.boolean(spec, "hostIPC", "spec"),
        share_process_namespace=fields.boolean(spec, "shareProcessNamespace", "spec"),
        security_context=securityspecs.pod_security_context(spec, strict=strict),
        host_users=fields.optional_boolean(spec, "hostUsers", "spec"),
        os_name=securityspecs.os_name(spec, strict=strict),
        node_selector=fields.string_map(spec, "nodeSelector", "spec"),
        required_node_affinity=affinity.required_terms(spec),
    )


def validate_spec(spec: pods.PodSpec) -> None:
    """The checks across fields: unique container names, declared volumes, host ports."""
    _unique_names(spec)
    _check_volumes(spec)
    _check_host_ports(spec)
    securityspecs.check_pod_security(spec)

