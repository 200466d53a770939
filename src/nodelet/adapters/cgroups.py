"""The QoS cgroup hierarchy on the host: kubepods, its QoS levels and the pod-level cgroups,
made with their limits and removed when empty.

As the kubelet's container manager (cgroupfs driver). What each cgroup holds and which
interface files carry it is decided in `model.core.qoscgroups`; this module makes the
directories and writes those files, on either kind of host:

- cgroup v1 (a directory per controller under the mount, as on these machines): the cgroup
  is made in the cpu and memory hierarchies (runc makes the containers' own in the others);
- cgroup v2 (`cgroup.controllers` at the mount): one tree; the cpu and memory controllers
  are enabled in `cgroup.subtree_control` of every level above the cgroup, as the kubelet's
  cgroup manager does, since a cgroup can only use what its parent enabled for it.

The pod's cgroup is made before RunPodSandbox, so runc puts the containers under it; runc
removes only the containers' own cgroups, the pod level is removed here — with what runc left
in it: a RunPodSandbox cancelled while runc made the pause container's cgroups leaves that
container's cgroup empty in some hierarchies (cpuset, seen here), and the pod level then
cannot go. Only empty directories are removed (rmdir: the kernel refuses a cgroup that holds
a process), never files. Writes raise OSError.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from nodelet.model.core import qoscgroups, specs

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


def is_unified(root: Path = CGROUP_ROOT) -> bool:
    """True on a cgroup v2 (unified) host: the mount itself is a cgroup."""
    return (root / "cgroup.controllers").exists()


def _hierarchies(root: Path) -> list[Path]:
    """cgroup v2 (root itself) or the v1 hierarchies (one directory per controller set)."""
    if is_unified(root):
        return [root]
    try:
        return [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


# -- making and limiting --------------------------------------------------------------------


def apply(cgroup: str, limits: qoscgroups.Limits, root: Path = CGROUP_ROOT) -> None:
    """Make `cgroup` (and its parents) if missing and write `limits`; settings that are None
    are left as they are."""
    if is_unified(root):
        _apply_v2(root, cgroup, limits)
    else:
        _apply_v1(root, cgroup, limits)


def apply_pod_cgroup(parent: str, limits: specs.PodCgroup, root: Path = CGROUP_ROOT) -> None:
    """The pod-level cgroup with the kubelet's pod limits (a limit the pod lacks is lifted)."""
    apply(parent, qoscgroups.pod_limits(limits), root)


def _apply_v1(root: Path, cgroup: str, limits: qoscgroups.Limits) -> None:
    for controller, files in qoscgroups.v1_files(limits).items():
        path = root / controller / cgroup.lstrip("/")
        path.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (path / name).write_text(text)


def _apply_v2(root: Path, cgroup: str, limits: qoscgroups.Limits) -> None:
    missing = [c for c in qoscgroups.V2_CONTROLLERS if c not in _words(root, "cgroup.controllers")]
    if missing:
        raise OSError(f"cgroup v2 at {root} lacks the {' and '.join(missing)} controller(s)")
    path = root
    for part in Path(cgroup.lstrip("/")).parts:
        _enable_controllers(path)
        path = path / part
        path.mkdir(exist_ok=True)
    for name, text in qoscgroups.v2_files(limits).items():
        (path / name).write_text(text)


def _enable_controllers(path: Path) -> None:
    """Enable cpu and memory for `path`'s children (those not enabled yet, in one write)."""
    enabled = _words(path, "cgroup.subtree_control")
    wanted = [c for c in qoscgroups.V2_CONTROLLERS if c not in enabled]
    if wanted:
        (path / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))


def _words(path: Path, name: str) -> set[str]:
    """The controllers a cgroup v2 list file names (`+` prefixes dropped); none if missing."""
    try:
        text = (path / name).read_text()
    except FileNotFoundError:
        return set()
    return {word.lstrip("+") for word in text.split()}


def memory_usage(cgroup: str, root: Path = CGROUP_ROOT) -> int | None:
    """The cgroup's memory usage in bytes (v1 memory.usage_in_bytes, v2 memory.current);
    None: not readable."""
    path = (root / cgroup.lstrip("/") / "memory.current" if is_unified(root)
            else root / "memory" / cgroup.lstrip("/") / "memory.usage_in_bytes")
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


# -- removing -------------------------------------------------------------------------------


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
            log.warning("cannot remove cgroup %s: %s", path, exc.strerror)
            left.append(str(path))
    return left


def remove_pod_cgroups(uid: str, root: Path = CGROUP_ROOT, *, cgroup_root: str = "/") -> list[str]:
    """Remove the pod's cgroup under whichever QoS level it was made (the QoS class of a pod
    known only by its UID, such as an orphan, cannot be computed), with the empty cgroups
    left in it; returns what could not be removed."""
    left: list[str] = []
    for parent in qoscgroups.pod_parents(uid, cgroup_root):
        for hierarchy in _hierarchies(root):
            path = hierarchy / parent.lstrip("/")
            if path.is_dir():
                left += _remove_tree(path)
    return left


def remove_idle_pod_cgroups(uid: str, root: Path = CGROUP_ROOT, *,
                            cgroup_root: str = "/") -> list[str] | None:
    """As `remove_pod_cgroups` when no process is in any of the pod's cgroups; None (nothing
    touched) when one is: a pod found only by its cgroup may be another agent's, running (a
    cgroup root shared with a kubelet or another nodelet)."""
    trees = [hierarchy / parent.lstrip("/") for parent in qoscgroups.pod_parents(uid, cgroup_root)
             for hierarchy in _hierarchies(root)]
    if any(_has_processes(tree) for tree in trees if tree.is_dir()):
        return None
    return remove_pod_cgroups(uid, root, cgroup_root=cgroup_root)


def _has_processes(top: Path) -> bool:
    for directory, _, files in os.walk(top):
        if "cgroup.procs" not in files:
            continue
        try:
            if (Path(directory) / "cgroup.procs").read_text().strip():
                return True
        except OSError:
            continue
    return False


def _remove_tree(top: Path) -> list[str]:
    """rmdir `top` and the cgroups in it, deepest first; what could not be removed."""
    left: list[str] = []
    for directory, _, _ in os.walk(top, topdown=False):
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot remove cgroup %s: %s", directory, exc.strerror)
            left.append(directory)
    return left


def pod_cgroup_uids(cgroup_root: str = "/", root: Path = CGROUP_ROOT) -> set[str]:
    """The UIDs of the pod cgroups (`pod<uid>`) under the QoS levels of `cgroup_root`, in
    any hierarchy."""
    uids: set[str] = set()
    for hierarchy in _hierarchies(root):
        for level in qoscgroups.qos_levels(cgroup_root):
            try:
                with os.scandir(hierarchy / level.lstrip("/")) as entries:
                    uids |= {e.name[3:] for e in entries if e.name.startswith("pod")
                             and len(e.name) > 3 and e.is_dir(follow_symlinks=False)}
            except (FileNotFoundError, NotADirectoryError):
                continue
    return uids


def remove_qos_cgroups(cgroup_root: str, root: Path = CGROUP_ROOT) -> list[str]:
    """Remove kubepods and its QoS levels once no pod is left under them (the kubelet never
    does; for an agent whose cgroup root goes away with it, such as a test's)."""
    return [path for cgroup in qoscgroups.qos_levels(cgroup_root)
            for path in remove_pod_cgroup(cgroup, root)]
