"""What a [NodeConformance] test that did not pass found in nodelet, or why it does not apply.

Keys are substrings of the spec's full name; the first match is the note. Written by people
after reading the failure and the kubelet's code, never generated from a run. A note about a
bug that is fixed stays until a run shows the test passing, saying what was fixed.
"""

from __future__ import annotations

# Earlier runs, newest last, as measured (the counts are the suite's JUnit's): kept here because
# docs/conformance.md is rewritten by every run.
HISTORY: tuple[str, ...] = (
    "2026-12-04, first run (commit fb9f308, before any fix): focus `(Probing container|"
    "Container Lifecycle Hook|Downward API|ConfigMap|Secrets|Variable Expansion|EmptyDir).*"
    "\\[NodeConformance\\]`, skip `[Serial]|[Disruptive]|[Flaky]|[Slow]`, 105 tests, "
    "`--procs=3`: 74 passed, 31 failed, in 24.9 min. The failures: seLinuxOptions refused at "
    "admission (20 EmptyDir tests), the agnhost image without curl (4 exec hooks) and bash (2), "
    "probes not following local redirects (1) and not emitting ProbeWarning (1), the startup "
    "probe's grace period (1), Debian busybox's ash dropping `data-1` variables (2).",
    "2026-12-04, the whole non-[Slow] parallel set (commit 8c71f92, with the fixes of "
    "seLinuxOptions, windowsOptions, hostnameOverride, probe redirects, event refusals, "
    "observedGeneration and the images' curl, bash, fake registry and glibc-dns-testing), "
    "242 tests, `--procs=4`: 223 passed, 19 failed, in 45.4 min; then the 4 [Serial] ones: "
    "4 passed, in 1.0 min. Of the 105 tests of the first run: 100 passed, 5 failed. Fixed "
    "after it started: the Projected combined and emptyDir subPath-mode failures. The node "
    "e2e phase (KEP-3085's pod_conditions_test.go) did not run: e2e_node.test has no "
    "--kubeconfig and authenticates with a bearer token it makes up (run.py NODE_FOCUS).",
    "2026-12-04, pod generation tracking (commit 940dfcd): focus `Pods Extended \\(pod "
    "generation\\)` (Conformance, not NodeConformance; two need [MinimumKubeletVersion:1.34], "
    "read from kubeletVersion), `--mark 'pod generation'`: 4 passed, 0 failed, in 4.4 min.",
    "2026-12-04, ContainerRestartRules implemented (commit a814d72): focus "
    "`FeatureGate:ContainerRestartRules.*NodeConformance` (skip [Slow]: the RestartAllContainers "
    "ones), `--procs=2`: 6 passed, 0 failed, in 0.1 min (5 of them had failed before).",
    "2026-12-04, KEP-3085's own node e2e test for the first time (commit 9598c99): "
    "e2e_node.test, focus `Pod conditions managed by Kubelet.*\\[NodeConformance\\]`, its "
    "bearer token authenticated by kube-apiserver's --token-auth-file: 6 passed, 0 failed, in "
    "0.8 min. (Its first try stopped in the suite's BeforeSuite: nodelet's /configz gave "
    "kubeAPIQPS as 50.0, which the suite cannot decode into an int32; fixed there.)",
    "2026-12-04, the 19 tests that failed in the whole-set run, by focus (commit 3afbac3, with "
    "ContainerRestartRules, ephemeral containers, the startup probe's grace period, "
    "ProbeWarning events, sidecar start gating, the emptyDir mode and partial-line logs "
    "fixed), `--procs=2`: 17 passed, 4 failed of 21 selected, in 6.4 min. Still failing: the "
    "busybox `data-1` tests (2), the dummy link (1), node-to-pod UDP (1); the websocket logs "
    "test passed.",
    "2026-12-05, the tests still failing, [Slow] included (commit 055f2b3, the images' "
    "/bin/sh made bash and agnhost given netcat-openbsd's nc, an nginx stand-in built): "
    "focus `(consumable via the environment|node-pod communication: udp|retrieving logs from "
    "the container over websockets|back-off timer reset on image update)`, `--procs=3`: 3 "
    "passed, 2 failed, in 10.8 min. Failed: the websocket logs test (reproduced by hand: "
    "about every other WebSocket read of a log through kube-apiserver came back empty — "
    "wsstream drops the last Read's bytes when it also returns EOF, and nodelet's TLS front "
    "sent the last log line and the response's end in one TLS record) and the back-off "
    "reset (nodelet kept the old back-off after the image update: d3=4m55s).",
    "2026-12-05, after the fixes of both, and RestartAllContainers implemented (commit "
    "5d34bd9): focus `(back-off timer reset on image update|RestartAllContainers|over "
    "websockets|consumable via the environment|node-pod communication: udp)`, [Slow] "
    "included, `--procs=3`: 11 passed, 0 failed, in 6.2 min.",
    "2026-12-05, the whole [NodeConformance] set for the first time, [Slow] included (commit "
    "eeb1166), `--procs=3`: 258 passed, 131 failed in 57.8 min, then [Serial] and KEP-3085's "
    "node e2e 6/6: 59.9 min in all (the report below). Of the 131: 128 in-place resize tests "
    "(refused on purpose), the dummy link (this machine), and two found by it: the back-off "
    "cap (nodelet counted CrashLoopBackOff from the previous start: fixed in 2fd14fe, then "
    "focus `(cap back-off at MaxContainerBackOff|back-off timer reset on image update)`: 2 "
    "passed, 0 failed, in 26.6 min) and the read-only busybox test (its ash message, which "
    "bash as the image's sh changed: the busybox image's sh is ash again in 3418898). An "
    "earlier start of this run (25 min, stopped) found every status PATCH of a refused "
    "pod-level-resources pod rejected (422, qosClass immutable): fixed in e915426.",
    "2026-12-05, the image tests again with busybox's ash as the busybox image's sh (commit "
    "3418898): focus `(read only busybox container|consumable via the environment|node-pod "
    "communication: udp|retrieving logs from the container over websockets|scheduling a "
    "busybox command)`, `--procs=2`: 6 passed, 2 failed (the two `data-1` env tests, Debian "
    "ash's), in 1.0 min. So at the end of this session, of the 389 [NodeConformance] specs: "
    "258 pass, 128 are in-place resize (not offered), 2 need busybox's upstream ash, 1 needs "
    "dummy links on this kernel.",
    "2026-12-05, in-place resize (KEP-1287) and pod-level resources implemented (commit "
    "26d5465): focus `PLR Pod InPlace Resize.*(guaranteed qos - 1 container with resize policy "
    "no restart|decrease pod-level memory limit|should not emit ResizeCompleted|burstable pods "
    "- pod-level resources)|Pod InPlace Resize Init Container`, `--procs=2`: 7 passed, 0 "
    "failed, in 3.5 min; then a sample of the restart and multi-container tables: 6 passed, 1 "
    "failed (a Guaranteed container restarted by its resize policy reads oom_score_adj 0, not "
    "-997: this machine cannot lower an OOM score), in 2.2 min.",
    "2026-12-05, the whole in-place resize group (commit 1621a8e, after the services moved "
    "into their jobs): focus `PLR Pod InPlace Resize|Pod InPlace Resize Init Container`, "
    "[Slow] included, `--procs=3`: 108 passed, 20 failed of 128, in 39.2 min "
    "(docs/conformance-resize.md); all 20 are Guaranteed containers restarted by their resize "
    "policy, whose OOM score this machine cannot lower to -997. With the whole set of "
    "eeb1166, of the 389 [NodeConformance] specs: 366 pass (258 + 108), "
    "20 need CAP_SYS_RESOURCE, 2 need busybox's upstream ash, 1 needs dummy links on this "
    "kernel. The whole set has not been run again in one go since eeb1166.",
    "2026-12-05, the whole set but the in-place resize group (commit d94bc04: the image "
    "back-off shown in its window, static pods' pod-level requests against the aggregate, the pod "
    "sync's wiring thinned), [Slow] included, skip `InPlace Resize` too, `--procs=3`: 258 "
    "passed, 3 failed in 54.6 min, then [Serial] and KEP-3085's node e2e 6/6: 56.5 min in all "
    "(docs/conformance.md). The 3 are those of eeb1166: the two `data-1` env tests (Debian "
    "busybox's ash) and the privileged dummy link (this kernel). With the resize group of "
    "1621a8e, 366 of the 389 [NodeConformance] specs pass.",
)

