"""The pod lifecycle event generator: what the runtime holds for every pod, kept current by a
relist (`relisting`) and by the runtime's event stream (`runtimeevents`), which wake the pod
workers.

Owns: the relister's copy of the runtime. May import: adapters only (no other job).
"""
