"""Sandbox error classes: a small closed set of causes a failed pod start is counted under.

The metrics (`services.serving.metrics`) label `nodelet_sandbox_failures_total` with these
classes, so the set is bounded: a class never carries a pod name or the runtime's message.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

ErrorClass = Literal["ip_exhausted", "cni_plugin", "runtime_unavailable", "volume_missing",
                     "image_pull", "other"]
ERROR_CLASSES: tuple[ErrorClass, ...] = get_args(ErrorClass)

_CNI = re.compile(r"\bcni\b|plugin type=|failed to (setup|set up|destroy) network", re.I)


def classify_sandbox_error(message: str, *, code: str = "") -> ErrorClass:
    """The error class of a failed RunPodSandbox, from its message and gRPC code name.

    Matched against containerd 1.6's own wording, e.g. `plugin type="bridge" failed (add):
    failed to allocate for range 0: no IP addresses available in range set: ...` (ip_exhausted),
    `failed to get sandbox image "...": failed to pull image ...` (image_pull), `failed to find
    plugin "bridge" in path [...]` or `cni plugin not initialized` (cni_plugin). A missing
    runtime handler (`no runtime for "gvisor" is configured`) is `other`. A runtime that does
    not answer (UNAVAILABLE, or no answer before the deadline) is `runtime_unavailable`.
    """
    text = message.lower()
    if "no ip addresses available" in text or "range is full" in text:
        return "ip_exhausted"
    if "failed to get sandbox image" in text or "failed to pull image" in text:
        return "image_pull"
    if _CNI.search(text):
        return "cni_plugin"
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") or "connection refused" in text \
            or "error while dialing" in text:
        return "runtime_unavailable"
    return "other"
