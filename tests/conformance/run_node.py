#!/usr/bin/env python3
"""`make conformance-node`: the node's own suite (`e2e_node.test`, [NodeConformance]) on nodelet
and on the real kubelet, in the same harness, one column each.

    tests/conformance/run_node.py [--agents nodelet,kubelet] [--focus RE] [--focus-file RE]
                                  [--skip RE] [--label-filter EXPR] [--procs N]
                                  [--host-defaults [--no-serial]] [--timeout DURATION]
                                  [--seed N] [--dry-run] [--out DIR] [--doc FILE]

1. A dry run (`ginkgo --dry-run`, seconds, no services) lists what the selection holds: every
   `[NodeConformance]` spec of the binary and, of those, the ones in `--focus-file` (default
   `test/e2e_node/`: the node suite's own files, not the test/e2e/common specs that `e2e.test`
   also carries and docs/conformance.md reports on) that `--skip` keeps (default: the kubelet
   presubmit's `[Serial]|[Disruptive]|[Flaky]|[Slow]`): the parallel pass. With
   `--host-defaults` (and no `--label-filter` or `--no-serial`), a serial pass follows on the
   same node: the specs labelled Serial, Disruptive or Slow, but [Flaky], one at a time; they
   stop, restart and reconfigure the agent through the suite's `systemctl`, which
   tests/conformance/units.py stands in for. `--dry-run` stops there.
2. The suite's images go to a local registry, as for `make conformance` (run.py).
3. For each agent, one after the other: a fresh control plane (the suite wants exactly one
   node), the agent joined by TLS bootstrap, then `ginkgo --procs=N e2e_node.test` with
   `--start-services=false` (the suite starts no kubelet of its own; it reads the node's
   `/configz` through the API server, with a bearer token kube-apiserver's token file knows).
   - nodelet: `nodelet run` with its embedded containerd and a static pod directory.
   - the kubelet v1.37.2 (tests/support/kubeletpeer.py `JoinedKubelet`): on a containerd
     started as nodelet starts its own (the same build and configuration, an instance of its
     own), with a static pod directory.
   Each test process runs on this host, as the node suite expects (it writes static pod
   manifests and talks CRI to the node's containerd).
   The passes run one after the other on that node; an agent a spec left stopped is started
   again between them, and the next pass waits until its Node is Ready.
4. tests/conformance/report_node.py writes docs/conformance-node.md from the JUnit files
   (each agent's passes merged): a nodelet column and a kubelet column per spec.

Everything goes under --out (default test-artifacts/conformance-node): the dry-run reports,
each agent's JUnit, suite output and logs, the control planes' logs. Processes are stopped by
PID; nodes are reset and containerd instances removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import report  # noqa: E402  (tests/conformance/report.py)
import report_node  # noqa: E402  (tests/conformance/report_node.py)
import run  # noqa: E402  (tests/conformance/run.py: the registry, the token, nodelet's node)
import units  # noqa: E402  (tests/conformance/units.py: the suite's systemctl)

from nodelet import settings as settings_  # noqa: E402
from nodelet.adapters import cni, containerd  # noqa: E402
from nodelet.adapters.cri import client as cri_client  # noqa: E402
from nodelet.services.nodehealth import resetting  # noqa: E402
from support import controlplane, kubeletpeer  # noqa: E402

FOCUS = r"\[NodeConformance\]"
# The node suite's own files (the binary also carries test/e2e/common's specs).
FOCUS_FILE = "test/e2e_node/"
# The kubelet's required presubmit (the containerd node e2e job) skips these.
SKIP = r"\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]"
# The serial pass (with --host-defaults): the rest but [Flaky], one spec at a time.
SERIAL_LABELS = "Serial || Disruptive || Slow"
SERIAL_SKIP = r"\[Flaky\]"
AGENTS = ("nodelet", "kubelet")
KUBELET_NODE = "kubelet-conformance"
SUITE_TIMEOUT = "12h"
JOIN_WITHIN = 120.0
DRAIN_WITHIN = 180.0
# HOST_DEFAULTS (--host-defaults): what some specs read of the node directly, not through
# /configz: the QoS and pod cgroups under /kubepods (pods_container_manager_test.go) and the
# read-only port 10255 on localhost (/metrics/cadvisor, container_metrics_test.go). An agent
# beside others on one machine has its own; the node suite's run has the machine to itself.
HOST_CGROUP_ROOT = "/"
HOST_READ_ONLY_PORT = 10255
# And the runtime handler upstream's node e2e containerd config defines (runc by another
# name), which the RuntimeClass overhead spec's pod asks for; the healthz server on
# 127.0.0.1:10248, and the device plugin and pod resources directories of the kubelet's
# default root, where the device plugin and pod resources specs look for them.
HOST_RUNTIME_HANDLERS = ("test-handler",)
HOST_HEALTHZ_PORT = 10248
# The node server's port: the [Serial] specs dial 127.0.0.1:10250 (ports.KubeletPort) for
# /configz and the serving certificate.
HOST_NODE_PORT = 10250
HOST_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
# Where the pod resources specs dial the pod resources API (the kubelet's default root).
HOST_POD_RESOURCES = "/var/lib/kubelet/pod-resources"
# Where the DRA specs' in-process drivers register (the kubelet's plugin registry).
HOST_PLUGINS_REGISTRY = "/var/lib/kubelet/plugins_registry"
# The kubelet peer serves both under its own root dir: linked from these paths while it runs.
HOST_LINKED = (HOST_POD_RESOURCES, HOST_PLUGINS_REGISTRY)


@dataclass(frozen=True)
class Selection:
    focus: str
    focus_files: tuple[str, ...]  # ginkgo ORs them; each REGEX[:LINES]
    skip: str
    # One order for every agent (ginkgo shuffles the top-level containers by it): a run cut
    # short by --timeout has tried the same specs first on each.
    seed: int = 0
    labels: str = ""  # ginkgo --label-filter, e.g. 'Serial || Disruptive'

    def ginkgo_args(self) -> list[str]:
        return [f"--focus={self.focus}", *(f"--focus-file={f}" for f in self.focus_files if f),
                *([f"--skip={self.skip}"] if self.skip else []),
                *([f"--label-filter={self.labels}"] if self.labels else []),
                *([f"--seed={self.seed}"] if self.seed else [])]


@dataclass(frozen=True)
class Joined:
    """A node under test, as the suite needs to know it."""

    name: str
    cri_endpoint: str  # unix://... of the node's containerd (the suite talks CRI to it)
    service: units.Service  # the agent, as the suite's `systemctl` stops and restarts it


@dataclass(frozen=True)
class NodeletService:
    """nodelet as the unit runs it: stopped by a signal, started again with the suite's
    `kubelet-config` as its `--config` (flags given on its command line win, as the
    kubelet's do)."""

    node: run.Node

    def running(self) -> bool:
        return self.node.alive()

    def stop(self, sig: int) -> None:
        self.node.send_signal(sig)

    def start(self, config: Path | None) -> None:
        self.node.respawn(["--config", str(config)] if config is not None else [])


@dataclass(frozen=True)
class KubeletService:
    """The kubelet as the unit runs it (its methods run on the harness's event loop)."""

    peer: kubeletpeer.JoinedKubelet
    loop: asyncio.AbstractEventLoop

    def running(self) -> bool:
        return self.peer.process.returncode is None

    def stop(self, sig: int) -> None:
        asyncio.run_coroutine_threadsafe(self.peer.send_signal(sig), self.loop).result()

    def start(self, config: Path | None) -> None:
        asyncio.run_coroutine_threadsafe(self.peer.respawn(config), self.loop).result()


def dry_run(out: Path, name: str, args: list[str], suite: str = "e2e_node.test") -> Path:
    """`ginkgo --dry-run` of `suite` with `args`; its JSON report (every spec, with its
    file)."""
    kube = controlplane.bin_dir()
    report = out / f"{name}.json"
    argv = [str(kube / "ginkgo"), "--dry-run", "--no-color", "--silence-skips", *args,
            f"--json-report={report}", str(kube / suite), "--",
            f"--report-dir={out / name}"]
    with (out / f"{name}.log").open("wb") as log:
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=True, cwd=out)
    return report


