"""Pod-spec fields that reach the runtime, on real containerd: hostAliases in the managed
/etc/hosts, mountPropagation of hostPath mounts, and stdin/tty."""

from __future__ import annotations

import io
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from nodelet.adapters import commands, mounts
from nodelet.model.core import crilogs, specs
from nodelet.model.core import status as st
from nodelet.services.serving import logs
from support.harness import Harness, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

LOCALHOST = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
ALIASES_SPEC = """\
hostAliases:
  - {ip: 10.1.2.3, hostnames: [foo.remote, bar.remote]}
  - {ip: "127.0.0.1", hostnames: [foo.local]}
"""
ALIAS_LINES = ("\n# Entries added by HostAliases.\n"
               "10.1.2.3\tfoo.remote\tbar.remote\n127.0.0.1\tfoo.local\n")


def state_of(pod_status: st.PodStatus | None, container: str) -> st.ContainerStateValue | None:
    for status in pod_status.container_statuses if pod_status else ():
        if status.name == container:
            return status.state
    return None


def terminated(pod_status: st.PodStatus | None,
               container: str = "main") -> st.ContainerStateTerminated | None:
    state = state_of(pod_status, container)
    return state if isinstance(state, st.ContainerStateTerminated) else None


def waiting(pod_status: st.PodStatus | None) -> st.ContainerStateWaiting | None:
    state = state_of(pod_status, "main")
    return state if isinstance(state, st.ContainerStateWaiting) and state.message else None


def running(pod_status: st.PodStatus | None, container: str = "main") -> bool:
    return isinstance(state_of(pod_status, container), st.ContainerStateRunning)


def log_lines(agent: Harness, name: str, container: str) -> tuple[list[crilogs.LogLine], bytes]:
    """The container's first log as records (nodelet's CRI parser) and as `nodelet logs`
    prints it."""
    found = agent.find(name)
    assert found is not None
    directory = Path(specs.pod_log_directory(agent.settings.data_dir / "logs", found[0]))
    target = logs.LogTarget(found[0].name, container, directory / container, 0)
    records = [crilogs.parse_line(r) for r in target.path.read_bytes().splitlines()]
    out = io.BytesIO()
    logs.write_logs(target, out)
    return records, out.getvalue()


# -- hostAliases -----------------------------------------------------------------------------


async def test_managed_etc_hosts_with_host_aliases(agent: Harness) -> None:
    cat = "cat /etc/hosts > /dev/termination-log"
    agent.write("aliases.yaml", pod_manifest(
        "aliases", command=cat, restart_policy="Never",
        extra_spec="hostname: db\n" + ALIASES_SPEC))
    agent.write("hostnet.yaml", pod_manifest(
        "hostnet", command=cat, restart_policy="Never",
        extra_spec="hostNetwork: true\n" + ALIASES_SPEC))
    pod_status = await agent.wait_status("aliases", terminated, what="aliases terminated")
    state = terminated(pod_status)
    assert state is not None and pod_status.pod_ip
    assert state.message == ("# Kubernetes-managed hosts file.\n" + LOCALHOST
                             + f"{pod_status.pod_ip}\tdb\n" + ALIAS_LINES)
    found = agent.find("aliases")
    assert found is not None
    hosts_file = agent.settings.data_dir / "pods" / found[0].uid / "etc-hosts"
    assert hosts_file.read_text() == state.message

    host_state = terminated(await agent.wait_status("hostnet", terminated,
                                                    what="hostnet terminated"))
    assert host_state is not None
    # The node's file, not containerd's copy of it: the header and the aliases say so.
    assert host_state.message == ("# Kubernetes-managed hosts file (host network).\n"
                                  + Path("/etc/hosts").read_text() + ALIAS_LINES)

    agent.remove("aliases.yaml")
    await eventually(lambda: agent.find("aliases") is None, within=30, what="aliases pod gone")
    assert not hosts_file.parent.exists()


# -- mountPropagation ------------------------------------------------------------------------


async def run(*argv: str) -> None:
    status, output = await commands.run(list(argv), limit=10)
    assert status == 0, f"{' '.join(argv)}: {output}"


