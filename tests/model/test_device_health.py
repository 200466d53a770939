"""Device health in the pod status (ResourceHealthStatus; pure), table-tested: which devices of a
new ListAndWatch list wake their pods, a container's allocatedResourcesStatus as the kubelet's
UpdateAllocatedResourcesStatus makes it, its API form, and where the status generation puts it
(app containers only, made anew each time, not at all with the gate off)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from nodelet import settings
from nodelet.model.core import devices, generation, pods
from nodelet.model.core import status as st
from nodelet.model.core.devices import Device

R = "example.com/resource"
G = "example.com/gpu"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
UNHEALTHY = devices.UNHEALTHY


def listing(*pairs: tuple[str, str]) -> dict[str, Device]:
    return {i: Device(i, h) for i, h in pairs}


@pytest.mark.parametrize(("old", "new", "changed"), [
    ({}, [Device("a"), Device("b", UNHEALTHY)], {"a", "b"}),  # the first list: all new
    (listing(("a", "Healthy")), [Device("a")], set()),
    (listing(("a", "Healthy")), [Device("a", UNHEALTHY)], {"a"}),
    (listing(("a", UNHEALTHY)), [Device("a")], {"a"}),
    # a device back after a while may still be held; one that vanished wakes nobody
    (listing(("a", "Healthy"), ("b", "Healthy")), [Device("b"), Device("c")], {"c"}),
    (listing(("a", "Healthy")), [], set()),
    # a health the API does not know is still a change
    (listing(("a", "Healthy")), [Device("a", "Broken")], {"a"}),
])
def test_health_changes(old: dict[str, Device], new: list[Device], changed: set[str]) -> None:
    assert devices.health_changes(old, new) == changed


def health(name: str, *pairs: tuple[str, st.ResourceHealthStatus]) -> st.ResourceStatus:
    return st.ResourceStatus(name, tuple(st.ResourceHealth(i, h) for i, h in pairs))


@pytest.mark.parametrize(("held", "listed", "expected"), [
    ({R: {"d1"}}, {R: listing(("d1", "Healthy"))}, (health(R, ("d1", "Healthy")),)),
    ({R: {"d1"}}, {R: listing(("d1", UNHEALTHY))}, (health(R, ("d1", "Unhealthy")),)),
    # any health but Healthy is Unhealthy (the kubelet never says Unknown for a device
    # plugin's device)
    ({R: {"d1"}}, {R: listing(("d1", "Broken"))}, (health(R, ("d1", "Unhealthy")),)),
    # not listed since the agent started (a restart, the plugin not back yet): Healthy
    ({R: {"d1"}}, {}, (health(R, ("d1", "Healthy")),)),
    ({R: {"d2"}}, {R: listing(("d1", UNHEALTHY))}, (health(R, ("d2", "Healthy")),)),
    # sorted by resource name, then device ID
    ({R: {"d2", "d1"}, G: {"g0"}},
     {R: listing(("d1", "Healthy"), ("d2", UNHEALTHY)), G: listing(("g0", UNHEALTHY))},
     (health(G, ("g0", "Unhealthy")), health(R, ("d1", "Healthy"), ("d2", "Unhealthy")))),
    ({R: set()}, {}, ()),  # no device, no entry
    ({}, {R: listing(("d1", "Healthy"))}, ()),
])
def test_resource_statuses(held: dict[str, set[str]], listed: dict[str, dict[str, Device]],
                           expected: tuple[st.ResourceStatus, ...]) -> None:
    assert devices.resource_statuses(held, listed) == expected


def test_the_api_form_is_the_kubelets() -> None:
    status = st.PodStatus(container_statuses=(st.ContainerStatus(
        name="c", image="i", state=st.ContainerStateWaiting("ContainerCreating"),
        allocated_resources_status=(health(R, ("d1", "Healthy"), ("d2", "Unhealthy")),)),))
    out = st.to_api(status)["containerStatuses"][0]
    assert out["allocatedResourcesStatus"] == [
        {"name": R, "resources": [{"resourceID": "d1", "health": "Healthy"},
                                  {"resourceID": "d2", "health": "Unhealthy"}]}]
    plain = replace(status.container_statuses[0], allocated_resources_status=())
    assert "allocatedResourcesStatus" not in st.to_api(
        st.PodStatus(container_statuses=(plain,)))["containerStatuses"][0]


POD = pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default", spec=pods.PodSpec(
    init_containers=(pods.Container(name="init", image="i"),),
    containers=(pods.Container(name="app", image="i"), pods.Container(name="other", image="i"))))
SICK = health(R, ("d1", "Unhealthy"))


def generate(device_health: dict[str, tuple[st.ResourceStatus, ...]] | None, *,
             old: st.PodStatus | None = None, gate: bool = True) -> st.PodStatus:
    return generation.generate_status(
        POD, sandboxes=(), containers=(), old=old, last_sandbox_error=None, waiting={},
        host_ip="10.0.0.1", now=NOW, device_health=device_health,
        gates=settings.FeatureGates(resource_health_status=gate))


def shown(status: st.PodStatus) -> dict[str, tuple[st.ResourceStatus, ...]]:
    return {s.name: s.allocated_resources_status
            for s in (*status.init_container_statuses, *status.container_statuses)}


@pytest.mark.parametrize(("given", "gate", "expected"), [
    # app containers only, as the kubelet's UpdateAllocatedResourcesStatus walks
    # status.ContainerStatuses: an init container's devices are not shown
    ({"app": (SICK,), "init": (SICK,)}, True, {"init": (), "app": (SICK,), "other": ()}),
    ({"app": (SICK,)}, False, {"init": (), "app": (), "other": ()}),
    (None, True, {"init": (), "app": (), "other": ()}),
    ({"gone": (SICK,)}, True, {"init": (), "app": (), "other": ()}),
])
def test_generation_shows_device_health_of_app_containers_under_the_gate(
        given: dict[str, tuple[st.ResourceStatus, ...]] | None, gate: bool,
        expected: dict[str, tuple[st.ResourceStatus, ...]]) -> None:
    assert shown(generate(given, gate=gate)) == expected


def test_generation_keeps_nothing_of_the_old_statuses_health() -> None:
    """Made anew each time, as the kubelet's convertToAPIContainerStatuses: devices no longer
    held (or the gate turned off) leave no stale entry behind."""
    before = generate({"app": (SICK,)})
    assert shown(before)["app"] == (SICK,)
    assert shown(generate({}, old=before))["app"] == ()
    assert shown(generate({"app": (SICK,)}, old=before, gate=False))["app"] == ()
    healed = health(R, ("d1", "Healthy"))
    assert shown(generate({"app": (healed,)}, old=before))["app"] == (healed,)
