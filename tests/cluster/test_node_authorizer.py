"""The test API server's Node authorizer and NodeRestriction mode refuses what kube-apiserver
refuses a node, with its words: another node's Secrets, other nodes' objects, restricted labels;
and the bootstrap token authenticator admits only CSRs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

import kubeauth
from kubeapi import KubeApiServer, pod_object
from nodelet.adapters import kube, kubeconfig

PATCH = kube.STRATEGIC


@pytest_asyncio.fixture(loop_scope="session")
async def node(server: KubeApiServer, tmp_path: Path) -> AsyncIterator[kube.KubeClient]:
    """Node n1's client; pods `mine` (on n1) and `theirs` (on n2) read Secrets of the same
    names; nodes n1 and n2 exist."""
    for name, on in (("mine", "n1"), ("theirs", "n2")):
        server.create("secrets", {"metadata": {"name": name, "namespace": "default"}})
        server.create("configmaps", {"metadata": {"name": name, "namespace": "default"}})
        server.create("pods", pod_object(name, node=on, volumes=[
            {"name": "s", "secret": {"secretName": name}},
            {"name": "c", "projected": {"sources": [{"configMap": {"name": name}}]}}]))
        server.create("nodes", {"metadata": {"name": on}})
    client = kube.KubeClient(kubeconfig.load(server.write_kubeconfig(tmp_path / "kc")))
    yield client
    await client.close()


async def refused(call: object) -> str:
    with pytest.raises(kube.KubeError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.status == 403 and caught.value.reason == "Forbidden", caught.value
    return str(caught.value)


async def test_a_node_reads_only_the_objects_of_its_own_pods(node: kube.KubeClient) -> None:
    secrets = kube.core_path("secrets", "default")
    assert (await node.request("GET", f"{secrets}/mine"))["metadata"]["name"] == "mine"
    # The per-object list and watch nodelet uses name the object by field selector.
    items, _ = await node.list_objects(secrets, field_selector="metadata.name=mine")
    assert [i["metadata"]["name"] for i in items] == ["mine"]
    configmaps = kube.core_path("configmaps", "default")
    items, _ = await node.list_objects(configmaps, field_selector="metadata.name=mine")
    assert len(items) == 1  # through a projected volume
    message = await refused(node.request("GET", f"{secrets}/theirs"))
    assert ('secrets "theirs" is forbidden: User "system:node:n1" cannot get resource "secrets" '
            'in API group "" in the namespace "default": no relationship found between node '
            "'n1' and this object") in message
    await refused(node.list_objects(configmaps, field_selector="metadata.name=theirs"))
    assert "No Object name found" in await refused(node.list_objects(secrets))  # all of them
    await refused(node.request("DELETE", f"{secrets}/mine"))  # reading only


async def test_a_node_writes_only_its_own_node_lease_and_pods(
        server: KubeApiServer, node: kube.KubeClient) -> None:
    message = await refused(node.patch_node("n2", {"metadata": {"labels": {"a": "b"}}}))
    assert 'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"' in message
    await node.patch_node("n1", {"metadata": {"labels": {"example.com/role": "edge"}}})
    message = await refused(node.patch_node(
        "n1", {"metadata": {"labels": {"node-restriction.kubernetes.io/pool": "a"}}}))
    assert ('nodes "n1" is forbidden: is not allowed to modify labels: '
            "node-restriction.kubernetes.io/pool") in message
    await refused(node.patch_node_status("n2", {"status": {"phase": "Running"}}))
    theirs = server.get("pods", "default", "theirs") or {}
    message = await refused(node.patch_pod_status("default", "theirs",
                                                  theirs["metadata"]["uid"], {"phase": "Failed"}))
    assert "can only update pod status for pods with spec.nodeName set to itself" in message
    await refused(node.delete_pod("default", "theirs", uid=theirs["metadata"]["uid"]))
    message = await refused(node.create_pod("default", pod_object("new", node="n1")))
    assert "can only create mirror pods" in message
    lease = {"metadata": {"name": "n2", "namespace": "kube-node-lease"}, "spec": {}}
    await refused(node.create_lease("kube-node-lease", lease))
    await refused(node.get_lease("kube-node-lease", "n2"))


async def test_bootstrap_tokens_may_only_ask_for_certificates(
        server: KubeApiServer, tmp_path: Path) -> None:
    server.create("secrets", kubeauth.bootstrap_token_secret("abcdef", "0123456789abcdef"))
    boot = kube.KubeClient(kubeconfig.load(server.write_kubeconfig(
        tmp_path / "boot", token="abcdef.0123456789abcdef")))
    wrong = kube.KubeClient(kubeconfig.load(server.write_kubeconfig(
        tmp_path / "wrong", token="abcdef.0000000000000000")))
    try:
        items, _ = await boot.list_objects(kube.CSR_PATH)
        assert items == []
        message = await refused(boot.list_objects(kube.core_path("pods")))
        assert 'User "system:bootstrap:abcdef" cannot list resource "pods"' in message
        with pytest.raises(kube.KubeError) as caught:
            await wrong.list_objects(kube.CSR_PATH)
        assert caught.value.status == 401
    finally:
        await boot.close()
        await wrong.close()


def test_kubelet_labels_and_restricted_ones() -> None:
    forbidden = kubeauth.forbidden_node_labels(
        {"kubernetes.io/hostname": "n1", "node.kubernetes.io/exclude-from-lb": "",
         "node-role.kubernetes.io/worker": "", "foo.node-restriction.kubernetes.io/x": "",
         "example.com/a": "b", "plain": "c"}, {})
    assert forbidden == ["foo.node-restriction.kubernetes.io/x", "node-role.kubernetes.io/worker"]
    unchanged = {"node-role.kubernetes.io/worker": ""}
    assert kubeauth.forbidden_node_labels(unchanged, unchanged) == []