def run_suite(agent: str, *, plane: controlplane.ControlPlane, node: Joined, out: Path,
              selection: Selection, token: str, procs: int, timeout: str,
              env: dict[str, str], name: str = "") -> tuple[Path, float]:
    """The node suite against `node`; (its JUnit file, its wall time in s). Run from the
    agent's own directory (`suite_in`): the framework keeps a `kubelet-config` file in its
    working directory. `name`: the pass's (its reports and log get it as a suffix)."""
    kube = controlplane.bin_dir()
    work = out / agent
    suffix = f"-{name}" if name else ""
    report_dir = work / f"junit{suffix}"
    report_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(kube / "ginkgo"), f"--procs={procs}", *selection.ginkgo_args(),
            f"--timeout={timeout}", "--no-color", "--silence-skips",
            f"--json-report={work / f'ginkgo{suffix}.json'}", str(suite_in(work)), "--",
            f"--host={plane.server}", f"--node-name={node.name}",
            "--start-services=false", "--prepull-images=false", f"--bearer-token={token}",
            f"--kubectl-path={kube / 'kubectl'}", f"--report-dir={report_dir}",
            f"--container-runtime-endpoint={node.cri_endpoint}",
            f"--image-service-endpoint={node.cri_endpoint}", "-v=2"]
    started = time.monotonic()
    log_path = work / f"suite{suffix}.log"
    print(f"[{agent}] e2e_node.test {' '.join(selection.ginkgo_args())} --procs={procs} "
          f"(output: {log_path})", flush=True)
    try:
        with log_path.open("wb") as log:
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False,
                           cwd=work)
    finally:
        (work / "e2e_node.test").unlink(missing_ok=True)
    took = time.monotonic() - started
    print(f"[{agent}] {took / 60:.1f} min", flush=True)
    return report_dir / "junit_01.xml", took


