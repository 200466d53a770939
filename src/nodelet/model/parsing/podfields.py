"""Every pod-spec field nodelet accepts, with its decision: honoured, refused, node-dependent
or not applicable on a single node. The one place that says what happens to a field.

The table is the source of `docs/podspec.md` (`python -m nodelet.model.parsing.podfields`) and
of the refusals of fields nodelet cannot run (`check_refused`): a manifest that sets one is rejected
with the row's message. A test keeps the table, the parser's field lists and the document in
step, so no field can be accepted without a decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodelet.model.core import fields
from nodelet.model.parsing import apifields

Status = Literal["honoured", "refused", "node-dependent", "not applicable"]
Scope = Literal["spec", "container", "resources", "lifecycle"]

SPEC = "spec."
CONTAINER = "spec.containers[*]."  # and spec.initContainers[*]
POD_SC = "spec.securityContext."
CONTAINER_SC = "spec.containers[*].securityContext."
PORT = "spec.containers[*].ports[*]."
ENV = "spec.containers[*].env[*]."
MOUNT = "spec.containers[*].volumeMounts[*]."
RESOURCES = "spec.containers[*].resources."
LIFECYCLE = "spec.containers[*].lifecycle."
VOLUME = "spec.volumes[*]."
HOST_ALIAS = "spec.hostAliases[*]."


@dataclass(frozen=True)
class Field:
    path: str
    status: Status
    note: str
    # Refused when set at all (to anything non-empty): the object `check_refused` checks.
    # Refusals that depend on the value or the node are made where the value is read.
    refused_in: Scope | None = None


def _h(path: str, note: str) -> Field:
    return Field(path, "honoured", note)


def _na(path: str, note: str) -> Field:
    return Field(path, "not applicable", note)


def _nd(path: str, note: str) -> Field:
    return Field(path, "node-dependent", note)


def _refused(path: str, scope: Scope, note: str) -> Field:
    return Field(path, "refused", note, refused_in=scope)


_SCHEDULING = "a scheduling field: the scheduler decides, a node has nothing to do"

TABLE: tuple[Field, ...] = (
    # -- the pod --------------------------------------------------------------------------
    _h(SPEC + "containers", "run in order of the spec after the init containers"),
    _h(SPEC + "initContainers", "run one at a time before the app containers; "
       "`restartPolicy: Always` makes a sidecar"),
    _h(SPEC + "ephemeralContainers", "added to a running API pod (`kubectl debug`, the "
       "ephemeralcontainers subresource): each started once in the pod's sandbox, never "
       "restarted, in its targetContainerName's PID namespace; reported in "
       "ephemeralContainerStatuses. A manifest cannot set them (API: forbidden on create)"),
    _h(SPEC + "volumes", "emptyDir, hostPath, configMap, secret, projected, downwardAPI, "
       "image, persistentVolumeClaim, ephemeral, csi; every other volume type is refused, "
       "each with its reason (see below)"),
    _h(SPEC + "restartPolicy", "Always, OnFailure, Never, with CrashLoopBackOff"),
    _h(SPEC + "terminationGracePeriodSeconds", "SIGTERM, then SIGKILL after the period "
       "(at least 2 s), preStop within it"),
    _h(SPEC + "activeDeadlineSeconds", "the pod fails with `DeadlineExceeded`"),
    _h(SPEC + "dnsPolicy", "as the kubelet: ClusterFirst (Default on a hostNetwork pod) and "
       "ClusterFirstWithHostNet use `--cluster-dns` with the `--cluster-domain` search paths "
       "and `ndots:5`, or without `--cluster-dns` the node's resolver and a `MissingClusterDNS` "
       "event; Default the node's `--resolv-conf`; None only the dnsConfig"),
    _h(SPEC + "dnsConfig", "nameservers and searches appended, options merged by name (the "
       "pod's win); beyond 3 nameservers or 32 search paths / 2048 characters cut with a "
       "`DNSConfigForming` event"),
    _h(SPEC + "nodeSelector", "admission of static pods: every label must match the node's, "
       "else the pod fails with `NodeAffinity` (API pods were placed by the scheduler)"),
    _h(SPEC + "nodeName", "static pods are this node's; API pods are those bound to it"),
    _h(SPEC + "serviceAccountName", "the account of the pod's projected `serviceAccountToken` "
       "sources (TokenRequest, cluster mode); exposed through the downward API "
       "(`spec.serviceAccountName`)"),
    _h(SPEC + "serviceAccount", "the deprecated name of serviceAccountName"),
    _na(SPEC + "automountServiceAccountToken", "kube-apiserver's ServiceAccount admission adds "
        "the `kube-api-access-*` volume and its mounts unless it is false; nodelet, like the "
        "kubelet, mounts the volumes the spec lists"),
    _h(SPEC + "hostNetwork", "the sandbox uses the node's network namespace (CRI NODE)"),
    _h(SPEC + "hostPID", "the containers use the node's PID namespace (CRI NODE)"),
    _h(SPEC + "hostIPC", "the pod uses the node's IPC namespace (CRI NODE)"),
    _h(SPEC + "shareProcessNamespace", "one PID namespace for the pod (CRI POD); without it "
       "each container has its own, as under the kubelet"),
    _h(SPEC + "securityContext", "see the pod securityContext fields below"),
    _h(SPEC + "imagePullSecrets", "the Secrets' registry credentials are tried in order, "
       "then the node's `<data-dir>/config.json`; an image already on the node is used only "
       "by pods with the credentials that pulled it (KubeletEnsureSecretPulledImages, README "
       '"Registry credentials"), else pulled again with the pod\'s own'),
    _h(SPEC + "hostname", "the sandbox's hostname (default: the pod name)"),
    _h(SPEC + "subdomain", "with hostname, the pod's FQDN in its managed /etc/hosts"),
    _h(SPEC + "setHostnameAsFQDN", "as the kubelet: with a subdomain the sandbox's hostname "
       "is `<hostname>.<subdomain>.<namespace>.svc.<--cluster-domain>`; longer than 64 "
       "characters fails the sandbox (`FailedCreatePodSandBox`)"),
    _h(SPEC + "hostAliases", "appended to the pod's managed /etc/hosts"),
    _h(SPEC + "readinessGates", "the pod is Ready only when every gate's condition is True"),
    _h(SPEC + "runtimeClassName", "in a cluster, the RuntimeClass's CRI handler (read from "
       "the API when the sandbox is made, as the kubelet's LookupRuntimeHandler; one that "
       "cannot be read fails the sandbox with the API's words); standalone, where there are "
       "no RuntimeClass objects, the name is the handler"),
    _h(SPEC + "os", "admission: `linux` runs, anything else fails with `PodOSNotSupported`"),
    _nd(SPEC + "hostUsers", "`false`: a user namespace with 65536 IDs of its own, as the "
        "kubelet allocates them (kept in the pod's directory); where the runtime handler "
        "cannot (containerd 1.6) refused at admission with `UserNamespacesNotSupported`"),
    _h(SPEC + "affinity", "required node affinity is checked at the admission of static "
       "pods (`NodeAffinity`); the rest is the scheduler's"),
    _na(SPEC + "schedulerName", _SCHEDULING),
    _h(SPEC + "tolerations", "scheduling, except at admission under node pressure: a "
       "BestEffort pod tolerating `node.kubernetes.io/memory-pressure` (NoSchedule) is "
       "admitted under MemoryPressure"),
    _na(SPEC + "topologySpreadConstraints", _SCHEDULING),
    _na(SPEC + "schedulingGates", _SCHEDULING),
    _na(SPEC + "priorityClassName", _SCHEDULING + " (the API server resolves it into "
        "`priority`, which nodelet reads)"),
    _h(SPEC + "priority", "ranks pods for eviction under node pressure (lower goes first); "
       "2000000000 and more is critical and never evicted"),
    _na(SPEC + "preemptionPolicy", _SCHEDULING + " (preemption)"),
    _na(SPEC + "workloadRef", _SCHEDULING + " (gang scheduling)"),
    _h(SPEC + "enableServiceLinks", "in cluster mode the namespace's Services with a cluster "
       "IP become `<NAME>_SERVICE_HOST`/`_PORT` and Docker link variables (the `kubernetes` "
       "Service of `default` always); standalone there are no Services, so no variables"),
    _h(SPEC + "overhead", "pod overhead (set from the pod's RuntimeClass): added to the pod's "
       "requests (admission, QoS shares, eviction ranking when the request is not 0) and to "
       "its non-zero limits (the pod cgroup's quota and memory limit), as the kubelet does"),
    _h(SPEC + "resourceClaims", "dynamic resource allocation (in cluster mode): before the "
       "sandbox is made, each claim (named, or made from its template and named in "
       "`status.resourceClaimStatuses`) is read from the API, checked (made for the pod, "
       "reserved for it, allocated) and prepared by its DRA drivers (`NodePrepareResources`), "
       "which register through the plugin registry; failing that, a "
       "`FailedPrepareDynamicResources` event in the kubelet's words and no sandbox. Claims are "
       "unprepared once the pod's containers have stopped, also after a restart (from "
       "`dra_manager_state` in the data dir); static pods cannot use claims (their mirror pod "
       "could not be made)"),
    _h(SPEC + "resources", "pod-level requests and limits (PodLevelResources): the pod "
       "cgroup's shares, quota and memory limit, the QoS class, admission, and the limits of "
       "containers without their own; resizable in place"),
    _h(SPEC + "hostnameOverride", "the sandbox's hostname as given (a DNS subdomain), instead "
       "of hostname and subdomain, and its /etc/hosts name (GA in 1.37)"),
    # -- the pod's securityContext -----------------------------------------------------------
    _h(POD_SC + "runAsUser", "the default UID of every container (and the pause process)"),
    _h(POD_SC + "runAsGroup", "the default GID of every container"),
    _h(POD_SC + "runAsNonRoot", "the default for every container (checked against the "
       "image's user)"),
    _h(POD_SC + "supplementalGroups", "extra groups of every container's first process"),
    _nd(POD_SC + "supplementalGroupsPolicy", "`Merge` and `Strict` (only fsGroup, "
        "supplementalGroups and the primary group, not the image's /etc/group ones), where the "
        "runtime says it can (containerd 2.0+: the Node's `status.features`); elsewhere "
        "`Strict` is refused at admission with `SupplementalGroupsPolicyNotSupported`; "
        "`containerStatuses[].user.linux` shows the identities the container got"),
    _h(POD_SC + "fsGroup", "a supplementary group of every container; emptyDir, configMap, "
       "secret, projected and downwardAPI volumes and writable `local` PVs belong to it "
       "(group rw or r, setgid dirs); hostPath ones never, as in the kubelet"),
    _h(POD_SC + "fsGroupChangePolicy", "a `local` PV is owned when it is mounted for the pod, "
       "the whole tree with Always, only when its root's group or bits differ with "
       "OnRootMismatch; an emptyDir is owned when it is made, so the two agree; content "
       "volumes are owned at each write whatever the policy, as in the kubelet"),
    _h(POD_SC + "sysctls", "set in the pod's namespaces; only the kubelet's safe set and "
       "`--allowed-unsafe-sysctls`, else `SysctlForbidden` at admission"),
    _h(POD_SC + "seccompProfile", "the default for every container"),
    _nd(POD_SC + "appArmorProfile", "honoured where AppArmor is enabled; elsewhere a profile "
        "other than Unconfined fails at admission with `AppArmor`"),
    _nd(POD_SC + "seLinuxOptions", "passed to the runtime as the kubelet does: honoured where "
        "SELinux is enabled (with the embedded containerd); elsewhere the runtime ignores them "
        "(containerd's `enable_selinux` off), as under the kubelet"),
    _nd(POD_SC + "seLinuxChangePolicy", "no effect without SELinux, as in the kubelet; with "
        "SELinux, Recursive is what the runtime does and MountOption is refused at admission "
        "with `SELinux`"),
    _na(POD_SC + "windowsOptions", "Windows options: ignored on a Linux node, as by the "
        "kubelet (the suite's own registry pod sets `hostProcess` on a Linux pod)"),
    # -- containers ---------------------------------------------------------------------------
    _h(CONTAINER + "name", "the CRI container name and the `io.kubernetes.container.name` "
       "label"),
    _h(CONTAINER + "image", "pulled per imagePullPolicy, with ImagePullBackOff"),
    _h(CONTAINER + "imagePullPolicy", "Always, IfNotPresent, Never"),
    _h(CONTAINER + "command", "the entrypoint, with $(VAR) expansion"),
    _h(CONTAINER + "args", "the arguments, with $(VAR) expansion"),
    _h(CONTAINER + "workingDir", "the process's working directory"),
    _h(CONTAINER + "ports", "hostPort through the CNI portmap plugin; named ports for probes"),
    _h(CONTAINER + "env", "value, $(VAR) expansion, and every valueFrom source"),
    _h(CONTAINER + "envFrom", "every key of a ConfigMap or Secret, with prefix; invalid "
       "names skipped with an `InvalidEnvironmentVariableNames` event"),
    _h(CONTAINER + "resources", "CPU shares and quota, memory limit, through CRI"),
    _h(CONTAINER + "resizePolicy", "in-place resize (pods/resize in cluster mode): "
       "NotRequired updates the running container's cgroup, RestartContainer restarts it; a "
       "changed static manifest replaces the pod"),
    _h(CONTAINER + "restartPolicy", "an init container's `Always` makes a sidecar; Always, "
       "OnFailure or Never overrides the pod's policy for that container (ContainerRestartRules)"),
    _h(CONTAINER + "restartPolicyRules", "`Restart` on exit codes `In`/`NotIn`, first match "
       "wins, as the kubelet; `RestartAllContainers` stops and removes every container of the "
       "pod, keeps its sandbox and starts them again from the first init container "
       "(RestartAllContainersOnContainerExits)"),
    _h(CONTAINER + "volumeMounts", "see the volumeMount fields below"),
    _h(CONTAINER + "volumeDevices", "raw block volumes: a claim whose PV has `volumeMode: "
       "Block` (a `local` PV on a block device), given to the container as a device at "
       "devicePath (permissions mrw, r for a read-only claim), as the kubelet maps it"),
    _h(CONTAINER + "livenessProbe", "exec, httpGet, tcpSocket, grpc; restarts the container"),
    _h(CONTAINER + "readinessProbe", "exec, httpGet, tcpSocket, grpc; drives Ready"),
    _h(CONTAINER + "startupProbe", "exec, httpGet, tcpSocket, grpc; holds the others"),
    _h(CONTAINER + "lifecycle", "see the lifecycle fields below"),
    _h(CONTAINER + "terminationMessagePath", "a file mounted from the host"),
    _h(CONTAINER + "terminationMessagePolicy", "File, FallbackToLogsOnError"),
    _h(CONTAINER + "securityContext", "see the container securityContext fields below"),
    _h(CONTAINER + "stdin", "CRI stdin: the process's stdin stays open"),
    _h(CONTAINER + "stdinOnce", "CRI stdin_once"),
    _h(CONTAINER + "tty", "CRI tty: the process gets a terminal"),
    # -- the container's securityContext -------------------------------------------------------
    _h(CONTAINER_SC + "runAsUser", "the process's UID (else the pod's, else the image's)"),
    _h(CONTAINER_SC + "runAsGroup", "the process's GID (else the pod's)"),
    _h(CONTAINER_SC + "runAsNonRoot", "checked against runAsUser or the image's user: "
       "`CreateContainerConfigError` with the kubelet's messages"),
    _h(CONTAINER_SC + "privileged", "every capability and host device, nothing masked; the "
       "sandbox is privileged too"),
    _h(CONTAINER_SC + "allowPrivilegeEscalation", "false sets no_new_privs"),
    _h(CONTAINER_SC + "readOnlyRootFilesystem", "a read-only root filesystem"),
    _h(CONTAINER_SC + "capabilities", "add and drop (ALL too) on the runtime's default set"),
    _h(CONTAINER_SC + "seccompProfile", "RuntimeDefault, Unconfined, Localhost (under "
       "`--seccomp-profile-root`); unset: Unconfined, or RuntimeDefault with "
       "`--seccomp-default`"),
    _nd(CONTAINER_SC + "appArmorProfile", "honoured where AppArmor is enabled; elsewhere a "
        "profile other than Unconfined fails at admission with `AppArmor`"),
    _nd(CONTAINER_SC + "seLinuxOptions", "passed to the runtime: honoured where SELinux is "
        "enabled; elsewhere ignored by the runtime, as under the kubelet"),
    _nd(CONTAINER_SC + "procMount", "Default: the kubelet's masked and read-only /proc paths; "
        "Unmasked: the runtime unmasks /proc, only with `hostUsers: false` (as the API "
        "server checks)"),
    _na(CONTAINER_SC + "windowsOptions", "Windows options: ignored on a Linux node, as by "
        "the kubelet"),
    # -- ports, env, mounts, resources ---------------------------------------------------------
    _h(PORT + "containerPort", "informational, and the target of named probe ports"),
    _h(PORT + "name", "named ports for probes and hooks"),
    _h(PORT + "protocol", "TCP, UDP, SCTP for host ports"),
    _h(PORT + "hostPort", "forwarded from the node by the CNI portmap plugin; a port another "
       "pod holds is refused at admission (`NodePorts`)"),
    _h(PORT + "hostIP", "the node address a hostPort listens on"),
    _h(ENV + "name", "the variable's name"),
    _h(ENV + "value", "with $(VAR) expansion of earlier variables"),
    _h(ENV + "valueFrom", "configMapKeyRef, secretKeyRef (with optional), fieldRef, "
       "resourceFieldRef; a missing object or key is `CreateContainerConfigError`; fileKeyRef "
       "(EnvFiles, on by default since 1.35): a key of an env file (`KEY='value'` lines) in "
       "an emptyDir of the pod, read as the kubelet reads it when the container is created "
       "(the path resolved inside the volume, symlinks too; a missing key is "
       "`CreateContainerConfigError` unless optional; a missing or malformed file always is: "
       "`couldn't parse env file`)"),
    _h(MOUNT + "name", "the volume to mount"),
    _h(MOUNT + "mountPath", "where in the container"),
    _h(MOUNT + "readOnly", "a read-only bind mount (content volumes always are)"),
    _nd(MOUNT + "recursiveReadOnly", "as the kubelet: the runtime handler's CRI feature "
        "decides (containerd 2.x: yes, 1.6: no); IfPossible is recursive where it can be, "
        "Enabled where it cannot is a `CreateContainerConfigError`"),
    _h(MOUNT + "subPath", "a file or directory inside the volume, opened without following "
       "symlinks and bind-mounted when the container is created (as the kubelet does)"),
    _h(MOUNT + "subPathExpr", "subPath with $(VAR) expansion from the container's env"),
    _h(MOUNT + "mountPropagation", "None, HostToContainer (rslave), Bidirectional (rshared, "
       "privileged containers only); nodelet's pods dir is an rshared mount, as the kubelet's "
       "root dir; a hostPath must itself be on a shared mount"),
    _h(RESOURCES + "limits", "cpu (quota), memory (limit), ephemeral-storage (the container's "
       "writable layer and logs; over it the pod is evicted); requests default to limits"),
    _h(RESOURCES + "requests", "cpu (shares); every request must fit the node's allocatable "
       "beside the pods already admitted (`OutOfcpu`, `OutOfmemory`, `OutOfhugepages-2Mi`, "
       "...); extended resources the node does not have are skipped, as by the kubelet"),
    _h(RESOURCES + "claims", "the container gets the CDI devices its drivers prepared for "
       "each claim it names (all of the claim's, or those of the request it names), through "
       "the CRI's `CDIDevices`"),
    # -- lifecycle -----------------------------------------------------------------------------
    _h(LIFECYCLE + "postStart", "exec, httpGet, tcpSocket, sleep; the container is killed "
       "when it fails"),
    _h(LIFECYCLE + "preStop", "exec, httpGet, tcpSocket, sleep; within the grace period"),
    _nd(LIFECYCLE + "stopSignal", "with the `ContainerStopSignals` feature gate (alpha, off by "
        "default): the runtime stops the container with it and `containerStatuses[].stopSignal` "
        "shows the signal in effect; needs `spec.os.name`; containerd before 2.3 would drop it, "
        "so there, and with the gate off, the pod is refused at admission "
        "(`ContainerStopSignalsNotSupported`)"),
    _h(HOST_ALIAS + "ip", "an address in /etc/hosts"),
    _h(HOST_ALIAS + "hostnames", "its names"),
)


def _volume_rows() -> tuple[Field, ...]:
    notes = {
        "emptyDir": "a directory removed with the pod (tmpfs for `medium: Memory`, sized by "
                    "sizeLimit; on disk, a pod whose emptyDir outgrows sizeLimit is evicted)",
        "hostPath": "the node's path, checked against `type` (DirectoryOrCreate, File, ...)",
        "projected": "configMap, secret, downwardAPI and serviceAccountToken sources; tokens "
                     "come from the TokenRequest API (cluster mode), bound to the pod, written "
                     "atomically and refreshed at 80 % of their lifetime or after 24 h; a "
                     "static pod with a serviceAccountToken source is refused at admission "
                     "(`UnsupportedPodSpec`)",
        "persistentVolumeClaim": "the claim read from the API when the volume is set up; the "
                                 "pod waits (FailedMount, the kubelet's words) while it is "
                                 "not bound or being deleted; its PV a `hostPath` (used in "
                                 "place), a `local` one (node affinity checked, bind-mounted "
                                 "under the pod, a blank block device formatted with its "
                                 "fsType first, fsGroup with fsGroupChangePolicy) or a `csi` "
                                 "one (through the driver registered with the node: attached, "
                                 "staged once, published per pod, as the kubelet does), "
                                 "`volumeMode: Block` in volumeDevices; readOnly honoured; "
                                 "a PV's `pv.beta.kubernetes.io/gid` is a group of every "
                                 "container",
        "csi": "an inline (ephemeral) CSI volume, published for the pod by the driver "
               "registered with the node when its CSIDriver lists the Ephemeral lifecycle mode "
               "(no attach, no stage; volumeAttributes, readOnly, fsType and the "
               "nodePublishSecretRef's data passed on), unpublished when the pod goes",
        "ephemeral": "a generic ephemeral volume: the claim `<pod>-<volume>` that the "
                     "controller-manager makes, owned by the pod, then used as a "
                     "persistentVolumeClaim",
        "image": "an image's files, read-only (KEP-4639), pulled by its `pullPolicy` with the "
                 "container image's events and back-off; subPath inside the image; where the "
                 "runtime cannot mount images (containerd before 2.1) refused at admission "
                 "(`ImageVolumesNotSupported`)",
    }
    rows = [_h(VOLUME + t, notes.get(t, "its files written atomically, kept up to date, "
                                        "mounted read-only"))
            for t in apifields.SUPPORTED_VOLUMES]
    rows += [Field(VOLUME + t, "refused", "refused when the manifest is read, a pod from "
                   "the API server at admission (`UnsupportedPodSpec`): "
                   + _REFUSED_VOLUMES.get(t, "not implemented by nodelet"))
             for t in sorted(apifields.VOLUME_SOURCES) if t not in apifields.SUPPORTED_VOLUMES]
    return tuple(rows)


_REMOVED = ("its in-tree plugin is removed from Kubernetes (the kubelet v1.37 has none either); "
            "its CSI driver replaces it")
# Why each volume type nodelet does not run is refused.
_REFUSED_VOLUMES = {
    **dict.fromkeys(("awsElasticBlockStore", "azureDisk", "azureFile", "cinder", "cephfs",
                     "flocker", "gcePersistentDisk", "glusterfs", "photonPersistentDisk",
                     "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos",
                     "vsphereVolume"), _REMOVED),
    "gitRepo": "deprecated upstream and off by default in the kubelet (GitRepoVolumeDriver); "
               "clone into an emptyDir from an init container instead",
    "nfs": "not implemented by nodelet (the kubelet mounts it with the host's nfs tools)",
    "iscsi": "not implemented by nodelet (the kubelet attaches it with the host's iscsiadm)",
    "fc": "not implemented by nodelet (Fibre Channel disks)",
    "flexVolume": "not implemented by nodelet (deprecated upstream in favour of CSI)",
}


def all_fields() -> tuple[Field, ...]:
    seen: dict[str, Field] = {}
    for row in (*TABLE, *_volume_rows()):
        seen.setdefault(row.path, row)
    return tuple(seen.values())


def _scope_rows(scope: Scope) -> tuple[Field, ...]:
    return tuple(row for row in TABLE if row.refused_in == scope)


def _refused_here(obj: Mapping[str, Any], scope: Scope, path: str) -> list[tuple[str, str]]:
    return [(fields.join(path, row.path.rsplit(".", 1)[1]), row.note)
            for row in _scope_rows(scope)
            if obj.get(row.path.rsplit(".", 1)[1]) not in (None, "", [], {})]


def check_refused(obj: Mapping[str, Any], scope: Scope, path: str) -> None:
    """Raise UnsupportedError for a refused field of `scope` set in `obj` (at `path`)."""
    for where, message in _refused_here(obj, scope, path):
        raise fields.UnsupportedError(message, path=where)


# Objects inside a container whose refused fields are checked, each named as its field.
_INNER_SCOPES: tuple[Scope, ...] = ("resources", "lifecycle")


def refused_fields(spec: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(path, message) of every refused field set in a pod spec that was already parsed
    leniently (a pod the API server accepted: refused at admission, not at parsing)."""
    found = _refused_here(spec, "spec", "spec")
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(spec.get(key) or ()):
            if not isinstance(container, Mapping):
                continue
            path = f"spec.{key}[{i}]"
            found += _refused_here(container, "container", path)
            for scope in _INNER_SCOPES:
                inner = container.get(scope)
                if isinstance(inner, Mapping):
                    found += _refused_here(inner, scope, f"{path}.{scope}")
    return tuple(found)


