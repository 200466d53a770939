"""Service environment variables on real containerd and the real kube-apiserver: nodelet lists
and watches the Services (`fieldSelector=spec.clusterIP!=None`, as the kubelet since
kubernetes#122394 — the request a hand-written strict server once refused) under the Node
authorizer, and a pod's containers see, via `env`, the variables of its namespace's Services
and of `default/kubernetes` as the kubelet sets them; `enableServiceLinks: false` leaves only
the `kubernetes` ones; headless Services none. Until the first list answers (a fault proxy
fails it), containers wait with the kubelet's CreateContainerConfigError."""

from __future__ import annotations

import secrets
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from nodelet.model.core import servicelinks
from nodelet.model.core import status as st
from support.controlplane import SERVICE_IP, AdminClient, ControlPlane, pod, pod_path
from support.faultproxy import FaultProxy
from support.harness import Harness, all_ready, exec_in
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "links-node"

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
WEB_FRONT_VARS = {
    "WEB_FRONT_SERVICE_HOST": "10.96.5.5",
    "WEB_FRONT_SERVICE_PORT": "80",
    "WEB_FRONT_SERVICE_PORT_HTTP": "80",
    "WEB_FRONT_SERVICE_PORT_DNS": "53",
    "WEB_FRONT_PORT": "tcp://10.96.5.5:80",
    "WEB_FRONT_PORT_80_TCP": "tcp://10.96.5.5:80",
    "WEB_FRONT_PORT_80_TCP_PROTO": "tcp",
    "WEB_FRONT_PORT_80_TCP_PORT": "80",
    "WEB_FRONT_PORT_80_TCP_ADDR": "10.96.5.5",
    "WEB_FRONT_PORT_53_UDP": "udp://10.96.5.5:53",
    "WEB_FRONT_PORT_53_UDP_PROTO": "udp",
    "WEB_FRONT_PORT_53_UDP_PORT": "53",
    "WEB_FRONT_PORT_53_UDP_ADDR": "10.96.5.5",
}
LATE_VARS = {
    "LATE_SERVICE_HOST": "10.96.6.6",
    "LATE_SERVICE_PORT": "8080",
    "LATE_PORT": "tcp://10.96.6.6:8080",
    "LATE_PORT_8080_TCP": "tcp://10.96.6.6:8080",
    "LATE_PORT_8080_TCP_PROTO": "tcp",
    "LATE_PORT_8080_TCP_PORT": "8080",
    "LATE_PORT_8080_TCP_ADDR": "10.96.6.6",
}


def service(name: str, cluster_ip: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "ports": list(ports)}}


def services_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services"


def pod_status(harness: Harness, name: str) -> st.PodStatus | None:
    found = [s for p, s in harness.agent_or_fail().pods() if p.name == name]
    return found[0] if found and found[0] is not None and all_ready(found[0]) else None


async def container_env(runtime: Instance, harness: Harness, name: str) -> dict[str, str]:
    status = await eventually(lambda: pod_status(harness, name), within=60,
                              what=f"pod {name} running")
    result = await exec_in(runtime.client, status, "env")
    assert result.exit_code == 0, result
    return dict(line.split("=", 1) for line in result.stdout.decode().splitlines() if "=" in line)


def linked(env: dict[str, str]) -> dict[str, str]:
    """The service variables among a container's environment."""
    return {k: v for k, v in env.items() if "_SERVICE_" in k or "_PORT" in k}


