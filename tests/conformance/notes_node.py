"""What a node-suite spec that nodelet did not pass found, and what the suite needs of a node.

Keys of NOTES are substrings of the spec's name; the first match is the note. Written by
people after reading the failure and the suite's code, never generated from a run.
"""

from __future__ import annotations

# Runs of `make conformance-node`, newest last, as measured (counts from the suite's JUnit):
# kept here because docs/conformance-node.md is rewritten by every run.
HISTORY: tuple[str, ...] = (
    "2026-12-06, the first run (commit 3d45f71), a slice of the presubmit set for the time "
    "there was: the 55 specs of every selected file but container_lifecycle_test.go and the "
    "device plugin files, and the 15 of container_lifecycle_test.go's context at line 633 "
    "(`Running a pod with init containers and regular containers, restartPolicy=Never`): 70 "
    "specs, `--procs=4`, seed 1796583007. nodelet: 44 passed, 24 failed, 2 skipped, in 13.5 "
    "min; the kubelet: 51 passed, 17 failed, 2 skipped, in 10.1 min; 24.9 min in all with "
    "the registry and both planes. Of nodelet's 24: 17 the kubelet fails too (10 the busybox "
    "image without nmeter, 3 the cgroup root, 1 the test-handler runtime, 1 the fixed port "
    "10255, 1 /var/log/pods, and /stats/summary: on nodelet a 403, on the kubelet missing "
    "fields); 5 the kubelet passes (the mirror pod grace period on update, two mirror pod "
    "recreations, EnvFiles, the /var/log/containers link); 2 the kubelet skipped as not "
    "applicable and passes their 2 counterparts that nodelet skipped (recursive read-only: "
    "nodelet publishes no runtimeHandlers).",
)

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
    "From the Node object: `status.runtimeHandlers[].features` (recursiveReadOnlyMounts "
    "picks the recursive read-only branch; nodelet publishes none). From the runtime: a "
    "handler named `test-handler` (the RuntimeClass overhead spec; not in either agent's "
    "containerd config here).",
    "From the test images: busybox with `nmeter` (every container lifecycle spec times its "
    "log lines with it; images/e2e.py's Debian busybox has none).",
    "`[Serial]` and `[Disruptive]` specs (not in the default selection) restart or "
    "reconfigure the kubelet: a systemd unit named `kubelet-<word>`, a `kubelet-config` file "
    "in the suite's working directory and the healthz at 127.0.0.1:10248. Neither agent "
    "offers that here yet (issue 38).",
)

# The container lifecycle specs time-stamp every line their containers log.
NO_NMETER = (
    "the test image: every container of these specs logs `date -u +%FT$(nmeter -d0 '%3t' | "
    "head -n1)Z` (milliseconds from busybox's nmeter applet, "
    "test/e2e_node/container_lifecycle_pod_construction.go); Debian's busybox-static in "
    "images/e2e.py has no nmeter, so each line reads `/bin/sh: nmeter: not found` or "
    "`2026-12-06TZ ...` and the spec cannot parse it. Says nothing of either agent until the "
    "busybox image has an nmeter (upstream's busybox, or a stand-in printing the same)")
CGROUP_ROOT = (
    "this harness: the check pod looks for `kubepods/<qos>/pod<uid>` directly under the "
    "host's cgroup root (cm.RootCgroupName); both agents run under a cgroup root of their "
    "own (`/nodelet-conformance-<pid>`, `/kubelet-node-...`) beside the machine's other "
    "tests. A node with cgroupRoot `/` would test it")

NOTES: dict[str, str] = {
    "Containers Lifecycle": NO_NMETER,
    "Kubelet Cgroup Manager Pod containers": CGROUP_ROOT,
    "PodOverhead cgroup accounting": (
        "this harness: the pod asks for RuntimeClass handler `test-handler` "
        "(e2eruntimeclass.PreconfiguredRuntimeClassHandler), which the upstream node e2e "
        "containerd config defines and the containerd config of both agents here (nodelet's "
        "generated one) does not: the pod never runs. Then it reads the pod cgroup under the "
        "host's cgroup root, as the Cgroup Manager specs"),
    "ContainerMetrics": (
        "this harness and nodelet: the spec reads `http://localhost:10255/metrics/cadvisor`, a "
        "fixed port; both agents' read-only ports are free ports here. nodelet serves no "
        "/metrics/cadvisor at all yet (issue 38's list)"),
    "should report resource usage through the stats api": (
        "this machine's, on both. The spec reads `http://<address>:<readOnlyPort>/stats/"
        "summary` as /configz gives them, without credentials (nodelet's read-only port "
        "answered 403 before dff9113, and its summary lacked the runtime's filesystems, the "
        "containers' rootfs sizes and logs, ephemeral-storage, the `pods` system container "
        "and the emptyDir's figures, and listed a restarted container twice, before "
        "f953d38). Both summaries fall short of the spec here alike: no "
        "`kubelet`/`runtime`/`misc` system containers (not configured on this host), no PSI "
        "(cgroup v1), the pod's projected token volume listed beside the spec's emptyDir "
        "(the spec expects that one only); the kubelet's also lacked pod network stats, "
        "which nodelet's has"),
    "satisfy grace period when static pod is updated": (
        "nodelet's: the static pod's manifest changed (a new UID); within 0.2 s the mirror "
        "pod had the new UID, while the kubelet keeps the old mirror pod, and the old pod "
        "running, through the old pod's grace period (19 s checked) before it creates the "
        "new one"),
    "should be recreated when mirror pod forcibly deleted": (
        "nodelet's: its mirror pod was never created (BeforeEach, 120 s). nodelet's log: the "
        "mirror pod writer was retrying, from 18:59:22 to 19:04:25, a POST of another "
        "spec's mirror pod into a namespace being deleted (403 `unable to create new content "
        "in namespace ... because it is being terminated`), and created no other mirror pod "
        "meanwhile: one refused mirror pod blocks every other"),
    "should successfully recreate when file is removed and recreated": (
        "nodelet's: after the manifest was removed and written again (the same content, so "
        "the same UID) the spec waits for the mirror pod Running with restartCount 1, as the "
        "kubelet restarts the container of a pod it still knows; nodelet did not report it "
        "within 120 s (its mirror pod writer was also blocked at the end of that window, see "
        "the forcibly deleted spec)"),
    "recursive read-only mounts": (
        "nodelet's: the suite picks its branch from the Node's `status.runtimeHandlers` "
        "features (recursiveReadOnlyMounts), which the kubelet publishes from CRI's "
        "RuntimeStatus and nodelet does not publish at all; so on nodelet the `supports` specs "
        "skip themselves and the `does not support` ones expect a recursiveReadOnly: Enabled "
        "pod to stay Pending, which nodelet (whose runtime does support it) ran to Succeeded"),
    "should print log to correct cri log path": (
        "this harness: the check pod mounts the expected log file from the host path "
        "`/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log` (HostPath FileOrCreate: an empty "
        "file is created when it is missing); nodelet writes its logs under `<data dir>/logs` "
        "and the kubelet here under its own podLogsDir"),
    "should print log to correct log path": (
        "the check pod mounts `/var/log/containers/<pod>_<ns>_<container>-<id>.log`, the link "
        "the kubelet makes to every container's log; nodelet makes it since ee82b1a (in "
        "`--container-logs-dir`, default /var/log/containers), before which it failed"),
}


def note(name: str) -> str:
    return next((text for key, text in NOTES.items() if key in name), "")
