"""`nodelet analyze`'s pure core: percentiles, phases, both condition names, fallback, stuck pods,
event matching, grouping, malformed input, and the three renderings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodelet.model.parsing import dumps
from nodelet.model.reports import analysis as an
from nodelet.model.reports import analysis_html, analysis_report, histograms
from nodelet.model.reports import analysis_input as ai

PRTSC, PHN = "PodReadyToStartContainers", "PodHasNetwork"
T = "2024-05-01T10:00:{:02d}Z"


def cond(type_: str, status: str, second: int | None, reason: str = "",
         message: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None,
                           "lastTransitionTime": None if second is None else T.format(second)}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def pod(name: str, conditions: list[dict[str, Any]], *, ns: str = "default",
        node: str | None = "node-a", rc: str | None = None, uid: str | None = None,
        phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid or f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = T.format(59)
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    if rc:
        spec["runtimeClassName"] = rc
    return {"metadata": meta, "spec": spec,
            "status": {"phase": phase, "conditions": conditions}}


def started(name: str, s: int, rts: int | None, i: int, cr: int, r: int, *,
            sandbox: str = PRTSC, **kw: Any) -> dict[str, Any]:
    """A pod that started: every condition True at the given second."""
    conds = [cond("PodScheduled", "True", s), cond("Initialized", "True", i),
             cond("ContainersReady", "True", cr), cond("Ready", "True", r)]
    if rts is not None:
        conds.insert(1, cond(sandbox, "True", rts))
    return pod(name, conds, **kw)


def stuck(name: str, *, sandbox: str = PRTSC, message: str = "no pod sandbox exists",
          **kw: Any) -> dict[str, Any]:
    return pod(name, [cond("PodScheduled", "True", 0),
                      cond(sandbox, "False", 1, "PodSandboxNotReady", message),
                      cond("Initialized", "True", 1),
                      cond("ContainersReady", "False", 1, "ContainersNotReady"),
                      cond("Ready", "False", 1, "ContainersNotReady")],
               **{"phase": "Pending", **kw})


def pod_list(*items: dict[str, Any], kind: str = "PodList") -> dict[str, Any]:
    return {"kind": kind, "apiVersion": "v1", "metadata": {}, "items": list(items)}


def event(name: str, reason: str, message: str, *, uid: str | None = "auto", count: int = 1,
          last: int = 30, ns: str = "default", kind: str = "Pod") -> dict[str, Any]:
    """A core/v1 Event about pod `name`; uid "auto" is the pod's (`uid-<name>`), None none."""
    involved = {"kind": kind, "namespace": ns, "name": name}
    if uid is not None:
        involved["uid"] = f"uid-{name}" if uid == "auto" else uid
    return {"kind": "Event", "involvedObject": involved, "reason": reason, "message": message,
            "count": count, "type": "Warning", "firstTimestamp": T.format(1),
            "lastTimestamp": T.format(last)}


def event_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "EventList", "apiVersion": "v1", "items": list(items)}


# --- percentile rule


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([7.0], 50, 7.0),
        ([7.0], 99, 7.0),
        ([1.0, 2.0], 50, 1.0),  # ceil(1.0)-1 = 0
        ([1.0, 2.0], 90, 2.0),  # ceil(1.8)-1 = 1
        ([1.0, 2.0, 4.0], 50, 2.0),  # ceil(1.5)-1 = 1
        ([float(v) for v in range(1, 11)], 90, 9.0),  # ceil(9)-1 = 8
        ([float(v) for v in range(1, 11)], 99, 10.0),  # ceil(9.9)-1 = 9
        ([float(v) for v in range(1, 101)], 50, 50.0),
        ([float(v) for v in range(1, 101)], 99, 99.0),  # not interpolated, not the max
        ([float(v) for v in range(1, 1001)], 99, 990.0),
    ],
)
def test_percentile_is_clusterloader2s_rule(values: list[float], p: int, expected: float) -> None:
    assert an.percentile(values, p) == expected


def test_stats_none_without_samples() -> None:
    assert an.stats([]) is None
    assert an.stats([1.0, 2.0, 3.0]) == an.Stats(3, 2.0, 3.0, 3.0, 3.0)


