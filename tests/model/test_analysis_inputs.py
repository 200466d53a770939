"""`nodelet analyze` on every dump shape, first starts vs re-created sandboxes, the termination
SLI, the report at a glance and the live monitor (pure: documents in, values out)."""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import pytest
import yaml

from nodelet.model.parsing import dumps
from nodelet.model.reports import analysis as an
from nodelet.model.reports import analysis_html, analysis_live, analysis_report
from nodelet.model.reports import analysis_input as ai

PRTSC = "PodReadyToStartContainers"
DAY = "2024-05-{:02d}T10:{:02d}:{:02d}Z"


def at(second: int, day: int = 1) -> str:
    return DAY.format(day, second // 60, second % 60)


def cond(type_: str, status: str, second: int | None, day: int = 1, **kw: str) -> dict[str, Any]:
    return {"type": type_, "status": status,
            "lastTransitionTime": None if second is None else at(second, day), **kw}


def pod(name: str, *, sched: int = 0, sandbox: int | None = 2, ready: int | None = 4,
        ns: str = "default", uid: str | None = None, day: int = 1, kind: bool = True,
        **status: Any) -> dict[str, Any]:
    """A pod scheduled at `sched`, sandbox ready at `sandbox` (on `day`), Ready at `ready`."""
    conds = [cond("PodScheduled", "True", sched), cond("Initialized", "True", sched)]
    if sandbox is not None:
        conds.append(cond(PRTSC, "True", sandbox, day))
    else:
        conds.append(cond(PRTSC, "False", sched, reason="PodSandboxNotReady",
                          message="no pod sandbox exists"))
    if ready is not None:
        conds += [cond("ContainersReady", "True", ready, day), cond("Ready", "True", ready, day)]
    out: dict[str, Any] = {
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}"},
        "spec": {"nodeName": "n1", "containers": [{"name": "main"}]},
        "status": {"phase": "Running" if ready is not None else "Pending",
                   "startTime": at(sched), "conditions": conds, **status}}
    if kind:
        out = {"apiVersion": "v1", "kind": "Pod", **out}
    return out


def event(name: str, reason: str, *, uid: str | None = None, ev_uid: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.1", "namespace": "default", "uid": ev_uid or
                         f"ev-{name}-{reason}"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": name,
                               "uid": uid or f"uid-{name}"},
            "reason": reason, "message": f"{reason} happened", "count": 2,
            "lastTimestamp": at(30)}


def read(*docs: tuple[Any, str]) -> an.Analysis:
    reader = ai.DumpReader()
    for doc, source in docs:
        reader.add(doc, source)
    return an.analyze_dump(reader)


def from_bytes(data: bytes, source: str = "dump") -> an.Analysis:
    return read(*((d, f"{source}#{i}") for i, d in enumerate(dumps.documents(data, source))))


# --- every shape kubectl writes


