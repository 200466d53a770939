"""Running a real nodelet agent in the test's event loop, against the shared containerd.

`Harness` owns a manifests dir and a data dir, starts `app.Agent` with fast sync settings, and
offers readers of the agent's status cache and events (`wait_status` polls one pod's status
with `polling.eventually`). At the end it removes every manifest, waits until the agent has
terminated every pod, and stops the agent, so no sandbox outlives the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from nodelet import app, settings
from nodelet.adapters import cgroups, mounts
from nodelet.adapters.cri import client as cri_client
from nodelet.model.core import events, pods, runtime, status
from support.polling import eventually

DEFAULT_WITHIN = 30.0


def pod_manifest(name: str, *, command: str = "sleep 1000000", extra_spec: str = "",
                 grace: int = 1, restart_policy: str = "Always", init: str = "",
                 container_extra: str = "") -> str:
    """A busybox pod manifest; `extra_spec` is YAML appended under `spec:`, `container_extra`
    under the container `main` (both written without indentation)."""
    init_block = ""
    if init:
        init_block = textwrap.dedent(f"""\
          initContainers:
            - name: init
              image: localhost/nodelet/busybox:latest
              imagePullPolicy: IfNotPresent
              command: ["sh", "-c", {init!r}]
        """)
    body = textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: {name}
          labels: {{test: nodelet}}
        spec:
          terminationGracePeriodSeconds: {grace}
          restartPolicy: {restart_policy}
        """)
    body += textwrap.indent(init_block, "  ") if init_block else ""
    body += textwrap.indent(textwrap.dedent(f"""\
        containers:
          - name: main
            image: localhost/nodelet/busybox:latest
            imagePullPolicy: IfNotPresent
            command: ["sh", "-c", {command!r}]
        """), "  ")
    if container_extra:
        body += textwrap.indent(textwrap.dedent(container_extra), "      ")
    if extra_spec:
        body += textwrap.indent(textwrap.dedent(extra_spec), "  ")
    return body


class Harness:
    def __init__(self, *, endpoint: str, node_name: str = "testnode",
                 gates: settings.FeatureGates | None = None,
                 security: settings.SecuritySettings | None = None,
                 logs: settings.LogSettings | None = None,
                 node: settings.NodeSettings | None = None,
                 gc: settings.GCSettings | None = None,
                 eviction: settings.EvictionSettings | None = None,
                 node_server: settings.NodeServerSettings | None = None,
                 manifest_settings: dict[str, object] | None = None,
                 sync_settings: dict[str, object] | None = None,
                 runtime_settings: dict[str, object] | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="nla-", dir="/tmp"))
        self.manifests = self.root / "manifests"
        self.manifests.mkdir()
        base = settings.Settings(data_dir=self.root / "data", manifests_dir=self.manifests,
                                 node_name=node_name)
        self.settings = replace(
            base,
            gates=gates or base.gates,
            security=security or base.security,
            # The links to container logs in the test's own directory, not the host's
            # /var/log/containers that parallel tests (and a kubelet) would share.
            logs=replace(logs or base.logs, links_dir=self.root / "log-links"),
            eviction=eviction or base.eviction,
            gc=gc or base.gc,
            # Its own cgroup root: agents of parallel tests never rewrite each other's
            # kubepods and QoS levels (removed again in `cleanup`).
            node=replace(node or base.node, cgroup_root=f"/nodelet-test-{self.root.name}"),
            # RuntimeSettings fields beside the endpoint (e.g. the pod CIDRs the node claims).
            runtime=replace(base.runtime, endpoint=endpoint,
                            **(runtime_settings or {})),  # type: ignore[arg-type]
            # Fast retries and back-offs so tests that wait for one stay short (the behaviour
            # is the same), but the resync at its default: it is a safety net only, and no
            # test may pass because a resync came early (docs/timing.md).
            sync=replace(base.sync, retry_period=1.0,
                         resync_period=settings.SyncSettings().resync_period,
                         restart_backoff=1.0, restart_backoff_max=8.0,
                         image_backoff=1.0, image_backoff_max=8.0),
            # Any free port; no healthz server (its 10248 is for one agent per machine).
            server=replace(base.server, port=0, healthz_port=0),
            # The node server on any free port (parallel agents, no clash on 10250), on
            # loopback unless the test chose an address.
            node_server=replace(node_server or base.node_server, address=_server_address(
                node_server, base.node_server), port=0),
            manifest_poll_period=0.2,
        )
        # Root settings named `manifest_*` (watching, resync and poll periods).
        self.settings = replace(self.settings, **(manifest_settings or {}))  # type: ignore[arg-type]
        # SyncSettings fields over the fast ones above (relist periods, runtime events...).
        self.settings = replace(self.settings, sync=replace(
            self.settings.sync, **(sync_settings or {})))  # type: ignore[arg-type]
        self.agent: app.Agent | None = None

    async def start(self) -> app.Agent:
        self.agent = app.Agent(self.settings)
        await self.agent.start()
        return self.agent

    async def stop(self, *, terminate_pods: bool = True) -> None:
        if self.agent is None:
            return
        if terminate_pods:
            for path in self.manifests.iterdir():
                path.unlink()
            await eventually(lambda: not self.agent_or_fail().pods(), within=60,
                             what="all pods terminated")
            left = self.pod_mounts()
            assert not left, f"mounts left after every pod was terminated: {left}"
        await self.agent.stop()
        self.agent = None

    def pod_mounts(self) -> list[Path]:
        """Mounts under the data dir besides the agent's own shared bind of its pods dir (and
        a filesystem a test mounted as the data dir itself)."""
        own = {(self.settings.data_dir / "pods").resolve(), self.settings.data_dir.resolve()}
        return [p for p in mounts.mounts_under(self.settings.data_dir) if p not in own]

    def cleanup(self) -> None:
        cgroup_root = self.settings.node.cgroup_root
        cgroups.remove_qos_cgroups(cgroup_root)
        cgroups.remove_pod_cgroup(cgroup_root)
        # The shared bind of the pods dir outlives the agent, as it does for `nodelet run`
        # (`nodelet reset` removes it); never delete through a mount point.
        for point in mounts.mounts_under(self.root):
            mounts.detach(point)
        shutil.rmtree(self.root, ignore_errors=True)

    def agent_or_fail(self) -> app.Agent:
        assert self.agent is not None, "agent not started"
        return self.agent

    # -- manifests ------------------------------------------------------------------------------

    def write(self, filename: str, text: str) -> Path:
        """Write atomically, so the poller never reads half a file."""
        path = self.manifests / filename
        tmp = self.manifests / f".{filename}.tmp"
        tmp.write_text(text)
        tmp.rename(path)
        return path

    def remove(self, filename: str) -> None:
        (self.manifests / filename).unlink()

    # -- reading the agent ------------------------------------------------------------------------

    def find(self, name: str) -> tuple[pods.Pod, status.PodStatus | None] | None:
        full = f"{name}-{self.settings.node_name}"
        for pod, pod_status in self.agent_or_fail().pods():
            if pod.name == full:
                return pod, pod_status
        return None

    def status_of(self, name: str) -> status.PodStatus | None:
        found = self.find(name)
        return found[1] if found else None

    def events_of(self, name: str) -> list[events.Event]:
        return self.agent_or_fail().events(pod=f"{name}-{self.settings.node_name}")

    async def wait_status(self, name: str, check: Callable[[status.PodStatus], bool], *,
                          within: float = DEFAULT_WITHIN, what: str) -> status.PodStatus:
        """The pod's status once `check` holds; on failure, shows its status and events."""
        found = await eventually(
            lambda: self.status_of(name), until=lambda s: s is not None and check(s),
            within=within, what=what,
            seen=lambda s: f"status of {name}: {s!r}; events: {self.events_of(name)!r}")
        assert found is not None
        return found


