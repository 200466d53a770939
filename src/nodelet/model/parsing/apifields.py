"""The v1 fields (k8s.io/api/core/v1 types.go), including those nodelet ignores.

Strict field validation rejects any field not listed here, so the allowlists hold every real
v1 field: a real manifest must never be rejected for a field nodelet does not read. The tuples
are the closed sets of values, in the order error messages list them.
"""

from __future__ import annotations

TOP_FIELDS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
        "annotations", "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip
SPEC_FIELDS = frozenset(
    {
        "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
        "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
        "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
        "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
        "imagePullSecrets", "hostname", "subdomain", "affinity", "schedulerName", "tolerations",
        "hostAliases", "priorityClassName", "priority", "dnsConfig", "readinessGates",
        "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
        "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
        "resourceClaims", "resources", "hostnameOverride", "workloadRef",
    }
)  # fmt: skip
CONTAINER_FIELDS = frozenset(
    {
        "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env",
        "resources", "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts",
        "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
        "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
        "securityContext", "stdin", "stdinOnce", "tty",
    }
)  # fmt: skip
PORT_FIELDS = frozenset({"name", "hostPort", "containerPort", "protocol", "hostIP"})
ENV_FIELDS = frozenset({"name", "value", "valueFrom"})
MOUNT_FIELDS = frozenset(
    {
        "name", "readOnly", "recursiveReadOnly", "mountPath", "subPath", "mountPropagation",
        "subPathExpr",
    }
)  # fmt: skip
RESOURCES_FIELDS = frozenset({"limits", "requests", "claims"})
HOST_ALIAS_FIELDS = frozenset({"ip", "hostnames"})
SECURITY_CONTEXT_FIELDS = frozenset(
    {
        "capabilities", "privileged", "seLinuxOptions", "windowsOptions", "runAsUser",
        "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation",
        "procMount", "seccompProfile", "appArmorProfile",
    }
)  # fmt: skip
POD_SECURITY_CONTEXT_FIELDS = frozenset(
    {
        "seLinuxOptions", "windowsOptions", "runAsUser", "runAsGroup", "runAsNonRoot",
        "supplementalGroups", "supplementalGroupsPolicy", "fsGroup", "sysctls",
        "fsGroupChangePolicy", "seccompProfile", "appArmorProfile", "seLinuxChangePolicy",
    }
)  # fmt: skip
CAPABILITIES_FIELDS = frozenset({"add", "drop"})
PROFILE_FIELDS = frozenset({"type", "localhostProfile"})
SELINUX_FIELDS = frozenset({"user", "role", "type", "level"})
WINDOWS_OPTIONS_FIELDS = frozenset(
    {"gmsaCredentialSpecName", "gmsaCredentialSpec", "runAsUserName", "hostProcess"}
)
SYSCTL_FIELDS = frozenset({"name", "value"})
OS_FIELDS = frozenset({"name"})
SUPPORTED_VOLUMES = ("emptyDir", "hostPath", "configMap", "secret", "projected", "downwardAPI",
                     "image", "persistentVolumeClaim", "ephemeral", "csi")
IMAGE_VOLUME_FIELDS = frozenset({"reference", "pullPolicy"})
VOLUME_SOURCES = frozenset(
    {
        *SUPPORTED_VOLUMES, "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs",
        "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs",
        "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
        "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral",
        "image",
    }
)  # fmt: skip
CONFIGMAP_FIELDS = frozenset({"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"})
SECRET_FIELDS = frozenset(
    {"apiVersion", "kind", "metadata", "data", "stringData", "type", "immutable"}
)
# A LocalObjectReference (an `imagePullSecrets` entry).
LOCAL_REFERENCE_FIELDS = frozenset({"name"})
OWNER_REFERENCE_FIELDS = frozenset(
    {"apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"}
)
MANAGED_FIELDS_ENTRY_FIELDS = frozenset(
    {"manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"}
)
DNS_CONFIG_FIELDS = frozenset({"nameservers", "searches", "options"})
DNS_OPTION_FIELDS = frozenset({"name", "value"})
READINESS_GATE_FIELDS = frozenset({"conditionType"})
SCHEDULING_GATE_FIELDS = frozenset({"name"})
TOLERATION_FIELDS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})

# Inside the volume sources nodelet runs (the other sources are refused as a whole).
EMPTY_DIR_FIELDS = frozenset({"medium", "sizeLimit"})
HOST_PATH_FIELDS = frozenset({"path", "type"})
CLAIM_VOLUME_FIELDS = frozenset({"claimName", "readOnly"})
CSI_VOLUME_FIELDS = frozenset(
    {"driver", "readOnly", "fsType", "volumeAttributes", "nodePublishSecretRef"})
EPHEMERAL_VOLUME_FIELDS = frozenset({"volumeClaimTemplate"})
CLAIM_TEMPLATE_FIELDS = frozenset({"metadata", "spec"})
VOLUME_DEVICE_FIELDS = frozenset({"name", "devicePath"})
CONFIGMAP_VOLUME_FIELDS = frozenset({"name", "items", "defaultMode", "optional"})
SECRET_VOLUME_FIELDS = frozenset({"secretName", "items", "defaultMode", "optional"})
KEY_TO_PATH_FIELDS = frozenset({"key", "path", "mode"})
DOWNWARD_API_VOLUME_FIELDS = frozenset({"items", "defaultMode"})
DOWNWARD_API_FILE_FIELDS = frozenset({"path", "fieldRef", "resourceFieldRef", "mode"})
OBJECT_FIELD_SELECTOR_FIELDS = frozenset({"apiVersion", "fieldPath"})
RESOURCE_FIELD_SELECTOR_FIELDS = frozenset({"containerName", "resource", "divisor"})
PROJECTED_FIELDS = frozenset({"sources", "defaultMode"})
SUPPORTED_PROJECTIONS = ("secret", "downwardAPI", "configMap", "serviceAccountToken")
PROJECTIONS = frozenset({*SUPPORTED_PROJECTIONS, "clusterTrustBundle", "podCertificate"})
PROJECTED_OBJECT_FIELDS = frozenset({"name", "items", "optional"})  # secret and configMap
PROJECTED_DOWNWARD_API_FIELDS = frozenset({"items"})
SERVICE_ACCOUNT_TOKEN_FIELDS = frozenset({"audience", "expirationSeconds", "path"})

RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
PROTOCOLS = ("TCP", "UDP", "SCTP")
MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
PROFILE_TYPES = ("RuntimeDefault", "Unconfined", "Localhost")
PROC_MOUNT_TYPES = ("Default", "Unmasked")
FS_GROUP_CHANGE_POLICIES = ("OnRootMismatch", "Always")
SUPPLEMENTAL_GROUPS_POLICIES = ("Merge", "Strict")
SELINUX_CHANGE_POLICIES = ("MountOption", "Recursive")
OS_NAMES = ("linux", "windows")
RECURSIVE_READ_ONLY = ("Disabled", "IfPossible", "Enabled")
# emptyDir media of v1 (`HugePages-<size>` too); the kubelet refuses others when it mounts.
STORAGE_MEDIA = ("", "Memory", "HugePages")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Sub-objects that are type-checked only (a mapping or a list); nodelet does not read them.
SPEC_MAPPINGS = ("affinity",)
SPEC_LISTS = ("topologySpreadConstraints",)
SPEC_STRINGS = ("serviceAccount", "schedulerName")
SPEC_BOOLS = ("automountServiceAccountToken", "enableServiceLinks", "setHostnameAsFQDN")
