"""CSI and plugin registration over gRPC (`client`): the Node service of a CSI driver and the
Registration service a plugin offers in the registry directory, from our own .proto subsets
(csi.proto: the CSI spec v1.14.0's Node service; pluginregistration.proto: the kubelet's
protocol). Mirrors the kubelet's pkg/volume/csi client and pluginmanager's dialing; protobuf
stays inside this package.
"""