@asynccontextmanager
async def shared_mount(directory: Path) -> AsyncIterator[Path]:
    """`directory` made a shared bind mount of itself; everything under it is unmounted after."""
    directory.mkdir(parents=True)
    try:
        await run("mount", "--bind", str(directory), str(directory))
        await run("mount", "--make-shared", str(directory))
        yield directory
    finally:
        await mounts.unmount_all(directory)
        assert not mounts.mounts_under(directory), "the test left mounts behind"


def propagation_pod(name: str, host_dir: Path, command: str) -> str:
    mount = ("volumeMounts:\n"
             "  - {name: host, mountPath: /host, mountPropagation: HostToContainer}\n")
    volume = f"volumes:\n  - name: host\n    hostPath: {{path: {host_dir}}}\n"
    return pod_manifest(name, command=command, restart_policy="Never", container_extra=mount,
                        extra_spec=volume)


async def test_host_to_container_sees_mounts_made_on_the_host_later(agent: Harness) -> None:
    wait_for_marker = ("until [ -f /host/sub/marker ]; do sleep 0.1; done; "
                       "cat /host/sub/marker > /dev/termination-log")
    async with shared_mount(agent.root / "shared") as shared:
        (shared / "sub").mkdir()
        agent.write("prop.yaml", propagation_pod("prop", shared, wait_for_marker))
        await agent.wait_status("prop", running, what="prop running")
        # Mounted after the container started: only propagation can bring it in.
        await run("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(shared / "sub"))
        (shared / "sub" / "marker").write_text("propagated")
        pod_status = await agent.wait_status("prop", terminated, what="marker seen")
        state = terminated(pod_status)
        assert state is not None and (state.exit_code, state.message) == (0, "propagated")
        agent.remove("prop.yaml")
        await eventually(lambda: agent.find("prop") is None, within=30, what="prop pod gone")


async def test_host_to_container_on_a_private_mount_fails_with_containerds_error(
    agent: Harness,
) -> None:
    private = agent.root / "private"  # under /tmp, on this machine's private root mount
    private.mkdir()
    agent.write("private.yaml", propagation_pod("private", private, "true"))
    pod_status = await agent.wait_status("private", waiting, what="a waiting reason")
    state = waiting(pod_status)
    assert state is not None and state.reason == "CreateContainerError"
    assert "is not a shared or slave mount" in state.message, state.message


# -- stdin and tty ---------------------------------------------------------------------------


STDIO_POD = textwrap.dedent("""\
    apiVersion: v1
    kind: Pod
    metadata: {name: stdio}
    spec:
      terminationGracePeriodSeconds: 1
      restartPolicy: Never
      containers:
        - name: interactive
          image: localhost/nodelet/busybox:latest
          imagePullPolicy: IfNotPresent
          stdin: true
          command: [sh, -c, "cat; echo done"]
        - name: batch
          image: localhost/nodelet/busybox:latest
          imagePullPolicy: IfNotPresent
          command: [sh, -c, "cat; echo done"]
        - name: terminal
          image: localhost/nodelet/busybox:latest
          imagePullPolicy: IfNotPresent
          tty: true
          command: [sh, -c, "[ -t 0 ] && [ -t 1 ] && echo is-a-tty; tty"]
    """)


async def test_stdin_stays_open_and_tty_is_a_terminal(agent: Harness) -> None:
    agent.write("stdio.yaml", STDIO_POD)

    def settled(pod_status: st.PodStatus) -> bool:
        return all(terminated(pod_status, c) is not None for c in ("batch", "terminal"))

    pod_status = await agent.wait_status("stdio", settled, what="batch and terminal exited")
    # Started first, and still running after the two others ran to the end: its stdin is a
    # pipe that containerd keeps open, not /dev/null as for `batch`.
    assert running(pod_status, "interactive"), pod_status.container_statuses
    assert [terminated(pod_status, c).exit_code  # type: ignore[union-attr]
            for c in ("batch", "terminal")] == [0, 0]
    _, batch_out = log_lines(agent, "stdio", "batch")
    assert batch_out == b"done\n"

    records, terminal_out = log_lines(agent, "stdio", "terminal")
    # With a terminal, output is one stream (stdout); the tty ends lines with CR LF, and
    # containerd's log writer drops the CR as it splits lines, so the lines read clean.
    assert {r.stream for r in records} == {"stdout"}
    assert all(not r.malformed and not r.partial for r in records), records
    assert terminal_out == b"is-a-tty\n/dev/pts/0\n", records
