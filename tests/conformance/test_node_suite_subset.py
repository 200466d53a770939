"""A subset of the node's own suite (`e2e_node.test`, [NodeConformance]), at every `make test`.

The same pipeline as `make conformance-node` (tests/conformance/run_node.py: the suite's images
in a local registry, a fresh real control plane, `nodelet run` joined as its only node, the
suite run on this host with `--start-services=false`), on nodelet alone, with a focus that
takes a few minutes: specs of the areas where the full run found nodelet's bugs (sidecar
ordering and termination, a preStop hook past its budget, readiness probes during a liveness
kill's preStop, a pod failed while its sidecar still ran, mirror pod recreation and grace
periods, EnvFiles, the /var/log/containers links; notes_node.HISTORY), plus a pod deleted
while pending or running, setHostnameAsFQDN and the conditions of a pod whose volume is
missing: 20 specs, 2.6 min here with `--procs 2`. The full run is `make conformance-node`;
docs/conformance-node.md has its last result.

Without `--host-defaults`: the machine's ports 10248/10250/10255, its cgroup root and the
kubelet's device plugin directory stay free for others, so no selected spec may need them.

Skipped when the programs are not built (`kube/build.sh e2e_node.test ginkgo agnhost nnp`
after `make kube`; `make test` builds them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report_node  # noqa: E402  (tests/conformance/report_node.py)
import run_node  # noqa: E402  (tests/conformance/run_node.py)

from support import controlplane  # noqa: E402

pytestmark = pytest.mark.runtime

# One alternative per behaviour; each spec it matches is [NodeConformance], in test/e2e_node/,
# not [Serial]/[Disruptive]/[Flaky]/[Slow] (run_node.py's default skip), and takes under ~40 s
# here. The first is an Ordered container: its first spec runs the pod, the others read its
# log, so it is selected whole (8 specs, one pod, a few seconds).
SUBSET = [
    # Sidecars: restartable init containers start in order, beside the init containers after them.
    r"Containers Lifecycle when using a Pod with restartPolicy=Never, three init container and "
    r"two restartable init containers ",
    # A pod is not reported Failed while its sidecar still runs (0f265f0).
    r"Containers Lifecycle when initializing an init container after a restartable init "
    r"container Should begin initializing the pod, restartPolicy=Never ",
    # Sidecars stop in reverse order once the main containers have exited.
    r"Containers Lifecycle when A pod with restartable init containers is terminating when The "
    r"containers exit successfully should terminate sidecars in reverse order ",
    # A preStop hook past its budget runs on to the SIGKILL, 2 s later (22e5087).
    r"Containers Lifecycle when A pod with restartable init containers is terminating when The "
    r"PreStop hooks don't exit should terminate sidecars simultaneously ",
    # Readiness is probed during a liveness kill's preStop, liveness not (5f1af6f).
    r"Containers Lifecycle when Running a pod with init containers and regular containers, "
    r"restartPolicy=Never when A regular container has a PreStop hook when A regular container "
    r"fails a liveness probe when a pod is terminating because its liveness probe fails should "
    r"execute readiness probe while in preStop, but not liveness ",
    # Pods deleted while pending and while running.
    r"Deleted pods handling Should transition to Failed phase a pod which is deleted while "
    r"pending ",
    r"Deleted pods handling Should transition to Failed phase a deleted pod if non-zero exit "
    r"codes Restart policy Always ",
    # Mirror pods: made for a static pod, made again when deleted (af31cd5).
    r"MirrorPod when create a mirror pod should be recreated when mirror pod forcibly deleted ",
    # A static pod's update honours the old pod's grace period.
    r"MirrorPodWithGracePeriod when create a mirror pod mirror pod termination should satisfy "
    r"grace period when static pod is updated ",
    # env[].valueFrom.fileKeyRef in a static pod (c54575c).
    r"MirrorPod with EnvFiles \[FeatureGate:EnvFiles\] when creating a static pod with EnvFiles "
    r"should be able to consume variables from a file ",
    # setHostnameAsFQDN.
    r"Hostname of Pod a pod with subdomain field has FQDN, when setHostnameAsFQDN is set to "
    r"true, the FQDN is set as hostname ",
    # A missing Secret volume: FailedMount, only PodScheduled until it appears, then the order.
    # (The file's specs that read PodReadyToStartContainers itself are [Serial]: they
    # reconfigure the node.)
    r"Pod conditions managed by Kubelet without PodReadyToStartContainersCondition condition a "
    r"pod failing to mount volumes \(Secret\) and with init containers ",
    # The link in /var/log/containers (ee82b1a).
    r"ContainerLogPath Pod with a container printed log to stdout should print log to correct "
    r"log path ",
]
FOCUS = "(" + "|".join(SUBSET) + r").*\[NodeConformance\]"
SEED = 20261208  # one order for every run
PROGRAMS = ("e2e_node.test", "ginkgo", "agnhost", "nnp", "kube-apiserver", "etcd", "kubectl")


def _missing() -> list[str]:
    return [p for p in PROGRAMS if not os.access(controlplane.bin_dir() / p, os.X_OK)]


@pytest.mark.timeout(1200)
def test_a_subset_of_the_node_suite_passes(tmp_path: Path) -> None:
    if missing := _missing():
        pytest.skip(f"not built: {', '.join(missing)} (kube/build.sh {' '.join(missing)})")
    out, doc = tmp_path / "out", tmp_path / "conformance-node.md"
    assert run_node.main(["--agents", "nodelet", "--focus", FOCUS, "--procs", "2",
                          "--seed", str(SEED), "--out", str(out), "--doc", str(doc)]) == 0
    dry = report_node.read_dry_run(everything=out / "dry-all.json",
                                   selected=out / "dry-selected.json")
    # Every spec the dry run selected, by name; "not run" when the JUnit lacks it.
    results = report_node.read_results(out / "nodelet" / "junit" / "junit_01.xml", dry)
    not_passed = [f"{name}: {r.status} {r.message}" for name, r in results.items()
                  if r.status != "passed"]
    assert not not_passed, f"see {out / 'nodelet' / 'suite.log'}\n" + "\n".join(not_passed)
    ran = [name for name, r in results.items() if r.status in ("passed", "failed")]
    assert len(ran) >= len(SUBSET), ran
