"""`nodelet analyze` as a user runs it: a subprocess on PodList / EventList files.

Hand-written kubelet-shaped dumps in tests/data/analyze/ (PodReadyToStartContainers in a
PodList, PodHasNetwork in kubectl's List, neither, malformed input), and dumps fetched from a
real nodelet's `/pods` and `/events` with a running pod and a pod whose sandbox cannot be
created.
"""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, all_ready, cond, pod_manifest
from support.polling import eventually

DATA = Path(__file__).parent.parent / "data" / "analyze"
EVENTS = DATA / "events.json"
NODELET = [sys.executable, "-m", "nodelet.cli", "analyze"]


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)


async def analyze(*args: str | Path, stdin: bytes | None = None) -> Result:
    proc = await asyncio.create_subprocess_exec(
        *NODELET, *map(str, args), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin or b""), timeout=60)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


def stats(doc: Any, transition: str) -> tuple[Any, ...]:
    s = doc["overall"][transition]
    return s["count"], s["p50"], s["p90"], s["p99"]


# --- hand-written dumps


async def test_pod_ready_to_start_containers_pod_list_with_events() -> None:
    doc = (await analyze(DATA / "pods-ready-to-start.json", "--events", EVENTS,
                         "-o", "json")).json()
    assert doc["summary"]["sandboxCondition"] == {
        "PodReadyToStartContainers": 5, "PodHasNetwork": 0, "neither": 0, "fallback": False}
    # Sandbox-ready latencies 2 s, 4 s, 1 s: p50 = sorted[ceil(1.5)-1] = 2, p90 = p99 = 4.
    assert stats(doc, "scheduledToReadyToStart") == (3, 2.0, 4.0, 4.0)
    assert stats(doc, "scheduledToReady") == (3, 6.0, 6.0, 6.0)
    # web-1 has no init containers: Initialized before the sandbox, step 0; migrate-1 waits 3 s.
    assert stats(doc, "readyToStartToInitialized") == (3, 0.0, 3.0, 3.0)
    assert doc["byRuntimeClass"]["gvisor"]["transitions"]["scheduledToReadyToStart"]["p50"] == 4
    assert doc["byRuntimeClass"]["kata"]["pods"] == 1
    assert doc["byNamespace"]["batch"]["transitions"]["scheduledToReadyToStart"]["p50"] == 1
    assert set(doc["byNode"]) == {"node-a", "node-b"}
    (stuck,) = doc["stuck"]  # done-1 (Succeeded) is not stuck
    assert (stuck["namespace"], stuck["name"]) == ("default", "stuck-1")
    assert stuck["condition"]["reason"] == "PodSandboxNotReady"
    assert 'no runtime for "kata" is configured' in stuck["condition"]["message"]
    # 3 + 2 of this pod's uid; the 9 of an earlier pod with the same name do not count; the
    # FailedMount without uid matches by namespace + name.
    assert [(e["reason"], e["count"], e["lastSeen"]) for e in stuck["events"]] == [
        ("FailedCreatePodSandBox", 5, "2024-05-01T10:03:30Z"),
        ("FailedMount", 1, "2024-05-01T10:02:05Z")]
    assert not stuck["events"][0]["lastMessage"].endswith("(attempt 1)")


async def test_pod_has_network_list_table() -> None:
    result = await analyze(DATA / "pods-has-network.json", "--events", EVENTS)
    assert result.code == 0, result.stderr
    text = result.stdout
    assert "Sandbox condition: PodHasNetwork on 3 pods" in text
    assert "old name PodHasNetwork" in text
    sli = next(line for line in text.splitlines() if line.startswith("scheduled → ready-to-start"))
    assert sli.split()[-5:] == ["2", "1s", "3s", "3s", "3s"]
    assert "shop/cart-3   node node-c\n    PodHasNetwork=False" in text
    assert max(map(len, text.splitlines())) <= 100
    assert "FailedCreatePodSandBox x4" in text and "no IP addresses available" in text


