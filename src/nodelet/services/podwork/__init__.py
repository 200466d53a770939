"""Pod work: one worker per pod (`workers`) runs `syncing.PodSyncer.sync`, which executes the
pure decisions of `model.core` through the runtime: the sandbox (`userns`), what the pod is
told about names (`names`: DNS, /etc/hosts, service variables), volumes, containers
(`containers`, `images`, `hooks`), probes, in-place resize (`resizing`) and stopping a
whole pod (`killing`).

Owns: the pods' runtime objects and everything a sync creates. May import: `pleg` (the
runtime's state), `status` (it publishes through the status manager and the recorder),
`nodehealth` (the QoS cgroups and the per-pod GC rule a sync applies), `serving.logs`.
"""
