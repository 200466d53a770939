"""The pod's managed /etc/hosts on the host: `<pods root>/<pod uid>/etc-hosts`.

Written, as by the kubelet, before each container start, and mounted at /etc/hosts into the
containers that do not mount a volume there (`model.core.etchosts` decides the content). The file
is rewritten in place and only when its content differs: running containers have its inode
bind-mounted, so a rename would leave them with the old file. It goes with the pod's
directory when the pod is terminated.

Errors are the `OSError` of the file system; the caller turns them into a container error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from nodelet.adapters import hostdirs
from nodelet.model.core import etchosts, pods, runtime

NODE_HOSTS = Path("/etc/hosts")
_MODE = 0o644


async def hosts_mount(
    pods_root: Path, pod: pods.Pod, pod_ips: Sequence[str], *, node_hosts: Path = NODE_HOSTS,
    cluster_domain: str = "",
) -> runtime.Mount | None:
    """Write the pod's hosts file and return its mount; None while the pod has no IP (the
    kubelet does not mount the file then, and the runtime's own copy stays).
    `cluster_domain` (`--cluster-domain`) ends the FQDN of a pod with a subdomain."""
    if not pod_ips:
        return None
    path = pods_root / pod.uid / etchosts.FILE_NAME
    await asyncio.to_thread(hostdirs.pod_dir, pods_root, pod.uid)
    await asyncio.to_thread(_ensure, path, pod, tuple(pod_ips), node_hosts, cluster_domain)
    return etchosts.hosts_mount(str(path))


def _ensure(path: Path, pod: pods.Pod, ips: tuple[str, ...], node_hosts: Path,
            cluster_domain: str) -> None:
    node = _read(node_hosts) if pod.spec.host_network else ""
    text = etchosts.content(pod, ips, node_hosts=node, cluster_domain=cluster_domain)
    data = text.encode(errors="surrogateescape")
    path.parent.mkdir(parents=True, exist_ok=True)
    # The container may write to its /etc/hosts: compare the size before reading it back.
    if path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    with path.open("wb") as handle:  # truncates the same inode
        handle.write(data)
    path.chmod(_MODE)


def _read(path: Path) -> str:
    # The node's file as bytes, kept byte for byte whatever its encoding.
    return path.read_bytes().decode(errors="surrogateescape")
