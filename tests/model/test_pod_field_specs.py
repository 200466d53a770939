"""Parsing and API validation of hostAliases, mountPropagation and stdin/stdinOnce/tty, and
what they become in the CRI configs."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import pods, runtime, specs
from nodelet.model.core import volumes as vol
from nodelet.model.parsing import manifests

NODE = "node-1"


def pod_obj(container_extra: dict[str, Any] | None = None, **spec_extra: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "busybox", **(container_extra or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [container], **spec_extra},
    }


def with_mount(propagation: Any, *, privileged: bool | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "volumeMounts": [{"name": "v", "mountPath": "/v", "mountPropagation": propagation}],
    }
    if privileged is not None:
        extra["securityContext"] = {"privileged": privileged}
    return pod_obj(extra, volumes=[{"name": "v", "hostPath": {"path": "/tmp"}}])


def parse(obj: dict[str, Any]) -> pods.Pod:
    return manifests.pod_from_object(obj, node_name=NODE)


# -- hostAliases -----------------------------------------------------------------------------


def test_host_aliases_are_parsed_in_order() -> None:
    pod = parse(pod_obj(hostAliases=[
        {"ip": "127.0.0.1", "hostnames": ["foo.local", "bar.local"]},
        {"ip": "2001:db8::1", "hostnames": ["v6.example"]},
        {"ip": "10.0.0.1"},
    ]))
    assert pod.spec.host_aliases == (
        pods.HostAlias("127.0.0.1", ("foo.local", "bar.local")),
        pods.HostAlias("2001:db8::1", ("v6.example",)),
        pods.HostAlias("10.0.0.1", ()),
    )


def test_legacy_ipv4_with_leading_zeros_is_accepted_as_written() -> None:
    # The API server validates hostAliases[].ip as a legacy field (Go's ParseIPSloppy).
    pod = parse(pod_obj(hostAliases=[{"ip": "010.001.002.003", "hostnames": ["a"]}]))
    assert pod.spec.host_aliases[0].ip == "010.001.002.003"


HOST_ALIAS_ERRORS = [
    ({"hostnames": ["a"]}, manifests.InvalidValueError, "spec.hostAliases[0].ip",
     "must be a valid IP address"),
    ({"ip": "10.0.0.256", "hostnames": ["a"]}, manifests.InvalidValueError,
     "spec.hostAliases[0].ip", "must be a valid IP address"),
    ({"ip": "fe80::1%eth0", "hostnames": ["a"]}, manifests.InvalidValueError,
     "spec.hostAliases[0].ip", "must be a valid IP address"),
    ({"ip": "my-host", "hostnames": ["a"]}, manifests.InvalidValueError,
     "spec.hostAliases[0].ip", '"my-host" must be a valid IP address'),
    ({"ip": "10.0.0.1", "hostnames": ["ok", "Not_Valid"]}, manifests.InvalidValueError,
     "spec.hostAliases[0].hostnames[1]", "not a valid DNS-1123 subdomain"),
    ({"ip": "10.0.0.1", "hostnames": "foo"}, manifests.FieldTypeError,
     "spec.hostAliases[0].hostnames", "a list of strings"),
    ({"ip": "10.0.0.1", "hostname": ["a"]}, manifests.UnknownFieldError,
     "spec.hostAliases[0].hostname", 'did you mean "spec.hostAliases[0].hostnames"'),
]


@pytest.mark.parametrize(("alias", "error", "path", "fragment"), HOST_ALIAS_ERRORS,
                         ids=[str(i) for i in range(len(HOST_ALIAS_ERRORS))])
def test_invalid_host_aliases(alias: dict[str, Any], error: type[manifests.ManifestError],
                              path: str, fragment: str) -> None:
    with pytest.raises(error) as info:
        parse(pod_obj(hostAliases=[alias]))
    assert (info.value.path, fragment in info.value.message) == (path, True), info.value


# -- mountPropagation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "privileged", "expected"),
    [
        (None, None, runtime.MountPropagation.PRIVATE),
        ("None", None, runtime.MountPropagation.PRIVATE),
        ("HostToContainer", None, runtime.MountPropagation.HOST_TO_CONTAINER),
        ("HostToContainer", False, runtime.MountPropagation.HOST_TO_CONTAINER),
        ("Bidirectional", True, runtime.MountPropagation.BIDIRECTIONAL),
    ],
)
def test_valid_propagation_maps_to_cri(value: str | None, privileged: bool | None,
                                       expected: runtime.MountPropagation) -> None:
    mount = parse(with_mount(value, privileged=privileged)).spec.containers[0].volume_mounts[0]
    assert mount.mount_propagation == (value or "")
    assert vol.mount_propagation(mount.mount_propagation) is expected


@pytest.mark.parametrize(
    ("value", "privileged", "fragment"),
    [
        ("Bidirectional", None, "Bidirectional mount propagation is available only to "
                                "privileged containers"),
        ("Bidirectional", False, "set securityContext.privileged: true or use HostToContainer"),
        ("Shared", None, 'unsupported value "Shared": must be one of Bidirectional, '
                         "HostToContainer, None"),
        ("", None, 'unsupported value ""'),
    ],
    ids=["bidirectional-unprivileged", "bidirectional-privileged-false", "unknown", "empty"],
)
def test_invalid_propagation(value: str, privileged: bool | None, fragment: str) -> None:
    with pytest.raises(manifests.InvalidValueError) as info:
        parse(with_mount(value, privileged=privileged))
    assert info.value.path == "spec.containers[0].volumeMounts[0].mountPropagation"
    assert fragment in info.value.message


def test_bidirectional_in_an_unprivileged_init_container_is_refused() -> None:
    obj = with_mount("HostToContainer")
    obj["spec"]["initContainers"] = [{
        "name": "init", "image": "busybox",
        "volumeMounts": [{"name": "v", "mountPath": "/v", "mountPropagation": "Bidirectional"}],
    }]
    with pytest.raises(manifests.InvalidValueError) as info:
        parse(obj)
    assert info.value.path == "spec.initContainers[0].volumeMounts[0].mountPropagation"


# -- stdin, stdinOnce, tty -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, (False, False, False)),
        ({"stdin": True}, (True, False, False)),
        ({"stdin": True, "stdinOnce": True, "tty": True}, (True, True, True)),
        ({"tty": True}, (False, False, True)),
    ],
)
def test_stdin_and_tty_reach_the_container_config(given: dict[str, Any],
                                                  expected: tuple[bool, bool, bool]) -> None:
    pod = parse(pod_obj(given))
    container = pod.spec.containers[0]
    assert (container.stdin, container.stdin_once, container.tty) == expected
    config = specs.container_config(pod, container, attempt=0, kind="regular")
    assert (config.stdin, config.stdin_once, config.tty) == expected


def test_stdin_must_be_a_boolean() -> None:
    with pytest.raises(manifests.FieldTypeError) as info:
        parse(pod_obj({"tty": "yes"}))
    assert info.value.path == "spec.containers[0].tty"
