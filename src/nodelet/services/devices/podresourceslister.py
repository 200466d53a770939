"""What the pod resources API answers (the kubelet's v1PodResourcesServer), and its metrics.

The pods are the active ones (the kubelet's GetActivePods, its
KubeletPodResourcesListUseActivePods default): admitted, or still running though not (being
terminated, or not synced yet since a restart). Each lists its sidecars and containers with
the devices the device manager assigned them (`model.core.podresources`). The kubelet frees
the devices of inactive pods before a List (UpdateAllocatedDevices); here a List changes
nothing: the device manager frees them at the next admission, and the answers are the same,
as inactive pods show no devices.

v1alpha1's List (`pods_v1alpha1`) answers as the kubelet's older server: every pod the agent
knows, its containers only, devices for the active ones.

The counters are the kubelet's `kubelet_pod_resources_endpoint_*`, by `server_api_version`
(v1alpha1 counts only in the total, as in the kubelet), rendered in the kubelet's exposition:
counters whose sample names carry no `_total` suffix but the first one's (prometheus_client
would add one to each).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection

from nodelet.model.core import podresources as pr
from nodelet.model.core import pods
from nodelet.services.devices import devicemanager, dra

_METRICS = (
    ("requests_total", "Cumulative number of requests to the PodResource endpoint. Broken "
                       "down by server api version."),
    ("requests_list", "Number of requests to the PodResource List endpoint. Broken down by "
                      "server api version."),
    ("requests_get_allocatable", "Number of requests to the PodResource GetAllocatableResources "
                                 "endpoint. Broken down by server api version."),
    ("requests_get", "Number of requests to the PodResource Get endpoint. Broken down by server "
                     "api version."),
    ("errors_list", "Number of requests to the PodResource List endpoint which returned error. "
                    "Broken down by server api version."),
    ("errors_get_allocatable", "Number of requests to the PodResource GetAllocatableResources "
                               "endpoint which returned error. Broken down by server api "
                               "version."),
    ("errors_get", "Number of requests to the PodResource Get endpoint which returned error. "
                   "Broken down by server api version."),
)


class PodResourcesService:
    """`active()`: the active pods; `known()`: every pod the agent knows (terminated ones
    too); `devices`: the node's device manager."""

    def __init__(self, *, active: Callable[[], Collection[pods.Pod]],
                 known: Callable[[], Collection[pods.Pod]],
                 devices: devicemanager.DeviceManager,
                 claims: dra.DraManager | None = None) -> None:
        self._active = active
        self._known = known
        self._devices = devices
        self._claims = claims
        self.counts: Counter[tuple[str, str]] = Counter()  # by (metric, API version)

    def _count(self, what: str) -> None:
        self.counts["requests_total", "v1"] += 1
        self.counts[what, "v1"] += 1

    def _of(self, pod: pods.Pod) -> pr.PodResources:
        return pr.pod_resources(pod, self._devices.assigned(pod.uid),
                                dynamic_of=self._dynamic(pod))

    def _dynamic(self, pod: pods.Pod) -> dict[str, tuple[pr.DynamicResource, ...]]:
        """Each container's DRA claims (the DynamicResourceAllocation part of the API)."""
        if self._claims is None or not pod.spec.resource_claims:
            return {}
        return {c.name: pr.dynamic(self._claims.container_claims(pod, c))
                for c in pr.containers(pod)}

    def pods(self) -> list[pr.PodResources]:
        self._count("requests_list")
        return [self._of(p) for p in self._active()]

    def pods_v1alpha1(self) -> list[pr.PodResources]:
        """v1alpha1's List: every pod the agent knows (the kubelet's GetPods: terminated ones
        too), its containers without sidecars, as the kubelet's v1alpha1 server."""
        self.counts["requests_total", "v1alpha1"] += 1
        active = {p.uid for p in self._active()}
        return [pr.pod_resources(p, self._devices.assigned(p.uid) if p.uid in active else {},
                                 sidecars=False) for p in self._known()]

    def pod(self, namespace: str, name: str) -> pr.PodResources | None:
        self._count("requests_get")
        for pod in self._active():
            if pod.namespace == namespace and pod.name == name:
                return self._of(pod)
        return None

    def get_failed(self) -> None:
        self.counts["errors_get", "v1"] += 1

    def allocatable(self) -> list[pr.ContainerDevices]:
        self._count("requests_get_allocatable")
        return list(pr.allocatable(self._devices.resources()))

    def metrics_text(self) -> str:
        """The counters in the Prometheus text format, as the kubelet exposes them."""
        lines: list[str] = []
        for key, help_ in _METRICS:
            samples = sorted((v, n) for (k, v), n in self.counts.items() if k == key and n)
            if not samples:  # as a Go CounterVec without a child: nothing shown
                continue
            name = f"kubelet_pod_resources_endpoint_{key}"
            lines += [f"# HELP {name} [ALPHA] {help_}", f"# TYPE {name} counter"]
            lines += [f'{name}{{server_api_version="{v}"}} {n}' for v, n in samples]
        return "".join(f"{line}\n" for line in lines)
