"""Volume contents as plain values: which files a configMap, secret, downwardAPI or projected
volume holds (service account tokens are fetched by the service and passed in), with which
modes, and which paths a pod may mount. No I/O.

Everything here follows the kubelet's volume plugins, message for message where the kubelet has
one (`configmap "X" not found`, `configmap references non-existent config key: K`); the
service (`services.podwork.volumes`) writes the files and turns `SourceError` into a FailedMount.

Exceptions::

    SourceError     a volume whose source cannot be turned into files (missing object or key,
                    bad path or mode, unsupported field); `.message` is the FailedMount text
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import configs, downward, fields, pods, quantities, runtime

# The kubelet's defaultMode for configMap, secret, downwardAPI and projected volumes.
DEFAULT_MODE = 0o644

# Volume types whose files nodelet writes (the kubelet's AtomicWriter volumes); they are
# always mounted read-only, as the kubelet does.
CONTENT_TYPES = frozenset({"configMap", "secret", "downwardAPI", "projected"})

# The kubelet's plugin directory names under <pod dir>/volumes.
PLUGIN_DIRS: Mapping[str, str] = {
    "emptyDir": "kubernetes.io~empty-dir",
    "configMap": "kubernetes.io~configmap",
    "secret": "kubernetes.io~secret",
    "downwardAPI": "kubernetes.io~downward-api",
    "projected": "kubernetes.io~projected",
}


HOST_PATH_TYPES = (
    "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice",
    "BlockDevice",
)  # fmt: skip
Lookup = Callable[[str, str, str], configs.ConfigObject | None]


def no_objects(kind: str, namespace: str, name: str) -> None:
    """A Lookup for a node without ConfigMaps and Secrets."""
    return None


class SourceError(errors.MessageError):
    """A volume source that cannot be turned into files; `message` is the FailedMount text."""


@dataclass(frozen=True)
class FileSpec:
    """One file of a volume: its contents and permission bits."""

    data: bytes
    mode: int = DEFAULT_MODE


# Relative path inside the volume -> file.
Payload = dict[str, FileSpec]


# What the downward API can expose besides the pod (shared with env vars: `downward`).
PodFacts = downward.PodFacts


# ---------------------------------------------------------------------------------------------
# fsGroup ownership (pkg/volume/volume_linux.go SetVolumeOwnership)

# Group bits the kubelet adds: read (+write for writable volumes), and on directories execute
# and setgid, so files created later belong to the fsGroup too.
_RO_MASK = 0o440
_RW_MASK = 0o660
_DIR_MASK = 0o110 | 0o2000


def owned_mode(mode: int, *, is_dir: bool, read_only: bool) -> int:
    """The permission bits of a volume file once it belongs to the pod's fsGroup."""
    mask = _RO_MASK if read_only else _RW_MASK
    return mode | mask | (_DIR_MASK if is_dir else 0)


def needs_ownership(mode: int, gid: int, fs_group: int, *, is_dir: bool,
                    read_only: bool) -> bool:
    """fsGroupChangePolicy OnRootMismatch (requiresPermissionChange): the volume's root, with
    its `mode` bits and group, tells whether the tree must be walked."""
    if gid != fs_group:
        return True
    if is_dir and not mode & 0o2000:
        return True
    mask = _RO_MASK if read_only else _RW_MASK
    return mode & mask != mask


# ---------------------------------------------------------------------------------------------
# Paths


def check_file_path(path: str) -> None:
    """A path inside an AtomicWriter volume, checked like the kubelet's validatePath."""
    if not path:
        raise SourceError("invalid path: must not be empty")
    if path.startswith("/"):
        raise SourceError(f"invalid path: must not be absolute path: {path}")
    if ".." in PurePosixPath(path).parts:
        raise SourceError(f"invalid path: must not contain '..': {path}")
    if path.startswith(".."):
        # `..data` and `..<timestamp>` belong to the atomic writer.
        raise SourceError(f"invalid path: must not start with '..': {path}")
    if len(path) > 4096 or any(len(part) > 255 for part in PurePosixPath(path).parts):
        raise SourceError(f"invalid path: too long: {path}")


def check_sub_path(sub_path: str) -> None:
    """A volumeMount's subPath must stay inside its volume (symlinks are checked on disk)."""
    if sub_path.startswith("/"):
        raise SourceError(f'subPath "{sub_path}" must not be an absolute path')
    if ".." in PurePosixPath(sub_path).parts:
        raise SourceError(f"subPath \"{sub_path}\" must not contain '..'")


