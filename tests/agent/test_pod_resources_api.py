"""The pod resources API's server (adapters/podresourcesapi) on a real unix socket, asked by
the kubelet's own clients (`podresources-client`): v1 and v1alpha1 on one socket, their
rate limit, as the kubelet's, and the token bucket under it. What it answers on a node with
devices: tests/agent/test_device_plugins.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from nodelet.adapters.podresourcesapi import server
from nodelet.model.core import podresources as pr
from support import podresources


class OnePod:
    def pods(self) -> Sequence[pr.PodResources]:
        return [pr.PodResources("p", "ns", (pr.ContainerResources("c", (
            pr.ContainerDevices("example.com/r", ("d1",), (1,)),)),))]

    def pods_v1alpha1(self) -> Sequence[pr.PodResources]:
        return self.pods()

    def pod(self, namespace: str, name: str) -> pr.PodResources | None:
        return None

    def allocatable(self) -> Sequence[pr.ContainerDevices]:
        return []

    def get_failed(self) -> None:
        pass


def test_the_token_bucket_allows_a_burst_then_its_rate() -> None:
    now = [0.0]
    bucket = server.TokenBucket(100.0, 10, monotonic=lambda: now[0])
    assert [bucket.allow() for _ in range(11)] == [True] * 10 + [False]
    now[0] += 0.025  # 2.5 tokens
    assert [bucket.allow() for _ in range(3)] == [True, True, False]
    now[0] += 60.0  # never more than the burst
    assert sum(bucket.allow() for _ in range(20)) == 10


async def test_calls_over_the_rate_limit_are_refused_with_the_kubelets_words(
        tmp_path: Path) -> None:
    socket = tmp_path / "pod-resources" / "kubelet.sock"
    running = server.PodResourcesServer(socket, OnePod(),
                                        limiter=server.TokenBucket(0.0, 2))  # two calls
    await running.start()
    try:
        first = await podresources.ask(socket, "list")
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout) == {"pod_resources": [{
            "name": "p", "namespace": "ns", "containers": [{"name": "c", "devices": [{
                "resource_name": "example.com/r", "device_ids": ["d1"],
                "topology": {"nodes": [{"ID": "1"}]}}]}]}]}
        alpha = await podresources.ask(socket, "list-v1alpha1")  # the same server, without topology
        assert json.loads(alpha.stdout) == {"pod_resources": [{
            "name": "p", "namespace": "ns", "containers": [{"name": "c", "devices": [{
                "resource_name": "example.com/r", "device_ids": ["d1"]}]}]}]}, alpha.stderr
        refused = await podresources.ask(socket, "list")
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            "rpc error: code = ResourceExhausted desc = rejected by rate limit")
    finally:
        await running.stop()
    assert not socket.exists()
