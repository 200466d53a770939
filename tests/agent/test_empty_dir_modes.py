"""emptyDir roots have the kubelet's modes: 0777 on disk, tmpfs's default 1777 in memory.

Found by the [NodeConformance] test "EmptyDir volumes when FSGroup is specified nonexistent
volume subPath should have the correct mode and owner using FSGroup": the kubelet mounts the
tmpfs without a mode (so 1777, sticky) and a subPath made in it gets the root's mode;
nodelet mounted it with mode=0777.
"""

from __future__ import annotations

import pytest

from support.harness import Harness, all_ready, exec_in

pytestmark = pytest.mark.runtime

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata: {name: modes}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 123}
  containers:
    - name: main
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: [sleep, "1000000"]
      volumeMounts:
        - {name: mem, mountPath: /mem}
        - {name: disk, mountPath: /disk}
        - {name: mem, mountPath: /sub, subPath: made/here}
  volumes:
    - {name: mem, emptyDir: {medium: Memory}}
    - {name: disk, emptyDir: {}}
"""


async def test_empty_dir_root_modes(agent: Harness, runtime: object) -> None:
    agent.write("modes.yaml", MANIFEST)
    status = await agent.wait_status("modes", all_ready, what="the modes pod runs")
    result = await exec_in(runtime.client, status, "stat -c '%a %g' /mem /disk /sub")  # type: ignore[attr-defined]
    assert result.exit_code == 0, result
    # fsGroup adds setgid (2000) to the directories.
    assert result.stdout.decode().split("\n")[:3] == ["3777 123", "2777 123", "3777 123"]
