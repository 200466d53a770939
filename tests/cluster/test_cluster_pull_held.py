"""KEP-3085's PullImage-delay case (test/e2e_node/pod_conditions_criproxy_linux_test.go) on
the real control plane: nodelet joined through the CRI fault proxy (tests/support/criproxy.py),
which holds the answer of PullImage. While the pull is held, PodReadyToStartContainers turns True
— within the 10 s the node e2e test allows — and Ready does not; released, the pod becomes
Ready, its condition's transition before Ready's.

The node e2e test itself cannot inject this into nodelet: its CRI proxy listens on a socket
it names at random when it starts, which only a kubelet the suite starts itself can use.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import Instance
from support.controlplane import AdminClient, conditions, pod, pod_path
from support.criproxy import CriProxy
from support.polling import eventually
from support.registry import Registry

pytestmark = pytest.mark.runtime

NODE = "pull-held-node"
# The node e2e test's window for the condition (runPodReadyToStartContainersTimingTest).
CONDITION_WITHIN = 10.0


def _status(conds: dict[str, dict[str, Any]], kind: str) -> str:
    return str(conds.get(kind, {}).get("status", ""))


@pytest.mark.parametrize("with_init", [False, True], ids=["no-init", "init"])
async def test_condition_true_while_the_pull_is_held(
        join: Any, admin: AdminClient, runtime: Instance, registry: Registry, namespace: str,
        with_init: bool) -> None:
    ref = registry.push("pull-held/busybox", "init" if with_init else "app")
    socket = Path(tempfile.mkdtemp(prefix="nlp-", dir="/tmp")) / "cri.sock"
    spec = pod("held", node=NODE)
    pulled = {"image": ref, "imagePullPolicy": "Always"}
    app = spec["spec"]["containers"][0]
    if with_init:  # the init container's pull is the first one, and the one held
        spec["spec"]["initContainers"] = [dict(app, name="init", command=["true"], **pulled)]
    else:
        app.update(pulled)
    try:
        async with CriProxy(upstream=runtime.containerd.endpoint, socket=socket) as proxy:
            # `joined` runs the node on `runtime.containerd.endpoint`: here, the proxy's.
            through_proxy = SimpleNamespace(containerd=SimpleNamespace(endpoint=proxy.endpoint))
            async with join(NODE, on=through_proxy):
                held = proxy.hold("PullImage")
                await admin.create(pod_path(namespace), spec)
                conds = await eventually(
                    lambda: _conditions(admin, namespace), within=CONDITION_WITHIN,
                    until=lambda c: _status(c, "PodReadyToStartContainers") == "True",
                    what="PodReadyToStartContainers True while the pull is held")
                assert not held.release.is_set()
                assert _status(conds, "Ready") == "False", conds
                await eventually(held.answered.is_set, within=60, what="the held pull answered")
                assert _status(await _conditions(admin, namespace), "Ready") == "False"
                held.release.set()
                conds = await eventually(lambda: _conditions(admin, namespace), within=60,
                                         until=lambda c: _status(c, "Ready") == "True",
                                         what="Ready once the pull is let through")
                ready_to_start = conds["PodReadyToStartContainers"]["lastTransitionTime"]
                assert ready_to_start <= conds["Ready"]["lastTransitionTime"], conds
                assert proxy.calls.get("PullImage", 0) >= 1
    finally:
        socket.parent.rmdir()
        await runtime.client.remove_image(ref)


async def _conditions(admin: AdminClient, namespace: str) -> dict[str, dict[str, Any]]:
    return conditions(await admin.get(pod_path(namespace, "held")))
