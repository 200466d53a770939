"""Lenient reading of v1 JSON written by others: objects, lists of objects, times, event → pod."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nodelet.model.core import apijson
from nodelet.model.core import status as st


@pytest.mark.parametrize(
    ("value", "expected"),
    [({"a": 1}, {"a": 1}), ({}, {}), (None, {}), ([{"a": 1}], {}), ("x", {}), (3, {})],
)
def test_obj(value: Any, expected: dict[str, Any]) -> None:
    assert apijson.obj(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [([{"a": 1}, {"b": 2}], [{"a": 1}, {"b": 2}]), ([{"a": 1}, "x", None, 3, []], [{"a": 1}]),
     ([], []), (None, []), ({"a": 1}, []), ("abc", [])],
)
def test_objs(value: Any, expected: list[dict[str, Any]]) -> None:
    assert apijson.objs(value) == expected


POD = {"metadata": {"name": "web", "namespace": "default", "uid": "u1"}}


@pytest.mark.parametrize(
    ("pod", "involved", "about"),
    [
        pytest.param(POD, {"name": "web", "namespace": "default", "uid": "u1"}, True, id="same"),
        pytest.param(POD, {"name": "web", "namespace": "default"}, True, id="event without uid"),
        pytest.param({"metadata": {"name": "web", "namespace": "default"}},
                     {"name": "web", "namespace": "default", "uid": "u1"}, True,
                     id="pod without uid"),
        pytest.param(POD, {"name": "web", "namespace": "default", "uid": "u0"}, False,
                     id="an earlier pod of that name"),
        pytest.param(POD, {"name": "web", "namespace": "other", "uid": "u1"}, False,
                     id="other namespace"),
        pytest.param(POD, {"name": "db", "namespace": "default"}, False, id="other name"),
        pytest.param(POD, None, False, id="no involvedObject"),
        pytest.param({}, {}, True, id="both empty: nothing tells them apart"),
    ],
)
def test_about_pod(pod: dict[str, Any], involved: Any, about: bool) -> None:
    assert apijson.about_pod(pod, {"involvedObject": involved}) is about


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01T12:00:00.250000Z", datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)),
        ("2024-05-01T14:00:00+02:00", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("", None), (None, None), ("yesterday", None), (1714564800, None), ({}, None),
    ],
)
def test_parse_time_lenient(value: Any, expected: datetime | None) -> None:
    assert st.parse_time_lenient(value) == expected
