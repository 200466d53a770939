"""spec.hostnameOverride (GA and locked on in 1.37): the sandbox's hostname as given.

Found by the [NodeConformance] "Override hostname of Pod" tests: nodelet refused the field.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import etchosts, fields, specs
from nodelet.model.parsing import manifests


def parse(**spec: Any) -> Any:
    meta = {"name": "web", "namespace": "ns", "uid": "u-1"}
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}
    return manifests.pod_from_object(obj, node_name="n", source="api")


def test_the_override_is_the_hostname_without_a_domain() -> None:
    pod = parse(hostnameOverride="override.example.host", hostname="custom", subdomain="t")
    assert specs.hostname(pod) == "override.example.host"
    assert specs.kernel_hostname(pod, "cluster.local") == "override.example.host"
    assert etchosts.host_domain(pod, "cluster.local") == ""
    hosts = etchosts.content(pod, ["10.0.0.5"], node_hosts="", cluster_domain="cluster.local")
    assert "10.0.0.5\toverride.example.host\n" in hosts


def test_without_the_override_nothing_changes() -> None:
    pod = parse(hostname="custom", subdomain="t")
    assert specs.hostname(pod) == "custom"
    assert etchosts.host_domain(pod, "cluster.local") == "t.ns.svc.cluster.local"


@pytest.mark.parametrize("spec", [
    {"hostnameOverride": "Not_A_Subdomain"},
    {"hostnameOverride": "a", "setHostnameAsFQDN": True},
    {"hostnameOverride": "a", "hostNetwork": True},
])
def test_invalid_combinations_are_refused_as_by_the_api_server(spec: dict[str, Any]) -> None:
    with pytest.raises((fields.InvalidValueError, manifests.ManifestError),
                       match="hostnameOverride"):
        parse(**spec)
