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
)

NOTES: dict[str, str] = {
    # Test images: what the locally built images (images/e2e.py) lack.
    "Secrets should be consumable via the environment": (
        "the test image: its `sh -c env` runs Debian busybox 1.35's ash, which drops "
        "environment variables whose names are not shell identifiers (`data-1`); measured "
        "here: `env data-1=x busybox sh -c env` prints no data-1. nodelet sets them "
        "(envFrom, tests/model/test_envvars.py)"),
    "ConfigMap should be consumable via the environment": (
        "the test image: Debian busybox 1.35's ash drops variables named `data-1` (see the "
        "Secrets test)"),
    # nodelet bugs found and fixed after the last run started (the next run shows them).
    "should project all components that make up the projection API": (
        "nodelet bug, fixed (commit 79df518): the node server's logs without follow dropped a "
        "last unfinished line (a `P` record at the file's end); the container's `cat`s print "
        "no newline. Regression test: tests/agent/test_node_server_partial_logs.py"),
    "nonexistent volume subPath should have the correct mode and owner using FSGroup": (
        "nodelet bug, fixed (commit a26df30): emptyDir on tmpfs was mounted with mode 0777; the "
        "kubelet passes no mode (tmpfs's 1777), and a subPath made in it takes the root's mode. "
        "Regression test: tests/agent/test_empty_dir_modes.py"),
    # nodelet bugs found and not fixed yet.
    "Probing restartable init container should be ready immediately after startupProbe "
    "succeeds": (
        "nodelet bug: the app container started 2 s after the pod was created, while the "
        "sidecar's startup probe succeeds only after 32 s; the kubelet "
        "(computeInitContainerActions) starts what follows a restartable init container only "
        "once it is started (its startup probe succeeded), so the test's clock starts then. "
        "In model/core/podactions.py (container_actions), not changed here"),
    "non-local redirect http liveness probe": (
        "nodelet gap: the probe now succeeds on a redirect to another host with the kubelet's "
        "output (adapters/probes_net.py) but the prober emits no ProbeWarning event for it "
        "(the kubelet's probe.Warning result: a Warning event `<kind> probe warning: "
        "<output>`), which the test waits for"),
    "should override timeoutGracePeriodSeconds when StartupProbe field is set": (
        "nodelet bug: a container killed for a failed startup probe gets the liveness probe's "
        "terminationGracePeriodSeconds or the pod's (500 s here), not the startup probe's "
        "(5 s): podactions.unhealthy_grace does not know which probe failed "
        "(probing.liveness_failed returns names only); the kubelet's "
        "setTerminationGracePeriod uses the failed probe's"),
    "[FeatureGate:ContainerRestartRules]": (
        "nodelet bug and gap: container-level restartPolicy / restartPolicyRules of regular "
        "containers (ContainerRestartRules, beta and on in 1.35+) are not implemented, and "
        "worse, such an API pod fails nodelet's parsing (`spec.containers[0].restartPolicy: "
        "forbidden: may not be set for non-init containers`, services/apisource.py logs it): "
        "it is neither run nor refused at admission, stays Pending, and once deleted stays "
        "Terminating for ever (its namespace too). It must at least be refused at admission"),
    "node-pod communication": (
        "not analysed for nodelet yet; the real kubelet failed the node-to-pod checks on "
        "these machines too (no kube-proxy or host route in that setup, as measured in the "
        "project's Kubernetes 1.37.2 reference run)"),
    "PrivilegedPod should enable privileged commands": (
        "this machine: `ip link add dummy1 type dummy` answers `Operation not supported` (the "
        "kernel has no dummy links); the real kubelet failed it on these machines too"),
    "Ephemeral Containers": (
        "nodelet gap: ephemeral containers (the ephemeralcontainers subresource, `kubectl "
        "debug`) are refused (docs/podspec.md): an API pod's added ephemeral container is "
        "never started"),
    "should support retrieving logs from the container over websockets": (
        "the test retries with a URL its first try turned from https into wss, and its "
        "second into ws (test/e2e/framework/websocket's OpenWebSocketForURL mutates it), so "
        "when the first read does not give exactly the first log line, every retry fails "
        "with `bad status`; kube-apiserver's audit log shows that one upgrade (101). Why the "
        "first read differed (possibly read before the line reached the log file: nodelet "
        "reports Running sooner than the kubelet's 1 s PLEG) is not analysed yet"),
    "back-off timer reset on image update": (
        "needs e2e-test-images/nginx, not built here (images/e2e.py NOT_BUILT)"),
}


def note(name: str) -> str:
    return next((text for key, text in NOTES.items() if key in name), "")
