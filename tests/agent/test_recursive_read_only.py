"""recursiveReadOnly in real containers: a hostPath volume with a tmpfs mounted inside it.

A plain read-only bind leaves the submount writable; a recursive read-only one (containerd
2.x, runc's `rro`) does not. On a runtime without recursive read-only mounts (containerd 1.6)
IfPossible is a plain read-only mount and Enabled fails the container with the kubelet's
CreateContainerConfigError.
"""

from __future__ import annotations

import subprocess

import pytest

from conftest import runtime_programs_for_tests
from support.harness import Harness, pod_manifest, waiting
from support.polling import eventually

pytestmark = pytest.mark.runtime

PROBE = ("if touch /data/sub/x 2>/dev/null; then echo WROTE; else echo REFUSED; fi; "
         "sleep 1000000")


def runtime_has_rro() -> bool:
    return runtime_programs_for_tests().major >= 2


def write_pod(agent: Harness, name: str, recursive: str) -> None:
    base = agent.root / "rro"
    (base / "sub").mkdir(parents=True, exist_ok=True)
    if not (base / "sub").is_mount():
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(base / "sub")], check=True)
    mount = ("volumeMounts:\n  - {name: data, mountPath: /data, readOnly: true, "
             f"recursiveReadOnly: {recursive}}}\n")
    volume = f"volumes:\n  - {{name: data, hostPath: {{path: {base}, type: Directory}}}}\n"
    agent.write(f"{name}.yaml", pod_manifest(name, command=PROBE, container_extra=mount,
                                             extra_spec=volume))


async def output(agent: Harness, name: str) -> str:
    """What the container printed (its CRI log file)."""
    logs = agent.settings.data_dir / "logs"

    def read() -> str:
        files = list(logs.glob(f"default_{name}-{agent.settings.node_name}_*/main/*.log"))
        return files[0].read_text() if files else ""

    text: str = await eventually(read, until=lambda t: "WROTE" in t or "REFUSED" in t,
                                 within=30, what=f"{name} tried to write")
    return text


@pytest.mark.parametrize(("recursive", "refused_with_rro"), [
    ("Disabled", False), ("IfPossible", True), ("Enabled", True),
])
async def test_a_recursive_read_only_mount_covers_its_submounts(
        agent: Harness, recursive: str, refused_with_rro: bool) -> None:
    rro = runtime_has_rro()
    if recursive == "Enabled" and not rro:
        write_pod(agent, "rro", recursive)
        pod_status = await agent.wait_status(
            "rro", lambda s: waiting(s) is not None
            and waiting(s).reason == "CreateContainerConfigError",  # type: ignore[union-attr]
            what="CreateContainerConfigError")
        state = waiting(pod_status)
        assert state is not None and "not supported by the runtime" in state.message, state
        return
    write_pod(agent, "rro", recursive)
    text = await output(agent, "rro")
    expected = "REFUSED" if refused_with_rro and rro else "WROTE"
    assert expected in text, text
