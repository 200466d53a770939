"""The ConfigMaps and Secrets a pod reads: its volumes, its containers' environment and its
image pull secrets. Cluster mode watches these while the pod is on the node (the kubelet's
RegisterPod), and a pod's sync waits until they were listed once, so that "absent" is the
API's word and never "not fetched yet"."""

from __future__ import annotations

from nodelet.model.core import credentials, envvars, objectrefs, pods
from nodelet.model.core import volumes as vol


def referenced_objects(pod: pods.Pod) -> set[objectrefs.ObjectKey]:
    return (vol.referenced_objects(pod) | credentials.referenced_secrets(pod)
            | envvars.referenced_objects(pod))