# --- time parsing


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("2024-05-01T10:00:07Z", 1714557607.0),
        ("2024-05-01t10:00:07z", 1714557607.0),
        ("2024-05-01T10:00:07.5Z", 1714557607.5),
        ("2024-05-01T10:00:07.123456789Z", 1714557607.123456789),
        ("2024-05-01T12:00:07+02:00", 1714557607.0),
        ("2024-05-01T05:30:07-04:30", 1714557607.0),
    ],
)
def test_time_parser_reads_rfc3339(text: str, seconds: float) -> None:
    assert ai.TimeParser()(text) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    ["yesterday", "2024-05-01", "2024-05-01 10:00:07Z", "2024-05-01T10:00:07",
     "2024-02-30T10:00:07Z", "2024-05-01T24:00:07Z", "2024-05-01T10:61:07Z",
     "2024-05-01T10:00:07.Z", "2024-05-01T10:00:07Z ",
     "\uff12\uff10\uff12\uff14-05-01T10:00:07Z"],  # fullwidth digits
)
def test_time_parser_rejects_what_is_not_rfc3339(text: str) -> None:
    with pytest.raises(ValueError):
        ai.TimeParser()(text)


def test_time_parser_memoises_and_tracks_precision() -> None:
    parse = ai.TimeParser()
    assert parse.cached("2024-05-01T10:00:07Z") is None
    parse("2024-05-01T10:00:07Z")
    assert parse.cached("2024-05-01T10:00:07Z") == 1714557607.0
    assert not parse.saw_fraction
    parse("2024-05-01T10:00:07.25Z")
    assert parse.saw_fraction


# --- phases and transitions


def latencies_of(doc: dict[str, Any]) -> dict[str, list[float | None]]:
    return {k: list(v) for k, v in an.analyze(doc).latencies.items()}


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        # Without init containers: Initialized (0) before the sandbox (2), so its step is 0
        # and containers-ready is measured from the sandbox; the steps add up to 5.
        ((0, 2, 0, 5, 5), [2.0, 0.0, 3.0, 0.0, 5.0]),
        # With init containers: scheduled ≤ sandbox ≤ initialized ≤ containers-ready ≤ ready.
        ((0, 1, 4, 5, 6), [1.0, 3.0, 1.0, 1.0, 6.0]),
        # Second-granular stamps can put ready before containers-ready: clamped to 0.
        ((10, 12, 10, 15, 14), [2.0, 0.0, 3.0, 0.0, 4.0]),
    ],
)
def test_steps_are_measured_from_the_latest_earlier_phase(
        times: tuple[int, ...], expected: list[float]) -> None:
    s, rts, i, cr, r = times
    result = an.analyze(pod_list(started("web", s, rts, i, cr, r)))
    assert [t.name for t in result.transitions] == [
        "scheduledToReadyToStart", "readyToStartToInitialized", "initializedToContainersReady",
        "containersReadyToReady", "scheduledToReady"]
    assert [result.latencies[t.name][0] for t in result.transitions] == expected


def test_column_latencies_match_the_per_pod_definition() -> None:
    docs = [started("a", 0, 2, 0, 5, 5), started("b", 0, 1, 4, 5, 6), stuck("c"),
            started("d", 3, None, 3, 9, 9), started("e", 5, 4, 5, 5, 5)]
    result = an.analyze(pod_list(*docs))
    for t in result.transitions:
        per_pod = [an.latency(p.times, t, an.SANDBOX_CHAIN) for p in result.pods]
        assert list(result.latencies[t.name]) == per_pod, t.name


@pytest.mark.parametrize(
    ("sandbox", "kind"),
    [(PRTSC, "PodList"), (PHN, "PodList"), (PRTSC, "List"), (PHN, "List")],
)
def test_both_condition_names_give_the_sandbox_phase(sandbox: str, kind: str) -> None:
    doc = pod_list(started("web", 0, 3, 0, 4, 4, sandbox=sandbox), kind=kind)
    result = an.analyze(doc)
    assert not result.fallback
    assert result.headline == an.SANDBOX_READY
    assert result.overall["scheduledToReadyToStart"].p50 == 3.0
    assert result.condition_counts[sandbox] == 1
    assert result.pods[0].raw_times[ai.READY_TO_START] == T.format(3)


