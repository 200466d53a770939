"""Nothing in a pod's life waits for the periodic resync (docs/timing.md), on real containerd.

These agents keep the default resync period (60 s) and sync retry (10 s), not the fast ones of
the other agent tests: each rule here must act through its own wake-up, and every bound below
is far under a minute, so a rule that waited for the resync fails its test.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from test_images import image_pod
from test_logs import logs

from conftest import AgentFactory
from nodelet import settings
from nodelet.model.core import events as ev
from nodelet.model.core import status as st
from support.harness import Harness, cond, pod_manifest, waiting_reason
from support.polling import eventually

pytestmark = pytest.mark.runtime

DEFAULTS = settings.SyncSettings()
# Seconds within which each rule must act, as the acceptance states them.
READY_WITHIN = 5.0
FAILED_WITHIN = 5.0
DEADLINE_WITHIN = 2.0


@pytest.fixture
async def agent(make_agent: AgentFactory) -> Harness:
    """An agent whose resync and retry are the defaults: a resync would come after 60 s."""
    return await make_agent(sync_settings={"resync_period": DEFAULTS.resync_period,
                                           "retry_period": DEFAULTS.retry_period})


def started_at(pod_status: st.PodStatus, name: str = "main") -> datetime | None:
    for c in (*pod_status.init_container_statuses, *pod_status.container_statuses):
        if c.name == name and isinstance(c.state, st.ContainerStateRunning):
            return c.state.started_at
    return None


def ready_since(pod_status: st.PodStatus) -> datetime | None:
    ready = cond(pod_status, st.READY)
    return ready.last_transition_time if ready and ready.status == "True" else None


def first_unhealthy(agent: Harness, name: str) -> float | None:
    seen = [e.first_timestamp.timestamp() for e in agent.events_of(name)
            if e.reason == ev.UNHEALTHY]
    return min(seen) if seen else None


async def ready_after_start(agent: Harness, name: str, container: str = "main") -> float:
    """Seconds from the container's start to the pod's Ready condition turning True."""
    pod_status = await agent.wait_status(name, lambda s: ready_since(s) is not None,
                                         within=30, what=f"{name} Ready")
    began, ready = started_at(pod_status, container), ready_since(pod_status)
    assert began is not None and ready is not None, pod_status
    return (ready - began).total_seconds()


@pytest.mark.parametrize("probe", [
    "readinessProbe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n",
    "readinessProbe: {exec: {command: [\"true\"]}}\n",  # the defaults: every 10 s
    "readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}\n",
    "startupProbe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n"
    "readinessProbe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n",
], ids=["exec-every-second", "exec-defaults", "tcp", "startup-then-readiness"])
async def test_a_passing_readiness_probe_makes_the_pod_ready_at_once(
        agent: Harness, probe: str) -> None:
    agent.write("ready.yaml", pod_manifest(
        "ready", command="httpd -f -p 8080", container_extra=probe))
    took = await ready_after_start(agent, "ready")
    print(f"container started -> Ready: {took:.2f} s")
    assert took <= READY_WITHIN, f"Ready {took:.1f} s after the container started"


async def test_a_sidecars_readiness_probe_counts_at_once(agent: Harness) -> None:
    """A restartable init container (sidecar) with a readiness probe: the app container starts
    once the sidecar is started, and the pod is Ready once both are (NodeConformance's
    restartable-init-container probe tests)."""
    sidecar = (
        "initContainers:\n"
        "  - name: sidecar\n"
        "    image: localhost/nodelet/busybox:latest\n"
        "    imagePullPolicy: IfNotPresent\n"
        "    restartPolicy: Always\n"
        "    command: [sh, -c, 'sleep 1000000']\n"
        "    readinessProbe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n")
    agent.write("side.yaml", pod_manifest("side", extra_spec=sidecar))
    took = await ready_after_start(agent, "side", container="sidecar")
    assert took <= READY_WITHIN, f"Ready {took:.1f} s after the sidecar started"


@pytest.mark.parametrize(("policy", "done"), [
    ("Never", lambda s: s.phase == "Failed"),
    ("Always", lambda s: bool(s.container_statuses)
     and s.container_statuses[0].restart_count >= 1),
], ids=["never-fails-the-pod", "always-restarts"])
async def test_a_failing_liveness_probe_acts_at_once(agent: Harness, policy: str,
                                                     done: object) -> None:
    probe = "livenessProbe: {exec: {command: [\"false\"]}, periodSeconds: 1, failureThreshold: 1}\n"
    agent.write("live.yaml", pod_manifest("live", restart_policy=policy, container_extra=probe))
    await agent.wait_status("live", done, within=30,  # type: ignore[arg-type]
                            what=f"liveness failure acted on ({policy})")
    acted, failed = time.time(), first_unhealthy(agent, "live")
    assert failed is not None
    print(f"first failed probe -> acted: {acted - failed:.2f} s")
    assert acted - failed <= FAILED_WITHIN, f"acted {acted - failed:.1f} s after the failure"


async def test_a_failing_startup_probe_restarts_within_its_own_grace(agent: Harness) -> None:
    """The probe's terminationGracePeriodSeconds (1) overrides the pod's (30): the container
    is restarted at once ("should override timeoutGracePeriodSeconds when StartupProbe field
    is set")."""
    probe = ("startupProbe: {exec: {command: [\"false\"]}, periodSeconds: 1, "
             "failureThreshold: 1, terminationGracePeriodSeconds: 1}\n")
    agent.write("boot.yaml", pod_manifest("boot", grace=30, container_extra=probe))
    await agent.wait_status(
        "boot", lambda s: bool(s.container_statuses)
        and s.container_statuses[0].restart_count >= 1, within=30, what="restarted")
    acted, failed = time.time(), first_unhealthy(agent, "boot")
    assert failed is not None
    assert acted - failed <= FAILED_WITHIN + 1, f"restarted {acted - failed:.1f} s after"


async def test_active_deadline_fails_the_pod_at_its_deadline(agent: Harness) -> None:
    agent.write("deadline.yaml", pod_manifest("deadline", extra_spec="activeDeadlineSeconds: 5\n"))
    pod_status = await agent.wait_status("deadline", lambda s: s.phase == "Failed", within=30,
                                         what="Failed by its deadline")
    failed = time.time()
    assert pod_status.reason == "DeadlineExceeded" and pod_status.start_time is not None
    late = failed - (pod_status.start_time.timestamp() + 5)
    print(f"deadline -> Failed: {late:.2f} s")
    assert -0.5 <= late <= DEADLINE_WITHIN, f"Failed {late:.1f} s after the deadline"


async def test_a_deadline_is_kept_while_the_pods_syncs_fail(agent: Harness) -> None:
    """Its hostPath volume (type File) does not exist, so every sync fails at the volumes and
    is retried after 10 s; the deadline still acts on time."""
    volume = ("activeDeadlineSeconds: 3\n"
              "volumes: [{name: f, hostPath: {path: /nonexistent/nodelet-test, type: File}}]\n")
    agent.write("stuck.yaml", pod_manifest(
        "stuck", extra_spec=volume, container_extra="volumeMounts: [{name: f, mountPath: /f}]\n"))
    pod_status = await agent.wait_status("stuck", lambda s: s.phase == "Failed", within=30,
                                         what="Failed by its deadline")
    assert any(e.reason == ev.FAILED_MOUNT for e in agent.events_of("stuck"))
    assert pod_status.start_time is not None
    late = time.time() - (pod_status.start_time.timestamp() + 3)
    assert late <= DEADLINE_WITHIN, f"Failed {late:.1f} s after the deadline"


async def test_crash_loop_back_off_ends_on_time(make_agent: AgentFactory) -> None:
    """Back-off 1 s doubling: the third restart is due about 1 + 2 + 4 s after the first
    exit; no event announces the back-off's end, only the pod's own wake-up."""
    agent = await make_agent(sync_settings={"resync_period": DEFAULTS.resync_period,
                                            "retry_period": DEFAULTS.retry_period})
    agent.write("crash.yaml", pod_manifest("crash", command="exit 1"))
    await agent.wait_status("crash", lambda s: bool(s.container_statuses)
                            and s.container_statuses[0].restart_count >= 3, within=30,
                            what="three restarts")


async def test_an_image_back_off_shows_in_the_status_during_its_window(
    make_agent: AgentFactory,
) -> None:
    """A pull back-off of a minute: the pod is synced again as a failed sync is (10 s, up to
    15), inside the window, so the status says ImagePullBackOff long before the next pull —
    not only for the instant before it (the differential harness's image-unreachable case)."""
    agent = await make_agent(sync_settings={"resync_period": DEFAULTS.resync_period,
                                            "retry_period": DEFAULTS.retry_period,
                                            "image_backoff": 60.0, "image_backoff_max": 60.0})
    agent.write("unreachable.yaml", image_pod("unreachable", "127.0.0.1:9/nodelet/absent:1",
                                              "IfNotPresent"))
    await agent.wait_status("unreachable", lambda s: waiting_reason(s) == "ErrImagePull",
                            within=30, what="ErrImagePull after the first pull")
    failed_at = time.monotonic()
    await agent.wait_status("unreachable", lambda s: waiting_reason(s) == "ImagePullBackOff",
                            within=DEFAULTS.retry_period * (1 + DEFAULTS.retry_jitter) + 5,
                            what="ImagePullBackOff within a failed sync's retry")
    pulls = [e for e in agent.events_of("unreachable") if e.reason == ev.PULLING]
    assert sum(e.count for e in pulls) == 1, (pulls, time.monotonic() - failed_at)


# -- a finished pod -------------------------------------------------------------------------


def succeeded(pod_status: st.PodStatus) -> bool:
    return pod_status.phase == "Succeeded"


async def test_a_completed_pod_keeps_its_logs_and_ip_until_it_is_deleted(
        agent: Harness) -> None:
    agent.write("job.yaml", pod_manifest("job", command="echo done-1; echo done-2",
                                         restart_policy="Never"))
    done = await agent.wait_status("job", succeeded, within=30, what="job Succeeded")
    sandbox = cond(done, st.POD_READY_TO_START_CONTAINERS)
    # Its sandbox is stopped (the condition False), its IP is still in its status.
    await agent.wait_status("job", lambda s: cond(s, st.POD_READY_TO_START_CONTAINERS)
                            .status == "False",  # type: ignore[union-attr]
                            what="sandbox stopped")
    assert sandbox is not None
    finished = agent.status_of("job")
    assert finished is not None and finished.pod_ips, finished
    ips = finished.pod_ips
    result = await logs(agent, "job")
    assert (result.code, result.out) == (0, "done-1\ndone-2\n"), result

    # A restart of the agent: the pod is still Completed, with its logs and its IP.
    await agent.stop(terminate_pods=False)
    await agent.start()
    again = await agent.wait_status("job", succeeded, within=30, what="Succeeded after restart")
    assert again.pod_ips == ips, again
    result = await logs(agent, "job")
    assert (result.code, result.out) == (0, "done-1\ndone-2\n"), result

    agent.remove("job.yaml")
    await eventually(lambda: agent.find("job") is None, within=30, what="job pod gone")
    logs_root = agent.settings.data_dir / "logs"
    await eventually(lambda: [p for p in logs_root.glob("default_job-*")] if logs_root.exists()
                     else [], until=lambda left: not left, within=30,
                     what="the deleted pod's log directory removed")
    gone = await logs(agent, "job")
    assert gone.code != 0, gone


async def test_a_failed_pods_previous_logs_stay_readable(agent: Harness) -> None:
    """restartPolicy OnFailure: the first instance fails, the second succeeds; both logs stay
    (`--previous` reads the first) once the pod is Completed."""
    marker = "/tmp/ran-once"
    command = f"if [ -e {marker} ]; then echo second; else touch {marker}; echo first; exit 1; fi"
    agent.write("retry.yaml", pod_manifest("retry", command=command,
                                           restart_policy="OnFailure",
                                           container_extra="volumeMounts: [{name: t, mountPath: "
                                                           "/tmp}]\n",
                                           extra_spec="volumes: [{name: t, emptyDir: {}}]\n"))
    await agent.wait_status("retry", succeeded, within=60, what="retry Succeeded")
    current = await logs(agent, "retry")
    previous = await logs(agent, "retry", "--previous")
    assert (current.code, current.out) == (0, "second\n"), current
    assert (previous.code, previous.out) == (0, "first\n"), previous


SIDECAR = """\
initContainers:
  - name: sidecar
    image: localhost/nodelet/busybox:latest
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: [sh, -c, '{command}']
    volumeMounts: [{{name: marks, mountPath: /marks}}]
{probe}volumes: [{{name: marks, emptyDir: {{}}}}]
"""
APP_MARK = "touch /marks/app-started; exec sleep 1000000"
MOUNT = "volumeMounts: [{name: marks, mountPath: /marks}]\n"


async def test_the_app_waits_for_its_sidecars_startup_probe(agent: Harness) -> None:
    """The kubelet's init order: the app container starts only once the sidecar before it
    passed its startup probe (here 2 s after it started), and then at once."""
    spec = SIDECAR.format(
        command="sleep 2; touch /marks/sidecar-ready; exec sleep 1000000",
        probe="    startupProbe: {exec: {command: [test, -e, /marks/sidecar-ready]}, "
              "periodSeconds: 1}\n")
    agent.write("gated.yaml", pod_manifest("gated", command=APP_MARK, extra_spec=spec,
                                           container_extra=MOUNT))
    pod_status = await agent.wait_status("gated", lambda s: started_at(s) is not None,
                                         within=30, what="app container started")
    sidecar = next(c for c in pod_status.init_container_statuses if c.name == "sidecar")
    assert sidecar.started, pod_status
    app, side = started_at(pod_status), started_at(pod_status, "sidecar")
    assert app is not None and side is not None
    assert (app - side).total_seconds() >= 2, (side, app)  # not before the probe passed
    assert (app - side).total_seconds() <= 2 + READY_WITHIN, (side, app)


async def test_the_app_starts_at_once_after_a_sidecar_without_probe(agent: Harness) -> None:
    """A sidecar without a startup probe lets the app go as soon as it runs, which no event
    reports: the pod is synced again at once, not at the resync."""
    spec = SIDECAR.format(command="exec sleep 1000000", probe="")
    agent.write("ungated.yaml", pod_manifest("ungated", command=APP_MARK, extra_spec=spec,
                                             container_extra=MOUNT))
    pod_status = await agent.wait_status("ungated", lambda s: started_at(s) is not None,
                                         within=30, what="app container started")
    app, side = started_at(pod_status), started_at(pod_status, "sidecar")
    assert app is not None and side is not None
    assert (app - side).total_seconds() <= READY_WITHIN, (side, app)
