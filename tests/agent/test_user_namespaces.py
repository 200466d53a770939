"""hostUsers: false in real containers: each pod in a user namespace of its own ID range.

On containerd 2.x the pod's root is an unprivileged host ID (its range starts at a multiple of
65536 above the host's first 65536 IDs, as the kubelet allocates it), volumes still work inside
it, and two pods never share a range; the range is kept in the pod's directory across an agent
restart. On containerd 1.6 (no user namespaces in CRI) the pod is refused at admission.
With the embedded containerd the pod runs wherever the data dir is, also under a directory
the pod's host user cannot traverse (runc, as that user, reaches the rootfs under the runtime's
state, which is kept under /run, not in the data dir).
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_asyncio

from conftest import runtime_bin_dir_for_tests, runtime_programs_for_tests
from nodelet.adapters import cni, containerd, mounts
from nodelet.model.core import userns
from nodelet.services.nodehealth import resetting
from support.harness import Harness, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

COMMAND = ("cat /proc/self/uid_map; id -u; touch /data/x && echo EMPTYDIR-WRITABLE; "
           "exec sleep 1000003")
SPEC = "hostUsers: false\nvolumes:\n  - {name: data, emptyDir: {}}\n"
MOUNT = "volumeMounts:\n  - {name: data, mountPath: /data}\n"


def runtime_has_userns() -> bool:
    return runtime_programs_for_tests().major >= 2


async def printed(agent: Harness, name: str) -> list[str]:
    logs = agent.settings.data_dir / "logs"

    def read() -> str:
        files = list(logs.glob(f"default_{name}-{agent.settings.node_name}_*/main/*.log"))
        return files[0].read_text() if files else ""

    text: str = await eventually(read, until=lambda t: "EMPTYDIR" in t or t.count("\n") >= 3,
                                 within=30, what=f"{name}'s output")
    # CRI log lines: "<time> stdout F <text>".
    return [line.split(" ", 3)[3] for line in text.splitlines()]


def host_uid_of(argv: bytes) -> int:
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == argv:
                status = (proc / "status").read_text()
                return int(next(x for x in status.splitlines() if x.startswith("Uid:")).split()[1])
        except OSError:
            continue
    raise AssertionError(f"no process {argv!r}")


async def test_pods_get_user_namespaces_of_their_own(agent: Harness) -> None:
    if not runtime_has_userns():
        agent.write("userns.yaml", pod_manifest("userns", command=COMMAND, extra_spec=SPEC,
                                                container_extra=MOUNT))
        refused = await agent.wait_status("userns", lambda s: s.phase == "Failed",
                                          what="refused at admission")
        assert refused.reason == "UserNamespacesNotSupported", refused
        return
    for name in ("userns", "userns-b"):
        agent.write(f"{name}.yaml", pod_manifest(name, command=COMMAND, extra_spec=SPEC,
                                                 container_extra=MOUNT))
    maps = {}
    for name in ("userns", "userns-b"):
        lines = await printed(agent, name)
        inside, host, length = (int(x) for x in lines[0].split())
        assert (inside, length) == (0, userns.IDS_PER_POD), lines
        assert host >= userns.FIRST_HOST_ID and host % userns.IDS_PER_POD == 0, lines
        assert lines[1:3] == ["0", "EMPTYDIR-WRITABLE"], lines  # root inside, volumes work
        maps[name] = host
    assert maps["userns"] != maps["userns-b"], maps
    # On the host the pod's root is the first ID of its range, not root.
    assert host_uid_of(b"sleep\x001000003\x00") in maps.values()

    found = agent.find("userns")
    assert found is not None
    kept = agent.settings.data_dir / "pods" / found[0].uid / userns.FILE
    assert userns.from_json(kept.read_bytes()).host_id == maps["userns"]
    # A restart keeps the range: a container restarted afterwards gets the same one.
    await agent.stop(terminate_pods=False)
    await agent.start()
    assert userns.from_json(kept.read_bytes()).host_id == maps["userns"]


@pytest_asyncio.fixture(loop_scope="session")
async def closed_agent() -> AsyncIterator[Harness]:
    """An agent on its own embedded containerd, its data dir under a directory only root may
    enter (as under /root, or `mktemp -d`); reset at the end, and checked to leave nothing."""
    harness = Harness(endpoint="unused")
    harness.root.chmod(0o700)
    harness.settings = replace(harness.settings, runtime=replace(
        harness.settings.runtime, endpoint=None, runtime_bin_dir=runtime_bin_dir_for_tests(),
        ready_timeout=30.0))
    try:
        await harness.start()
        yield harness
    finally:
        try:
            await harness.stop()
            await _reset_and_check(harness)
        finally:
            harness.cleanup()


async def _reset_and_check(harness: Harness) -> None:
    data_dir = harness.settings.data_dir
    state = containerd.ContainerdPaths.of(data_dir).state
    report = await resetting.reset(harness.settings)
    assert not report.errors, report.errors
    left = {"netns": await cni.instance_netns(data_dir),
            "veths": await cni.bridge_ports(data_dir),
            "bridge": await cni.bridge_exists(data_dir),
            "mounts": mounts.mounts_under(data_dir) + mounts.mounts_under(state),
            "data dir": data_dir.exists(), "state": state.exists()}
    assert not any(left.values()), f"{data_dir} leaked: {left}"


async def test_a_pod_runs_with_the_data_dir_under_a_closed_directory(
        closed_agent: Harness) -> None:
    if not runtime_has_userns():
        pytest.skip("containerd 1.6 refuses hostUsers: false (the other test covers it)")
    parent = closed_agent.settings.data_dir.parent
    assert stat.S_IMODE(os.stat(parent).st_mode) == 0o700
    closed_agent.write("closed.yaml", pod_manifest("closed", command=COMMAND, extra_spec=SPEC,
                                                   container_extra=MOUNT))
    await closed_agent.wait_status("closed", lambda s: s.phase == "Running", within=60,
                                   what="running in a user namespace")
    lines = await printed(closed_agent, "closed")
    assert int(lines[0].split()[1]) >= userns.FIRST_HOST_ID, lines
    assert lines[1:3] == ["0", "EMPTYDIR-WRITABLE"], lines
