"""What nodelet adds to the runtime's figures in the Summary API, as the kubelet does (pure):
running containers only, filesystem sizes on used figures, the pod's ephemeral storage."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import pods
from nodelet.model.core import summary as sm
from nodelet.model.core import volumes as vol

INFO = sm.Fs(time_ns=5, capacity=1000, available=600, inodes=100, inodes_free=70)


def container(cid: str, *, rootfs: sm.Fs | None = None,
              logs: sm.Fs | None = None) -> sm.ContainerUsage:
    return sm.ContainerUsage(id=cid, name="main", labels={}, rootfs=rootfs, logs=logs)


def test_running_only_drops_an_exited_instance() -> None:
    pod = sm.PodUsage(sandbox_id="s", name="p", namespace="ns", uid="u",
                      containers=(container("old"), container("new")))
    assert [c.id for c in sm.running_only(pod, {"new"}).containers] == ["new"]


def test_on_filesystem_keeps_what_is_used_and_adds_the_sizes() -> None:
    used = sm.Fs(time_ns=9, used=40, inodes_used=3)
    assert sm.on_filesystem(used, INFO) == sm.Fs(time_ns=9, used=40, inodes_used=3,
                                                 capacity=1000, available=600, inodes=100,
                                                 inodes_free=70)
    assert sm.on_filesystem(None, INFO) is None
    assert sm.on_filesystem(used, None) == used


def test_ephemeral_storage_adds_up_rootfs_and_logs() -> None:
    containers = [container("a", rootfs=sm.Fs(time_ns=7, used=10, inodes_used=1),
                            logs=sm.Fs(time_ns=8, used=20, inodes_used=2)),
                  container("b", rootfs=sm.Fs(time_ns=6, used=5))]
    assert sm.ephemeral_storage(containers, INFO) == sm.Fs(
        time_ns=8, used=35, inodes_used=3, capacity=1000, available=600, inodes=100,
        inodes_free=70)
    assert sm.ephemeral_storage(containers, None) is None


def test_system_containers_are_rendered_with_their_cpu_rate() -> None:
    def sample(at: int, used: int) -> sm.Summary:
        pods = sm.SystemContainer(name="pods", start_ns=1_000_000_000,
                                  cpu=sm.Cpu(time_ns=at, usage_core_ns=used),
                                  memory=sm.Memory(time_ns=at, working_set=4096))
        return sm.Summary(node=sm.NodeUsage(name="n", start_ns=0, system_containers=(pods,)))

    later = sm.with_rates(sample(3_000_000_000, 2_500_000_000), sample(1_000_000_000, 500_000_000))
    [body] = sm.summary_to_api(later)["node"]["systemContainers"]
    assert body["name"] == "pods" and body["startTime"] == "1970-01-01T00:00:01Z"
    assert body["cpu"]["usageNanoCores"] == 1_000_000_000
    assert body["memory"]["workingSetBytes"] == 4096


def test_ephemeral_storage_counts_local_ephemeral_volumes_only() -> None:
    disk = sm.VolumeUsage("cache", sm.Fs(time_ns=9, used=100, inodes_used=4),
                          local_ephemeral=True)
    memory = sm.VolumeUsage("tmp", sm.Fs(time_ns=9, used=1000, inodes_used=40))
    total = sm.ephemeral_storage([container("a", rootfs=sm.Fs(time_ns=7, used=10))], INFO,
                                 [disk, memory])
    assert total is not None and (total.used, total.inodes_used, total.time_ns) == (110, 4, 9)


@pytest.mark.parametrize(
    ("source_type", "source", "counted"),
    [("emptyDir", {}, True), ("emptyDir", {"medium": ""}, True),
     ("emptyDir", {"medium": "Memory"}, False), ("configMap", {"name": "c"}, True),
     ("secret", {"secretName": "s"}, False), ("projected", {"sources": []}, False),
     ("downwardAPI", {"items": []}, False), ("hostPath", {"path": "/x"}, False)],
)
def test_local_ephemeral_volumes_are_the_kubelets(source_type: str, source: dict[str, Any],
                                                  counted: bool) -> None:
    assert vol.local_ephemeral(pods.Volume("v", source_type, source)) is counted
