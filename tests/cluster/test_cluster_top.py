"""`kubectl top nodes|pods` of kubectl 1.37 through the real kube-apiserver's aggregation layer
to metrics-server (built from `sigs.k8s.io/metrics-server`, kube/versions.env), which scrapes
nodelet's `/metrics/resource` on the node server with its client certificate of the cluster CA.

metrics-server runs on the host (not as a pod: no kube-proxy or cluster DNS here), registered
as kubeadm's manifests register it: the `v1beta1.metrics.k8s.io` APIService of a Service in
kube-system, whose endpoint is the host's address (kube-apiserver runs with
`--enable-aggregator-routing`).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from support.controlplane import (
    AdminClient,
    Component,
    ControlPlane,
    free_ports,
    host_address,
    pod,
    pod_path,
    tool,
)
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "top-node"


def registration(address: str, port: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Service
        metadata: {{name: metrics-server, namespace: kube-system}}
        spec:
          ports: [{{name: https, port: 443, protocol: TCP, targetPort: {port}}}]
        ---
        apiVersion: v1
        kind: Endpoints
        metadata: {{name: metrics-server, namespace: kube-system}}
        subsets: [{{addresses: [{{ip: {address}}}], ports: [{{name: https, port: {port}}}]}}]
        ---
        apiVersion: discovery.k8s.io/v1
        kind: EndpointSlice
        metadata:
          name: metrics-server-host
          namespace: kube-system
          labels: {{kubernetes.io/service-name: metrics-server}}
        addressType: IPv4
        endpoints: [{{addresses: [{address}]}}]
        ports: [{{name: https, port: {port}, protocol: TCP}}]
        ---
        apiVersion: apiregistration.k8s.io/v1
        kind: APIService
        metadata: {{name: v1beta1.metrics.k8s.io}}
        spec:
          service: {{name: metrics-server, namespace: kube-system, port: 443}}
          group: metrics.k8s.io
          version: v1beta1
          insecureSkipTLSVerify: true
          groupPriorityMinimum: 100
          versionPriority: 100
        """)


@pytest.fixture(scope="module")
def metrics_server(control_plane: ControlPlane,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Component]:
    root = tmp_path_factory.mktemp("metrics-server")
    address, (port,) = host_address(), free_ports(1, host=host_address())
    admin = str(control_plane.admin_kubeconfig)
    server = Component("metrics-server", [
        str(tool("metrics-server")), f"--kubeconfig={admin}",
        f"--authentication-kubeconfig={admin}", f"--authorization-kubeconfig={admin}",
        f"--bind-address={address}", f"--secure-port={port}", f"--cert-dir={root}",
        # nodelet's serving certificate is self-signed (as a kubeadm kubelet's).
        "--kubelet-insecure-tls", "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port", "--metric-resolution=10s",
        "--kubelet-request-timeout=5s",  # below the resolution, as metrics-server requires
    ], root / "metrics-server.log")
    server.start()
    try:
        control_plane.kubectl_sync("apply", "-f", "-", stdin=registration(address, port))
        yield server
    finally:
        control_plane.kubectl_sync("delete", "apiservice", "v1beta1.metrics.k8s.io",
                                   "--ignore-not-found")
        control_plane.kubectl_sync("delete", "-n", "kube-system", "service,endpoints",
                                   "metrics-server", "--ignore-not-found")
        server.stop()


async def test_kubectl_top_nodes_and_pods(
        join: Any, admin: AdminClient, control_plane: ControlPlane, metrics_server: Component,
        namespace: str) -> None:
    async with join(NODE):
        # Half a core of busy loop, so the numbers are not all zero.
        await admin.create(pod_path(namespace), pod(
            "busy", node=NODE, command="while true; do :; done"))
        await eventually(lambda: admin.get(pod_path(namespace, "busy")), within=60,
                         until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
                         what="the busy pod running")

        async def top(*args: str) -> str:
            code, out, err = await control_plane.kubectl("top", *args, "--no-headers")
            return out.decode() if code == 0 else f"exit {code}: {err.decode()}"

        node_line = await eventually(
            lambda: top("nodes", NODE), within=90,
            until=lambda out: re.match(rf"{NODE}\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%", out),
            what="kubectl top nodes", seen=lambda out: out + metrics_server.tail(5))
        pod_line = await eventually(
            lambda: top("pods", "-n", namespace), within=90,
            until=lambda out: re.match(r"busy\s+\d+m\s+\d+Mi", out),
            what="kubectl top pods", seen=lambda out: out + metrics_server.tail(5))
        cpu = int(pod_line.split()[1].removesuffix("m"))
        assert cpu > 100, pod_line  # the busy loop shows
        assert node_line
        code, out, err = await control_plane.kubectl("top", "pods", "-n", namespace,
                                                     "--containers", "--no-headers")
        assert code == 0 and out.decode().split()[:2] == ["busy", "main"], err
