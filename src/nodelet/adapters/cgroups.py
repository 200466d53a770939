"""Pod-level cgroups on the host: removing a pod's cgroup once its containers are gone.

runc creates the pod's cgroup (the sandbox's cgroup parent) in every hierarchy when the first
container starts, and removes only the containers' own cgroups; the kubelet removes the pod
level itself, and so do we. Only empty directories are removed (rmdir), never their contents.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _hierarchies(root: Path) -> list[Path]:
    """cgroup v2 (root itself) or the v1 hierarchies (one directory per controller set)."""
    if (root / "cgroup.controllers").exists():
        return [root]
    try:
        return [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


def remove_pod_cgroup(parent: str, root: Path = CGROUP_ROOT) -> list[str]:
    """rmdir `parent` in every hierarchy where it exists; returns what could not be removed."""
    left: list[str] = []
    for hierarchy in _hierarchies(root):
        path = hierarchy / parent.lstrip("/")
        if not path.is_dir():
            continue
        try:
            path.rmdir()
        except OSError as exc:
            log.warning("cannot remove pod cgroup %s: %s", path, exc.strerror)
            left.append(str(path))
    return left


def remove_pod_cgroups(uid: str, root: Path = CGROUP_ROOT) -> list[str]:
    """Remove the pod's cgroup under whichever QoS level it was made (the QoS class of a pod
    known only by its UID, such as an orphan, cannot be computed)."""
    return [path for qos in ("", "/burstable", "/besteffort")
            for path in remove_pod_cgroup(f"/kubepods{qos}/pod{uid}", root)]
