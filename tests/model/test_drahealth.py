"""DRA device health's pure rules (model.core.drahealth): a driver's reports and their
timeouts, a stream that ended, and what a container's allocatedResourcesStatus shows of its
claims' devices; the health checkpoint."""

from __future__ import annotations

import pytest

from nodelet.model.core import drahealth as dh
from nodelet.model.core import pods
from nodelet.model.core import resourceclaims as rc
from nodelet.model.core import status as st
from nodelet.settings import SettingsError, parse_feature_gates

DRIVER = "d.example.com"
UID = "pod-uid"


def report(device: str, health: st.ResourceHealthStatus = "Healthy", *, message: str = "",
           timeout: float = dh.DEFAULT_TIMEOUT) -> dh.DeviceHealth:
    return dh.DeviceHealth("pool", device, health, timeout=timeout, message=message)


def test_a_report_holds_for_its_timeout_then_reads_unknown() -> None:
    cache = dh.HealthCache()
    changed, dirty = cache.update(DRIVER, [report("d0", "Unhealthy", message="ECC"),
                                           report("d1", timeout=5)], now=100.0)
    assert [(d.device, d.health, d.received) for d in changed] == [
        ("d0", "Unhealthy", 100.0), ("d1", "Healthy", 100.0)]
    assert dirty
    assert cache.get(DRIVER, "pool", "d0", 130.0).message == "ECC"
    assert cache.get(DRIVER, "pool", "d0", 130.1) == dh.DeviceHealth("pool", "d0")
    assert cache.get(DRIVER, "pool", "d1", 105.0).health == "Healthy"
    assert cache.get(DRIVER, "pool", "d1", 105.5).health == "Unknown"
    assert cache.get("other", "pool", "d0", 100.0).health == "Unknown"


def test_the_same_report_again_changes_nothing_but_a_new_message_does() -> None:
    cache = dh.HealthCache()
    cache.update(DRIVER, [report("d0")], now=0.0)
    assert cache.update(DRIVER, [report("d0")], now=1.0) == ([], False)
    changed, _ = cache.update(DRIVER, [report("d0", message="warm")], now=2.0)
    assert [d.message for d in changed] == ["warm"]
    changed, _ = cache.update(DRIVER, [report("d0", message="warm", timeout=60)], now=3.0)
    assert [d.timeout for d in changed] == [60]


def test_a_device_no_longer_reported_goes_unknown_once_its_timeout_passed() -> None:
    cache = dh.HealthCache()
    cache.update(DRIVER, [report("d0"), report("d1", "Unknown")], now=0.0)
    assert cache.update(DRIVER, [], now=30.0) == ([], False)  # not timed out yet
    changed, dirty = cache.update(DRIVER, [], now=31.0)
    # d0 is told as gone Unknown; d1 was Unknown already: dropped without a word.
    assert [(d.device, d.health) for d in changed] == [("d0", "Unknown")]
    assert dirty
    assert cache.encode() == b'{"d.example.com": {"devices": {}}}'


def test_a_driver_keeps_at_most_its_cap_of_devices_but_known_ones_update() -> None:
    cache = dh.HealthCache()
    many = [report(f"d{i}") for i in range(dh.MAX_DEVICES_PER_DRIVER)]
    cache.update(DRIVER, many, now=0.0)
    changed, _ = cache.update(DRIVER, [*many[:-1], report("d0", "Unhealthy"),
                                       report("invented")], now=1.0)
    assert [d.device for d in changed] == ["d0"]
    assert cache.get(DRIVER, "pool", "invented", 1.0).health == "Unknown"


def test_a_cleared_driver_gives_its_devices_and_they_read_unknown() -> None:
    cache = dh.HealthCache()
    cache.update(DRIVER, [report("d0")], now=0.0)
    assert [d.device for d in cache.clear(DRIVER)] == ["d0"]
    assert cache.get(DRIVER, "pool", "d0", 0.0).health == "Unknown"
    assert cache.clear(DRIVER) == []


def test_the_checkpoint_keeps_everything_and_refuses_garbage() -> None:
    cache = dh.HealthCache()
    cache.update(DRIVER, [report("d0", "Unhealthy", message="hot", timeout=7)], now=9.0)
    again = dh.HealthCache.decode(cache.encode())
    assert again.get(DRIVER, "pool", "d0", 10.0) == dh.DeviceHealth(
        "pool", "d0", "Unhealthy", 9.0, 7.0, "hot")
    for blob in (b"{", b"[]", b'{"d": {"devices": {"p/d": {"health": "Fine"}}}}'):
        with pytest.raises(dh.CheckpointError):
            dh.HealthCache.decode(blob)


@pytest.mark.parametrize(("seconds", "timeout"), [(0, 30.0), (-5, 30.0), (12, 12.0)])
def test_a_reports_timeout_defaults_to_30_seconds(seconds: int, timeout: float) -> None:
    assert dh.timeout_of(seconds) == timeout


def test_a_long_message_is_cut_to_the_apis_limit() -> None:
    assert dh.truncated("short") == "short"
    cut = dh.truncated("x" * 2000)
    assert len(cut) == dh.MESSAGE_MAX and cut.endswith("...")
    # The API server counts bytes: a message of two-byte characters is cut at a character's
    # end within the limit.
    assert dh.truncated("é" * 512) == "é" * 512
    cut = dh.truncated("é" * 2000)
    assert cut == "é" * 510 + "..." and len(cut.encode()) == 1023


# -- a container's allocatedResourcesStatus -------------------------------------------------

