"""A removed pod's cgroups go with it, on real containerd and the real cgroupfs: static pods of
every QoS class created and removed, as the node e2e suite's mirror pod specs do by the dozen,
leave no pod cgroup under the agent's cgroup root, in any hierarchy (cgroup v1 here: runc makes
the pod level in every controller's hierarchy, nodelet in cpu and memory); and `nodelet reset`
removes what a pod left behind."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import AgentFactory
from nodelet import settings
from nodelet.adapters import cgroups
from nodelet.model.core import qoscgroups
from nodelet.services.nodehealth import resetting
from support.harness import Harness, all_ready, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

MOUNT = Path("/sys/fs/cgroup")
# One pod of each QoS class (Guaranteed pods sit directly under kubepods).
RESOURCES = {
    "besteffort": "",
    "burstable": "resources: {requests: {cpu: 10m, memory: 16Mi}}\n",
    "guaranteed": "resources: {limits: {cpu: 50m, memory: 32Mi}}\n",
}


def pod_cgroups(cgroup_root: str, mount: Path = MOUNT) -> list[str]:
    """Every pod-level cgroup (`pod<uid>`, and what is left inside it) under the QoS levels
    of `cgroup_root`, in every hierarchy."""
    if cgroups.is_unified(mount):
        hierarchies = [mount]
    else:
        hierarchies = [h for h in mount.iterdir() if h.is_dir() and not h.is_symlink()]
    found = []
    for hierarchy in hierarchies:
        for level in qoscgroups.qos_levels(cgroup_root):
            directory = hierarchy / level.lstrip("/")
            if directory.is_dir():
                found += [str(p.relative_to(mount)) for p in directory.glob("pod*/**")
                          if p.is_dir()]
    return sorted(found)


def write_pods(agent: Harness, round_: int) -> list[str]:
    names = []
    for qos, resources in RESOURCES.items():
        name = f"{qos}-{round_}"
        agent.write(f"{name}.yaml", pod_manifest(name, container_extra=resources))
        names.append(name)
    return names


async def test_removed_static_pods_leave_no_pod_cgroup(make_agent: AgentFactory) -> None:
    agent = await make_agent()
    root = agent.settings.node.cgroup_root
    for round_ in range(3):
        names = write_pods(agent, round_)
        for name in names:
            await agent.wait_status(name, all_ready, what=f"{name} Ready")
        assert len({p.split("/")[-1] for p in pod_cgroups(root)
                    if p.rsplit("/", 1)[-1].startswith("pod")}) == len(names)
        for name in names:
            agent.remove(f"{name}.yaml")
        await eventually(lambda: agent.agent_or_fail().pods(), until=lambda ps: not ps,
                         within=30, what="every pod terminated")
        await eventually(lambda: pod_cgroups(root), until=lambda left: not left, within=10,
                         what=f"no pod cgroup left under {root} (round {round_})")


def reached(found: list[str], depth: int) -> bool:
    """Whether a pod cgroup is there (depth 1) or a container's cgroup in it (depth 2)."""
    return any(len(p.split("/pod", 1)[1].split("/")) >= depth for p in found if "/pod" in p)


async def test_static_pods_removed_while_their_sandbox_is_made_leave_no_pod_cgroup(
        make_agent: AgentFactory) -> None:
    """The mirror pod specs' churn: a manifest removed while RunPodSandbox is in flight. The
    sync is cancelled and the pod terminated while the runtime still makes, or rolls back,
    its sandbox: runc leaves the pause container's cgroup empty in a hierarchy (cpuset, seen
    here), the pod cgroup cannot be removed then, and the container GC removes both once
    the runtime has nothing of the pod left."""
    agent = await make_agent(gc=replace(settings.GCSettings(), container_gc_period=1.0))
    root = agent.settings.node.cgroup_root
    for round_ in range(8):
        name = f"churn-{round_}"
        agent.write(f"{name}.yaml", pod_manifest(name))
        # Removed once the pod cgroup is made (RunPodSandbox next), or once runc made the
        # pause container's cgroup in it (RunPodSandbox about to return).
        depth = 1 + round_ % 2
        await eventually(lambda: pod_cgroups(root),
                         until=lambda found, depth=depth: reached(found, depth),
                         within=30, what=f"{name}'s cgroups (depth {depth})", every=0.005)
        agent.remove(f"{name}.yaml")
        await eventually(lambda: agent.agent_or_fail().pods(), until=lambda ps: not ps,
                         within=30, what=f"{name} terminated")
    await eventually(lambda: pod_cgroups(root), until=lambda left: not left, within=20,
                     what=f"no pod cgroup left under {root}")


async def test_reset_removes_idle_pod_cgroups_it_no_longer_knows(tmp_path: Path) -> None:
    """What the churn leaves when the agent stops before its GC ran: pod cgroups of pods the
    checkpoint forgot, one with an empty container cgroup in it. `nodelet reset` removes
    them, but not one with a process in it (it may be another agent's, the default root "/"
    being shared)."""
    root = f"/nodelet-test-reset-{tmp_path.name}"
    besteffort = qoscgroups.qos_parent("BestEffort", root)
    gone = [f"{besteffort}/podgone-1/abc123", f"{qoscgroups.kubepods(root)}/podgone-2"]
    busy = f"{besteffort}/podbusy"
    for cgroup in (*gone, busy):
        for controller in ("cpu", "cpuset", "pids"):
            (MOUNT / controller / cgroup.lstrip("/")).mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        (MOUNT / "pids" / busy.lstrip("/") / "cgroup.procs").write_text(str(sleeper.pid))
        config = replace(settings.Settings(data_dir=tmp_path / "data"),
                         node=settings.NodeSettings(cgroup_root=root))
        report = await resetting.reset(config)
        assert cgroups.pod_cgroup_uids(root) == {"busy"}
        assert [e for e in report.errors if "pod cgroup" in e] == []
    finally:
        sleeper.kill()
        sleeper.wait()
    assert cgroups.remove_pod_cgroups("busy", cgroup_root=root) == []
    assert cgroups.remove_qos_cgroups(root) == []
    for controller in ("cpu", "cpuset", "pids"):
        (MOUNT / controller / root.lstrip("/")).rmdir()
