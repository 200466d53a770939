"""Pod security on real containerd, checked inside the containers: the kubelet's default
hardening, securityContext settings, namespaces, sysctls, seccomp, and refusals."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from conftest import AgentFactory, Instance
from nodelet import settings
from nodelet.adapters import host
from nodelet.model.core import security
from nodelet.model.core import status as st
from support.harness import Harness, all_ready, exec_in

pytestmark = pytest.mark.runtime

BUSYBOX = "localhost/nodelet/busybox:latest"
# containerd's default capability set (the kubelet adds nothing to it by default).
DEFAULT_CAPS = 0x00000000A80425FB


def manifest(name: str, *, spec: str = "", containers: dict[str, str] | None = None) -> str:
    """A pod whose containers (name → YAML under the container) sleep; `spec` goes under spec."""
    body = textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          terminationGracePeriodSeconds: 1
        """)
    body += textwrap.indent(textwrap.dedent(spec), "  ")
    body += "  containers:\n"
    for container, extra in (containers or {"main": ""}).items():
        body += f"    - name: {container}\n      image: {BUSYBOX}\n"
        body += "      imagePullPolicy: IfNotPresent\n"
        body += f"      command: [sleep, '{2000000 + len(body)}']\n"
        body += textwrap.indent(textwrap.dedent(extra), "      ")
    return body


async def run(client: object, pod_status: st.PodStatus, command: str,
              container: str = "main") -> str:
    result = await exec_in(client, pod_status, command, container=container)  # type: ignore[arg-type]
    assert result.exit_code == 0, (command, result)
    return result.stdout.decode()


async def fails(client: object, pod_status: st.PodStatus, command: str,
                container: str = "main") -> str:
    result = await exec_in(client, pod_status, command, container=container)  # type: ignore[arg-type]
    assert result.exit_code != 0, (command, result)
    return result.stderr.decode()


