"""The pod's and the containers' `securityContext`, plus the pod's namespace and OS fields,
parsed and checked as the API server checks them (pkg/apis/core/validation).

Errors are the `fields.ManifestError` tree, with the field path of the offending value.
What the node can and cannot honour (AppArmor, SELinux, user namespaces, sysctls) is not
decided here but at admission (`model.core.admission`), as the kubelet does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from nodelet.model.core import fields, pods, sysctls
from nodelet.model.parsing import apifields

# The API server's bounds for user and group IDs.
MAX_ID = 2147483647
# A sysctl name: segments of lowercase letters, digits, '-' and '_', separated by '.' or '/'.
_SYSCTL_SEGMENT = r"[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
SYSCTL_NAME = re.compile(rf"^({_SYSCTL_SEGMENT}[\./])*{_SYSCTL_SEGMENT}\Z")
MAX_SYSCTL_NAME = 253
# validateAppArmorProfileField: PATH_MAX - 1.
MAX_APPARMOR_PROFILE = 4095


def _id(obj: Mapping[str, Any], key: str, path: str) -> int | None:
    return fields.integer(obj, key, path, low=0, high=MAX_ID)


def _profile(
    obj: Mapping[str, Any], key: str, path: str, strict: bool
) -> pods.SeccompProfile | None:
    """A seccompProfile or appArmorProfile: a type, and a relative profile path for Localhost."""
    raw = fields.mapping(obj, key, path)
    if not raw:
        return None
    path = fields.join(path, key)
    if strict:
        fields.check_fields(raw, apifields.PROFILE_FIELDS, path)
    type_ = fields.string(raw, "type", path, required=True)
    fields.one_of(type_, apifields.PROFILE_TYPES, f"{path}.type")
    local = fields.string(raw, "localhostProfile", path)
    if type_ == "Localhost" and not local:
        raise fields.InvalidValueError(
            "required: the profile to use when type is Localhost", path=f"{path}.localhostProfile"
        )
    if type_ != "Localhost" and local:
        raise fields.InvalidValueError(
            "may only be set when type is Localhost", path=f"{path}.localhostProfile"
        )
    if local and key == "appArmorProfile":
        _apparmor_localhost(local, f"{path}.localhostProfile")
    if local and key == "seccompProfile":
        if local.startswith("/"):
            raise fields.InvalidValueError(
                "must be a relative path (under the node's seccomp profile root)",
                path=f"{path}.localhostProfile",
            )
        if ".." in PurePosixPath(local).parts:
            raise fields.InvalidValueError("must not contain '..'", path=f"{path}.localhostProfile")
    return pods.SeccompProfile(type=type_, localhost_profile=local)


def _apparmor_localhost(local: str, path: str) -> None:
    if local != local.strip():
        raise fields.InvalidValueError("must not be padded with whitespace", path=path)
    if len(local) > MAX_APPARMOR_PROFILE:
        raise fields.InvalidValueError(
            f"Too long: may not be more than {MAX_APPARMOR_PROFILE} bytes", path=path
        )


def _selinux(obj: Mapping[str, Any], path: str, strict: bool) -> pods.SELinuxOptions | None:
    raw = fields.mapping(obj, "seLinuxOptions", path)
    if not raw:
        return None
    path = fields.join(path, "seLinuxOptions")
    if strict:
        fields.check_fields(raw, apifields.SELINUX_FIELDS, path)
    return pods.SELinuxOptions(
        **{key: fields.string(raw, key, path) for key in ("user", "role", "type", "level")}
    )


def _windows(obj: Mapping[str, Any], path: str, strict: bool) -> Mapping[str, Any] | None:
    raw = fields.mapping(obj, "windowsOptions", path)
    if raw and strict:
        where = fields.join(path, "windowsOptions")
        fields.check_fields(raw, apifields.WINDOWS_OPTIONS_FIELDS, where)
    return raw or None


def _capabilities(obj: Mapping[str, Any], path: str, strict: bool) -> pods.Capabilities | None:
    raw = fields.mapping(obj, "capabilities", path)
    if not raw:
        return None
    path = fields.join(path, "capabilities")
    if strict:
        fields.check_fields(raw, apifields.CAPABILITIES_FIELDS, path)
    return pods.Capabilities(
        add=fields.string_list(raw, "add", path), drop=fields.string_list(raw, "drop", path)
    )


def container_security_context(
    obj: Mapping[str, Any], path: str, *, strict: bool
) -> pods.SecurityContext | None:
    """A container's `securityContext` (None when absent)."""
    raw = fields.mapping(obj, "securityContext", path)
    if not raw:
        return None
    path = fields.join(path, "securityContext")
    if strict:
        fields.check_fields(raw, apifields.SECURITY_CONTEXT_FIELDS, path)
    proc_mount = fields.string(raw, "procMount", path) or None
    if proc_mount is not None:
        fields.one_of(proc_mount, apifields.PROC_MOUNT_TYPES, f"{path}.procMount")
    sc = pods.SecurityContext(
        run_as_user=_id(raw, "runAsUser", path),
        run_as_group=_id(raw, "runAsGroup", path),
        run_as_non_root=fields.optional_boolean(raw, "runAsNonRoot", path),
        privileged=fields.optional_boolean(raw, "privileged", path),
        allow_privilege_escalation=fields.optional_boolean(raw, "allowPrivilegeEscalation", path),
        read_only_root_filesystem=fields.optional_boolean(raw, "readOnlyRootFilesystem", path),
        capabilities=_capabilities(raw, path, strict),
        seccomp_profile=_profile(raw, "seccompProfile", path, strict),
        app_armor_profile=_profile(raw, "appArmorProfile", path, strict),
        se_linux_options=_selinux(raw, path, strict),
        proc_mount=proc_mount,
        windows_options=_windows(raw, path, strict),
    )
    _check_escalation(sc, path)
    return sc


