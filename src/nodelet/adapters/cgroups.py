"""Pod-level cgroups on the host: made with the pod's limits before its sandbox, removed once
its containers are gone.

As the kubelet's pod container manager (cgroupfs driver): the pod's cgroup
`/kubepods[/burstable|/besteffort]/pod<uid>` is created in the cpu and memory hierarchies with
the limits `specs.pod_cgroup` computes, before RunPodSandbox, so runc puts the containers
under it. runc removes only the containers' own cgroups; the pod level is removed here. Only
empty directories are removed (rmdir), never their contents. cgroup v1 only: on a cgroup v2
host the limits are not written (a warning says so) and each container keeps its own limits.
"""

from __future__ import annotations

import logging
from pathlib import Path

from nodelet.model.core import specs

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


def apply_pod_cgroup(parent: str, limits: specs.PodCgroup, root: Path = CGROUP_ROOT) -> bool:
    """Create `parent` with `limits` (cgroup v1: cpu.shares, cpu.cfs_period_us,
    cpu.cfs_quota_us, memory.limit_in_bytes). False on a cgroup v2 host (nothing written);
    raises OSError when a file cannot be written."""
    if (root / "cgroup.controllers").exists():
        return False
    cpu = {"cpu.shares": limits.cpu_shares, "cpu.cfs_period_us": limits.cpu_period_us,
           "cpu.cfs_quota_us": -1 if limits.cpu_quota_us is None else limits.cpu_quota_us}
    memory = {"memory.limit_in_bytes": -1 if limits.memory_limit is None
              else limits.memory_limit}
    for controller, values in (("cpu", cpu), ("memory", memory)):
        path = root / controller / parent.lstrip("/")
        path.mkdir(parents=True, exist_ok=True)
        for name, value in values.items():
            (path / name).write_text(str(value))
    return True
