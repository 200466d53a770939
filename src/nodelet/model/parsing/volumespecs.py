"""The pod's `spec.volumes[*]`, checked as the API server checks them (ValidateVolumes,
validateVolumeSource and its validate*VolumeSource functions): a DNS-label name, exactly one
source, and inside the sources nodelet runs, strict fields, types, required names, file modes
in 0..0777, item paths that stay inside the volume and hostPaths without '..'.

The paths of the errors are the API server's, quirks included: the errors of a downwardAPI item
name the source, not the item (`spec.volumes[0].downwardAPI.path`; the item is said in the
message), as validateDownwardAPIVolumeFile is handed the source's path. What the sources hold
is read when the volume is set up (`volumes`). Errors are the `fields.ManifestError` tree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from nodelet.model.core import downward, fields, names, pods, quantities, volumes
from nodelet.model.parsing import apifields

FILE_MODE_MESSAGE = "must be a number between 0 and 0777 (octal), both inclusive"
# validateVolumeSource's order: when two sources are set, the error names the later one.
_SOURCE_ORDER = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret",
    "nfs", "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs",
    "quobyte", "downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume",
    "photonPersistentDisk", "portworxVolume", "azureDisk", "storageos", "projected", "scaleIO",
    "csi", "ephemeral", "image",
)  # fmt: skip
# validVolumeDownwardAPIFieldPathExpressions (labels and annotations also with a subscript).
DOWNWARD_VOLUME_PATHS = (
    "metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations",
    "metadata.uid",
)  # fmt: skip
# validateContainerResourceDivisor's divisors.
_CPU_DIVISORS = frozenset({Decimal("0.001"), Decimal(1)})
_BYTE_DIVISORS = frozenset(
    {Decimal(1)} | {Decimal(1000**p) for p in range(1, 7)} | {Decimal(1024**p) for p in range(1, 7)}
)
_BYTE_DIVISOR_TEXT = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"
# A serviceAccountToken's lifetime: at least 10 minutes, at most 2^32 s.
_MIN_TOKEN_SECONDS, _MAX_TOKEN_SECONDS = 10 * 60, 1 << 32


# ---------------------------------------------------------------------------------------------
# Paths and modes


def no_backsteps(value: str, path: str) -> None:
    """validatePathNoBacksteps: no `..` element."""
    if ".." in value.split("/"):
        raise fields.InvalidValueError(f"\"{value}\": must not contain '..'", path=path)


def local_path(value: str, path: str, *, what: str = "") -> None:
    """ValidateLocalNonReservedPath: relative, no `..` element, not starting with `..` (the
    atomic writer's `..data`). `what` names the item the API server leaves out of `path`."""
    prefix = f"{what}: " if what else ""
    if value.startswith("/"):
        raise fields.InvalidValueError(f'{prefix}"{value}": must be a relative path', path=path)
    if ".." in value.split("/"):
        raise fields.InvalidValueError(f"{prefix}\"{value}\": must not contain '..'", path=path)
    if value.startswith(".."):
        raise fields.InvalidValueError(f"{prefix}\"{value}\": must not start with '..'", path=path)


def _mode(obj: Mapping[str, Any], key: str, path: str, *, at: str = "", what: str = "") -> None:
    """A file mode (an int32) in 0..0777; `at` is the path the API server names instead."""
    mode = fields.integer(obj, key, path, bits=32)
    if mode is not None and not 0 <= mode <= 0o777:
        prefix = f"{what}: " if what else ""
        octal = f" (0{mode:o})" if mode > 0 else ""
        raise fields.InvalidValueError(
            f"{prefix}{mode}{octal}: {FILE_MODE_MESSAGE}", path=at or fields.join(path, key)
        )


def _required(obj: Mapping[str, Any], key: str, at: str, what: str = "") -> str:
    """The non-empty string `obj[key]`; its errors name `at` (the API server's path)."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise fields.type_error(at, "a string", value)
    if not value:
        prefix = f"{what}: " if what else ""
        raise fields.InvalidValueError(f"{prefix}required: a non-empty string", path=at)
    return value


def _strict(obj: Mapping[str, Any], allowed: frozenset[str], path: str, strict: bool) -> None:
    if strict:
        fields.check_fields(obj, allowed, path)


# ---------------------------------------------------------------------------------------------
# Items of configMap, secret and downwardAPI sources


def _key_to_path(item: Mapping[str, Any], path: str, strict: bool) -> str:
    """validateKeyToPath: a key, a relative path inside the volume, a file mode."""
    _strict(item, apifields.KEY_TO_PATH_FIELDS, path, strict)
    _required(item, "key", f"{path}.key")
    target = _required(item, "path", f"{path}.path")
    local_path(target, f"{path}.path")
    _mode(item, "mode", path)
    return target


def _key_items(source: Mapping[str, Any], path: str, strict: bool) -> tuple[str, ...]:
    return fields.items(source, "items", path, lambda item, p: _key_to_path(item, p, strict))


def _field_ref(ref: Mapping[str, Any], path: str, what: str) -> None:
    """validateObjectFieldSelector with the paths a volume may show."""
    version = fields.string(ref, "apiVersion", path) or "v1"  # the API server's default
    field_path = _required(ref, "fieldPath", f"{path}.fieldPath", what)
    try:
        internal = downward.internal_field_path(version, field_path)
    except downward.FieldError as exc:
        raise fields.InvalidValueError(
            f"{what}: error converting fieldPath: {exc.message}", path=f"{path}.fieldPath"
        ) from exc
    split = downward.split_subscript(internal)
    if split is None and internal not in DOWNWARD_VOLUME_PATHS:
        raise fields.InvalidValueError(
            f'{what}: unsupported value "{internal}": must be one of '
            + ", ".join(DOWNWARD_VOLUME_PATHS),
            path=f"{path}.fieldPath",
        )
    if split is not None:
        key = split[1].lower() if split[0] == "metadata.annotations" else split[1]
        names.qualified_name(key, path)


def _divisor(ref: Mapping[str, Any], resource: str, path: str, what: str) -> None:
    """validateContainerResourceDivisor."""
    raw = ref.get("divisor")
    divisor = quantities.parse_quantity(raw, path=f"{path}.divisor") if raw else Decimal(0)
    if divisor == 0:
        return  # not set: 1
    if resource.endswith(".cpu") and divisor not in _CPU_DIVISORS:
        raise fields.InvalidValueError(
            f"{what}: only divisor's values 1m and 1 are supported with the cpu resource",
            path=f"{path}.divisor",
        )
    kind = "memory" if resource.endswith(".memory") else "local ephemeral storage"
    if not resource.endswith(".cpu") and divisor not in _BYTE_DIVISORS:
        raise fields.InvalidValueError(
            f"{what}: only divisor's values {_BYTE_DIVISOR_TEXT} are supported with the {kind} "
            "resource",
            path=f"{path}.divisor",
        )


def _resource_ref(ref: Mapping[str, Any], path: str, what: str, strict: bool) -> None:
    """validateContainerResourceFieldSelector for a volume: the container must be named. Huge
    pages, which nodelet does not know, are refused in a static manifest; in a pod the API
    server sent, they fail when the volume is set up."""
    _required(ref, "containerName", f"{path}.containerName", what)
    resource = _required(ref, "resource", f"{path}.resource", what)
    if not strict and resource.startswith(("limits.hugepages-", "requests.hugepages-")):
        return
    if resource not in downward.RESOURCES:
        raise fields.InvalidValueError(
            f'{what}: unsupported value "{resource}": must be one of '
            + ", ".join(downward.RESOURCES),
            path=f"{path}.resource",
        )
    _divisor(ref, resource, path, what)


def _downward_item(item: Mapping[str, Any], item_path: str, at: str, strict: bool) -> str:
    """validateDownwardAPIVolumeFile: errors at `at` (the source), the item said in them."""
    what = item_path.rpartition(".")[2]  # "items[i]"
    _strict(item, apifields.DOWNWARD_API_FILE_FIELDS, item_path, strict)
    target = _required(item, "path", f"{at}.path", what)
    local_path(target, f"{at}.path", what=what)
    _downward_ref(item, item_path, at, what, strict)
    _mode(item, "mode", item_path, at=f"{at}.mode", what=what)
    return target


def _downward_ref(
    item: Mapping[str, Any], item_path: str, at: str, what: str, strict: bool
) -> None:
    """Exactly one of fieldRef and resourceFieldRef."""
    field_ref = fields.mapping(item, "fieldRef", item_path)
    resource_ref = fields.mapping(item, "resourceFieldRef", item_path)
    _strict(field_ref, apifields.OBJECT_FIELD_SELECTOR_FIELDS, f"{item_path}.fieldRef", strict)
    _strict(resource_ref, apifields.RESOURCE_FIELD_SELECTOR_FIELDS,
            f"{item_path}.resourceFieldRef", strict)
    if item.get("fieldRef") is not None and item.get("resourceFieldRef") is not None:
        raise fields.InvalidValueError(
            f"{what}: fieldRef and resourceFieldRef can not be specified simultaneously", path=at
        )
    if item.get("fieldRef") is not None:
        _field_ref(field_ref, f"{at}.fieldRef", what)
    elif item.get("resourceFieldRef") is not None:
        _resource_ref(resource_ref, f"{at}.resourceFieldRef", what, strict)
    else:
        raise fields.InvalidValueError(
            f"{what}: required: one of fieldRef and resourceFieldRef", path=at
        )


def _downward_items(source: Mapping[str, Any], path: str, strict: bool) -> tuple[str, ...]:
    return fields.items(
        source, "items", path, lambda item, p: _downward_item(item, p, path, strict)
    )


# ---------------------------------------------------------------------------------------------
# The sources


def _empty_dir(source: Mapping[str, Any], path: str, strict: bool) -> None:
    _strict(source, apifields.EMPTY_DIR_FIELDS, path, strict)
    medium = fields.string(source, "medium", path)
    # The API server takes any medium and the kubelet refuses unknown ones when it mounts;
    # a static manifest is told now.
    if strict and medium not in apifields.STORAGE_MEDIA and not medium.startswith("HugePages-"):
        fields.one_of(medium, (*apifields.STORAGE_MEDIA[1:], "HugePages-<size>"),
                      f"{path}.medium")
    if source.get("sizeLimit") is not None:
        limit = quantities.parse_quantity(source["sizeLimit"], path=f"{path}.sizeLimit")
        if limit < 0:
            raise fields.InvalidValueError(
                "forbidden: SizeLimit field must be a valid resource quantity (not negative)",
                path=f"{path}.sizeLimit",
            )


def _host_path(source: Mapping[str, Any], path: str, strict: bool) -> None:
    _strict(source, apifields.HOST_PATH_FIELDS, path, strict)
    no_backsteps(_required(source, "path", f"{path}.path"), f"{path}.path")
    if source.get("type") is not None:  # an empty string is the default: no check
        fields.one_of(fields.string(source, "type", path), volumes.HOST_PATH_TYPES,
                      f"{path}.type")


Check = Callable[[Mapping[str, Any], str, bool], None]


def _keyed(name_key: str, allowed: frozenset[str]) -> Check:
    """validateConfigMapVolumeSource / validateSecretVolumeSource."""

    def check(source: Mapping[str, Any], path: str, strict: bool) -> None:
        _strict(source, allowed, path, strict)
        _required(source, name_key, f"{path}.{name_key}")
        _mode(source, "defaultMode", path)
        _key_items(source, path, strict)
        fields.boolean(source, "optional", path)

    return check


def _downward_api(source: Mapping[str, Any], path: str, strict: bool) -> None:
    _strict(source, apifields.DOWNWARD_API_VOLUME_FIELDS, path, strict)
    _mode(source, "defaultMode", path)
    _downward_items(source, path, strict)


def _service_account_token(source: Mapping[str, Any], path: str, at: str, strict: bool) -> None:
    """The token source's checks; its path errors name the projected volume (`at`)."""
    _strict(source, apifields.SERVICE_ACCOUNT_TOKEN_FIELDS, path, strict)
    fields.string(source, "audience", path)
    seconds = fields.integer(source, "expirationSeconds", path)
    seconds = 3600 if seconds is None else seconds  # the API server's default
    if seconds < _MIN_TOKEN_SECONDS or seconds > _MAX_TOKEN_SECONDS:
        shorter = seconds < _MIN_TOKEN_SECONDS
        raise fields.InvalidValueError(
            f"{seconds}: may not specify a duration "
            + ("less than 10 minutes" if shorter else "larger than 2^32 seconds"),
            path=f"{path}.expirationSeconds",
        )
    target = _required(source, "path", f"{at}.path", "serviceAccountToken")
    local_path(target, f"{at}.path", what="serviceAccountToken")


def _projection(item: Mapping[str, Any], path: str, at: str, strict: bool) -> tuple[str, ...]:
    """One of `sources`: its file paths."""
    _strict(item, apifields.PROJECTIONS, path, strict)
    kinds = [k for k in apifields.PROJECTIONS if item.get(k) is not None]
    if len(kinds) > 1:
        raise fields.InvalidValueError(
            f"forbidden: may not specify more than 1 volume type per source (found "
            f"{', '.join(sorted(kinds))})",
            path=path,
        )
    if not kinds:
        return ()  # the API server lets an empty source be
    kind, sub_path = kinds[0], f"{path}.{kinds[0]}"
    sub = fields.mapping(item, kind, path)
    if kind not in apifields.SUPPORTED_PROJECTIONS:
        if strict:
            raise fields.UnsupportedError(
                f'unsupported projected source "{kind}": nodelet supports '
                f"{', '.join(apifields.SUPPORTED_PROJECTIONS)}",
                path=sub_path,
            )
        return ()  # refused when the volume is set up
    if kind == "serviceAccountToken":
        _service_account_token(sub, sub_path, at, strict)
        return ()  # the API server only warns when its path collides with another
    if kind == "downwardAPI":
        _strict(sub, apifields.PROJECTED_DOWNWARD_API_FIELDS, sub_path, strict)
        return _downward_items(sub, sub_path, strict)
    _strict(sub, apifields.PROJECTED_OBJECT_FIELDS, sub_path, strict)
    _required(sub, "name", f"{sub_path}.name")
    fields.boolean(sub, "optional", sub_path)
    return _key_items(sub, sub_path, strict)


def _projected(source: Mapping[str, Any], path: str, strict: bool) -> None:
    """validateProjectedVolumeSource: the sources' paths must not collide."""
    _strict(source, apifields.PROJECTED_FIELDS, path, strict)
    _mode(source, "defaultMode", path)
    seen: set[str] = set()
    per_source = fields.items(
        source, "sources", path, lambda item, p: _projection(item, p, path, strict)
    )
    for target in (t for targets in per_source for t in targets):
        if target in seen:
            raise fields.InvalidValueError(
                f'"{target}": conflicting duplicate paths', path=path
            )
        seen.add(target)


def _image(source: Mapping[str, Any], path: str, strict: bool) -> None:
    """validateImageVolumeSource: a reference, and a pull policy of the three."""
    _strict(source, apifields.IMAGE_VOLUME_FIELDS, path, strict)
    _required(source, "reference", f"{path}.reference")
    policy = fields.string(source, "pullPolicy", path)
    if policy:
        fields.one_of(policy, apifields.PULL_POLICIES, f"{path}.pullPolicy")


def _claim(source: Mapping[str, Any], path: str, strict: bool) -> None:
    """validatePersistentClaimVolumeSource: the claim's name (read from the API when the
    volume is set up: `claims`)."""
    _strict(source, apifields.CLAIM_VOLUME_FIELDS, path, strict)
    _required(source, "claimName", f"{path}.claimName")
    fields.boolean(source, "readOnly", path)


def _ephemeral(source: Mapping[str, Any], path: str, strict: bool) -> None:
    """validateEphemeralVolumeSource: a claim template (the ephemeral volume controller makes
    the claim; nodelet only reads it)."""
    _strict(source, apifields.EPHEMERAL_VOLUME_FIELDS, path, strict)
    template = fields.mapping(source, "volumeClaimTemplate", path)
    if source.get("volumeClaimTemplate") is None:
        raise fields.InvalidValueError("required", path=f"{path}.volumeClaimTemplate")
    _strict(template, apifields.CLAIM_TEMPLATE_FIELDS, f"{path}.volumeClaimTemplate", strict)
    fields.mapping(template, "spec", f"{path}.volumeClaimTemplate")


def _csi(source: Mapping[str, Any], path: str, strict: bool) -> None:
    """validateCSIVolumeSource: a driver name (a DNS subdomain of at most 63 characters),
    attributes of strings, the secret reference by name."""
    _strict(source, apifields.CSI_VOLUME_FIELDS, path, strict)
    driver = _required(source, "driver", f"{path}.driver")
    if len(driver) > 63:
        raise fields.InvalidValueError(f'"{driver}": must be no more than 63 characters',
                                       path=f"{path}.driver")
    names.dns_subdomain(driver, f"{path}.driver")
    fields.boolean(source, "readOnly", path)
    fields.string(source, "fsType", path)
    fields.string_map(source, "volumeAttributes", path)
    ref = fields.mapping(source, "nodePublishSecretRef", path)
    if source.get("nodePublishSecretRef") is not None:
        _required(ref, "name", f"{path}.nodePublishSecretRef.name")


_CHECKS: Mapping[str, Check] = {
    "emptyDir": _empty_dir,
    "hostPath": _host_path,
    "configMap": _keyed("name", apifields.CONFIGMAP_VOLUME_FIELDS),
    "secret": _keyed("secretName", apifields.SECRET_VOLUME_FIELDS),
    "downwardAPI": _downward_api,
    "projected": _projected,
    "image": _image,
    "persistentVolumeClaim": _claim,
    "ephemeral": _ephemeral,
    "csi": _csi,
}


# ---------------------------------------------------------------------------------------------
# The volume


def source_type(obj: Mapping[str, Any], path: str, strict: bool) -> str:
    """The one source of the volume `obj` (validateVolumeSource's count)."""
    if strict:
        fields.check_fields(obj, apifields.VOLUME_SOURCES | {"name"}, path)
    keys = [str(k) for k in obj if k != "name"]
    given = [k for k in _SOURCE_ORDER if obj.get(k) is not None]
    if not given:
        nulls = [k for k in keys if k in apifields.VOLUME_SOURCES]
        hint = f'; "{nulls[0]}" is null, write `{nulls[0]}: {{}}` for its defaults' if nulls else ""
        raise fields.InvalidValueError(
            f"must specify a volume type (one of {', '.join(apifields.SUPPORTED_VOLUMES)}){hint}",
            path=path,
        )
    if len(given) > 1:
        raise fields.InvalidValueError(
            f"forbidden: may not specify more than 1 volume type (found {', '.join(given)})",
            path=f"{path}.{given[1]}",
        )
    if given[0] not in apifields.SUPPORTED_VOLUMES:
        raise fields.UnsupportedError(
            f'unsupported volume type "{given[0]}": nodelet supports '
            f"{', '.join(apifields.SUPPORTED_VOLUMES)}",
            path=f"{path}.{given[0]}",
        )
    return given[0]


def volume(obj: Mapping[str, Any], path: str, *, strict: bool) -> pods.Volume:
    """The volume `obj` at `path` (`spec.volumes[i]`), checked."""
    name = names.dns_label(fields.string(obj, "name", path, required=True), f"{path}.name")
    kind = source_type(obj, path, strict)
    source = fields.mapping(obj, kind, path)
    _CHECKS[kind](source, f"{path}.{kind}", strict)
    return pods.Volume(name=name, source_type=kind, source=source)


def projected_token_sources(volumes: list[Any]) -> list[str]:
    """The paths of the serviceAccountToken sources of `spec.volumes` (as written)."""
    found = []
    for i, item in enumerate(volumes):
        projected = item.get("projected") if isinstance(item, Mapping) else None
        sources = projected.get("sources") if isinstance(projected, Mapping) else None
        for j, source in enumerate(sources if isinstance(sources, list) else ()):
            if isinstance(source, Mapping) and source.get("serviceAccountToken") is not None:
                found.append(f"spec.volumes[{i}].projected.sources[{j}].serviceAccountToken")
    return found
