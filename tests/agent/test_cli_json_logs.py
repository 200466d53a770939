"""`nodelet run --log-format json`: one JSON object per record, with the record's context."""

from __future__ import annotations

import io
import json
import logging
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nodelet import cli


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(cli.JsonFormatter())
    logger = logging.getLogger("nodelet.test.jsonlogs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_extra_fields_appear_in_the_json_line(
        json_log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = json_log
    logger.info("sandbox %s ready", "s1", extra={"pod_uid": "u-1", "sandbox_id": "s1",
                                                   "attempt": 2, "ips": ["10.0.0.1"]})
    [entry] = lines(out)
    assert entry["msg"] == "sandbox s1 ready"
    assert (entry["level"], entry["logger"]) == ("info", "nodelet.test.jsonlogs")
    assert entry["pod_uid"] == "u-1" and entry["sandbox_id"] == "s1"
    assert entry["attempt"] == 2 and entry["ips"] == ["10.0.0.1"]
    # Only the extras are added, none of the LogRecord's own attributes.
    assert set(entry) == {"ts", "level", "logger", "msg", "pod_uid", "sandbox_id", "attempt",
                          "ips"}


def test_extra_values_json_cannot_encode_are_written_as_text(
        json_log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = json_log
    when = datetime(2026, 1, 1, tzinfo=UTC)
    logger.warning("odd context", extra={"when": when, "path": Path("/var/lib/x"),
                                         "keys": {(1, 2): "tuple key"}, "ratio": math.nan,
                                         "level": "a clash"})
    [entry] = lines(out)
    assert entry["when"] == str(when) and entry["path"] == "/var/lib/x"
    assert entry["keys"] == repr({(1, 2): "tuple key"})
    assert entry["ratio"] == "nan"
    assert entry["level"] == "warning" and entry["extra_level"] == "a clash"


def test_exceptions_are_kept_with_the_extras(
        json_log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = json_log
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("sync failed", extra={"pod_uid": "u-2"})
    [entry] = lines(out)
    assert "RuntimeError: boom" in entry["exc"] and entry["pod_uid"] == "u-2"
