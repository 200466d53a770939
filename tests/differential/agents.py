"""The differential harness's agents: nodelet and the real kubelet, one after the other, on
one containerd of their own (the kubelet kills every pod of its runtime it does not know, so
it never shares the session's), both with node name `twin`.

`nodelet_twin(instance)` and
`kubelet_twin(instance, manifests)`: async context managers giving a started agent as a
`twin.Twin`; on leaving, its pods are removed, it is stopped and what it left in the runtime
is removed, so the other one starts on an empty runtime. The kubelet's leftovers fail the
test; its log is kept in test-artifacts/kubelet-twin.log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any

import aiohttp
import twin as twin_  # tests/differential/twin.py

from conftest import Instance
from nodelet import settings
from support import kubeletpeer  # tests/support/kubeletpeer.py
from support.harness import Harness

NODE = "twin"


def default_sync() -> dict[str, object]:
    """nodelet's own defaults (the harness shortens retries and back-offs for other tests):
    the kubelet runs with its defaults too."""
    defaults = settings.SyncSettings()
    return {f.name: getattr(defaults, f.name) for f in fields(defaults)}


async def _get(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(
            url, timeout=aiohttp.ClientTimeout(total=5)) as response:
        return await response.json()


async def remove_all_sandboxes(instance: Instance) -> None:
    """What one agent left stopped in the runtime goes before the other starts."""
    for sandbox in await instance.client.list_pod_sandboxes():
        await instance.client.stop_pod_sandbox(sandbox.id)
        await instance.client.remove_pod_sandbox(sandbox.id)


@asynccontextmanager
async def nodelet_twin(twin_runtime: Instance) -> AsyncIterator[twin_.Twin]:
    harness = Harness(endpoint=twin_runtime.containerd.endpoint, node_name=NODE,
                      sync_settings=default_sync())
    try:
        agent = await harness.start()
        base = f"http://127.0.0.1:{agent.server_port}"

        async def pods() -> list[dict[str, Any]]:
            return list((await _get(f"{base}/pods")).get("items") or [])

        async def events() -> list[dict[str, str]]:
            items = (await _get(f"{base}/events?precise=true")).get("items") or []
            items.sort(key=lambda e: e["firstTimestamp"])
            return [{"name": e["involvedObject"].get("name", ""), "type": e["type"],
                     "reason": e["reason"], "message": e["message"],
                     "fieldPath": e["involvedObject"].get("fieldPath", "")} for e in items]

        yield twin_.Twin("nodelet", harness.manifests, NODE, pods, events)
    finally:
        try:
            await harness.stop()
        finally:
            harness.cleanup()
            await remove_all_sandboxes(twin_runtime)


@asynccontextmanager
async def kubelet_twin(
        twin_runtime: Instance, manifests: Path,
) -> AsyncIterator[tuple[twin_.Twin, kubeletpeer.KubeletPeer]]:
    peer = await kubeletpeer.KubeletPeer.start(
        endpoint=twin_runtime.containerd.endpoint, manifests=manifests, node_name=NODE,
        client=twin_runtime.client)
    try:
        async def events() -> list[dict[str, str]]:
            return peer.events()

        yield twin_.Twin("kubelet", manifests, NODE, peer.pods, events), peer
    finally:
        log = peer.log.read_bytes() if peer.log.exists() else b""
        await peer.stop()
        left = await peer.leftovers()
        await remove_all_sandboxes(twin_runtime)
        kept = Path("test-artifacts") / "kubelet-twin.log"  # kept: the report points to it
        kept.parent.mkdir(exist_ok=True)
        kept.write_bytes(log)
        assert not any(left.values()), f"the kubelet left: {left}"
