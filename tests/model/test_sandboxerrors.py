"""Sandbox error classes against containerd 1.6's own wording."""

from __future__ import annotations

import pytest

from nodelet.model.core import sandboxerrors

CONTAINERD_ERRORS = [
    ('failed to setup network for sandbox "4b1f": plugin type="bridge" failed (add): failed to '
     "allocate for range 0: no IP addresses available in range set: 10.88.0.1-10.88.0.6", "",
     "ip_exhausted"),
    ('failed to setup network for sandbox "4b1f": plugin type="bridge" name="nodelet" failed '
     '(add): failed to set bridge addr: could not add IP address to "nl1": permission denied', "",
     "cni_plugin"),
    ('failed to setup network for sandbox "4b1f": failed to find plugin "bridge" in path '
     "[/opt/cni/bin]", "", "cni_plugin"),
    ("rpc error: code = Unknown desc = failed to setup network for sandbox \"4b1f\": "
     "cni plugin not initialized", "UNKNOWN", "cni_plugin"),
    ('rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "gvisor" '
     "is configured", "UNKNOWN", "other"),
    ('failed to get sandbox image "registry.k8s.io/pause:3.6": failed to pull image '
     '"registry.k8s.io/pause:3.6": failed to resolve reference', "", "image_pull"),
    ("failed to create containerd task: failed to create shim task: OCI runtime create failed: "
     "failed to update /proc/self/oom_score_adj: Permission denied", "", "other"),
    ("RunPodSandbox default/web (attempt 0) failed: container runtime at /run/c.sock is not "
     "reachable: check that containerd is running", "UNAVAILABLE", "runtime_unavailable"),
    ("rpc error: code = DeadlineExceeded desc = context deadline exceeded", "DEADLINE_EXCEEDED",
     "runtime_unavailable"),
    ('connection error: desc = "transport: Error while dialing dial unix /run/c.sock: connect: '
     'connection refused"', "", "runtime_unavailable"),
    ('rpc error: code = Unknown desc = failed to reserve sandbox name "web_default_1_0": name '
     "is reserved", "UNKNOWN", "other"),
    # A path that mentions "cni" only as part of a word is not a CNI error.
    ("open /var/lib/technician/x: no such file or directory", "", "other"),
]


@pytest.mark.parametrize(("message", "code", "expected"), CONTAINERD_ERRORS)
def test_classify_sandbox_error(message: str, code: str, expected: str) -> None:
    assert sandboxerrors.classify_sandbox_error(message, code=code) == expected
    assert expected in sandboxerrors.ERROR_CLASSES
