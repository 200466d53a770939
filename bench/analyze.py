"""`nodelet analyze` on a synthetic 100 000-pod cluster dump, against plain JSON parsing.

Run from the checkout:  .venv/bin/python bench/analyze.py [--pods 100000] [--repeat 3] [--keep]
                        .venv/bin/python bench/analyze.py --yaml   # `kubectl get -o yaml` input

1. Generates (deterministic seed) a kubelet-shaped v1 PodList — `kubectl get pods -A -o json`
   shape: metadata with owner references, spec with a projected service-account volume,
   tolerations and a container with resources, status with the five kubelet conditions and
   container statuses — and a v1 EventList, in a temp dir. The mix: 12 namespaces, 50 nodes
   (25 report PodReadyToStartContainers, 15 the old PodHasNetwork, 10 neither), runtimeClasses
   <default> / gvisor / kata, 10 % of pods with an init container, ~1 % stuck before their
   sandbox (FailedCreatePodSandBox / FailedMount events), whole-second stamps as the API writes.
2. Times, best of --repeat, in this one process: `json.load` of the PodList (the baseline, GC
   on as anyone would call it; and with the GC paused, as analyze does), then the full
   `nodelet analyze FILE --events EVENTS -o table|json|html --output-file ...` through
   `cli.main` (read, parse, analyse, render, write).
3. Runs the CLI once as a subprocess for the wall time including interpreter start and imports.
4. Prints a table with ratios against the baseline (docs/analyze.md has the measured numbers).

With --yaml the same dump is written as YAML (block style, timestamps quoted, as kubectl's
`-o yaml`), and the baseline is `yaml.load` with libyaml's C loader (`yaml.CSafeLoader`).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from nodelet import cli

SEED = 3085
NAMESPACES = [f"team-{n}" for n in ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")] + [
    "kube-system", "monitoring"]
NODES = 50
BASE = datetime(2026, 3, 1, tzinfo=UTC)
SANDBOX_ERRORS = [
    ("FailedCreatePodSandBox", "Failed to create pod sandbox: rpc error: code = Unknown desc = "
     "failed to setup network for sandbox: plugin type=\"bridge\" failed (add): failed to "
     "allocate for range 0: no IP addresses available in range set: 10.1.0.1-10.1.0.254"),
    ("FailedCreatePodSandBox", "Failed to create pod sandbox: rpc error: code = Unknown desc = "
     "failed to get sandbox runtime: no runtime for \"kata\" is configured"),
    ("FailedMount", "MountVolume.SetUp failed for volume \"config\" : configmap \"app-config\" "
     "not found"),
]


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def node_condition(self, node: int) -> str | None:
        if node < 25:
            return "PodReadyToStartContainers"
        return "PodHasNetwork" if node < 40 else None

    def pod(self, i: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        rng = self.rng
        ns, node = rng.choice(NAMESPACES), rng.randrange(NODES)
        rc = rng.choices([None, "gvisor", "kata"], weights=[70, 15, 15])[0]
        app = f"app{rng.randrange(40)}"
        name = f"{app}-{rng.getrandbits(32):08x}-{i:06d}"
        uid = f"{rng.getrandbits(32):08x}-{i:04x}-4000-8000-{rng.getrandbits(48):012x}"
        created = BASE + timedelta(seconds=rng.randrange(6 * 3600))
        stuck = rng.random() < 0.01
        init = rng.random() < 0.1
        sandbox = rng.lognormvariate(0.6, 0.5) + (2.5 if rc == "kata" else 0.0)
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": self.metadata(name, ns, uid, app, created),
            "spec": self.spec(name, app, node, rc, init),
            "status": self.status(created, node, sandbox, stuck, init, self.node_condition(node)),
        }
        events = self.events(pod, created, stuck)
        return pod, events

    def metadata(self, name: str, ns: str, uid: str, app: str, created: datetime) -> Any:
        return {
            "name": name, "generateName": name[:-6], "namespace": ns, "uid": uid,
            "resourceVersion": str(self.rng.randrange(10**8)),
            "creationTimestamp": stamp(created),
            "labels": {"app": app, "pod-template-hash": f"{self.rng.getrandbits(32):x}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": name[:-7], "uid": f"rs-{app}", "controller": True,
                                 "blockOwnerDeletion": True}],
        }

    def spec(self, name: str, app: str, node: int, rc: str | None, init: bool) -> Any:
        container = {
            "name": app, "image": f"registry.example/{app}:1.{self.rng.randrange(9)}",
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"memory": "256Mi"}},
            "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
        }
        spec: dict[str, Any] = {
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "containers": [container], "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default",
            "nodeName": f"node-{node:02d}", "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        }
        if init:
            spec["initContainers"] = [{**container, "name": "init"}]
        if rc:
            spec["runtimeClassName"] = rc
        return spec

    def status(self, created: datetime, node: int, sandbox: float, stuck: bool, init: bool,
               condition: str | None) -> Any:
        rng = self.rng
        scheduled = created + timedelta(seconds=rng.choice((0, 0, 1)))
        ready_to_start = scheduled + timedelta(seconds=sandbox)
        initialized = ready_to_start + timedelta(seconds=rng.uniform(1, 4)) if init \
            else scheduled
        containers = max(initialized, ready_to_start) + timedelta(
            seconds=rng.lognormvariate(0.3, 0.8))
        conds = [("PodScheduled", "True", scheduled, "", "")]
        if condition is not None:
            conds.append((condition, "False", scheduled, "PodSandboxNotReady",
                          "no pod sandbox exists") if stuck else
                         (condition, "True", ready_to_start, "", ""))
        if stuck:
            conds += [("Initialized", "False" if init else "True", scheduled,
                       "ContainersNotInitialized" if init else "", ""),
                      ("ContainersReady", "False", scheduled, "ContainersNotReady",
                       "containers with unready status: [app]"),
                      ("Ready", "False", scheduled, "ContainersNotReady",
                       "containers with unready status: [app]")]
        else:
            conds += [("Initialized", "True", initialized, "", ""),
                      ("ContainersReady", "True", containers, "", ""),
                      ("Ready", "True", containers, "", "")]
        out: dict[str, Any] = {
            "phase": "Pending" if stuck else "Running",
            "conditions": [self.condition(*c) for c in conds],
            "hostIP": f"192.168.0.{node + 10}", "hostIPs": [{"ip": f"192.168.0.{node + 10}"}],
            "startTime": stamp(scheduled), "qosClass": "Burstable",
        }
        if not stuck:
            ip = f"10.{node}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            out |= {"podIP": ip, "podIPs": [{"ip": ip}], "containerStatuses": [{
                "name": "app", "state": {"running": {"startedAt": stamp(containers)}},
                "lastState": {}, "ready": True, "restartCount": 0, "started": True,
                "image": "registry.example/app:1.0",
                "imageID": f"registry.example/app@sha256:{rng.getrandbits(256):064x}",
                "containerID": f"containerd://{rng.getrandbits(256):064x}"}]}
        return out

    @staticmethod
    def condition(type_: str, status: str, at: datetime, reason: str, message: str) -> Any:
        out = {"type": type_, "status": status, "lastProbeTime": None,
               "lastTransitionTime": stamp(at)}
        if reason:
            out["reason"] = reason
        if message:
            out["message"] = message
        return out

    def events(self, pod: Any, created: datetime, stuck: bool) -> list[dict[str, Any]]:
        meta = pod["metadata"]
        if stuck:
            reason, message = self.rng.choice(SANDBOX_ERRORS)
            count = self.rng.randrange(1, 40)
            last = created + timedelta(seconds=count * 10)
            return [self.event(meta, reason, message, "Warning", count, created, last)]
        if self.rng.random() < 0.1:
            return [self.event(meta, r, f"{r} {meta['name']}", "Normal", 1, created, created)
                    for r in ("Scheduled", "Pulled", "Created", "Started")]
        return []

    def event(self, meta: Any, reason: str, message: str, type_: str, count: int,
              first: datetime, last: datetime) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{self.rng.getrandbits(64):x}",
                         "namespace": meta["namespace"], "creationTimestamp": stamp(first)},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"]},
            "reason": reason, "message": message, "type": type_, "count": count,
            "firstTimestamp": stamp(first), "lastTimestamp": stamp(last),
            "source": {"component": "kubelet", "host": "node"},
            "reportingComponent": "kubelet", "reportingInstance": "node",
        }


def generate(directory: Path, pods: int, seed: int,
             indent: int | None = 4, as_yaml: bool = False) -> tuple[Path, Path]:
    gen = Generator(seed)
    items, events = [], []
    for i in range(pods):
        pod, pod_events = gen.pod(i)
        items.append(pod)
        events += pod_events
    suffix = "yaml" if as_yaml else "json"
    pod_path, event_path = directory / f"pods.{suffix}", directory / f"events.{suffix}"
    for path, objects in ((pod_path, items), (event_path, events)):
        doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
               "items": objects}
        with path.open("w") as f:
            if as_yaml:
                yaml.dump(doc, f, Dumper=yaml.CSafeDumper, default_flow_style=False)
            else:
                json.dump(doc, f, indent=indent)
    return pod_path, event_path


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def json_load(path: Path, *, pause_gc: bool) -> None:
    if pause_gc:
        gc.disable()
    try:
        with path.open("rb") as f:
            if path.suffix == ".yaml":
                yaml.load(f, Loader=yaml.CSafeLoader)
            else:
                json.load(f)
    finally:
        gc.enable()


def analyze(pods: Path, events: Path, output: str, out: Path) -> None:
    code = cli.main(["analyze", str(pods), "--events", str(events), "-o", output,
                     "--output-file", str(out)])
    assert code == 0, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--indent", type=int, default=4,
                        help="JSON indentation of the dump: 4 as kubectl writes it, 0 compact "
                        "as the API server sends it")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--yaml", action="store_true", help="write and read the dump as YAML "
                        "(baseline: yaml.load with the C loader)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nodelet-analyze-bench-"))
    try:
        start = time.perf_counter()
        pods, events = generate(work, args.pods, args.seed, args.indent or None, args.yaml)
        print(f"generated {args.pods} pods ({pods.stat().st_size / 1e6:.0f} MB) and "
              f"{events.stat().st_size / 1e6:.1f} MB of events in "
              f"{time.perf_counter() - start:.1f}s under {work}")
        run(args, pods, events, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def run(args: argparse.Namespace, pods: Path, events: Path, work: Path) -> None:
    load = "yaml.load(CSafeLoader)" if args.yaml else "json.load"
    rows = [(f"{load}(PodList)  [baseline]",
             best_of(args.repeat, lambda: json_load(pods, pause_gc=False)))]
    rows.append((f"{load}(PodList), GC paused",
                 best_of(args.repeat, lambda: json_load(pods, pause_gc=True))))
    for output in ("table", "json", "html"):
        out = work / f"report.{output}"
        run_once = functools.partial(analyze, pods, events, output, out)
        rows.append((f"nodelet analyze -o {output}", best_of(args.repeat, run_once)))
        print(f"  -o {output}: {out.stat().st_size / 1e6:.2f} MB")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nodelet.cli", "analyze", str(pods), "--events",
                    str(events), "--output-file", str(work / "sub.txt")], check=True)
    rows.append(("process: nodelet analyze -o table (1 run, incl. start-up)",
                 time.perf_counter() - start))
    base = rows[0][1]
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"\n{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d}, best of {args.repeat}, load average {load}")
    width = max(len(r[0]) for r in rows)
    for label, seconds in rows:
        print(f"{label.ljust(width)}   {seconds:7.2f}s   {seconds / base:5.2f}x")


if __name__ == "__main__":
    sys.exit(main())
