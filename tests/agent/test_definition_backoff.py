"""A container's restart back-off belongs to its definition: after a pod update changes the
image, the new definition starts afresh (the kubelet keys its back-off by the container's
hash; Kubernetes' [NodeConformance] "back-off timer reset on image update" measures it)."""

from __future__ import annotations

from dataclasses import replace

from nodelet.helpers import backoff
from nodelet.model.core import pods, specs
from nodelet.services.podwork import syncing


def _pod(image: str) -> pods.Pod:
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default",
                    spec=pods.PodSpec(containers=(pods.Container(name="c", image=image),)))


def test_a_changed_image_forgets_the_back_off() -> None:
    work = syncing.PodWork()
    old = _pod("busybox:1")
    stepped = backoff.Backoff(10.0, 300.0)
    stepped.next_delay()
    stepped.next_delay()
    work.restarts["c"] = syncing._Restart(
        stepped, definition=specs.definition_hash(old.spec.containers[0]))
    assert syncing._current_restarts(old, work)["c"].delay == 20.0
    new = replace(old, spec=replace(old.spec, containers=(
        pods.Container(name="c", image="nginx:1"),)))
    assert syncing._current_restarts(new, work) == {}
