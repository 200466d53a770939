"""Which ConfigMaps and Secrets cluster mode watches: reference counts by pod, immutability."""

from __future__ import annotations

import pytest

from nodelet.model.core import configs, objectrefs
from nodelet.model.core.pods import PodUID

A = ("ConfigMap", "default", "a")
B = ("Secret", "default", "b")
C = ("ConfigMap", "other", "a")


def test_reference_counts_are_per_pod() -> None:
    readers = {PodUID("p1"): {A, B}, PodUID("p2"): {A}, PodUID("p3"): set()}
    assert objectrefs.referenced(readers) == {A: 2, B: 1}


@pytest.mark.parametrize(("held", "readers", "start", "stop"), [
    # the first pod reading an object starts its watch
    (set(), {"p1": {A}}, {A}, set()),
    # a second reader of the same object starts nothing
    ({A}, {"p1": {A}, "p2": {A}}, set(), set()),
    # one of two readers gone: the watch stays
    ({A}, {"p2": {A}}, set(), set()),
    # the last reader gone: the watch goes
    ({A, B}, {"p1": {B}}, set(), {A}),
    # same name in another namespace is another object
    ({A}, {"p1": {A, C}}, {C}, set()),
    # no pods: nothing held
    ({A, B, C}, {}, set(), {A, B, C}),
])
def test_watch_changes_follow_the_readers(held, readers, start, stop) -> None:
    changes = objectrefs.watch_changes(held, {PodUID(k): v for k, v in readers.items()})
    assert (set(changes.start), set(changes.stop)) == (start, stop)


def test_only_configmaps_and_secrets_are_watched() -> None:
    changes = objectrefs.watch_changes(set(), {PodUID("p"): {("Pod", "default", "x"), A}})
    assert changes.start == {A}


@pytest.mark.parametrize(("value", "keeps"), [
    (None, True),  # absent: it may be created, watch on
    (configs.ConfigMap("a", "default"), True),
    (configs.ConfigMap("a", "default", immutable=True), False),
    (configs.Secret("b", "default", immutable=True), False),
])
def test_immutable_objects_are_not_watched_once_seen(value, keeps) -> None:
    assert objectrefs.keeps_watching(value) is keeps


def test_field_selector_names_the_one_object() -> None:
    assert objectrefs.field_selector(A) == "metadata.name=a"
