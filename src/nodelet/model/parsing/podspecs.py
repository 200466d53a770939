"""The pod spec: its fields and the checks across them (unique names, declared volumes, host
ports), parsed into `pods.PodSpec` and checked as the API server's ValidatePodSpec does, at its
field paths. Volumes are `volumespecs`, containers `containerspecs`, the security fields
`securityspecs`. Errors are the `fields.ManifestError` tree.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any, cast

from nodelet.model.core import envfiles, fields, names, pods
from nodelet.model.parsing import (
    affinityspecs,
    apifields,
    containerspecs,
    podfields,
    resourcespecs,
    securityspecs,
    volumespecs,
)

# ---------------------------------------------------------------------------------------------
# Pod spec


def _unique_names(spec: pods.PodSpec) -> None:
    """Container names are unique across the pod. As kube-apiserver: the containers are
    checked first, then each init container against them and the init containers before it,
    so a clash between the two lists is reported at spec.initContainers[i].name."""
    seen: dict[str, str] = {}
    named = [("containers", i, c) for i, c in enumerate(spec.containers)]
    named += [("initContainers", i, c) for i, c in enumerate(spec.init_containers)]
    for key, index, container in named:
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
    kinds = {v.name: v.source_type for v in spec.volumes}
    groups = (("initContainers", spec.init_containers), ("containers", spec.containers))
    for key, containers in groups:
        for i, container in enumerate(containers):
            _check_mounts(container, f"spec.{key}[{i}]", declared, kinds)
            _check_devices(container, f"spec.{key}[{i}]", kinds)
    for key, containers in (*groups, ("ephemeralContainers", spec.ephemeral_containers)):
        for i, container in enumerate(containers):
            _check_env_files(container, f"spec.{key}[{i}]", kinds)


def _check_env_files(container: pods.Container, path: str, kinds: Mapping[str, str]) -> None:
    """validateFileKeyRefVolumes: a fileKeyRef names an emptyDir volume of the pod."""
    for j, var in enumerate(container.env):
        ref = envfiles.file_key_ref(var.value_from or {})
        if ref is None:
            continue
        at = f"{path}.env[{j}].valueFrom.fileKeyRef.volumeName"
        if ref.volume not in kinds:
            known = ", ".join(kinds) or "none"
            raise fields.InvalidValueError(
                f'volume "{ref.volume}" is not declared in spec.volumes (declared: {known})',
                path=at)
        if kinds[ref.volume] != "emptyDir":
            raise fields.InvalidValueError(
                f'"{ref.volume}": referenced volume must be of type emptyDir', path=at)


def _check_mounts(container: pods.Container, path: str, declared: Mapping[str, int],
                  kinds: Mapping[str, str]) -> None:
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


def _check_devices(container: pods.Container, path: str, kinds: Mapping[str, str]) -> None:
    """ValidateVolumeDevices: each names a claim volume (a PVC or a generic ephemeral one),
    once, at a path of its own that no volumeMount of the container has."""
    mounted = {m.name for m in container.volume_mounts}
    mount_paths = {m.mount_path for m in container.volume_mounts}
    names_: set[str] = set()
    device_paths: set[str] = set()
    for j, device in enumerate(container.volume_devices):
        at = f"{path}.volumeDevices[{j}]"
        if device.name not in kinds:
            raise fields.InvalidValueError(f'"{device.name}": not found', path=f"{at}.name")
        if kinds[device.name] not in ("persistentVolumeClaim", "ephemeral"):
            raise fields.InvalidValueError(
                f'"{device.name}": can only use volume source type of PersistentVolumeClaim '
                "or Ephemeral for block mode", path=f"{at}.name")
        if device.name in names_ or device.name in mounted:
            why = "must be unique" if device.name in names_ else \
                "must not already exist in volumeMounts"
            raise fields.InvalidValueError(f'"{device.name}": {why}', path=f"{at}.name")
        if device.device_path in device_paths or device.device_path in mount_paths:
            why = "must be unique" if device.device_path in device_paths else \
                "must not already exist as a path in volumeMounts"
            raise fields.InvalidValueError(f'"{device.device_path}": {why}',
                                           path=f"{at}.devicePath")
        names_.add(device.name)
        device_paths.add(device.device_path)


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


# validatePodDNSConfig's limits (from the resolver's: glibc reads 3 nameservers).
MAX_NAMESERVERS = 3
MAX_SEARCHES = 32
MAX_SEARCH_CHARS = 2048


def _searches(raw: Mapping[str, Any], path: str) -> tuple[str, ...]:
    searches = fields.string_list(raw, "searches", path)
    if len(searches) > MAX_SEARCHES:
        raise fields.InvalidValueError(
            f"must not have more than {MAX_SEARCHES} search paths (found {len(searches)})",
            path=f"{path}.searches",
        )
    if len(" ".join(searches)) > MAX_SEARCH_CHARS:
        raise fields.InvalidValueError(
            f"must not have more than {MAX_SEARCH_CHARS} characters (including spaces) in the "
            "search list",
            path=f"{path}.searches",
        )
    for i, search in enumerate(searches):
        # RelaxedDNSSearchValidation (on by default): "." and underscores are allowed.
        if search != ".":
            names.dns_subdomain_with_underscore(search.removesuffix("."),
                                                f"{path}.searches[{i}]")
    return searches


def _nameservers(raw: Mapping[str, Any], path: str, policy: str) -> tuple[str, ...]:
    nameservers = fields.string_list(raw, "nameservers", path)
    if policy == "None" and not nameservers:
        raise fields.InvalidValueError(
            "required: must provide at least one DNS nameserver when `dnsPolicy` is None",
            path=f"{path}.nameservers",
        )
    if len(nameservers) > MAX_NAMESERVERS:
        raise fields.InvalidValueError(
            f"must not have more than {MAX_NAMESERVERS} nameservers (found {len(nameservers)})",
            path=f"{path}.nameservers",
        )
    for i, nameserver in enumerate(nameservers):
        _legacy_ip(nameserver, f"{path}.nameservers[{i}]")
    return nameservers


def _dns_option(item: Mapping[str, Any], path: str, strict: bool) -> str:
    if strict:
        fields.check_fields(item, apifields.DNS_OPTION_FIELDS, path)
    name = fields.string(item, "name", path)
    if not name:
        raise fields.InvalidValueError("required: must not be empty (an option name)", path=path)
    value = fields.string(item, "value", path)
    return f"{name}:{value}" if value else name


def _dns_config(spec: Mapping[str, Any], policy: str, strict: bool) -> pods.PodDNSConfig | None:
    """validatePodDNSConfig."""
    raw, path = fields.mapping(spec, "dnsConfig", "spec"), "spec.dnsConfig"
    if policy == "None" and spec.get("dnsConfig") is None:
        raise fields.InvalidValueError(
            'required: must provide `dnsConfig` when `dnsPolicy` is None', path=path
        )
    if strict:
        fields.check_fields(raw, apifields.DNS_CONFIG_FIELDS, path)
    nameservers = _nameservers(raw, path, policy)
    searches = _searches(raw, path)
    options = fields.items(raw, "options", path, lambda item, p: _dns_option(item, p, strict))
    if spec.get("dnsConfig") is None:
        return None
    return pods.PodDNSConfig(nameservers=nameservers, searches=searches, options=options)


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


def _readiness_gate(item: Mapping[str, Any], path: str, strict: bool) -> str:
    if strict:
        fields.check_fields(item, apifields.READINESS_GATE_FIELDS, path)
    gate = fields.string(item, "conditionType", path)
    names.qualified_name(gate, f"{path}.conditionType")
    return gate


def _scheduling_gates(spec: Mapping[str, Any], strict: bool) -> None:
    """validateSchedulingGates: qualified names, each once."""

    def gate(item: Mapping[str, Any], path: str) -> str:
        if strict:
            fields.check_fields(item, apifields.SCHEDULING_GATE_FIELDS, path)
        name = fields.string(item, "name", path)
        names.qualified_name(name, path)
        return name

    seen: set[str] = set()
    for i, name in enumerate(fields.items(spec, "schedulingGates", "spec", gate)):
        if name in seen:
            raise fields.InvalidValueError(
                f'duplicate value "{name}"', path=f"spec.schedulingGates[{i}]"
            )
        seen.add(name)


def _toleration(item: Mapping[str, Any], path: str, strict: bool) -> pods.Toleration:
    """ValidateTolerations; the node reads tolerations only at admission under pressure."""
    if strict:
        fields.check_fields(item, apifields.TOLERATION_FIELDS, path)
    key, value = fields.string(item, "key", path), fields.string(item, "value", path)
    operator, effect = fields.string(item, "operator", path), fields.string(item, "effect", path)
    if key:
        names.qualified_name(key, f"{path}.key")
    if not key and operator != "Exists":
        raise fields.InvalidValueError(
            'operator must be Exists when `key` is empty, which means "match all values and all '
            'keys"',
            path=f"{path}.operator",
        )
    if fields.integer(item, "tolerationSeconds", path) is not None and effect != "NoExecute":
        raise fields.InvalidValueError(
            "effect must be 'NoExecute' when `tolerationSeconds` is set", path=f"{path}.effect"
        )
    fields.one_of(operator or "Equal", apifields.TOLERATION_OPERATORS, f"{path}.operator")
    if operator == "Exists" and value:
        raise fields.InvalidValueError(
            "value must be empty when `operator` is 'Exists'", path=f"{path}.operator"
        )
    if operator != "Exists":
        names.label_value(value, f"{path}.operator")  # the API server's path, not `value`
    if effect:
        fields.one_of(effect, apifields.TAINT_EFFECTS, f"{path}.effect")
    return pods.Toleration(key=key, operator=operator or "Equal", value=value, effect=effect)


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


def _names(spec: Mapping[str, Any]) -> str:
    """The names ValidatePodSpec checks: a node, a ServiceAccount and classes are DNS
    subdomains; nodeSelector holds labels. Returns the ServiceAccount's name."""
    # serviceAccount is the deprecated name of serviceAccountName, which wins.
    account = fields.string(spec, "serviceAccountName", "spec") or fields.string(
        spec, "serviceAccount", "spec"
    )
    for key, value in (("serviceAccountName", account),
                       ("nodeName", fields.string(spec, "nodeName", "spec")),
                       ("priorityClassName", fields.string(spec, "priorityClassName", "spec")),
                       ("runtimeClassName", fields.string(spec, "runtimeClassName", "spec"))):
        if value:
            names.dns_subdomain(value, f"spec.{key}")
    if spec.get("runtimeClassName") == "":  # a set but empty pointer
        names.dns_subdomain("", "spec.runtimeClassName")
    for key, value in fields.string_map(spec, "nodeSelector", "spec").items():
        names.qualified_name(key, "spec.nodeSelector")
        names.label_value(value, "spec.nodeSelector", key=key)
    return account