def suite_in(work: Path) -> Path:
    """e2e_node.test linked into `work`: ginkgo runs a compiled suite in the binary's own
    directory, where the [Serial] specs write `kubelet-config` (each agent's run its own)."""
    suite = work / "e2e_node.test"
    suite.unlink(missing_ok=True)
    try:
        suite.hardlink_to(controlplane.bin_dir() / "e2e_node.test")
    except OSError:  # another file system
        suite.symlink_to(controlplane.bin_dir() / "e2e_node.test")
    return suite


@contextlib.asynccontextmanager
async def nodelet_node(plane: controlplane.ControlPlane, root: Path, out: Path,
                       host: bool) -> AsyncIterator[Joined]:
    """`nodelet run` as run.py starts it, plus a static pod directory (its /configz reports
    it as staticPodPath; the mirror and static pod specs write manifests there); with `host`,
    the kubelet's cgroup root and read-only port (HOST_DEFAULTS)."""
    manifests = root / "manifests"
    manifests.mkdir(parents=True)
    log = out / "nodelet" / "nodelet.log"
    extra = ["--manifests", str(manifests), *(
        [*(f"--runtime-handler={h}" for h in HOST_RUNTIME_HANDLERS),
         f"--healthz-port={HOST_HEALTHZ_PORT}", f"--device-plugins-dir={HOST_DEVICE_PLUGINS}",
         f"--pod-resources-dir={HOST_POD_RESOURCES}",
         f"--plugins-registry-dir={HOST_PLUGINS_REGISTRY}", f"--port={HOST_NODE_PORT}"]
        if host else ["--healthz-port=0"])]
    if host:
        remove_host_links()  # links a kubelet run cut short left
    node = run.start_node(plane, root / "node", log, extra=extra,
                          cgroup_root=HOST_CGROUP_ROOT if host else None,
                          read_only=HOST_READ_ONLY_PORT if host else None)
    try:
        run.wait_ready(plane, node, log)
        socket = node.data_dir / "containerd" / "containerd.sock"
        yield Joined(run.NODE, f"unix://{socket}", NodeletService(node))
    finally:
        if node.alive():
            run.wait_no_pods(plane, within=DRAIN_WITHIN)
        node.stop()
        if host:
            remove_kubepods()
            remove_host_links()


