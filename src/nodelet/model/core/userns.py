"""User namespaces of pods with `hostUsers: false` (pure): the kubelet's ID ranges.

As the kubelet's user namespace manager (pkg/kubelet/userns) without a `kubelet` entry in
/etc/subuid: each such pod gets a range of `IDS_PER_POD` (65536) host IDs of its own, at a
multiple of 65536, never the first range (host IDs 0-65535 stay the host's), mapped to IDs
0-65535 in the pod, the same for users and groups. The range is kept in the pod's directory
(`FILE`, the kubelet's JSON) so an agent restart keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Set
from typing import Any

from nodelet.model.core import runtime

IDS_PER_POD = 65536
FIRST_HOST_ID = 1 << 16
# Ranges below 2**32 (the kubelet's default length is 2**32 - 65536).
SLOTS = ((1 << 32) - FIRST_HOST_ID) // IDS_PER_POD
FILE = "userns"


class UserNamespaceError(Exception):
    """No range is free, or a pod's stored range is not one of ours."""


def allocate(used: Set[int]) -> runtime.UserNamespace:
    """The lowest free range (`used`: the host IDs where ranges in use start)."""
    for slot in range(SLOTS):
        host_id = FIRST_HOST_ID + slot * IDS_PER_POD
        if host_id not in used:
            return runtime.UserNamespace(host_id=host_id, length=IDS_PER_POD)
    raise UserNamespaceError(f"all {SLOTS} user namespace ranges are in use")


def to_json(userns: runtime.UserNamespace) -> bytes:
    mapping = [{"hostId": userns.host_id, "containerId": 0, "length": userns.length}]
    return json.dumps({"uidMappings": mapping, "gidMappings": mapping}).encode()


def from_json(data: bytes) -> runtime.UserNamespace:
    """A stored range; raises UserNamespaceError for anything but one range of ours."""
    try:
        parsed: Any = json.loads(data)
        uids, gids = parsed["uidMappings"], parsed["gidMappings"]
        (uid,), (gid,) = uids, gids
        host_id, length = int(uid["hostId"]), int(uid["length"])
    except (ValueError, KeyError, TypeError) as exc:
        raise UserNamespaceError(f"unreadable user namespace mapping: {exc}") from exc
    if uid != gid or int(uid["containerId"]) != 0 or length != IDS_PER_POD \
            or host_id < FIRST_HOST_ID or host_id % IDS_PER_POD:
        raise UserNamespaceError(f"not a user namespace range of nodelet's: {parsed}")
    return runtime.UserNamespace(host_id=host_id, length=length)
