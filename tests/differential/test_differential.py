"""nodelet and the real kubelet run the same catalogue of pods on the same containerd, one after
the other, and show the same status and events (docs/differential.md).

Every difference is either fixed in nodelet or listed in `DELIBERATE` with the paths it may
touch (its reason is in docs/differential.md); any other difference fails the test. The
report (every scenario's differences and the `N of M scenarios identical` line) is written to
test-artifacts/differential.txt and printed, both agents' observations to
test-artifacts/differential.json.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import agents
import pytest
import pytest_asyncio
import scenarios
import twin

from conftest import Instance, start_instance, stop_instance
from support import kubeletpeer
from support.polling import eventually

pytestmark = pytest.mark.runtime

# Scenario → the differences allowed there (prefixes of `twin.compare`'s lines; "" allows
# any), each explained in docs/differential.md. DELIBERATE: nodelet differs on purpose, or the
# standalone kubelet cannot do what nodelet does. OPEN: nodelet's to fix, not fixed yet.
ALL = ("",)
DELIBERATE: dict[str, tuple[str, ...]] = {
    # The kubelet refuses static pods that reference API objects; nodelet reads them from
    # the manifest dir.
    "configmap-missing": ALL, "secret-missing": ALL, "configmap-optional": ALL,
    "env-configmap-missing": ALL, "env-secret-optional": ALL,
    # The volume error in the PodReadyToStartContainers message (DESIGN.md, beyond the KEP).
    "hostpath-type-missing": ("conditions[0].message: ",),
    "oom-killed": ("events: only the first: Warning OOMKilling",),
    # The standalone kubelet knows no node address (it has no Node object).
    "host-network": ("podIP: ", "podIPs: "),
    # The standalone kubelet has no RuntimeClass manager, so it takes every handler as unable
    # to make mounts recursively read-only (IfPossible: not recursive); nodelet asks the runtime.
    "volume-mounts": ("containerStatuses[0].volumeMounts[2].recursiveReadOnly: ",),
}
# In every scenario: nodelet standalone shows its node's address (hostIP), the standalone
# kubelet none (it has no Node object to read it from).
EVERYWHERE = ("hostIP: ", "hostIPs: ")
# Settled within a window that repeats (a back-off, a restart): which round of it each agent
# was seen in depends on the machine's load, so the restart counts may differ by a round.
RESTARTS = ("containerStatuses[0].restartCount: ", "initContainerStatuses[0].restartCount: ")
TIMING: dict[str, tuple[str, ...]] = {name: RESTARTS for name in (
    "poststart-fails", "liveness-exec-fails", "startup-exec-fails")}
# A container backing off: the kubelet shows it waiting (CrashLoopBackOff) or, between its
# syncs, terminated; nodelet waiting.
TIMING |= {name: (*RESTARTS, "containerStatuses[0].state.") for name in (
    "onfailure-crash", "always-completes", "crashloop", "start-error-always")}
TIMING |= {name: (*RESTARTS, "initContainerStatuses[0].state.") for name in (
    "init-fails-onfailure", "init-fails-always")}
# Whether an agent's first probe comes before httpd listens (one Unhealthy event), either way.
UNHEALTHY_ONCE = ("events: only the first: Warning Unhealthy",
                  "events: only the second: Warning Unhealthy")
TIMING |= {"readiness-http-ok": UNHEALTHY_ONCE, "readiness-tcp-ok": UNHEALTHY_ONCE}
OPEN: dict[str, tuple[str, ...]] = {}


def allowed(name: str) -> tuple[str, ...]:
    return EVERYWHERE + DELIBERATE.get(name, ()) + OPEN.get(name, ()) + TIMING.get(name, ())


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def twin_runtime() -> AsyncIterator[Instance]:
    instance = await start_instance()
    try:
        yield instance
    finally:
        await stop_instance(instance)


def report(diffs: dict[str, list[str]]) -> str:
    """Every scenario and its differences; those of every scenario (EVERYWHERE) once, first,
    with how many scenarios had them."""
    everywhere = sum(1 for found in diffs.values() if any(d.startswith(EVERYWHERE)
                                                          for d in found))
    lines = [f"in {everywhere} of {len(diffs)} scenarios: {', '.join(EVERYWHERE)}(only nodelet "
             "standalone shows its node's address: docs/differential.md)"]
    diffs = {name: [d for d in found if not d.startswith(EVERYWHERE)]
             for name, found in diffs.items()}
    for name, found in diffs.items():
        kind = " ".join(k for k, table in (("deliberate", DELIBERATE), ("open", OPEN),
                                           ("timing", TIMING)) if name in table)
        lines.append(f"{name}: {'identical' if not found else 'differs'}"
                     + (f" ({kind}: docs/differential.md)" if found and kind else ""))
        lines += [f"    {d}" for d in found]
    return "\n".join([*lines, twin.summary(diffs)]) + "\n"


@pytest.mark.timeout(900)
async def test_nodelet_and_the_kubelet_show_the_same(twin_runtime: Instance,
                                                     tmp_path: Path) -> None:
    try:
        async with agents.nodelet_twin(twin_runtime) as ours:
            nodelet = await twin.run_catalogue(ours, scenarios.CATALOGUE)
        manifests = tmp_path / "kubelet-manifests"
        manifests.mkdir()
        async with agents.kubelet_twin(twin_runtime, manifests) as (theirs, _):
            kubelet = await twin.run_catalogue(theirs, scenarios.CATALOGUE)
    finally:
        for made in scenarios.HOST_PATHS_MADE:  # DirectoryOrCreate made them on the host
            shutil.rmtree(made, ignore_errors=True)
    diffs = {s.name: twin.compare(nodelet[s.name], kubelet[s.name])
             for s in scenarios.CATALOGUE}
    text = report(diffs)
    out = Path("test-artifacts") / "differential.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    (out.parent / "differential.json").write_text(json.dumps(
        {name: {"nodelet": dataclasses.asdict(nodelet[name]),
                "kubelet": dataclasses.asdict(kubelet[name])} for name in diffs}, indent=1))
    print(text)
    unexplained = {name: [d for d in found if not d.startswith(allowed(name))]
                   for name, found in diffs.items()}
    assert not any(unexplained.values()), {n: d for n, d in unexplained.items() if d}


async def test_the_kubelet_peer_runs_a_pod_and_leaves_nothing(twin_runtime: Instance,
                                                             tmp_path: Path) -> None:
    """The peer itself (tests/support/kubeletpeer.py): the kubelet runs a static pod, serves it on
    its read-only `/pods`, logs its events, and after `stop` nothing of it is left — no
    process, sandbox, cgroup, mount or directory."""
    manifests = tmp_path / "peer-manifests"
    manifests.mkdir()
    peer = await kubeletpeer.KubeletPeer.start(
        endpoint=twin_runtime.containerd.endpoint, manifests=manifests, node_name="peer",
        client=twin_runtime.client)
    try:
        (manifests / "one.yaml").write_text(scenarios.Scenario(
            "one", scenarios.spec(scenarios.main(scenarios.SLEEP)), scenarios.running).manifest())
        pods = await eventually(peer.pods, until=lambda ps: any(
            p["metadata"]["name"] == "one-peer" and scenarios.running(p) for p in ps),
            within=60, what="one-peer running on the kubelet")
        [pod] = pods
        assert pod["metadata"]["annotations"]["kubernetes.io/config.source"] == "file"
        started = await eventually(
            lambda: [e for e in peer.events() if e["reason"] == "Started"], within=30,
            what="the kubelet's Started event in its log")
        assert started[0]["name"] == "one-peer" and started[0]["type"] == "Normal"
        assert started[0]["fieldPath"] == "spec.containers{main}"
    finally:
        await peer.stop()
    assert not any((await peer.leftovers()).values()), await peer.leftovers()
    assert not await twin_runtime.client.list_pod_sandboxes()
