"""The node's own usage for the Summary API, read as cadvisor reads it for the kubelet.

- CPU: the root cgroup's cumulative usage (cgroup v1 `cpuacct.usage`, v2 `cpu.stat`
  usage_usec), else the busy jiffies of /proc/stat.
- Memory: working set as `host.memory_working_set` (root cgroup usage less inactive file
  pages), usage and rss from the root memory cgroup, available = MemTotal - working set.
- Network: /proc/net/dev, the interface of the default route first (loopback left out).
- The `pods` system container: the kubepods cgroup's CPU and memory (`read_cgroup`).

Blocking file reads: call `read_node` on a thread. A figure that cannot be read is None.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from nodelet.adapters import host
from nodelet.model.core import summary as sm

_CGROUP = Path("/sys/fs/cgroup")
# /proc/stat counts in USER_HZ ticks.
_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stat_file(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
    except OSError:
        return {}


def cpu_usage_ns(root: Path = _CGROUP) -> int | None:
    for candidate in (root / "cpu,cpuacct" / "cpuacct.usage", root / "cpuacct" / "cpuacct.usage"):
        if (value := _int(candidate)) is not None:
            return value
    if (usec := _stat_file(root / "cpu.stat").get("usage_usec")) is not None:
        return usec * 1000
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    # user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
    busy = [int(v) for i, v in enumerate(fields[:8]) if i not in (3, 4)]
    return sum(busy) * _TICK_NS


def _memory(now: int, root: Path = _CGROUP) -> sm.Memory | None:
    try:
        working_set = host.memory_working_set()
    except OSError:
        return None
    memory = root / "memory"
    stat = _stat_file(memory / "memory.stat")
    total = _meminfo_total()
    return sm.Memory(
        time_ns=now, working_set=working_set, usage=_int(memory / "memory.usage_in_bytes"),
        rss=stat.get("total_rss"), page_faults=stat.get("total_pgfault"),
        major_page_faults=stat.get("total_pgmajfault"),
        available=max(total - working_set, 0) if total is not None else None)


def _meminfo_total() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _default_interface() -> str:
    try:
        for line in Path("/proc/net/route").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 1 and fields[1] == "00000000":
                return fields[0]
    except OSError:
        pass
    return ""


def network(now: int, net_dev: Path = Path("/proc/net/dev")) -> sm.Network | None:
    """Interfaces of /proc/net/dev (of the reading process's network namespace)."""
    try:
        lines = net_dev.read_text().splitlines()[2:]
    except OSError:
        return None
    interfaces = []
    for line in lines:
        name, _, counters = line.partition(":")
        values = counters.split()
        if name.strip() == "lo" or len(values) < 11:
            continue
        interfaces.append(sm.Interface(name.strip(), rx_bytes=int(values[0]),
                                       rx_errors=int(values[2]), tx_bytes=int(values[8]),
                                       tx_errors=int(values[10])))
    default_name = _default_interface()
    default = next((i for i in interfaces if i.name == default_name),
                   interfaces[0] if interfaces else None)
    return sm.Network(time_ns=now, default=default,
                      others=tuple(i for i in interfaces if i is not default))


def read_cgroup(name: str, cgroup: str, start_ns: int,
                root: Path = _CGROUP) -> sm.SystemContainer | None:
    """A system container of the Summary API (the kubelet's `pods`: the kubepods cgroup) from
    its cgroup v1 files, as cadvisor reads them: cumulative CPU, memory usage, working set
    (usage less inactive file pages), rss and page faults, available = limit - working set
    when it has a limit. None on a cgroup v2 host or when the cgroup is not there."""
    relative = cgroup.lstrip("/")
    memory = root / "memory" / relative
    cpu = next((value for value in (_int(root / c / relative / "cpuacct.usage")
                                    for c in ("cpu,cpuacct", "cpuacct")) if value is not None),
               None)
    usage = _int(memory / "memory.usage_in_bytes")
    if cpu is None and usage is None:
        return None
    now = time.time_ns()
    stat = _stat_file(memory / "memory.stat")
    working_set = None if usage is None else max(usage - stat.get("total_inactive_file", 0), 0)
    limit = _int(memory / "memory.limit_in_bytes")
    available = None
    if limit is not None and working_set is not None and limit < 2**62:
        available = max(limit - working_set, 0)
    return sm.SystemContainer(
        name=name, start_ns=start_ns, cpu=sm.Cpu(time_ns=now, usage_core_ns=cpu),
        memory=sm.Memory(time_ns=now, working_set=working_set, usage=usage,
                         rss=stat.get("total_rss"), available=available,
                         page_faults=stat.get("total_pgfault"),
                         major_page_faults=stat.get("total_pgmajfault")))


def fs(path: Path, now: int) -> sm.Fs | None:
    try:
        stats = host.filesystem_stats(path)
    except OSError:
        return None
    return sm.Fs(time_ns=now, capacity=stats.capacity, available=stats.available,
                 used=stats.capacity - stats.available, inodes=stats.inodes,
                 inodes_free=stats.inodes_free, inodes_used=stats.inodes - stats.inodes_free)


def read_node(name: str, start_ns: int, data_dir: Path) -> sm.NodeUsage:
    now = time.time_ns()
    try:
        max_pids, procs = host.pid_counts()
    except (OSError, ValueError):
        return sm.NodeUsage(name=name, start_ns=start_ns,
                            cpu=sm.Cpu(time_ns=now, usage_core_ns=cpu_usage_ns()),
                            memory=_memory(now), network=network(now), fs=fs(data_dir, now))
    return sm.NodeUsage(name=name, start_ns=start_ns,
                        cpu=sm.Cpu(time_ns=now, usage_core_ns=cpu_usage_ns()),
                        memory=_memory(now), network=network(now), fs=fs(data_dir, now),
                        max_pids=max_pids, cur_procs=procs)
