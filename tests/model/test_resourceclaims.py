"""DRA's pure rules (model.core.resourceclaims): which claim a pod's entry names, the checks
before preparing in the kubelet's words, the CDI devices a container gets, the checkpoint."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nodelet.model.core import pods
from nodelet.model.core import resourceclaims as rc
from nodelet.model.parsing import manifests

UID = "pod-uid-1"


def pod_with(claims: tuple[pods.PodResourceClaim, ...], *,
             statuses: tuple[tuple[str, str], ...] = (),
             container_claims: tuple[tuple[str, str], ...] = ()) -> pods.Pod:
    container = pods.Container(name="c", image="busybox",
                               resources=pods.Resources(claims=container_claims))
    return pods.Pod(uid=pods.PodUID(UID), name="p", namespace="ns",
                    spec=pods.PodSpec(containers=(container,), resource_claims=claims),
                    source="api", resource_claim_statuses=statuses)


def claim_obj(*, owner: str | None = UID, reserved: str | None = UID, allocated: bool = True,
              results: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p-gpu-x", "namespace": "ns", "uid": "claim-uid"}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "Pod",
                                    "name": "p", "apiVersion": "v1"}]
    status: dict[str, Any] = {}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": reserved}]
    if allocated:
        status["allocation"] = {"devices": {"results": results if results is not None else [
            {"request": "dev", "driver": "d.example.com", "pool": "n", "device": "d0"}]}}
    return {"metadata": meta, "status": status}


TEMPLATE = pods.PodResourceClaim(name="gpu", template_name="t")
NAMED = pods.PodResourceClaim(name="gpu", resource_claim_name="shared")


def test_a_named_claim_is_its_own_name_and_a_templates_is_in_the_status() -> None:
    assert rc.claim_name(pod_with((NAMED,)), NAMED) == ("shared", False)
    made = pod_with((TEMPLATE,), statuses=(("gpu", "p-gpu-x"),))
    assert rc.claim_name(made, TEMPLATE) == ("p-gpu-x", True)


def test_a_template_claim_not_made_yet_says_so_in_the_kubelets_words() -> None:
    with pytest.raises(rc.ClaimError) as caught:
        rc.claim_name(pod_with((TEMPLATE,)), TEMPLATE)
    assert caught.value.message == 'pod "ns/p": ResourceClaim not created yet'
    assert rc.claim_names(pod_with((TEMPLATE,))) == []


def test_a_template_claim_the_controller_made_none_for_on_purpose_needs_nothing() -> None:
    skipped = pod_with((TEMPLATE,), statuses=(("gpu", ""),), container_claims=(("gpu", ""),))
    assert rc.claim_name(skipped, TEMPLATE) is None
    assert rc.claim_names(skipped) == []
    assert rc.cdi_devices(skipped, skipped.spec.containers[0], {}) == ()


def test_a_checked_claim_names_its_drivers_once_each() -> None:
    results = [{"request": "a", "driver": "one.example.com"},
               {"request": "b", "driver": "one.example.com"},
               {"request": "c", "driver": "two.example.com",
                "skipNodeOperations": ["NodePrepareResources"]}]
    made = pod_with((TEMPLATE,), statuses=(("gpu", "p-gpu-x"),))
    found = rc.checked_claim(made, "p-gpu-x", True, claim_obj(results=results))
    assert found.ref == rc.ClaimRef("ns", "claim-uid", "p-gpu-x")
    assert found.prepare_drivers == ("one.example.com",)
    assert found.unprepare_drivers == ("one.example.com", "two.example.com")


@pytest.mark.parametrize(("obj", "words"), [
    (claim_obj(owner="someone-else"),
     "ResourceClaim ns/p-gpu-x was not created for Pod ns/p (Pod is not owner)"),
    (claim_obj(reserved="another-pod"),
     f"pod p ({UID}) is not allowed to use ResourceClaim p-gpu-x (claim-uid)"),
    (claim_obj(reserved=None),
     f"pod p ({UID}) is not allowed to use ResourceClaim p-gpu-x (claim-uid)"),
    (claim_obj(allocated=False), "ResourceClaim p-gpu-x: not allocated"),
])
def test_a_claim_the_pod_may_not_use_is_refused_in_the_kubelets_words(
        obj: dict[str, Any], words: str) -> None:
    made = pod_with((TEMPLATE,), statuses=(("gpu", "p-gpu-x"),))
    with pytest.raises(rc.ClaimError) as caught:
        rc.checked_claim(made, "p-gpu-x", True, obj)
    assert caught.value.message == words


def test_a_named_claim_is_not_checked_for_its_owner() -> None:
    found = rc.checked_claim(pod_with((NAMED,)), "shared", False, claim_obj(owner=None))
    assert found.prepare_drivers == ("d.example.com",)


def prepared(*devices: rc.PreparedDevice) -> dict[str, rc.ClaimInfo]:
    info = rc.ClaimInfo(rc.ClaimRef("ns", "u", "shared"), ("d",), ("d",), {UID}, True,
                        {"d": devices})
    return {"shared": info}


def test_a_container_gets_the_cdi_devices_of_the_claims_and_requests_it_names() -> None:
    a = rc.PreparedDevice(("a",), "pool", "d0", ("d/x=a",))
    b = rc.PreparedDevice(("b",), "pool", "d1", ("d/x=b",))
    every = rc.PreparedDevice((), "pool", "d2", ("d/x=all",))
    whole = pod_with((NAMED,), container_claims=(("gpu", ""),))
    assert rc.cdi_devices(whole, whole.spec.containers[0], prepared(a, b, every)) == (
        "d/x=a", "d/x=b", "d/x=all")
    one = pod_with((NAMED,), container_claims=(("gpu", "b"),))
    assert rc.cdi_devices(one, one.spec.containers[0], prepared(a, b, every)) == (
        "d/x=b", "d/x=all")
    none = pod_with((NAMED,))
    assert rc.cdi_devices(none, none.spec.containers[0], prepared(a, b)) == ()


def test_the_checkpoint_keeps_every_claim_and_refuses_a_changed_one() -> None:
    info = rc.ClaimInfo(rc.ClaimRef("ns", "u", "c"), ("d",), ("d", "e"), {"p1", "p2"}, True,
                        {"d": (rc.PreparedDevice(("r",), "pool", "dev", ("d/x=y",)),)})
    blob = rc.encode_checkpoint([info])
    # Read back as not prepared: the next sandbox has the drivers prepare it again.
    assert rc.decode_checkpoint(blob) == [dataclasses.replace(info, prepared=False)]
    with pytest.raises(rc.CheckpointError, match="checksum mismatch"):
        rc.decode_checkpoint(blob.replace(b'"p1"', b'"p3"'))
    with pytest.raises(rc.CheckpointError, match="cannot be read"):
        rc.decode_checkpoint(b"{}")


def api_pod(spec_extra: dict[str, Any], container_extra: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": UID},
            "spec": {"containers": [{"name": "c", "image": "busybox", **container_extra}],
                     **spec_extra}}


def test_claims_are_read_from_an_api_pod() -> None:
    obj = api_pod({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                  {"resources": {"claims": [{"name": "gpu", "request": "dev"}]}})
    pod = manifests.pod_from_object(obj, node_name="n", source="api", strict=False)
    assert pod.spec.resource_claims == (TEMPLATE,)
    assert pod.spec.containers[0].resources.claims == (("gpu", "dev"),)
    assert not pod.refused


def test_a_container_naming_an_unknown_claim_is_invalid() -> None:
    obj = api_pod({}, {"resources": {"claims": [{"name": "gpu"}]}})
    with pytest.raises(manifests.ManifestError) as caught:
        manifests.pod_from_object(obj, node_name="n", source="api", strict=False)
    assert caught.value.path == "spec.containers[0].resources.claims[0]"


def test_a_static_pod_cannot_use_claims() -> None:
    obj = api_pod({"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}, {})
    with pytest.raises(manifests.ManifestError) as caught:
        manifests.pod_from_object(obj, node_name="n")
    assert caught.value.path == "spec.resourceClaims"
    assert "a static pod cannot use ResourceClaims" in caught.value.message


def test_claims_in_use_count_prepared_claims_by_driver_and_in_all() -> None:
    def info(name: str, drivers: tuple[str, ...], prepared: bool) -> rc.ClaimInfo:
        return rc.ClaimInfo(rc.ClaimRef("ns", name, name), drivers, drivers, {UID}, prepared)
    assert rc.claims_in_use([]) == {rc.ANY_DRIVER: 0}
    found = [info("a", ("d1", "d2"), True), info("b", ("d1",), True), info("c", ("d3",), False)]
    assert rc.claims_in_use(found) == {rc.ANY_DRIVER: 2, "d1": 2, "d2": 1}
    assert 'dra_resource_claims_in_use{driver_name="<any>"} 2\n' in rc.metrics_text(found)
