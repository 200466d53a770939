"""Image volumes (KEP-4639) in real containers: an image's files mounted read-only.

On containerd 2.x the busybox image mounted at /img shows its files (a subPath of it too), is
read-only, and a missing image keeps the container waiting with the pull's reason as a
container image would; on containerd 1.6, which would drop the mount without a word, the pod
is refused at admission.
"""

from __future__ import annotations

import pytest

from conftest import runtime_programs_for_tests
from support.harness import Harness, all_ready, pod_manifest, waiting
from support.polling import eventually

pytestmark = pytest.mark.runtime

BUSYBOX = "localhost/nodelet/busybox:latest"
COMMAND = ("ls /img/bin/busybox /imgbin/busybox && "
           "if touch /img/x 2>/dev/null; then echo WRITABLE; else echo READ-ONLY; fi; "
           "exec sleep 1000004")


def runtime_mounts_images() -> bool:
    return runtime_programs_for_tests().version >= (2, 1, 0)


def manifest(name: str, reference: str, policy: str) -> str:
    mounts = ("volumeMounts:\n  - {name: img, mountPath: /img}\n"
              "  - {name: img, mountPath: /imgbin, subPath: bin}\n")
    volume = (f"volumes:\n  - name: img\n    image: {{reference: {reference}, "
              f"pullPolicy: {policy}}}\n")
    return pod_manifest(name, command=COMMAND, container_extra=mounts, extra_spec=volume)


async def test_an_image_volume_mounts_the_images_files(agent: Harness) -> None:
    agent.write("imgvol.yaml", manifest("imgvol", BUSYBOX, "IfNotPresent"))
    if not runtime_mounts_images():
        refused = await agent.wait_status("imgvol", lambda s: s.phase == "Failed",
                                          what="refused at admission")
        assert refused.reason == "ImageVolumesNotSupported", refused
        return
    logs = agent.settings.data_dir / "logs"

    def output() -> str:
        files = list(logs.glob(f"default_imgvol-{agent.settings.node_name}_*/main/*.log"))
        return files[0].read_text() if files else ""

    text = await eventually(output, until=lambda t: "READ-ONLY" in t or "WRITABLE" in t,
                            within=30, what="the container looked at the image volume")
    assert "/img/bin/busybox" in text and "/imgbin/busybox" in text, text
    assert "READ-ONLY" in text, text


async def test_a_missing_volume_image_keeps_the_container_waiting(agent: Harness) -> None:
    if not runtime_mounts_images():
        pytest.skip("refused at admission on this runtime (the test above)")
    agent.write("noimg.yaml", manifest("noimg", "localhost/nodelet/no-such:1", "Never"))
    pod_status = await agent.wait_status(
        "noimg", lambda s: waiting(s) is not None
        and waiting(s).reason == "ErrImageNeverPull",  # type: ignore[union-attr]
        what="ErrImageNeverPull for the volume's image")
    state = waiting(pod_status)
    assert state is not None and "localhost/nodelet/no-such:1" in state.message, state
    # As the kubelet's: the pull is about the pod (no container's field path), the container
    # that mounts it says so when it cannot start.
    events = agent.events_of("noimg")
    assert any(e.reason == "ErrImageNeverPull" and e.field_path == "" for e in events), events
    assert any(e.reason == "Failed" and e.message == "Error: ErrImageNeverPull"
               and e.field_path == "spec.containers{main}" for e in events), events


async def test_an_unmounted_volume_image_is_pulled_but_keeps_nobody_waiting(
    agent: Harness,
) -> None:
    """The kubelet pulls every image volume of the pod, mounted or not; one that no container
    mounts fails only with the puller's Warning event, and the pod runs."""
    if not runtime_mounts_images():
        pytest.skip("refused at admission on this runtime")
    volume = ("volumes:\n  - name: img\n    image: {reference: localhost/nodelet/no-such:2, "
              "pullPolicy: Never}\n")
    agent.write("unmounted.yaml", pod_manifest("unmounted", extra_spec=volume))
    await agent.wait_status("unmounted", all_ready, what="the pod runs")
    events = await eventually(
        lambda: [e for e in agent.events_of("unmounted") if e.reason == "ErrImageNeverPull"],
        within=30, what="the volume image's ErrImageNeverPull event")
    assert events[0].field_path == "" and "localhost/nodelet/no-such:2" in events[0].message
    assert not any(e.reason == "Failed" for e in agent.events_of("unmounted"))
