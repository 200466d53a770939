"""Service environment variables on real containerd: nodelet joined to the test API server
lists and watches the Services (`spec.clusterIP!=None`) and a pod's containers see, via `env`,
the variables of its namespace's Services and of `default/kubernetes` as the kubelet sets them;
`enableServiceLinks: false` leaves only the `kubernetes` ones; headless Services none."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import Instance
from harness import Harness, all_ready, exec_in
from kubeapi import KubeApiServer, pod_object
from nodelet.model.core import servicelinks
from nodelet.model.core import status as st
from nodelet.services import cluster
from polling import eventually

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


def service(namespace: str, name: str, cluster_ip: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                     "ports": list(ports)}}


@asynccontextmanager
async def joined(runtime: Instance, tmp_path: Path, **cluster_settings: Any,
                 ) -> AsyncIterator[tuple[KubeApiServer, Harness]]:
    server = KubeApiServer(bookmark_interval=1.0, node=NODE)
    await server.start()
    harness = Harness(endpoint=runtime.containerd.endpoint, node_name=NODE)
    config = cluster.ClusterSettings(
        kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"), node_status_period=1.0,
        lease_renew_period=1.0, status_resync_period=2.0, **cluster_settings)
    harness.settings = dataclasses.replace(harness.settings, cluster=config)
    try:
        yield server, harness
    finally:
        for pod in server.list_objects("pods"):
            server.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], grace=0)
        await harness.stop()
        harness.cleanup()
        await server.stop()


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


async def test_service_variables_in_the_container(runtime: Instance, tmp_path: Path) -> None:
    async with joined(runtime, tmp_path) as (server, harness):
        server.create("services", service("default", "kubernetes", "10.96.0.1",
                                          {"name": "https", "port": 443, "protocol": "TCP"}))
        server.create("services", service("shop", "web-front", "10.96.5.5",
                                          {"name": "http", "port": 80, "protocol": "TCP"},
                                          {"name": "dns", "port": 53, "protocol": "UDP"}))
        server.create("services", service("shop", "db", "None", {"port": 5432}))
        server.create("services", service("other", "cache", "10.96.7.7", {"port": 6379}))
        await harness.start()
        # A Service created after the node joined reaches it by the watch.
        server.create("services", service("shop", "late", "10.96.6.6", {"port": 8080}))
        agent = harness.agent_or_fail()
        assert agent.cluster is not None and agent.cluster.services is not None
        watch = agent.cluster.services
        await eventually(lambda: [s for s in watch.current() or () if s.name == "late"],
                         within=10, what="the late Service seen by the watch")

        links = pod_object("links", node=NODE, namespace="shop")
        links["spec"]["containers"][0]["env"] = [
            {"name": "API",
             "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
            {"name": "WEB_FRONT_SERVICE_PORT", "value": "9999"}]
        server.create("pods", links)
        server.create("pods", pod_object("nolinks", node=NODE, namespace="shop",
                                         enableServiceLinks=False))

        env = await container_env(runtime, harness, "links")
        assert env["API"] == "https://10.96.0.1:443"  # $(VAR) sees the service variables
        expected = {**KUBERNETES_VARS, **WEB_FRONT_VARS, **LATE_VARS,
                    "WEB_FRONT_SERVICE_PORT": "9999"}  # the container's own value wins
        assert linked(env) == expected
        assert not [k for k in env if k.startswith(("DB_", "CACHE_"))]

        env = await container_env(runtime, harness, "nolinks")
        assert linked(env) == KUBERNETES_VARS



async def test_containers_wait_for_the_first_list_of_services(
        runtime: Instance, tmp_path: Path) -> None:
    """As the kubelet: no container of an API pod starts before the Services were listed once
    (its KUBERNETES_SERVICE_HOST would be missing); after waiting `request_timeout` for the list
    it is a CreateContainerConfigError with the kubelet's message, retried until listed."""
    async with joined(runtime, tmp_path, request_timeout=1.0) as (server, harness):
        server.create("services", service("default", "kubernetes", "10.96.0.1",
                                          {"name": "https", "port": 443, "protocol": "TCP"}))
        fault = server.inject(path=r"/api/v1/services$", verb="list", status=500, times=None)
        await harness.start()
        server.create("pods", pod_object("early", node=NODE))
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
        server.clear_faults()
        env = await container_env(runtime, harness, "early")
        assert linked(env) == KUBERNETES_VARS