def test_mixed_names_are_counted_and_noted() -> None:
    result = an.analyze(pod_list(started("new", 0, 2, 0, 3, 3),
                                 started("old", 0, 4, 0, 5, 5, sandbox=PHN),
                                 started("none", 0, None, 0, 6, 6)))
    assert result.condition_counts == {PRTSC: 1, PHN: 1, "neither": 1}
    assert result.overall["scheduledToReadyToStart"].count == 2
    assert result.overall["scheduledToReady"].count == 3
    assert any("old name PodHasNetwork" in n for n in result.notes)
    assert any(n.startswith("1 pod without") for n in result.notes)


def test_neither_name_falls_back_and_says_so() -> None:
    result = an.analyze(pod_list(started("a", 0, None, 0, 7, 8), started("b", 0, None, 1, 3, 3)))
    assert result.fallback
    assert [t.name for t in result.transitions] == [
        "scheduledToInitialized", "initializedToContainersReady", "containersReadyToReady",
        "scheduledToReady"]
    assert result.headline == an.END_TO_END
    assert result.overall["scheduledToReady"] == an.Stats(2, 3.0, 8.0, 8.0, 8.0)
    assert "sandbox-ready latency cannot be measured" in result.notes[0]
    assert "scheduledToReadyToStart" not in result.overall


def test_only_true_conditions_count_as_phases() -> None:
    result = an.analyze(pod_list(stuck("s")))
    record = result.pods[0]
    assert record.times[ai.READY_TO_START] is None and record.times[ai.READY] is None
    assert record.times[ai.INITIALIZED] is not None
    assert result.overall == {}


def test_whole_second_note_only_without_fractions() -> None:
    whole = an.analyze(pod_list(started("a", 0, 1, 0, 2, 2)))
    assert any("whole-second" in n for n in whole.notes)
    precise_pod = started("a", 0, 1, 0, 2, 2)
    precise_pod["status"]["conditions"][1]["lastTransitionTime"] = "2024-05-01T10:00:01.25Z"
    precise = an.analyze(pod_list(precise_pod))
    assert not any("whole-second" in n for n in precise.notes)
    assert precise.overall["scheduledToReadyToStart"].p50 == 1.25


def test_empty_pod_list() -> None:
    result = an.analyze(pod_list())
    assert result.pods == [] and result.overall == {} and result.stuck == ()
    assert "no pods" in result.notes[0]
    assert "Pods: 0" in analysis_report.table(result)
    assert "no samples" in analysis_html.report(result, source="x", events_source=None)


# --- grouping


def test_groups_by_namespace_node_and_runtime_class() -> None:
    result = an.analyze(pod_list(
        started("a", 0, 1, 0, 2, 2, ns="shop", node="n1"),
        started("b", 0, 3, 0, 4, 4, ns="shop", node="n2", rc="kata"),
        started("c", 0, 5, 0, 6, 6, ns="batch", node="n2", rc="kata"),
        started("d", 0, 2, 0, 3, 3, ns="batch", node=None),
        stuck("e", ns="batch", node="n1", rc="gvisor"),
    ))
    def by(dim: str) -> dict[str, tuple[int, float | None]]:
        return {g.key: (g.pods, g.stats["scheduledToReadyToStart"].p50
                        if "scheduledToReadyToStart" in g.stats else None)
                for g in result.groups[dim]}
    assert by("namespace") == {"batch": (3, 2.0), "shop": (2, 1.0)}
    assert by("node") == {"<none>": (1, 2.0), "n1": (2, 1.0), "n2": (2, 3.0)}
    assert by("runtimeClass") == {"<default>": (2, 1.0), "gvisor": (1, None), "kata": (2, 3.0)}
    assert [g.key for g in result.groups["node"]] == ["<none>", "n1", "n2"]


def test_group_percentiles_equal_percentiles_of_the_group_alone() -> None:
    docs = [started(f"p{i}", 0, (i * 7) % 11, 0, 12, 12, ns=f"ns{i % 3}") for i in range(40)]
    result = an.analyze(pod_list(*docs))
    for group in result.groups["namespace"]:
        alone = an.analyze(pod_list(*[d for d in docs
                                      if d["metadata"]["namespace"] == group.key]))
        assert group.stats == alone.overall


# --- stuck pods and events


