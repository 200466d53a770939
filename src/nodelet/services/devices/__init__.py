"""Devices on the node, as the kubelet's pkg/kubelet/cm/devicemanager: device plugins register
on `kubelet.sock` in the device plugins directory, their devices become the Node's extended
resources, pods asking for them are admitted against them and get their devices at container
start (`devicemanager`). The pod resources API (`podresourceslister`, served by
`adapters.podresourcesapi`: the kubelet's pkg/kubelet/apis/podresources) tells monitoring
agents which container holds which device. The rules are pure, in `model.core.devices` and
`model.core.podresources`.

Owns: the registered plugins, their devices and which container holds which (with their
checkpoint), and what the pod resources API answers. May import: adapters and the model (no
other job).
"""
