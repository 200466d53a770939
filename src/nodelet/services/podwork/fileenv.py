"""Reading env files for `fileKeyRef` variables when a container is created (the rules are
`model.core.envfiles`): each ref's file is resolved inside its emptyDir as securejoin does,
opened only when it is a regular file (a FIFO would block the read, where the kubelet's
would hang) and read up to the key's line. Blocking: run `read_values` in a thread.

What went wrong with a file is logged; the container shows the kubelet's words
(`couldn't parse env file`, or securejoin's error), as `envfiles.FileValue.error`.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from nodelet.adapters import mounts
from nodelet.model.core import envfiles, pods
from nodelet.model.core import volumes as vol

log = logging.getLogger(__name__)


def volume_dirs(pod: pods.Pod, volumes_dir: Path) -> dict[str, Path]:
    """The host directories of the pod's emptyDir volumes, by name (`volumes_dir`: the pod's
    `volumes` directory); the only volumes a fileKeyRef may name."""
    plugin = vol.PLUGIN_DIRS["emptyDir"]
    return {v.name: volumes_dir / plugin / v.name for v in pod.spec.volumes
            if v.source_type == "emptyDir"}


def read_values(
    pod: pods.Pod, refs: tuple[envfiles.FileKeyRef, ...], dirs: Mapping[str, Path]
) -> dict[envfiles.FileKeyRef, envfiles.FileValue]:
    """What each ref reads from its file (`dirs`: `volume_dirs`)."""
    return {ref: _read(pod, ref, dirs) for ref in refs}


def _read(pod: pods.Pod, ref: envfiles.FileKeyRef,
          dirs: Mapping[str, Path]) -> envfiles.FileValue:
    directory = dirs.get(ref.volume)
    if directory is None:
        return envfiles.FileValue(error=envfiles.missing_volume_message(ref.volume))
    try:
        fd, path = mounts.open_in_root(str(directory), ref.path)
    except mounts.MountError as exc:
        return envfiles.FileValue(error=exc.message)
    except OSError as exc:
        return _failed(pod, f"failed to open environment variable file: {exc}")
    try:
        value = _value(fd, path, ref.key)
    except (envfiles.EnvFileError, OSError) as exc:
        detail = exc.message if isinstance(exc, envfiles.EnvFileError) else str(exc)
        return _failed(pod, f"{path}: {detail}", path)
    finally:
        os.close(fd)
    return envfiles.FileValue(value=value, file_path=path)


def _value(fd: int, path: str, key: str) -> str:
    """The key's value in the file `fd` (an O_PATH descriptor of it)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise envfiles.EnvFileError("not a regular file")
    # Reopened through the descriptor: the file that was resolved, never a path again.
    readable = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with open(readable, "rb") as file:
        chunks = iter(lambda: file.readline(envfiles.READ_LIMIT), b"")
        return envfiles.find((envfiles.line_of(chunk) for chunk in chunks), key)


def _failed(pod: pods.Pod, detail: str, path: str = "") -> envfiles.FileValue:
    log.error("Failed to parse env file of pod %s: %s", pod.full_name, detail)
    return envfiles.FileValue(file_path=path, error=envfiles.PARSE_FAILED)