# A resize that restarts a Guaranteed pod's container, then reads its OOM score.
RESTART_OOM = (
    "this machine: after a resize that restarts a container the test reads "
    "`/proc/1/oom_score_adj` and wants the kubelet's -997 for a Guaranteed pod. nodelet asks "
    "for it (CRI oom_score_adj, specs.oom_score_adj), but no process here may lower its OOM "
    "score (no CAP_SYS_RESOURCE: `echo -997 > /proc/self/oom_score_adj` as root fails), so "
    "containerd runs with `restrict_oom_score_adj` and clamps it to its own 0; the kubelet "
    "on these machines gets the same 0. Burstable scores (raised, not lowered) are applied "
    "and tested (tests/cluster/test_cluster_resize.py)")

NOTES: dict[str, str] = {
    # This machine: in-place resize works (tests/cluster/test_cluster_resize.py), but a
    # Guaranteed container's OOM score cannot be lowered here.
    "with resize policy [Environment:NotInUserNS] cpu & mem restart": RESTART_OOM,
    "with resize policy [Environment:NotInUserNS] mem restart": RESTART_OOM,
    "with resize policy [Environment:NotInUserNS] cpu restart": RESTART_OOM,
    # Found by the whole run and fixed after it (the focused reruns in the history passed).
    "should cap back-off at MaxContainerBackOff": (
        "fixed after this run (2fd14fe): nodelet counted CrashLoopBackOff from the container's "
        "previous start, so a container that ran 5 s restarted 4m55s after its exit; the "
        "kubelet's doBackOff counts from FinishedAt. The focused rerun passed"),
    "read only busybox container should not write to root filesystem": (
        "the test image of this run: bash as the busybox image's sh answers `/bin/sh: line 1: "
        "/file: Read-only file system`, the test expects busybox ash's `can't create`; the "
        "image's sh is busybox's ash again since 3418898 (it passed in every earlier run)"),
    # The test images (images/e2e.py): what differs from upstream's.
    "Secrets should be consumable via the environment": (
        "the test image: its `sh -c env` runs Debian busybox-static's ash (1.35), which drops "
        "environment variables whose names are not shell identifiers (`data-1`; measured: "
        "`env data-1=x busybox sh -c env` prints no data-1); upstream's busybox:1.37.0 ash "
        "imports every variable since 1.36 (shell/ash.c), and Debian's 1.37 build drops them "
        "too. nodelet sets them (envFrom, tests/model/test_envvars.py); the test passed with "
        "bash as the image's sh (2026-12-05), which fails the read-only test's ash message "
        "instead. Needs busybox built from upstream's source"),
    "ConfigMap should be consumable via the environment": (
        "the test image: Debian busybox's ash drops variables named `data-1` (see the Secrets "
        "test)"),
    # This machine.
    "PrivilegedPod should enable privileged commands": (
        "this machine: `ip link add dummy1 type dummy` answers `Operation not supported` (the "
        "kernel has no dummy links); the real kubelet failed it on these machines too"),
}


def note(name: str) -> str:
    return next((text for key, text in NOTES.items() if key in name), "")
