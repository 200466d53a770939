"""The node e2e cases of KEP-3085 for volumes, on real containerd: a missing ConfigMap or Secret
keeps the sandbox from being created; once it appears in the manifest dir the pod comes up."""

from __future__ import annotations

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, all_ready, is_true, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

SOURCES = {
    "ConfigMap": ("configMap", "name", "cm-that-unblock-pod-condition", "/config",
                  "data:\n  key: value\n"),
    "Secret": ("secret", "secretName", "secret-that-unblock-pod-condition", "/secret",
               "stringData:\n  key: value\n"),
}


def volume_pod(name: str, kind: str, *, init: bool) -> str:
    field, ref, obj, path, _ = SOURCES[kind]
    extra = f"volumes:\n  - name: vol\n    {field}:\n      {ref}: {obj}\n"
    mounts = f"volumeMounts:\n  - name: vol\n    mountPath: {path}\n"
    # The value has no newline: echo one, or the CRI logger holds the partial line back.
    return pod_manifest(name, init="sleep 1" if init else "", extra_spec=extra,
                        container_extra=mounts, command=f"cat {path}/key && echo && sleep 1000000")


def source_object(kind: str) -> str:
    _, _, obj, _, body = SOURCES[kind]
    return f"apiVersion: v1\nkind: {kind}\nmetadata:\n  name: {obj}\n{body}"


@pytest.mark.parametrize("init", [False, True], ids=["no-init", "with-init"])
@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
async def test_missing_volume_source_blocks_sandbox_until_it_appears(
    agent: Harness, kind: str, init: bool
) -> None:
    name = f"{kind.lower()}-{'init' if init else 'plain'}"
    agent.write("pod.yaml", volume_pod(name, kind, init=init))
    await eventually(
        lambda: [e for e in agent.events_of(name) if e.reason == "FailedMount"
                 and e.message.startswith('MountVolume.SetUp failed for volume "vol" : ')],
        within=30, what="FailedMount event")
    pod_status = agent.status_of(name)
    assert pod_status is not None
    ready_to_start = pod_status.condition(st.POD_READY_TO_START_CONTAINERS)
    assert ready_to_start is not None and ready_to_start.status == "False"
    assert ready_to_start.reason == "PodSandboxNotReady"
    assert f'{kind.lower()} "{SOURCES[kind][2]}" not found' in ready_to_start.message
    assert is_true(pod_status, st.POD_SCHEDULED)
    assert is_true(pod_status, st.INITIALIZED) is not init
    assert not is_true(pod_status, st.CONTAINERS_READY)
    assert not is_true(pod_status, st.READY)
    pod, _ = agent.find(name)  # type: ignore[misc]
    state = await agent.agent_or_fail().relister.refresh_pod(pod.uid)
    assert state.sandboxes == (), "no sandbox while a volume cannot be set up"

    agent.write("source.yaml", source_object(kind))
    ready = await agent.wait_status(name, all_ready, what=f"pod Ready once the {kind} exists")
    assert is_true(ready, st.POD_READY_TO_START_CONTAINERS)
    condition = ready.condition(st.POD_READY_TO_START_CONTAINERS)
    assert condition is not None and condition.message == ""
    log = agent.settings.data_dir / "logs" / f"default_{pod.name}_{pod.uid}" / "main" / "0.log"
    await eventually(lambda: log.exists() and "value" in log.read_text(),
                     within=30, what="the container read the mounted key")