async def test_neither_condition_falls_back() -> None:
    doc = (await analyze(DATA / "pods-neither.json", "--events", EVENTS, "-o", "json")).json()
    assert doc["summary"]["sandboxCondition"]["fallback"] is True
    assert doc["headline"] == "scheduledToReady"
    assert [t["name"] for t in doc["transitions"]] == [
        "scheduledToInitialized", "initializedToContainersReady", "containersReadyToReady",
        "scheduledToReady"]
    assert stats(doc, "scheduledToReady") == (2, 3.0, 8.0, 8.0)
    assert "sandbox-ready latency cannot be measured" in doc["notes"][0]
    (stuck,) = doc["stuck"]  # found by its FailedCreatePodSandBox events
    assert stuck["name"] == "api-3" and stuck["condition"] is None
    assert stuck["events"][0]["count"] == 7
    table = await analyze(DATA / "pods-neither.json")
    assert "neither PodReadyToStartContainers nor PodHasNetwork" in table.stdout


async def test_stdin_and_html_output_file(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    result = await analyze("-", "--events", EVENTS, "-o", "html", "--output-file", report,
                           stdin=(DATA / "pods-ready-to-start.json").read_bytes())
    assert result.code == 0, result.stderr
    assert result.stdout == ""
    page = report.read_text()
    assert page.startswith("<!doctype html>") and page.count("<svg") == 2
    assert "stuck-1" in page and "FailedCreatePodSandBox" in page
    assert "<script" not in page and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def _dual_stack_dump() -> dict[str, Any]:
    """nodelet's alpha conditions: one pod without its IPv6 address, one stuck on a mount."""
    def c(type_: str, status: str, second: int, reason: str = "", message: str = "") -> Any:
        return {"type": type_, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": f"2024-05-01T10:00:{second:02d}Z"}

    def p(name: str, *conds: Any) -> Any:
        return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                "spec": {"nodeName": "n1"}, "status": {"phase": "Pending", "conditions": [
                    c("PodScheduled", "True", 0), *conds]}}

    no_v6 = ("PodSandboxNoIPv6Address", "pod sandbox has no IPv6 address")
    mount = ("FailedMount", 'MountVolume.SetUp failed for volume "data" : secret "db" not found')
    return {"kind": "PodList", "items": [
        p("web", c("PodReadyToStartContainers", "False", 2, *no_v6),
          c("nodelet.dev/IPv4Ready", "True", 2), c("nodelet.dev/IPv6Ready", "False", 2, *no_v6),
          c("nodelet.dev/VolumesReady", "True", 1)),
        p("db", c("PodReadyToStartContainers", "False", 1, "PodSandboxNotReady"),
          c("nodelet.dev/VolumesReady", "False", 1, *mount))]}


async def test_nodelet_conditions_in_every_format(tmp_path: Path) -> None:
    dump = tmp_path / "pods.json"
    dump.write_text(json.dumps(_dual_stack_dump()))
    doc = (await analyze(dump, "-o", "json")).json()
    assert {s["name"]: s["blockedOn"] for s in doc["stuck"]} == {
        "web": "network: no IPv6 address",
        "db": 'volumes (FailedMount): MountVolume.SetUp failed for volume "data" : secret "db" '
              "not found"}
    assert doc["extraConditions"]["nodelet.dev/IPv6Ready"]["notReady"] == 1
    assert doc["extraConditions"]["nodelet.dev/IPv4Ready"]["scheduledToTrue"]["p50"] == 2.0
    table = await analyze(dump)
    assert table.code == 0, table.stderr
    assert "blocked on network: no IPv6 address" in table.stdout
    assert "nodelet.dev conditions" in table.stdout
    assert max(map(len, table.stdout.splitlines())) <= 100
    html = await analyze(dump, "-o", "html")
    assert "blocked on volumes (FailedMount)" in html.stdout
    assert "<h2>nodelet.dev conditions</h2>" in html.stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("not-json.txt", "not-json.txt: plain text, neither JSON nor YAML objects (kubectl's "
         "table output is not a dump); expected Kubernetes objects, e.g. from "
         "`kubectl get pods -A -o json`"),
        ("missing-metadata.json", "missing-metadata.json: items[1]: no metadata"),
        ("bad-timestamp.json", "bad-timestamp.json: items[1] (default/web-3): "
         "status.conditions[4] (PodScheduled).lastTransitionTime: not an RFC 3339 time: "
         "'2024-05-01 10:00:00'"),
        ("no-such-file.json", "no-such-file.json: cannot read: No such file or directory"),
    ],
)
async def test_malformed_input_exits_2_with_a_clear_message(name: str, message: str) -> None:
    result = await analyze(DATA / name)
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


