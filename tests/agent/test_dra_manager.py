"""The DRA manager's own decisions, without a control plane (services/devices/dra.py): the
kubelet's words for a driver it refuses and for claims it cannot prepare, nothing recorded
for a pod whose claims fail their checks, a gone driver's ResourceSlices deleted after the
wiping delay (not when it comes back in time), a corrupt checkpoint moved aside, and a driver
slow to prepare one claim holding up only the pods of that claim. A real driver's prepare and
unprepare are in tests/cluster/test_cluster_dra.py."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import grpc
import pytest

from nodelet.adapters.dra.gen import dra_pb2 as dra_pb
from nodelet.adapters.dra.gen import health_pb2 as health_pb
from nodelet.helpers import errors
from nodelet.model.core import pods
from nodelet.model.core import resourceclaims as rc
from nodelet.services.devices import dra
from support.polling import eventually

UID = "pod-uid"
DRIVER = "d.example.com"


class Api:
    """The claims as the API has them, and the ResourceSlice deletions asked for."""

    def __init__(self, claims: dict[str, dict[str, Any]] | None = None) -> None:
        self.claims = claims or {}
        self.wiped: list[str] = []

    async def resource_claim(self, namespace: str, name: str) -> Any:
        if name not in self.claims:
            raise errors.MessageError(f'resourceclaims.resource.k8s.io "{name}" not found')
        return self.claims[name]

    async def delete_resource_slices(self, driver: str = "") -> None:
        self.wiped.append(driver)


def claim(*, reserved: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "cu"},
            "status": {"reservedFor": [{"uid": UID}] if reserved else [],
                       "allocation": {"devices": {"results": [
                           {"request": "r", "driver": DRIVER, "pool": "n", "device": "d"}]}}}}


POD = pods.Pod(uid=pods.PodUID(UID), name="p", namespace="ns", source="api", spec=pods.PodSpec(
    containers=(pods.Container(name="c", image="i"),),
    resource_claims=(pods.PodResourceClaim(name="gpu", resource_claim_name="c"),)))


def manager(tmp_path: Path, api: Api, *, wiping_delay: float = 30.0) -> dra.DraManager:
    return dra.DraManager(state_dir=tmp_path, claims=api, active=set, ready=lambda: True,
                          wiping_delay=wiping_delay)


async def test_a_driver_without_a_known_service_is_refused_in_the_kubelets_words(
        tmp_path: Path) -> None:
    m = manager(tmp_path, Api())
    with pytest.raises(dra.PrepareError) as caught:
        await m.register(DRIVER, "/x.sock", ("v1alpha4.DRAPlugin",))
    assert caught.value.message == (
        f"invalid supported gRPC versions of DRA driver plugin {DRIVER} at endpoint /x.sock: "
        'none of services supported by the plugin (["v1alpha4.DRAPlugin"]) are supported by '
        'the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])')
    assert m.drivers() == []


async def test_an_endpoint_registered_twice_is_refused_in_the_kubelets_words(
        tmp_path: Path) -> None:
    m = manager(tmp_path, Api())
    endpoint = str(tmp_path / "d.sock")
    await m.register(DRIVER, endpoint, ("v1.DRAPlugin",))
    with pytest.raises(dra.PrepareError) as caught:
        await m.register(DRIVER, endpoint, ("v1.DRAPlugin",))
    assert caught.value.message == (
        f"endpoint {endpoint} already registered for DRA driver plugin {DRIVER}")
    await m.register(DRIVER, str(tmp_path / "e.sock"), ("v1.DRAPlugin",))  # another: taken
    await m.close()


@pytest.mark.parametrize(("api", "words"), [
    (Api({"c": claim()}), f"DRA driver {DRIVER} is not registered"),
    (Api({"c": claim(reserved=False)}),
     f"pod p ({UID}) is not allowed to use ResourceClaim c (cu)"),
    (Api(), 'fetch ResourceClaim c: resourceclaims.resource.k8s.io "c" not found'),
])
async def test_a_pod_whose_claims_cannot_be_prepared_leaves_nothing_recorded(
        tmp_path: Path, api: Api, words: str) -> None:
    m = manager(tmp_path, api)
    with pytest.raises(dra.PrepareError) as caught:
        await m.prepare(POD)
    assert caught.value.message == f"prepare dynamic resources: {words}"
    assert m.claims() == [] and not (tmp_path / rc.CHECKPOINT_NAME).exists()
    await m.unprepare(POD)  # nothing to unprepare: no driver asked
    await m.close()


async def test_a_gone_driver_has_its_slices_deleted_after_the_delay(tmp_path: Path) -> None:
    api = Api()
    m = manager(tmp_path, api, wiping_delay=0.2)
    await m.register(DRIVER, str(tmp_path / "none.sock"), ("v1.DRAPlugin",))
    await m.deregister(DRIVER, str(tmp_path / "back.sock"))  # another endpoint: it stays
    assert m.drivers() == [DRIVER]
    await m.deregister(DRIVER, str(tmp_path / "none.sock"))
    assert m.drivers() == []
    await eventually(lambda: api.wiped, within=5, until=lambda w: DRIVER in w,
                     what="the driver's ResourceSlices deleted")
    await m.close()


async def test_a_driver_back_in_time_keeps_its_slices(tmp_path: Path) -> None:
    api = Api()
    m = manager(tmp_path, api, wiping_delay=0.5)
    await m.register(DRIVER, str(tmp_path / "a.sock"), ("v1.DRAPlugin",))
    await m.deregister(DRIVER, str(tmp_path / "a.sock"))
    await m.register(DRIVER, str(tmp_path / "a.sock"), ("v1.DRAPlugin",))
    # Not connected (no socket there): a wipe is due again, but not the one cancelled.
    await asyncio.sleep(0.1)
    assert api.wiped == []
    await m.close()


async def test_a_corrupt_checkpoint_is_moved_aside(tmp_path: Path) -> None:
    (tmp_path / rc.CHECKPOINT_NAME).write_text('{"data": {}, "checksum": "x"}')
    m = manager(tmp_path, Api())
    await m.start()
    assert m.claims() == []
    assert not (tmp_path / rc.CHECKPOINT_NAME).exists()
    assert [p.name.split("-")[0] for p in tmp_path.iterdir()] == [
        f"{rc.CHECKPOINT_NAME}.corrupt"]


# -- device health --------------------------------------------------------------------------

class HealthPeer:
    """A driver's DRAResourceHealth service (v1 and v1alpha1) on a unix socket, serving the
    reports the test queues: a report (a list of DeviceHealth), END (the stream ends), or
    UNIMPLEMENTED (the call is refused so); and its DRAPlugin v1beta1, preparing every claim
    with the device n/d (a claim named in `held` once its event is set). `calls` lists the
    method paths called."""

    END = "end"
    UNIMPLEMENTED = "unimplemented"

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.calls: list[str] = []
        self.held: dict[str, asyncio.Event] = {}  # claim name -> its prepare waits for it
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._server = grpc.aio.server()
        handlers = []
        for package in ("v1", "v1alpha1"):
            handlers.append(grpc.method_handlers_generic_handler(
                f"{package}.DRAResourceHealth", {"NodeWatchResources": (
                    grpc.unary_stream_rpc_method_handler(
                        self._watch(f"/{package}.DRAResourceHealth/NodeWatchResources"),
                        request_deserializer=health_pb.NodeWatchResourcesRequest.FromString,
                        response_serializer=(
                            health_pb.NodeWatchResourcesResponse.SerializeToString)))}))
        beta = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
        handlers.append(grpc.method_handlers_generic_handler(beta, {
            "NodePrepareResources": grpc.unary_unary_rpc_method_handler(
                self._prepare(f"/{beta}/NodePrepareResources"),
                request_deserializer=dra_pb.NodePrepareResourcesRequest.FromString,
                response_serializer=dra_pb.NodePrepareResourcesResponse.SerializeToString)}))
        self._server.add_generic_rpc_handlers(handlers)
        self._server.add_insecure_port(f"unix://{socket}")

    def _watch(self, path: str) -> Any:
        async def watch(request: Any, context: grpc.aio.ServicerContext) -> Any:
            self.calls.append(path)
            while True:
                item = await self.queue.get()
                if item == self.END:
                    return
                if item == self.UNIMPLEMENTED:
                    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no health here")
                yield health_pb.NodeWatchResourcesResponse(devices=[
                    health_pb.DeviceHealth(
                        device=health_pb.DeviceIdentifier(pool_name=pool, device_name=device),
                        health=health, message=message)
                    for pool, device, health, message in item])
        return watch

    def _prepare(self, path: str) -> Any:
        async def prepare(request: Any, context: grpc.aio.ServicerContext) -> Any:
            self.calls.append(path)
            for c in request.claims:
                if c.name in self.held:
                    await self.held[c.name].wait()
            return dra_pb.NodePrepareResourcesResponse(claims={
                c.uid: dra_pb.NodePrepareResourceResponse(devices=[dra_pb.Device(
                    request_names=["r"], pool_name="n", device_name="d",
                    cdi_device_ids=["d.example.com/dev=d"])])
                for c in request.claims})
        return prepare

    async def __aenter__(self) -> HealthPeer:
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop(None)


def prepared_checkpoint(tmp_path: Path) -> None:
    """The node knows the claim `c` of POD, prepared with device n/d (as after a restart)."""
    info = rc.ClaimInfo(rc.ClaimRef("ns", "cu", "c"), (DRIVER,), (DRIVER,), pod_uids={UID},
                        prepared=True)
    info.devices[DRIVER] = (rc.PreparedDevice(("r",), "n", "d"),)
    (tmp_path / rc.CHECKPOINT_NAME).write_bytes(rc.encode_checkpoint([info]))


HEALTH_POD = dataclasses.replace(POD, spec=dataclasses.replace(POD.spec, containers=(
    pods.Container(name="c", image="i", resources=pods.Resources(claims=(("gpu", ""),))),)))


def shown(m: dra.DraManager) -> list[tuple[str, str, str]]:
    return [(h.resource_id, h.health, h.message)
            for r in m.resource_statuses(HEALTH_POD).get("c", ()) for h in r.resources]


async def test_device_health_from_a_v1alpha1_driver_reaches_the_pods_status(
        tmp_path: Path) -> None:
    prepared_checkpoint(tmp_path)
    told: list[str] = []
    m = dra.DraManager(state_dir=tmp_path, claims=Api(), active=set, ready=lambda: True,
                       health=dra.HealthOptions(on_change=told.append, retry=0.1))
    await m.start()
    # Prepared, nothing reported yet: Unknown, as the kubelet shows it.
    assert shown(m) == [(f"{DRIVER}/n/d", "Unknown", "")]
    async with HealthPeer(tmp_path / "d.sock") as peer:
        await m.register(DRIVER, str(peer.socket),
                         ("v1.DRAPlugin", "v1alpha1.DRAResourceHealth"))
        await peer.queue.put([("n", "d", health_pb.UNHEALTHY, "ECC errors")])
        await eventually(lambda: shown(m), until=lambda s: s == [
            (f"{DRIVER}/n/d", "Unhealthy", "ECC errors")], within=10, what="unhealthy")
        assert peer.calls == ["/v1alpha1.DRAResourceHealth/NodeWatchResources"]
        # The pod is told once the checkpoint is written.
        await eventually(lambda: told, until=lambda t: t == [UID], within=10,
                         what="the pod told")
        # A restart reads the health from its checkpoint while the report holds.
        again = dra.DraManager(state_dir=tmp_path, claims=Api(), active=set,
                               ready=lambda: True)
        await again.start()
        assert shown(again) == shown(m)
        await again.close()
        # The stream ends: the driver's devices read Unknown, the pod is told, and the
        # stream is opened again.
        await peer.queue.put(HealthPeer.END)
        await eventually(lambda: shown(m), until=lambda s: s == [
            (f"{DRIVER}/n/d", "Unknown", "")], within=10, what="unknown")
        await eventually(lambda: told, until=lambda t: t == [UID, UID], within=10,
                         what="the pod told again")
        await eventually(lambda: len(peer.calls), until=lambda n: n == 2, within=10,
                         what="the stream opened again")
        await peer.queue.put([("n", "d", health_pb.HEALTHY, "")])
        await eventually(lambda: shown(m), until=lambda s: s == [
            (f"{DRIVER}/n/d", "Healthy", "")], within=10, what="healthy again")
        # A driver that says it does not report health is not asked again.
        await peer.queue.put(HealthPeer.END)
        await eventually(lambda: len(peer.calls), until=lambda n: n == 3, within=10,
                         what="the third stream")
        await peer.queue.put(HealthPeer.UNIMPLEMENTED)
        plugin = m._plugins[DRIVER][0]
        await eventually(lambda: plugin.health is not None and plugin.health.done(),
                         within=10, what="the health watch stopped")
        assert len(peer.calls) == 3
        await m.close()


async def test_the_newest_health_service_is_chosen_and_none_without_the_gate(
        tmp_path: Path) -> None:
    async with HealthPeer(tmp_path / "d.sock") as peer:
        off = dra.DraManager(state_dir=tmp_path, claims=Api(), active=set, ready=lambda: True,
                             health=dra.HealthOptions(enabled=False))
        await off.register(DRIVER, str(peer.socket), (
            "v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"))
        assert off._plugins[DRIVER][0].health is None
        await off.close()
        m = manager(tmp_path, Api())
        await m.register(DRIVER, str(peer.socket), (
            "v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"))
        await eventually(lambda: peer.calls, within=10, what="a health stream")
        assert peer.calls == ["/v1.DRAResourceHealth/NodeWatchResources"]
        await m.close()


async def test_a_v1beta1_driver_is_called_by_its_own_method_paths(tmp_path: Path) -> None:
    async with HealthPeer(tmp_path / "d.sock") as peer:
        m = manager(tmp_path, Api({"c": claim()}))
        # The first service of the driver's list the node speaks is used.
        await m.register(DRIVER, str(peer.socket), ("v1beta1.DRAPlugin", "v1.DRAPlugin"))
        await m.prepare(HEALTH_POD)
        assert peer.calls == ["/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
                              "NodePrepareResources"]
        assert m.cdi_devices(HEALTH_POD, HEALTH_POD.spec.containers[0]) == (
            "d.example.com/dev=d",)
        await m.close()


async def test_a_driver_slow_for_one_claim_holds_up_only_the_pods_of_that_claim(
        tmp_path: Path) -> None:
    other = {"metadata": {"name": "c2", "namespace": "ns", "uid": "cu2"},
             "status": {"reservedFor": [{"uid": "pod-2"}], "allocation": {"devices": {
                 "results": [{"request": "r", "driver": DRIVER, "pool": "n", "device": "d"}]}}}}
    second = dataclasses.replace(HEALTH_POD, uid=pods.PodUID("pod-2"), spec=dataclasses.replace(
        HEALTH_POD.spec, resource_claims=(pods.PodResourceClaim(name="gpu",
                                                                resource_claim_name="c2"),)))
    async with HealthPeer(tmp_path / "d.sock") as peer:
        m = manager(tmp_path, Api({"c": claim(), "c2": other}))
        await m.register(DRIVER, str(peer.socket), ("v1beta1.DRAPlugin",))
        peer.held["c"] = asyncio.Event()
        slow = asyncio.create_task(m.prepare(HEALTH_POD))
        await eventually(lambda: len(peer.calls) == 1, within=10, what="c being prepared")
        await asyncio.wait_for(m.prepare(second), 10)  # not behind c's
        assert not slow.done()
        assert m.cdi_devices(second, second.spec.containers[0]) == ("d.example.com/dev=d",)
        peer.held["c"].set()
        await asyncio.wait_for(slow, 10)
        # Both in the checkpoint, with their devices: the last write had both.
        saved = rc.decode_checkpoint((tmp_path / rc.CHECKPOINT_NAME).read_bytes())
        assert sorted(i.ref.name for i in saved if i.devices) == ["c", "c2"]
        await m.close()
