"""A container in CrashLoopBackOff gets the kubelet's `BackOff` Warning event, naming it and
its pod, besides its Waiting reason.

Found by the differential harness (tests/differential, scenarios `crashloop`,
`onfailure-crash`, `init-fails-always`...): the kubelet records `Back-off restarting failed
container main in pod <name>_<namespace>(<uid>)` at every sync that finds the container
backing off; nodelet only set the Waiting state.
"""

from __future__ import annotations

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, events_by, pod_manifest, waiting_reason

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


async def test_the_back_off_counts_from_the_exit(agent: Harness) -> None:
    """The kubelet's doBackOff waits the back-off after the container's FinishedAt: a
    container that ran 3 s before it failed waits the whole delay again (the harness's
    back-off: 1 s doubling), not what is left of it since its start. Found by the
    [NodeConformance] test 'should cap back-off at MaxContainerBackOff': nodelet restarted
    after 4m55s where 5m0s is the cap (it counted from the start of a 5 s run)."""
    agent.write("slow-crash.yaml", pod_manifest("slow-crash", command="sleep 3; exit 1"))
    found = await agent.wait_status(
        "slow-crash", lambda s: s.container_statuses[0].restart_count >= 4 and isinstance(
            s.container_statuses[0].state, st.ContainerStateRunning), within=90,
        what="the fourth restart running")
    main = found.container_statuses[0]
    assert isinstance(main.state, st.ContainerStateRunning) and main.state.started_at
    assert isinstance(main.last_state, st.ContainerStateTerminated)
    assert main.last_state.finished_at is not None
    gap = (main.state.started_at - main.last_state.finished_at).total_seconds()
    # restarts: at once, then 1 s, 2 s, 4 s after each exit; the fourth waited 4 s.
    assert gap >= 3.9, (main.restart_count, gap)
