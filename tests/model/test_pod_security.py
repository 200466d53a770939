"""Pod security (pure): parsing and API validation of securityContext, the CRI security
contexts the kubelet would send, runAsNonRoot, and admission refusals."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from nodelet.adapters.cri import convert
from nodelet.model.core import admission, pods, runtime, security, specs
from nodelet.model.parsing import manifests

NODE = "node-1"
OPTIONS = security.Options(seccomp_profile_root=Path("/var/lib/nodelet/seccomp"))
LINUX_NODE = admission.Node(labels={"kubernetes.io/os": "linux", "disk": "ssd"})


def pod(spec: dict[str, Any] | None = None, container: dict[str, Any] | None = None,
        annotations: dict[str, str] | None = None, *, api: bool = False) -> pods.Pod:
    """A static pod, or with `api` one the API server sent (checked as it is, not strictly)."""
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "busybox", **(container or {})}],
                 **(spec or {})},
    }
    if api:
        obj["metadata"]["uid"] = "uid-p"
        return manifests.pod_from_object(obj, node_name=NODE, source="api", strict=False)
    return manifests.pod_from_object(obj, node_name=NODE)


def container_security(p: pods.Pod, user: security.ImageUser = security.ROOT,
                       options: security.Options = OPTIONS) -> runtime.ContainerSecurity:
    return security.container_security(p, p.spec.containers[0], user, options)


# --- parsing and validation ----------------------------------------------------------------


def test_security_contexts_are_parsed() -> None:
    p = pod({"securityContext": {"runAsUser": 1, "runAsGroup": 2, "runAsNonRoot": True,
                                 "supplementalGroups": [3, 4], "fsGroup": 5,
                                 "fsGroupChangePolicy": "OnRootMismatch",
                                 "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}],
                                 "seccompProfile": {"type": "RuntimeDefault"}},
             "hostPID": True, "hostIPC": True},
            {"securityContext": {"privileged": False, "allowPrivilegeEscalation": False,
                                 "readOnlyRootFilesystem": True, "procMount": "Default",
                                 "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}})
    psc = p.spec.security_context
    assert (psc.run_as_user, psc.run_as_group, psc.run_as_non_root) == (1, 2, True)
    assert (psc.supplemental_groups, psc.fs_group, psc.fs_group_change_policy) == (
        (3, 4), 5, "OnRootMismatch")
    assert psc.sysctls == (("net.ipv4.tcp_syncookies", "1"),)
    assert psc.seccomp_profile == pods.SeccompProfile("RuntimeDefault")
    assert (p.spec.host_pid, p.spec.host_ipc, p.spec.share_process_namespace) == (
        True, True, False)
    sc = p.spec.containers[0].security_context
    assert sc == pods.SecurityContext(
        privileged=False, allow_privilege_escalation=False, read_only_root_filesystem=True,
        proc_mount="Default", capabilities=pods.Capabilities(add=("NET_ADMIN",), drop=("ALL",)))


@pytest.mark.parametrize(("spec", "container", "path", "words"), [
    ({"securityContext": {"runAsUser": -1}}, {}, "spec.securityContext.runAsUser",
     "out of range"),
    ({"securityContext": {"runAsUser": 2147483648}}, {}, "spec.securityContext.runAsUser",
     "out of range"),
    ({"securityContext": {"supplementalGroups": ["x"]}}, {},
     "spec.securityContext.supplementalGroups[0]", "an integer"),
    ({"securityContext": {"fsGroupChangePolicy": "Sometimes"}}, {},
     "spec.securityContext.fsGroupChangePolicy", "OnRootMismatch, Always"),
    ({"securityContext": {"sysctls": [{"name": "Net.IPv4", "value": "1"}]}}, {},
     "spec.securityContext.sysctls[0].name", "not a valid sysctl name"),
    ({"securityContext": {"sysctls": [{"name": "a.b", "value": "1"},
                                      {"name": "a/b", "value": "2"}]}}, {},
     "spec.securityContext.sysctls[1].name", "duplicate sysctl"),
    ({"securityContext": {"seccompProfile": {"type": "Localhost"}}}, {},
     "spec.securityContext.seccompProfile.localhostProfile", "required"),
    ({"securityContext": {"seccompProfile": {"type": "RuntimeDefault",
                                             "localhostProfile": "x"}}}, {},
     "spec.securityContext.seccompProfile.localhostProfile", "only be set"),
    ({"securityContext": {"seccompProfile": {"type": "Localhost",
                                             "localhostProfile": "../x.json"}}}, {},
     "spec.securityContext.seccompProfile.localhostProfile", "'..'"),
    ({"securityContext": {"seccompProfile": {"type": "Localhost",
                                             "localhostProfile": "/etc/x.json"}}}, {},
     "spec.securityContext.seccompProfile.localhostProfile", "relative path"),
    ({"securityContext": {"seccompProfile": {"type": "Strict"}}}, {},
     "spec.securityContext.seccompProfile.type", "RuntimeDefault, Unconfined, Localhost"),
    ({"securityContext": {"runAsUsr": 1}}, {}, "spec.securityContext.runAsUsr",
     'did you mean "spec.securityContext.runAsUser"'),
    ({}, {"securityContext": {"capabilities": {"add": "NET_ADMIN"}}},
     "spec.containers[0].securityContext.capabilities.add", "a list of strings"),
    ({}, {"securityContext": {"privileged": "yes"}},
     "spec.containers[0].securityContext.privileged", "a boolean"),
    ({}, {"securityContext": {"procMount": "Raw"}},
     "spec.containers[0].securityContext.procMount", "Default, Unmasked"),
    ({}, {"securityContext": {"procMount": "Unmasked"}},
     "spec.containers[0].securityContext.procMount", "`hostUsers` must be false"),
    ({}, {"securityContext": {"allowPrivilegeEscalation": False, "privileged": True}},
     "spec.containers[0].securityContext", "`privileged` to true"),
    ({}, {"securityContext": {"allowPrivilegeEscalation": False,
                              "capabilities": {"add": ["CAP_SYS_ADMIN"]}}},
     "spec.containers[0].securityContext", "CAP_SYS_ADMIN"),
    ({}, {"securityContext": {"allowPrivilegeEscalation": False,
                              "capabilities": {"add": ["SYS_ADMIN"]}}}, "", ""),
    ({"hostPID": True, "shareProcessNamespace": True}, {}, "spec.shareProcessNamespace",
     "cannot both be enabled"),
    ({"hostUsers": False, "hostNetwork": True}, {}, "spec.hostNetwork",
     "`hostUsers` is false"),
    ({"os": {"name": "plan9"}}, {}, "spec.os.name", "linux, windows"),
    ({"hostPID": "true"}, {}, "spec.hostPID", "a boolean"),
])
def test_invalid_security_fields_are_rejected(spec: dict[str, Any], container: dict[str, Any],
                                              path: str, words: str) -> None:
    if not path:  # accepted by the API server (it checks the literal CAP_SYS_ADMIN only)
        pod(copy.deepcopy(spec), copy.deepcopy(container))
        return
    with pytest.raises(manifests.ManifestError) as info:
        pod(copy.deepcopy(spec), copy.deepcopy(container))
    assert info.value.path == path
    assert words in str(info.value)


# --- what CRI is asked for -------------------------------------------------------------------


def test_a_default_container_gets_the_kubelets_defaults() -> None:
    sec = container_security(pod())
    assert sec == runtime.ContainerSecurity(
        namespaces=runtime.NamespaceOptions(network=runtime.NamespaceMode.POD,
                                            pid=runtime.NamespaceMode.CONTAINER,
                                            ipc=runtime.NamespaceMode.POD),
        run_as_user=0,
        masked_paths=security.DEFAULT_MASKED_PATHS,
        readonly_paths=security.DEFAULT_READONLY_PATHS,
        seccomp=runtime.SecurityProfile("Unconfined"),
    )


def test_pod_values_are_defaults_and_the_container_wins() -> None:
    p = pod({"securityContext": {"runAsUser": 1000, "runAsGroup": 2000, "fsGroup": 3000,
                                 "supplementalGroups": [4000],
                                 "seccompProfile": {"type": "RuntimeDefault"}}},
            {"securityContext": {"runAsUser": 1001,
                                 "seccompProfile": {"type": "Localhost",
                                                    "localhostProfile": "a/b.json"}}})
    sec = container_security(p)
    assert (sec.run_as_user, sec.run_as_group, sec.supplemental_groups) == (
        1001, 2000, (3000, 4000))
    assert sec.seccomp == runtime.SecurityProfile(
        "Localhost", "/var/lib/nodelet/seccomp/a/b.json")
    sandbox = security.sandbox_security(p)
    assert (sandbox.run_as_user, sandbox.run_as_group, sandbox.supplemental_groups) == (
        1000, 2000, (3000, 4000))
    assert sandbox.seccomp == runtime.SecurityProfile("RuntimeDefault")


@pytest.mark.parametrize(("container", "no_new_privs"), [
    ({}, False),
    ({"securityContext": {}}, False),
    ({"securityContext": {"allowPrivilegeEscalation": True}}, False),
    ({"securityContext": {"allowPrivilegeEscalation": False}}, True),
])
def test_no_new_privs_only_when_escalation_is_explicitly_off(container: dict[str, Any],
                                                             no_new_privs: bool) -> None:
    assert container_security(pod(container=container)).no_new_privs is no_new_privs


def test_privileged_container_makes_a_privileged_sandbox() -> None:
    p = pod(container={"securityContext": {"privileged": True}})
    assert container_security(p).privileged
    assert security.sandbox_security(p).privileged
    assert not security.sandbox_security(pod()).privileged


def test_unmasked_proc_sends_empty_lists() -> None:
    p = pod({"hostUsers": False}, {"securityContext": {"procMount": "Unmasked"}})
    sec = container_security(p)
    assert (sec.masked_paths, sec.readonly_paths) == ((), ())


def test_seccomp_default_setting() -> None:
    options = security.Options(seccomp_default=True)
    assert container_security(pod(), options=options).seccomp == runtime.SecurityProfile(
        "RuntimeDefault")
    unconfined = pod(container={"securityContext": {"seccompProfile": {"type": "Unconfined"}}})
    assert container_security(unconfined, options=options).seccomp == runtime.SecurityProfile(
        "Unconfined")


@pytest.mark.parametrize(("spec", "pid", "ipc", "network"), [
    ({}, "CONTAINER", "POD", "POD"),
    ({"shareProcessNamespace": True}, "POD", "POD", "POD"),
    ({"hostPID": True, "hostIPC": True}, "NODE", "NODE", "POD"),
    ({"hostNetwork": True}, "CONTAINER", "POD", "NODE"),
])
def test_namespaces(spec: dict[str, Any], pid: str, ipc: str, network: str) -> None:
    options = security.namespaces(pod(spec))
    assert (options.pid.name, options.ipc.name, options.network.name) == (pid, ipc, network)


def test_the_image_user_fills_in_a_missing_run_as_user() -> None:
    named = security.ImageUser(username="nobody")
    sec = container_security(pod(), named)
    assert (sec.run_as_user, sec.run_as_username) == (None, "nobody")
    sec = container_security(pod(container={"securityContext": {"runAsUser": 5}}), named)
    assert (sec.run_as_user, sec.run_as_username) == (5, "")
    assert security.image_user(None) == security.ROOT
    info = runtime.ImageInfo(id="i", repo_tags=(), uid=65534)
    assert security.image_user(info) == security.ImageUser(uid=65534)


def test_apparmor_from_field_and_from_the_old_annotation() -> None:
    field = pod(container={"securityContext": {"appArmorProfile": {
        "type": "Localhost", "localhostProfile": "k8s-nginx"}}})
    assert container_security(field).apparmor == runtime.SecurityProfile("Localhost", "k8s-nginx")
    annotated = pod(annotations={security.APPARMOR_ANNOTATION_PREFIX + "c": "runtime/default"})
    assert container_security(annotated).apparmor == runtime.SecurityProfile("RuntimeDefault")
    assert container_security(pod()).apparmor is None


POD_NAME = "p-node-1_ns"


@pytest.mark.parametrize(("spec", "container", "user", "message"), [
    ({}, {}, security.ROOT, None),
    ({"securityContext": {"runAsNonRoot": True}}, {}, security.ROOT,
     "container has runAsNonRoot and image will run as root"),
    ({"securityContext": {"runAsNonRoot": True}}, {}, security.ImageUser(uid=1000), None),
    ({"securityContext": {"runAsNonRoot": True}}, {}, security.ImageUser(username="app"),
     "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is "
     "non-root"),
    ({"securityContext": {"runAsNonRoot": True, "runAsUser": 0}}, {},
     security.ImageUser(uid=1000), "container's runAsUser breaks non-root policy"),
    ({"securityContext": {"runAsNonRoot": True}}, {"securityContext": {"runAsUser": 7}},
     security.ROOT, None),
    ({}, {"securityContext": {"runAsNonRoot": True}}, security.ROOT,
     "container has runAsNonRoot and image will run as root"),
    ({"securityContext": {"runAsNonRoot": True}}, {"securityContext": {"runAsNonRoot": False}},
     security.ROOT, None),
])
def test_run_as_non_root(spec: dict[str, Any], container: dict[str, Any],
                         user: security.ImageUser, message: str | None) -> None:
    p = pod(spec, container)
    problem = security.run_as_non_root_error(p, p.spec.containers[0], user)
    if message is None:
        assert problem is None
    else:
        assert problem == f'{message} (pod: "{POD_NAME}({p.uid})", container: c)'


def test_container_config_carries_security_stdin_and_tty() -> None:
    p = pod(container={"tty": True, "stdin": True})
    sec = container_security(p)
    config = specs.container_config(p, p.spec.containers[0], attempt=0, kind="regular",
                                    security=sec)
    message = convert.container_config_to_pb(config)
    assert (message.tty, message.stdin) == (True, True)
    linux = message.linux.security_context
    assert list(linux.masked_paths) == list(security.DEFAULT_MASKED_PATHS)
    assert linux.namespace_options.pid == 1  # CONTAINER
    assert linux.run_as_user.value == 0 and linux.HasField("run_as_user")
    assert linux.seccomp.profile_type == 1  # Unconfined
    sandbox = convert.sandbox_config_to_pb(specs.sandbox_config(
        pod({"securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
             "hostNetwork": True}),
        attempt=0, logs_root=Path("/logs")))
    assert dict(sandbox.linux.sysctls) == {"kernel.shm_rmid_forced": "1"}
    assert sandbox.linux.security_context.namespace_options.network == 2  # NODE
    assert not sandbox.linux.security_context.HasField("run_as_user")


def test_legacy_apparmor_string_for_containerd_1_6() -> None:
    annotated = pod(annotations={security.APPARMOR_ANNOTATION_PREFIX + "c": "localhost/prof"})
    config = specs.container_config(annotated, annotated.spec.containers[0], attempt=0,
                                    kind="regular", security=container_security(annotated))
    linux = convert.container_config_to_pb(config).linux.security_context
    assert linux.apparmor_profile == "localhost/prof"
    assert linux.apparmor.localhost_ref == "prof"


# --- admission -------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "container", "reason", "message"), [
    ({"securityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1"}]}}, {},
     "SysctlForbidden", 'forbidden sysctl: "net.core.somaxconn" not allowlisted'),
    ({"securityContext": {"sysctls": [{"name": "kernel.panic", "value": "1"}]}}, {},
     "SysctlForbidden", 'forbidden sysctl: "kernel.panic" not allowlisted'),
    ({"hostNetwork": True,
      "securityContext": {"sysctls": [{"name": "net/ipv4/tcp_syncookies", "value": "1"}]}}, {},
     "SysctlForbidden", 'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net '
     "enabled"),
    ({"hostIPC": True,
      "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}}, {},
     "SysctlForbidden", 'forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc '
     "enabled"),
    ({"os": {"name": "windows"}}, {}, "PodOSNotSupported",
     "Failed to admit pod as the OS field doesn't match node OS"),
    ({"nodeSelector": {"kubernetes.io/os": "windows"}}, {}, "PodOSSelectorNodeLabelDoesNotMatch",
     "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"),
    ({"nodeSelector": {"disk": "hdd"}}, {}, "NodeAffinity",
     "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"),
    ({}, {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}, "AppArmor",
     "Cannot enforce AppArmor: AppArmor is not enabled on the host"),
    ({"hostUsers": False}, {}, "UserNamespacesNotSupported",
     "can't set `spec.hostUsers: false`, runtime does not support user namespaces"),
    ({"securityContext": {"supplementalGroupsPolicy": "Strict"}}, {},
     "SupplementalGroupsPolicyNotSupported",
     "SupplementalGroupsPolicy=Strict is not supported in this node"),
])
def test_admission_refusals(spec: dict[str, Any], container: dict[str, Any], reason: str,
                            message: str) -> None:
    # API pods: the API server refuses host-namespace sysctls of new static pods when they are
    # read; node affinity is checked for static pods only (the scheduler placed API pods).
    rejection = admission.admit(pod(spec, container, api=reason != "NodeAffinity"), LINUX_NODE)
    assert rejection == admission.Rejection(reason, message)
    assert rejection.status_message == f"Pod was rejected: {message}"


@pytest.mark.parametrize(("spec", "container", "node"), [
    ({}, {}, LINUX_NODE),
    ({"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_port_range",
                                       "value": "1024 65000"}]}}, {}, LINUX_NODE),
    ({"securityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1"}]}}, {},
     admission.Node(labels={}, allowed_unsafe_sysctls=("net.core.*",))),
    ({"os": {"name": "linux"}, "nodeSelector": {"disk": "ssd", "kubernetes.io/os": "linux"}},
     {}, LINUX_NODE),
    ({}, {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}, LINUX_NODE),
    ({}, {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
     admission.Node(labels={}, apparmor_enabled=True)),
    ({"securityContext": {"supplementalGroupsPolicy": "Merge"}}, {}, LINUX_NODE),
    ({"securityContext": {"seLinuxChangePolicy": "MountOption"}}, {}, LINUX_NODE),
    # Without SELinux the kubelet runs them (the runtime ignores the options): the
    # [NodeConformance] EmptyDir tests set seLinuxOptions on every pod.
    ({}, {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}, LINUX_NODE),
    # Ignored on Linux by the kubelet (the e2e suite's fake registry pod sets hostProcess).
    ({"hostNetwork": True}, {"securityContext": {"windowsOptions": {
        "hostProcess": True, "runAsUserName": "NT AUTHORITY\\SYSTEM"}}}, LINUX_NODE),
    ({"securityContext": {"seLinuxOptions": {"level": "s0:c0,c1"}}}, {}, LINUX_NODE),
    ({"securityContext": {"seLinuxOptions": {"type": "spc_t"},
                          "seLinuxChangePolicy": "Recursive"}}, {},
     admission.Node(labels={}, selinux_enabled=True)),
])
def test_admitted(spec: dict[str, Any], container: dict[str, Any], node: admission.Node) -> None:
    assert admission.admit(pod(spec, container), node) is None


def test_mount_option_relabelling_is_refused_on_selinux_hosts() -> None:
    p = pod({"securityContext": {"seLinuxChangePolicy": "MountOption"}})
    rejection = admission.admit(p, admission.Node(labels={}, selinux_enabled=True))
    assert rejection is not None and rejection.reason == "SELinux"


def test_sandbox_group_needs_a_user_and_sysctls_are_dotted() -> None:
    sandbox = security.sandbox_security(pod({"securityContext": {
        "runAsGroup": 3000, "sysctls": [{"name": "net/ipv4/conf/eth0.100/rp_filter",
                                         "value": "1"}]}}))
    assert (sandbox.run_as_user, sandbox.run_as_group) == (None, None)
    assert sandbox.sysctls == {"net.ipv4.conf.eth0/100.rp_filter": "1"}
    container = container_security(pod({"securityContext": {"runAsGroup": 3000}}))
    assert (container.run_as_user, container.run_as_group) == (0, 3000)


def test_apparmor_precedence_container_field_annotation_pod_field() -> None:
    annotations = {security.APPARMOR_ANNOTATION_PREFIX + "c": "unconfined"}
    pod_level = {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}
    assert container_security(pod(pod_level, annotations=annotations)).apparmor == \
        runtime.SecurityProfile("Unconfined")
    assert container_security(pod(pod_level)).apparmor == runtime.SecurityProfile(
        "RuntimeDefault")
    own = {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}
    assert container_security(pod(pod_level, own)).apparmor == runtime.SecurityProfile(
        "Unconfined")


def test_only_namespaced_sysctls_may_be_allowed() -> None:
    admission.check_allowed_unsafe_sysctls(("net.core.somaxconn", "kernel.msg*", "fs.mqueue.*"))
    with pytest.raises(ValueError, match="not known to be namespaced"):
        admission.check_allowed_unsafe_sysctls(("kernel.panic",))


AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def affine(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {AFFINITY: {"nodeSelectorTerms": list(terms)}},
                         "podAntiAffinity": {"anything": "the scheduler's"}}}


@pytest.mark.parametrize(("terms", "admitted"), [
    ([{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd", "nvme"]}]}],
     True),
    ([{"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}], False),
    ([{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}], True),
    ([{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}],
     True),
    ([{"matchExpressions": [{"key": "disk", "operator": "Exists"},
                            {"key": "cores", "operator": "Gt", "values": ["8"]}]}], False),
    ([{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}], True),
    ([{}], False),
])
def test_required_node_affinity_at_admission(terms: list[dict[str, Any]],
                                             admitted: bool) -> None:
    node = admission.Node(labels={"disk": "ssd", "cores": "4"}, name="node-1")
    rejection = admission.admit(pod(affine(*terms)), node)
    assert (rejection is None) is admitted
    if rejection is not None:
        assert rejection.reason == "NodeAffinity"


@pytest.mark.parametrize(("term", "words"), [
    ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "must be specified"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
     "may not be specified"),
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}, "single integer"),
    ({"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}, "In, NotIn"),
    ({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}, "In, NotIn"),
])
def test_invalid_node_affinity(term: dict[str, Any], words: str) -> None:
    with pytest.raises(manifests.ManifestError, match=words):
        pod(affine(term))