@contextlib.asynccontextmanager
async def own_containerd(root: Path, handlers: tuple[str, ...] = ()
                         ) -> AsyncIterator[tuple[containerd.EmbeddedContainerd,
                                                  cri_client.RuntimeClient]]:
    """A containerd as nodelet runs its embedded one (same programs, same generated config,
    the local pause and busybox archives imported; `handlers`: more names for runc), in
    `root`; reset and removed after."""
    root.mkdir(parents=True)
    base = settings_.RuntimeSettings()
    runtime = replace(base, pod_cidrs=(cni.default_pod_cidr(root),), runc_handlers=handlers)
    settings = settings_.Settings(data_dir=root, runtime=runtime)
    runner = containerd.EmbeddedContainerd(data_dir=root, settings=runtime)
    client: cri_client.RuntimeClient | None = None
    try:
        await runner.start()
        client = await cri_client.RuntimeClient.connect(runner.endpoint,
                                                       timeouts=runtime.timeouts)
        await runner.wait_ready(client)
        yield runner, client
    finally:
        if client is not None:
            await client.close()
        await runner.detach()
        report = await resetting.reset(settings)
        if report.errors:
            print(f"reset of the kubelet's containerd: {report.errors}", flush=True)


def kubelet_config(manifests: Path, host: bool) -> dict[str, object]:
    """Over `join_config_for`: what the suite's own kubelet (test/e2e_node/services/kubelet.go)
    has and its specs read through /configz: a static pod directory, checked every 10 s, and a
    read-only port (the summary spec reads `address:readOnlyPort/stats/summary`); with
    `host`, the kubelet's cgroup root and read-only port (HOST_DEFAULTS)."""
    config: dict[str, object] = {"staticPodPath": str(manifests), "fileCheckFrequency": "10s",
                                 "readOnlyPort": kubeletpeer.free_port()}
    if host:  # its device plugin directory is always the host's
        config |= {"cgroupRoot": HOST_CGROUP_ROOT, "readOnlyPort": HOST_READ_ONLY_PORT,
                   "healthzPort": HOST_HEALTHZ_PORT, "port": HOST_NODE_PORT}
    return config


def remove_kubepods() -> None:
    """With HOST_DEFAULTS: the QoS cgroups an agent left under the cgroup root "/" (the
    kubelet keeps them when it stops; they are empty once its pods are gone), deepest first;
    what is still busy is said."""
    left = []
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        top = hierarchy / "kubepods"
        if hierarchy.is_symlink() or not top.is_dir():
            continue
        for directory in sorted([top, *(p for p in top.rglob("*") if p.is_dir())],
                                key=lambda p: len(p.parts), reverse=True):
            try:
                directory.rmdir()
            except OSError:
                left.append(str(directory))
    if left:
        print(f"cgroups left under /kubepods: {left}", flush=True)


@contextlib.contextmanager
def host_links(root: Path) -> Iterator[None]:
    """HOST_LINKED as links to the kubelet's directories under its root dir `root` while it
    runs: it serves the pod resources API and watches its plugin registry there (the peer's
    own root), the specs dial the default root's. An empty directory there (nodelet's, left
    after its run) is replaced; one with anything in it is left alone, and the specs then
    fail as they would."""
    linked = []
    for host in HOST_LINKED:
        link, target = Path(host), root / Path(host).name
        try:
            _remove_host_dir(link)
            link.parent.mkdir(parents=True, exist_ok=True)
            target.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target, target_is_directory=True)
            linked.append(link)
        except OSError as exc:
            print(f"[kubelet] {link} not linked to {target}: {exc}", flush=True)
    try:
        yield
    finally:
        for link in linked:
            _remove_host_dir(link)