def proc_status(text: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def mount_points(mountinfo: str) -> dict[str, tuple[str, str]]:
    """Mount point → (mount options, source root) from /proc/self/mountinfo."""
    out = {}
    for line in mountinfo.splitlines():
        parts = line.split()
        out[parts[4]] = (parts[5], parts[3])
    return out


def host_exists(path: str) -> bool:
    return os.path.exists(path)


async def test_a_default_pod_is_hardened_as_by_the_kubelet(agent: Harness,
                                                           runtime: Instance) -> None:
    agent.write("plain.yaml", manifest("plain", containers={"main": "", "other": ""}))
    pod_status = await agent.wait_status("plain", all_ready, what="plain pod running")
    status = proc_status(await run(runtime.client, pod_status, "cat /proc/self/status"))
    assert int(status["CapEff"], 16) == DEFAULT_CAPS
    assert (status["NoNewPrivs"], status["Seccomp"]) == ("0", "0")
    points = mount_points(await run(runtime.client, pod_status, "cat /proc/self/mountinfo"))
    masked = [p for p in security.DEFAULT_MASKED_PATHS if host_exists(p)]
    assert masked and all(p in points for p in masked), (masked, sorted(points))
    for path in (p for p in security.DEFAULT_READONLY_PATHS if host_exists(p)):
        assert points[path][0].split(",")[0] == "ro", (path, points[path])
    # /proc/sys is read-only: a write fails (domainname is per UTS namespace, so harmless).
    assert "Read-only file system" in await fails(
        runtime.client, pod_status, "echo x > /proc/sys/kernel/domainname")
    assert await run(runtime.client, pod_status, "cat /proc/keys /proc/timer_list") == ""
    # One PID namespace per container: PID 1 is the container's own command, and the other
    # container's sleep is not visible.
    processes = await run(runtime.client, pod_status, "ps -o pid,args")
    assert any(line.split()[:2] == ["1", "sleep"] for line in processes.splitlines())
    assert processes.count("sleep") == 1, processes


HARDENED_SPEC = """\
securityContext:
  runAsUser: 1000
  runAsGroup: 3000
  supplementalGroups: [4000]
  fsGroup: 2000
volumes:
  - name: scratch
    emptyDir: {}
  - name: info
    downwardAPI:
      defaultMode: 0400
      items: [{path: name, fieldRef: {fieldPath: metadata.name}}]
"""
HARDENED_CONTAINER = """\
volumeMounts: [{name: scratch, mountPath: /scratch}, {name: info, mountPath: /info}]
securityContext:
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  seccompProfile: {type: RuntimeDefault}
"""


async def test_user_groups_read_only_root_no_new_privs_seccomp_and_fs_group(
    agent: Harness, runtime: Instance
) -> None:
    agent.write("hardened.yaml", manifest("hardened", spec=HARDENED_SPEC,
                                          containers={"main": HARDENED_CONTAINER}))
    pod_status = await agent.wait_status("hardened", all_ready, what="hardened pod running")
    client = runtime.client
    assert (await run(client, pod_status, "id -u; id -g")).split() == ["1000", "3000"]
    status = proc_status(await run(client, pod_status, "cat /proc/self/status"))
    assert set(status["Groups"].split()) == {"2000", "3000", "4000"}
    assert (status["CapEff"], status["NoNewPrivs"], status["Seccomp"]) == (
        "0000000000000000", "1", "2")
    assert "Read-only file system" in await fails(client, pod_status, "touch /x")
    # fsGroup: the emptyDir is the group's (setgid, so new files are too) and the downward
    # API file is group-readable.
    listing = await run(client, pod_status, "touch /scratch/f && stat -c '%g %A' /scratch "
                        "/scratch/f && stat -L -c '%g %a' /info/name && cat /info/name")
    lines = listing.splitlines()
    assert lines[0] == "2000 drwxrwsrwx" and lines[1].startswith("2000 ")
    assert lines[2] == "2000 440" and lines[3] == "hardened-testnode"


async def test_capabilities_and_privileged(agent: Harness, runtime: Instance) -> None:
    agent.write("caps.yaml", manifest("caps", containers={
        "main": "securityContext: {capabilities: {drop: [ALL], add: [NET_ADMIN]}}\n",
        "root": "securityContext: {privileged: true}\n",
    }))
    pod_status = await agent.wait_status("caps", all_ready, what="caps pod running")
    client = runtime.client
    status = proc_status(await run(client, pod_status, "cat /proc/self/status"))
    assert int(status["CapEff"], 16) == 1 << 12  # CAP_NET_ADMIN only
    await run(client, pod_status,
              "ip addr add 10.255.0.1/32 dev lo && ip addr del 10.255.0.1/32 dev lo")
    assert "Operation not permitted" in await fails(client, pod_status, "chown 1 /tmp")
    # Privileged: every capability the node has, /proc/sys writable, the host's devices.
    host_caps = proc_status(Path("/proc/self/status").read_text())["CapBnd"]
    status = proc_status(await run(client, pod_status, "cat /proc/self/status", "root"))
    assert status["CapEff"] == host_caps
    points = mount_points(await run(client, pod_status, "cat /proc/self/mountinfo", "root"))
    assert "/proc/keys" not in points and "/proc/sys" not in points
    devices = (await run(client, pod_status, "ls /dev", "root")).split()
    assert len(devices) > 20 and "kmsg" in devices


async def test_shared_and_host_namespaces(agent: Harness, runtime: Instance) -> None:
    agent.write("shared.yaml", manifest("shared", spec="shareProcessNamespace: true\n",
                                        containers={"main": "", "other": ""}))
    agent.write("hostns.yaml", manifest("hostns", spec="hostPID: true\nhostIPC: true\n"))
    shared = await agent.wait_status("shared", all_ready, what="shared pod running")
    host = await agent.wait_status("hostns", all_ready, what="hostns pod running")
    client = runtime.client
    processes = await run(client, shared, "ps -o pid,args")
    assert any(line.split()[:2] == ["1", "/pause"] for line in processes.splitlines()), processes
    assert processes.count("sleep 2") == 2, processes  # this container's and the other's
    namespaces = "readlink /proc/self/ns/pid; readlink /proc/self/ns/ipc"
    links = (await run(client, host, namespaces)).split()
    assert links == [os.readlink("/proc/self/ns/pid"), os.readlink("/proc/self/ns/ipc")]
    links = (await run(client, shared, namespaces)).split()
    assert os.readlink("/proc/self/ns/pid") not in links
    assert os.readlink("/proc/self/ns/ipc") not in links


async def test_sysctls_safe_applied_unsafe_refused(agent: Harness, runtime: Instance) -> None:
    agent.write("safe.yaml", manifest("safe", spec="""\
        securityContext:
          sysctls:
            - {name: kernel.shm_rmid_forced, value: "1"}
            - {name: net/ipv4/ip_unprivileged_port_start, value: "80"}
        """))
    agent.write("unsafe.yaml", manifest("unsafe", spec="""\
        securityContext:
          sysctls: [{name: net.core.somaxconn, value: "1024"}]
        """))
    safe = await agent.wait_status("safe", all_ready, what="safe sysctls pod running")
    values = await run(runtime.client, safe, "cat /proc/sys/kernel/shm_rmid_forced "
                       "/proc/sys/net/ipv4/ip_unprivileged_port_start")
    assert values.split() == ["1", "80"]
    unsafe = await agent.wait_status("unsafe", lambda s: s.phase == "Failed",
                                     what="unsafe sysctl refused")
    message = 'Pod was rejected: forbidden sysctl: "net.core.somaxconn" not allowlisted'
    assert (unsafe.reason, unsafe.message) == ("SysctlForbidden", message)
    events = [(e.type, e.reason, e.message) for e in agent.events_of("unsafe")]
    assert ("Warning", "SysctlForbidden", message.removeprefix("Pod was rejected: ")) in events
    assert unsafe.container_statuses == ()  # no container ever existed, as under the kubelet
    assert all_ready(agent.status_of("safe"))  # type: ignore[arg-type]


async def test_allowed_unsafe_sysctl_is_applied(make_agent: AgentFactory,
                                                runtime: Instance) -> None:
    agent = await make_agent(security=settings.SecuritySettings(
        allowed_unsafe_sysctls=("net.core.somaxconn",)))
    agent.write("unsafe.yaml", manifest("unsafe", spec="""\
        securityContext:
          sysctls: [{name: net.core.somaxconn, value: "1234"}]
        """))
    pod_status = await agent.wait_status("unsafe", all_ready, what="allowed sysctl pod running")
    value = await run(runtime.client, pod_status, "cat /proc/sys/net/core/somaxconn")
    assert value.strip() == "1234"


async def test_run_as_non_root_is_checked_against_the_image(agent: Harness,
                                                          runtime: Instance) -> None:
    agent.write("rootimage.yaml", manifest("rootimage", spec="""\
        securityContext: {runAsNonRoot: true}
        """))
    agent.write("nonroot.yaml", manifest("nonroot", spec="""\
        securityContext: {runAsNonRoot: true, runAsUser: 1000}
        """))
    nonroot = await agent.wait_status("nonroot", all_ready, what="non-root pod running")
    # The termination-message file is writable by any user (the kubelet makes it 0666).
    await run(runtime.client, nonroot, "id -u && echo bye > /dev/termination-log")

    def config_error(pod_status: st.PodStatus) -> bool:
        state = pod_status.container_statuses[0].state
        return isinstance(state, st.ContainerStateWaiting) and \
            state.reason == "CreateContainerConfigError"

    refused = await agent.wait_status("rootimage", config_error,
                                      what="CreateContainerConfigError")
    pod = agent.find("rootimage")[0]  # type: ignore[index]
    message = (f'container has runAsNonRoot and image will run as root (pod: '
               f'"{pod.name}_{pod.namespace}({pod.uid})", container: main)')
    state = refused.container_statuses[0].state
    assert isinstance(state, st.ContainerStateWaiting) and state.message == message
    assert ("Warning", "Failed", f"Error: {message}") in [
        (e.type, e.reason, e.message) for e in agent.events_of("rootimage")]
    assert refused.phase == "Pending"


async def test_localhost_seccomp_profile(agent: Harness, runtime: Instance) -> None:
    root = agent.settings.seccomp_profile_root
    root.mkdir(parents=True, exist_ok=True)
    (root / "no-mkdir.json").write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}],
    }))
    agent.write("seccomp.yaml", manifest("seccomp", containers={"main": """\
        securityContext:
          seccompProfile: {type: Localhost, localhostProfile: no-mkdir.json}
        """}))
    pod_status = await agent.wait_status("seccomp", all_ready, what="seccomp pod running")
    assert "Operation not permitted" in await fails(runtime.client, pod_status, "mkdir /tmp/d")
    status = proc_status(await run(runtime.client, pod_status, "cat /proc/self/status"))
    assert status["Seccomp"] == "2"


