"""What the node serves and shows: the node server's handlers (`nodeserving`: logs, exec,
attach, port-forward, stats), container logs (`logs`), /metrics (`metrics`, `probemetrics`),
the live progress lines (`progress`), the preflight checks (`preflight`) and the node
server's webhook authentication and authorization (`webhookauth`).

Owns: nothing of the pods; it reads status and the runtime. May import: `pleg`, `status`
(reading); never pod work.
"""