@pytest.mark.parametrize(
    ("doc", "is_stuck"),
    [
        (stuck("s"), True),
        (stuck("s", sandbox=PHN), True),
        (stuck("s", phase="Succeeded"), False),  # a finished pod's sandbox is stopped
        (stuck("s", deleting=True), False),  # torn down on purpose
        (started("ok", 0, 1, 0, 2, 2), False),
        (pod("unknown", [cond(PRTSC, "Unknown", 1)], phase="Pending"), True),
        (pod("no-cond", [cond("PodScheduled", "True", 0)], phase="Pending"), False),
    ],
)
def test_which_pods_are_stuck(doc: dict[str, Any], is_stuck: bool) -> None:
    assert bool(an.analyze(pod_list(doc)).stuck) is is_stuck


def test_stuck_pod_carries_condition_message_and_matching_events() -> None:
    doc = pod_list(stuck("s", message="no pod sandbox exists: no IP addresses available"),
                   started("other", 0, 1, 0, 2, 2))
    events = event_list(
        event("s", "FailedCreatePodSandBox", "first", count=3, last=10),
        event("s", "FailedCreatePodSandBox", "latest", count=2, last=40),
        event("s", "FailedCreatePodSandBox", "old", uid="uid-earlier-s", count=9, last=50),
        event("s", "FailedMount", "configmap not found", uid=None, count=1, last=20),
        event("s", "Pulling", "pulling image"),
        event("s", "FailedMount", "about a node", kind="Node"),
        event("other", "FailedCreatePodSandBox", "for another pod"),
    )
    result = an.analyze(doc, events)
    (entry,) = result.stuck
    assert entry.pod.sandbox is not None
    assert entry.pod.sandbox.message == "no pod sandbox exists: no IP addresses available"
    assert entry.pod.sandbox.reason == "PodSandboxNotReady"
    assert entry.events == (
        an.EventSummary("FailedCreatePodSandBox", 5, "latest", T.format(40)),
        an.EventSummary("FailedMount", 1, "configmap not found", T.format(20)),
    )


@pytest.mark.parametrize(
    ("pod_uid", "event_uid", "matches"),
    [
        ("u1", "u1", True),
        ("u1", "u2", False),  # an earlier pod of the same name
        ("u1", None, True),  # event without uid: namespace + name
        ("", "u2", True),  # pod without uid: namespace + name
    ],
)
def test_event_matching(pod_uid: str, event_uid: str | None, matches: bool) -> None:
    p = stuck("s")
    p["metadata"]["uid"] = pod_uid
    result = an.analyze(pod_list(p), event_list(event("s", "FailedMount", "m", uid=event_uid)))
    assert bool(result.stuck[0].events) is matches


def test_event_in_another_namespace_does_not_match() -> None:
    result = an.analyze(pod_list(stuck("s")),
                        event_list(event("s", "FailedMount", "m", uid=None, ns="other")))
    assert result.stuck[0].events == ()


def test_without_condition_pending_pods_with_sandbox_events_are_stuck() -> None:
    pending = pod("p", [cond("PodScheduled", "True", 0)], phase="Pending")
    quiet = pod("q", [cond("PodScheduled", "True", 0)], phase="Pending")
    result = an.analyze(pod_list(pending, quiet, started("ok", 0, None, 0, 1, 1)),
                        event_list(event("p", "FailedCreatePodSandBox", "no runtime")))
    assert [s.pod.name for s in result.stuck] == ["p"]
    assert result.stuck[0].pod.sandbox is None


def test_stuck_pods_longest_first() -> None:
    late, early = stuck("late"), stuck("early")
    late["status"]["conditions"][1]["lastTransitionTime"] = T.format(30)
    result = an.analyze(pod_list(late, early))
    assert [s.pod.name for s in result.stuck] == ["early", "late"]


def test_events_v1_fields_are_read() -> None:
    ev = {"kind": "Event", "regarding": {"kind": "Pod", "namespace": "default", "name": "s",
                                         "uid": "uid-s"},
          "reason": "FailedMount", "note": "secret not found",
          "series": {"count": 4, "lastObservedTime": T.format(44)}}
    result = an.analyze(pod_list(stuck("s")), event_list(ev))
    assert result.stuck[0].events == (an.EventSummary("FailedMount", 4, "secret not found",
                                                      T.format(44)),)