async def test_service_variables_in_the_container(
        join: Any, runtime: Instance, admin: AdminClient, control_plane: ControlPlane,
        namespace: str) -> None:
    other = f"other-{secrets.token_hex(3)}"
    await admin.create("/api/v1/namespaces", {"metadata": {"name": other}})
    try:
        await admin.create(services_path(namespace), service(
            "web-front", "10.96.5.5", {"name": "http", "port": 80, "protocol": "TCP"},
            {"name": "dns", "port": 53, "protocol": "UDP"}))
        await admin.create(services_path(namespace), service("db", "None", {"port": 5432}))
        await admin.create(services_path(other), service("cache", "10.96.7.7", {"port": 6379}))
        async with join(NODE) as harness:
            # A Service created after the node joined reaches it by the watch.
            await admin.create(services_path(namespace), service("late", "10.96.6.6",
                                                                 {"port": 8080}))
            agent = harness.agent_or_fail()
            assert agent.cluster is not None and agent.cluster.services is not None
            watch = agent.cluster.services
            await eventually(lambda: [s for s in watch.current() or () if s.name == "late"],
                             within=10, what="the late Service seen by the watch")

            links = pod("links", node=NODE)
            links["spec"]["containers"][0]["env"] = [
                {"name": "API",
                 "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
                {"name": "WEB_FRONT_SERVICE_PORT", "value": "9999"}]
            await admin.create(pod_path(namespace), links)
            await admin.create(pod_path(namespace), pod("nolinks", node=NODE,
                                                        enableServiceLinks=False))

            env = await container_env(runtime, harness, "links")
            assert env["API"] == f"https://{SERVICE_IP}:443"  # $(VAR) sees them
            expected = {**KUBERNETES_VARS, **WEB_FRONT_VARS, **LATE_VARS,
                        "WEB_FRONT_SERVICE_PORT": "9999"}  # the container's own value wins
            assert linked(env) == expected
            assert not [k for k in env if k.startswith(("DB_", "CACHE_"))]

            env = await container_env(runtime, harness, "nolinks")
            assert linked(env) == KUBERNETES_VARS
            # The list and watch of Services, as the node, were allowed.
            listed = [e for e in control_plane.audit_events()
                      if e.get("user", {}).get("username") == f"system:node:{NODE}"
                      and e.get("objectRef", {}).get("resource") == "services"
                      and e.get("stage") == "ResponseComplete"]
            assert listed and all(e["responseStatus"]["code"] == 200 for e in listed), listed
            uris = [urllib.parse.unquote(e["requestURI"]) for e in listed]
            assert any("fieldSelector=spec.clusterIP!=None" in u for u in uris), uris
    finally:
        await admin.delete(f"/api/v1/namespaces/{other}")


async def test_containers_wait_for_the_first_list_of_services(
        join: Any, runtime: Instance, admin: AdminClient, proxied: FaultProxy,
        tmp_path: Path, namespace: str) -> None:
    """As the kubelet: no container of an API pod starts before the Services were listed once
    (its KUBERNETES_SERVICE_HOST would be missing); after waiting `request_timeout` for the list
    it is a CreateContainerConfigError with the kubelet's message, retried until listed."""
    fault = proxied.inject(path=r"^/api/v1/services$", verb="list", status=500, times=10**6)
    async with join(NODE, request_timeout=1.0, cert_dir=tmp_path / "node" / "pki",
                    bootstrap_kubeconfig=proxied.bootstrap_kubeconfig(
                        tmp_path / "node" / "bootstrap.conf")) as harness:
        await admin.create(pod_path(namespace), pod("early", node=NODE))
        agent = harness.agent_or_fail()

        def config_error() -> st.ContainerStateWaiting | None:
            found = [s for p, s in agent.pods() if p.name == "early"]
            state = found[0].container_statuses[0].state if found and found[0] and \
                found[0].container_statuses else None
            return state if isinstance(state, st.ContainerStateWaiting) and \
                state.reason == "CreateContainerConfigError" else None

        waiting = await eventually(config_error, within=30, what="CreateContainerConfigError")
        assert waiting is not None and waiting.message == servicelinks.NOT_SYNCED_MESSAGE
        assert fault.hits >= 1
        fault.times = fault.hits  # the API answers from now on
        env = await container_env(runtime, harness, "early")
        assert linked(env) == KUBERNETES_VARS
