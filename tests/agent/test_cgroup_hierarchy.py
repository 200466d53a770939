"""The QoS cgroup hierarchy on a real host: kubepods with node allocatable, the burstable and
besteffort levels and the pod level, as the kubelet's container manager makes them.

This machine mounts cgroup v1 only (every controller on v1, cgroup2 empty at
/sys/fs/cgroup/unified), so v1 is written and read back for real under /sys/fs/cgroup, each
test under a cgroup root of its own that it removes again. cgroup v2 cannot be mounted here:
its writer is checked against a directory tree that models a cgroup2 mount.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import AgentFactory
from nodelet import settings
from nodelet.adapters import cgroups
from nodelet.model.core import nodes, qoscgroups, specs
from nodelet.model.core import pods as pods_model
from nodelet.services.nodehealth import qoscgroups as qos_service
from support.harness import all_ready, pod_manifest
from support.polling import eventually

V1 = Path("/sys/fs/cgroup")
MI = 1024**2
PAGE = 4096  # v1 memory limits read back rounded down to whole pages


def read(cgroup: str, name: str, controller: str) -> str:
    return (V1 / controller / cgroup.lstrip("/") / name).read_text().strip()


def left_over(root: str) -> list[Path]:
    return [h / root.lstrip("/") for h in V1.iterdir() if (h / root.lstrip("/")).exists()]


# -- cgroup v2: a modelled mount --------------------------------------------------------------


@pytest.fixture
def v2_mount(tmp_path: Path) -> Path:
    """A directory tree modelling a cgroup2 mount (not a real one: this machine has none
    usable): the root's cgroup.controllers and an empty cgroup.subtree_control. The kernel
    would fill each new directory with its interface files; the writer needs none of them."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    return tmp_path


def test_v2_writer_on_a_modelled_cgroup2_mount(v2_mount: Path) -> None:
    node = qoscgroups.Limits(cpu_shares=2048, memory_limit=8 * 1024**3)
    cgroups.apply("/r/kubepods", node, v2_mount)
    for cgroup, limits in qoscgroups.qos_limits([], "/r").items():
        cgroups.apply(cgroup, limits, v2_mount)
    guaranteed = specs.PodCgroup(cpu_shares=102, cpu_quota_us=10_000, memory_limit=32 * MI)
    cgroups.apply_pod_cgroup("/r/kubepods/podg", guaranteed, v2_mount)
    cgroups.apply_pod_cgroup("/r/kubepods/burstable/podb", specs.PodCgroup(cpu_shares=307),
                             v2_mount)
    files = {str(p.relative_to(v2_mount)): p.read_text() for p in v2_mount.rglob("*")
             if p.is_file() and p.name != "cgroup.controllers"}
    assert files == {
        # Every level above a limited cgroup hands it the cpu and memory controllers.
        "cgroup.subtree_control": "+cpu +memory",
        "r/cgroup.subtree_control": "+cpu +memory",
        "r/kubepods/cgroup.subtree_control": "+cpu +memory",
        "r/kubepods/burstable/cgroup.subtree_control": "+cpu +memory",
        "r/kubepods/cpu.weight": "79", "r/kubepods/memory.max": str(8 * 1024**3),
        "r/kubepods/burstable/cpu.weight": "1", "r/kubepods/besteffort/cpu.weight": "1",
        "r/kubepods/podg/cpu.weight": "4", "r/kubepods/podg/cpu.max": "10000 100000",
        "r/kubepods/podg/memory.max": str(32 * MI),
        "r/kubepods/burstable/podb/cpu.weight": "12",
        "r/kubepods/burstable/podb/cpu.max": "max 100000",
        "r/kubepods/burstable/podb/memory.max": "max",
    }


def test_v2_controllers_already_enabled_are_not_written_again(v2_mount: Path) -> None:
    # The kernel lists enabled controllers without "+"; only the missing one is enabled.
    (v2_mount / "cgroup.subtree_control").write_text("cpuset cpu\n")
    cgroups.apply("/kubepods", qoscgroups.Limits(cpu_shares=2), v2_mount)
    assert (v2_mount / "cgroup.subtree_control").read_text() == "+memory"


def test_v2_without_the_cpu_controller_is_an_error(v2_mount: Path) -> None:
    (v2_mount / "cgroup.controllers").write_text("memory pids\n")
    with pytest.raises(OSError, match="lacks the cpu controller"):
        cgroups.apply("/kubepods", qoscgroups.Limits(cpu_shares=2), v2_mount)


# -- cgroup v1: for real ----------------------------------------------------------------------


@pytest.fixture
def v1_root() -> Iterator[str]:
    """A cgroup root of this test's own under the real v1 hierarchies, removed afterwards
    (only empty directories: rmdir)."""
    if cgroups.is_unified(V1) or not (V1 / "cpu").is_dir() or not (V1 / "memory").is_dir():
        pytest.skip("needs cgroup v1 cpu and memory hierarchies")
    root = f"/nodelet-test-{uuid.uuid4().hex[:12]}"
    yield root
    for cgroup in (*qoscgroups.pod_parents("p", root), *qoscgroups.qos_levels(root), root):
        cgroups.remove_pod_cgroup(cgroup)
    assert not left_over(root)


