"""The pod resources API over gRPC (`server`): the kubelet's podresources v1
PodResourcesLister service (List, GetAllocatableResources, Get) on a unix socket, from our own
.proto subset (podresources.proto: k8s.io/kubelet's pkg/apis/podresources/v1), in plain values
(`model.core.podresources`). Mirrors the kubelet's pkg/kubelet/apis/podresources and its
server in pkg/kubelet/server; protobuf stays inside this package.
"""
