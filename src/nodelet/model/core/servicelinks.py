"""Service environment variables (pure): the kubelet's getServiceEnvVarMap and
pkg/kubelet/envvars FromServices.

Which Services a container hears of:
- the `kubernetes` Service of the `default` namespace, always (the kubelet's master service,
  even with `enableServiceLinks: false`: in-cluster clients read `KUBERNETES_SERVICE_HOST`);
- with `enableServiceLinks` (the default), every Service of the pod's own namespace; one named
  `kubernetes` there wins over the master one;
- never a Service without a cluster IP (empty or `None`: headless).

Per Service `<NAME>` (its name upper-cased, `-` → `_`): `<NAME>_SERVICE_HOST` (the cluster
IP), `<NAME>_SERVICE_PORT` (the first port), `<NAME>_SERVICE_PORT_<PORT NAME>` for each named
port, and Docker's link variables: `<NAME>_PORT` (`tcp://<ip>:<first port>`) and per port
`<NAME>_PORT_<port>_<PROTO>` with its `_PROTO`, `_PORT` and `_ADDR`. An IPv6 address is
bracketed in the URLs, as Go's net.JoinHostPort does.

The kubelet builds these in Go map order; here Services are taken by name, so the result is
deterministic. How they join a container's own variables is `envvars.resolve`'s job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# The master service the kubelet always links, and its namespace (metav1.NamespaceDefault).
MASTER_SERVICES = frozenset({"kubernetes"})
MASTER_NAMESPACE = "default"
# The field selector of the kubelet's Service informer: headless Services are never needed.
FIELD_SELECTOR = "spec.clusterIP!=None"
# The kubelet's CreateContainerConfigError while its Service informer has not listed once.
NOT_SYNCED_MESSAGE = "services have not yet been read at least once, cannot construct envvars"


@dataclass(frozen=True)
class ServicePort:
    port: int
    name: str = ""
    protocol: str = "TCP"


@dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    cluster_ip: str = ""
    ports: tuple[ServicePort, ...] = ()

    @property
    def has_cluster_ip(self) -> bool:
        """v1helper.IsServiceIPSet."""
        return self.cluster_ip not in ("", "None")


def linked_services(
    services: Iterable[Service], namespace: str, *, enable_links: bool
) -> list[Service]:
    """The Services a pod of `namespace` gets variables for, by name (see the docstring)."""
    chosen: dict[str, Service] = {}
    for service in services:
        if not service.has_cluster_ip:
            continue
        if service.namespace == namespace and enable_links:
            chosen[service.name] = service  # the pod's own namespace wins
        elif service.namespace == MASTER_NAMESPACE and service.name in MASTER_SERVICES:
            chosen.setdefault(service.name, service)
    return [chosen[name] for name in sorted(chosen)]


def service_env(
    services: Iterable[Service], namespace: str, *, enable_links: bool
) -> tuple[tuple[str, str], ...]:
    """The service variables of a pod in `namespace` (getServiceEnvVarMap)."""
    out: dict[str, str] = {}
    for service in linked_services(services, namespace, enable_links=enable_links):
        out.update(service_variables(service))
    return tuple(out.items())


def service_variables(service: Service) -> list[tuple[str, str]]:
    """FromServices for one Service with a cluster IP."""
    if not service.has_cluster_ip or not service.ports:
        return []
    prefix = variable_name(service.name)
    out = [(f"{prefix}_SERVICE_HOST", service.cluster_ip),
           (f"{prefix}_SERVICE_PORT", str(service.ports[0].port))]
    out += [(f"{prefix}_SERVICE_PORT_{variable_name(port.name)}", str(port.port))
            for port in service.ports if port.name]
    return out + _link_variables(prefix, service)


def variable_name(name: str) -> str:
    """makeEnvVariableName: upper case, `-` → `_`."""
    return name.replace("-", "_").upper()


def _link_variables(prefix: str, service: Service) -> list[tuple[str, str]]:
    """Docker's link variables (makeLinkVariables); the first port is also `<NAME>_PORT`."""
    host = f"[{service.cluster_ip}]" if ":" in service.cluster_ip else service.cluster_ip
    out: list[tuple[str, str]] = []
    for index, port in enumerate(service.ports):
        protocol = port.protocol or "TCP"
        url = f"{protocol.lower()}://{host}:{port.port}"
        if index == 0:
            out.append((f"{prefix}_PORT", url))
        port_prefix = f"{prefix}_PORT_{port.port}_{protocol.upper()}"
        out += [(port_prefix, url), (f"{port_prefix}_PROTO", protocol.lower()),
                (f"{port_prefix}_PORT", str(port.port)),
                (f"{port_prefix}_ADDR", service.cluster_ip)]
    return out
