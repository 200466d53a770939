"""The probe manager against real targets: an aiohttp server, a TCP listener and a gRPC health
server on 127.0.0.1 (the pod IP), and exec probes in a busybox container on real containerd."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
import pytest_asyncio
from aiohttp import web

from conftest import Instance, sandbox_config
from nodelet import settings as settings_
from nodelet.adapters import checkpoint as cp
from nodelet.helpers import tasks
from nodelet.model.core import events as ev
from nodelet.model.core import pods
from nodelet.model.core import runtime as rt
from nodelet.model.parsing import probespecs
from nodelet.services.podwork import probing
from nodelet.services.status import recording
from support.polling import eventually

POD_IP = "127.0.0.1"
WITHIN = 15.0  # seconds to wait for a probe result (periods are 1 s, the API's minimum)


class _NoExec:
    """These tests probe over the network only; exec probes run in test_exec_* on containerd."""

    async def exec_sync(
        self, container_id: rt.ContainerID, cmd: list[str] | tuple[str, ...], timeout_s: int
    ) -> rt.ExecResult:
        raise AssertionError(f"unexpected exec {cmd} in {container_id}")


@dataclass
class Harness:
    manager: probing.ProbeManager
    group: tasks.TaskGroup
    recorder: recording.EventRecorder
    changes: list[pods.PodUID] = field(default_factory=list)

    def unhealthy(self) -> list[str]:
        return [e.message for e in self.recorder.events() if e.reason == ev.UNHEALTHY]

    async def seen_unhealthy(self, text: str) -> list[str]:
        async def check() -> list[str]:
            return [m for m in self.unhealthy() if text in m]

        seen: list[str] = await eventually(
            check, within=WITHIN, what=f"Unhealthy event with {text!r}"
        )
        return seen


def make_harness(checkpoint: cp.Checkpoint, client: probing.ExecRunner) -> Harness:
    recorder = recording.EventRecorder(
        checkpoint=checkpoint, node_name="node-a", clock=lambda: datetime.now(UTC),
        max_events=100,
    )
    group = tasks.TaskGroup()
    changes: list[pods.PodUID] = []
    manager = probing.ProbeManager(
        client=client, group=group, recorder=recorder, on_change=changes.append
    )
    return Harness(manager, group, recorder, changes)


@pytest_asyncio.fixture(loop_scope="session")
async def harness(checkpoint: cp.Checkpoint) -> AsyncIterator[Harness]:
    h = make_harness(checkpoint, _NoExec())
    yield h
    await h.manager.stop()
    await _no_tasks_left(h.group)


async def _no_tasks_left(group: tasks.TaskGroup) -> None:
    await eventually(lambda: list(group.names), until=lambda names: not names, within=5,
                     what="probe tasks ended")


def make_pod(*containers: pods.Container, uid: str = "uid-probe") -> pods.Pod:
    spec = pods.PodSpec(containers=containers)
    return pods.Pod(uid=pods.PodUID(uid), name="probed", namespace="default", spec=spec)


def container(name: str = "app", ports: tuple[pods.ContainerPort, ...] = (),
              **probes_: dict[str, Any]) -> pods.Container:
    """A container with probes written as in a manifest (`readiness_probe={...}`)."""
    parsed = {key: probespecs.parse_probe(raw, key.removesuffix("_probe"))  # type: ignore[arg-type]
              for key, raw in probes_.items()}
    return pods.Container(name=name, image=settings_.BUSYBOX_IMAGE, ports=ports, **parsed)


def fast(handler: dict[str, Any], **timings: int) -> dict[str, Any]:
    """A probe that reports after one attempt, every second."""
    return {**handler, "periodSeconds": 1, "failureThreshold": 1, **timings}


# --- real targets ----------------------------------------------------------------------------


@dataclass
class HttpTarget:
    port: int
    status: dict[str, int] = field(default_factory=dict)  # path -> status (default 200)
    hits: dict[str, int] = field(default_factory=dict)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def count(self, path: str) -> int:
        return self.hits.get(path, 0)


@pytest_asyncio.fixture(loop_scope="session")
async def http_target() -> AsyncIterator[HttpTarget]:
    target = HttpTarget(port=0)

    async def handle(request: web.Request) -> web.Response:
        target.hits[request.path] = target.count(request.path) + 1
        target.headers.append(dict(request.headers))
        if request.path == "/slow":
            await target.release.wait()
        return web.Response(status=target.status.get(request.path, 200), text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, POD_IP, 0)
    await site.start()
    target.port = runner.addresses[0][1]
    yield target
    target.release.set()
    await runner.cleanup()


async def tcp_listener() -> asyncio.Server:
    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    return await asyncio.start_server(accept, POD_IP, 0)


def _port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


# --- httpGet -----------------------------------------------------------------------------------


async def test_http_readiness_follows_the_status_code(
    harness: Harness, http_target: HttpTarget
) -> None:
    probe = fast({"httpGet": {"port": "http", "path": "/ready",
                              "httpHeaders": [{"name": "X-Probe", "value": "yes"}]}})
    app = container(readiness_probe=probe,
                    ports=(pods.ContainerPort(http_target.port, name="http"),))
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())
    assert harness.manager.readiness(pod.uid) == {"app": False}  # no result yet
    assert harness.manager.started(pod.uid) == {}

    async def ready_is(value: bool) -> bool:
        return harness.manager.readiness(pod.uid) == {"app": value}

    await eventually(lambda: ready_is(True), within=WITHIN, what="ready")
    assert harness.changes == [pod.uid]
    sent = http_target.headers[0]
    assert sent["X-Probe"] == "yes" and sent["User-Agent"].startswith("kube-probe/")

    http_target.status["/ready"] = 503
    await eventually(lambda: ready_is(False), within=WITHIN, what="unready after a 503")
    assert harness.changes == [pod.uid, pod.uid]
    assert harness.unhealthy() == ["Readiness probe failed: HTTP probe failed with statuscode: 503"]
    assert harness.manager.liveness_failed(pod.uid) == {}


async def test_http_probe_is_bounded_by_timeout_seconds(
    harness: Harness, http_target: HttpTarget
) -> None:
    probe = fast({"httpGet": {"port": http_target.port, "path": "/slow"}})
    app = container(liveness_probe=probe)
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())

    async def failed() -> dict[str, str]:
        return dict(harness.manager.liveness_failed(pod.uid))

    assert await eventually(failed, within=WITHIN, what="liveness failure") == {
        "app": "liveness"}
    url = f"http://{POD_IP}:{http_target.port}/slow"
    assert harness.unhealthy() == [
        f'Liveness probe failed: Get "{url}": context deadline exceeded '
        "(Client.Timeout exceeded while awaiting headers)"
    ]


async def test_unknown_port_name_errors_without_counting(
    harness: Harness, http_target: HttpTarget
) -> None:
    app = container(liveness_probe=fast({"httpGet": {"port": "nope"}}))
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())
    await harness.seen_unhealthy('Liveness probe errored: container "app" has no port named')
    assert harness.manager.liveness_failed(pod.uid) == {}  # errors never restart
    assert harness.changes == []


# --- tcpSocket, startup gating, delays -------------------------------------------------------


async def test_tcp_liveness_failure_asks_for_a_restart_and_stops_probing(
    harness: Harness,
) -> None:
    server = await tcp_listener()
    port = _port(server)
    app = container(liveness_probe=fast({"tcpSocket": {"port": port}}, failureThreshold=2))
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())
    assert harness.group.names == ["probe:liveness:default/probed:app"]
    server.close()
    await server.wait_closed()

    async def failed() -> dict[str, str]:
        return dict(harness.manager.liveness_failed(pod.uid))

    assert await eventually(failed, within=WITHIN, what="liveness failure") == {
        "app": "liveness"}
    message = f"Liveness probe failed: dial tcp {POD_IP}:{port}: connect: connection refused"
    assert harness.unhealthy() == [message]
    assert [e.count for e in harness.recorder.events() if e.reason == ev.UNHEALTHY] == [2]
    assert harness.changes == [pod.uid]
    await _no_tasks_left(harness.group)  # on hold until the container is replaced

    # The restarted container (a new ID) is probed afresh: alive again.
    harness.manager.ensure(pod, app, rt.ContainerID("c2"), pod_ip=POD_IP,
                           started_at=time.time())
    assert harness.manager.liveness_failed(pod.uid) == {}
    assert len(harness.group.names) == 1


@pytest.mark.parametrize("host", ["a" * 64 + ".example", "bad\x00host"],
                         ids=["label-too-long", "nul"])
async def test_a_host_no_resolver_takes_fails_the_probe_not_the_task(
    harness: Harness, host: str
) -> None:
    app = container(readiness_probe=fast({"tcpSocket": {"port": 80, "host": host}}))
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())
    (message,) = await harness.seen_unhealthy("Readiness probe failed")
    assert message.startswith(f"Readiness probe failed: dial tcp {host}:80: lookup {host}: ")
    assert harness.group.names == ["probe:readiness:default/probed:app"]  # still probing


async def test_liveness_and_readiness_wait_for_the_startup_probe(
    harness: Harness, http_target: HttpTarget
) -> None:
    http_target.status["/started"] = 500
    app = container(
        startup_probe=fast({"httpGet": {"port": http_target.port, "path": "/started"}},
                           failureThreshold=30),
        readiness_probe=fast({"httpGet": {"port": http_target.port, "path": "/ready"}}),
        liveness_probe=fast({"httpGet": {"port": http_target.port, "path": "/alive"}}),
    )
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())
    assert len(harness.group.names) == 3

    async def startup_tried_twice() -> bool:
        return http_target.count("/started") >= 2

    await eventually(startup_tried_twice, within=WITHIN, what="two startup attempts")
    assert (http_target.count("/ready"), http_target.count("/alive")) == (0, 0)
    assert harness.manager.started(pod.uid) == {"app": False}
    assert harness.manager.readiness(pod.uid) == {"app": False}

    http_target.status["/started"] = 200

    async def ready() -> bool:
        return harness.manager.readiness(pod.uid) == {"app": True}

    await eventually(ready, within=WITHIN, what="ready after start-up")
    assert harness.manager.started(pod.uid) == {"app": True}
    assert http_target.count("/alive") >= 1
    assert harness.changes == [pod.uid, pod.uid]  # started, then ready

    async def startup_loop_ended() -> bool:
        return len(harness.group.names) == 2

    await eventually(startup_loop_ended, within=5, what="startup loop ended after success")


async def test_startup_failure_asks_for_a_restart(
    harness: Harness, http_target: HttpTarget
) -> None:
    http_target.status["/started"] = 500
    app = container(
        startup_probe=fast({"httpGet": {"port": http_target.port, "path": "/started"}}),
        readiness_probe=fast({"httpGet": {"port": http_target.port, "path": "/ready"}}),
    )
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())

    async def failed() -> dict[str, str]:
        return dict(harness.manager.liveness_failed(pod.uid))

    assert await eventually(failed, within=WITHIN, what="startup failure") == {"app": "startup"}
    assert harness.manager.started(pod.uid) == {"app": False}
    assert harness.unhealthy() == ["Startup probe failed: HTTP probe failed with statuscode: 500"]
    assert http_target.count("/ready") == 0


async def test_initial_delay_counts_from_the_container_start(
    harness: Harness, http_target: HttpTarget
) -> None:
    def probed(path: str, delay: int) -> pods.Container:
        probe = fast({"httpGet": {"port": http_target.port, "path": path}},
                     initialDelaySeconds=delay)
        return container(path.strip("/"), readiness_probe=probe)

    # Started an hour ago with a minute's delay: probed at once. Started now with an hour's
    # delay: not probed while the other one is probed again and again.
    old, new = probed("/old", 60), probed("/new", 3600)
    pod = make_pod(old, new)
    now = time.time()
    harness.manager.ensure(pod, old, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=now - 3600)
    harness.manager.ensure(pod, new, rt.ContainerID("c2"), pod_ip=POD_IP, started_at=now)

    async def old_probed_thrice() -> bool:
        return http_target.count("/old") >= 3

    await eventually(old_probed_thrice, within=WITHIN, what="three attempts of the old one")
    assert http_target.count("/new") == 0
    assert harness.manager.readiness(pod.uid) == {"old": True, "new": False}


# --- instances and forgetting -------------------------------------------------------------


async def test_same_id_is_kept_new_id_resets_and_forget_cancels(
    harness: Harness, http_target: HttpTarget
) -> None:
    app = container(readiness_probe=fast({"httpGet": {"port": http_target.port}}))
    other = container("other", readiness_probe=fast({"tcpSocket": {"port": http_target.port}}))
    pod = make_pod(app, other)
    manager = harness.manager
    manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP, started_at=time.time())
    manager.ensure(pod, other, rt.ContainerID("o1"), pod_ip=POD_IP, started_at=time.time())

    async def all_ready() -> bool:
        return manager.readiness(pod.uid) == {"app": True, "other": True}

    await eventually(all_ready, within=WITHIN, what="both ready")
    tasks_before = set(asyncio.all_tasks())
    manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP, started_at=time.time())
    assert set(asyncio.all_tasks()) == tasks_before  # same instance: nothing restarted
    assert manager.readiness(pod.uid)["app"] is True

    manager.ensure(pod, app, rt.ContainerID("c2"), pod_ip=POD_IP, started_at=time.time())
    assert manager.readiness(pod.uid) == {"app": False, "other": True}  # a new instance
    await eventually(all_ready, within=WITHIN, what="the new instance ready")

    manager.forget_container(pod.uid, "other")
    assert manager.readiness(pod.uid) == {"app": True}
    manager.forget_pod(pod.uid)
    assert manager.readiness(pod.uid) == {}
    await _no_tasks_left(harness.group)


async def test_container_without_probes_is_not_tracked(harness: Harness) -> None:
    app = container()
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())
    assert harness.group.names == []
    assert harness.manager.readiness(pod.uid) == {}
    assert harness.manager.started(pod.uid) == {}


# --- grpc --------------------------------------------------------------------------------------


@dataclass
class GrpcTarget:
    port: int
    serving: dict[str, int]  # service name -> grpc.health.v1 ServingStatus


@pytest_asyncio.fixture(loop_scope="session")
async def grpc_target() -> AsyncIterator[GrpcTarget]:
    target = GrpcTarget(port=0, serving={"": 1})

    async def check(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        service = request[2:].decode()  # field 1 (tag 0x0a), one length byte, the name
        if service not in target.serving:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {service}")
        return bytes([0x08, target.serving[service]])  # field 1, varint

    handler = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)}
    )
    server = grpc.aio.server(handlers=[handler])
    target.port = server.add_insecure_port(f"{POD_IP}:0")
    await server.start()
    yield target
    await server.stop(None)


async def test_grpc_health_check(harness: Harness, grpc_target: GrpcTarget) -> None:
    grpc_target.serving["web"] = 1
    app = container(readiness_probe=fast({"grpc": {"port": grpc_target.port, "service": "web"}}))
    pod = make_pod(app)
    harness.manager.ensure(pod, app, rt.ContainerID("c1"), pod_ip=POD_IP,
                           started_at=time.time())

    async def ready_is(value: bool) -> bool:
        return harness.manager.readiness(pod.uid) == {"app": value}

    await eventually(lambda: ready_is(True), within=WITHIN, what="SERVING → ready")
    grpc_target.serving["web"] = 2
    await eventually(lambda: ready_is(False), within=WITHIN, what="NOT_SERVING → unready")
    assert harness.unhealthy() == [
        'Readiness probe failed: service unhealthy (responded with "NOT_SERVING")'
    ]


async def test_grpc_without_the_service_and_without_a_server(
    harness: Harness, grpc_target: GrpcTarget
) -> None:
    unknown = container("unknown", liveness_probe=fast(
        {"grpc": {"port": grpc_target.port, "service": "absent"}}))
    closed = await tcp_listener()
    dead_port = _port(closed)
    closed.close()
    await closed.wait_closed()
    gone = container("gone", liveness_probe=fast({"grpc": {"port": dead_port}}))
    pod = make_pod(unknown, gone)
    for c in (unknown, gone):
        harness.manager.ensure(pod, c, rt.ContainerID(c.name), pod_ip=POD_IP,
                               started_at=time.time())

    async def both_failed() -> bool:
        return set(harness.manager.liveness_failed(pod.uid)) == {"unknown", "gone"}

    await eventually(both_failed, within=WITHIN, what="both liveness failures")
    assert sorted(harness.unhealthy()) == [
        "Liveness probe failed: error: health rpc probe failed: NOT_FOUND: unknown service absent",
        f'Liveness probe failed: timeout: failed to connect service "{POD_IP}:{dead_port}" '
        "within 1s: context deadline exceeded",  # the kubelet's words (tests/differential)
    ]


# --- exec, in a real container -----------------------------------------------------------------


@pytest.mark.runtime
async def test_exec_probes_in_a_busybox_container(
    runtime: Instance, checkpoint: cp.Checkpoint
) -> None:
    h = make_harness(checkpoint, runtime.client)
    config = sandbox_config(runtime, "probes")
    sandbox_id = await runtime.client.run_pod_sandbox(config)
    try:
        box = runtime_container(name="app", command=("sh", "-c", "touch /tmp/healthy; sleep 3600"))
        container_id = await runtime.client.create_container(sandbox_id, box, config)
        await runtime.client.start_container(container_id)
        healthy = {"exec": {"command": ["cat", "/tmp/healthy"]}}
        app = container(readiness_probe=fast(healthy),
                        liveness_probe=fast(healthy, failureThreshold=2))
        pod = make_pod(app)
        # Another pod's view of the same container, whose startup probe times out (1 s).
        slow = container(startup_probe=fast({"exec": {"command": ["sleep", "5"]}}))
        slow_pod = make_pod(slow, uid="uid-slow")
        h.manager.ensure(pod, app, container_id, pod_ip=POD_IP, started_at=time.time())
        h.manager.ensure(slow_pod, slow, container_id, pod_ip=POD_IP, started_at=time.time())

        async def ready() -> bool:
            return h.manager.readiness(pod.uid) == {"app": True}

        await eventually(ready, within=WITHIN, what="exec readiness")
        assert h.manager.started(pod.uid) == {}
        await runtime.client.exec_sync(container_id, ["rm", "/tmp/healthy"], 5)

        async def failed() -> set[str]:
            return set(h.manager.liveness_failed(pod.uid))

        assert await eventually(failed, within=WITHIN, what="exec liveness failure") == {"app"}
        missing = "cat: can't open '/tmp/healthy': No such file or directory"
        assert f"Liveness probe failed: {missing}" in h.unhealthy()
        assert f"Readiness probe failed: {missing}" in h.unhealthy()
        assert h.manager.readiness(pod.uid) == {"app": False}
        await h.seen_unhealthy('Startup probe failed: command "sleep 5" timed out')
        assert h.manager.started(slow_pod.uid) == {"app": False}
        assert h.manager.liveness_failed(slow_pod.uid) == {"app": "startup"}
    finally:
        await h.manager.stop()
        await _no_tasks_left(h.group)
        await runtime.client.stop_pod_sandbox(sandbox_id)
        await runtime.client.remove_pod_sandbox(sandbox_id)


def runtime_container(*, name: str, command: tuple[str, ...]) -> rt.ContainerConfig:
    return rt.ContainerConfig(
        name=name, attempt=0, image=settings_.BUSYBOX_IMAGE, log_path=f"{name}.log",
        command=command,
    )
