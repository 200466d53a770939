"""Service environment variables (the kubelet's getServiceEnvVarMap and envvars.FromServices)
and how they join a container's own variables (makeEnvironmentVariables)."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import downward, envvars, pods, servicelinks
from nodelet.model.core import volumes as vol
from nodelet.model.parsing import manifests, serviceobjects

Svc = servicelinks.Service
Port = servicelinks.ServicePort

KUBERNETES = Svc("default", "kubernetes", "10.96.0.1", (Port(443, "https"),))
WEB = Svc("shop", "web-front", "10.96.5.5",
          (Port(80, "http"), Port(8443, "admin-port", "TCP"), Port(53, "dns", "UDP")))
HEADLESS = Svc("shop", "db", "None", (Port(5432),))
NO_IP = Svc("shop", "pending", "", (Port(1),))
OTHER_NS = Svc("other", "cache", "10.96.7.7", (Port(6379),))
DEFAULT_OTHER = Svc("default", "web", "10.96.8.8", (Port(8080),))
ALL = (KUBERNETES, WEB, HEADLESS, NO_IP, OTHER_NS, DEFAULT_OTHER)

KUBERNETES_VARS = {
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBERNETES_SERVICE_PORT_HTTPS": "443",
    "KUBERNETES_PORT": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
    "KUBERNETES_PORT_443_TCP_PORT": "443",
    "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
}


def test_variables_of_one_service_in_the_kubelets_order() -> None:
    assert servicelinks.service_variables(WEB) == [
        ("WEB_FRONT_SERVICE_HOST", "10.96.5.5"),
        ("WEB_FRONT_SERVICE_PORT", "80"),
        ("WEB_FRONT_SERVICE_PORT_HTTP", "80"),
        ("WEB_FRONT_SERVICE_PORT_ADMIN_PORT", "8443"),
        ("WEB_FRONT_SERVICE_PORT_DNS", "53"),
        ("WEB_FRONT_PORT", "tcp://10.96.5.5:80"),
        ("WEB_FRONT_PORT_80_TCP", "tcp://10.96.5.5:80"),
        ("WEB_FRONT_PORT_80_TCP_PROTO", "tcp"),
        ("WEB_FRONT_PORT_80_TCP_PORT", "80"),
        ("WEB_FRONT_PORT_80_TCP_ADDR", "10.96.5.5"),
        ("WEB_FRONT_PORT_8443_TCP", "tcp://10.96.5.5:8443"),
        ("WEB_FRONT_PORT_8443_TCP_PROTO", "tcp"),
        ("WEB_FRONT_PORT_8443_TCP_PORT", "8443"),
        ("WEB_FRONT_PORT_8443_TCP_ADDR", "10.96.5.5"),
        ("WEB_FRONT_PORT_53_UDP", "udp://10.96.5.5:53"),
        ("WEB_FRONT_PORT_53_UDP_PROTO", "udp"),
        ("WEB_FRONT_PORT_53_UDP_PORT", "53"),
        ("WEB_FRONT_PORT_53_UDP_ADDR", "10.96.5.5"),
    ]


def test_an_unnamed_first_port_and_ipv6_brackets() -> None:
    svc = Svc("shop", "v6", "fd00::10", (Port(80),))
    assert dict(servicelinks.service_variables(svc)) == {
        "V6_SERVICE_HOST": "fd00::10",
        "V6_SERVICE_PORT": "80",
        "V6_PORT": "tcp://[fd00::10]:80",
        "V6_PORT_80_TCP": "tcp://[fd00::10]:80",
        "V6_PORT_80_TCP_PROTO": "tcp",
        "V6_PORT_80_TCP_PORT": "80",
        "V6_PORT_80_TCP_ADDR": "fd00::10",
    }


@pytest.mark.parametrize(
    ("namespace", "enable", "names"),
    [
        ("shop", True, ["kubernetes", "web-front"]),  # headless and no-IP ones skipped
        ("shop", False, ["kubernetes"]),  # the master service always
        ("default", True, ["kubernetes", "web"]),
        ("default", False, ["kubernetes"]),
        ("other", True, ["cache", "kubernetes"]),
        ("empty", True, ["kubernetes"]),
    ],
)
def test_which_services(namespace: str, enable: bool, names: list[str]) -> None:
    linked = servicelinks.linked_services(ALL, namespace, enable_links=enable)
    assert [s.name for s in linked] == names


@pytest.mark.parametrize("order", [1, -1])
def test_a_kubernetes_service_of_the_pods_namespace_wins(order: int) -> None:
    own = Svc("shop", "kubernetes", "10.96.9.9", (Port(8443),))
    env = dict(servicelinks.service_env((KUBERNETES, own)[::order], "shop", enable_links=True))
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.9.9"
    env = dict(servicelinks.service_env((KUBERNETES, own)[::order], "shop", enable_links=False))
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


def test_no_master_service_no_variables() -> None:
    assert servicelinks.service_env((HEADLESS, OTHER_NS), "shop", enable_links=True) == ()


# -- with the container's own variables ----------------------------------------------------

POD = pods.Pod(uid=pods.PodUID("u-1"), name="p", namespace="shop",
               spec=pods.PodSpec(containers=(pods.Container(name="c", image="busybox"),)))
FACTS = downward.pod_facts(POD, downward.Node(name="n"), ("10.0.0.9",))


def resolve(*env: pods.EnvVar, services: tuple[Svc, ...] = ALL) -> list[tuple[str, str]]:
    container = pods.Container(name="c", image="busybox", env=env)
    service_env = servicelinks.service_env(services, "shop", enable_links=True)
    result = envvars.resolve(container, lookup=vol.no_objects, facts=FACTS,
                             service_env=service_env)
    return list(result.variables)


def test_own_variables_first_then_the_services() -> None:
    variables = resolve(pods.EnvVar("A", "1"), services=(KUBERNETES,))
    assert variables == [("A", "1"), *KUBERNETES_VARS.items()]


def test_own_variables_win_and_are_not_repeated() -> None:
    variables = resolve(pods.EnvVar("KUBERNETES_SERVICE_HOST", "override"), services=(KUBERNETES,))
    assert variables[0] == ("KUBERNETES_SERVICE_HOST", "override")
    assert [name for name, _ in variables].count("KUBERNETES_SERVICE_HOST") == 1
    assert len(variables) == len(KUBERNETES_VARS)


def test_expansion_sees_service_variables_after_own_ones() -> None:
    variables = dict(resolve(
        pods.EnvVar("URL", "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"),
        pods.EnvVar("WEB_FRONT_SERVICE_PORT", "9999"),
        pods.EnvVar("FRONT", "$(WEB_FRONT_SERVICE_HOST):$(WEB_FRONT_SERVICE_PORT)"),
        pods.EnvVar("LATER", "$(NOT_YET)"),
        pods.EnvVar("NOT_YET", "x"),
    ))
    assert variables["URL"] == "https://10.96.0.1:443"
    assert variables["FRONT"] == "10.96.5.5:9999"  # the container's own definition first
    assert variables["LATER"] == "$(NOT_YET)"


def test_no_services_no_variables() -> None:
    assert resolve(pods.EnvVar("A", "1"), services=()) == [("A", "1")]


# -- API objects ------------------------------------------------------------------------------


def service_obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web-front", "namespace": "shop"}, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (service_obj(clusterIP="10.96.5.5", ports=[
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
            {"name": "dns", "port": 53, "protocol": "UDP"}]),
         Svc("shop", "web-front", "10.96.5.5", (Port(80, "http"), Port(53, "dns", "UDP")))),
        (service_obj(clusterIP="None", ports=[{"port": 5432}]),
         Svc("shop", "web-front", "None", (Port(5432),))),
        (service_obj(type="ExternalName", externalName="example.com"),
         Svc("shop", "web-front", "", ())),
        (service_obj(clusterIP="10.96.5.5", ports=[{"port": "80"}, "x", {"port": 81}]),
         Svc("shop", "web-front", "10.96.5.5", (Port(81),))),
        ({"metadata": {"name": "x"}}, None),
        ({"metadata": "x", "spec": {}}, None),
    ],
)
def test_service_from_object(obj: dict[str, Any], expected: Svc | None) -> None:
    assert serviceobjects.service_from_object(obj) == expected


@pytest.mark.parametrize(("value", "expected"), [(None, True), (True, True), (False, False)])
def test_pod_spec_enable_service_links(value: bool | None, expected: bool) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if value is not None:
        spec["enableServiceLinks"] = value
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u-1"},
           "spec": spec}
    pod = manifests.load_object(obj, node_name="n", source="api", strict=False)
    assert isinstance(pod, pods.Pod) and pod.spec.enable_service_links is expected
