"""The links to containers' logs that the kubelet keeps in /var/log/containers.

One link per started container, named `<pod>_<namespace>_<container>-<container ID>.log`
(`model.core.crilogs.link_name`), pointing to the container's log file under the pod log
directory; log shippers (fluentd, fluent-bit, Vector...) read the directory by that name. The
kubelet's lifetime (pkg/kubelet/kuberuntime): made when the container has started, if its log
file exists (a link to nothing would only wait for the collector); removed with the
container's logs when the container is removed; a link whose log file is gone is removed by
the container GC once its container has exited or is gone; `nodelet reset` removes the rest.

The directory (`settings.LogSettings.links_dir`) is the kubelet's, fixed for it, and may be
shared with other agents of the machine (another nodelet, a kubelet, the tests'): an
instance only ever removes links that point into its own pod log directory (`owned`).

`make` and `remove` raise OSError; `remove_into` logs what it cannot remove.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# The kubelet makes /var/log/containers 0755 (kubelet.go initializeModules): the links are
# listable; their targets stay as closed as the pod log directory is.
DIR_MODE = 0o755


@dataclass(frozen=True)
class Link:
    """A link of the directory: its name, where it points, and whether that is gone."""

    name: str
    target: Path
    dangling: bool


def make(directory: Path, name: str, target: Path) -> bool:
    """`directory/name` → `target` when `target` exists (the directory made if missing);
    whether the link is there now. A link of that name to the same target is kept; any
    other file of that name is an error (FileExistsError)."""
    if not target.exists():
        return False
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    path = directory / name
    try:
        os.symlink(target, path)
    except FileExistsError:
        if not path.is_symlink() or Path(os.readlink(path)) != target:
            raise
    return True


def remove(directory: Path, name: str) -> bool:
    """Remove the link `directory/name`; False when there was none. Never removes anything
    but a symlink."""
    path = directory / name
    if not path.is_symlink():
        return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def owned(directory: Path, logs_root: Path) -> list[Link]:
    """The links of `directory` that point into `logs_root` (this instance's pod logs), by
    name; none when the directory does not exist."""
    return sorted((link for link in _links(directory) if _under(link.target, logs_root)),
                  key=lambda link: link.name)


def remove_into(directory: Path, root: Path) -> list[str]:
    """Remove every link of `directory` that points into `root` (a pod's log directory when
    the pod goes, the instance's pod logs at reset); the names removed. One that cannot be
    removed is logged and left for the container GC."""
    removed: list[str] = []
    try:
        links = owned(directory, root)
    except OSError as exc:
        log.warning("cannot read the log links in %s: %s", directory, exc)
        return removed
    for link in links:
        try:
            if remove(directory, link.name):
                removed.append(link.name)
        except OSError as exc:
            log.warning("cannot remove the log link %s: %s", directory / link.name, exc)
    return removed


def _links(directory: Path) -> Iterator[Link]:
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return
    for entry in entries:
        if not entry.is_symlink():
            continue
        try:
            target = Path(os.readlink(entry.path))
        except OSError:  # removed meanwhile
            continue
        yield Link(entry.name, target, not os.path.exists(entry.path))


def _under(target: Path, root: Path) -> bool:
    return target.is_absolute() and target.is_relative_to(root)