# ---------------------------------------------------------------------------------------------
# docs/podspec.md

_SECTIONS = (
    ("The pod", SPEC), ("The pod's securityContext", POD_SC), ("Containers", CONTAINER),
    ("The container's securityContext", CONTAINER_SC), ("Ports", PORT),
    ("Environment variables", ENV), ("Volume mounts", MOUNT), ("Resources", RESOURCES),
    ("Lifecycle", LIFECYCLE), ("Host aliases", HOST_ALIAS), ("Volume types", VOLUME),
)  # fmt: skip

_HEADER = """\
# Pod spec fields: what nodelet does with each

Generated from `src/nodelet/model/parsing/podfields.py` by
`.venv/bin/python -m nodelet.model.parsing.podfields > docs/podspec.md`; a test fails when
this file, the table or the manifest parser's field lists disagree.

- **honoured**: implemented with the kubelet's semantics.
- **refused**: a static manifest that sets it is rejected with the message shown (in
  `nodelet get manifests` and the log); a pod from the API server that sets it is refused at
  admission: `Failed`, reason `UnsupportedPodSpec`, the message `Pod was rejected: <field>:
  <why>`, and a Warning event with it (`kubectl describe pod` shows all three). So is a pod
  from the API server that nodelet cannot read at all (a refused volume type, a value its
  parser refuses); an update nodelet cannot read of a pod that runs is not applied: the pod
  runs on as it was, and a Warning event `UnsupportedPodSpec` says why.
- **node-dependent**: honoured where the node can, otherwise the pod is refused at admission:
  it is `Failed` with the reason named, and a Warning event says why.
- **not applicable**: a scheduling or cluster-level field that a node does not act on.

A setting is never silently ignored. Init containers (`spec.initContainers[*]`) have the
same fields as `spec.containers[*]`.

## Runtimes, and what each enables

nodelet runs on containerd 2.x (the default: 2.4.2 built by `make runtime`; Kubernetes 1.37
supports 2.3 and later) and on containerd 1.6 (Debian 12's, `--runtime-bin-dir system`).
It asks the runtime what it can (CRI Status: runtime handler features and RuntimeFeatures;
its version where CRI has no feature flag) and refuses at admission what the runtime would
drop:

"""


