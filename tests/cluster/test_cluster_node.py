"""Node registration, node status and the Lease of cluster mode alone (no containers) on the
real kube-apiserver, through the fault proxy (tests/support/faultproxy.py); kubeconfig errors
and the machine facts the Node reports."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from nodelet.adapters import checkpoint, host, kubeconfig
from nodelet.services.cluster import cluster, nodestatus
from nodelet.services.status import recording, statuses
from support.clusterfixtures import Runtime
from support.controlplane import AdminClient, host_address, node_path
from support.faultproxy import FaultProxy
from support.polling import eventually

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def ready(node: dict[str, Any] | None) -> dict[str, Any]:
    return next(c for c in (node or {})["status"]["conditions"] if c["type"] == "Ready")


async def test_node_registered_ready_with_capacity_and_lease_renewed(
        make_rig: Any, admin: AdminClient) -> None:
    async with make_rig() as rig:
        node = await admin.get(node_path(rig.node))
        assert node is not None
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == rig.node
        status = node["status"]
        assert ready(node)["status"] == "True" and ready(node)["reason"] == "KubeletReady"
        assert int(status["capacity"]["cpu"]) >= 1 and status["capacity"]["pods"] == "110"
        assert status["capacity"]["memory"].endswith("Ki")
        assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://1.6.20"
        assert {"type": "InternalIP", "address": host_address()} in status["addresses"]
        assert node["spec"]["podCIDRs"] == ["10.77.0.0/24"]
        lease = await admin.get(f"{LEASES}/{rig.node}")
        assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["spec"]["holderIdentity"] == rig.node
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        first = lease["spec"]["renewTime"]
        await eventually(lambda: admin.get(f"{LEASES}/{rig.node}"), within=5,
                         until=lambda x: x is not None and x["spec"]["renewTime"] != first,
                         what="lease renewed")
        await eventually(lambda: rig.mode.lease.renewals >= 3, within=5, what="three renewals")


async def test_node_not_ready_when_network_is_not_and_times_move_only_on_change(
        make_rig: Any, admin: AdminClient) -> None:
    async with make_rig() as rig:
        since = ready(await admin.get(node_path(rig.node)))["lastTransitionTime"]
        reports = rig.mode.node.reports
        rig.runtime.network_ready = False

        async def not_ready() -> dict[str, Any] | None:
            # The server may answer the PATCH before the reporter counted it: wait for both.
            cond = ready(await admin.get(node_path(rig.node)))
            counted = rig.mode.node.reports > reports
            return cond if cond["status"] == "False" and counted else None

        cond = await eventually(not_ready, within=10, what="node NotReady")
        assert "NetworkReady=false" in cond["message"] and "cni config" in cond["message"]
        assert cond["reason"] == "KubeletNotReady"
        # Unchanged status is not re-sent every period (the Lease is the heartbeat).
        sent = rig.mode.node.reports
        renewals = rig.mode.lease.renewals
        await eventually(lambda: rig.mode.lease.renewals >= renewals + 4, within=10,
                         what="lease renewals")
        assert rig.mode.node.reports == sent
        assert sent > reports
        assert datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00")) >= \
            datetime.fromisoformat(since.replace("Z", "+00:00"))


async def test_restart_adopts_the_existing_node_and_lease(
        make_rig: Any, admin: AdminClient, proxied: FaultProxy) -> None:
    first = make_rig()
    async with first as rig:
        uid = (await admin.get(node_path(rig.node)) or {})["metadata"]["uid"]
    async with make_rig() as again:
        assert again.node == rig.node
        assert (await admin.get(node_path(rig.node)) or {})["metadata"]["uid"] == uid
    # The second start's create was answered AlreadyExists (409), the Lease adopted.
    assert proxied.count(method="POST", path="^/api/v1/nodes$") == 2
    assert proxied.count(method="POST", path="^/api/v1/nodes$", status=409) == 1
    assert proxied.count(method="POST", path="/leases$") == 1


async def test_unreachable_api_server_fails_start_with_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text('{"current-context": "x", "contexts": [{"name": "x", "context": '
                      '{"cluster": "c", "user": "u"}}], "clusters": [{"name": "c", "cluster": '
                      '{"server": "http://127.0.0.1:9"}}], "users": [{"name": "u", "user": '
                      '{"token": "t"}}]}')
    store = checkpoint.Checkpoint.open(tmp_path / "checkpoint.db")
    clock = datetime.now
    try:
        mode = cluster.ClusterMode(
            settings=cluster.ClusterSettings(kubeconfig=config, start_timeout=1.0),
            node=cluster.NodeIdentity(name="n1", host_ip="192.0.2.10"),
            statuses=statuses.StatusManager(checkpoint=store, clock=clock),
            recorder=recording.EventRecorder(checkpoint=store, node_name="n1", clock=clock,
                                             max_events=10),
            views=nodestatus.NodeViews(runtime=Runtime()),
            listeners=cluster.Listeners(on_pods=lambda desired: None), clock=clock)
        with pytest.raises(cluster.ClusterError, match="cannot join the cluster"):
            await mode.start()
        await mode.stop()
    finally:
        store.close()


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
