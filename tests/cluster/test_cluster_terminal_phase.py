"""A graceful delete leaves a terminal phase in the API before nodelet's final delete (the
kubelet 1.27+): real containerd, the test API server.

Not with the real kubectl: kubectl sends no credentials to a plain-HTTP server
(kubernetes/kubectl#744), and the test server speaks plain HTTP; the delete below is the one
`kubectl delete pod` sends (no grace period: the pod's own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cluster_e2e import joined

from conftest import Instance
from kubeapi import pod_object
from polling import eventually

pytestmark = pytest.mark.runtime


async def test_graceful_delete_writes_failed_before_the_final_delete(
        runtime: Instance, tmp_path: Path) -> None:
    async with joined(runtime, tmp_path) as (server, _harness):
        # `sleep` as PID 1 ignores SIGTERM: killed after the 1 s grace period, exit code 137.
        created = server.create("pods", pod_object("victim", node="e2e-node", grace=1))
        uid = created["metadata"]["uid"]
        await eventually(lambda: (server.get("pods", "default", "victim") or {})
                         .get("status", {}).get("phase") == "Running", within=60,
                         what="pod Running in the API")
        server.delete("pods", "default", "victim")  # graceful: the pod's own period
        assert server.get("pods", "default", "victim")["metadata"].get("deletionTimestamp")
        await eventually(lambda: server.get("pods", "default", "victim") is None, within=60,
                         what="pod deleted from the API by nodelet")

        changes = [c for c in server.history
                   if c.plural == "pods" and c.new["metadata"]["uid"] == uid]
        deleted = [i for i, c in enumerate(changes) if c.type == "DELETED"]
        assert len(deleted) == 1
        last: dict[str, Any] = changes[deleted[0]].new["status"]
        # What the API held when nodelet's final delete arrived: the terminal status.
        assert last["phase"] == "Failed", last
        state = last["containerStatuses"][0]["state"]
        assert state["terminated"]["exitCode"] == 137, state
        conds = {c["type"]: c for c in last["conditions"]}
        assert conds["PodReadyToStartContainers"]["status"] == "False"
        assert conds["Ready"]["reason"] == "PodFailed", conds
        # The phase was written by a status PATCH before the final delete (grace 0, UID).
        phases = [c.new.get("status", {}).get("phase") for c in changes[:deleted[0]]]
        assert "Failed" in phases and phases.index("Failed") < deleted[0]
        final = [r for r in server.requests
                 if r.verb == "delete" and r.resource == "pods" and r.status == 200]
        assert len(final) == 1, final  # nodelet's final one (the test's went in-process)
        patches = [i for i, r in enumerate(server.requests)
                   if r.verb == "patch" and r.subresource == "status"]
        assert patches and patches[-1] < server.requests.index(final[-1])
