"""subPath mounts on a real agent: bound safely (a symlink planted by a container of the pod
never gives another container the host), created writable for the pod's fsGroup, reused when a
container restarts, gone with the pod; and mountPropagation on nodelet's own volumes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from conftest import Instance
from nodelet.adapters import mounts
from nodelet.model.core import status as st
from support.harness import Harness, exec_in
from support.polling import eventually

pytestmark = pytest.mark.runtime


def state_of(pod_status: st.PodStatus | None, name: str) -> st.ContainerStateValue | None:
    if pod_status is None:
        return None
    found = [c.state for c in pod_status.container_statuses if c.name == name]
    return found[0] if found else None


def status_of(pod_status: st.PodStatus, name: str) -> st.ContainerStatus:
    return next(c for c in pod_status.container_statuses if c.name == name)


def config_error(pod_status: st.PodStatus | None, name: str) -> str | None:
    """The message of the container's CreateContainerConfigError, if it waits with one."""
    state = state_of(pod_status, name)
    if isinstance(state, st.ContainerStateWaiting) and \
            state.reason == "CreateContainerConfigError":
        return state.message
    return None


def running(pod_status: st.PodStatus | None, name: str) -> bool:
    return isinstance(state_of(pod_status, name), st.ContainerStateRunning)


def mount_count(path: Path) -> int:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return sum(1 for line in lines if line.split()[4] == str(path))


# `init` plants `escape -> /` before `early` is created; `planter` swaps `work` for a symlink
# to / once `victim` has used it, so `victim` meets the symlink when it restarts.
ESCAPE_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: escape}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
    - {name: data, emptyDir: {}}
  initContainers:
    - name: init
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "ln -s / /data/escape"]
      volumeMounts:
        - {name: data, mountPath: /data}
  containers:
    - name: planter
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "until [ -e /data/work/ran ]; do sleep 0.1; done;
                             rm -rf /data/work; ln -s / /data/work; sleep 1000000"]
      volumeMounts:
        - {name: data, mountPath: /data}
    - name: victim
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "touch /w/MARKER; touch /w/ran; sleep 1; exit 1"]
      volumeMounts:
        - {name: data, mountPath: /w, subPath: work}
    - name: early
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "touch /e/MARKER; sleep 1000000"]
      volumeMounts:
        - {name: data, mountPath: /e, subPath: escape}
"""


async def test_planted_symlink_never_mounts_the_host(agent: Harness) -> None:
    """Both subPaths are refused when the container is created (for `victim`, at its
    restart) with the kubelet's CreateContainerConfigError, and the host is untouched."""
    marker = f"nodelet-escape-{uuid.uuid4().hex[:8]}"
    agent.write("pod.yaml", ESCAPE_POD.replace("MARKER", marker))
    pod_status = await agent.wait_status(
        "escape", lambda s: bool(config_error(s, "early") and config_error(s, "victim"))
        and running(s, "planter"), within=60,
        what="early and the restarted victim refused, planter running")
    outside = "resolves outside the volume: /"
    assert config_error(pod_status, "early") == (
        'failed to prepare subPath for volumeMount "data" of container "early": '
        f'subPath "escape" {outside}')
    assert config_error(pod_status, "victim") == (
        'failed to prepare subPath for volumeMount "data" of container "victim": '
        f'subPath "work" {outside}')
    # victim ran once, on the volume's own directory.
    assert isinstance(status_of(pod_status, "victim").last_state, st.ContainerStateTerminated)
    assert any(e.reason == "Failed" and f'subPath "escape" {outside}' in e.message
               for e in agent.events_of("escape"))
    assert not Path("/", marker).exists() and not Path("/ran").exists()
    pod, _ = agent.find("escape")  # type: ignore[misc]
    subpaths = agent.settings.data_dir / "pods" / pod.uid / "volume-subpaths"
    # The only bind ever made: victim's first, of the directory it ran on.
    assert mounts.mounts_under(subpaths) == [subpaths / "data" / "victim" / "0"]
    agent.remove("pod.yaml")
    await eventually(lambda: agent.find("escape") is None, within=30, what="the pod gone")
    assert agent.pod_mounts() == [] and not subpaths.exists()