async def exec_in(client: cri_client.RuntimeClient, pod_status: status.PodStatus, command: str,
                  *, container: str = "main") -> runtime.ExecResult:
    """Run `sh -c command` in a running container of the pod (CRI ExecSync)."""
    found = [c for c in (*pod_status.init_container_statuses, *pod_status.container_statuses)
             if c.name == container]
    assert found and found[0].container_id, f"container {container} has no ID: {pod_status!r}"
    container_id = runtime.ContainerID(found[0].container_id.partition("://")[2])
    return await client.exec_sync(container_id, ["sh", "-c", command], timeout_s=10)


def waiting(pod_status: status.PodStatus) -> status.ContainerStateWaiting | None:
    """The first container's Waiting state, if it is waiting."""
    state = pod_status.container_statuses[0].state if pod_status.container_statuses else None
    return state if isinstance(state, status.ContainerStateWaiting) else None


def waiting_reason(pod_status: status.PodStatus) -> str:
    state = waiting(pod_status)
    return state.reason if state is not None else ""


def events_by(agent: Harness, name: str, reason: str) -> list[events.Event]:
    return [e for e in agent.events_of(name) if e.reason == reason]


def cond(pod_status: status.PodStatus | None, type_: str) -> status.PodCondition | None:
    return pod_status.condition(type_) if pod_status is not None else None


def is_true(pod_status: status.PodStatus | None, type_: str) -> bool:
    c = cond(pod_status, type_)
    return c is not None and c.status == "True"


def all_ready(pod_status: status.PodStatus) -> bool:
    return all(is_true(pod_status, t) for t in (
        status.POD_SCHEDULED, status.POD_READY_TO_START_CONTAINERS, status.INITIALIZED,
        status.CONTAINERS_READY, status.READY))


async def http_get(port: int, path: str = "/index.html") -> bytes:
    """The raw reply to an HTTP/1.0 GET on 127.0.0.1:`port` (a port-forward's local end)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: pod\r\n\r\n".encode())
    await writer.drain()
    body = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    await writer.wait_closed()
    return body


def _server_address(given: settings.NodeServerSettings | None,
                    default: settings.NodeServerSettings) -> str:
    """The node server's address: loopback, unless the test gave another than the default."""
    if given is None or given.address == default.address:
        return "127.0.0.1"
    return given.address


async def port_forwarded_page(command: list[str], remote: int = 8080) -> bytes:
    """Run `command` (a `nodelet port-forward POD 0:<remote>`), read the local port it says
    it forwards from, GET its /index.html through it, and stop it."""
    forward = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert forward.stdout is not None
        line = await asyncio.wait_for(forward.stdout.readline(), 30)
        match = re.match(rb"Forwarding from 127\.0\.0\.1:(\d+) -> " + str(remote).encode(),
                         line)
        assert match, line
        return await http_get(int(match.group(1)))
    finally:
        forward.terminate()
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(forward.communicate(), 10)