def _scheduling(spec: Mapping[str, Any], strict: bool) -> None:
    """The scheduling fields, checked all the same (a node does not act on them)."""
    if spec.get("preemptionPolicy") is not None:
        fields.one_of(fields.string(spec, "preemptionPolicy", "spec"),
                      apifields.PREEMPTION_POLICIES, "spec.preemptionPolicy")
    _scheduling_gates(spec, strict)


def _token_needs_account(spec: Mapping[str, Any], account: str) -> None:
    """validatePodMetadataAndSpec: a projected token is the ServiceAccount's."""
    if account:
        return
    for path in volumespecs.projected_token_sources(fields.sequence(spec, "volumes", "spec")):
        raise fields.InvalidValueError(
            "forbidden: must not be specified when serviceAccountName is not set", path=path
        )


def _hostname_override(spec: Mapping[str, Any]) -> str:
    """spec.hostnameOverride, checked as kube-apiserver does: a DNS-1123 subdomain, not with
    setHostnameAsFQDN, not with hostNetwork."""
    if spec.get("hostnameOverride") is None:
        return ""
    value = names.dns_subdomain(fields.string(spec, "hostnameOverride", "spec"),
                                "spec.hostnameOverride")
    if fields.boolean(spec, "setHostnameAsFQDN", "spec"):
        raise fields.InvalidValueError("may not be set when setHostnameAsFQDN is true",
                                       path="spec.hostnameOverride")
    if fields.boolean(spec, "hostNetwork", "spec"):
        raise fields.InvalidValueError("may not be set when hostNetwork is true",
                                       path="spec.hostnameOverride")
    return value


