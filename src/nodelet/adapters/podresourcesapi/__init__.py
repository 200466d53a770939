"""The pod resources API over gRPC (`server`): the kubelet's podresources v1
PodResourcesLister service (List, GetAllocatableResources, Get) and v1alpha1's (List) on one
unix socket, from our own .proto subsets (podresources.proto, podresources_v1alpha1.proto:
k8s.io/kubelet's pkg/apis/podresources), in plain values (`model.core.podresources`).
Mirrors the kubelet's pkg/kubelet/apis/podresources and its server in pkg/kubelet/server;
protobuf stays inside this package.
"""
