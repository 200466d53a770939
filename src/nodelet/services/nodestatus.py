"""Node registration and node status, as the kubelet's `kubelet_node_status.go` does them.

`NodeReporter.register()` creates the Node (`POST /api/v1/nodes`); when it exists already
(a restart) it is kept and its labels and status are brought up to date. Then every
`update_period` (kubelet: `nodeStatusUpdateFrequency` 10 s) the status is computed — capacity
(cpu, memory, pods) from the machine, addresses, nodeInfo from the CRI Version, the Ready
condition from CRI Status (RuntimeReady and NetworkReady) — and PATCHed only when it changed
or `report_period` passed (kubelet: `nodeStatusReportFrequency` 5 min; the Lease is the
heartbeat in between). A condition's `lastTransitionTime` moves only when its status does.

Facts about the machine (`host.MachineFacts`) are read by the host adapter, once, by the caller;
this module only assembles them into the Node (no I/O but the API and CRI calls).

Exceptions: `register()` raises `kube.KubeError` when the API refuses; `run()` logs and retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import nodelet
from nodelet.adapters import host, kube
from nodelet.model import runtime as rt
from nodelet.model import status as st

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# The kubelet's version string is what `kubectl get nodes` shows; say what we are.
KUBELET_VERSION = f"v1.31.0-nodelet.{nodelet.__version__}"


class RuntimeInfo(Protocol):
    """What the node status needs from the container runtime (`cri.RuntimeClient` fits)."""

    async def version(self) -> rt.VersionInfo: ...

    async def status(self) -> rt.RuntimeStatus: ...


@dataclass(frozen=True)
class NodeSpec:
    """What nodelet says about its node (everything but the runtime's state)."""

    name: str
    host_ip: str
    machine: host.MachineFacts
    max_pods: int = 110
    pod_cidrs: tuple[str, ...] = ()
    kubelet_port: int = 10250
    labels: dict[str, str] = field(default_factory=dict)


def node_labels(spec: NodeSpec) -> dict[str, str]:
    return {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": spec.machine.architecture,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": spec.machine.architecture,
        **spec.labels,
    }


def node_object(spec: NodeSpec) -> Obj:
    """The Node to create (pure)."""
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": node_labels(spec)},
        "spec": {},
    }
    if spec.pod_cidrs:
        node["spec"] = {"podCIDR": spec.pod_cidrs[0], "podCIDRs": list(spec.pod_cidrs)}
    return node


def ready_condition(runtime: rt.RuntimeStatus | None, error: str = "") -> tuple[str, str, str]:
    """(status, reason, message) of the node's Ready condition, worded as the kubelet does."""
    if runtime is None:
        return "False", "KubeletNotReady", f"container runtime status check may not have " \
            f"completed yet: {error}".rstrip(": ")
    problems = []
    for type_ in ("RuntimeReady", "NetworkReady"):
        cond = runtime.condition(type_)
        if cond is None or not cond.status:
            reason = cond.reason if cond else "missing"
            message = cond.message if cond else "not reported"
            what = "network" if type_ == "NetworkReady" else ""
            problems.append(f"container runtime {what} not ready: {type_}=false "
                            f"reason:{reason} message:{message}".replace("  ", " "))
    if problems:
        return "False", "KubeletNotReady", "; ".join(problems)
    return "True", "KubeletReady", "kubelet is posting ready status"


def node_status(
    spec: NodeSpec,
    version: rt.VersionInfo | None,
    ready: tuple[str, str, str],
    *,
    previous: Obj | None,
    now: datetime,
) -> Obj:
    """The Node status to report (pure). Transition times are kept from `previous` (the API's
    status) for conditions whose status did not change; heartbeats are `now`."""
    m = spec.machine
    capacity = {"cpu": str(m.cpus), "memory": f"{m.memory_bytes // 1024}Ki",
                "pods": str(spec.max_pods), "ephemeral-storage": "0"}
    stamp = st.format_time(now)
    old = {c.get("type"): c for c in (previous or {}).get("conditions") or []}
    wanted = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory",
         "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", *ready),
    ]
    conditions = []
    for type_, status, reason, message in wanted:
        before = old.get(type_)
        since = before.get("lastTransitionTime") if before and \
            before.get("status") == status else stamp
        conditions.append({"type": type_, "status": status, "reason": reason,
                           "message": message, "lastHeartbeatTime": stamp,
                           "lastTransitionTime": since})
    runtime_version = f"{version.runtime_name}://{version.runtime_version}" if version else ""
    return {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": conditions,
        "addresses": [{"type": "InternalIP", "address": spec.host_ip},
                      {"type": "Hostname", "address": spec.name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": spec.kubelet_port}},
        "nodeInfo": {
            "machineID": m.machine_id, "systemUUID": m.machine_id, "bootID": m.boot_id,
            "kernelVersion": m.kernel_version, "osImage": m.os_image,
            "containerRuntimeVersion": runtime_version, "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": m.architecture,
        },
    }


def _without_heartbeats(status: Obj) -> Obj:
    out = dict(status)
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"}
                         for c in status.get("conditions", [])]
    return out


class NodeReporter:
    def __init__(
        self,
        *,
        client: kube.KubeClient,
        spec: NodeSpec,
        runtime: RuntimeInfo,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float],
        update_period: float = 10.0,
        report_period: float = 300.0,
    ) -> None:
        self._client = client
        self._spec = spec
        self._runtime = runtime
        self._clock = clock
        self._monotonic = monotonic
        self.update_period = update_period
        self.report_period = report_period
        self.node: Obj | None = None
        self._reported: Obj | None = None
        self._reported_at = 0.0
        self.registered = False
        self.reports = 0

    @property
    def uid(self) -> str | None:
        return self.node["metadata"].get("uid") if self.node else None

    async def register(self) -> None:
        """Create the Node (or adopt the existing one), then report its status."""
        try:
            self.node = await self._client.create_node(node_object(self._spec))
            log.info("registered node %s", self._spec.name)
        except kube.AlreadyExists:
            self.node = await self._client.patch_node(
                self._spec.name, {"metadata": {"labels": node_labels(self._spec)}})
            log.info("node %s was registered before; adopted it", self._spec.name)
        self.registered = True
        await self.update(force=True)

    async def update(self, *, force: bool = False) -> bool:
        """Compute the status and PATCH it if it changed (or is due); True if sent."""
        version, ready = await self._runtime_state()
        previous = (self.node or {}).get("status")
        status = node_status(self._spec, version, ready, previous=previous, now=self._clock())
        due = self._monotonic() - self._reported_at >= self.report_period
        if not force and not due and self._reported is not None and \
                _without_heartbeats(status) == _without_heartbeats(self._reported):
            return False
        self.node = await self._client.patch_node_status(self._spec.name, {"status": status})
        self._reported, self._reported_at = status, self._monotonic()
        self.reports += 1
        return True

    async def _runtime_state(self) -> tuple[rt.VersionInfo | None, tuple[str, str, str]]:
        try:
            version = await self._runtime.version()
            status = await self._runtime.status()
        except Exception as exc:  # any runtime failure makes the node NotReady, not crash it
            return None, ready_condition(None, str(exc))
        return version, ready_condition(status)
