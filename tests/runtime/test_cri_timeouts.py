"""The longest grace period the API allows (an int64 of seconds) against a real containerd: the
CRI client sends what the request and a gRPC deadline can carry, so the stop and the exec run
instead of failing at once (a deadline 9.2e18 s away is DEADLINE_EXCEEDED at once in gRPC, and
2^63 does not fit the request's int64)."""

from __future__ import annotations

import asyncio

import pytest

from conftest import Instance, sandbox_config
from nodelet import settings as settings_
from nodelet.model.core import runtime as rt

pytestmark = pytest.mark.runtime

INT64_MAX = 2**63 - 1


async def test_int64_grace_period_stops_and_execs(runtime: Instance) -> None:
    config = sandbox_config(runtime, "long-grace")
    sandbox_id = await runtime.client.run_pod_sandbox(config)
    try:
        container = rt.ContainerConfig(
            name="patient", attempt=0, image=settings_.BUSYBOX_IMAGE, log_path="patient.log",
            command=("sh", "-c", 'trap "exit 0" TERM; while :; do sleep 0.2; done'),
        )
        container_id = await runtime.client.create_container(sandbox_id, container, config)
        await runtime.client.start_container(container_id)
        result = await runtime.client.exec_sync(container_id, ["echo", "ok"], INT64_MAX)
        assert (result.stdout, result.exit_code) == (b"ok\n", 0)
        # SIGTERM ends it: the stop returns long before any grace period would.
        await asyncio.wait_for(runtime.client.stop_container(container_id, INT64_MAX + 1), 30)
        info = await runtime.client.container_status(container_id)
        assert (info.state, info.exit_code) == (rt.ContainerState.EXITED, 0)
        await runtime.client.remove_container(container_id)
    finally:
        await runtime.client.stop_pod_sandbox(sandbox_id)
        await runtime.client.remove_pod_sandbox(sandbox_id)
