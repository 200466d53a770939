#!/usr/bin/env python3
"""`make conformance`: Kubernetes' own [NodeConformance] e2e tests with nodelet as the only node.

    tests/conformance/run.py [--focus RE] [--skip RE] [--procs N] [--no-serial]
                             [--no-parallel] [--node-focus RE] [--out DIR] [--doc FILE]

1. The e2e test images (images/e2e.py) are built and pushed to a local registry (Debian's
   docker-registry, tests/support/registry.py) under the paths of a KUBE_TEST_REPO_LIST file, so the
   suite pulls them by name as on a real cluster; nothing is pre-loaded into containerd.
2. The real control plane (tests/support/controlplane.py) starts, and `nodelet run` (its embedded
   containerd, its own data dir and cgroup root) joins it by TLS bootstrap as its only node.
3. `ginkgo --procs=N e2e.test -- --provider=local` runs the parallel-safe tests (focus
   `\\[NodeConformance\\]`, skip `\\[Serial\\]|\\[Disruptive\\]|\\[Flaky\\]`), then the `[Serial]`
   ones on one process, each phase with its JUnit report; then KEP-3085's own node e2e test
   (e2e_node.test, `--start-services=false`: against the same plane and node, --node-focus).
4. tests/conformance/report.py turns the JUnit files into docs/conformance.md and prints
   `N passed, M failed` — counted from the suite's JUnit, not by nodelet.

Everything goes under --out (default test-artifacts/conformance): the JUnit files, the suite's
output, nodelet's and the control plane's logs. Processes are stopped by PID; the node is reset
(`nodelet reset`) and the registry's storage removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE.parent), str(REPO / "images"), str(HERE)]

import e2e as e2e_images  # noqa: E402  (images/e2e.py)
import report  # noqa: E402  (tests/conformance/report.py)

from support import controlplane  # noqa: E402  (tests/support/controlplane.py)
from support import registry as registry_  # noqa: E402  (tests/support/registry.py)

NODE = "nodelet-conformance"
FOCUS = r"\[NodeConformance\]"
SKIP = r"\[Serial\]|\[Disruptive\]|\[Flaky\]"
NODE_READY_WITHIN = 120.0
NODELET_STOP_WITHIN = 60.0
# How long the whole suite may run (ginkgo's own default, 1 h, is shorter than a full run).
SUITE_TIMEOUT = "12h"
# KEP-3085's own node e2e test (test/e2e_node/pod_conditions_test.go): its [NodeConformance]
# cases, "Pod conditions managed by Kubelet without PodReadyToStartContainersCondition
# condition". (The [Serial] "including ..." context restores the kubelet's configuration
# through systemd after each test, and its CRI-proxy timing cases need the suite to start the
# kubelet behind its own proxy: tests/cluster/test_cluster_pull_held.py runs that case.)
NODE_FOCUS = r"Pod conditions managed by Kubelet.*\[NodeConformance\]"
# Without its own services, e2e_node.test sends `--bearer-token` to --host (it has no
# --kubeconfig): kube-apiserver's static token file (--token-auth-file) authenticates it, in
# the group the suite's own services give it (test/e2e_node/services/apiserver.go).
NODE_SUITE_USER = "e2e-node-suite"
NODE_SUITE_GROUP = "system:masters"
NODELET = REPO / ".venv" / "bin" / "nodelet"


@dataclass
class Node:
    """`nodelet run` as a process joined to the plane."""

    root: Path
    process: subprocess.Popen[bytes]
    cgroup_root: str
    argv: tuple[str, ...] = ()  # its command line, for `respawn`
    log: Path | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def alive(self) -> bool:
        return self.process.poll() is None

    def send_signal(self, sig: int) -> None:
        """`sig` to nodelet, and wait until it has exited (SIGKILL after
        NODELET_STOP_WITHIN s): a restart of the node agent; its containerd and pods keep
        running."""
        if not self.alive():
            return
        os.kill(self.process.pid, sig)
        try:
            self.process.wait(timeout=NODELET_STOP_WITHIN)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def respawn(self, extra: Sequence[str] = ()) -> None:
        """Start nodelet again once it has exited, as before, with `extra` flags more."""
        if self.alive():
            raise RuntimeError("nodelet is still running")
        with (self.log or Path(os.devnull)).open("ab") as out:
            self.process = subprocess.Popen([*self.argv, *extra], stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        """SIGTERM (SIGKILL after NODELET_STOP_WITHIN s), then `nodelet reset`; a reset that
        found a cgroup still busy (a container process just exiting) is run once more."""
        if self.alive():
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=NODELET_STOP_WITHIN)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        reset = [str(NODELET), "reset", "--data-dir", str(self.data_dir),
                 "--cgroup-root", self.cgroup_root]
        for _ in range(2):
            done = subprocess.run(reset, check=False, timeout=300, capture_output=True,
                                  text=True)
            print(done.stdout, done.stderr, sep="", end="", flush=True)
            if done.returncode == 0 and "left behind" not in done.stdout + done.stderr:
                break
            time.sleep(5)
        # A cgroup root of the run's own: reset empties it and leaves the directory.
        for hierarchy in Path("/sys/fs/cgroup").iterdir() if self.cgroup_root != "/" else ():
            with contextlib.suppress(OSError):
                (hierarchy / self.cgroup_root.lstrip("/")).rmdir()


def start_node(plane: controlplane.ControlPlane, root: Path, log: Path,
               extra: Sequence[str] = (), *, cgroup_root: str | None = None,
               read_only: int | None = None) -> Node:
    """`nodelet run` joining `plane` as NODE; `extra`: more flags of `nodelet run` (the node
    suite's run gives it a static pod directory). By default its cgroup root and read-only
    port are the run's own; the node suite's run may give it the kubelet's ("/", 10255)."""
    root.mkdir(parents=True, exist_ok=True)
    port, free = controlplane.free_ports(2)
    read_only = read_only or free
    cgroup_root = cgroup_root or f"/nodelet-conformance-{os.getpid()}"
    argv = [
        str(NODELET), "run", "--data-dir", str(root / "data"), "--node-name", NODE,
        "--bootstrap-kubeconfig", str(plane.bootstrap_kubeconfig(root / "bootstrap.conf")),
        "--kubeconfig", str(root / "kubelet.conf"), "--cert-dir", str(root / "pki"),
        "--port", str(port), "--address", "0.0.0.0", "--client-ca-file", str(plane.ca.cert),
        "--authorization-mode", "Webhook", "--authentication-token-webhook",
        "--listen", f"127.0.0.1:{read_only}", "--cgroup-root", cgroup_root,
        # No healthz server beside other agents (its 10248 is one per machine; `extra` may
        # ask for it: run_node.py --host-defaults).
        "--healthz-port", "0", "--progress", "never", *extra,
    ]
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return Node(root, process, cgroup_root, tuple(argv), log)


def wait_ready(plane: controlplane.ControlPlane, node: Node, log: Path) -> None:
    deadline = time.monotonic() + NODE_READY_WITHIN
    while time.monotonic() < deadline:
        if not node.alive():
            raise SystemExit(f"nodelet exited ({node.process.returncode}); see {log}")
        got = subprocess.run(plane.kubectl_args("get", "node", NODE, "-o", "json"),
                             capture_output=True, text=True, check=False)
        if got.returncode == 0:
            conditions = json.loads(got.stdout).get("status", {}).get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return
        time.sleep(1)
    raise SystemExit(f"node {NODE} not Ready within {NODE_READY_WITHIN}s; see {log}")


def wait_no_pods(plane: controlplane.ControlPlane, within: float = 120.0) -> None:
    """Until no pod is bound to the node any more (the suite deletes its namespaces at the
    end; their pods go through the node's graceful termination)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got = subprocess.run(plane.kubectl_args(
            "get", "pods", "-A", "--field-selector", f"spec.nodeName={NODE}", "-o", "name"),
            capture_output=True, text=True, check=False)
        if got.returncode == 0 and not got.stdout.strip():
            return
        time.sleep(2)
    print(f"pods still bound to {NODE} after {within:.0f}s", flush=True)


def suite_args(plane: controlplane.ControlPlane, report_dir: Path) -> list[str]:
    # --report-dir: the suite writes its own JUnit (junit_01.xml, the framework's writer).
    return [
        "--provider=local", f"--kubeconfig={plane.admin_kubeconfig}",
        f"--report-dir={report_dir}", f"--e2e-output-dir={report_dir}",
        "--dump-logs-on-failure=false", "-v=2",
    ]


def suite_env(root: Path, repo_list: Path) -> dict[str, str]:
    """The environment of a suite's processes: the images' registry, and temporary files
    under the run's `root` (removed with it), since some upstream specs leave theirs
    (kubectl's kuberc spec leaves a directory each run)."""
    tmp = root / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "KUBE_TEST_REPO_LIST": str(repo_list), "TMPDIR": str(tmp)}


def run_phase(name: str, *, plane: controlplane.ControlPlane, out: Path, focus: str,
              skip: str, labels: str, procs: int, env: dict[str, str]) -> tuple[Path, float]:
    """One ginkgo run; (its JUnit file, its wall time in s)."""
    kube = controlplane.bin_dir()
    report_dir = out / name
    report_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(kube / "ginkgo"), f"--procs={procs}", f"--focus={focus}", f"--skip={skip}",
            *([f"--label-filter={labels}"] if labels else []), f"--timeout={SUITE_TIMEOUT}",
            "--no-color", "--silence-skips", str(kube / "e2e.test"), "--",
            *suite_args(plane, report_dir)]
    started = time.monotonic()
    with (out / f"{name}.log").open("wb") as log:
        print(f"[{name}] ginkgo --procs={procs} --focus={focus!r} --skip={skip!r} "
              f"(output: {out / f'{name}.log'})", flush=True)
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False,
                       cwd=out)
    took = time.monotonic() - started
    print(f"[{name}] {took / 60:.1f} min", flush=True)
    return report_dir / "junit_01.xml", took