def _check_escalation(sc: pods.SecurityContext, path: str) -> None:
    """No no_new_privs where the process is meant to gain privileges (the API server's rule)."""
    if sc.allow_privilege_escalation is not False:
        return
    if sc.privileged:
        raise fields.InvalidValueError(
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true", path=path
        )
    added = sc.capabilities.add if sc.capabilities else ()
    if "CAP_SYS_ADMIN" in added:  # the API server checks the literal name only
        raise fields.InvalidValueError(
            "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            path=path,
        )


def _groups(raw: Mapping[str, Any], path: str) -> tuple[int, ...]:
    out = []
    for i, group in enumerate(fields.sequence(raw, "supplementalGroups", path)):
        key = f"supplementalGroups[{i}]"
        value = _id({key: group}, key, path)
        if value is None:
            raise fields.InvalidValueError("required: a group ID", path=f"{path}.{key}")
        out.append(value)
    return tuple(out)


def _sysctl(item: Mapping[str, Any], path: str) -> tuple[str, str]:
    name = fields.string(item, "name", path, required=True)
    if len(name) > MAX_SYSCTL_NAME or not SYSCTL_NAME.match(name):
        raise fields.InvalidValueError(
            f'"{name}" is not a valid sysctl name: at most {MAX_SYSCTL_NAME} characters of '
            "lowercase letters, digits, '-' and '_' in segments separated by '.' or '/'",
            path=f"{path}.name",
        )
    # The API server takes a missing value as "" (it validates only names).
    return name, fields.string(item, "value", path)


def _sysctls(raw: Mapping[str, Any], path: str, strict: bool) -> tuple[tuple[str, str], ...]:
    def parse(item: Mapping[str, Any], item_path: str) -> tuple[str, str]:
        if strict:
            fields.check_fields(item, apifields.SYSCTL_FIELDS, item_path)
        return _sysctl(item, item_path)

    out = fields.items(raw, "sysctls", path, parse)
    seen: set[str] = set()
    for i, (name, _) in enumerate(out):
        if sysctls.normalize(name) in seen:
            raise fields.InvalidValueError(
                f'duplicate sysctl "{name}"', path=f"{path}.sysctls[{i}].name"
            )
        seen.add(sysctls.normalize(name))
    return out


