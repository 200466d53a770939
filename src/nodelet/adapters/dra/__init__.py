"""The kubelet's DRA driver protocol over gRPC (`client`): a client of one driver's DRAPlugin
service (NodePrepareResources, NodeUnprepareResources), from our own .proto subset (dra.proto:
k8s.io/kubelet's dra v1). Mirrors the kubelet's pkg/kubelet/cm/dra/plugin; protobuf stays
inside this package.
"""
