"""Plugins that register with the node through sockets, as the kubelet's pluginmanager: the
registry directory is watched (`registration`), each plugin's Registration service asked who
it is and told whether it was taken, and CSI drivers kept with their Node service facts
(`csidrivers`) for the volume manager and the node's CSINode object.

Owns: the registered plugins and their clients. May import: adapters and the model (no
other job).
"""
