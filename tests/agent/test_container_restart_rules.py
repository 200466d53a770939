"""ContainerRestartRules in real containers: a container's own restartPolicy and its
restartPolicyRules decide its restarts over the pod's, and the pod phase follows them."""

from __future__ import annotations

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, pod_manifest

pytestmark = pytest.mark.runtime

RULE_42 = ("restartPolicy: Never\nrestartPolicyRules:\n  - action: Restart\n"
           "    exitCodes: {operator: In, values: [42]}\n"
           "volumeMounts: [{name: marks, mountPath: /marks}]\n")
MARKS = "volumes:\n  - name: marks\n    emptyDir: {}\n"


async def test_a_matching_rule_restarts_a_container_of_a_never_pod(agent: Harness) -> None:
    """Exit 42 matches the rule: restarted although the pod says Never; the next exit (0)
    matches nothing and the container's Never leaves it: the pod Succeeded."""
    agent.write("rules.yaml", pod_manifest(
        "rules", restart_policy="Never", command="test -f /marks/once || "
        "{ touch /marks/once; exit 42; }; exit 0", container_extra=RULE_42, extra_spec=MARKS))
    pod_status = await agent.wait_status("rules", lambda s: s.phase == "Succeeded", within=60,
                                         what="Succeeded after one restart by the rule")
    main = pod_status.container_statuses[0]
    assert main.restart_count == 1
    assert isinstance(main.last_state, st.ContainerStateTerminated)
    assert main.last_state.exit_code == 42


async def test_a_container_never_overrides_the_pods_always(agent: Harness) -> None:
    """restartPolicy Never on the container of an Always pod: its failure is final, and the
    pod, all of whose containers are done for good, is Failed."""
    agent.write("final.yaml", pod_manifest(
        "final", command="exit 1", container_extra="restartPolicy: Never\n"))
    pod_status = await agent.wait_status("final", lambda s: s.phase == "Failed", within=60,
                                         what="Failed with no restart")
    main = pod_status.container_statuses[0]
    assert main.restart_count == 0
    assert isinstance(main.state, st.ContainerStateTerminated) and main.state.exit_code == 1
