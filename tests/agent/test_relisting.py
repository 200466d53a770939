"""The relister's copy of the runtime, which a pod worker's resync starts from while runtime
events arrive, on real containerd (behind tests/support/criproxy.py where a read must end late).

KEP-3085 / DESIGN §2: nodelet never creates a second sandbox beside a READY one. Reads of a
pod overlap (an event's refresh, the worker's own, the relist); the copy must not go back to
an older read that ended last, and a worker must not create a sandbox on the copy's word.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import AgentFactory, Instance
from nodelet.adapters.cri import client as cri_client
from nodelet.model.core import events as ev
from nodelet.model.core import pods
from nodelet.model.core import runtime as rt
from nodelet.services.pleg import relisting
from support.criproxy import CriProxy
from support.harness import all_ready, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

UID = pods.PodUID("uid-relist-order")


def _sandbox_config(log_dir: Path) -> rt.SandboxConfig:
    return rt.SandboxConfig(
        name="order", namespace="default", uid=UID, attempt=0, hostname="order",
        log_directory=str(log_dir),
        labels={rt.LABEL_POD_UID: UID, rt.LABEL_POD_NAME: "order",
                rt.LABEL_POD_NAMESPACE: "default"})


async def test_a_read_that_ends_late_does_not_replace_a_newer_one(
        runtime: Instance, tmp_path: Path) -> None:
    """A refresh that listed the pod before a change and ends after a refresh that saw the
    change (an event's refresh against the worker's own) leaves the newer state in the copy."""
    socket = Path(tempfile.mkdtemp(prefix="nlp-", dir="/tmp")) / "cri.sock"
    sandbox_id = await runtime.client.run_pod_sandbox(_sandbox_config(tmp_path))
    try:
        async with CriProxy(upstream=runtime.containerd.endpoint, socket=socket) as proxy:
            client = await cri_client.RuntimeClient.connect(
                proxy.endpoint, timeouts=runtime.settings.runtime.timeouts)
            try:
                relister = relisting.Relister(client=client, on_change=lambda _uid: None)
                held = proxy.hold("ListPodSandbox")
                late = asyncio.ensure_future(relister.refresh_pod(UID))
                await asyncio.wait_for(held.answered.wait(), 20)  # it has seen the sandbox READY
                await runtime.client.stop_pod_sandbox(sandbox_id)
                newer = await relister.refresh_pod(UID)
                assert [s.state for s in newer.sandboxes] == [rt.SandboxState.NOTREADY]
                held.release.set()
                older = await asyncio.wait_for(late, 20)
                assert [s.state for s in older.sandboxes] == [rt.SandboxState.READY]
                assert [s.state for s in relister.pod(UID).sandboxes] == [
                    rt.SandboxState.NOTREADY]
            finally:
                await client.close()
    finally:
        with contextlib.suppress(cri_client.CriError):
            await runtime.client.stop_pod_sandbox(sandbox_id)
            await runtime.client.remove_pod_sandbox(sandbox_id)
        socket.parent.rmdir()


async def test_no_sandbox_is_created_on_the_copys_word(make_agent: AgentFactory,
                                                       runtime: Instance) -> None:
    """The copy says the pod's sandbox is not READY (as a stale read would) while the runtime
    has it READY: the worker asks the runtime before acting and keeps the sandbox."""
    agent = await make_agent()
    agent.write("copy.yaml", pod_manifest("copy"))
    await agent.wait_status("copy", all_ready, what="copy Ready")
    found = agent.find("copy")
    assert found is not None
    uid = found[0].uid
    node = agent.agent_or_fail()
    assert node.runtime_events is not None
    events = node.runtime_events
    await eventually(lambda: events.live, within=20, what="runtime events live")
    # The last sync ended normally: the next one starts from the copy.
    await eventually(lambda: node.workers.work(uid), until=lambda w: w is not None and
                     w.state_known, within=20, what="copy's last sync ended")
    [sandbox] = node.relister.pod(uid).sandboxes
    assert sandbox.state is rt.SandboxState.READY

    node.relister.note_sandbox(uid, replace(sandbox, state=rt.SandboxState.NOTREADY))
    node.workers.wake(uid)

    def synced_again() -> bool:
        work = node.workers.work(uid)
        copy = node.relister.pod(uid).sandboxes
        return work is not None and work.state_known and bool(copy) and \
            copy[0].state is rt.SandboxState.READY
    await eventually(synced_again, within=20, what="the worker synced on the runtime's answer")
    boxes = await runtime.client.list_pod_sandboxes(labels={rt.LABEL_POD_UID: uid})
    assert [(b.id, b.state) for b in boxes] == [(sandbox.id, rt.SandboxState.READY)]
    assert not [e for e in agent.events_of("copy")
                if e.reason in (ev.SANDBOX_CHANGED, ev.FAILED_CREATE_POD_SANDBOX)]
