"""Restarting all of a pod's containers in place (the `RestartAllContainers` action of
restartPolicyRules) in real containers: the scenarios of Kubernetes' own [NodeConformance]
tests "Pod Extended (RestartAllContainers)" — a regular container, a sidecar or an init
container exits with the rule's code once, and every container of the pod is removed and runs
again in the same sandbox, each with one more restart."""

from __future__ import annotations

import textwrap

import pytest

from nodelet.model.core import restartall
from nodelet.model.core import status as st
from support.harness import Harness

pytestmark = pytest.mark.runtime

ONCE = "/mnt/once"


def _container(name: str, command: str, *, policy: str = "", rule: bool = False) -> str:
    lines = [f"- name: {name}", "  image: localhost/nodelet/busybox:latest",
             "  imagePullPolicy: IfNotPresent", f"  command: [sh, -c, {command!r}]",
             "  volumeMounts: [{name: work, mountPath: /mnt}]"]
    if policy:
        lines.append(f"  restartPolicy: {policy}")
    if rule:
        lines += ["  restartPolicyRules:", "  - action: RestartAllContainers",
                  "    exitCodes: {operator: In, values: [42]}"]
    return "\n".join(lines) + "\n"


def _manifest(name: str, *, init: str, containers: str, restart_policy: str = "Never") -> str:
    """A grace period of 1 s: the reset removes containers without one (exit 137), and the
    `sleep` of each container ignores SIGTERM, so the test's end need not wait 30 s twice."""
    head = textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          terminationGracePeriodSeconds: 1
          restartPolicy: {restart_policy}
          volumes: [{{name: work, emptyDir: {{}}}}]
        """)
    if init:
        head += "  initContainers:\n" + textwrap.indent(init, "  ")
    return head + "  containers:\n" + textwrap.indent(containers, "  ")


def _by_name(s: st.PodStatus) -> dict[str, st.ContainerStatus]:
    return {c.name: c for c in (*s.init_container_statuses, *s.container_statuses)}


def _all_restarted(names: list[str]):  # type: ignore[no-untyped-def]
    def check(s: st.PodStatus) -> bool:
        by_name = _by_name(s)
        return all(by_name[n].restart_count > 0 and isinstance(
            by_name[n].last_state, st.ContainerStateTerminated) for n in names)
    return check


async def test_a_regular_container_restarts_every_container(agent: Harness) -> None:
    """The source (`restartPolicy: Never`, exit 42 once) in a Never pod: the pod never
    fails; the completed init container, the sidecar and both app containers run again, each
    with restartCount 1 and the last state the kubelet gives a removed container; the
    condition went True during the reset and is False after; the sandbox stayed."""
    init = (_container("init", "exit 0")
            + _container("sidecar", "sleep 100000", policy="Always"))
    containers = (_container("source", f"if [ -f {ONCE} ]; then sleep 100000; else touch "
                             f"{ONCE}; exit 42; fi", policy="Never", rule=True)
                  + _container("regular", "sleep 100000"))
    agent.write("everyone.yaml", _manifest("everyone", init=init, containers=containers))
    names = ["init", "sidecar", "source", "regular"]
    seen_true = await agent.wait_status(
        "everyone", lambda s: (s.condition(restartall.CONDITION) or st.PodCondition("", "False"))
        .status == "True", within=90, what="AllContainersRestarting True")
    condition = seen_true.condition(restartall.CONDITION)
    assert condition is not None and condition.reason == restartall.REASON_STARTED
    assert seen_true.phase == "Running"
    done = await agent.wait_status(
        "everyone", lambda s: _all_restarted(names)(s) and all(
            isinstance(_by_name(s)[n].state, st.ContainerStateRunning)
            for n in ("sidecar", "source", "regular")),
        within=90, what="every container restarted once, the app containers running")
    for name in names:
        status = _by_name(done)[name]
        assert status.restart_count == 1, status
        assert status.last_state == st.ContainerStateTerminated(
            exit_code=137, reason=restartall.REASON_RESTARTING,
            message=restartall.MESSAGE_REMOVED), status
    assert done.phase == "Running"
    after = done.condition(restartall.CONDITION)
    assert after is not None and after.status == "False" and not after.reason
    initialized = done.condition(st.INITIALIZED)
    assert initialized is not None and initialized.status == "True"
    assert done.pod_ip == seen_true.pod_ip != "", "the sandbox was kept"
    # The next instance of every container follows the logged one (attempt 1, not 0 again).
    found = agent.find("everyone")
    assert found is not None
    pod = found[0]
    logs_dir = agent.settings.data_dir / "logs" / f"{pod.namespace}_{pod.name}_{pod.uid}"
    logs = sorted(p.relative_to(logs_dir).as_posix() for p in logs_dir.glob("*/*.log"))
    assert logs == [f"{n}/{a}.log" for n in sorted(names) for a in (0, 1)], logs


async def test_an_init_container_restarts_the_init_containers(agent: Harness) -> None:
    """The source is an init container (Never, exit 42 once, then 0): the pod does not fail;
    the init containers before it run again, the app container (never started) has no
    restart, and then runs."""
    init = (_container("sidecar", "sleep 100000", policy="Always")
            + _container("init", "exit 0")
            + _container("source", f"if [ -f {ONCE} ]; then exit 0; else touch {ONCE}; "
                         "exit 42; fi", policy="Never", rule=True))
    containers = _container("regular", "sleep 100000")
    agent.write("inits.yaml", _manifest("inits", init=init, containers=containers))
    done = await agent.wait_status(
        "inits", lambda s: _all_restarted(["sidecar", "init", "source"])(s)
        and isinstance(_by_name(s)["regular"].state, st.ContainerStateRunning),
        within=90, what="the init containers restarted, regular running")
    regular = _by_name(done)["regular"]
    assert regular.restart_count == 0 and regular.last_state is None, regular
    assert done.phase == "Running"