REFUSED = {
    "apparmor": ("securityContext: {appArmorProfile: {type: RuntimeDefault}}\n", "", "AppArmor",
                 "Cannot enforce AppArmor: AppArmor is not enabled on the host"),
    # Only where the runtime has no user namespaces (containerd 1.6): test_user_namespaces.
    "userns": ("hostUsers: false\n", "", "UserNamespacesNotSupported",
               "can't set `spec.hostUsers: false`, runtime does not support user namespaces"),
    "windows": ("os: {name: windows}\n", "", "PodOSNotSupported",
                "Failed to admit pod as the OS field doesn't match node OS"),
    "selector": ("nodeSelector: {disk: ssd}\n", "", "NodeAffinity",
                 "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                 "affinity/selector"),
    # Only where the runtime cannot leave the image's groups out (1.6): test_runtime_identities.
    "strictgroups": ("securityContext: {supplementalGroupsPolicy: Strict}\n", "",
                     "SupplementalGroupsPolicyNotSupported",
                     "SupplementalGroupsPolicy=Strict is not supported in this node"),
}


async def test_settings_the_node_cannot_honour_are_refused(agent: Harness,
                                                          runtime: Instance) -> None:
    refused = {name: case for name, case in REFUSED.items()
               if name not in ("userns", "strictgroups") or runtime.containerd.programs.major < 2}
    agent.write("bystander.yaml", manifest("bystander"))
    for name, (spec, _, _, _) in refused.items():
        agent.write(f"{name}.yaml", manifest(name, spec=spec))
    for name, (_, _, reason, message) in refused.items():
        pod_status = await agent.wait_status(name, lambda s: s.phase == "Failed",
                                             what=f"{name} refused")
        assert pod_status.reason == reason
        assert pod_status.message.startswith(f"Pod was rejected: {message}")
        assert any(e.reason == reason and e.type == "Warning" for e in agent.events_of(name))
        # As the kubelet's rejectPod: none of its conditions (tests/differential).
        assert pod_status.condition(st.POD_READY_TO_START_CONTAINERS) is None
        assert pod_status.conditions == ()
    await agent.wait_status("bystander", all_ready, what="bystander runs")
    # Nothing was created for the refused pods.
    sandbox_uids = {s.uid for s in await runtime.client.list_pod_sandboxes()}
    refused_uids = {agent.find(name)[0].uid for name in refused}  # type: ignore[index]
    assert not refused_uids & sandbox_uids


@pytest.mark.skipif(host.selinux_enabled(), reason="the host has SELinux: the options are "
                    "enforced there")
async def test_selinux_options_run_without_selinux_as_under_the_kubelet(agent: Harness) -> None:
    # Found by the [NodeConformance] EmptyDir tests, whose pods all set seLinuxOptions: the
    # kubelet passes them to the runtime, which ignores them on a host without SELinux.
    agent.write("selinux.yaml", manifest(
        "selinux", spec="securityContext: {seLinuxOptions: {level: 's0:c0,c1'}}\n",
        containers={"main": "securityContext: {seLinuxOptions: {type: spc_t}}\n"}))
    pod_status = await agent.wait_status("selinux", all_ready, what="the selinux pod runs")
    assert pod_status.phase == "Running"
