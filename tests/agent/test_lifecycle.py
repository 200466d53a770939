"""Container lifecycle details on real containerd: termination messages, hooks, deadlines,
pod-level cgroups with resource limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, all_ready, cond, is_true, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime


def terminated(pod_status: st.PodStatus) -> st.ContainerStateTerminated | None:
    state = pod_status.container_statuses[0].state if pod_status.container_statuses else None
    return state if isinstance(state, st.ContainerStateTerminated) else None


@pytest.mark.parametrize(
    ("command", "extra", "message"),
    [
        ("printf bye > /dev/termination-log; exit 1", "", "bye"),
        # The log's lines as the kubelet reads them back: with their newlines.
        ("echo oops; exit 2", "terminationMessagePolicy: FallbackToLogsOnError\n", "oops\n"),
        ("printf custom > /tmp/msg; exit 3", "terminationMessagePath: /tmp/msg\n", "custom"),
    ],
    ids=["file", "fallback-to-logs", "custom-path"],
)
async def test_termination_message(agent: Harness, command: str, extra: str,
                                   message: str) -> None:
    agent.write("msg.yaml", pod_manifest("msg", command=command, restart_policy="Never",
                                         container_extra=extra))
    pod_status = await agent.wait_status("msg", lambda s: terminated(s) is not None,
                                         what="container terminated")
    state = terminated(pod_status)
    assert state is not None and state.message == message


async def test_post_start_and_pre_stop_hooks_run(agent: Harness) -> None:
    shared = agent.root / "hook-marks"  # a hostPath the hooks write into
    hooks = ("lifecycle:\n"
             "  postStart:\n    exec: {command: [sh, -c, 'date > /marks/post-start']}\n"
             "  preStop:\n    exec: {command: [sh, -c, 'date > /marks/pre-stop']}\n"
             "volumeMounts:\n  - {name: marks, mountPath: /marks}\n")
    volume = (f"volumes:\n  - name: marks\n    hostPath: {{path: {shared}, "
              "type: DirectoryOrCreate}\n")
    agent.write("hooks.yaml", pod_manifest("hooks", container_extra=hooks, extra_spec=volume,
                                           grace=5))
    await agent.wait_status("hooks", all_ready, what="hooks Ready")
    await eventually(lambda: (shared / "post-start").exists(), within=30, what="postStart ran")
    assert not (shared / "pre-stop").exists()
    agent.remove("hooks.yaml")
    await eventually(lambda: agent.find("hooks") is None, within=30, what="hooks pod gone")
    assert (shared / "pre-stop").exists(), "preStop ran before the container was stopped"


async def test_failed_post_start_hook_kills_the_container(agent: Harness) -> None:
    hooks = "lifecycle:\n  postStart:\n    exec: {command: [sh, -c, 'exit 7']}\n"
    agent.write("badhook.yaml", pod_manifest("badhook", container_extra=hooks))
    await eventually(lambda: any(e.reason == "FailedPostStartHook"
                                 for e in agent.events_of("badhook")),
                     within=30, what="FailedPostStartHook event")
    await agent.wait_status("badhook", lambda s: bool(s.container_statuses)
                            and s.container_statuses[0].restart_count >= 1,
                            what="the container restarted after its hook failed")


async def test_active_deadline_fails_the_pod_and_stops_its_sandbox(agent: Harness) -> None:
    agent.write("deadline.yaml", pod_manifest("deadline", extra_spec="activeDeadlineSeconds: 2\n"))
    await agent.wait_status("deadline", all_ready, what="deadline Ready")
    pod_status = await agent.wait_status(
        "deadline", lambda s: s.phase == "Failed" and
        cond(s, st.POD_READY_TO_START_CONTAINERS).status == "False",  # type: ignore[union-attr]
        what="Failed after its deadline, sandbox stopped")
    assert pod_status.reason == "DeadlineExceeded"
    assert pod_status.message == "Pod was active on the node longer than the specified deadline"


def _cgroup(agent: Harness, relative: str, controller: str = "memory") -> Path:
    """`relative` under the agent's own cgroup root, in one v1 hierarchy."""
    root = agent.settings.node.cgroup_root.strip("/")
    return Path("/sys/fs/cgroup", controller, root) / relative.lstrip("/")