SUB_PATH_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: subpaths}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000, fsGroup: 2000}
  volumes:
    - {name: data, emptyDir: {}}
    - {name: cfg, configMap: {name: app}}
  containers:
    - name: main
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "sleep 1000000"]
      env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
      volumeMounts:
        - {name: data, mountPath: /logs, subPathExpr: "$(POD_NAME)/logs"}
        - {name: data, mountPath: /fixed, subPath: fixed}
        - {name: cfg, mountPath: /etc/app.conf, subPath: app.conf}
        - {name: data, mountPath: /shared, mountPropagation: HostToContainer}
    - name: restarts
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "echo run >> /r/runs; sleep 0.5; exit 1"]
      volumeMounts:
        - {name: data, mountPath: /r, subPath: restarts}
"""

CONFIG = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {app.conf: setting=1}\n"


async def test_sub_paths_work_for_the_pods_user_and_are_reused(
        agent: Harness, runtime: Instance) -> None:
    agent.write("cm.yaml", CONFIG)
    agent.write("pod.yaml", SUB_PATH_POD)
    pod_status = await agent.wait_status(
        "subpaths", lambda s: running(s, "main") and status_of(s, "restarts").restart_count >= 2,
        within=60, what="main running, restarts restarted twice")
    result = await exec_in(runtime.client, pod_status,
                           "id -u; echo hi > /logs/f && echo x > /fixed/g && cat /etc/app.conf")
    assert result.exit_code == 0 and result.stdout.decode() == "1000\nsetting=1", result
    pod, _ = agent.find("subpaths")  # type: ignore[misc]
    pod_dir = agent.settings.data_dir / "pods" / pod.uid
    volume = pod_dir / "volumes" / "kubernetes.io~empty-dir" / "data"
    logs = volume / "subpaths-testnode" / "logs"
    assert (logs / "f").read_text() == "hi\n" and (volume / "fixed" / "g").exists()
    # Made with the volume root's mode and group (setgid): writable for the fsGroup.
    for directory in (logs.parent, logs, volume / "fixed"):
        info = directory.stat()
        assert (oct(info.st_mode & 0o7777), info.st_gid) == (oct(0o2777), 2000), directory
    # Each instance of `restarts` wrote into the same directory, through one bind mount.
    assert (volume / "restarts" / "runs").read_text().count("run") >= 2
    binds = pod_dir / "volume-subpaths"
    assert mount_count(binds / "data" / "restarts" / "0") == 1
    assert sorted(p.relative_to(binds).as_posix() for p in mounts.mounts_under(binds)) == [
        "cfg/main/2", "data/main/0", "data/main/1", "data/restarts/0"]

    # HostToContainer: a mount made on the node below the volume reaches the container.
    (volume / "late").mkdir()
    await mounts.mount_tmpfs(volume / "late", size=1 << 20, mode=0o755, limit=10)
    result = await exec_in(runtime.client, pod_status, "grep ' /shared/late ' /proc/mounts")
    assert result.exit_code == 0 and b"tmpfs" in result.stdout, result

    agent.remove("pod.yaml")
    await eventually(lambda: agent.find("subpaths") is None, within=30, what="the pod gone")
    assert agent.pod_mounts() == [] and not pod_dir.exists()


async def test_pods_dir_is_on_a_shared_mount(agent: Harness) -> None:
    """Bound onto itself and made shared, unless the mount it is on was shared already."""
    pods_dir = str((agent.settings.data_dir / "pods").resolve())
    entries = [line.split(" - ")[0].split() for line in
               Path("/proc/self/mountinfo").read_text().splitlines()]
    above = [e for e in entries if (pods_dir + "/").startswith(e[4].rstrip("/") + "/")]
    on = max(reversed(above), key=lambda e: len(e[4]))  # the last mounted of the deepest
    assert any(field.startswith("shared:") for field in on[6:]), on
    assert sum(1 for e in entries if e[4] == pods_dir) <= 1  # never stacked
