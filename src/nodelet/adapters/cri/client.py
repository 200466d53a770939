"""A small, purpose-built CRI v1 client over `grpc.aio` on a unix socket.

`RuntimeClient` speaks only the RPCs nodelet needs and only in `nodelet.model.core.runtime` values;
protobuf stays inside this package (`convert.py` translates). Every call has a deadline from
`settings.CriTimeouts`. Failures raise the tree in `nodelet.adapters.cri.errors` (`CriError` and
subclasses, re-exported here), always `from` the gRPC error.

Runtime restarts: gRPC reconnects a channel by itself, but a call made while the channel is
still reconnecting fails at once with UNAVAILABLE. Idempotent calls therefore wait (up to
`CriTimeouts.connect`) for the channel to come back and are retried once; RunPodSandbox,
CreateContainer and ExecSync are never retried, as they may have taken effect.

Measurements: an optional `OperationObserver` is told about every RPC (its kubelet operation
name, e.g. `run_podsandbox`, its duration including a retry, and the CriError if it failed), so
the metrics service can count them without this adapter knowing about Prometheus.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import grpc

from nodelet import settings as settings_
from nodelet.adapters.cri import convert, errors, usageconvert
from nodelet.adapters.cri.errors import (
    AlreadyExists,
    Cancelled,
    CriError,
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    RuntimeUnavailable,
)
from nodelet.adapters.cri.gen import api_pb2 as pb
from nodelet.adapters.cri.gen import api_pb2_grpc as pb_grpc
from nodelet.model.core import runtime as rt
from nodelet.model.core import summary as sm

# The exception tree is re-exported so callers need only this module.
__all__ = [
    "AlreadyExists",
    "Cancelled",
    "CriError",
    "DeadlineExceeded",
    "InvalidArgument",
    "NotFound",
    "OperationObserver",
    "RuntimeClient",
    "RuntimeUnavailable",
]

log = logging.getLogger(__name__)

# The longest grace period or exec timeout sent (68 years): the API allows int64 seconds, but the
# request field takes no more and gRPC fails a call at once (DEADLINE_EXCEEDED) whose deadline
# is that far away (measured: 9.3e18 s fails, 2^31 s waits).
MAX_TIMEOUT_S = 2**31 - 1

Req = TypeVar("Req")
Resp = TypeVar("Resp")

# Called after every CRI call with (operation, seconds, error or None). It runs on the event
# loop inside the call, so it must be quick; an exception it raises is logged and swallowed.
OperationObserver = Callable[[str, float, CriError | None], None]

# The kubelet's `operation_type` label values (pkg/kubelet/kuberuntime/instrumented_services.go),
# by request message name.
OPERATION_TYPES = {
    "Version": "version",
    "Status": "status",
    "RunPodSandbox": "run_podsandbox",
    "StopPodSandbox": "stop_podsandbox",
    "RemovePodSandbox": "remove_podsandbox",
    "PodSandboxStatus": "podsandbox_status",
    "ListPodSandbox": "list_podsandbox",
    "CreateContainer": "create_container",
    "StartContainer": "start_container",
    "StopContainer": "stop_container",
    "RemoveContainer": "remove_container",
    "ListContainers": "list_containers",
    "ContainerStatus": "container_status",
    "ExecSync": "exec_sync",
    "Exec": "exec",
    "Attach": "attach",
    "PortForward": "port_forward",
    "ContainerStats": "container_stats",
    "ListContainerStats": "list_container_stats",
    "PodSandboxStats": "podsandbox_stats",
    "ListPodSandboxStats": "list_podsandbox_stats",
    "PullImage": "pull_image",
    "ImageStatus": "image_status",
    "ListImages": "list_images",
    "RemoveImage": "remove_image",
}

# A local socket: reconnect quickly after a runtime restart instead of gRPC's default
# back-off of up to 120 s. The kubelet allows 16 MiB messages (big ListContainers answers).
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
]


def _target(endpoint: str) -> str:
    """gRPC target for an endpoint; a bare absolute path means a unix socket."""
    return f"unix://{endpoint}" if endpoint.startswith("/") else endpoint


class RuntimeClient:
    """One gRPC channel to a CRI runtime. Create with `connect`, release with `close`."""

    def __init__(
        self,
        *,
        channel: grpc.aio.Channel,
        endpoint: str,
        timeouts: settings_.CriTimeouts,
        observer: OperationObserver | None = None,
    ) -> None:
        self._channel = channel
        self._endpoint = endpoint
        self._timeouts = timeouts
        self._observer = observer
        self._runtime = pb_grpc.RuntimeServiceStub(channel)
        self._images = pb_grpc.ImageServiceStub(channel)

    @classmethod
    async def connect(
        cls,
        endpoint: str,
        *,
        timeouts: settings_.CriTimeouts,
        observer: OperationObserver | None = None,
    ) -> RuntimeClient:
        """Open a channel and wait until it is connected, at most `timeouts.connect` seconds.

        `observer`, if given, is told about every later call (not about connecting).

        Raises RuntimeUnavailable (naming the endpoint) when nothing answers in time.
        """
        channel = grpc.aio.insecure_channel(_target(endpoint), options=_CHANNEL_OPTIONS)
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout=timeouts.connect)
        except TimeoutError as e:
            await channel.close(None)
            raise errors.RuntimeUnavailable(
                f"connect failed after {timeouts.connect:g}s: "
                f"{errors.unavailable_message(endpoint)}",
                operation="connect",
                endpoint=endpoint,
            ) from e
        return cls(channel=channel, endpoint=endpoint, timeouts=timeouts, observer=observer)

    @property
    def endpoint(self) -> str:
        return self._endpoint

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> RuntimeClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------------------

    async def _call(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        *,
        target: str = "",
        deadline: float | None = None,
        retry: bool = True,
    ) -> Resp:
        """Run one unary call with a deadline; map failures onto CriError; tell the observer."""
        operation = type(request).__name__.removesuffix("Request")
        started = time.monotonic()
        try:
            response = await self._call_mapped(
                method, request, operation=operation, target=target, deadline=deadline,
                retry=retry,
            )
        except CriError as e:
            self._observe(operation, time.monotonic() - started, e)
            raise
        self._observe(operation, time.monotonic() - started, None)
        return response

    def _observe(self, operation: str, seconds: float, error: CriError | None) -> None:
        if self._observer is None:
            return
        try:
            self._observer(OPERATION_TYPES.get(operation, operation.lower()), seconds, error)
        except Exception:
            log.exception("CRI operation observer failed for %s", operation)

    async def _call_mapped(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        *,
        operation: str,
        target: str,
        deadline: float | None,
        retry: bool,
    ) -> Resp:
        if deadline is None:
            deadline = self._timeouts.default
        try:
            try:
                return await method(request, timeout=deadline)
            except grpc.aio.AioRpcError as e:
                if not (retry and e.code() == grpc.StatusCode.UNAVAILABLE):
                    raise
                if not await self._wait_channel_ready():
                    raise
                log.info("CRI %s: runtime at %s is back, retrying", operation, self._endpoint)
                return await method(request, timeout=deadline)
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(
                e, operation=operation, target=target, endpoint=self._endpoint
            ) from e

    async def _wait_channel_ready(self) -> bool:
        """Whether the channel reconnects within `timeouts.connect`."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), self._timeouts.connect)
        except TimeoutError:
            return False
        return True

    # -- runtime -------------------------------------------------------------------------

    async def version(self) -> rt.VersionInfo:
        response = await self._call(self._runtime.Version, pb.VersionRequest(version="v1"))
        return convert.version_from_pb(response)

    async def cgroup_driver(self) -> str | None:
        """The runtime's cgroup driver, "systemd" or "cgroupfs", from CRI's RuntimeConfig
        (KEP-4033; containerd 2.0+); None when the runtime does not implement the call."""
        try:
            response = await self._call(self._runtime.RuntimeConfig, pb.RuntimeConfigRequest(),
                                        retry=False)
        except errors.CriError as exc:
            if exc.code == "UNIMPLEMENTED":
                return None
            raise
        return pb.CgroupDriver.Name(response.linux.cgroup_driver).lower()

    async def status(self) -> rt.RuntimeStatus:
        response = await self._call(self._runtime.Status, pb.StatusRequest())
        return convert.runtime_status_from_pb(response)

    # -- sandboxes -----------------------------------------------------------------------

    async def run_pod_sandbox(
        self, config: rt.SandboxConfig, runtime_handler: str = ""
    ) -> rt.SandboxID:
        """Create and start a sandbox; returns once it is READY with its network set up."""
        request = pb.RunPodSandboxRequest(
            config=convert.sandbox_config_to_pb(config), runtime_handler=runtime_handler
        )
        target = f"{config.namespace}/{config.name} (attempt {config.attempt})"
        response = await self._call(
            self._runtime.RunPodSandbox,
            request,
            target=target,
            deadline=self._timeouts.run_sandbox,
            retry=False,
        )
        return rt.SandboxID(response.pod_sandbox_id)

    async def stop_pod_sandbox(self, sandbox_id: rt.SandboxID) -> None:
        """Stop every process of the sandbox and release its network (idempotent)."""
        request = pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id)
        await self._call(self._runtime.StopPodSandbox, request, target=sandbox_id)

    async def remove_pod_sandbox(self, sandbox_id: rt.SandboxID) -> None:
        """Remove the sandbox and its containers (idempotent)."""
        request = pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id)
        await self._call(self._runtime.RemovePodSandbox, request, target=sandbox_id)

    async def pod_sandbox_status(self, sandbox_id: rt.SandboxID) -> rt.SandboxInfo:
        """Full status, with IPs and network mode. Raises NotFound for an unknown ID."""
        request = pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id)
        response = await self._call(self._runtime.PodSandboxStatus, request, target=sandbox_id)
        return convert.sandbox_status_from_pb(response.status)

    async def sandbox_netns_path(self, sandbox_id: rt.SandboxID) -> str:
        """The sandbox's network namespace path ("" for host network or unknown runtimes)."""
        request = pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=True)
        response = await self._call(self._runtime.PodSandboxStatus, request, target=sandbox_id)
        return convert.netns_path_from_info(response.info)

    async def list_pod_sandboxes(
        self, labels: Mapping[str, str] | None = None
    ) -> list[rt.SandboxInfo]:
        """Sandboxes matching all `labels`. Items lack IPs and network mode (see below)."""
        request = pb.ListPodSandboxRequest(
            filter=pb.PodSandboxFilter(label_selector=convert.label_filter(labels))
        )
        response = await self._call(self._runtime.ListPodSandbox, request)
        return [convert.sandbox_from_pb(item) for item in response.items]

    async def list_pod_sandbox_statuses(
        self, labels: Mapping[str, str] | None = None
    ) -> list[rt.SandboxInfo]:
        """Like list_pod_sandboxes, with each item's full PodSandboxStatus.

        A sandbox removed between the list and its status call is left out.
        """
        items = await self.list_pod_sandboxes(labels)
        results = await asyncio.gather(
            *(self.pod_sandbox_status(item.id) for item in items), return_exceptions=True
        )
        statuses: list[rt.SandboxInfo] = []
        for result in results:
            if isinstance(result, errors.NotFound):
                continue
            if isinstance(result, BaseException):
                raise result
            statuses.append(result)
        return statuses

    # -- containers ----------------------------------------------------------------------

    async def create_container(
        self,
        sandbox_id: rt.SandboxID,
        config: rt.ContainerConfig,
        sandbox_config: rt.SandboxConfig,
    ) -> rt.ContainerID:
        request = pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id,
            config=convert.container_config_to_pb(config),
            sandbox_config=convert.sandbox_config_to_pb(sandbox_config),
        )
        target = f"{config.name} in sandbox {sandbox_id}"
        response = await self._call(
            self._runtime.CreateContainer, request, target=target, retry=False
        )
        return rt.ContainerID(response.container_id)

    async def start_container(self, container_id: rt.ContainerID) -> None:
        request = pb.StartContainerRequest(container_id=container_id)
        await self._call(self._runtime.StartContainer, request, target=container_id)

    async def stop_container(self, container_id: rt.ContainerID, timeout_s: int) -> None:
        """Stop with a grace period of `timeout_s` seconds, then kill (idempotent)."""
        timeout_s = min(timeout_s, MAX_TIMEOUT_S)
        request = pb.StopContainerRequest(container_id=container_id, timeout=timeout_s)
        # The runtime needs the whole grace period; allow it on top of the usual deadline.
        deadline = self._timeouts.default + timeout_s
        await self._call(
            self._runtime.StopContainer, request, target=container_id, deadline=deadline
        )

    async def update_container_resources(self, container_id: rt.ContainerID,
                                         resources: rt.LinuxResources) -> None:
        """UpdateContainerResources: the running container's new cgroup limits (resize)."""
        request = pb.UpdateContainerResourcesRequest(
            container_id=container_id, linux=convert.linux_resources_to_pb(resources))
        await self._call(self._runtime.UpdateContainerResources, request, target=container_id)

    async def remove_container(self, container_id: rt.ContainerID) -> None:
        request = pb.RemoveContainerRequest(container_id=container_id)
        await self._call(self._runtime.RemoveContainer, request, target=container_id)

    async def reopen_container_log(self, container_id: rt.ContainerID) -> None:
        """Make the runtime write the container's log to a fresh file at its log path (after
        the old one was renamed away, for rotation)."""
        request = pb.ReopenContainerLogRequest(container_id=container_id)
        await self._call(self._runtime.ReopenContainerLog, request, target=container_id)

    async def list_container_stats(
        self, labels: Mapping[str, str] | None = None
    ) -> list[rt.ContainerStats]:
        """Usage of the running containers matching all `labels` (CRI ListContainerStats)."""
        request = pb.ListContainerStatsRequest(
            filter=pb.ContainerStatsFilter(label_selector=convert.label_filter(labels)))
        response = await self._call(self._runtime.ListContainerStats, request)
        return [convert.container_stats_from_pb(s) for s in response.stats]

    async def list_containers(
        self,
        sandbox_id: rt.SandboxID | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[rt.ContainerInfo]:
        """Containers of one sandbox (or all) matching all `labels`."""
        request = pb.ListContainersRequest(
            filter=pb.ContainerFilter(
                pod_sandbox_id=sandbox_id or "", label_selector=convert.label_filter(labels)
            )
        )
        response = await self._call(self._runtime.ListContainers, request)
        return [convert.container_from_pb(c) for c in response.containers]

    async def labels_of(self, object_id: str) -> Mapping[str, str] | None:
        """The labels of the container or sandbox with this ID (None: neither exists), for
        finding the pod of an ID seen in a runtime event."""
        containers = await self._call(
            self._runtime.ListContainers,
            pb.ListContainersRequest(filter=pb.ContainerFilter(id=object_id)), target=object_id)
        if containers.containers:
            return dict(containers.containers[0].labels)
        sandboxes = await self._call(
            self._runtime.ListPodSandbox,
            pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(id=object_id)), target=object_id)
        return dict(sandboxes.items[0].labels) if sandboxes.items else None

    async def container_status(
        self, container_id: rt.ContainerID, *, sandbox_id: rt.SandboxID | None = None
    ) -> rt.ContainerInfo:
        """Full status (times, exit code, reason). Raises NotFound for an unknown ID.
        `sandbox_id`: the container's sandbox when the caller knows it (from a list entry),
        which saves a list call."""
        request = pb.ContainerStatusRequest(container_id=container_id)
        response = await self._call(self._runtime.ContainerStatus, request, target=container_id)
        if sandbox_id is None:
            # ContainerStatus has no sandbox ID; the list entry of the same container has it.
            listed = await self._call(
                self._runtime.ListContainers,
                pb.ListContainersRequest(filter=pb.ContainerFilter(id=container_id)),
                target=container_id,
            )
            sandbox_id = rt.SandboxID(
                listed.containers[0].pod_sandbox_id if listed.containers else "")
        return convert.container_status_from_pb(response.status, sandbox_id)

    async def exec_sync(
        self, container_id: rt.ContainerID, cmd: list[str] | tuple[str, ...], timeout_s: int
    ) -> rt.ExecResult:
        """Run `cmd` in the container, killed after `timeout_s` seconds (0: no limit)."""
        timeout_s = min(timeout_s, MAX_TIMEOUT_S)
        request = pb.ExecSyncRequest(container_id=container_id, cmd=list(cmd), timeout=timeout_s)
        deadline = self._timeouts.default + timeout_s
        response = await self._call(
            self._runtime.ExecSync, request, target=container_id, deadline=deadline, retry=False
        )
        return convert.exec_result_from_pb(response)

    # -- streaming: the runtime's streaming server serves the session at the URL returned --

    async def exec(self, container_id: rt.ContainerID, cmd: list[str] | tuple[str, ...], *,
                   tty: bool, stdin: bool, stdout: bool, stderr: bool) -> str:
        """The URL of a prepared exec session (CRI Exec); it starts when a client connects."""
        request = pb.ExecRequest(container_id=container_id, cmd=list(cmd), tty=tty,
                                 stdin=stdin, stdout=stdout, stderr=stderr and not tty)
        response = await self._call(self._runtime.Exec, request, target=container_id,
                                    retry=False)
        return response.url

    async def attach(self, container_id: rt.ContainerID, *, tty: bool, stdin: bool,
                     stdout: bool, stderr: bool) -> str:
        """The URL of a prepared attach session to the container's main process."""
        request = pb.AttachRequest(container_id=container_id, tty=tty, stdin=stdin,
                                   stdout=stdout, stderr=stderr and not tty)
        response = await self._call(self._runtime.Attach, request, target=container_id,
                                    retry=False)
        return response.url

    async def port_forward(self, sandbox_id: rt.SandboxID, ports: list[int]) -> str:
        """The URL of a prepared port-forward session into the sandbox's network namespace."""
        request = pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=ports)
        response = await self._call(self._runtime.PortForward, request, target=sandbox_id,
                                    retry=False)
        return response.url

    # -- usage ---------------------------------------------------------------------------

    async def container_stats(self, container_id: rt.ContainerID) -> sm.ContainerUsage:
        """One container's usage (CRI ContainerStats). Raises NotFound for an unknown ID."""
        request = pb.ContainerStatsRequest(container_id=container_id)
        response = await self._call(self._runtime.ContainerStats, request, target=container_id)
        return usageconvert.container(response.stats)

    async def list_container_usage(self) -> list[sm.ContainerUsage]:
        """Every running container's usage (CRI ListContainerStats), with CPU, memory and
        writable layer as the runtime reports them."""
        request = pb.ListContainerStatsRequest(filter=pb.ContainerStatsFilter())
        response = await self._call(self._runtime.ListContainerStats, request)
        return [usageconvert.container(s) for s in response.stats]

    async def pod_sandbox_stats(self, sandbox_id: rt.SandboxID) -> sm.PodUsage:
        """One sandbox's usage (CRI PodSandboxStats). Raises NotFound for an unknown ID."""
        request = pb.PodSandboxStatsRequest(pod_sandbox_id=sandbox_id)
        response = await self._call(self._runtime.PodSandboxStats, request, target=sandbox_id)
        return usageconvert.sandbox(response.stats)

    async def list_pod_sandbox_stats(self) -> list[sm.PodUsage]:
        """Every ready sandbox's usage (CRI ListPodSandboxStats: the pod cgroup's CPU and
        memory, the network namespace's interfaces, the containers)."""
        request = pb.ListPodSandboxStatsRequest(filter=pb.PodSandboxStatsFilter())
        response = await self._call(self._runtime.ListPodSandboxStats, request)
        return [usageconvert.sandbox(s) for s in response.stats]

    # -- images --------------------------------------------------------------------------

    async def pull_image(self, ref: str, auth: rt.AuthConfig | None = None) -> str:
        """Pull `ref` (with `auth` for a registry that asks for credentials); returns the
        runtime's image reference (an ID or digest)."""
        request = pb.PullImageRequest(image=pb.ImageSpec(image=ref))
        if auth is not None:
            request.auth.CopyFrom(convert.auth_to_pb(auth))
        response = await self._call(
            self._images.PullImage, request, target=ref, deadline=self._timeouts.pull_image
        )
        return response.image_ref

    async def image_status(self, ref: str) -> rt.ImageInfo | None:
        """The image, or None when the runtime does not have it."""
        request = pb.ImageStatusRequest(image=pb.ImageSpec(image=ref))
        response = await self._call(self._images.ImageStatus, request, target=ref)
        return convert.image_from_pb(response.image) if response.HasField("image") else None

    async def list_images(self) -> list[rt.ImageInfo]:
        response = await self._call(self._images.ListImages, pb.ListImagesRequest())
        return [convert.image_from_pb(image) for image in response.images]

    async def image_fs_info(self) -> list[rt.FilesystemUsage]:
        """The filesystems holding the runtime's images, with what the images use there."""
        response = await self._call(self._images.ImageFsInfo, pb.ImageFsInfoRequest())
        return [convert.filesystem_from_pb(f) for f in response.image_filesystems]

    async def remove_image(self, ref: str) -> None:
        request = pb.RemoveImageRequest(image=pb.ImageSpec(image=ref))
        await self._call(self._images.RemoveImage, request, target=ref)