def serial_skip(skip: str) -> str:
    """The parallel phase's skip without its `\\[Serial\\]` alternative."""
    return "|".join(part for part in skip.split("|") if part != r"\[Serial\]")


def node_suite_token(root: Path) -> tuple[str, Path]:
    """A token of this run for e2e_node.test and kube-apiserver's token file holding it."""
    token = secrets.token_hex(16)
    path = root / "node-suite-tokens.csv"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{token},{NODE_SUITE_USER},{NODE_SUITE_USER},{NODE_SUITE_GROUP}\n")
    path.chmod(0o600)
    return token, path


def run_node_phase(*, plane: controlplane.ControlPlane, node: Node, out: Path, focus: str,
                   token: str, env: dict[str, str]) -> tuple[Path, float]:
    """The node e2e suite (test/e2e_node) against the running plane and node: no services of
    its own (`--start-services=false`), no pre-pulls; it reads the node's /configz."""
    kube = controlplane.bin_dir()
    report_dir = out / "node"
    report_dir.mkdir(parents=True, exist_ok=True)
    socket = node.data_dir / "containerd" / "containerd.sock"
    argv = [str(kube / "ginkgo"), "--procs=1", f"--focus={focus}", f"--timeout={SUITE_TIMEOUT}",
            "--no-color", "--silence-skips", str(kube / "e2e_node.test"), "--",
            f"--host={plane.server}", f"--node-name={NODE}",
            "--start-services=false", "--prepull-images=false", f"--bearer-token={token}",
            f"--kubectl-path={kube / 'kubectl'}", f"--report-dir={report_dir}",
            f"--container-runtime-endpoint=unix://{socket}",
            f"--image-service-endpoint=unix://{socket}", "-v=2"]
    started = time.monotonic()
    with (out / "node.log").open("wb") as log:
        print(f"[node] e2e_node.test --focus={focus!r} (output: {out / 'node.log'})", flush=True)
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False, cwd=out)
    took = time.monotonic() - started
    print(f"[node] {took / 60:.1f} min", flush=True)
    return report_dir / "junit_01.xml", took


