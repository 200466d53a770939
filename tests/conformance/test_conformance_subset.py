"""A representative subset of Kubernetes' [NodeConformance] e2e tests, at every `make test`.

The same pipeline as `make conformance` (tests/conformance/run.py: the suite's images in a
local registry, the real control plane, `nodelet run` joined as the only node), with a focus
that takes a few minutes: the pod lifecycle, conditions and status, probes, the security
context, volumes and the container runtime groups, one or two quick tests of each. The full
run is `make conformance`; docs/conformance.md has its last result.

Skipped when the e2e binaries are not built (`kube/build.sh e2e.test ginkgo agnhost nnp`, about
4 minutes after `make kube`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402  (tests/conformance/report.py)
import run  # noqa: E402  (tests/conformance/run.py)

from support import controlplane  # noqa: E402

pytestmark = pytest.mark.runtime

# One alternative per group; every name matched must be [NodeConformance] and not [Serial].
SUBSET = [
    r"Variable Expansion should allow composing env vars into new env vars",
    r"Downward API should provide pod name, namespace and IP address as env vars",
    r"ConfigMap should be consumable from pods in volume \[",
    r"Secrets should be consumable from pods in volume \[",
    r"EmptyDir volumes should support \(root,0644,tmpfs\)",
    r"Container Runtime blackbox test on terminated container should report termination "
    r"message from file when pod succeeds",
    r"Pods should get a host IP",
    r"Security Context When creating a container with runAsUser should run the container "
    r"with uid 65534",
    r"Probing container should be restarted with a exec \"cat /tmp/health\" liveness probe",
    r"Container Lifecycle Hook when create a pod with lifecycle hook should execute "
    r"poststart exec hook properly",
    r"Pods should support retrieving logs from the container over websockets",
    # In-place resize of pod-level resources: status, the pod cgroup and the containers' own.
    r"PLR Pod InPlace Resize .*burstable pods - pod-level resources pod-level resize with "
    r"limits add",
]
PROGRAMS = ("e2e.test", "ginkgo", "agnhost", "nnp", "kube-apiserver", "etcd")


def _missing() -> list[str]:
    return [p for p in PROGRAMS if not os.access(controlplane.bin_dir() / p, os.X_OK)]


@pytest.mark.timeout(1200)
def test_a_representative_subset_passes(tmp_path: Path) -> None:
    if missing := _missing():
        pytest.skip(f"not built: {', '.join(missing)} (kube/build.sh {' '.join(missing)})")
    focus = "(" + "|".join(SUBSET) + r").*\[NodeConformance\]"
    out, doc = tmp_path / "out", tmp_path / "conformance.md"
    assert run.main(["--focus", focus, "--no-serial", "--node-focus", "", "--procs", "3",
                     "--out", str(out), "--doc", str(doc)]) == 0
    results = report.read_junit([out / "parallel" / "junit_01.xml"])
    ran = [r for r in results if r.status in ("passed", "failed")]
    failed = [f"{r.name}: {r.message}" for r in results if r.status == "failed"]
    assert not failed, "\n".join(failed)
    assert len(ran) >= len(SUBSET), [r.name for r in ran]