async def test_malformed_event_list_exits_2(tmp_path: Path) -> None:
    events = json.loads(EVENTS.read_text())
    index = next(i for i, e in enumerate(events["items"]) if e["reason"] == "FailedMount")
    events["items"][index]["lastTimestamp"] = "soon"
    (tmp_path / "events.json").write_text(json.dumps(events))
    result = await analyze(DATA / "pods-neither.json", "--events", tmp_path / "events.json")
    assert result.code == 2 and result.stderr.count("\n") == 1
    assert f"events.json: items[{index}]: event time: not an RFC 3339 time: 'soon'" in \
        result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "html", "--output-file", "/nonexistent-dir/report.html"],
         "/nonexistent-dir/report.html: cannot write the report: no directory /nonexistent-dir"),
        (["--output-file", "/"], "/: cannot write the report: Is a directory"),
        (["--watch"], "--watch, --metrics-address, -n, -A and -l need --kubeconfig"),
        (["--kubeconfig", "k.yaml"], "give either dump files or --kubeconfig, not both"),
        (["--kubeconfig", "/nonexistent.yaml", "-A"], "/nonexistent.yaml"),
    ],
)
async def test_usage_and_output_errors_are_one_line(args: list[str], message: str) -> None:
    inputs = [] if "-A" in args else [DATA / "pods-neither.json"]
    result = await analyze(*inputs, *args)
    assert result.code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


# --- a real nodelet's dump


async def fetch(url: str) -> bytes:
    def get() -> bytes:
        with urllib.request.urlopen(url, timeout=10) as response:
            body: bytes = response.read()
            return body

    return await asyncio.to_thread(get)


def sandbox_failed(pod_status: st.PodStatus) -> bool:
    condition = cond(pod_status, st.POD_READY_TO_START_CONTAINERS)
    return condition is not None and condition.status == "False" and "gvisor" in \
        condition.message


@pytest.mark.runtime
async def test_analyze_a_real_nodelets_pods_and_events(agent: Harness, tmp_path: Path) -> None:
    agent.write("web.yaml", pod_manifest("web"))
    agent.write("vm.yaml", pod_manifest("vm", extra_spec="runtimeClassName: gvisor\n"))
    await agent.wait_status("web", all_ready, what="web Ready")
    await agent.wait_status("vm", sandbox_failed, what="vm's sandbox failing on gvisor")
    await eventually(lambda: any(e.reason == "FailedCreatePodSandBox"
                                 for e in agent.events_of("vm")),
                     within=30, what="FailedCreatePodSandBox event of vm")
    base = f"http://127.0.0.1:{agent.agent_or_fail().server_port}"
    pods, precise, events = tmp_path / "pods.json", tmp_path / "precise.json", \
        tmp_path / "events.json"
    pods.write_bytes(await fetch(f"{base}/pods"))
    precise.write_bytes(await fetch(f"{base}/pods?precise=true"))
    events.write_bytes(await fetch(f"{base}/events"))

    doc = (await analyze(pods, "--events", events, "-o", "json")).json()
    node = agent.settings.node_name
    assert doc["summary"]["pods"] == 2
    assert doc["summary"]["sandboxCondition"]["PodReadyToStartContainers"] == 2
    web = next(p for p in doc["pods"] if p["name"] == f"web-{node}")
    assert all(web["phases"][phase] for phase in doc["phases"])
    assert web["latencies"]["scheduledToReadyToStart"] is not None
    assert doc["byRuntimeClass"]["gvisor"]["pods"] == 1
    assert doc["overall"]["scheduledToReadyToStart"]["count"] == 1
    (stuck,) = doc["stuck"]
    assert stuck["name"] == f"vm-{node}" and stuck["runtimeClass"] == "gvisor"
    assert 'no runtime for "gvisor"' in stuck["condition"]["message"]
    (failed,) = [e for e in stuck["events"] if e["reason"] == "FailedCreatePodSandBox"]
    assert failed["count"] >= 1 and "gvisor" in failed["lastMessage"]

    precise_doc = (await analyze(precise, "-o", "json")).json()
    assert not any("whole-second" in n for n in precise_doc["notes"])
    latency = next(p for p in precise_doc["pods"] if p["name"] == f"web-{node}")["latencies"]
    assert 0 < latency["scheduledToReadyToStart"] < 30  # nodelet's precise stamps
    table = await analyze(precise, "--events", events)
    assert table.code == 0 and f"default/vm-{node}" in table.stdout
