"""The Service watch of cluster mode against the test API server, without containers: the
first list is paged like client-go's reflector, and a watch event updates only the Service it
names instead of reading every Service again (quadratic with many Services)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from kubeapi import KubeApiServer
from nodelet.adapters import kube, kubeconfig
from nodelet.helpers import tasks
from nodelet.model.parsing import serviceobjects
from nodelet.services import servicewatch
from polling import eventually

COUNT = 1100  # three pages of 500


def service(name: str, cluster_ip: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                     "ports": [{"port": 80, "protocol": "TCP"}]}}


@pytest_asyncio.fixture(loop_scope="session")
async def client(server: KubeApiServer, tmp_path: Path) -> AsyncIterator[kube.KubeClient]:
    api = kube.KubeClient(kubeconfig.load(server.write_kubeconfig(tmp_path / "kubeconfig")))
    yield api
    await api.close()


async def test_services_are_listed_in_pages_and_updated_one_by_one(
        server: KubeApiServer, client: kube.KubeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(COUNT):
        server.create("services", service(f"s{n}", f"10.96.{n // 250}.{n % 250 + 1}"))
    parsed: list[str] = []
    parse = serviceobjects.service_from_object

    def counting(obj: Any) -> Any:
        parsed.append(obj["metadata"]["name"])
        return parse(obj)

    monkeypatch.setattr(serviceobjects, "service_from_object", counting)
    watch = servicewatch.ServiceWatch(client, wait_timeout=10.0)
    group = tasks.TaskGroup()
    group.spawn("service-watch", watch.run())
    try:
        await watch.wait_listed()
        assert len(watch.current() or ()) == COUNT
        lists = [r for r in server.requests if r.verb == "list" and r.resource == "services"]
        assert len(lists) == 3 and all("limit=500" in r.query for r in lists), lists
        assert len(parsed) == COUNT
        # A changed Service, a new one and a deleted one: three parses, not 3 x COUNT.
        changed = server.get("services", "default", "s7")
        assert changed is not None
        changed["spec"]["ports"][0]["port"] = 8080
        server.update("services", changed)
        server.create("services", service("late", "10.96.9.9"))
        server.delete("services", "default", "s8")

        def seen() -> tuple[Any, ...]:
            return watch.current() or ()

        await eventually(seen, within=10, until=lambda s: "late" in {x.name for x in s}
                         and "s8" not in {x.name for x in s}
                         and any(x.name == "s7" and x.ports[0].port == 8080 for x in s),
                         what="the three changes")
        assert len(seen()) == COUNT and len(parsed) == COUNT + 2, len(parsed)
    finally:
        await group.close()


async def test_the_service_watch_and_token_refresh_are_started_again_after_a_crash(
        server: KubeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Supervised, not merely spawned: a crash is logged and the loop runs again."""
    from kubeapi import ClusterRig
    from nodelet.services import tokens

    runs: dict[str, int] = {"service-watch": 0, "token-refresh": 0}
    watch_run, token_run = servicewatch.ServiceWatch.run, tokens.TokenManager.run

    async def crashing_watch(self: servicewatch.ServiceWatch) -> None:
        runs["service-watch"] += 1
        if runs["service-watch"] == 1:
            raise RuntimeError("boom")
        await watch_run(self)

    async def crashing_tokens(self: tokens.TokenManager) -> None:
        runs["token-refresh"] += 1
        if runs["token-refresh"] == 1:
            raise RuntimeError("boom")
        await token_run(self)

    monkeypatch.setattr(servicewatch.ServiceWatch, "run", crashing_watch)
    monkeypatch.setattr(tokens.TokenManager, "run", crashing_tokens)
    async with ClusterRig(server, tmp_path, loop_restart_backoff=0.05,
                          loop_restart_backoff_max=0.1) as rig:
        await eventually(lambda: dict(runs), within=10,
                         until=lambda r: min(r.values()) >= 2, what="both loops started again")
        assert {"service-watch", "token-refresh"} <= set(rig.mode._group.names)
        assert rig.mode.services is not None
        await rig.mode.services.wait_listed()
        assert rig.mode.services.current() is not None
