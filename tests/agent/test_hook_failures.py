"""A failed postStart hook is a `FailedPostStartHook` event in the kubelet's words, and the
container is killed (a `Killing` event saying `FailedPostStartHook`) and restarted.

Found by the differential harness (tests/differential, scenario `poststart-fails`): nodelet's
event carried the hook's output (`PostStartHook failed: command [...] exited with 7: ...`);
the kubelet's says only `PostStartHook failed`, so that what a hook prints (it may hold
secrets) does not reach the events, which more people can read than the pod's logs.
"""

from __future__ import annotations

import pytest

from support.harness import Harness, events_by, pod_manifest

pytestmark = pytest.mark.runtime


async def test_a_failed_post_start_hook_event_keeps_its_output_out(agent: Harness) -> None:
    hook = "lifecycle: {postStart: {exec: {command: [sh, -c, 'echo s3cret; exit 7']}}}\n"
    agent.write("hook.yaml", pod_manifest("hook", container_extra=hook))
    await agent.wait_status(
        "hook", lambda s: bool(s.container_statuses) and s.container_statuses[0].restart_count >= 1,
        what="restarted after its postStart hook failed")
    failed = events_by(agent, "hook", "FailedPostStartHook")
    assert [(e.type, e.message) for e in failed] == [("Warning", "PostStartHook failed")]
    # And the kill that follows, as the kubelet's: `Killing` with the hook's reason.
    killing = events_by(agent, "hook", "Killing")
    assert [(e.type, e.message) for e in killing] == [("Normal", "FailedPostStartHook")]
