"""The Service watch of cluster mode on the real kube-apiserver, without containers: the first
list is paged like client-go's reflector (the real server's continue tokens), and a watch
event updates only the Service it names instead of reading every Service again (quadratic with
many Services); the watch and the token refresh loops are supervised."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from nodelet.adapters import kube, kubeconfig
from nodelet.helpers import tasks
from nodelet.model.parsing import serviceobjects
from nodelet.services.sources import servicewatch
from support.controlplane import AdminClient, ControlPlane, Pair, kubeconfig_text
from support.faultproxy import FaultProxy
from support.polling import eventually

COUNT = 1100  # three pages of 500 (with the Services already there)


def service(name: str, cluster_ip: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip,
                     "ports": [{"port": 80, "protocol": "TCP"}]}}


@pytest_asyncio.fixture(loop_scope="session")
async def admin_proxy(control_plane: ControlPlane,
                      tmp_path: Path) -> AsyncIterator[tuple[FaultProxy, kube.KubeClient]]:
    """A fault proxy passing requests on as the admin, and a client through it."""
    pki = control_plane.root / "pki"
    async with FaultProxy(control_plane, tmp_path,
                          credentials=lambda: Pair(pki / "admin.crt", pki / "admin.key")) as proxy:
        path = tmp_path / "through-proxy.conf"
        path.write_text(kubeconfig_text(proxy.url, control_plane.ca.cert, user="admin"))
        api = kube.KubeClient(kubeconfig.load(path))
        try:
            yield proxy, api
        finally:
            await api.close()


async def test_services_are_listed_in_pages_and_updated_one_by_one(
        admin: AdminClient, admin_proxy: tuple[FaultProxy, kube.KubeClient],
        monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, client = admin_proxy
    ns = f"many-{secrets.token_hex(3)}"
    path = f"/api/v1/namespaces/{ns}/services"
    await admin.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    try:
        for first in range(0, COUNT, 50):  # 50 at a time
            await asyncio.gather(*(admin.create(path, service(
                f"s{n}", f"10.96.{100 + n // 250}.{n % 250 + 1}"))
                for n in range(first, min(first + 50, COUNT))))
        before = len(await admin.items("/api/v1/services"))
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
            assert len(watch.current() or ()) == before
            lists = [r for r in proxy.requests if r.path == "/api/v1/services" and not r.watch]
            assert len(lists) == 3 and all("limit=500" in r.query for r in lists), lists
            assert len(parsed) == before
            # A changed Service, a new one and a deleted one: three parses, not 3 x COUNT.
            await admin.patch(f"{path}/s7", {"spec": {"ports": [{"port": 8080,
                                                                 "protocol": "TCP"}]}})
            await admin.create(path, service("late", "10.96.109.9"))
            await admin.delete(f"{path}/s8")

            def seen() -> tuple[Any, ...]:
                return watch.current() or ()

            await eventually(seen, within=10, until=lambda s: "late" in {x.name for x in s}
                             and "s8" not in {x.name for x in s}
                             and any(x.name == "s7" and x.ports[0].port == 8080 for x in s),
                             what="the three changes")
            assert len(seen()) == before and len(parsed) == before + 2, len(parsed)
        finally:
            await group.close()
    finally:
        await admin.delete(f"/api/v1/namespaces/{ns}")


async def test_the_service_watch_and_token_refresh_are_started_again_after_a_crash(
        make_rig: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Supervised, not merely spawned: a crash is logged and the loop runs again."""
    from nodelet.services.cluster import tokens

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
    async with make_rig(loop_restart_backoff=0.05, loop_restart_backoff_max=0.1) as rig:
        await eventually(lambda: dict(runs), within=10,
                         until=lambda r: min(r.values()) >= 2, what="both loops started again")
        assert {"service-watch", "token-refresh"} <= set(rig.mode._group.names)
        assert rig.mode.services is not None
        await rig.mode.services.wait_listed()
        assert rig.mode.services.current() is not None
