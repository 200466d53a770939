"""The /configz body (pure): Go durations and quantities, the settings' values by field name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodelet import settings
from nodelet.model.core import configz


@pytest.mark.parametrize(("value", "text"), [(10 * 2**20, "10Mi"), (2**30, "1Gi"),
                                             (1536, "1536"), (3 * 1024, "3Ki")])
def test_byte_quantities(value: int, text: str) -> None:
    assert configz.byte_quantity(value) == text


def test_the_settings_by_their_kubelet_names() -> None:
    s = settings.Settings(
        data_dir=Path("/var/lib/x"), manifests_dir=Path("/etc/m"),
        node=settings.NodeSettings(max_pods=17, cgroup_root="/n"),
        dns=settings.DNSSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local"),
        gates=settings.parse_feature_gates("PodHasNetworkCondition=true"))
    body = configz.configz(s, runtime_endpoint="unix:///run/c.sock")
    config = body["kubeletconfig"]
    assert list(body) == ["kubeletconfig"]
    assert (config["maxPods"], config["cgroupRoot"], config["staticPodPath"]) == (
        17, "/n", "/etc/m")
    assert config["clusterDNS"] == ["10.96.0.10"]
    assert config["clusterDomain"] == "cluster.local"
    assert config["syncFrequency"] == "1m0s" and config["fileCheckFrequency"] == "20s"
    assert config["featureGates"]["PodHasNetworkCondition"] is True
    assert config["evictionHard"]["memory.available"] == "100Mi"
    assert config["containerLogMaxSize"] == "10Mi"
    # What nodelet does where it has no setting, and the document's kind.
    assert config["registerNode"] is True and config["cpuCFSQuota"] is True
    assert config["serializeImagePulls"] is False and config["cgroupDriver"] == "cgroupfs"
    assert (config["apiVersion"], config["kind"]) == ("kubelet.config.k8s.io/v1beta1",
                                                      "KubeletConfiguration")
    assert (config["healthzBindAddress"], config["healthzPort"]) == ("127.0.0.1", 10248)
    assert "oomScoreAdj" not in config  # left as inherited
    assert config["authorization"]["mode"] == "AlwaysAllow"


def test_int32_fields_are_integers() -> None:
    """kubeAPIQPS and eventRecordQPS are int32 in KubeletConfiguration: the node e2e suite's
    decoder refused `50.0` ("cannot unmarshal number 50.0 ... of type int32")."""
    s = settings.Settings(data_dir=Path("/var/lib/x"),
                          cluster=settings.ClusterSettings(kubeconfig=Path("/k")))
    config = configz.configz(s, runtime_endpoint="unix:///run/c.sock")["kubeletconfig"]
    for key in ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst"):
        assert type(config[key]) is int, key
    assert json.dumps(config["kubeAPIQPS"]) == "50"