# --- malformed input


def _bad_time(value: Any) -> dict[str, Any]:
    p = started("web", 0, 1, 0, 2, 2)
    p["status"]["conditions"][0]["lastTransitionTime"] = value
    return pod_list(p)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "pods: the document is a list, not a Kubernetes object or list"),
        ({"kind": "Pod", "status": []}, "pods: no metadata; every Pod has metadata.name"),
        ({"kind": "PodList", "items": {}}, "pods: PodList.items is an object, not a list"),
        ({"kind": "PodList", "items": ["web"]}, "pods: items[0]: str 'web', not an object"),
        (pod_list({"spec": {}}), "pods: items[0]: no metadata; every Pod has metadata.name"),
        (pod_list({"metadata": {"namespace": "x"}}), "pods: items[0]: metadata.name and "
         "metadata.namespace must be non-empty strings"),
        (pod_list({"metadata": {"name": "web"}, "status": []}),
         "pods: items[0] (default/web): status is a list, not an object"),
        (pod_list({"metadata": {"name": "web"}, "status": {"conditions": {}}}),
         "pods: items[0] (default/web): status.conditions is an object, not a list"),
        (pod_list({"metadata": {"name": "web"}, "status": {"conditions": [1]}}),
         "pods: items[0] (default/web): status.conditions[0] is int 1, not an object"),
        (_bad_time("yesterday"), "pods: items[0] (default/web): status.conditions[0] "
         "(PodScheduled).lastTransitionTime: not an RFC 3339 time: 'yesterday'"),
        (_bad_time("2024-02-30T10:00:00Z"), "not an RFC 3339 time: '2024-02-30T10:00:00Z'"),
        (_bad_time(1714557607), "(PodScheduled).lastTransitionTime: int 1714557607 is not an "
         "RFC 3339 time"),
    ],
)
def test_malformed_pod_lists_name_what_and_where(doc: Any, message: str) -> None:
    with pytest.raises(an.AnalysisError) as raised:
        an.analyze(doc)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (event_list({"kind": "Event", "reason": "FailedMount"}),
         "events: items[0]: no involvedObject"),
        (event_list({**event("s", "FailedMount", "m"), "lastTimestamp": "soon"}),
         "events: items[0]: event time: not an RFC 3339 time: 'soon'"),
        (event_list({**event("s", "FailedMount", "m"), "count": "3"}),
         "events: items[0]: count is str '3', not an integer"),
    ],
)
def test_malformed_event_lists_name_what_and_where(doc: Any, message: str) -> None:
    with pytest.raises(an.AnalysisError) as raised:
        an.analyze(pod_list(), doc)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "dump.json: empty input; expected Kubernetes objects in JSON or YAML"),
        (b"NAME READY STATUS\nweb  1/1  Running\n", "dump.json: plain text, neither JSON nor YAML"),
        (b"kind: [unclosed\n", "dump.json: neither JSON nor YAML ("),
        (b'{"kind": "PodList",\n "items": [}', "not JSON (Expecting value at line 2 column 12)"),
        (b"{\xff\xfe", "dump.json: not UTF-8 text"),
        (b"\x1f\x8bnot gzip", "dump.json: not a readable gzip file"),
        (b"[" * 100000, "dump.json: nested too deeply"),
    ],
)
def test_decode_errors(data: bytes, message: str) -> None:
    with pytest.raises(dumps.DumpError) as raised:
        dumps.documents(data, "dump.json")
    assert message in str(raised.value)


def test_nodelet_pod_list_without_kind_on_items_and_conditions_we_do_not_own() -> None:
    p = started("web", 0, 1, 0, 2, 2)
    p["status"]["conditions"].append(cond("DisruptionTarget", "True", 9))
    p["status"]["conditions"].append({"type": "example.com/gate", "status": "True"})
    assert an.analyze(pod_list(p)).overall["scheduledToReady"].p50 == 2.0


# --- renderings


@pytest.fixture
def sample() -> an.Analysis:
    return an.analyze(
        pod_list(started("web", 0, 2, 0, 5, 5, rc="gvisor"), started("db", 0, 4, 0, 6, 6),
                 stuck("s<b>", message='no runtime for "kata" <script>')),
        event_list(event("s<b>", "FailedCreatePodSandBox", "boom & <bust>", count=3)))