def claim_pod(container_claims: tuple[tuple[str, str], ...]) -> pods.Pod:
    container = pods.Container(name="c", image="busybox",
                               resources=pods.Resources(claims=container_claims))
    return pods.Pod(
        uid=pods.PodUID(UID), name="p", namespace="ns", source="api",
        spec=pods.PodSpec(containers=(container,), resource_claims=(
            pods.PodResourceClaim(name="gpu", template_name="t"),
            pods.PodResourceClaim(name="nic", resource_claim_name="shared-nic"))),
        resource_claim_statuses=(("gpu", "p-gpu-x"),))


def info(name: str, *devices: rc.PreparedDevice, driver: str = DRIVER) -> rc.ClaimInfo:
    found = rc.ClaimInfo(rc.ClaimRef("ns", f"{name}-uid", name), (driver,), (driver,),
                         pod_uids={UID}, prepared=True)
    found.devices[driver] = devices
    return found


GPU = info("p-gpu-x",
           rc.PreparedDevice(("a",), "pool", "g0", ("d.example.com/gpu=g0", "other=g0")),
           rc.PreparedDevice(("b",), "pool", "g1"),
           rc.PreparedDevice((), "pool", "g2", ("d.example.com/gpu=g0",)))
NIC = info("shared-nic", rc.PreparedDevice((), "pool", "n0"))
HEALTH = {"g0": dh.DeviceHealth("pool", "g0", "Unhealthy", message="ECC"),
          "g1": dh.DeviceHealth("pool", "g1", "Healthy")}


def statuses(container_claims: tuple[tuple[str, str], ...], *,
             prepared: dict[str, rc.ClaimInfo] | None = None,
             messages: bool = True) -> list[tuple[str, list[tuple[str, str, str]]]]:
    pod = claim_pod(container_claims)
    found = dh.resource_statuses(
        pod, pod.spec.containers[0],
        {"p-gpu-x": GPU, "shared-nic": NIC} if prepared is None else prepared,
        lambda driver, pool, device: HEALTH.get(device, dh.DeviceHealth(pool, device)),
        messages=messages)
    return [(r.name, [(h.resource_id, h.health, h.message) for h in r.resources])
            for r in found]


def test_each_claim_the_container_names_lists_its_devices_with_their_health() -> None:
    assert statuses((("gpu", ""), ("nic", ""))) == [
        # The first CDI device ID names a device; one without any is driver/pool/device. A
        # device whose ID was listed already (g2 shares g0's CDI device) is listed once.
        ("claim:gpu", [("d.example.com/gpu=g0", "Unhealthy", "ECC"),
                       ("d.example.com/pool/g1", "Healthy", "")]),
        ("claim:nic", [("d.example.com/pool/n0", "Unknown", "")])]


def test_a_request_lists_the_devices_that_serve_it_or_every_request() -> None:
    assert statuses((("gpu", "b"),)) == [
        ("claim:gpu/b", [("d.example.com/pool/g1", "Healthy", ""),
                         ("d.example.com/gpu=g0", "Unknown", "")])]
    # A subrequest is served by the devices of its request.
    assert statuses((("gpu", "a/big"),)) == [
        ("claim:gpu/a/big", [("d.example.com/gpu=g0", "Unhealthy", "ECC")])]
    assert statuses((("gpu", "none"),))[0][1] == [("d.example.com/gpu=g0", "Unknown", "")]


def test_messages_are_shown_only_with_their_gate() -> None:
    assert statuses((("gpu", "a"),), messages=False) == [
        ("claim:gpu/a", [("d.example.com/gpu=g0", "Unhealthy", "")])]


def test_a_claim_not_prepared_or_not_known_shows_nothing() -> None:
    assert statuses((("gpu", ""), ("nic", "")), prepared={}) == []
    assert statuses((("gone", ""),)) == []


def test_the_pods_holding_a_changed_device_are_found() -> None:
    other = info("o", rc.PreparedDevice((), "pool", "g1"), driver="other.example.com")
    assert dh.pods_using([GPU, NIC, other], DRIVER, [dh.DeviceHealth("pool", "g1")]) == {UID}
    assert dh.pods_using([other], DRIVER, [dh.DeviceHealth("pool", "g1")]) == set()


def test_the_message_gate_needs_the_health_gate_as_the_kubelet_says() -> None:
    with pytest.raises(SettingsError) as caught:
        parse_feature_gates("ResourceHealthStatus=false")
    assert str(caught.value) == ("ResourceHealthStatusMessage is enabled, but depends on "
                                 "features that are disabled: [ResourceHealthStatus]")
    gates = parse_feature_gates("ResourceHealthStatus=false,ResourceHealthStatusMessage=false")
    assert not gates.resource_health_status


def test_a_message_reaches_the_api_only_when_there_is_one() -> None:
    entry = st.ResourceStatus("claim:gpu", (st.ResourceHealth("x", "Unhealthy", "ECC"),
                                            st.ResourceHealth("y", "Healthy")))
    container = st.ContainerStatus(name="c", image="i", state=st.ContainerStateWaiting(reason="r"),
                                   allocated_resources_status=(entry,))
    api = st.to_api(st.PodStatus(container_statuses=(container,)))
    assert api["containerStatuses"][0]["allocatedResourcesStatus"] == [{
        "name": "claim:gpu", "resources": [
            {"resourceID": "x", "health": "Unhealthy", "message": "ECC"},
            {"resourceID": "y", "health": "Healthy"}]}]