@pytest.mark.runtime
def test_v1_writer_on_the_real_cgroupfs(v1_root: str) -> None:
    top = qoscgroups.kubepods(v1_root)
    cgroups.apply(top, qoscgroups.Limits(cpu_shares=1843, memory_limit=512 * MI))
    for cgroup, limits in qoscgroups.qos_limits([], v1_root).items():
        cgroups.apply(cgroup, limits)
    pod = f"{top}/burstable/podp"
    cgroups.apply_pod_cgroup(pod, specs.PodCgroup(cpu_shares=307, cpu_quota_us=50_000))
    assert read(top, "cpu.shares", "cpu") == "1843"
    assert read(top, "memory.limit_in_bytes", "memory") == str(512 * MI)
    assert read(f"{top}/burstable", "cpu.shares", "cpu") == "2"
    assert read(f"{top}/besteffort", "cpu.shares", "cpu") == "2"
    assert read(pod, "cpu.shares", "cpu") == "307"
    assert read(pod, "cpu.cfs_quota_us", "cpu") == "50000"
    # No memory limit: lifted (-1 reads back as the largest page-aligned value).
    assert int(read(pod, "memory.limit_in_bytes", "memory")) > 2**62
    # A QoS level keeps what it was not told: its memory limit stays as the kernel made it.
    cgroups.apply(f"{top}/burstable", qoscgroups.Limits(cpu_shares=614))
    assert read(f"{top}/burstable", "cpu.shares", "cpu") == "614"
    # The levels go only once empty (rmdir), deepest first.
    assert cgroups.remove_qos_cgroups(v1_root)  # the pod is still there
    assert (V1 / "cpu" / top.lstrip("/")).is_dir()
    assert not cgroups.remove_pod_cgroups("p", cgroup_root=v1_root)
    assert not cgroups.remove_qos_cgroups(v1_root)
    assert not left_over(top)


# -- the agent on containerd ------------------------------------------------------------------


RESERVED = settings.NodeSettings(system_reserved=(("cpu", "100m"), ("memory", "256Mi")),
                                 kube_reserved=(("cpu", "100m"), ("memory", "128Mi")))


@pytest.mark.runtime
async def test_qos_levels_follow_the_pods_on_containerd(make_agent: AgentFactory) -> None:
    agent = await make_agent(node=RESERVED)
    top = qoscgroups.kubepods(agent.settings.node.cgroup_root)
    spec = agent.agent_or_fail().node_spec
    capacity = nodes.capacity(spec)
    # kubepods: capacity less system and kube reserved (not the 100Mi eviction threshold).
    assert read(top, "cpu.shares", "cpu") == str(specs.cpu_shares(capacity["cpu"] - 200))
    memory = capacity["memory"] - 384 * MI
    assert int(read(top, "memory.limit_in_bytes", "memory")) == memory // PAGE * PAGE
    assert memory == nodes.allocatable(spec)["memory"] + 100 * MI
    assert read(f"{top}/besteffort", "cpu.shares", "cpu") == "2"
    assert read(f"{top}/burstable", "cpu.shares", "cpu") == "2"

    requests = "resources:\n  requests: {cpu: 300m}\n"
    agent.write("burst.yaml", pod_manifest("burst", container_extra=requests))
    agent.write("free.yaml", pod_manifest("free"))
    for name in ("burst", "free"):
        await agent.wait_status(name, all_ready, what=f"{name} Ready")
    pod, _ = agent.find("burst")  # type: ignore[misc]
    assert read(f"{top}/burstable", "cpu.shares", "cpu") == "307"  # 300m
    assert read(f"{top}/burstable/pod{pod.uid}", "cpu.shares", "cpu") == "307"
    assert read(f"{top}/besteffort", "cpu.shares", "cpu") == "2"

    agent.remove("burst.yaml")
    await eventually(lambda: agent.find("burst") is None, within=30, what="burst gone")
    await eventually(lambda: read(f"{top}/burstable", "cpu.shares", "cpu") == "2", within=10,
                     what="burstable shares back to 2")
    assert not (V1 / "cpu" / top.lstrip("/") / "burstable" / f"pod{pod.uid}").exists()


async def test_qos_updates_of_a_burst_are_shared_and_the_periodic_one_rewrites(
    v2_mount: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pod updates the QoS levels before its sandbox: a level is written only when its
    limits change, concurrent updates share one, and the periodic update (`rewrite`) writes
    every level again (repairing a change made from outside)."""
    written: list[str] = []
    write = cgroups.apply

    def counting(cgroup: str, limits: qoscgroups.Limits, root: Path) -> None:
        written.append(cgroup)
        write(cgroup, limits, root)

    monkeypatch.setattr(qos_service.cgroups, "apply", counting)
    active: list[pods_model.Pod] = []
    manager = qos_service.QosCgroups(cgroup_root="/r", node=qoscgroups.Limits(),
                                     active=lambda: active, mount=v2_mount)
    await manager.update()
    assert sorted(written) == ["/r/kubepods/besteffort", "/r/kubepods/burstable"]

    written.clear()
    burstable = pods_model.Container(name="c", image="i",
                                     resources=pods_model.Resources(cpu_request_milli=500))
    active.append(pods_model.Pod(uid=pods_model.PodUID("b"), name="b", namespace="d",
                                 spec=pods_model.PodSpec(containers=(burstable,))))
    await asyncio.gather(*(manager.update() for _ in range(10)))
    assert written == ["/r/kubepods/burstable"], "one write, of the level that changed"
    weight = (v2_mount / "r/kubepods/burstable/cpu.weight").read_text().strip()
    assert weight == str(qoscgroups.cpu_weight(specs.cpu_shares(500)))

    written.clear()
    await manager.update()
    assert written == []
    (v2_mount / "r/kubepods/burstable/cpu.weight").write_text("1")
    await manager.update(rewrite=True)
    assert sorted(written) == ["/r/kubepods/besteffort", "/r/kubepods/burstable"]
    assert (v2_mount / "r/kubepods/burstable/cpu.weight").read_text().strip() == weight