# What each runtime enables (the header's table): feature, containerd 2.3+, 2.0-2.2, 1.6.
_RUNTIME_ROWS = (
    ("", "containerd 2.3+ (2.4.2 tested)", "containerd 2.0-2.2", "containerd 1.6"),
    ("`hostUsers: false` (user namespaces)", "yes", "yes",
     "refused (`UserNamespacesNotSupported`)"),
    ("`recursiveReadOnly: Enabled`", "yes", "yes",
     "`CreateContainerConfigError` (IfPossible: not recursive)"),
    ("image volumes (`volumes[].image`)", "yes", "2.1+", "refused (`ImageVolumesNotSupported`)"),
    ("`supplementalGroupsPolicy: Strict`, `containerStatuses[].user`", "yes", "yes",
     "refused (`SupplementalGroupsPolicyNotSupported`); no `user`"),
    ("`lifecycle.stopSignal` (with the ContainerStopSignals gate)", "yes", "refused",
     "refused (`ContainerStopSignalsNotSupported`)"),
    ("runtime events", "CRI `GetContainerEvents`", "CRI `GetContainerEvents`",
     "containerd's own event API"),
)


def _runtime_table() -> list[str]:
    head, *rows = _RUNTIME_ROWS
    lines = ["| feature | " + " | ".join(head[1:]) + " |", "|---|---|---|---|"]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


def _section_of(path: str) -> str:
    # The longest matching prefix: "spec.containers[*].securityContext." before "spec.".
    return max((p for _, p in _SECTIONS if path.startswith(p)), key=len)


def render_markdown() -> str:
    lines = [_HEADER.rstrip("\n"), "", *_runtime_table()]
    rows = all_fields()
    for title, prefix in _SECTIONS:
        lines += [f"## {title}", "", "| Field | Status | What nodelet does |", "|---|---|---|"]
        for row in rows:
            if _section_of(row.path) == prefix:
                note = row.note.replace("|", "\\|")
                lines.append(f"| `{row.path}` | {row.status} | {note} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_markdown(), end="")
