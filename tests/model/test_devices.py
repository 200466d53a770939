"""Device plugin rules (model.core.devices), table-tested: registration refusals, capacity and
allocatable, which devices a container gets, run options, and the checkpoint."""

from __future__ import annotations

import pytest

from nodelet.model.core import devices, pods, runtime
from nodelet.model.core.devices import Allocation, Device, DeviceSpec, Mount, Resource

R = "example.com/resource"


@pytest.mark.parametrize(("version", "name", "refusal"), [
    ("v1beta1", R, None),
    ("v1alpha", R, 'requested API version "v1alpha" is not supported by kubelet. Supported '
                   'version is ["v1beta1"]'),
    ("v1beta1", "gpu", 'the ResourceName "gpu" is invalid'),
    ("v1beta1", "kubernetes.io/gpu", 'the ResourceName "kubernetes.io/gpu" is invalid'),
    ("v1beta1", "requests.example.com/x", 'the ResourceName "requests.example.com/x" is '
                                          'invalid'),
    ("v1beta1", "Example.com/x", 'the ResourceName "Example.com/x" is invalid'),
    ("v1beta1", "test.device/device-plugin-failures-1234", None),
])
def test_registration(version: str, name: str, refusal: str | None) -> None:
    assert devices.validate_registration(version, name) == refusal


def _resource(healthy: int, unhealthy: int = 0, stopped_at: float | None = None) -> Resource:
    listed = [Device(f"h{i}") for i in range(healthy)]
    listed += [Device(f"u{i}", devices.UNHEALTHY) for i in range(unhealthy)]
    return Resource(R, {d.id: d for d in listed}, stopped_at=stopped_at)


@pytest.mark.parametrize(("resource", "now", "capacity", "allocatable", "removed"), [
    (_resource(4), 0.0, 4, 4, False),
    (_resource(3, 1), 0.0, 4, 3, False),
    (_resource(0, 1), 0.0, 1, 0, False),
    (Resource(R), 0.0, 0, 0, False),  # registered, ListAndWatch failed at once
    (_resource(2, stopped_at=10.0), 300.0, 2, 0, False),  # within the grace period
    (_resource(2, stopped_at=10.0), 311.0, None, None, True),  # past it
])
def test_node_resources(resource: Resource, now: float, capacity: int | None,
                        allocatable: int | None, removed: bool) -> None:
    found = devices.node_resources([resource], now)
    assert found.capacity.get(R) == capacity
    assert found.allocatable.get(R) == allocatable
    assert (R in found.removed) == removed


@pytest.mark.parametrize(("resource", "needed", "in_use", "preferred", "chosen"), [
    (_resource(2), 1, frozenset(), (), ("h0",)),
    (_resource(2), 2, frozenset(), (), ("h0", "h1")),
    (_resource(3), 1, frozenset({"h0"}), (), ("h1",)),
    (_resource(3), 2, frozenset(), ("h2", "x", "h2"), ("h2", "h0")),
    (_resource(2, 2), 2, frozenset(), (), ("h0", "h1")),
])
def test_pick(resource: Resource, needed: int, in_use: frozenset[str],
              preferred: tuple[str, ...], chosen: tuple[str, ...]) -> None:
    assert devices.pick(resource, needed, in_use=in_use, preferred=preferred) == chosen


def test_an_init_containers_devices_are_reused_first() -> None:
    """The kubelet's devicesToReuse: a container gets the devices its pod's finished init
    containers held before any other free one, so the pod holds no more than it needs."""
    assert devices.pick(_resource(3), 1, in_use=frozenset(), reusable=frozenset({"h2"}),
                        preferred=("h0",)) == ("h2",)
    assert devices.pick(_resource(3), 2, in_use=frozenset(), reusable=frozenset({"h2"}),
                        preferred=("h1",)) == ("h2", "h1")


@pytest.mark.parametrize(("resource", "needed", "in_use", "words"), [
    (_resource(2), 1, frozenset({"h0", "h1"}),
     "requested number of devices unavailable for example.com/resource. Requested: 1, "
     "Available: 0"),
    (_resource(0, 2), 1, frozenset(),
     "no healthy devices present; cannot allocate unhealthy devices example.com/resource"),
    (_resource(2, stopped_at=1.0), 1, frozenset(),
     "no healthy devices present; cannot allocate unhealthy devices example.com/resource"),
])
def test_pick_refusals(resource: Resource, needed: int, in_use: frozenset[str],
                       words: str) -> None:
    with pytest.raises(devices.DeviceError) as refused:
        devices.pick(resource, needed, in_use=in_use)
    assert refused.value.message == words


