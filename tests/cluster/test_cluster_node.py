"""Node registration, node status and the Lease against the test API server."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from kubeapi import ClusterRig, KubeApiServer
from nodelet.adapters import host, kubeconfig
from nodelet.services import cluster
from polling import eventually


def ready(node: dict) -> dict:
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


async def test_node_registered_ready_with_capacity_and_lease_renewed(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        node = server.get("nodes", "", "n1")
        assert node is not None
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
        status = node["status"]
        assert ready(node)["status"] == "True" and ready(node)["reason"] == "KubeletReady"
        assert int(status["capacity"]["cpu"]) >= 1 and status["capacity"]["pods"] == "110"
        assert status["capacity"]["memory"].endswith("Ki")
        assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://1.6.20"
        assert {"type": "InternalIP", "address": "192.0.2.10"} in status["addresses"]
        assert node["spec"]["podCIDRs"] == ["10.77.0.0/24"]
        lease = server.get("leases", "kube-node-lease", "n1")
        assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["spec"]["holderIdentity"] == "n1"
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        first = lease["spec"]["renewTime"]

        def renewed() -> bool:
            now = server.get("leases", "kube-node-lease", "n1")
            return now is not None and now["spec"]["renewTime"] != first

        await eventually(renewed, within=5, what="lease renewed")
        await eventually(lambda: rig.mode.lease.renewals >= 3, within=5, what="three renewals")


async def test_node_not_ready_when_network_is_not_and_times_move_only_on_change(
        server: KubeApiServer, tmp_path: Path) -> None:
    async with ClusterRig(server, tmp_path) as rig:
        since = ready(server.get("nodes", "", "n1"))["lastTransitionTime"]
        reports = rig.mode.node.reports
        rig.runtime.network_ready = False

        def not_ready() -> dict | None:
            # The server may hold the PATCH before the reporter counted it: wait for both.
            cond = ready(server.get("nodes", "", "n1"))
            counted = rig.mode.node.reports > reports
            return cond if cond["status"] == "False" and counted else None

        cond = await eventually(not_ready, within=5, what="node NotReady")
        assert "NetworkReady=false" in cond["message"] and "cni config" in cond["message"]
        assert cond["reason"] == "KubeletNotReady"
        # Unchanged status is not re-sent every period (the Lease is the heartbeat).
        sent = rig.mode.node.reports
        await eventually(lambda: rig.mode.lease.renewals >= 4, within=5, what="lease renewals")
        assert rig.mode.node.reports == sent
        assert sent > reports
        assert datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00")) >= \
            datetime.fromisoformat(since.replace("Z", "+00:00"))


async def test_restart_adopts_the_existing_node_and_lease(
        server: KubeApiServer, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with ClusterRig(server, tmp_path / "a"):
        uid = server.get("nodes", "", "n1")["metadata"]["uid"]
    async with ClusterRig(server, tmp_path / "b"):
        assert server.get("nodes", "", "n1")["metadata"]["uid"] == uid
    assert server.count(verb="create", resource="nodes") == 2  # the second got AlreadyExists
    assert server.count(verb="create", resource="leases") == 1


async def test_unreachable_api_server_fails_start_with_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text('{"current-context": "x", "contexts": [{"name": "x", "context": '
                      '{"cluster": "c", "user": "u"}}], "clusters": [{"name": "c", "cluster": '
                      '{"server": "http://127.0.0.1:9"}}], "users": [{"name": "u", "user": '
                      '{"token": "t"}}]}')
    rig = ClusterRig.__new__(ClusterRig)
    server = KubeApiServer()
    ClusterRig.__init__(rig, server, tmp_path, kubeconfig=config, start_timeout=1.0)
    with pytest.raises(cluster.ClusterError, match="cannot join the cluster"):
        await rig.mode.start()
    rig.checkpoint.close()


def test_kubeconfig_errors_name_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text("current-context: x\ncontexts: []\n")
    with pytest.raises(kubeconfig.KubeconfigError, match="no context named 'x'"):
        kubeconfig.load(path)
    path.write_text("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                    "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
                    "users: [{name: u, user: {exec: {command: aws}}}]\n")
    with pytest.raises(kubeconfig.KubeconfigError, match="exec/auth-provider"):
        kubeconfig.load(path)


def test_machine_facts_are_read_from_proc_and_etc(tmp_path: Path) -> None:
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemFree: 12 kB\nMemTotal:  2048 kB\n")
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text("boot-1\n")
    (tmp_path / "etc/machine-id").write_text("machine-1\n")
    (tmp_path / "etc/os-release").write_text('NAME=Debian\nPRETTY_NAME="Debian 12"\n')
    facts = host.machine_facts(tmp_path)
    assert (facts.memory_bytes, facts.boot_id, facts.machine_id, facts.os_image) == (
        2048 * 1024, "boot-1", "machine-1", "Debian 12")
    assert facts.cpus >= 1
    empty = host.machine_facts(tmp_path / "missing")  # unreadable files: empty values
    assert (empty.memory_bytes, empty.machine_id, empty.os_image) == (0, "", "")