LIST = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
        "items": [pod("a"), pod("b", sandbox=3), event("a", "Scheduled"),
                  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
                  {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"}}]}


def _yaml(docs: list[Any], lead: str = "") -> bytes:
    return (lead + yaml.safe_dump_all(docs)).encode()


def _concatenated(*docs: Any) -> bytes:
    log = "==== START logs for container main of pod default/a ====\nhello {not json\n" \
          "==== END logs for container main of pod default/a ====\n"
    return (json.dumps(docs[0], indent=4) + "\n" + log +
            "\n".join(json.dumps(d, indent=4) for d in docs[1:])).encode()


@pytest.mark.parametrize(
    ("data", "pods", "skipped"),
    [
        (json.dumps(pod("a")).encode(), 1, {}),  # kubectl get pod a -o json
        (json.dumps({"kind": "PodList", "items": [pod("a", kind=False)]}).encode(), 1, {}),
        (json.dumps(LIST).encode(), 2, {"ReplicaSet": 1, "Service": 1}),
        (_yaml([LIST]), 2, {"ReplicaSet": 1, "Service": 1}),  # kubectl get pods,svc -o yaml
        (_yaml([pod("a"), pod("b")], "---\n"), 2, {}),  # multi-document with a leading ---
        (gzip.compress(json.dumps(LIST).encode()), 2, {"ReplicaSet": 1, "Service": 1}),
        (gzip.compress(_yaml([pod("a")])), 1, {}),
        (_concatenated({"kind": "NodeList", "items": [{"metadata": {"name": "n1"}}]},
                       {"kind": "PodList", "items": [pod("a")]}), 1, {"Node": 1}),
        (b"\xef\xbb\xbf" + json.dumps(pod("a")).encode(), 1, {}),  # a BOM
    ],
    ids=["pod", "podlist", "list", "yaml-list", "yaml-multi", "gzip-json", "gzip-yaml",
         "cluster-info-stdout", "bom"],
)
def test_every_dump_shape(data: bytes, pods: int, skipped: dict[str, int]) -> None:
    result = from_bytes(data)
    assert len(result.pods) == pods
    assert result.overall["scheduledToReadyToStart"].count == pods
    if skipped:
        assert any("Skipped objects that are neither Pods nor Events: " +
                   ", ".join(f"{n} {k}" for k, n in sorted(skipped.items())) in n
                   for n in result.notes)


def test_yaml_timestamps_that_loaders_turn_into_datetimes() -> None:
    # A dump re-written by a YAML tool: unquoted stamps, some without an offset (UTC in YAML).
    text = re.sub(r"'(\d{4}-[^']*)'", r"\1", yaml.safe_dump(pod("a")))
    assert "lastTransitionTime: 2024-05-01T10:00:02Z" in text
    text = text.replace("2024-05-01T10:00:02Z", "2024-05-01 10:00:02.5")
    result = from_bytes(text.encode())
    assert result.overall["scheduledToReadyToStart"].p50 == 2.5
    assert result.pods[0].raw_times[ai.READY_TO_START] == "2024-05-01T10:00:02.500000+00:00"


def test_events_anywhere_count_and_duplicates_are_counted_once() -> None:
    stuck = pod("s", sandbox=None, ready=None)
    mixed = {"kind": "List", "items": [stuck, event("s", "FailedCreatePodSandBox")]}
    again = {"kind": "EventList", "items": [event("s", "FailedCreatePodSandBox")]}
    result = read((mixed, "a.json"), ({"kind": "PodList", "items": [stuck]}, "b.json"),
                  (again, "c.json"))
    assert len(result.pods) == 1 and result.events_given
    (s,) = result.stuck
    assert [(e.reason, e.count) for e in s.events] == [("FailedCreatePodSandBox", 2)]
    assert any("1 pod appeared more than once (same UID)" in n for n in result.notes)


INTERNAL_POD = {
    "name": "old", "namespace": "kube-system", "uid": "uid-old",
    "Spec": {"NodeName": "n1", "Containers": [{"Name": "main"}]},
    "Status": {"Phase": "Running", "Conditions": [
        {"Type": "PodScheduled", "Status": "True", "LastTransitionTime": at(0)},
        {"Type": "PodReadyToStartContainers", "Status": "True", "LastTransitionTime": at(5)},
        {"Type": "Ready", "Status": "True", "LastTransitionTime": at(7)}],
        "StartTime": at(0), "ContainerStatuses": [
            {"Name": "main", "RestartCount": 1, "State": {"Running": {"StartedAt": at(6)}},
             "LastTerminationState": {"Terminated": {"StartedAt": at(2)}}}]},
}
INTERNAL_EVENT = {"name": "old.1", "namespace": "kube-system",
                  "InvolvedObject": {"Kind": "Pod", "Namespace": "kube-system", "Name": "old",
                                     "UID": "uid-old"},
                  "Reason": "FailedMount", "Message": "m", "Count": 1, "LastTimestamp": at(9)}


def test_old_cluster_info_dump_internal_format_is_read_and_named() -> None:
    result = read(({"ListMeta": {}, "Items": [INTERNAL_POD]}, "kube-system/pods.json"),
                  ({"Items": [INTERNAL_EVENT]}, "kube-system/events.json"))
    assert result.pods[0].namespace == "kube-system" and result.pods[0].node == "n1"
    assert [r.reason for r in result.recreated] == [
        "container main started at 2024-05-01T10:00:02Z, 3s before the sandbox became ready"]
    assert result.events_given
    assert any("internal format of an old `kubectl cluster-info dump`" in n and
               "kube-system/pods.json" in n for n in result.notes)


# --- first starts vs re-created sandboxes


def _running(started: str, last_started: str | None = None, restarts: int = 0) -> Any:
    status: dict[str, Any] = {"name": "main", "restartCount": restarts,
                              "state": {"running": {"startedAt": started}}}
    if last_started:
        status["lastState"] = {"terminated": {"startedAt": last_started, "exitCode": 1}}
    return [status]


@pytest.mark.parametrize(
    ("doc", "events", "reason"),
    [
        (pod("first", containerStatuses=_running(at(3))), [], None),
        # Precise condition (nodelet's ?precise), whole-second startedAt: not "before".
        (pod("precise", sandbox=5, containerStatuses=_running(at(4))), [], None),
        # RKE2: the sandbox re-created weeks later; the old container ran before it.
        (pod("reboot", sandbox=5, ready=9, day=22,
             containerStatuses=_running(at(9, 22), at(3), restarts=7)), [],
         "container main started at 2024-05-01T10:00:03Z, 21d0h before the sandbox became ready"),
        (pod("changed"), [event("changed", "SandboxChanged")],
         "SandboxChanged event (2x): the sandbox was killed and re-created"),
        (pod("restarts", sandbox=5, ready=9, day=2, containerStatuses=[
            {"name": "main", "restartCount": 3, "state": {"waiting": {}}}]), [],
         "3 container restarts, sandbox ready 1d0h after the pod started (status.startTime)"),
        (pod("late", sandbox=5, ready=9, day=3), [],
         "sandbox ready 2d0h after the pod started (status.startTime)"),
        (pod("slow-first", sandbox=1200, ready=1300), [], None),  # stuck 20 min, then started
    ],
    ids=["first", "whole-second-start", "container-before", "sandbox-changed",
         "restarts-and-gap", "day-gap", "slow-first-start"],
)
def test_recreated_sandboxes_are_told_apart(doc: Any, events: list[Any],
                                             reason: str | None) -> None:
    result = read(({"kind": "List", "items": [doc, *events]}, "d"))
    got = [r.reason for r in result.recreated]
    assert got == ([reason] if reason else [])


def test_headline_from_first_starts_and_recreated_listed() -> None:
    docs = [pod(f"p{i}", sandbox=2 + i) for i in range(3)] + [
        pod(f"old{i}", sandbox=5, ready=9, day=20,
            containerStatuses=_running(at(9, 20), at(3), restarts=9)) for i in range(4)]
    result = read(({"kind": "PodList", "items": docs}, "d"))
    assert result.overall["scheduledToReadyToStart"].count == 3
    assert result.overall["scheduledToReadyToStart"].max == 4.0  # not 19 days
    assert result.measured == 3 and len(result.recreated) == 4
    text = analysis_report.table(result)
    assert "Re-created sandboxes (4 pods, not in the percentiles" in text
    assert "first starts, 3 of 7 pods; not: 4 re-created" in text
    doc = json.loads(analysis_report.json_text(result, source="d", events_source=None))
    assert doc["summary"]["recreated"] == 4 and doc["recreated"][0]["reason"].startswith(
        "container main started at")
    assert doc["pods"][3]["recreated"] and doc["pods"][3]["latencies"][
        "scheduledToReadyToStart"] is None


def test_termination_sli_from_deletion_request_to_condition_false() -> None:
    def deleting(name: str, deleted_at: int, false_at: int | None) -> dict[str, Any]:
        doc = pod(name)
        doc["metadata"].update(deletionTimestamp=at(deleted_at + 30),
                               deletionGracePeriodSeconds=30)
        if false_at is not None:
            doc["status"]["conditions"][2] = cond(PRTSC, "False", false_at)
        return doc
    result = read(({"kind": "PodList", "items": [
        deleting("a", 10, 12), deleting("b", 10, 15), deleting("c", 10, None),
        deleting("d", 10, 3)]}, "d"))  # d: not ready before the deletion: not measured
    term = result.termination
    assert (term.terminating, term.still_ready) == (4, 1)
    assert term.stats is not None and (term.stats.count, term.stats.p50, term.stats.max) == \
        (2, 2.0, 5.0)
    assert not result.stuck


def test_a_true_condition_without_time_is_noted_not_dropped_silently() -> None:
    doc = pod("a")
    doc["status"]["conditions"][2]["lastTransitionTime"] = None
    result = read((doc, "d"))
    assert any("1 pod have a True condition without lastTransitionTime" in n
               for n in result.notes)


# --- the report at a glance


def _busy() -> an.Analysis:
    long_ns = "namespace-with-a-really-long-name-" + "x" * 30
    docs = [pod("deployment-with-a-long-name-" + "y" * 40 + f"-{i:03d}", sandbox=i % 7, ns=long_ns)
            for i in range(30)]
    docs.append(pod("stuck-" + "z" * 80, sandbox=None, ready=None))
    docs[-1]["status"]["conditions"][2]["message"] = (
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup "
        "network for sandbox: plugin type=\"host-local\" failed (add): failed to allocate for "
        "range 0: no IP addresses available in range set: 10.88.0.1-10.88.0.6")
    return read(({"kind": "PodList", "items": docs}, "d"))


def test_table_fits_100_columns_and_answers_the_three_questions_first() -> None:
    text = analysis_report.table(_busy())
    assert max(len(line) for line in text.splitlines()) <= 100
    head = text.split("\n\n")[0].splitlines()
    assert head[0] == "At a glance"
    assert head[1].startswith("  How fast: scheduled → ready-to-start-containers p50 3s")
    assert any(line.startswith("  Stuck: 1 pod before their sandbox — 1x") for line in head)
    assert "no IP addresses available" in text.split("\n\n")[0]
    assert "PODS: all in the group; MEASURED: those with a latency (first starts, 31 of 31 pods)" \
        in " ".join(text.split())
    slowest = text.split("Slowest pods")[1].split("\n\n")[0].splitlines()[3:]
    assert len({line.split()[0] for line in slowest}) == 10  # cut, but told apart


def test_html_charts_use_a_log_axis_for_long_tails() -> None:
    samples = sorted([1.0] * 56 + [2.0, 3.0, 60.0, 2556 * 3600.0])
    svg = analysis_html.histogram_svg(samples, "x")
    assert "log scale" in svg and ">1h</text>" in svg and ">1d</text>" in svg
    assert analysis_html.axis_for(samples).log
    assert not analysis_html.axis_for([1.0, 2.0, 3.0]).log
    # Every bin is (low * r^(k-1), low * r^k]: the 56 pods at 1 s are not squashed with 60 s.
    axis = analysis_html.axis_for(samples)
    assert axis.fraction(1.0) < 0.05 and 0.2 < axis.fraction(60.0) < 0.35
    page = analysis_html.report(_busy(), source="d", events_source=None)
    assert "<h2>At a glance</h2>" in page and "first starts, 31 of 31 pods" in page


# --- the live monitor


def test_monitor_reports_each_pod_once_and_serves_histograms() -> None:
    monitor = analysis_live.Monitor()
    a, s = pod("a", sandbox=2, ready=None), pod("s", sandbox=None, ready=None)
    for doc in (a, s):
        doc["metadata"]["resourceVersion"] = "1"
    news = monitor.update({"uid-a": a, "uid-s": s})
    assert [n.kind for n in news] == ["ready", "stuck"]
    assert news[0].line() == (f"{at(2)}  default/a (node n1): sandbox ready 2s after "
                              "scheduled")
    assert "stuck before its sandbox: PodSandboxNotReady: no pod sandbox exists" in \
        news[1].line()
    ready = pod("a", sandbox=2, ready=4)
    ready["metadata"]["resourceVersion"] = "2"
    assert monitor.update({"uid-a": ready, "uid-s": s}) == []  # Ready: counted, not printed
    assert monitor.update({"uid-a": ready, "uid-s": s}) == []  # a relist: nothing new
    text = monitor.exposition()
    assert 'nodelet_analyze_sandbox_ready_seconds_bucket{namespace="default",le="2"} 1' in text
    assert 'nodelet_analyze_sandbox_ready_seconds_bucket{namespace="default",le="1"} 0' in text
    assert 'nodelet_analyze_scheduled_to_ready_seconds_count{namespace="default"} 1' in text
    assert 'nodelet_analyze_sandbox_ready_percentile_seconds{quantile="0.5"} 2' in text
    assert "nodelet_analyze_pods_stuck 1" in text
    assert monitor.update({"uid-a": ready}) == [] and "nodelet_analyze_pods_stuck 0" in \
        monitor.exposition()


def test_monitor_takes_one_watch_event_as_the_whole_store_would_give_it() -> None:
    """`update_one` (one watch event) finds what `update` (the whole store) finds, without
    looking at the other pods."""
    one, whole = analysis_live.Monitor(), analysis_live.Monitor()
    a, s = pod("a", sandbox=2, ready=None), pod("s", sandbox=None, ready=None)
    ready = pod("a", sandbox=2, ready=4)
    steps: list[tuple[str, dict | None, dict]] = [
        ("uid-a", a, {"uid-a": a}), ("uid-s", s, {"uid-a": a, "uid-s": s}),
        ("uid-a", ready, {"uid-a": ready, "uid-s": s}), ("uid-a", ready, {"uid-a": ready,
                                                                         "uid-s": s}),
        ("uid-s", None, {"uid-a": ready})]
    for uid, obj, store in steps:
        assert [n.line() for n in one.update_one(uid, obj)] == \
            [n.line() for n in whole.update(store)]
        assert one.stuck == whole.stuck
    assert one.exposition() == whole.exposition()


def test_a_pod_seen_again_keeps_its_newest_state() -> None:
    # `kubectl get pod -w -o json`: the same pod, one document per change.
    states = [pod("w", sandbox=None, ready=None), pod("w", sandbox=3, ready=None), pod("w")]
    for version, doc in enumerate(states, start=7):
        doc["metadata"]["resourceVersion"] = str(version)
    text = "\n".join(json.dumps(d, indent=4) for d in states)
    result = from_bytes(text.encode())
    assert len(result.pods) == 1 and not result.stuck
    assert result.overall["scheduledToReady"].p50 == 4.0
    older_last = read((states[2], "new.json"), (states[0], "old.json"))
    assert not older_last.stuck  # an older copy read later does not win