def remove_host_links() -> None:
    """Each of HOST_LINKED that is a link (the kubelet's, maybe left by a run cut short) or an
    empty directory (nodelet's sockets go at its stop)."""
    for host in HOST_LINKED:
        _remove_host_dir(Path(host))


def _remove_host_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            path.rmdir()


@contextlib.asynccontextmanager
async def kubelet_node(plane: controlplane.ControlPlane, root: Path, out: Path,
                       host: bool) -> AsyncIterator[Joined]:
    """The kubelet v1.37.2 joined by TLS bootstrap (JoinedKubelet, the configuration of
    tests/support/kubeletpeer.py `join_config_for`) with a static pod directory."""
    manifests = root / "manifests"
    manifests.mkdir(parents=True)
    async with own_containerd(root / "containerd",
                              HOST_RUNTIME_HANDLERS if host else ()) as (runner, client), \
            plane.admin() as admin:
        peer = await kubeletpeer.JoinedKubelet.join(
            endpoint=runner.endpoint, client_ca=plane.ca.cert, node_name=KUBELET_NODE,
            bootstrap_kubeconfig=plane.bootstrap_kubeconfig(root / "bootstrap.conf"),
            client=client, config=kubelet_config(manifests, host))
        try:
            await peer.wait_ready(admin, within=JOIN_WITHIN)
            with host_links(peer.root / "root") if host else contextlib.nullcontext():
                yield Joined(KUBELET_NODE, runner.endpoint,
                             KubeletService(peer, asyncio.get_running_loop()))
        finally:
            for manifest in manifests.iterdir():  # a spec cut short leaves its static pod
                manifest.unlink()
            # Kept now: `stop` removes the kubelet's root, and its log with it.
            shutil.copy(peer.log, out / "kubelet" / "kubelet.log")
            try:
                # Drained, stopped by PID, its Node deleted, what it left removed.
                await peer.stop(admin, within=DRAIN_WITHIN)
            except kubeletpeer.PeerError as exc:
                print(f"[kubelet] not drained cleanly: {exc}", flush=True)
            if host:
                remove_kubepods()


STARTERS = {"nodelet": nodelet_node, "kubelet": kubelet_node}


@contextlib.asynccontextmanager
async def fresh_plane(agent: str, *, root: Path, out: Path, host: bool = False,
                      apiserver_args: Sequence[str] = ()
                      ) -> AsyncIterator[tuple[controlplane.ControlPlane, Joined]]:
    """A fresh control plane in `root` with `agent` joined as its only node; after, the
    plane's logs are kept under `out/agent` and `root` is removed."""
    (out / agent).mkdir(parents=True, exist_ok=True)
    plane = controlplane.ControlPlane.start(root=root / "plane",
                                            extra_apiserver_args=list(apiserver_args))
    try:
        async with STARTERS[agent](plane, root, out, host) as node:
            yield plane, node
    finally:
        shutil.copytree(plane.logs, out / agent / "control-plane", dirs_exist_ok=True)
        plane.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class Pass:
    """One ginkgo run on the node: the parallel pass, or the serial one after it."""

    name: str  # "" for the first
    selection: Selection
    procs: int


def preload_images(agent: str, endpoint: str) -> None:
    """Import the images the suite names as they are (images/e2e.py PRELOADED: the sample
    device plugin) into the node's runtime at `endpoint` (unix://...), as upstream's node e2e
    pre-pulls them; neither agent pulls them then (IfNotPresent, present)."""
    archives = run.e2e_images.build_all()
    ctr = settings_.built_runtime_dir()
    for image in run.e2e_images.PRELOADED:
        argv = [str(ctr / "ctr") if ctr else "ctr", "--address",
                endpoint.removeprefix("unix://"), "-n", "k8s.io", "images", "import",
                str(archives[image.archive])]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"importing {image.name} into {endpoint} failed: "
                               f"{done.stderr.strip() or done.stdout.strip()}")
        print(f"[{agent}] {image.name} imported", flush=True)


