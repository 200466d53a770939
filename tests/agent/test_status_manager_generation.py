"""The status manager stamps each status with the pod's generation (pod generation tracking)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from nodelet.adapters import checkpoint as cp
from nodelet.model.core import pods
from nodelet.model.core import status as st
from nodelet.services.status import statuses

T0 = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)


def api_pod(generation: int) -> pods.Pod:
    spec = pods.PodSpec(containers=(pods.Container(name="app", image="busybox"),))
    return pods.Pod(uid=pods.PodUID("uid-1"), name="web", namespace="default", spec=spec,
                    raw={"metadata": {"name": "web", "generation": generation}}, source="api")


def test_a_spec_update_bumps_observed_generation_but_no_transition_time(db: Path) -> None:
    checkpoint = cp.Checkpoint.open(db)
    try:
        manager = statuses.StatusManager(checkpoint=checkpoint, clock=lambda: T0)
        manager.restore()
        generated = st.PodStatus(phase="Running", conditions=(
            st.PodCondition(st.POD_SCHEDULED, "True"), st.PodCondition(st.READY, "True")))
        assert manager.set_status(api_pod(1), generated)
        first = manager.get(pods.PodUID("uid-1"))
        assert first is not None and first.observed_generation == 1
        assert {c.observed_generation for c in first.conditions} == {1}
        # The same generated status for generation 2 (e.g. activeDeadlineSeconds changed):
        # stored again, with the new generation everywhere and the old transition times.
        manager_clock_later = dataclasses.replace(generated)
        assert manager.set_status(api_pod(2), manager_clock_later)
        second = manager.get(pods.PodUID("uid-1"))
        assert second is not None and second.observed_generation == 2
        assert {c.observed_generation for c in second.conditions} == {2}
        assert [c.last_transition_time for c in second.conditions] == [
            c.last_transition_time for c in first.conditions]
        assert not manager.set_status(api_pod(2), generated)  # nothing new
    finally:
        checkpoint.close()
