"""A container in CrashLoopBackOff gets the kubelet's `BackOff` Warning event, naming it and
its pod, besides its Waiting reason.

Found by the differential harness (tests/differential, scenarios `crashloop`,
`onfailure-crash`, `init-fails-always`...): the kubelet records `Back-off restarting failed
container main in pod <name>_<namespace>(<uid>)` at every sync that finds the container
backing off; nodelet only set the Waiting state.
"""

from __future__ import annotations

import pytest

from harness import Harness, events_by, pod_manifest, waiting_reason

pytestmark = pytest.mark.runtime


async def test_a_crash_looping_container_has_a_back_off_event(agent: Harness) -> None:
    agent.write("crash.yaml", pod_manifest("crash", command="exit 2"))
    await agent.wait_status("crash", lambda s: waiting_reason(s) == "CrashLoopBackOff",
                            what="CrashLoopBackOff")
    found = agent.find("crash")
    assert found is not None
    pod = found[0]
    back_off = events_by(agent, "crash", "BackOff")
    assert [(e.type, e.message) for e in back_off] == [(
        "Warning", f"Back-off restarting failed container main in pod "
                   f"{pod.name}_{pod.namespace}({pod.uid})")]