def _optional_choice(
    raw: Mapping[str, Any], key: str, allowed: tuple[str, ...], path: str
) -> str | None:
    value = fields.string(raw, key, path) or None
    if value is not None:
        fields.one_of(value, allowed, f"{path}.{key}")
    return value


def pod_security_context(spec: Mapping[str, Any], *, strict: bool) -> pods.PodSecurityContext:
    raw = fields.mapping(spec, "securityContext", "spec")
    path = "spec.securityContext"
    if strict:
        fields.check_fields(raw, apifields.POD_SECURITY_CONTEXT_FIELDS, path)
    return pods.PodSecurityContext(
        run_as_user=_id(raw, "runAsUser", path),
        run_as_group=_id(raw, "runAsGroup", path),
        run_as_non_root=fields.optional_boolean(raw, "runAsNonRoot", path),
        supplemental_groups=_groups(raw, path),
        supplemental_groups_policy=_optional_choice(
            raw, "supplementalGroupsPolicy", apifields.SUPPLEMENTAL_GROUPS_POLICIES, path
        ),
        fs_group=_id(raw, "fsGroup", path),
        fs_group_change_policy=_optional_choice(
            raw, "fsGroupChangePolicy", apifields.FS_GROUP_CHANGE_POLICIES, path
        ),
        sysctls=_sysctls(raw, path, strict),
        seccomp_profile=_profile(raw, "seccompProfile", path, strict),
        app_armor_profile=_profile(raw, "appArmorProfile", path, strict),
        se_linux_options=_selinux(raw, path, strict),
        se_linux_change_policy=_optional_choice(
            raw, "seLinuxChangePolicy", apifields.SELINUX_CHANGE_POLICIES, path
        ),
        windows_options=_windows(raw, path, strict),
    )


def os_name(spec: Mapping[str, Any], *, strict: bool) -> str:
    raw = fields.mapping(spec, "os", "spec")
    if not raw:
        return ""
    if strict:
        fields.check_fields(raw, apifields.OS_FIELDS, "spec.os")
    return fields.one_of(
        fields.string(raw, "name", "spec.os", required=True), apifields.OS_NAMES, "spec.os.name"
    )


def check_pod_security(spec: pods.PodSpec) -> None:
    """The API server's checks across the pod's security fields."""
    if spec.host_pid and spec.share_process_namespace:
        raise fields.InvalidValueError(
            "ShareProcessNamespace and HostPID cannot both be enabled",
            path="spec.shareProcessNamespace",
        )
    if spec.host_users is False:
        for key, on in (("hostNetwork", spec.host_network), ("hostPID", spec.host_pid),
                        ("hostIPC", spec.host_ipc)):
            if on:
                raise fields.InvalidValueError(
                    f"when `hostUsers` is false, `{key}` must be false", path=f"spec.{key}"
                )
    groups = (("initContainers", spec.init_containers), ("containers", spec.containers))
    for key, containers in groups:
        for i, container in enumerate(containers):
            sc = container.security_context
            if sc is not None and sc.proc_mount == "Unmasked" and spec.host_users is not False:
                raise fields.InvalidValueError(
                    "`hostUsers` must be false to use `Unmasked`",
                    path=f"spec.{key}[{i}].securityContext.procMount",
                )


def check_host_sysctls(spec: pods.PodSpec) -> None:
    """ValidateHostSysctl: a pod in the node's network or IPC namespace cannot set its sysctls.
    The API server lets older pods keep them (AllowNamespacedSysctlsForHostNetAndHostIPC), so a
    pod it sends is refused at admission instead (SysctlForbidden), as by the kubelet."""
    for i, (name, _) in enumerate(spec.security_context.sysctls):
        namespace = sysctls.namespace(name)
        for shared, key in ((spec.host_network, "hostNetwork"), (spec.host_ipc, "hostIPC")):
            if shared and namespace == ("net" if key == "hostNetwork" else "ipc"):
                raise fields.InvalidValueError(
                    f"\"{name}\": may not be specified when '{key}' is true",
                    path=f"spec.securityContext.sysctls[{i}].name",
                )