def _check_payload(payload: Payload) -> Payload:
    """The payload with its paths checked and made clean (`./a//b` -> `a/b`)."""
    clean: Payload = {}
    for path, spec in payload.items():
        check_file_path(path)
        normal = PurePosixPath(path).as_posix()
        if normal == ".":
            raise SourceError(f"invalid path: must name a file: {path}")
        clean[normal] = spec
    for path in clean:
        for parent in PurePosixPath(path).parents:
            if str(parent) in clean:
                raise SourceError(f"conflicting paths: {parent} is both a file and a directory")
    return clean


# ---------------------------------------------------------------------------------------------
# Field access (the API server validated the pod; these only guard against surprises)


def _mode(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0o777:
        raise SourceError(f"{key} {value!r} is not valid: a file mode between 0 and 0777")
    return value


def _items(obj: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    items = obj.get("items") or ()
    if not isinstance(items, list | tuple) or not all(isinstance(i, Mapping) for i in items):
        raise SourceError("items must be a list of mappings")
    return items


# ---------------------------------------------------------------------------------------------
# configMap and secret


def _config_values(obj: configs.ConfigObject) -> dict[str, bytes]:
    if isinstance(obj, configs.Secret):
        return dict(obj.data)
    return {**{k: v.encode() for k, v in obj.data.items()}, **obj.binary_data}


def _keyed_payload(
    source: Mapping[str, Any],
    obj: configs.ConfigObject | None,
    *,
    kind: str,
    name: str,
    default_mode: int,
) -> Payload:
    """Files of one configMap or secret (a volume or a projected source); the kubelet's
    MakePayload."""
    optional = bool(source.get("optional"))
    if obj is None:
        if optional:
            return {}
        raise SourceError(f'{kind} "{name}" not found')
    values = _config_values(obj)
    items = _items(source)
    if not items:
        return {key: FileSpec(data, default_mode) for key, data in values.items()}
    payload: Payload = {}
    for item in items:
        key = str(item.get("key", ""))
        if key not in values:
            if optional:
                continue
            what = "config" if kind == "configmap" else "secret"
            raise SourceError(f"{kind} references non-existent {what} key: {key}")
        path = str(item.get("path") or "")
        payload[path] = FileSpec(values[key], _mode(item, "mode", default_mode))
    return payload


def config_map_payload(
    source: Mapping[str, Any], obj: configs.ConfigObject | None, *, default_mode: int | None = None
) -> Payload:
    """Files of a configMap volume (or projected source when `default_mode` is given)."""
    mode = _mode(source, "defaultMode", DEFAULT_MODE) if default_mode is None else default_mode
    name = str(source.get("name", ""))
    found = obj if isinstance(obj, configs.ConfigMap) else None
    return _check_payload(
        _keyed_payload(source, found, kind="configmap", name=name, default_mode=mode)
    )


def secret_payload(
    source: Mapping[str, Any], obj: configs.ConfigObject | None, *, default_mode: int | None = None
) -> Payload:
    """Files of a secret volume (`secretName`) or a projected secret source (`name`)."""
    mode = _mode(source, "defaultMode", DEFAULT_MODE) if default_mode is None else default_mode
    name = str(source.get("secretName") or source.get("name") or "")
    found = obj if isinstance(obj, configs.Secret) else None
    return _check_payload(
        _keyed_payload(source, found, kind="secret", name=name, default_mode=mode)
    )


# ---------------------------------------------------------------------------------------------
# downwardAPI


go_quote = downward.go_quote
format_map = downward.format_map


def field_value(field_path: str, facts: PodFacts) -> str:
    """The value of a downward API fieldRef (see `downward.field_value`)."""
    try:
        return downward.field_value(field_path, facts)
    except downward.FieldError as exc:
        raise SourceError(exc.message) from exc


def resource_value(ref: Mapping[str, Any], facts: PodFacts) -> str:
    """A downward API resourceFieldRef (see `downward.resource_value`)."""
    try:
        return downward.resource_value(ref, facts)
    except downward.FieldError as exc:
        raise SourceError(exc.message) from exc


def downward_payload(
    source: Mapping[str, Any], facts: PodFacts, *, default_mode: int | None = None
) -> Payload:
    """Files of a downwardAPI volume or projected source."""
    mode = _mode(source, "defaultMode", DEFAULT_MODE) if default_mode is None else default_mode
    payload: Payload = {}
    for item in _items(source):
        path = str(item.get("path") or "")
        field_ref, resource_ref = item.get("fieldRef"), item.get("resourceFieldRef")
        if isinstance(field_ref, Mapping) and not resource_ref:
            text = field_value(str(field_ref.get("fieldPath", "")), facts)
        elif isinstance(resource_ref, Mapping) and not field_ref:
            text = resource_value(resource_ref, facts)
        else:
            raise SourceError(f'downwardAPI item "{path}": needs exactly one of fieldRef, '
                              "resourceFieldRef")
        payload[path] = FileSpec(text.encode(), _mode(item, "mode", mode))
    return _check_payload(payload)


# ---------------------------------------------------------------------------------------------
# projected and the dispatcher


def _projected_source(
    source: Mapping[str, Any], lookup: Lookup, facts: PodFacts, mode: int,
    tokens: Mapping[str, bytes],
) -> Payload:
    namespace = facts.pod.namespace
    kinds = [k for k, v in source.items() if v is not None]
    kind = kinds[0] if len(kinds) == 1 else ""
    sub = source.get(kind)
    if not isinstance(sub, Mapping):
        raise SourceError(f"projected source needs exactly one type, got {sorted(kinds)}")
    if kind == "configMap":
        obj = lookup("ConfigMap", namespace, str(sub.get("name", "")))
        return config_map_payload(sub, obj, default_mode=mode)
    if kind == "secret":
        obj = lookup("Secret", namespace, str(sub.get("name", "")))
        return secret_payload(sub, obj, default_mode=mode)
    if kind == "downwardAPI":
        return downward_payload(sub, facts, default_mode=mode)
    if kind == "serviceAccountToken":
        return _token_file(sub, facts, mode, tokens)
    raise SourceError(
        f'unsupported projected source "{kind}": nodelet supports configMap, secret, '
        "downwardAPI, serviceAccountToken"
    )


def _token_file(
    source: Mapping[str, Any], facts: PodFacts, mode: int, tokens: Mapping[str, bytes]
) -> Payload:
    """A serviceAccountToken source: the token the service fetched for its path. With an
    fsGroup the file is 0600 (the fsGroup ownership then adds group read), as the kubelet's
    projected plugin does, so the token is not world-readable."""
    path = str(source.get("path") or "")
    if path not in tokens:
        raise SourceError(f'no service account token for path "{path}"')
    if facts.pod.spec.security_context.fs_group is not None:
        mode = 0o600
    return {path: FileSpec(tokens[path], mode)}


def projected_payload(
    source: Mapping[str, Any], lookup: Lookup, facts: PodFacts,
    tokens: Mapping[str, bytes] | None = None,
) -> Payload:
    """Files of a projected volume: its sources merged in order (a later path wins);
    `tokens`: the service account tokens of its serviceAccountToken sources, by path."""
    mode = _mode(source, "defaultMode", DEFAULT_MODE)
    sources = source.get("sources") or ()
    if not isinstance(sources, list | tuple):
        raise SourceError("projected sources must be a list")
    payload: Payload = {}
    for item in sources:
        if not isinstance(item, Mapping):
            raise SourceError("projected sources must be mappings")
        payload.update(_projected_source(item, lookup, facts, mode, tokens or {}))
    return _check_payload(payload)


def content_payload(
    volume: pods.Volume, lookup: Lookup, facts: PodFacts,
    tokens: Mapping[str, bytes] | None = None,
) -> Payload:
    """The files of a configMap, secret, downwardAPI or projected volume (`tokens`: see
    `projected_payload`)."""
    source, namespace = volume.source, facts.pod.namespace
    if volume.source_type == "configMap":
        obj = lookup("ConfigMap", namespace, str(source.get("name", "")))
        return config_map_payload(source, obj)
    if volume.source_type == "secret":
        obj = lookup("Secret", namespace, str(source.get("secretName", "")))
        return secret_payload(source, obj)
    if volume.source_type == "downwardAPI":
        return downward_payload(source, facts)
    if volume.source_type == "projected":
        return projected_payload(source, lookup, facts, tokens)
    raise SourceError(f'volume type "{volume.source_type}" has no files')


def referenced_objects(pod: pods.Pod) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every ConfigMap and Secret the pod's volumes read."""
    refs: set[tuple[str, str, str]] = set()
    for volume in pod.spec.volumes:
        refs |= volume_objects(volume, pod.namespace)
    return refs


def volume_objects(volume: pods.Volume, namespace: str) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of the ConfigMaps and Secrets one volume reads."""
    if volume.source_type == "configMap":
        return {("ConfigMap", namespace, str(volume.source.get("name", "")))}
    if volume.source_type == "secret":
        return {("Secret", namespace, str(volume.source.get("secretName", "")))}
    if volume.source_type == "csi":  # an inline CSI volume's nodePublishSecretRef
        ref = volume.source.get("nodePublishSecretRef")
        name = str(ref.get("name") or "") if isinstance(ref, Mapping) else ""
        return {("Secret", namespace, name)} if name else set()
    refs: set[tuple[str, str, str]] = set()
    if volume.source_type == "projected":
        for item in volume.source.get("sources") or ():
            if not isinstance(item, Mapping):
                continue
            for key, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
                if isinstance(item.get(key), Mapping):
                    refs.add((kind, namespace, str(item[key].get("name", ""))))
    return refs


# ---------------------------------------------------------------------------------------------
# emptyDir and hostPath parameters


def local_ephemeral(volume: pods.Volume) -> bool:
    """Whether the volume counts in the pod's ephemeral storage, as the kubelet's
    IsLocalEphemeralVolume: an emptyDir on the node's disk (not in memory) or a configMap."""
    if volume.source_type == "emptyDir":
        return not volume.source.get("medium")
    return volume.source_type in ("configMap", "gitRepo")


def empty_dir_medium(source: Mapping[str, Any]) -> str:
    """"" (the node's disk) or "Memory" (tmpfs); HugePages is not supported."""
    medium = str(source.get("medium") or "")
    if medium not in ("", "Memory"):
        raise SourceError(f'emptyDir medium "{medium}" is not supported: use "" or "Memory"')
    return medium


def tmpfs_size(source: Mapping[str, Any]) -> int | None:
    """The tmpfs size in bytes from sizeLimit; None leaves the kernel's default (half of RAM)."""
    limit = source.get("sizeLimit")
    if limit is None or limit == "":
        return None
    try:
        size = quantities.memory_bytes(limit)
    except fields.ManifestError as exc:
        raise SourceError(f"emptyDir sizeLimit: {exc.message}") from exc
    return size if size > 0 else None


def host_path(source: Mapping[str, Any]) -> tuple[str, str]:
    """(path, type) of a hostPath volume, with the type checked."""
    path = str(source.get("path") or "")
    type_ = str(source.get("type") or "")
    if not path.startswith("/"):
        raise SourceError(f'hostPath path "{path}" must be absolute')
    if type_ not in HOST_PATH_TYPES:
        raise SourceError(
            f'hostPath type "{type_}" is not valid: use one of '
            + ", ".join(t or '""' for t in HOST_PATH_TYPES)
        )
    return path, type_


# ---------------------------------------------------------------------------------------------
# Mount propagation

_PROPAGATION: Mapping[str, runtime.MountPropagation] = {
    "": runtime.MountPropagation.PRIVATE,  # not set: the kubelet's default
    "None": runtime.MountPropagation.PRIVATE,
    "HostToContainer": runtime.MountPropagation.HOST_TO_CONTAINER,
    "Bidirectional": runtime.MountPropagation.BIDIRECTIONAL,
}


def mount_propagation(mode: str) -> runtime.MountPropagation:
    """The CRI propagation of a volumeMount's `mountPropagation` (checked when parsed).
    containerd refuses HostToContainer unless the host path is on a shared or slave mount,
    and Bidirectional unless it is on a shared one."""
    return _PROPAGATION[mode]


def recursive_granted(request: str, read_only: bool, supported: bool,
                      propagation: str = "") -> bool:
    """Whether a mount is made recursively read-only, as the kubelet's
    resolveRecursiveReadOnly grants it: asked for (IfPossible or Enabled) on a read-only
    mount without mount propagation (`propagation`: the volumeMount's mountPropagation;
    the pair is refused when a pod is read), and the runtime handler can (an Enabled it
    cannot grant is refused where the mount is made: `recursive_read_only`; the status then
    shows Disabled)."""
    return request in ("IfPossible", "Enabled") and read_only and supported \
        and propagation in ("", "None")


def recursive_read_only(mount: runtime.Mount, supported: bool) -> runtime.Mount:
    """The mount with its recursiveReadOnly request resolved as the kubelet's
    resolveRecursiveReadOnly does: IfPossible where the runtime handler can, Enabled only where
    it can (raises SourceError with the kubelet's words otherwise)."""
    request = mount.recursive_request
    if request == "Disabled" or not mount.readonly:
        return mount
    if request == "Enabled" and not supported:
        raise SourceError(f'failed to resolve recursive read-only mode: volume "{mount.volume}" '
                          "requested recursive read-only mode, but it is not supported by the "
                          "runtime")
    return replace(mount, recursive_read_only=recursive_granted(request, True, supported))


def image_volume(source: Mapping[str, Any]) -> tuple[str, pods.PullPolicy]:
    """An image volume's reference and pull policy (defaulted as a container image's)."""
    reference = str(source.get("reference") or "")
    policy = source.get("pullPolicy") or pods.default_pull_policy(reference)
    return reference, policy