async def test_resources_map_to_a_pod_cgroup_that_is_removed_with_the_pod(
    agent: Harness,
) -> None:
    resources = ("resources:\n  requests: {cpu: 100m, memory: 32Mi}\n"
                 "  limits: {cpu: 100m, memory: 32Mi}\n")
    agent.write("limited.yaml", pod_manifest("limited", container_extra=resources))
    await agent.wait_status("limited", all_ready, what="limited Ready")
    pod, _ = agent.find("limited")  # type: ignore[misc]
    pod_cgroup = _cgroup(agent, f"/kubepods/pod{pod.uid}")  # Guaranteed: no QoS level
    assert pod_cgroup.is_dir()
    limits = [int((d / "memory.limit_in_bytes").read_text())
              for d in pod_cgroup.iterdir() if d.is_dir()]
    assert 32 * 1024 * 1024 in limits, limits
    # The pod level itself has the kubelet's pod limits: 100m → 102 shares, 10 ms quota.
    assert int((pod_cgroup / "memory.limit_in_bytes").read_text()) == 32 * 1024 * 1024
    cpu = _cgroup(agent, f"/kubepods/pod{pod.uid}", "cpu")
    assert int((cpu / "cpu.shares").read_text()) == 102
    assert int((cpu / "cpu.cfs_quota_us").read_text()) == 10_000
    agent.write("free.yaml", pod_manifest("free"))  # BestEffort: the minimum shares
    await agent.wait_status("free", all_ready, what="free Ready")
    free, _ = agent.find("free")  # type: ignore[misc]
    free_cpu = _cgroup(agent, f"/kubepods/besteffort/pod{free.uid}", "cpu")
    assert int((free_cpu / "cpu.shares").read_text()) == 2
    agent.remove("free.yaml")
    agent.remove("limited.yaml")
    await eventually(lambda: agent.find("limited") is None, within=30, what="limited gone")
    assert not pod_cgroup.exists()


async def test_removed_pods_leave_nothing_behind(agent: Harness, runtime: object) -> None:
    from nodelet.adapters import cni, mounts

    volume_spec = ("volumes:\n  - name: scratch\n    emptyDir: {}\n"
               "  - name: ram\n    emptyDir: {medium: Memory, sizeLimit: 8Mi}\n"
               "  - name: cfg\n    configMap: {name: leftovers}\n")
    mount_spec = ("volumeMounts:\n  - {name: scratch, mountPath: /scratch}\n"
                  "  - {name: ram, mountPath: /ram}\n  - {name: cfg, mountPath: /cfg}\n")
    agent.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leftovers}\n"
                           "data: {a: b}\n")
    for name in ("tidy-a", "tidy-b"):
        agent.write(f"{name}.yaml", pod_manifest(
            name, command="echo x > /scratch/f; echo y > /ram/f; sleep 1000000",
            extra_spec=volume_spec, container_extra=mount_spec))
    for name in ("tidy-a", "tidy-b"):
        await agent.wait_status(name, all_ready, what=f"{name} Ready")
    agent_ = agent.agent_or_fail()
    uids = [agent.find(n)[0].uid for n in ("tidy-a", "tidy-b")]  # type: ignore[index]
    sandboxes = [(await agent_.relister.refresh_pod(u)).sandboxes[0].id for u in uids]
    netns = [await agent_.syncer._client.sandbox_netns_path(s) for s in sandboxes]
    data_dir = agent.settings.data_dir
    assert mounts.mounts_under(data_dir / "pods"), "the Memory emptyDir is a real tmpfs"

    for name in ("tidy-a", "tidy-b"):
        agent.remove(f"{name}.yaml")
    await eventually(lambda: not agent_.pods(), within=30, what="all pods gone")
    for uid in uids:
        state = await agent_.relister.refresh_pod(uid)
        assert state.sandboxes == () and state.containers == ()
        assert not (data_dir / "pods" / uid).exists(), "volumes and pod dirs removed"
    assert agent.pod_mounts() == []  # only the agent's shared bind of its pods dir is left
    assert not any(Path(n).exists() for n in netns)
    runtime_dir = runtime.data_dir  # type: ignore[attr-defined]
    held = [p for p in cni.ipam_allocations(runtime_dir)
            if any(s in p.read_text() for s in sandboxes)]
    assert held == []


