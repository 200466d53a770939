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
    "2026-12-07, the whole presubmit set: the 191 [NodeConformance] specs of test/e2e_node "
    "without [Serial], [Disruptive], [Flaky], [Slow], `--procs=3`, seed 20261207, with "
    "busybox's nmeter (images/nmeter.c) and `run_node.py --host-defaults`. The kubelet first "
    "(harness at ec58fc5: cgroup root `/` and port 10255, not yet 10248 nor test-handler): "
    "179 passed, 10 failed, 2 skipped in 36.8 min; its 10: the 6 device plugin specs that "
    "start with a health check of 127.0.0.1:10248, the RuntimeClass overhead spec "
    "(test-handler), /var/log/pods, /metrics/cadvisor and /stats/summary. nodelet's first "
    "run (at 8f088f3) found 4 failures of its own in the container lifecycle specs (fixed: "
    "0f265f0 a pod reported Failed while its sidecar still ran, 22e5087 a preStop hook "
    "killed at the end of its budget instead of running into the 2 s minimum, 5f1af6f no "
    "readiness probe during a liveness kill's preStop) and hung for 17 min in the "
    "ContainerMetrics spec (the suite's parser looped on nodelet's 404 body; 0b542cc), so "
    "it was interrupted and left no JUnit. Again at 0b542cc: 180 passed, 9 failed, 2 "
    "skipped in 19.8 min, 6 of the failures the device plugin specs, whose socket "
    "/var/lib/kubelet/device-plugins/kubelet.sock a kubelet started by another test on the "
    "machine had taken over meanwhile; those 7 specs alone again: 7 passed. In all nodelet "
    "186 passed, 3 failed (/var/log/pods, /metrics/cadvisor, /stats/summary, which the "
    "kubelet fails too), 2 skipped; every spec the kubelet passes, nodelet passes.",
    "2026-12-07, the 34 [Serial], [Disruptive] and [Slow] specs of test/e2e_node ([Flaky] "
    "left out), one at a time (`--label-filter 'Serial || Disruptive || Slow' --procs 1`, "
    "seed 20261207), after the stand-in for systemd (units.py) and nodelet reading a "
    "KubeletConfiguration written from its /configz. nodelet's first runs stopped at the "
    "first restart with a config file: the file's zero values of fields /configz left out "
    "(fixed: /configz says what nodelet does where it has no setting, 431d93d, 49dfc88) and "
    "the embedded containerd's socket read as an outside runtime (a674c81). Then (at "
    "a674c81, 44 min): 15 passed, 10 failed, 9 skipped. The kubelet (7eac204, without the "
    "4 specs whose outcome this machine decides for both: the private registry, the NFS "
    "image, the 2 image GC specs' pre-pull; 23.4 min): 16 passed, 5 failed, 9 skipped. "
    "The kubelet's presubmit specs that its first run's harness failed (the 7 device plugin "
    "and RuntimeClass overhead specs) again with --host-defaults (7.2 min): 8 passed. "
    "nodelet's two TLS specs again at 416ad1e (the client certificate's usage left to the "
    "per-request check): KubletTLS passed, the client CA spec failed as on the kubelet (a "
    "harness limit, below). In all, the one spec the kubelet passes and nodelet does not is "
    "deliberate (the static pod's init container, below).",
    "2026-12-07, the two serial specs of the pod resources API (its /metrics counters) and "
    "of a device plugin with a restartable init container, after nodelet served the API "
    "(315403d) and the harness imported the sample device plugin image and gave the "
    "kubelet's API the default root's path: the kubelet 2 passed (1.9 min); nodelet passed "
    "the metrics spec and failed the other (its app container got the device its sidecar "
    "kept from the init container: fixed in 453db2e, the kubelet's devicesToReuse in the "
    "containers' order), then both again at 453db2e: see the counts above.",
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
    "`staticPodPath`, and some specs use fixed host paths and ports of a kubelet with its "
    "defaults: the QoS and pod cgroups under the cgroup root `/` (`kubepods/...`, the pods "
    "container manager and RuntimeClass overhead specs), the read-only port 10255 on "
    "localhost (`/metrics/cadvisor`), the healthz server on 127.0.0.1:10248 (the device "
    "plugin specs check it first), the device plugin directory "
    "`/var/lib/kubelet/device-plugins/`, the pod resources API at "
    "`/var/lib/kubelet/pod-resources/kubelet.sock` (the kubelet serves it under its root "
    "dir: a link there while it runs), `/var/log/containers` (a link per container) and "
    "`/var/log/pods` (the logs themselves). `make conformance-node` runs `run_node.py "
    "--host-defaults`: each agent, alone on the machine in turn, gets the cgroup root `/`, "
    "ports 10255 and 10248 and that device plugin directory (the kubelet's is fixed); "
    "nodelet makes its links in /var/log/containers by default. Both keep their pod logs "
    "in their own directories (nodelet has no podLogsDir setting; the kubelet here has its "
    "own podLogsDir), so the `/var/log/pods` spec fails on both: a harness limit.",
    "From the Node object: `status.runtimeHandlers[].features` (recursiveReadOnlyMounts "
    "picks the recursive read-only branch). From the runtime: a handler named "
    "`test-handler`, as upstream's node e2e containerd config defines it (the RuntimeClass "
    "overhead spec): with --host-defaults both agents' containerd have it "
    "(`nodelet run --runtime-handler test-handler`).",
    "From the test images: busybox with `nmeter` (every container lifecycle spec times its "
    "log lines with `nmeter -d0 '%3t'`): Debian's busybox-static has no nmeter applet, so "
    "images/e2e.py adds images/nmeter.c, which prints that time and refuses any other "
    "format. The sample device plugin's DaemonSet manifest names its image as it is "
    "(`registry.k8s.io/e2e-test-images/sample-device-plugin:1.8.0`, which the repo list does "
    "not move): it is imported into each agent's containerd under that "
    "name before the suite, as upstream's node e2e pre-pulls it (images/e2e.py PRELOADED).",
    "`[Serial]` and `[Disruptive]` specs (34 of the node suite's own with `[Slow]`, run "
    "with `--label-filter 'Serial || Disruptive || Slow' --skip '\\[Flaky\\]' --procs 1`) "
    "restart or reconfigure the agent: `sudo systemctl` on a unit named `kubelet-<word>` "
    "(list-units, reset-failed, kill, restart), the healthz at 127.0.0.1:10248 to see it "
    "stop and start, the node server at 127.0.0.1:10250 (/configz, the serving "
    "certificate), and a `kubelet-config` file (the whole KubeletConfiguration, written from "
    "/configz with the spec's change) in the directory of the compiled suite, which the "
    "restarted agent reads. This machine has no systemd (pid 1 is not systemd, no sudo): "
    "tests/conformance/units.py stands in for the unit (a `systemctl` and a `sudo` first on "
    "the suite's PATH, served by the harness, which stops the agent by signal and starts it "
    "again with `--config` of that file); the suite is linked into each agent's directory, "
    "so each run has its own `kubelet-config`. The specs that stop the container runtime "
    "through D-Bus find no bus, on either agent.",
)

