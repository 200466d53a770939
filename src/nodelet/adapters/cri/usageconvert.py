"""CRI stats messages (ContainerStats, PodSandboxStats) as `nodelet.model.core.summary` values.

Pure functions, no I/O; an unset UInt64Value becomes None, never 0.
"""

from __future__ import annotations

from typing import Any

from nodelet.adapters.cri.gen import api_pb2 as pb
from nodelet.model.core import runtime as rt
from nodelet.model.core import summary as sm


def _value(message: Any, name: str) -> int | None:
    return getattr(message, name).value if message.HasField(name) else None


def cpu(usage: pb.CpuUsage) -> sm.Cpu:
    return sm.Cpu(time_ns=usage.timestamp,
                  usage_core_ns=_value(usage, "usage_core_nano_seconds"),
                  usage_nano_cores=_value(usage, "usage_nano_cores"))


def memory(usage: pb.MemoryUsage) -> sm.Memory:
    return sm.Memory(time_ns=usage.timestamp, working_set=_value(usage, "working_set_bytes"),
                     usage=_value(usage, "usage_bytes"), rss=_value(usage, "rss_bytes"),
                     available=_value(usage, "available_bytes"),
                     page_faults=_value(usage, "page_faults"),
                     major_page_faults=_value(usage, "major_page_faults"))


def _fs(usage: pb.FilesystemUsage) -> sm.Fs:
    return sm.Fs(time_ns=usage.timestamp, used=_value(usage, "used_bytes"),
                 inodes_used=_value(usage, "inodes_used"))


def _interface(usage: pb.NetworkInterfaceUsage) -> sm.Interface:
    return sm.Interface(name=usage.name, rx_bytes=_value(usage, "rx_bytes"),
                        rx_errors=_value(usage, "rx_errors"), tx_bytes=_value(usage, "tx_bytes"),
                        tx_errors=_value(usage, "tx_errors"))


def network(usage: pb.NetworkUsage) -> sm.Network:
    default = _interface(usage.default_interface) if usage.HasField("default_interface") \
        else None
    return sm.Network(time_ns=usage.timestamp, default=default,
                      others=tuple(_interface(i) for i in usage.interfaces))


def container(stats: pb.ContainerStats) -> sm.ContainerUsage:
    labels = dict(stats.attributes.labels)
    return sm.ContainerUsage(
        id=stats.attributes.id,
        name=labels.get(rt.LABEL_CONTAINER_NAME, stats.attributes.metadata.name),
        labels=labels,
        cpu=cpu(stats.cpu) if stats.HasField("cpu") else None,
        memory=memory(stats.memory) if stats.HasField("memory") else None,
        rootfs=_fs(stats.writable_layer) if stats.HasField("writable_layer") else None,
    )


def sandbox(stats: pb.PodSandboxStats) -> sm.PodUsage:
    meta, linux = stats.attributes.metadata, stats.linux
    return sm.PodUsage(
        sandbox_id=stats.attributes.id, name=meta.name, namespace=meta.namespace, uid=meta.uid,
        cpu=cpu(linux.cpu) if linux.HasField("cpu") else None,
        memory=memory(linux.memory) if linux.HasField("memory") else None,
        network=network(linux.network) if linux.HasField("network") else None,
        process_count=_value(linux.process, "process_count")
        if linux.HasField("process") else None,
        containers=tuple(container(c) for c in linux.containers),
    )
