"""The node's own health: eviction under pressure (`eviction`), container and image GC
(`containergc`, `imagegc`), container log rotation (`logrotation`), the QoS cgroup levels
(`qoscgroups`) and `nodelet reset` (`resetting`).

Owns: the node's resources. May import: `status` (events); never pod work.
"""