NOTES: dict[str, str] = {
    "should be ready after init container is removed and kubelet restarts": (
        "deliberate (DESIGN: the checkpoint keeps what the runtime cannot tell). The spec "
        "removes the static pod's completed init container from the runtime and restarts "
        "the agent; it expects the kubelet's inferred status, Completed with the message "
        "`Unable to get init container status from container runtime and pod has been "
        "initialized, treat it as exited normally`, which the kubelet writes because a "
        "static pod's status does not survive its restart (kubelet_pods.go). nodelet "
        "restores the pod's status from its checkpoint and reports the init container's "
        "real termination (Completed, exit 0, its container ID and times), as the kubelet "
        "does for a pod from the API, whose old status it reads back"),
    "when ImageMaximumGCAge is set": (
        "this machine's, on both: the spec's own check passes (the unused image is removed "
        "after the maximum age; nodelet: image GC by maximum age since eb0416c); its "
        "AfterEach then pulls the suite's whole pre-pull list again, 8 images of which the "
        "local registry has no copy of and this machine cannot build (cadvisor, nginx, "
        "perl, the node-perf images, etcd, node-problem-detector)"),
    "should be able to pull from private registry with credential provider": (
        "this harness, on both: the spec writes the node's registry credentials to "
        "`/var/lib/kubelet/config.json` and waits for `/var/lib/kubelet/image_manager` to "
        "come back, the default root directory of a kubelet; here each agent keeps its "
        "state in a directory of its own (nodelet: `<data dir>/config.json`, "
        "`--registry-config`; the kubelet peer: its own `--root-dir`)"),
    "volume failing to unmount": (
        "this machine's, on both: the spec's NFS server image (`volume/nfs`) is not in the "
        "local registry (it cannot be built here)"),
    "the container runtime is temporarily down": (
        "this machine's, on both: the spec stops and starts the container runtime's "
        "systemd unit over D-Bus; there is no systemd here (tests/conformance/units.py "
        "stands in for the agent's unit only)"),
    "with a critical pod - should avoid swap": (
        "this machine's, on both: the spec reads the pod's cgroup v2 `memory.swap.max` "
        "without checking the cgroup version (its other cases skip on cgroup v1, as here)"),
    "ReloadKubeletClientCAFileTest": (
        "this harness, on both: the spec puts a CA of its own in the agent's client CA, after "
        "which the API server's client certificate (of the cluster CA) is not trusted: the "
        "kubelet's /configz through the API server's proxy fails for 5 min (upstream's node "
        "e2e kubelet takes anonymous requests, AlwaysAllow; here both agents authenticate "
        "and authorize them by webhook). nodelet's run has the cluster CA as "
        "`--client-ca-file` on its command line, which wins over the spec's file (the "
        "kubelet's rule), so its /configz names the cluster CA and the spec's client, "
        "trusting that one, refuses the new serving certificate. The reload itself works "
        "(31ffbbb, ac52852, and since 416ad1e the handshake takes the spec's "
        "serverAuth-only client certificate, as the kubelet's Go server does, leaving its "
        "usage to the per-request check)"),
    "Device Plugin Failures": (
        "the kubelet's column: its run of 2026-12-07 had the healthz port on a free port, and "
        "each spec's plugin first checks `127.0.0.1:10248/healthz` (timed out after 300 s); "
        "`--host-defaults` gives both agents 10248 since; nodelet's column was run with it, "
        "the kubelet's not yet (a harness limit of that run, not the kubelet's)"),
    "Kubelet Cgroup Manager Pod containers": (
        "the check pod looks for `kubepods/<qos>/pod<uid>` directly under the host's cgroup "
        "root (cm.RootCgroupName): `--host-defaults` gives both agents the cgroup root `/`"),
    "PodOverhead cgroup accounting": (
        "the pod asks for RuntimeClass handler `test-handler` "
        "(e2eruntimeclass.PreconfiguredRuntimeClassHandler), which upstream's node e2e "
        "containerd config defines: `--host-defaults` gives both agents' containerd that "
        "handler since the kubelet's run of 2026-12-07, which had none (not run again on the "
        "kubelet yet: a harness limit of that run)"),
    "ContainerMetrics": (
        "both. The spec reads `http://localhost:10255/metrics/cadvisor`. The kubelet's "
        "cAdvisor here reports none of the test pods' containers (`container_start_time_"
        "seconds`, `container_memory_*`, ... missing for both pods), as nodelet's has no "
        "cAdvisor at all: it answers 404 (with a metrics-format comment since a run in which "
        "the suite's parser looped for ever on aiohttp's `404: Not Found` body)"),
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
    "should print log to correct cri log path": (
        "this harness: the check pod mounts the expected log file from the host path "
        "`/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log` (HostPath FileOrCreate: an empty "
        "file is created when it is missing); nodelet writes its logs under `<data dir>/logs` "
        "and the kubelet here under its own podLogsDir"),
}


def note(name: str) -> str:
    return next((text for key, text in NOTES.items() if key in name), "")
