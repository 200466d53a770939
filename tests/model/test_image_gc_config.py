"""imageMaximumGCAge in a --config file and in /configz (pure): a Go duration read into
`gc.image_maximum_gc_age` (0, the kubelet's default, is off), reported back as one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodelet import settings
from nodelet.model.core import configz
from nodelet.model.parsing import kubeletconfig as kc

HEAD = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}


def parse(fields: dict[str, Any]) -> kc.Overrides:
    return kc.parse(json.dumps({**HEAD, **fields}), filename="kubelet.json")


@pytest.mark.parametrize(("value", "seconds"), [
    ("1m", 60.0), ("1m0s", 60.0), ("90s", 90.0), ("2h", 7200.0), ("0s", 0.0), ("0", 0.0),
])
def test_the_field_sets_the_max_age(value: str, seconds: float) -> None:
    found = parse({"imageMaximumGCAge": value})
    assert found.settings == {"gc.image_maximum_gc_age": seconds}
    assert "image_maximum_gc_age" not in found.flags  # the kubelet has no flag for it


@pytest.mark.parametrize(("value", "message"), [
    ("a minute", "imageMaximumGCAge: 'a minute' is not a duration"),
    (60, 'imageMaximumGCAge: must be a duration string (e.g. "1m30s"), not an integer'),
    ("-1m", "imageMaximumGCAge: '-1m' is not a duration"),
])
def test_bad_values_are_refused_by_name(value: Any, message: str) -> None:
    with pytest.raises(kc.KubeletConfigError) as caught:
        parse({"imageMaximumGCAge": value})
    assert str(caught.value).startswith("kubelet.json: "), caught.value
    assert message in str(caught.value)


@pytest.mark.parametrize(("max_age", "text"), [(0.0, "0s"), (60.0, "1m0s"), (3600.0, "1h0m0s")])
def test_configz_reports_it_and_reads_back(max_age: float, text: str) -> None:
    s = settings.Settings(data_dir=Path("/var/lib/x"), gc=settings.GCSettings(
        image_minimum_gc_age=1.0, image_maximum_gc_age=max_age))
    config = configz.configz(s, runtime_endpoint="unix:///run/c.sock")["kubeletconfig"]
    assert (config["imageMaximumGCAge"], config["imageMinimumGCAge"]) == (text, "1s")
    found = kc.parse(json.dumps({**HEAD, "imageMaximumGCAge": config["imageMaximumGCAge"]}),
                     filename="kubelet.json")
    assert found.settings["gc.image_maximum_gc_age"] == max_age
