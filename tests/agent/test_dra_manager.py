"""The DRA manager's own decisions, without a control plane (services/devices/dra.py): the
kubelet's words for a driver it refuses and for claims it cannot prepare, nothing recorded
for a pod whose claims fail their checks, a gone driver's ResourceSlices deleted after the
wiping delay (not when it comes back in time), and a corrupt checkpoint moved aside. A real
driver's prepare and unprepare are in tests/cluster/test_cluster_dra.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

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


async def test_a_driver_without_the_v1_service_is_refused_in_the_kubelets_words(
        tmp_path: Path) -> None:
    m = manager(tmp_path, Api())
    with pytest.raises(dra.PrepareError) as caught:
        await m.register(DRIVER, "/x.sock", ("v1beta1.DRAPlugin",))
    assert caught.value.message == (
        f"invalid supported gRPC versions of DRA driver plugin {DRIVER} at endpoint /x.sock: "
        'none of services supported by the plugin (["v1beta1.DRAPlugin"]) are supported by '
        'the kubelet (["v1.DRAPlugin"])')
    assert m.drivers() == []


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
