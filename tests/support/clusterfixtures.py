"""Fixtures of the cluster tests: the real control plane and nodelet nodes joined to it
(a plugin of tests/conftest.py).

- `control_plane` (session): ONE real control plane (tests/support/controlplane.py) for the session,
  started when a test first asks for it; its logs are kept (and their path printed) when a test
  of the session failed.
- `admin` (session): its admin API client, for tests to poll state with (users use kubectl).
- `namespace` (function): a fresh namespace with its default ServiceAccount and CA ConfigMap
  (made by the real controllers), deleted at teardown.
- `join(node, ...)`: an async context manager that starts a nodelet agent on the session's
  containerd and joins it by TLS bootstrap with the plane's bootstrap token, as a kubeadm node
  joins; at its end every pod bound to the node is deleted and gone, the agent is stopped and
  the Node object is deleted; and the audit log must show no request of the node refused
  (zero 403s, zero 4xx but 404 and 409: `controlplane.refused`). `kube_proxy=True`: kube-proxy
  of the same build runs next to nodelet for the node's lifetime (`ControlPlane.kube_proxy`),
  so that pods reach Service IPs (`kubernetes.default`); one per host at a time.
- `proxied` (function): a fault proxy (tests/support/faultproxy.py) in front of the plane,
  passing on the credentials of the node `make_rig` makes; `make_rig(**settings)`: `async
  with` it for a `Rig`, cluster mode alone (no containers) joined through that proxy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from conftest import Instance
from nodelet.adapters import checkpoint
from nodelet.model.core import nodes
from nodelet.model.core import runtime as rt
from nodelet.services.cluster import cluster, nodestatus
from nodelet.services.status import recording, statuses
from support.controlplane import (
    AdminClient,
    ControlPlane,
    Pair,
    host_address,
    node_path,
    pod_path,
    refused,
)
from support.faultproxy import FaultProxy
from support.harness import Harness
from support.polling import eventually


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    plane = ControlPlane.start()
    yield plane
    failed = request.session.testsfailed > 0
    plane.stop(keep=failed)
    if failed:
        print(f"\ncontrol plane logs kept in {plane.logs}")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def admin(control_plane: ControlPlane) -> AsyncIterator[AdminClient]:
    async with control_plane.admin() as client:
        yield client


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(admin: AdminClient) -> AsyncIterator[str]:
    name = f"t-{secrets.token_hex(4)}"
    await admin.create("/api/v1/namespaces", {"metadata": {"name": name}})
    await eventually(lambda: admin.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
                     within=30, what=f"the default ServiceAccount of {name}")
    await eventually(lambda: admin.get(f"/api/v1/namespaces/{name}/configmaps/kube-root-ca.crt"),
                     within=30, what=f"kube-root-ca.crt in {name}")
    yield name
    await admin.delete(f"/api/v1/namespaces/{name}")


def cluster_settings(root: Path, plane: ControlPlane, **overrides: Any) -> cluster.ClusterSettings:
    """Cluster mode as a kubeadm node has it (bootstrap kubeconfig, --kubeconfig not there
    yet, a cert dir), with the fast periods tests use."""
    defaults: dict[str, Any] = {
        "kubeconfig": root / "kubelet.conf",
        "bootstrap_kubeconfig": plane.bootstrap_kubeconfig(root / "bootstrap-kubelet.conf"),
        "cert_dir": root / "pki",
        "node_status_period": 1.0, "lease_renew_period": 1.0, "status_resync_period": 2.0,
    }
    return cluster.ClusterSettings(**(defaults | overrides))


async def bound_pods(admin: AdminClient, node: str) -> list[dict[str, Any]]:
    return await admin.items("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")


@asynccontextmanager
async def joined(plane: ControlPlane, admin: AdminClient, runtime: Instance, *, node: str,
                 start: bool = True, audit_clean: bool = True,
                 pod_cidrs: tuple[str, ...] = (),
                 harness_args: dict[str, Any] | None = None,
                 expected_refusals: tuple[str, ...] = (),
                 kube_proxy: bool = False,
                 **cluster_overrides: Any) -> AsyncIterator[Harness]:
    """A nodelet node `node` joined to `plane` (see the module doc); `start=False` leaves
    `harness.start()` to the test (which may also stop it: then only the Node is removed);
    `harness_args`: more Harness settings (eviction...). At the end, unless
    `audit_clean=False`, no request of the node may have been refused
    (`controlplane.refused`) but those naming one of `expected_refusals` (a test's own
    request with the node's credentials)."""
    # `runtime`: the session's containerd, or a private one (a second node); `pod_cidrs`:
    # what the Node claims (that runtime's CNI range).
    harness = Harness(endpoint=runtime.containerd.endpoint, node_name=node,
                      runtime_settings={"pod_cidrs": pod_cidrs} if pod_cidrs else None,
                      **(harness_args or {}))
    harness.settings = dataclasses.replace(
        harness.settings,
        cluster=cluster_settings(harness.root, plane, **cluster_overrides),
        # On every address: kube-apiserver dials the Node's InternalIP for logs, exec...;
        # its client certificate is of the cluster CA.
        node_server=dataclasses.replace(harness.settings.node_server, address="0.0.0.0",
                                        client_ca_file=plane.ca.cert))
    first_event = len(plane.audit_events())  # this node's requests are judged from here
    proxy = plane.kube_proxy(node, pod_cidrs or runtime.settings.runtime.pod_cidrs) \
        if kube_proxy else None
    try:
        if proxy is not None and not start:
            await asyncio.to_thread(proxy.start)
        if start:
            try:
                await harness.start()
            except BaseException:
                harness.agent = None  # a failed start stopped what it had started
                raise
            if proxy is not None:  # as a DaemonSet's pod: once the Node is registered
                await asyncio.to_thread(proxy.start)
        yield harness
    finally:
        try:
            if harness.agent is not None:
                await _drain(admin, harness, node)
            if audit_clean:
                # Every request of the node was one kube-apiserver allows and takes.
                bad = [line for line in refused(plane.audit_events()[first_event:], node)
                       if not any(expected in line for expected in expected_refusals)]
                assert not bad, "\n".join(bad)
        finally:
            if proxy is not None:
                await asyncio.to_thread(proxy.stop)
            harness.cleanup()
            await admin.delete(node_path(node))


async def _drain(admin: AdminClient, harness: Harness, node: str) -> None:
    """Cordon the node (a controller's replacement pods stay off it), delete its pods, wait
    until nodelet has terminated and deleted them all, stop the agent. If they do not go,
    the agent is stopped anyway (its pods' containers are left to the runtime's reset)."""
    await admin.patch(node_path(node), {"spec": {"unschedulable": True}})
    for pod in await bound_pods(admin, node):
        meta = pod["metadata"]
        await admin.delete(pod_path(meta["namespace"], meta["name"]))
    try:
        await eventually(lambda: bound_pods(admin, node), within=90,
                         until=lambda left: not left,
                         seen=lambda left: repr([p["metadata"]["name"] for p in left]),
                         what=f"every pod of {node} deleted")
    except BaseException:
        await harness.stop(terminate_pods=False)
        raise
    await harness.stop()


@pytest.fixture
def join(control_plane: ControlPlane, admin: AdminClient, runtime: Instance) -> Any:
    """`async with join("node-a") as harness:` — see `joined`; `on=instance`: on a
    containerd of its own (`instances`), for a second node."""
    def factory(node: str, *, on: Instance | None = None, **kwargs: Any) -> Any:
        return joined(control_plane, admin, on or runtime, node=node, **kwargs)
    return factory


def node_ready(node: dict[str, Any] | None) -> str:
    conds = (node or {}).get("status", {}).get("conditions") or []
    return next((c["status"] for c in conds if c["type"] == "Ready"), "")


# -- cluster mode alone, through the fault proxy ---------------------------------------------


class Runtime:
    """The CRI Version/Status the Node reports (no containers run in these tests); set
    `network_ready` False for a runtime whose CNI is not ready."""

    network_ready = True

    async def version(self) -> rt.VersionInfo:
        return rt.VersionInfo("containerd", "1.6.20", "v1")

    async def status(self) -> rt.RuntimeStatus:
        ready = self.network_ready
        return rt.RuntimeStatus((
            rt.RuntimeCondition("RuntimeReady", True),
            rt.RuntimeCondition("NetworkReady", ready, "" if ready else "NetworkPluginNotReady",
                                "" if ready else "cni config uninitialized")))


class Rig:
    """`ClusterMode` joined through a fault proxy, with a real status manager and recorder;
    the desired pods it announces in `announced`."""

    def __init__(self, proxy: FaultProxy, root: Path, node: str, *,
                 node_spec: nodes.NodeSpec | None = None,
                 images: Callable[[], Awaitable[Sequence[rt.ImageInfo]]] | None = None,
                 **overrides: Any) -> None:
        self.node = node
        self.checkpoint = checkpoint.Checkpoint.open(root / "checkpoint.db")
        clock = lambda: datetime.now(UTC)  # noqa: E731
        self.statuses = statuses.StatusManager(checkpoint=self.checkpoint, clock=clock)
        self.recorder = recording.EventRecorder(checkpoint=self.checkpoint, node_name=node,
                                                clock=clock, max_events=1000)
        self.announced: list[dict[Any, Any]] = []
        self.objects_changed: list[set[Any]] = []  # each on_objects call's keys
        self.runtime = Runtime()
        defaults: dict[str, Any] = dict(
            kubeconfig=root / "kubelet.conf", cert_dir=root / "pki",
            bootstrap_kubeconfig=proxy.bootstrap_kubeconfig(root / "bootstrap.conf"),
            status_resync_period=0.5, status_retry=0.05, status_retry_max=0.5,
            node_status_period=0.5, lease_renew_period=0.5,
            watch_backoff=0.05, watch_backoff_max=0.2, watch_inactivity=5.0, watch_timeout=30,
            delete_retry=0.05, delete_retry_max=0.2, start_timeout=20.0)
        self.mode = cluster.ClusterMode(
            settings=cluster.ClusterSettings(**(defaults | overrides)),
            node=cluster.NodeIdentity(name=node, host_ip=host_address(),
                                      pod_cidrs=("10.77.0.0/24",), spec=node_spec),
            statuses=self.statuses, recorder=self.recorder,
            views=nodestatus.NodeViews(runtime=self.runtime, images=images),
            listeners=cluster.Listeners(on_pods=self.announced.append,
                                        on_objects=self.objects_changed.append),
            clock=clock)

    @property
    def desired(self) -> dict[Any, Any]:
        return self.announced[-1] if self.announced else {}

    def names(self) -> set[str]:
        return {p.name for p in self.desired.values()}


@pytest_asyncio.fixture(loop_scope="session")
async def proxied(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[FaultProxy]:
    pki = tmp_path / "node" / "pki"
    current = pki / "kubelet-client-current.pem"
    (tmp_path / "node").mkdir()
    async with FaultProxy(control_plane, tmp_path,
                          credentials=lambda: Pair(current, current)) as proxy:
        yield proxy


@pytest_asyncio.fixture(loop_scope="session")
async def make_rig(proxied: FaultProxy, admin: AdminClient, control_plane: ControlPlane,
                   tmp_path: Path, namespace: str) -> AsyncIterator[Any]:
    """`async with make_rig(**settings) as rig:`; pods of its node are force-deleted (no
    kubelet runs them) and the Node is deleted at the end. What reached kube-apiserver (the
    proxy's faults never do) must show no refused request of the node in the audit log."""
    node = f"faults-{secrets.token_hex(3)}"
    first_event = len(control_plane.audit_events())
    rigs: list[Rig] = []

    class Started:
        node_name = node  # for what a test builds before its rig (a NodeSpec)

        def __init__(self, **overrides: Any) -> None:
            self.rig = Rig(proxied, tmp_path / "node", node, **overrides)
            rigs.append(self.rig)

        async def __aenter__(self) -> Rig:
            await self.rig.mode.start()
            return self.rig

        async def __aexit__(self, *_: object) -> None:
            await self.rig.mode.stop()
            self.rig.checkpoint.close()

    try:
        yield Started
    finally:
        for found in await admin.items("/api/v1/pods", fieldSelector=f"spec.nodeName={node}"):
            meta = found["metadata"]
            await admin.delete(pod_path(meta["namespace"], meta["name"]), gracePeriodSeconds=0)
        await admin.delete(node_path(node))
    bad = refused(control_plane.audit_events()[first_event:], node)
    assert not bad, bad
