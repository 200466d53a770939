#!/usr/bin/env python3
"""`make conformance-storage`: Kubernetes' own storage tests (`e2e.test`, [sig-storage]) with
nodelet and with the real kubelet as the node, in the same harness, one column each.

    tests/conformance/run_storage.py [--agents nodelet,kubelet] [--focus RE] [--skip RE]
                                     [--procs N] [--timeout DURATION] [--seed N] [--dry-run]
                                     [--out DIR] [--doc FILE]

1. A dry run (`ginkgo --dry-run`, seconds, no cluster) lists every `[sig-storage]` spec of
   the binary and which of them the selection holds (report_storage.py counts them by group).
   The default selection (`FOCUS`, `SKIP`) is the storage specs whose volumes this harness can
   give a node without a driver image: the in-tree `local` driver (every LocalVolumeType but
   GCE's local SSD) and `hostPath`/`hostPathSymlink`, `PersistentVolumes-local`,
   `Ephemeralstorage`, and the control-plane-only PV/PVC protection and PersistentVolumes
   CSI Conformance specs; without `[Serial]`, `[Disruptive]`, `[Flaky]`, `[Slow]` and
   `[Feature:*]`. notes_storage.py says why each other group is left out. `--dry-run` stops
   there.
2. The suite's images go to a local registry, as for `make conformance` (run.py). The local
   volume specs run the "hostexec" pod (agnhost, privileged, the host's / at /rootfs) to make
   directories, tmpfs mounts and loop devices on the node with the host's own programs
   (images/e2e.py, NSENTER_WRAPPER).
3. For each agent, one after the other: a fresh control plane (the storage controllers of
   tests/support/controlplane.py: the PV binder, attach-detach, ephemeral-volume, PV/PVC
   protection), the agent joined by TLS bootstrap as its only node (run_node.py's starters:
   nodelet with its embedded containerd, or the kubelet v1.37.2 on a containerd of the same
   build and configuration), then `ginkgo --procs=N e2e.test -- --provider=local` with the
   same selection and order seed.
4. report_storage.py writes docs/conformance-storage.md from the dry run and every agent's
   JUnit found under --out: a nodelet column and a kubelet column per spec.

Each agent's results stay under --out/<agent> until that agent runs again, so the columns may
come from separate runs (`--agents kubelet`, later `--agents nodelet`); each column's commit,
date and selection are in its run.json and in the report. Processes are stopped by PID; nodes
are reset and containerd instances removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import report  # noqa: E402  (tests/conformance/report.py)
import report_storage  # noqa: E402  (tests/conformance/report_storage.py)
import run  # noqa: E402  (tests/conformance/run.py: the registry, the suite's flags)
import run_node  # noqa: E402  (tests/conformance/run_node.py: the agents, the selection)

from support import controlplane  # noqa: E402

# The groups whose volumes a node can be given here without a driver image (notes_storage.py
# says why the others are not). `[Driver: local]` also holds gce-localssd-scsi-fs, which the
# skip leaves out (it needs a GCE local SSD; its specs are [Serial] too).
FOCUS = (r"\[sig-storage\] (In-tree Volumes \[Driver: (local|hostPath|hostPathSymlink)\]|"
         r"PersistentVolumes-local|Ephemeralstorage|PV Protection|PVC Protection|"
         r"PersistentVolumes CSI Conformance)")
SKIP = r"\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]|\[Feature:|gce-localssd"
AGENTS = run_node.AGENTS
SUITE_TIMEOUT = "12h"


def run_suite(agent: str, *, plane: controlplane.ControlPlane, out: Path,
              selection: run_node.Selection, procs: int, timeout: str,
              env: dict[str, str]) -> tuple[Path, float]:
    """The e2e suite against the plane whose only node is `agent`'s; (its JUnit file, its
    wall time in s)."""
    kube = controlplane.bin_dir()
    work = out / agent
    report_dir = work / "junit"
    report_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(kube / "ginkgo"), f"--procs={procs}", *selection.ginkgo_args(),
            f"--timeout={timeout}", "--no-color", "--silence-skips",
            f"--json-report={work / 'ginkgo.json'}", str(kube / "e2e.test"), "--",
            *run.suite_args(plane, report_dir), f"--kubectl-path={kube / 'kubectl'}"]
    started = time.monotonic()
    print(f"[{agent}] e2e.test {' '.join(selection.ginkgo_args())} --procs={procs} "
          f"(output: {work / 'suite.log'})", flush=True)
    with (work / "suite.log").open("wb") as log:
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False,
                       cwd=work)
    took = time.monotonic() - started
    print(f"[{agent}] {took / 60:.1f} min", flush=True)
    return report_dir / "junit_01.xml", took


async def one_agent(agent: str, *, out: Path, selection: run_node.Selection, procs: int,
                    timeout: str, repo_list: Path) -> float:
    """A fresh plane, `agent` joined as its only node, the suite; its wall time. Its JUnit
    and what the report says of the run (run.json) are left under out/agent."""
    shutil.rmtree(out / agent, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix=f"nlstorage-{agent}-", dir="/tmp"))
    started = datetime.datetime.now(datetime.UTC)
    commit = report.current_commit()  # others may commit meanwhile
    async with run_node.fresh_plane(agent, root=root, out=out) as (plane, _node):
        env = run.suite_env(root, repo_list)
        _junit, took = await asyncio.to_thread(
            run_suite, agent, plane=plane, out=out, selection=selection, procs=procs,
            timeout=timeout, env=env)
    report_storage.write_run(out / agent, report_storage.Run(
        agent=agent, commit=commit, started=started.strftime("%Y-%m-%d %H:%M UTC"),
        minutes=round(took / 60, 1), procs=procs, selection=tuple(selection.ginkgo_args())))
    return took


async def run_agents(args: argparse.Namespace, selection: run_node.Selection,
                     agents: list[str]) -> dict[str, float]:
    times: dict[str, float] = {}
    with run.local_registry(args.out) as repo_list:
        for agent in agents:
            times[agent] = await one_agent(agent, out=args.out, selection=selection,
                                           procs=args.procs, timeout=args.timeout,
                                           repo_list=repo_list)
    return times


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(AGENTS),
                        help="the nodes to run it on, in turn (default: %(default)s)")
    parser.add_argument("--focus", default=FOCUS, help="ginkgo focus (default: %(default)s)")
    parser.add_argument("--skip", default=SKIP, help="ginkgo skip ('' for none; default: "
                                                     "%(default)s)")
    parser.add_argument("--procs", type=int, default=2, help="parallel ginkgo processes")
    parser.add_argument("--timeout", default=SUITE_TIMEOUT,
                        help="ginkgo's limit for each agent's run (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="ginkgo's order seed, the same for every agent (default: the "
                             "time of the run)")
    parser.add_argument("--dry-run", action="store_true",
                        help="only list and count what the selection holds")
    parser.add_argument("--out", type=Path,
                        default=run.REPO / "test-artifacts" / "conformance-storage")
    parser.add_argument("--doc", type=Path,
                        default=run.REPO / "docs" / "conformance-storage.md",
                        help="the report to write (default: %(default)s)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    agents = [a for a in (x.strip() for x in args.agents.split(",")) if a]
    if unknown := [a for a in agents if a not in AGENTS]:
        raise SystemExit(f"--agents: {unknown} not among {AGENTS}")
    for name in ("e2e.test", "ginkgo", "kubectl"):
        controlplane.binary(name)
    selection = run_node.Selection(args.focus, (), args.skip,
                                   seed=args.seed or int(time.time()))
    args.out = args.out.resolve()  # ginkgo runs in it: its report paths must be absolute
    args.out.mkdir(parents=True, exist_ok=True)
    # The dry run of the whole storage suite, and of this selection without its seed.
    run_node.dry_run(args.out, "dry-all", [f"--focus={report_storage.MARK_RE}"], "e2e.test")
    run_node.dry_run(args.out, "dry-selected",
                     run_node.Selection(args.focus, (), args.skip).ginkgo_args(), "e2e.test")
    dry = report_storage.read_dry_run(args.out)
    print(report_storage.counts_text(dry), flush=True)
    if args.dry_run:
        return 0
    started = time.monotonic()
    times = asyncio.run(run_agents(args, selection, agents))
    times["total"] = time.monotonic() - started
    print(", ".join(f"{k} {v / 60:.1f} min" for k, v in times.items()), flush=True)
    return report_storage.main(["--out", str(args.out), "--doc", str(args.doc)])


if __name__ == "__main__":
    sys.exit(main())
