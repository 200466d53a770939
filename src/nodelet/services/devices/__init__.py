"""Devices on the node, as the kubelet's pkg/kubelet/cm/devicemanager: device plugins register
on `kubelet.sock` in the device plugins directory, their devices become the Node's extended
resources, pods asking for them are admitted against them and get their devices at container
start (`devicemanager`). The rules are pure, in `model.core.devices`.

Owns: the registered plugins, their devices and which container holds which (with their
checkpoint). May import: adapters and the model (no other job).
"""