@contextlib.contextmanager
def local_registry(out: Path) -> Iterator[Path]:
    """A registry holding the suite's images; yields the KUBE_TEST_REPO_LIST file."""
    with registry_.Registry.started() as running:
        pushed = e2e_images.push_all(running.push_archive, running.host)
        print(f"registry {running.host}: pushed {len(pushed)} images", flush=True)
        repo_list = out / "repo-list.yaml"
        repo_list.write_text("".join(f"{k}: {v}\n"
                                     for k, v in e2e_images.repo_list(running.host).items()))
        yield repo_list


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--focus", default=FOCUS, help="ginkgo focus (default: %(default)s)")
    parser.add_argument("--skip", default=SKIP, help="ginkgo skip (default: %(default)s)")
    parser.add_argument("--procs", type=int, default=3, help="parallel ginkgo processes")
    parser.add_argument("--no-serial", action="store_true", help="leave out the [Serial] phase")
    parser.add_argument("--mark", default=report.MARK,
                        help="count the specs whose name holds this (default: %(default)s)")
    parser.add_argument("--no-parallel", action="store_true",
                        help="leave out the parallel phase")
    parser.add_argument("--node-focus", default=NODE_FOCUS,
                        help="focus of the node e2e suite's run ('' leaves it out; default: "
                             "%(default)s)")
    parser.add_argument("--out", type=Path, default=REPO / "test-artifacts" / "conformance")
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "conformance.md",
                        help="the report to write (default: %(default)s)")
    args = parser.parse_args(argv)
    for name in ("e2e.test", "ginkgo"):
        controlplane.binary(name)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    started = time.monotonic()
    commit = report.current_commit()  # the code under test: others may commit meanwhile
    junits: list[Path] = []
    node_junits: list[Path] = []
    times: dict[str, float] = {}
    root = Path(tempfile.mkdtemp(prefix="nlconf-", dir="/tmp"))
    token, token_file = node_suite_token(root / "auth")
    with local_registry(args.out) as repo_list:
        plane = controlplane.ControlPlane.start(
            root=root / "plane",
            extra_apiserver_args=[f"--token-auth-file={token_file}"] if args.node_focus else [])
        node: Node | None = None
        try:
            log = args.out / "nodelet.log"
            node = start_node(plane, root / "node", log)
            wait_ready(plane, node, log)
            env = suite_env(root, repo_list)
            if not args.no_parallel:
                junit, times["parallel"] = run_phase("parallel", plane=plane, out=args.out,
                                                     focus=args.focus, skip=args.skip,
                                                     labels="", procs=args.procs, env=env)
                junits.append(junit)
            if not args.no_serial:
                junit, times["serial"] = run_phase(
                    "serial", plane=plane, out=args.out,
                    focus=args.focus, skip=serial_skip(args.skip), labels="Serial",
                    procs=1, env=env)
                junits.append(junit)
            if args.node_focus:
                junit, times["node"] = run_node_phase(plane=plane, node=node, out=args.out,
                                                      focus=args.node_focus, token=token,
                                                      env=env)
                node_junits.append(junit)
        finally:
            if node is not None:
                if node.alive():
                    wait_no_pods(plane)
                node.stop()
            shutil.copytree(plane.logs, args.out / "control-plane", dirs_exist_ok=True)
            plane.stop()
            shutil.rmtree(root, ignore_errors=True)
    times["total"] = time.monotonic() - started
    results = report.read_junit([j for j in junits if j.exists()], mark=args.mark)
    # The node phase's focus is a regex; its specs are counted by the mark, as the others.
    node_results = report.read_junit([j for j in node_junits if j.exists()], mark=args.mark)
    report.write_doc(args.doc, results, times=times, focus=args.focus, skip=args.skip,
                     node_results=node_results, node_focus=args.node_focus, commit=commit)
    if node_junits:
        print(f"node e2e ({args.node_focus}): {report.summary(node_results)}")
    print(report.summary(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