async def test_sidecars_stop_after_the_app_in_reverse_order(agent: Harness) -> None:
    """The kubelet's termination ordering: the app container gets SIGTERM first; the sidecar
    declared last gets it once the app has exited, the first one after that."""
    marks = agent.root / "stop-marks"
    mount = "volumeMounts:\n  - {name: marks, mountPath: /marks}\n"

    def trap(name: str, linger: str = "") -> str:
        # Marks its SIGTERM, lingers, marks its exit: mtimes order the two containers.
        return (f"trap '{linger}touch /marks/{name}-exited; exit 0' TERM; "
                f"while true; do sleep 0.1; done")

    def sidecar(name: str) -> str:
        return (f"  - name: {name}\n    image: localhost/nodelet/busybox:latest\n"
                f"    imagePullPolicy: IfNotPresent\n    restartPolicy: Always\n"
                f"    command: [sh, -c, {trap(name, f'touch /marks/{name}-term; sleep 1; ')!r}]\n"
                "    volumeMounts: [{name: marks, mountPath: /marks}]\n")
    spec = ("initContainers:\n" + sidecar("first") + sidecar("second") +
            f"volumes:\n  - name: marks\n    hostPath: {{path: {marks}, "
            "type: DirectoryOrCreate}\n")
    agent.write("order.yaml", pod_manifest("order", command=trap("main", "sleep 1; "),
                                           container_extra=mount, extra_spec=spec, grace=20))
    await agent.wait_status("order", all_ready, what="order Ready")
    agent.remove("order.yaml")
    await eventually(lambda: agent.find("order") is None, within=60, what="order pod gone")

    def at(mark: str) -> int:
        return (marks / mark).stat().st_mtime_ns

    assert at("main-exited") <= at("second-term"), "second sidecar stopped before the app"
    assert at("second-exited") <= at("first-term"), "first sidecar stopped before the second"


async def test_an_edited_static_pod_starts_after_the_old_one_terminated(agent: Harness) -> None:
    """An edited manifest is a new pod (a new UID): as the kubelet's pod workers allow a
    static pod to start (allowStaticPodStart), it starts only once the old pod of the same
    name has terminated — its `sleep` ignores SIGTERM, so that takes the grace period."""
    full = f"edit-{agent.settings.node_name}"
    agent.write("edit.yaml", pod_manifest("edit", grace=3))
    await agent.wait_status("edit", all_ready, what="the first version Ready")
    found = agent.find("edit")
    assert found is not None
    old = found[0].uid
    agent.write("edit.yaml", pod_manifest("edit", grace=3,
                                          container_extra="env: [{name: V, value: '2'}]"))
    nodelet = agent.agent_or_fail()
    overlaps: list[str] = []

    def new_ready() -> bool:
        """Both versions' states at this instant; True once the new one is Ready."""
        versions = {uid: (pod, nodelet.statuses.get(uid)) for uid in nodelet.workers.uids()
                    if (pod := nodelet.workers.pod(uid)) is not None and pod.name == full}
        new = [s for uid, (_, s) in versions.items() if uid != old]
        started = [s for s in new if is_true(s, st.POD_READY_TO_START_CONTAINERS)]
        if started and old in versions:
            overlaps.append(f"the new version's sandbox is up while {old} is still there")
        return any(s is not None and all_ready(s) for s in started)

    await eventually(new_ready, within=60, every=0.05, what="the new version Ready")
    assert not overlaps, overlaps[0]


async def test_a_manifest_removed_and_written_again_restarts_its_pod(agent: Harness) -> None:
    """As the kubelet: a static pod's manifest removed and the same one written again (the
    same UID) terminates the pod, then starts it again in a new sandbox, its container with
    restartCount 1 (the kubelet keeps a terminated pod's exited containers, and a pod of the
    same UID restarts after them) — also when both happen before the directory is read, as
    the kubelet hears the removal on its own."""
    text = pod_manifest("again")
    path = agent.write("again.yaml", text)
    first = await agent.wait_status("again", all_ready, what="the pod Ready")
    found = agent.find("again")
    assert found is not None
    uid = found[0].uid
    path.unlink()
    path.write_text(text)  # written in place, as the node e2e suite writes manifests

    def restarted(s: st.PodStatus) -> bool:
        return all_ready(s) and s.container_statuses[0].restart_count == 1

    again = await agent.wait_status("again", restarted, within=60,
                                    what="the pod Ready again, its container restarted once")
    found = agent.find("again")
    assert found is not None and found[0].uid == uid
    assert again.container_statuses[0].container_id != first.container_statuses[0].container_id
    assert isinstance(again.container_statuses[0].last_state, st.ContainerStateTerminated)
    nodelet = agent.agent_or_fail()
    state = await nodelet.relister.refresh_pod(uid)
    assert sorted(s.attempt for s in state.sandboxes) == [0, 1]