async def one_agent(agent: str, *, out: Path, passes: Sequence[Pass], timeout: str,
                    repo_list: Path, host: bool) -> tuple[list[Path], float]:
    """A fresh plane, `agent` joined as its only node, the suite's passes one after the other
    on it; (their JUnit files, the wall time of all)."""
    root = Path(tempfile.mkdtemp(prefix=f"nlnode-{agent}-", dir="/tmp"))
    token, token_file = run.node_suite_token(root / "auth")
    junits: list[Path] = []
    took = 0.0
    async with fresh_plane(agent, root=root, out=out, host=host,
                           apiserver_args=[f"--token-auth-file={token_file}"]) as (plane, node):
        # The [Serial] specs stop and restart the agent through `systemctl`, and write
        # `kubelet-config` in their working directory (run_suite's).
        with units.UnitServer(f"kubelet-{agent}", node.service, root / "units",
                              out / agent / "kubelet-config") as unit:
            env = unit.env(run.suite_env(root, repo_list))
            try:
                for one in passes:
                    # Before each pass: an image GC spec of the serial pass may remove it.
                    await asyncio.to_thread(preload_images, agent, node.cri_endpoint)
                    junit, seconds = await asyncio.to_thread(
                        run_suite, agent, plane=plane, node=node, out=out,
                        selection=one.selection, token=token, procs=one.procs,
                        timeout=timeout, env=env, name=one.name)
                    junits.append(junit)
                    took += seconds
                    if not node.service.running():  # a spec cut short left it stopped
                        await asyncio.to_thread(
                            node.service.start, unit.config if unit.config.exists() else None)
                        await asyncio.to_thread(wait_node_ready, plane, node.name)
            finally:
                (out / agent / "systemctl.log").write_text("".join(
                    f"{line}\n" for line in unit.log))
    return junits, took


