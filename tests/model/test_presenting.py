"""kubectl-style rendering of the local API's JSON: get pods, get events, describe pod."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nodelet.model.core import events as ev
from nodelet.model.core import health as hm
from nodelet.model.core import podjson, pods
from nodelet.model.core import status as st
from nodelet.model.reports import presenting

NOW = datetime(2024, 5, 1, 12, 10, 0, tzinfo=UTC)
CREATED = NOW - timedelta(minutes=3, seconds=20)
SANDBOX_AT = CREATED + timedelta(seconds=1, microseconds=234567)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (15 * 60, "15m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (2 * 3600 + 5 * 60, "125m"),
        (5 * 3600 + 5 * 60, "5h5m"),
        (10 * 3600, "10h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (20 * 86400, "20d"),
        (3 * 365 * 86400, "3y"),
        (3 * 365 * 86400 + 10 * 86400, "3y10d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert presenting.human_duration(timedelta(seconds=seconds)) == text


def container_status(
    name: str = "app", state: dict[str, Any] | None = None, ready: bool = False, restarts: int = 0
) -> dict[str, Any]:
    return {
        "name": name,
        "state": state if state is not None else {"running": {}},
        "ready": ready,
        "restartCount": restarts,
    }


def pod_json(
    *,
    phase: str = "Running",
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    init_specs: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    deleting: bool = False,
    reason: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default", "uid": "uid-1"}
    meta["creationTimestamp"] = st.format_time(CREATED)
    if deleting:
        meta["deletionTimestamp"] = st.format_time(NOW)
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    status["containerStatuses"] = containers or []
    if reason:
        status["reason"] = reason
    if init is not None:
        status["initContainerStatuses"] = init
    spec = {
        "containers": [{"name": c["name"], "image": "busybox"} for c in containers or []],
        "initContainers": init_specs or [{"name": c["name"]} for c in init or []],
    }
    return {"metadata": meta, "spec": spec, "status": status}


def waiting(reason: str) -> dict[str, Any]:
    return {"waiting": {"reason": reason}}


def terminated(code: int, reason: str = "", signal: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"exitCode": code}
    if reason:
        body["reason"] = reason
    if signal:
        body["signal"] = signal
    return {"terminated": body}


READY_TRUE = {"type": "Ready", "status": "True"}
INIT_TRUE = {"type": "Initialized", "status": "True"}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(pod_json(phase="Pending"), "Pending", id="phase"),
        pytest.param(
            pod_json(
                phase="Pending", containers=[container_status(state=waiting("ContainerCreating"))]
            ),
            "ContainerCreating",
            id="creating",
        ),
        pytest.param(
            pod_json(containers=[container_status(state=waiting("CrashLoopBackOff"))]),
            "CrashLoopBackOff",
            id="crashloop",
        ),
        pytest.param(
            pod_json(phase="Pending", containers=[container_status(state=waiting("ErrImagePull"))]),
            "ErrImagePull",
            id="image",
        ),
        pytest.param(
            pod_json(
                phase="Succeeded", containers=[container_status(state=terminated(0, "Completed"))]
            ),
            "Completed",
            id="completed",
        ),
        pytest.param(
            pod_json(containers=[container_status(state=terminated(3))]), "ExitCode:3", id="exit"
        ),
        pytest.param(
            pod_json(containers=[container_status(state=terminated(137, signal=9))]),
            "Signal:9",
            id="signal",
        ),
        pytest.param(
            pod_json(
                containers=[
                    container_status("a", terminated(0, "Completed")),
                    container_status("b", ready=True),
                ],
                conditions=[READY_TRUE],
            ),
            "Running",
            id="completed-but-running",
        ),
        pytest.param(
            pod_json(
                containers=[
                    container_status("a", terminated(0, "Completed")),
                    container_status("b", ready=True),
                ]
            ),
            "NotReady",
            id="completed-not-ready",
        ),
        pytest.param(
            pod_json(
                phase="Pending",
                init=[
                    container_status("i1", terminated(0)),
                    container_status("i2", {"running": {}}),
                ],
                containers=[container_status(state=waiting("PodInitializing"))],
            ),
            "Init:1/2",
            id="init-progress",
        ),
        pytest.param(
            pod_json(
                phase="Pending",
                init=[container_status("i1", terminated(1, "Error"))],
                containers=[container_status(state=waiting("PodInitializing"))],
            ),
            "Init:Error",
            id="init-error",
        ),
        pytest.param(
            pod_json(phase="Pending", init=[container_status("i1", waiting("CrashLoopBackOff"))]),
            "Init:CrashLoopBackOff",
            id="init-waiting",
        ),
        pytest.param(
            pod_json(phase="Pending", init=[container_status("i1", terminated(2))]),
            "Init:ExitCode:2",
            id="init-exit",
        ),
        pytest.param(
            pod_json(
                init=[container_status("side", ready=True)],
                init_specs=[{"name": "side", "restartPolicy": "Always"}],
                containers=[container_status(ready=True)],
                conditions=[INIT_TRUE, READY_TRUE],
            ),
            "Running",
            id="sidecar",
        ),
        pytest.param(
            pod_json(containers=[container_status(ready=True)], deleting=True),
            "Terminating",
            id="deleting",
        ),
        pytest.param(
            pod_json(phase="Succeeded", deleting=True), "Succeeded", id="deleted-terminal"
        ),
        pytest.param(
            pod_json(phase="Failed", reason="DeadlineExceeded"), "DeadlineExceeded", id="reason"
        ),
    ],
)
def test_pod_status_reason(pod: dict[str, Any], expected: str) -> None:
    assert presenting.pod_status_reason(pod) == expected


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], "-"),
        ([{"type": "PodReadyToStartContainers", "status": "True"}], "True"),
        (
            [
                {
                    "type": "PodReadyToStartContainers",
                    "status": "False",
                    "reason": "PodSandboxNotReady",
                }
            ],
            "False (PodSandboxNotReady)",
        ),
        ([{"type": "PodHasNetwork", "status": "True"}], "True"),
    ],
)
def test_sandbox_summary(conditions: list[dict[str, Any]], expected: str) -> None:
    assert presenting.sandbox_summary({"conditions": conditions}) == expected


def make_pod(name: str = "web") -> pods.Pod:
    spec = pods.PodSpec(
        containers=(pods.Container("app", "busybox"), pods.Container("sidecar", "busybox"))
    )
    raw = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": name, "tier": "front"},
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [
                {"name": "app", "image": "busybox"},
                {"name": "sidecar", "image": "busybox"},
            ],
        },
    }
    return pods.Pod(
        uid=pods.PodUID("uid-1"),
        name=name,
        namespace="default",
        spec=spec,
        raw=raw,
        creation_timestamp=CREATED,
        # A static pod: /pods has no creationTimestamp, AGE counts from config.seen.
        annotations={pods.ANNOTATION_CONFIG_SEEN: st.format_time(CREATED) or ""},
    )


STATUS = st.PodStatus(
    phase="Running",
    conditions=(
        st.PodCondition(st.POD_SCHEDULED, "True", last_transition_time=CREATED),
        st.PodCondition(st.POD_READY_TO_START_CONTAINERS, "True", last_transition_time=SANDBOX_AT),
        st.PodCondition(st.INITIALIZED, "True", last_transition_time=CREATED),
        st.PodCondition(
            st.CONTAINERS_READY,
            "False",
            st.REASON_CONTAINERS_NOT_READY,
            "containers with unready status: [sidecar]",
            last_transition_time=CREATED,
        ),
    ),
    host_ip="192.168.1.10",
    pod_ips=("10.88.0.5", "fd00::5"),
    start_time=CREATED,
    container_statuses=(
        st.ContainerStatus(
            "app", "busybox", st.ContainerStateRunning(CREATED), ready=True, started=True
        ),
        st.ContainerStatus(
            "sidecar",
            "busybox",
            st.ContainerStateWaiting("CrashLoopBackOff", "back-off 40s"),
            restart_count=3,
            last_state=st.ContainerStateTerminated(
                1, "Error", finished_at=NOW - timedelta(seconds=40)
            ),
        ),
    ),
)


def test_pods_table() -> None:
    pod_list = podjson.pod_list_to_api([(make_pod(), STATUS), (make_pod("db"), None)])
    assert presenting.pods_table(pod_list, NOW) == (
        "NAME   READY   STATUS             RESTARTS      AGE     IP          SANDBOX\n"
        "web    1/2     CrashLoopBackOff   3 (40s ago)   3m20s   10.88.0.5   True\n"
        "db     0/2     Pending            0             3m20s   <none>      -\n"
    )


def test_pods_table_all_namespaces_and_empty() -> None:
    pod_list = podjson.pod_list_to_api([(make_pod(), None)])
    lines = presenting.pods_table(pod_list, NOW, all_namespaces=True).splitlines()
    assert lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "SANDBOX",
    ]
    assert lines[1].split() == ["default", "web", "0/2", "Pending", "0", "3m20s", "<none>", "-"]
    assert presenting.pods_table({"items": []}, NOW) == "No resources found.\n"


def sandbox_events() -> dict[str, Any]:
    pod = make_pod()
    failed = ev.new_event(
        pod,
        "Warning",
        ev.FAILED_CREATE_POD_SANDBOX,
        "Failed to create pod sandbox: no IP",
        at=CREATED,
        host="n",
    )
    failed = failed.repeated(NOW - timedelta(seconds=5)).repeated(NOW - timedelta(seconds=3))
    started = ev.new_event(
        pod, "Normal", ev.STARTED, "Started container app", at=NOW - timedelta(seconds=20), host="n"
    )
    other = ev.new_event(make_pod("db"), "Normal", ev.PULLED, "not mine", at=NOW, host="n")
    return ev.event_list_to_api([failed, started, other])


def test_describe_pod() -> None:
    pod = podjson.pod_to_api(make_pod(), STATUS, precise=True)
    text = presenting.describe_pod(pod, sandbox_events(), NOW)
    assert "Name:             web\n" in text
    assert "Node:             node-a/192.168.1.10\n" in text
    assert "Start Time:       Wed, 01 May 2024 12:06:40 +0000\n" in text
    assert "Labels:           app=web\n                  tier=front\n" in text
    assert "Annotations:      kubernetes.io/config.seen=2024-05-01T12:06:40Z\n" in text
    assert "IPs:\n  IP:  10.88.0.5\n  IP:  fd00::5\n" in text
    assert "      Reason:       CrashLoopBackOff\n" in text
    assert "    Restart Count:  3\n" in text
    assert text.split("Conditions:\n")[1] == (
        "  Type                       Status  LastTransitionTime           Reason              "
        "Message\n"
        "  ----                       ------  ------------------           ------              "
        "-------\n"
        "  PodScheduled               True    2024-05-01T12:06:40.000000Z\n"
        "  PodReadyToStartContainers  True    2024-05-01T12:06:41.234567Z\n"
        "  Initialized                True    2024-05-01T12:06:40.000000Z\n"
        "  ContainersReady            False   2024-05-01T12:06:40.000000Z  ContainersNotReady  "
        "containers with unready status: [sidecar]\n"
        "Events:\n"
        "  Type     Reason                  Age                 From     Message\n"
        "  ----     ------                  ----                ----     -------\n"
        "  Normal   Started                 20s                 kubelet  Started container app\n"
        "  Warning  FailedCreatePodSandBox  3s (x3 over 3m20s)  kubelet  "
        "Failed to create pod sandbox: no IP\n"
    )
    assert "not mine" not in text


def test_describe_pod_whole_second_times_and_no_events() -> None:
    pod = podjson.pod_to_api(make_pod(), STATUS)
    text = presenting.describe_pod(pod, {"items": []}, NOW)
    assert "PodReadyToStartContainers  True    2024-05-01T12:06:41Z" in text
    assert text.endswith("Events:  <none>\n")


def test_describe_pending_pod_without_status() -> None:
    text = presenting.describe_pod(podjson.pod_to_api(make_pod(), None), {"items": []}, NOW)
    assert "Status:           Pending\n" in text
    assert "Conditions:  <none>\n" in text
    assert "    State:          Waiting\n" in text


def test_find_pod() -> None:
    pod_list = podjson.pod_list_to_api([(make_pod(), None), (make_pod("db"), None)])
    found = presenting.find_pod(pod_list, "db")
    assert found is not None and found["metadata"]["name"] == "db"
    assert presenting.find_pod(pod_list, "db", "kube-system") is None
    assert presenting.find_pod(pod_list, "nope") is None


def test_find_a_static_pod_by_its_manifest_name() -> None:
    static = {"metadata": {"name": "web-node-1", "namespace": "default"},
              "spec": {"nodeName": "node-1"}}
    pod_list = {"items": [static, {"metadata": {"name": "web-node-1-x", "namespace": "default"},
                                   "spec": {"nodeName": "node-1"}}]}
    assert presenting.find_pod(pod_list, "web") == static
    assert presenting.find_pod(pod_list, "web-node-1") == static
    assert presenting.find_pod(pod_list, "web", "kube-system") is None


def test_events_table() -> None:
    text = presenting.events_table(sandbox_events(), NOW)
    lines = text.splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert lines[1].split()[:4] == ["20s", "Normal", "Started", "pod/web"]
    assert lines[2].split()[:4] == ["3s", "Warning", "FailedCreatePodSandBox", "pod/web"]
    assert lines[3].split() == ["0s", "Normal", "Pulled", "pod/db", "not", "mine"]


def test_manifests_table() -> None:
    reports = [
        hm.manifest_report_to_api(hm.ManifestReport("/m/web.yaml", 0, "default/web", True)),
        hm.manifest_report_to_api(hm.ManifestReport("/m/bad.yaml", None, None, False, "not YAML")),
    ]
    lines = presenting.manifests_table(reports).splitlines()
    assert lines[1].split() == ["/m/web.yaml", "0", "default/web", "ok"]
    assert lines[2].split() == ["/m/bad.yaml", "-", "-", "error", "not", "YAML"]
    assert presenting.manifests_table([]) == "No manifests found.\n"


def test_the_pod_list_encoder_gives_json_dumps_and_encodes_only_what_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    web, db = make_pod(), dataclasses.replace(make_pod("db"), uid=pods.PodUID("uid-2"))
    encoder = podjson.PodListEncoder()
    encoded: list[str] = []
    original = podjson.pod_to_api

    def counting(pod: pods.Pod, status: st.PodStatus | None, *, precise: bool = False
                 ) -> dict[str, Any]:
        encoded.append(pod.name)
        return original(pod, status, precise=precise)

    monkeypatch.setattr(podjson, "pod_to_api", counting)

    def same_as_dumps(items: list[tuple[pods.Pod, st.PodStatus | None]], precise: bool) -> None:
        body = encoder.encode(items, precise=precise)
        assert body == json.dumps(original_list(items, precise)).encode()

    def original_list(items: list[tuple[pods.Pod, st.PodStatus | None]],
                      precise: bool) -> dict[str, Any]:
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                "items": [original(p, s, precise=precise) for p, s in items]}

    same_as_dumps([(web, STATUS), (db, None)], False)
    assert encoded == ["web", "db"]
    same_as_dumps([(web, STATUS), (db, None)], False)  # nothing changed: nothing encoded
    assert encoded == ["web", "db"]
    changed = dataclasses.replace(STATUS, phase="Running")  # a new status object for web
    same_as_dumps([(web, changed), (db, None)], False)
    assert encoded == ["web", "db", "web"]
    same_as_dumps([(web, changed)], True)  # precise times: encoded apart
    assert encoded == ["web", "db", "web", "web"]
    same_as_dumps([], False)
    same_as_dumps([(db, None)], False)  # db left the list and came back: encoded again
    assert encoded[-1] == "db"