def _grace(spec: Mapping[str, Any], strict: bool) -> int:
    """terminationGracePeriodSeconds (an int64; 30 when not set). The API server takes a
    negative value with a warning that it "will be treated as 1": a pod from it gets 1, a
    static manifest is told."""
    grace = fields.integer(spec, "terminationGracePeriodSeconds", "spec")
    if grace is None:
        return 30
    if grace < 0 and strict:
        raise fields.InvalidValueError(
            f"{grace} is out of range: must be at least 0 (the API server treats a negative "
            "value as 1, with a warning)",
            path="spec.terminationGracePeriodSeconds",
        )
    return 1 if grace < 0 else grace


def _ephemeral_containers(spec: Mapping[str, Any], strict: bool) -> tuple[pods.Container, ...]:
    """An API pod's; a manifest is a pod's creation, where the API server forbids them."""
    if strict and spec.get("ephemeralContainers"):
        raise fields.InvalidValueError(
            "Forbidden: cannot be set on create: ephemeral containers are added to a running "
            "API pod through its ephemeralcontainers subresource (kubectl debug)",
            path="spec.ephemeralContainers")
    return () if strict else containerspecs.ephemeral_containers(spec)


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
    override = _hostname_override(spec)
    _token_needs_account(spec, _names(spec))
    _scheduling(spec, strict)
    init_containers = containerspecs.containers(spec, "initContainers", strict=strict)
    out = pods.PodSpec(
        containers=containers,
        resources=resourcespecs.pod_resources(spec, containers, init_containers,
                                              strict=strict),
        overhead=resourcespecs.overhead(spec),
        init_containers=init_containers,
        ephemeral_containers=_ephemeral_containers(spec, strict),
        volumes=fields.items(
            spec, "volumes", "spec", lambda v, p: volumespecs.volume(v, p, strict=strict)
        ),
        restart_policy=cast(
            pods.RestartPolicy,
            fields.one_of(restart, apifields.RESTART_POLICIES, "spec.restartPolicy"),
        ),
        host_network=fields.boolean(spec, "hostNetwork", "spec"),
        hostname=hostname and names.dns_label(hostname, "spec.hostname"),
        subdomain=subdomain and names.dns_label(subdomain, "spec.subdomain"),
        dns_policy=dns_policy,
        dns_config=_dns_config(spec, dns_policy, strict),
        enable_service_links=spec.get("enableServiceLinks") is None
        or fields.boolean(spec, "enableServiceLinks", "spec"),
        set_hostname_as_fqdn=fields.boolean(spec, "setHostnameAsFQDN", "spec"),
        hostname_override=override,
        termination_grace_period_seconds=_grace(spec, strict),
        active_deadline_seconds=fields.integer(
            spec, "activeDeadlineSeconds", "spec", low=1, high=fields.INT32_MAX
        ),
        readiness_gates=fields.items(
            spec, "readinessGates", "spec", lambda item, p: _readiness_gate(item, p, strict)
        ),
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
        required_node_affinity=affinityspecs.required_terms(spec),
        priority=fields.integer(spec, "priority", "spec", bits=32),
        tolerations=fields.items(spec, "tolerations", "spec",
                                 lambda item, p: _toleration(item, p, strict)),
        resource_claims=fields.items(spec, "resourceClaims", "spec", _resource_claim),
    )
    if strict:
        securityspecs.check_host_sysctls(out)
    return out


