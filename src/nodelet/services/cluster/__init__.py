"""Cluster mode and the node's identity: the wiring of cluster mode (`cluster`), client and
serving certificates (`certificates`), service account tokens (`tokens`), the Node object
(`nodestatus`) and its lease (`leases`).

Owns: the node's credentials and its Node object. May import: `sources`, `status`.
"""
