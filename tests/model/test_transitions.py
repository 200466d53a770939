"""merge_status / statuses_equal: transition times move only when a condition's status flips."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import status as st
from nodelet.model.core import transitions

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
NOW = T0 + timedelta(seconds=30)


def cond(
    type_: str,
    status: st.ConditionStatus,
    reason: str = "",
    message: str = "",
    at: datetime | None = None,
) -> st.PodCondition:
    return st.PodCondition(type_, status, reason, message, last_transition_time=at)


def ltt(status: st.PodStatus, type_: str) -> datetime | None:
    found = status.condition(type_)
    assert found is not None
    return found.last_transition_time


PRTSC = st.POD_READY_TO_START_CONTAINERS


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(None, cond(PRTSC, "False", "PodSandboxNotReady"), NOW, id="no-old-status"),
        pytest.param(cond(PRTSC, "False", at=T0), cond(PRTSC, "False"), T0, id="same-status-kept"),
        pytest.param(cond(PRTSC, "False", at=T0), cond(PRTSC, "True"), NOW, id="flip-bumps"),
        pytest.param(
            cond(PRTSC, "False", "PodSandboxNotReady", "no pod sandbox exists", at=T0),
            cond(PRTSC, "False", "PodSandboxNotReady", "pod sandbox has no IP address"),
            T0,
            id="message-change-kept",
        ),
        pytest.param(
            cond(st.READY, "False", "ContainersNotReady", at=T0),
            cond(st.READY, "False", "ReadinessGatesNotReady"),
            T0,
            id="reason-change-kept",
        ),
        pytest.param(
            cond(st.READY, "True", at=None), cond(st.READY, "True"), NOW, id="old-no-time"
        ),
        pytest.param(
            cond(st.INITIALIZED, "True", at=T0),
            cond(st.INITIALIZED, "True", at=NOW + timedelta(hours=1)),
            T0,
            id="owned-new-time-ignored",
        ),
        pytest.param(
            cond(st.POD_HAS_NETWORK, "True", at=T0),
            cond(st.POD_HAS_NETWORK, "True"),
            T0,
            id="old-name",
        ),
        pytest.param(
            cond("example.com/gate", "True", at=T0),
            cond("example.com/gate", "False", at=T0 + timedelta(seconds=5)),
            T0 + timedelta(seconds=5),
            id="foreign-own-time-kept",
        ),
        pytest.param(
            cond("example.com/gate", "True", at=T0),
            cond("example.com/gate", "True"),
            T0,
            id="foreign-no-time",
        ),
        pytest.param(
            cond(st.READY, "True", at=T0), cond(PRTSC, "True"), NOW, id="other-type-in-old"
        ),
    ],
)
def test_last_transition_time(
    old: st.PodCondition | None, new: st.PodCondition, expected: datetime
) -> None:
    old_status = None if old is None else st.PodStatus(conditions=(old,))
    merged = transitions.merge_status(old_status, st.PodStatus(conditions=(new,)), now=NOW)
    assert ltt(merged, new.type) == expected


def test_merge_keeps_reason_and_message_of_new() -> None:
    old = st.PodStatus(conditions=(cond(PRTSC, "False", "PodSandboxNotReady", "a", at=T0),))
    new = st.PodStatus(conditions=(cond(PRTSC, "False", "PodSandboxNotReady", "b"),))
    merged = transitions.merge_status(old, new, now=NOW)
    assert merged.conditions == (cond(PRTSC, "False", "PodSandboxNotReady", "b", at=T0),)


@pytest.mark.parametrize(
    ("old_start", "new_start", "expected"),
    [
        (None, None, None),
        (None, NOW, NOW),
        (T0, NOW, T0),
        (T0, None, T0),
    ],
)
def test_start_time_preserved_once_set(
    old_start: datetime | None, new_start: datetime | None, expected: datetime | None
) -> None:
    merged = transitions.merge_status(
        st.PodStatus(start_time=old_start), st.PodStatus(start_time=new_start), now=NOW
    )
    assert merged.start_time == expected


BASE = st.PodStatus(
    phase="Running",
    conditions=(
        cond(PRTSC, "True", at=T0),
        cond(st.READY, "False", "ContainersNotReady", "x", at=T0),
    ),
    pod_ips=("10.0.0.2",),
)


@pytest.mark.parametrize(
    ("other", "equal"),
    [
        pytest.param(BASE, True, id="same"),
        pytest.param(
            dataclasses.replace(BASE, conditions=tuple(reversed(BASE.conditions))), True, id="order"
        ),
        pytest.param(
            dataclasses.replace(
                BASE,
                conditions=(
                    cond(PRTSC, "True", at=NOW),
                    st.PodCondition(st.READY, "False", "ContainersNotReady", "x", NOW, NOW),
                ),
            ),
            True,
            id="times-ignored",
        ),
        pytest.param(
            dataclasses.replace(BASE, conditions=(cond(PRTSC, "True"), cond(st.READY, "True"))),
            False,
            id="status",
        ),
        pytest.param(
            dataclasses.replace(
                BASE,
                conditions=(
                    cond(PRTSC, "True"),
                    cond(st.READY, "False", "ContainersNotReady", "y"),
                ),
            ),
            False,
            id="message",
        ),
        pytest.param(
            dataclasses.replace(
                BASE, conditions=(cond(PRTSC, "True"), cond(st.READY, "False", "Other", "x"))
            ),
            False,
            id="reason",
        ),
        pytest.param(
            dataclasses.replace(BASE, conditions=BASE.conditions[:1]), False, id="missing"
        ),
        pytest.param(dataclasses.replace(BASE, phase="Succeeded"), False, id="phase"),
        pytest.param(dataclasses.replace(BASE, pod_ips=("10.0.0.3",)), False, id="ip"),
        pytest.param(dataclasses.replace(BASE, start_time=T0), False, id="start-time"),
        pytest.param(
            dataclasses.replace(
                BASE,
                container_statuses=(
                    st.ContainerStatus(
                        "app", "busybox", st.ContainerStateWaiting("ContainerCreating")
                    ),
                ),
            ),
            False,
            id="containers",
        ),
    ],
)
def test_statuses_equal(other: st.PodStatus, equal: bool) -> None:
    assert transitions.statuses_equal(BASE, other) is equal
    assert transitions.statuses_equal(other, BASE) is equal


def test_transitions_equal_sees_what_the_checkpoint_keeps() -> None:
    """Condition statuses and times, start time, and the pod's phase/reason/message — not a
    condition's reason or message."""
    moved = dataclasses.replace(BASE, conditions=(cond(PRTSC, "True", at=NOW), BASE.conditions[1]))
    reworded = dataclasses.replace(BASE, conditions=tuple(
        dataclasses.replace(c, reason="Other", message="other") for c in BASE.conditions))
    assert transitions.transitions_equal(BASE, reworded)
    assert not transitions.transitions_equal(BASE, moved)
    assert not transitions.transitions_equal(BASE, dataclasses.replace(BASE, message="other"))
    failed = dataclasses.replace(BASE, phase="Failed", reason="DeadlineExceeded")
    assert not transitions.transitions_equal(BASE, failed)
    assert not transitions.transitions_equal(None, BASE)
    assert transitions.transitions_equal(None, None)


@pytest.mark.parametrize(
    ("conditions", "ready_to_start", "ready"),
    [
        ((), None, None),
        ((cond(PRTSC, "True", at=T0), cond(st.READY, "True", at=NOW)), T0, NOW),
        ((cond(st.POD_HAS_NETWORK, "True", at=T0),), T0, None),
        ((cond(PRTSC, "False", at=T0), cond(st.READY, "False", at=T0)), None, None),
    ],
)
def test_ready_since(
    conditions: tuple[st.PodCondition, ...], ready_to_start: datetime | None, ready: datetime | None
) -> None:
    status = st.PodStatus(conditions=conditions)
    assert transitions.ready_to_start_since(status) == ready_to_start
    assert transitions.ready_since(status) == ready