def _resource_claim(item: Mapping[str, Any], path: str) -> pods.PodResourceClaim:
    """A `spec.resourceClaims` entry: exactly one of a claim's name and a template's."""
    claim = pods.PodResourceClaim(
        name=names.dns_label(fields.string(item, "name", path, required=True), f"{path}.name"),
        resource_claim_name=fields.string(item, "resourceClaimName", path),
        template_name=fields.string(item, "resourceClaimTemplateName", path))
    if bool(claim.resource_claim_name) == bool(claim.template_name):
        raise fields.InvalidValueError(
            "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`", path=path)
    return claim


def _check_claims(spec: pods.PodSpec) -> None:
    """Each container's `resources.claims` names an entry of `spec.resourceClaims`."""
    known = {c.name for c in spec.resource_claims}
    for key, containers in (("initContainers", spec.init_containers),
                            ("containers", spec.containers)):
        for i, container in enumerate(containers):
            for j, (name, _request) in enumerate(container.resources.claims):
                if name not in known:
                    raise fields.InvalidValueError(
                        f'Unsupported value: "{name}": must be one of the pod\'s '
                        "spec.resourceClaims", path=f"spec.{key}[{i}].resources.claims[{j}]")


def validate_spec(spec: pods.PodSpec) -> None:
    """The checks across fields: unique container names, declared volumes, host ports."""
    _unique_names(spec)
    _check_volumes(spec)
    _check_host_ports(spec)
    _check_claims(spec)
    securityspecs.check_pod_security(spec)

