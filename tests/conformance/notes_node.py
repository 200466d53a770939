"""What a node-suite spec that nodelet did not pass found, and what the suite needs of a node.

Keys of NOTES are substrings of the spec's name; the first match is the note. Written by
people after reading the failure and the suite's code, never generated from a run.
"""

from __future__ import annotations

# Runs of `make conformance-node`, newest last, as measured (counts from the suite's JUnit):
# kept here because docs/conformance-node.md is rewritten by every run.
HISTORY: tuple[str, ...] = ()

# What the node suite (test/e2e_node, run with --start-services=false) reads from or does to
# the node, and what this harness gives it; read from the suite's code (v1.37.2).
NEEDS: tuple[str, ...] = (
    "Exactly one Node in the API (`getNode` fails with more): each agent gets a control "
    "plane of its own, one after the other.",
    "A bearer token (the suite has no `--kubeconfig`): kube-apiserver's `--token-auth-file` "
    "holds the run's token, user `e2e-node-suite` in `system:masters`, as the suite's own "
    "services give it.",
    "`/configz` through `nodes/<node>/proxy/configz` (`GetCurrentKubeletConfig`, in the "
    "suite's BeforeSuite; int32 fields must be integers): nodelet serves it from its settings. "
    "Read by the selected specs: `staticPodPath` (mirror and static pods), `cgroupsPerQOS` "
    "(the QoS cgroup and RuntimeClass overhead specs). Both agents get a static pod directory.",
    "The node's containerd over CRI (`--container-runtime-endpoint`): the mirror pod grace "
    "period and some container lifecycle specs read container states and exit codes there.",
    "The test process on the node's host: static pod manifests are written to "
    "`staticPodPath`, and a few specs read fixed host paths that only a kubelet with its "
    "defaults uses: `/var/lib/kubelet/pods/<uid>/volumes` (a mirror pod's volumes gone), "
    "`/var/lib/kubelet/device-plugins/` (the device plugin specs' socket), "
    "`/var/log/containers` and `/var/log/pods` (the log path specs), the QoS cgroups "
    "directly under the cgroup root (`kubepods/...`, the pods container manager specs), "
    "the read-only port 10255 on localhost (`/metrics/cadvisor`). Both agents run here with "
    "their own root, log dir, cgroup root and ports beside the other tests of the machine, "
    "so those specs fail on both: a harness limit, not the node's.",
    "`[Serial]` and `[Disruptive]` specs (not in the default selection) restart or "
    "reconfigure the kubelet: a systemd unit named `kubelet-<word>`, a `kubelet-config` file "
    "in the suite's working directory and the healthz at 127.0.0.1:10248. Neither agent "
    "offers that here yet (issue 38).",
)

NOTES: dict[str, str] = {}


def note(name: str) -> str:
    return next((text for key, text in NOTES.items() if key in name), "")
