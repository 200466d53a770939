"""The runtime's own words reach the pod's condition and events, as the kubelet shows them:
a real agent behind a fault-injecting CRI proxy (tests/support/criproxy.py) on the session's
containerd."""

from __future__ import annotations

import tempfile
from pathlib import Path

import grpc
import pytest

from conftest import AgentFactory, Instance
from nodelet.model.core import status as st
from support.criproxy import CriProxy
from support.harness import all_ready, cond, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

WORDS = "injected: containerd is shutting down"


async def test_unavailable_keeps_the_runtimes_description(make_agent: AgentFactory,
                                                          runtime: Instance) -> None:
    socket = Path(tempfile.mkdtemp(prefix="nlp-", dir="/tmp")) / "cri.sock"
    async with CriProxy(upstream=runtime.containerd.endpoint, socket=socket) as proxy:
        proxy.fail("RunPodSandbox", grpc.StatusCode.UNAVAILABLE, WORDS)
        agent = await make_agent(endpoint=proxy.endpoint)
        agent.write("web.yaml", pod_manifest("web"))
        expected = f"rpc error: code = Unavailable desc = {WORDS}"

        def says_why(pod_status: st.PodStatus) -> bool:
            ready = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
            return ready is not None and expected in ready.message

        pod_status = await agent.wait_status("web", says_why, what="the runtime's words")
        ready = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
        assert ready is not None and ready.reason == "PodSandboxNotReady"
        # nodelet's hint comes after the runtime's words, not instead of them.
        assert ready.message.index(expected) < ready.message.index("is not reachable")
        failed = [e for e in agent.events_of("web") if e.reason == "FailedCreatePodSandBox"]
        assert failed and failed[0].message.startswith(
            f"Failed to create pod sandbox: {expected}")
        proxy.heal("RunPodSandbox")
        await agent.wait_status("web", all_ready, within=60, what="Ready once the runtime heals")
        await agent.stop()
    socket.parent.rmdir()


async def test_a_sync_the_runtime_cannot_answer_is_a_failed_sync_event(
        make_agent: AgentFactory, runtime: Instance) -> None:
    """No step of the sync recorded this error (the pod's state could not even be read): the
    pod waits, and a FailedSync Warning event says why, as the kubelet's pod workers record
    one when a pod's status cannot be determined."""
    socket = Path(tempfile.mkdtemp(prefix="nlp-", dir="/tmp")) / "cri.sock"
    async with CriProxy(upstream=runtime.containerd.endpoint, socket=socket) as proxy:
        agent = await make_agent(endpoint=proxy.endpoint)
        proxy.fail("ListPodSandbox", grpc.StatusCode.UNAVAILABLE, WORDS)
        agent.write("web.yaml", pod_manifest("web"))
        failed = await eventually(
            lambda: [e for e in agent.events_of("web") if e.reason == "FailedSync"],
            within=30, what="a FailedSync event")
        assert failed[0].type == "Warning"
        # The kubelet's words (pod_workers.go), without nodelet's hint naming the socket.
        assert failed[0].message == (
            f"error determining status: rpc error: code = Unavailable desc = {WORDS}")
        proxy.heal("ListPodSandbox")
        await agent.wait_status("web", all_ready, within=60, what="Ready once the runtime heals")
        await agent.stop()
    socket.parent.rmdir()
