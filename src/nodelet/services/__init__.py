"""What nodelet does with the adapters and the model, one sub-package per job (as the
kubelet's packages: pod workers, PLEG, status, config sources, eviction and GC, certificates
and tokens, the server):

- `podwork`: the pod workers and everything one pod's sync drives (sandbox, volumes,
  containers, images, hooks, probes, in-place resize);
- `pleg`: the runtime's state of every pod (relist and the runtime's event stream);
- `status`: the one writer of pod status and events, their checkpoint and their sync to the
  API (mirror pods included);
- `sources`: the desired pods and the objects they name (manifest directory, HTTP, the API);
- `nodehealth`: what keeps the node itself healthy (eviction, container and image GC, log
  rotation, QoS cgroups, reset);
- `cluster`: joining a cluster and its identity (certificates, tokens, the Node object and
  its lease);
- `serving`: what the node serves and shows (the node server, metrics, progress, logs,
  preflight checks);
- `analysis`: the read-only analysis of a live cluster or a dump;
- `plugins`: plugins that register through the plugin registry (CSI drivers), as the
  kubelet's pluginmanager.

The jobs' independence is kept by the import-linter contracts in pyproject.toml.
"""
