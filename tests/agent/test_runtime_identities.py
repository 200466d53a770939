"""What containerd 2.x adds to a container's identity and its stop, in real containers:

- `supplementalGroupsPolicy: Strict`: the groups the image's /etc/group gives the user are
  left out (Merge adds them), and `containerStatuses[].user.linux` shows what the process got;
- `lifecycle.stopSignal` (the ContainerStopSignals gate): the container is stopped with that
  signal, and `containerStatuses[].stopSignal` shows it.

On the older runtime (containerd 1.6, `NODELET_TEST_RUNTIME=system`) both are refused at
admission with their reasons, and Merge runs as before. The image is a busybox variant pushed
to the test registry with a user `app` (1000) that /etc/group puts in group `extra` (5000).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import AgentFactory, runtime_programs_for_tests
from nodelet import settings
from support.harness import Harness, all_ready, pod_manifest
from support.polling import eventually
from support.registry import Registry

pytestmark = pytest.mark.runtime

GROUP_FILES = {
    "etc/passwd": (b"root:x:0:0:root:/root:/bin/sh\n"
                   b"app:x:1000:1000:app:/:/bin/sh\n"
                   b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
    "etc/group": b"root:x:0:\napp:x:1000:\nextra:x:5000:app\nnogroup:x:65534:\n",
}
DEFAULT_IMAGE = "image: localhost/nodelet/busybox:latest"


def newer_runtime() -> bool:
    return runtime_programs_for_tests().version >= (2, 0, 0)


def stop_signals_applied() -> bool:
    return runtime_programs_for_tests().version >= (2, 3, 0)


def _log(agent: Harness, pod: str) -> str:
    logs = agent.settings.data_dir / "logs"
    files = sorted(logs.glob(f"default_{pod}-{agent.settings.node_name}_*/main/*.log"))
    return files[0].read_text() if files else ""


def _groups_pod(name: str, image: str, policy: str) -> str:
    security = textwrap.dedent(f"""\
        securityContext:
          runAsUser: 1000
          supplementalGroups: [6000]
          supplementalGroupsPolicy: {policy}
        """)
    text = pod_manifest(name, command="echo groups: $(id -G); exec sleep 1000000",
                        extra_spec=security)
    assert text.count(DEFAULT_IMAGE) == 1
    return text.replace(DEFAULT_IMAGE, f"image: {image}")


async def test_strict_leaves_the_images_groups_out(pulled: list[str], agent: Harness,
                                                   registry: Registry) -> None:
    image = registry.push("nodelet/groups", "v1", files=GROUP_FILES)
    pulled.append(image)
    agent.write("merge.yaml", _groups_pod("merge", image, "Merge"))
    agent.write("strict.yaml", _groups_pod("strict", image, "Strict"))

    merged = await agent.wait_status("merge", all_ready, what="the Merge pod running")
    text = await eventually(lambda: _log(agent, "merge"), until=lambda t: "groups:" in t,
                            within=30, what="the Merge pod's groups")
    assert sorted(text.split("groups:")[1].split()) == ["1000", "5000", "6000"], text
    if not newer_runtime():
        assert merged.container_statuses[0].user is None  # 1.6 does not say
        refused = await agent.wait_status("strict", lambda s: s.phase == "Failed",
                                          what="Strict refused at admission")
        assert refused.reason == "SupplementalGroupsPolicyNotSupported", refused
        return
    user = merged.container_statuses[0].user
    assert user is not None and (user.uid, user.gid) == (1000, 1000), user
    assert sorted(user.supplemental_groups) == [1000, 5000, 6000], user

    strict = await agent.wait_status("strict", all_ready, what="the Strict pod running")
    text = await eventually(lambda: _log(agent, "strict"), until=lambda t: "groups:" in t,
                            within=30, what="the Strict pod's groups")
    assert sorted(text.split("groups:")[1].split()) == ["1000", "6000"], text
    user = strict.container_statuses[0].user
    assert user is not None and sorted(user.supplemental_groups) == [1000, 6000], user


def _signal_pod(name: str, out: Path) -> str:
    """A container that records the signal it is stopped with on a hostPath, then exits."""
    traps = "; ".join(f"trap 'echo {sig} > /out/signal; exit 0' {sig}" for sig in ("TERM", "USR1"))
    text = pod_manifest(name, command=f"{traps}; echo trapping; while true; do sleep 0.1; done",
                        grace=30, container_extra=textwrap.dedent("""\
                            lifecycle: {stopSignal: SIGUSR1}
                            volumeMounts: [{name: out, mountPath: /out}]
                            """),
                        extra_spec=textwrap.dedent(f"""\
                            os: {{name: linux}}
                            volumes: [{{name: out, hostPath: {{path: {out}}}}}]
                            """))
    return text


async def test_a_stop_signal_stops_the_container(make_agent: AgentFactory,
                                                 tmp_path: Path) -> None:
    agent = await make_agent(gates=settings.FeatureGates(container_stop_signals=True))
    out = tmp_path / "out"
    out.mkdir()
    manifest = agent.write("usr1.yaml", _signal_pod("usr1", out))
    if not stop_signals_applied():
        refused = await agent.wait_status("usr1", lambda s: s.phase == "Failed",
                                          what="refused at admission")
        assert refused.reason == "ContainerStopSignalsNotSupported", refused
        assert "containerd 2.3" in refused.message, refused.message
        return
    running = await agent.wait_status("usr1", all_ready, what="the pod running")
    assert running.container_statuses[0].stop_signal == "SIGUSR1", running
    await eventually(lambda: _log(agent, "usr1"), until=lambda t: "trapping" in t, within=30,
                     what="the traps set")
    manifest.unlink()
    signal = out / "signal"
    text = await eventually(lambda: signal.read_text() if signal.exists() else "",
                            until=bool, within=30, what="the container stopped")
    assert text.strip() == "USR1"


async def test_without_the_gate_a_stop_signal_is_refused(agent: Harness,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    agent.write("usr1.yaml", _signal_pod("usr1", out))
    refused = await agent.wait_status("usr1", lambda s: s.phase == "Failed",
                                      what="refused at admission")
    assert refused.reason == "ContainerStopSignalsNotSupported", refused
    assert "ContainerStopSignals=true" in refused.message, refused.message


async def test_a_plain_container_shows_no_stop_signal_without_the_gate(agent: Harness) -> None:
    agent.write("plain.yaml", pod_manifest("plain"))
    running = await agent.wait_status("plain", all_ready, what="the pod running")
    assert running.container_statuses[0].stop_signal == ""