def wait_node_ready(plane: controlplane.ControlPlane, name: str,
                    within: float = JOIN_WITHIN) -> None:
    """Until Node `name` is Ready again (an agent started again between passes)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got = subprocess.run(plane.kubectl_args("get", "node", name, "-o", "json"),
                             capture_output=True, text=True, check=False)
        if got.returncode == 0 and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in json.loads(got.stdout).get("status", {}).get("conditions") or []):
            return
        time.sleep(1)
    print(f"node {name} not Ready within {within:.0f}s after its restart", flush=True)


def counts_line(dry: report_node.DryRun) -> str:
    return (f"dry run: {dry.all_count} [NodeConformance] specs, {dry.node_count} of them in "
            f"the node suite's files, {dry.selected_count} selected")


async def run_agents(args: argparse.Namespace, passes: Sequence[Pass],
                     agents: list[str]) -> tuple[dict[str, list[Path]], dict[str, float]]:
    junits: dict[str, list[Path]] = {}
    times: dict[str, float] = {}
    with run.local_registry(args.out) as repo_list:
        for agent in agents:
            junits[agent], times[agent] = await one_agent(
                agent, out=args.out, passes=passes, timeout=args.timeout,
                repo_list=repo_list, host=args.host_defaults)
    return junits, times


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(AGENTS),
                        help="the nodes to run it on, in turn (default: %(default)s)")
    parser.add_argument("--focus", default=FOCUS, help="ginkgo focus (default: %(default)s)")
    parser.add_argument("--focus-file", action="append",
                        help=f"ginkgo focus-file, REGEX[:LINES] (again for more: ginkgo ORs "
                             f"them; '' for every file; default: {FOCUS_FILE})")
    parser.add_argument("--skip", default=SKIP, help="ginkgo skip ('' for none; default: "
                                                     "%(default)s)")
    parser.add_argument("--label-filter", default="",
                        help="ginkgo label filter, e.g. 'Serial || Disruptive' (with --skip "
                             "'\\[Flaky\\]': the specs that restart or reconfigure the "
                             "agent; run them with --procs 1)")
    parser.add_argument("--procs", type=int, default=3, help="parallel ginkgo processes")
    parser.add_argument("--timeout", default=SUITE_TIMEOUT,
                        help="ginkgo's limit for each agent's run (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="ginkgo's order seed, the same for every agent (default: the "
                             "time of the run)")
    parser.add_argument("--no-serial", action="store_true",
                        help="with --host-defaults: no serial pass (by default the specs "
                             f"labelled {SERIAL_LABELS}, but {SERIAL_SKIP}, run after the "
                             "others, one at a time, on the same node; they restart and "
                             "reconfigure it, so they need --host-defaults)")
    parser.add_argument("--serial-skip", default=SERIAL_SKIP,
                        help="ginkgo skip of the serial pass (default: %(default)s)")
    parser.add_argument("--host-defaults", action="store_true",
                        help="give each agent the kubelet's cgroup root (/), read-only port "
                             "(10255), healthz port (10248), device plugin and pod resources "
                             "directories and upstream's `test-handler` runtime, which some "
                             "specs use "
                             "directly (no other agent may use them meanwhile; make "
                             "conformance-node passes it)")
    parser.add_argument("--dry-run", action="store_true",
                        help="only list and count what the selection holds")
    parser.add_argument("--out", type=Path,
                        default=run.REPO / "test-artifacts" / "conformance-node")
    parser.add_argument("--doc", type=Path, default=run.REPO / "docs" / "conformance-node.md",
                        help="the report to write (default: %(default)s)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    agents = [a for a in (x.strip() for x in args.agents.split(",")) if a]
    if unknown := [a for a in agents if a not in AGENTS]:
        raise SystemExit(f"--agents: {unknown} not among {AGENTS}")
    for name in ("e2e_node.test", "ginkgo", "kubectl"):
        controlplane.binary(name)
    seed = args.seed or int(time.time())
    focus_files = tuple(args.focus_file or [FOCUS_FILE])
    passes = [Pass("", Selection(args.focus, focus_files, args.skip, seed=seed,
                                 labels=args.label_filter), args.procs)]
    if args.host_defaults and not args.no_serial and not args.label_filter:
        passes.append(Pass("serial", Selection(args.focus, focus_files, args.serial_skip,
                                               seed=seed, labels=SERIAL_LABELS), 1))
    args.out = args.out.resolve()  # ginkgo runs in it: its report paths must be absolute
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    commit = report.current_commit()  # others may commit meanwhile
    chosen = [dry_run(args.out, f"dry-selected{'-' + p.name if p.name else ''}",
                      p.selection.ginkgo_args()) for p in passes]
    dry = report_node.read_dry_run(
        everything=dry_run(args.out, "dry-all", [f"--focus={FOCUS}"]), selected=chosen)
    print(counts_line(dry), flush=True)
    if args.dry_run:
        print(report_node.by_file_text(dry))
        return 0
    passes = [p for p, path in zip(passes, chosen, strict=True)
              if report_node.read_dry_run(everything=path, selected=[path]).selected_count]
    started = time.monotonic()
    junits, times = asyncio.run(run_agents(args, passes, agents))
    times["total"] = time.monotonic() - started
    results = {agent: report_node.merged_results(files, dry)
               for agent, files in junits.items()}
    report_node.write_doc(args.doc, dry, results,
                          selection=[f"{p.name or 'parallel'} pass: "
                                     f"{' '.join(p.selection.ginkgo_args())} --procs={p.procs}"
                                     for p in passes] + (["(run_node.py --host-defaults)"]
                                                         if args.host_defaults else []),
                          procs=0, times=times, commit=commit)
    for agent, found in results.items():
        print(f"{agent}: {report_node.summary(found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
