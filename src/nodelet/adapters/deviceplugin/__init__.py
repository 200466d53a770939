"""The kubelet's device plugin protocol over gRPC (`plugins`): the Registration service that
nodelet serves on `kubelet.sock`, and a client of each plugin's DevicePlugin service, from our
own .proto subset (deviceplugin.proto: k8s.io/kubelet's deviceplugin v1beta1). Mirrors the
kubelet's pkg/kubelet/cm/devicemanager/plugin/v1beta1; protobuf stays inside this package.
"""
