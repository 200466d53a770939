"""v1 Services from the API → `servicelinks.Service` (only what service links read).

The API server validated these objects; what does not have the expected shape is left out
(None, or a port without a number) rather than failing the node's Service watch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodelet.model.core import servicelinks


def service_from_object(obj: Mapping[str, Any]) -> servicelinks.Service | None:
    meta, spec = obj.get("metadata"), obj.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return None
    namespace, name = meta.get("namespace"), meta.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not name:
        return None
    cluster_ip = spec.get("clusterIP")
    raw_ports = spec.get("ports")
    ports = tuple(port for item in (raw_ports if isinstance(raw_ports, list) else ())
                  if (port := _port(item)) is not None)
    return servicelinks.Service(namespace=namespace, name=name,
                                cluster_ip=cluster_ip if isinstance(cluster_ip, str) else "",
                                ports=ports)


def _port(item: Any) -> servicelinks.ServicePort | None:
    if not isinstance(item, Mapping):
        return None
    number, name, protocol = item.get("port"), item.get("name"), item.get("protocol")
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    return servicelinks.ServicePort(port=number, name=name if isinstance(name, str) else "",
                                    protocol=protocol if isinstance(protocol, str) and protocol
                                    else "TCP")