@pytest.mark.parametrize(("resource", "held", "words"), [
    (_resource(2), frozenset({"h1"}), None),
    (_resource(2, 1), frozenset({"u0"}),
     "previously allocated devices are no longer healthy; cannot allocate unhealthy devices "
     "example.com/resource"),
    (_resource(0, 2), frozenset({"u0"}),
     "no healthy devices present; cannot allocate unhealthy devices example.com/resource"),
    (_resource(2, stopped_at=1.0), frozenset({"h0"}),
     "no healthy devices present; cannot allocate unhealthy devices example.com/resource"),
])
def test_devices_held_before_a_reboot_are_kept_only_while_healthy(
        resource: Resource, held: frozenset[str], words: str | None) -> None:
    if words is None:
        devices.check_held(resource, held)
        return
    with pytest.raises(devices.DeviceError) as refused:
        devices.check_held(resource, held)
    assert refused.value.message == words


def test_run_options_first_value_wins_and_merge_into_the_config() -> None:
    a = Allocation(envs={"A": "1", "B": "2"}, mounts=(Mount("/dev-a", "/host/a"),),
                   devices=(DeviceSpec("/dev/x", "/dev/x", "rw"),),
                   annotations={"k": "a"}, cdi_devices=("vendor.com/gpu=0",))
    b = Allocation(envs={"B": "3"}, mounts=(Mount("/dev-a", "/host/other", True),),
                   annotations={"k": "b"}, cdi_devices=("vendor.com/gpu=0", "vendor.com/gpu=1"))
    options = devices.run_options([a, b])
    assert options.envs == (("A", "1"), ("B", "2"))
    assert options.mounts == (Mount("/dev-a", "/host/a"),)
    assert options.annotations == (("k", "a"),)
    assert options.cdi_devices == ("vendor.com/gpu=0", "vendor.com/gpu=1")
    config = runtime.ContainerConfig(
        name="main", attempt=0, image="busybox", log_path="main/0.log",
        envs=(("A", "own"),), mounts=(runtime.Mount("/data", "/host/data"),),
        annotations={"k": "kubelet's"})
    merged = devices.with_devices(config, options)
    assert merged.envs == (("B", "2"), ("A", "own"))
    assert [m.container_path for m in merged.mounts] == ["/dev-a", "/data"]
    assert merged.devices == (runtime.Device("/dev/x", "/dev/x", "rw"),)
    assert merged.annotations == {"k": "kubelet's"}
    assert merged.cdi_devices == options.cdi_devices


def test_checkpoint_round_trip_and_corruption() -> None:
    assignment = devices.Assignment(
        "uid-1", "main", R, {-1: ("Dev-1", "Dev-2")},
        Allocation(envs={"X": "1"}, mounts=(Mount("/tmp/Dev-1", "/tmp/Dev-1"),),
                   devices=(DeviceSpec("/dev/a", "/dev/a", "mrw"),), cdi_devices=("v.com/c=1",)))
    blob = devices.encode_checkpoint([assignment], {R: {"Dev-2", "Dev-1"}})
    assert devices.decode_checkpoint(blob) == ([assignment], {R: ["Dev-1", "Dev-2"]})
    with pytest.raises(devices.CheckpointError, match="checksum mismatch"):
        devices.decode_checkpoint(blob.replace(b"Dev-2", b"Dev-3"))
    with pytest.raises(devices.CheckpointError, match="cannot be read"):
        devices.decode_checkpoint(b"{not json")


def _pod_of(*containers: tuple[str, str]) -> pods.Pod:
    """(name, kind): "init", "sidecar" or "app"."""
    def make(name: str, kind: str) -> pods.Container:
        return pods.Container(name=name, image="i",
                              restart_policy="Always" if kind == "sidecar" else "")
    return pods.Pod(uid=pods.PodUID("u"), name="p", namespace="ns", spec=pods.PodSpec(
        init_containers=tuple(make(n, k) for n, k in containers if k != "app"),
        containers=tuple(make(n, k) for n, k in containers if k == "app")))


RESTARTABLE = _pod_of(("init-1", "init"), ("sidecar", "sidecar"), ("app-1", "app"),
                      ("app-2", "app"))


@pytest.mark.parametrize(("held", "container", "reused"), [
    ({"init-1": {"d1"}}, "sidecar", {"d1"}),  # a sidecar takes what an init container held
    ({"init-1": {"d1"}, "sidecar": {"d1"}}, "app-1", set()),  # ... and keeps it
    ({"init-1": {"d1", "d2"}, "sidecar": {"d1"}}, "app-1", {"d2"}),
    ({"init-1": {"d1"}}, "app-1", {"d1"}),  # a sidecar without devices leaves it
    ({"init-1": {"d1"}, "app-1": {"d1"}}, "app-2", set()),  # one app container takes it
    ({}, "init-1", set()),
])
def test_devices_to_reuse_follow_the_containers_order(
        held: dict[str, set[str]], container: str, reused: set[str]) -> None:
    """The node suite's "Can schedule a pod with a restartable init container": the init
    container and the sidecar share a device, the app container gets another."""
    assert devices.reusable(RESTARTABLE, container,
                            lambda name: frozenset(held.get(name, ()))) == reused