def test_table_shows_percentiles_groups_slowest_and_stuck(sample: an.Analysis) -> None:
    text = analysis_report.table(sample)
    assert "Pods: 3 (1 namespaces, 1 nodes, 2 runtime classes)" in text
    assert "Stuck before their sandbox: 1 pod\n" in text
    lines = text.splitlines()
    sli = next(line for line in lines if line.startswith("scheduled → ready-to-start"))
    assert sli.split()[-5:] == ["2", "2s", "4s", "4s", "4s"]
    assert "default/db" in text and "+4s" in text
    assert "FailedCreatePodSandBox x3 (last 2024-05-01T10:00:30Z): boom & <bust>" in text
    assert 'message: no runtime for "kata" <script>' in text


def test_json_schema(sample: an.Analysis) -> None:
    doc = json.loads(analysis_report.json_text(sample, source="pods.json",
                                               events_source="events.json"))
    assert doc["schema"] == "nodelet.analyze/v1"
    assert doc["source"] == {"pods": "pods.json", "events": "events.json"}
    assert doc["summary"] == {
        "pods": 3, "namespaces": 1, "nodes": 1, "runtimeClasses": 2,
        "sandboxCondition": {PRTSC: 3, PHN: 0, "neither": 0, "fallback": False}, "stuck": 1,
        "measured": 3, "recreated": 0, "terminating": 0}
    assert doc["headline"] == "scheduledToReadyToStart"
    assert doc["phases"] == ["scheduled", "readyToStart", "initialized", "containersReady",
                             "ready"]
    assert doc["transitions"][0] == {"name": "scheduledToReadyToStart", "from": "scheduled",
                                     "to": "readyToStart", "step": True}
    assert doc["overall"]["scheduledToReadyToStart"] == {
        "count": 2, "p50": 2.0, "p90": 4.0, "p99": 4.0, "max": 4.0}
    assert doc["byRuntimeClass"]["gvisor"]["pods"] == 1
    assert doc["byNode"]["node-a"]["transitions"]["scheduledToReady"]["p50"] == 5.0
    assert set(doc) >= {"byNamespace", "byNode", "byRuntimeClass", "stuck", "pods", "notes"}
    (entry,) = doc["stuck"]
    assert entry["condition"]["message"] == 'no runtime for "kata" <script>'
    assert entry["events"] == [{"reason": "FailedCreatePodSandBox", "count": 3,
                                "lastMessage": "boom & <bust>",
                                "lastSeen": "2024-05-01T10:00:30Z"}]
    web = doc["pods"][0]
    assert web["phases"]["readyToStart"] == T.format(2)
    assert web["latencies"]["scheduledToReadyToStart"] == 2.0
    assert doc["pods"][2]["latencies"]["scheduledToReadyToStart"] is None


def test_html_is_standalone_escaped_and_has_plots(sample: an.Analysis) -> None:
    page = analysis_html.report(sample, source="pods.json", events_source=None)
    assert page.startswith("<!doctype html>")
    assert page.count("<svg") == 2 and "<rect" in page and "<polyline" in page
    for external in ("<script", "src=", "href=", "@import", "url("):
        assert external not in page
    assert "s&lt;b&gt;" in page and "&lt;script&gt;" in page and "boom &amp; &lt;bust&gt;" in page


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.0, "0s"), (0.25, "250ms"), (0.9996, "1s"), (3.0, "3s"), (3.24, "3.2s"),
     (59.96, "1m0s"), (252.0, "4m12s"), (3725.0, "1h2m"), (86400 * 3 + 4 * 3600 + 59, "3d4h"),
     (2556 * 3600 + 240, "106d12h")],
)
def test_human_seconds(seconds: float | None, text: str) -> None:
    assert analysis_report.human_seconds(seconds) == text


def test_histogram_bins_cover_every_sample_with_overflow_in_the_last() -> None:
    samples = sorted([0.1, 0.2, 0.2, 1.0, 1.9, 50.0])
    bins = list(histograms.from_samples("x", samples, 2.0, bins=4).counts)
    assert bins == [3, 1, 0, 2]  # (0, 0.5], (0.5, 1], (1, 1.5], the rest
    assert sum(bins) == len(samples)
