"""Service environment variables of a container (`enableServiceLinks`), from a `ServiceSource`.

The source is cluster mode's `servicewatch.ServiceWatch`; standalone there is none, and
containers get no service variables. Apart from the watch, so that a standalone agent imports
no Kubernetes API client for this (issue 26).

`service_env(pod, source)` is what a container start asks for: the variables of
`model.core.servicelinks.service_env`. As in the kubelet, a pod from the API (not a static
pod) must not start its containers before the Services were listed once — its
`KUBERNETES_SERVICE_HOST` would be missing; here it waits for the first list, at most the
source's own timeout (the watch's `wait_timeout`), and then fails with the kubelet's
CreateContainerConfigError message (`servicelinks.NOT_SYNCED_MESSAGE`), retried on the next
sync.

Exceptions: `service_env` raises `envvars.ConfigError`.
"""

from __future__ import annotations

from typing import Protocol

from nodelet.model.core import envvars, pods, servicelinks


class ServiceSource(Protocol):
    def current(self) -> tuple[servicelinks.Service, ...] | None:
        """The Services now; None until they were listed once."""

    async def wait_listed(self) -> None:
        """Return once the Services were listed, or after the source's own timeout."""


async def service_env(
    pod: pods.Pod, source: ServiceSource | None
) -> tuple[tuple[str, str], ...]:
    """The service variables of the pod's containers; raises envvars.ConfigError while the
    Services were never listed (not for static pods, which the kubelet lets through)."""
    if source is None:
        return ()
    services = source.current()
    if services is None and not pod.is_static:
        await source.wait_listed()
        services = source.current()
        if services is None:
            raise envvars.ConfigError(servicelinks.NOT_SYNCED_MESSAGE)
    return servicelinks.service_env(services or (), pod.namespace,
                                    enable_links=pod.spec.enable_service_links)
