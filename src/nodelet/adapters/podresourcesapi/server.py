"""The PodResourcesLister service on a unix socket (`grpc.aio`), answering from a `Lister`:
v1, and v1alpha1 beside it as the kubelet still serves it (List only, devices without
topology).

As the kubelet's server: calls are rate limited (a token bucket of 100 per second, 10 at
once; over it, RESOURCE_EXHAUSTED "rejected by rate limit"), and a pod that `Get` cannot find
is an error with the kubelet's words (code Unknown, as a Go handler's plain error is sent).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import grpc

from nodelet.adapters.podresourcesapi.gen import podresources_pb2 as pb
from nodelet.adapters.podresourcesapi.gen import podresources_pb2_grpc as pb_grpc
from nodelet.adapters.podresourcesapi.gen import podresources_v1alpha1_pb2 as alpha
from nodelet.adapters.podresourcesapi.gen import podresources_v1alpha1_pb2_grpc as alpha_grpc
from nodelet.model.core import podresources as pr

# The kubelet's podresources.DefaultQPS and DefaultBurstTokens.
QPS = 100.0
BURST = 10


class Lister(Protocol):
    """What the service answers from (`services.devices.podresourceslister`)."""

    def pods(self) -> Sequence[pr.PodResources]: ...
    def pods_v1alpha1(self) -> Sequence[pr.PodResources]: ...
    def pod(self, namespace: str, name: str) -> pr.PodResources | None: ...
    def allocatable(self) -> Sequence[pr.ContainerDevices]: ...
    def get_failed(self) -> None: ...


class TokenBucket:
    """golang.org/x/time/rate's Limiter.Allow: `rate` tokens a second, at most `burst`."""

    def __init__(self, rate: float, burst: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._monotonic = monotonic
        self._last = monotonic()

    def allow(self) -> bool:
        now = self._monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


def _devices(found: pr.ContainerDevices) -> pb.ContainerDevices:
    out = pb.ContainerDevices(resource_name=found.resource, device_ids=list(found.device_ids))
    if found.numa_nodes:
        out.topology.CopyFrom(pb.TopologyInfo(nodes=[pb.NUMANode(ID=n)
                                                     for n in found.numa_nodes]))
    return out


def _dynamic(found: pr.DynamicResource) -> pb.DynamicResource:
    return pb.DynamicResource(
        claim_name=found.claim_name, claim_namespace=found.claim_namespace,
        claim_resources=[pb.ClaimResource(
            cdi_devices=[pb.CDIDevice(name=n) for n in r.cdi_ids], driver_name=r.driver,
            pool_name=r.pool, device_name=r.device) for r in found.resources])


def _pod(found: pr.PodResources) -> pb.PodResources:
    return pb.PodResources(name=found.name, namespace=found.namespace, containers=[
        pb.ContainerResources(name=c.name, devices=[_devices(d) for d in c.devices],
                              dynamic_resources=[_dynamic(r) for r in c.dynamic])
        for c in found.containers])


async def _admit(limiter: TokenBucket, context: grpc.aio.ServicerContext[object, object]
                 ) -> None:
    """The kubelet's rate limit interceptor: a call over the limit is refused."""
    if not limiter.allow():
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")


class _Service(pb_grpc.PodResourcesListerServicer):
    def __init__(self, lister: Lister, limiter: TokenBucket) -> None:
        self._lister = lister
        self._limiter = limiter

    async def List(self, request: pb.ListPodResourcesRequest,
                   context: grpc.aio.ServicerContext[object, object]
                   ) -> pb.ListPodResourcesResponse:
        await _admit(self._limiter, context)
        return pb.ListPodResourcesResponse(pod_resources=[_pod(p)
                                                          for p in self._lister.pods()])

    async def GetAllocatableResources(
            self, request: pb.AllocatableResourcesRequest,
            context: grpc.aio.ServicerContext[object, object]
    ) -> pb.AllocatableResourcesResponse:
        await _admit(self._limiter, context)
        return pb.AllocatableResourcesResponse(
            devices=[_devices(d) for d in self._lister.allocatable()])

    async def Get(self, request: pb.GetPodResourcesRequest,
                  context: grpc.aio.ServicerContext[object, object]
                  ) -> pb.GetPodResourcesResponse:
        await _admit(self._limiter, context)
        found = self._lister.pod(request.pod_namespace, request.pod_name)
        if found is None:
            self._lister.get_failed()
            await context.abort(grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace "
                                                         f"{request.pod_namespace} not found")
        assert found is not None
        return pb.GetPodResourcesResponse(pod_resources=_pod(found))


class _ServiceV1alpha1(alpha_grpc.PodResourcesListerServicer):
    def __init__(self, lister: Lister, limiter: TokenBucket) -> None:
        self._lister = lister
        self._limiter = limiter

    async def List(self, request: alpha.ListPodResourcesRequest,
                   context: grpc.aio.ServicerContext[object, object]
                   ) -> alpha.ListPodResourcesResponse:
        await _admit(self._limiter, context)
        return alpha.ListPodResourcesResponse(pod_resources=[
            alpha.PodResources(name=p.name, namespace=p.namespace, containers=[
                alpha.ContainerResources(name=c.name, devices=[
                    alpha.ContainerDevices(resource_name=d.resource, device_ids=d.device_ids)
                    for d in c.devices]) for c in p.containers])
            for p in self._lister.pods_v1alpha1()])


class PodResourcesServer:
    """The service on the unix socket `socket` (a stale one replaced; its directory made);
    `limiter`: by default the kubelet's rate limit."""

    def __init__(self, socket: Path, lister: Lister, *,
                 limiter: TokenBucket | None = None) -> None:
        self.socket = socket
        self._lister = lister
        self._limiter = limiter or TokenBucket(QPS, BURST)
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self.socket.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        server = grpc.aio.server()
        # One limiter for both, as the kubelet's one server-wide interceptor.
        pb_grpc.add_PodResourcesListerServicer_to_server(
            _Service(self._lister, self._limiter), server)
        alpha_grpc.add_PodResourcesListerServicer_to_server(
            _ServiceV1alpha1(self._lister, self._limiter), server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
