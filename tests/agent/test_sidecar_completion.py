"""A pod whose regular containers are done for good is completed even while a sidecar runs:
the sidecar is stopped (as the kubelet's KillPod), the pod Succeeded, its sandbox stopped.

Found by the differential harness (tests/differential, scenario `sidecar-main-exits`):
nodelet kept such a pod Running with its sidecar for ever.
"""

from __future__ import annotations

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, cond, events_by

pytestmark = pytest.mark.runtime

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata: {name: done}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  initContainers:
    - {name: side, image: localhost/nodelet/busybox:latest, imagePullPolicy: IfNotPresent,
       command: [sleep, "1000000"], restartPolicy: Always}
  containers:
    - {name: main, image: localhost/nodelet/busybox:latest, imagePullPolicy: IfNotPresent,
       command: ["true"]}
"""


async def test_a_sidecar_does_not_keep_a_completed_pod_running(agent: Harness) -> None:
    agent.write("done.yaml", MANIFEST)
    done = await agent.wait_status(
        "done", lambda s: s.phase == "Succeeded"
        and getattr(cond(s, st.POD_READY_TO_START_CONTAINERS), "status", "") == "False",
        within=60, what="Succeeded with its sandbox stopped")
    [side] = done.init_container_statuses
    assert isinstance(side.state, st.ContainerStateTerminated), side
    assert [e.message for e in events_by(agent, "done", "Killing")] == ["Stopping container side"]
