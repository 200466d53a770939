"""Pod generation tracking (GA in 1.35): status.observedGeneration and each kubelet-owned
condition's observedGeneration carry the metadata.generation the status was generated for."""

from __future__ import annotations

from typing import Any

from nodelet.model.core import pods, statuspatch, transitions
from nodelet.model.core import status as st


def pod(generation: Any) -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="ns", spec=spec,
                    raw={"metadata": {"name": "p", "generation": generation}}, source="api")


STATUS = st.PodStatus(phase="Running", conditions=(
    st.PodCondition(st.POD_SCHEDULED, "True"),
    st.PodCondition(st.READY, "True"),
    st.PodCondition("example.com/gate", "True", observed_generation=1),
))


def test_generation_is_read_from_the_object_s_metadata() -> None:
    assert pod(3).generation == 3
    for bad in (None, 0, -1, "3", True):
        assert pod(bad).generation == 0


def test_observed_stamps_the_status_and_the_kubelet_s_conditions_only() -> None:
    stamped = transitions.observed(STATUS, 4)
    assert stamped.observed_generation == 4
    assert [c.observed_generation for c in stamped.conditions] == [4, 4, 1]


def test_serialised_as_the_api_does_and_read_back() -> None:
    out = st.to_api(transitions.observed(STATUS, 2))
    assert out["observedGeneration"] == 2
    assert [c.get("observedGeneration") for c in out["conditions"]] == [2, 2, 1]
    back = st.condition_from_api(out["conditions"][0])
    assert back is not None and back.observed_generation == 2
    # Unknown (0): not written, as the API omits a zero.
    assert "observedGeneration" not in st.to_api(STATUS)
    assert "observedGeneration" not in st.condition_to_api(STATUS.conditions[0])


def test_a_new_generation_alone_is_a_new_status() -> None:
    one, two = transitions.observed(STATUS, 1), transitions.observed(STATUS, 2)
    assert not transitions.statuses_equal(one, two)
    assert transitions.statuses_equal(one, transitions.observed(STATUS, 1))


def test_the_patch_carries_a_new_generation_and_never_lowers_it() -> None:
    api = st.to_api(transitions.observed(STATUS, 1))
    patch = statuspatch.status_patch(api, st.to_api(transitions.observed(STATUS, 2)))
    assert patch is not None and patch["observedGeneration"] == 2
    assert {c["type"]: c.get("observedGeneration") for c in patch["conditions"]} == {
        st.POD_SCHEDULED: 2, st.READY: 2}
    newer = st.to_api(transitions.observed(STATUS, 5))
    lower = statuspatch.status_patch(newer, st.to_api(transitions.observed(STATUS, 4)))
    assert lower is None or "observedGeneration" not in lower


def test_a_patch_of_other_fields_at_the_same_generation_leaves_it_out() -> None:
    """Found on the real kube-apiserver: the API's status has observedGeneration 1, the new
    status the same and a new phase; the patch is the phase alone (it raised KeyError)."""
    api = st.to_api(transitions.observed(STATUS, 1))
    desired = dict(api, phase="Succeeded")
    patch = statuspatch.status_patch(api, desired)
    assert patch == {"phase": "Succeeded"}
