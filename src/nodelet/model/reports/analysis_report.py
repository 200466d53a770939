"""Rendering an `analysis.Analysis` as a human table or as JSON (pure: values in, text out).

The table fits `WIDTH` (100) columns — notes and messages wrapped, long names cut in the
middle — and opens with the three questions an SRE asks first (`_glance`); every table's title
says which pods it covers (`covered`). Durations have one format (`analysis.human_seconds`).

The JSON schema (`SCHEMA`, documented in docs/analyze.md) is stable: fields are only ever
added. Latencies are seconds (float, rounded to microseconds); times are the RFC 3339 strings
as they were written in the input. The HTML report lives in `analysis_html`.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Sequence
from typing import Any

from nodelet.model.reports import analysis as an
from nodelet.model.reports import analysis_input as ai

SCHEMA = "nodelet.analyze/v1"
# Rows per group table and stuck pods in the terminal; JSON and HTML list everything.
TABLE_GROUP_ROWS = 20
TABLE_STUCK_PODS = 50
TABLE_SLOWEST_PODS = 10
_GUTTER = "   "
TERMINATION_LABEL = "deletion requested → sandbox not ready (termination SLI)"


# --- shared helpers (also used by analysis_html)

human_seconds = an.human_seconds


def condition_summary(analysis: an.Analysis) -> str:
    counts = analysis.condition_counts
    parts = [f"{name} on {counts[name]} pods" for name in ai.SANDBOX_CONDITIONS if counts[name]]
    if not parts:
        return "neither PodReadyToStartContainers nor PodHasNetwork (fallback: no sandbox phase)"
    if counts["neither"]:
        parts.append(f"neither on {counts['neither']}")
    return ", ".join(parts)


def worst_first(groups: Sequence[an.Group], transition: str) -> list[an.Group]:
    """Groups by p99 of `transition`, slowest first (groups without samples last)."""
    return sorted(groups, key=lambda g: (-g.stats[transition].p99 if transition in g.stats
                                         else 1.0, g.key))


def slowest_pods(analysis: an.Analysis, limit: int) -> list[tuple[ai.PodRecord, float]]:
    values = analysis.latencies[analysis.headline.name]
    ranked = sorted(((v, i) for i, v in enumerate(values) if v is not None), reverse=True)
    return [(analysis.pods[i], v) for v, i in ranked[:limit]]


def phase_offsets(analysis: an.Analysis, pod: ai.PodRecord) -> list[str]:
    """Each phase of the chain as `+1.2s` after scheduled (`-` when not reached)."""
    t0 = pod.times[ai.SCHEDULED]
    return [
        "-" if (t := pod.times[p]) is None or t0 is None else "+" + human_seconds(max(0, t - t0))
        for p in chain_of(analysis)
    ]


def chain_of(analysis: an.Analysis) -> tuple[int, ...]:
    return an.FALLBACK_CHAIN if analysis.fallback else an.SANDBOX_CHAIN


def stuck_condition(pod: ai.PodRecord) -> str:
    if pod.sandbox is None:
        return f"no sandbox condition, phase {pod.phase or 'unknown'}"
    reason = f" ({pod.sandbox.reason})" if pod.sandbox.reason else ""
    since = f" since {pod.sandbox.since}" if pod.sandbox.since else ""
    return f"{pod.sandbox.type}={pod.sandbox.status}{reason}{since}"


def covered(analysis: an.Analysis) -> str:
    """Which pods the percentiles cover, for every table's title."""
    left_out = []
    if analysis.recreated:
        left_out.append(f"{len(analysis.recreated)} re-created")
    missing = analysis.condition_counts["neither"]
    if missing and not analysis.fallback:
        left_out.append(f"{missing} without the condition")
    tail = f"; not: {', '.join(left_out)}" if left_out else ""
    return f"first starts, {analysis.measured} of {_pods(len(analysis.pods))}{tail}"


def stuck_reasons(analysis: an.Analysis, limit: int = 3) -> list[tuple[str, int]]:
    """The commonest causes of stuck pods: the last sandbox event's message, else what the
    nodelet.dev conditions say, else the condition's message, cut to its first clause."""
    causes: dict[str, int] = {}
    for s in analysis.stuck:
        text = s.events[0].last_message if s.events else s.blocked_on or (
            s.pod.sandbox.message if s.pod.sandbox is not None else "") or "no message"
        key = _first_clause(text)
        causes[key] = causes.get(key, 0) + 1
    return sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


_BOILERPLATE = re.compile(r"^(?:Failed to create pod sandbox: )?(?:rpc error: code = \w+ "
                          r"desc = )?")


def _first_clause(text: str, limit: int = 90) -> str:
    """The cause in a message: runtime errors nest `operation: operation: cause`, so the last
    clauses (at least 40 characters of them, `no IP addresses available in range set: …`)."""
    parts = (_BOILERPLATE.sub("", text.strip()) or text).split(": ")
    tail = parts.pop()
    while parts and len(tail) < 40:
        tail = f"{parts.pop()}: {tail}"
    return ("…" if parts else "") + _cut(tail, limit)


def worst_groups(analysis: an.Analysis) -> list[tuple[str, an.Group]]:
    """The slowest group of each dimension by headline p99 (dimensions with >1 group)."""
    out = []
    for d in an.DIMENSIONS:
        groups = [g for g in analysis.groups[d] if analysis.headline.name in g.stats]
        if len(groups) > 1:
            out.append((d, worst_first(groups, analysis.headline.name)[0]))
    return out


# --- table

WIDTH = 100


def table(analysis: an.Analysis) -> str:
    """The terminal report (at most WIDTH columns): the three questions an SRE asks first,
    then percentiles, worst groups, slowest, re-created and stuck pods."""
    sections = [
        _glance(analysis),
        _summary(analysis),
        _overall_table(analysis),
        _extra_table(analysis),
        *(_group_table(analysis, d) for d in an.DIMENSIONS),
        _slowest_table(analysis),
        _recreated_section(analysis),
        _stuck_section(analysis),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def wrap(text: str, first: str = "", rest: str = "    ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False) or [first.rstrip()]


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` columns, its middle elided: a third of the start is kept and
    two thirds of the end, where generated pod names differ (`-7d4b9c-x2x9z`)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:keep // 3] + "…" + text[len(text) - (keep - keep // 3):]


def _columns(rows: Sequence[Sequence[str]], right: int = 1, shrink: int = 0) -> list[str]:
    """Columns: the first `right` ones left-aligned, the others (numbers) right-aligned;
    column `shrink` is cut (middle elided) so that the table fits in WIDTH."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    over = sum(widths) + len(_GUTTER) * (len(widths) - 1) - WIDTH
    if over > 0:
        widths[shrink] = max(12, widths[shrink] - over)
        rows = [[_cut(c, widths[shrink]) if i == shrink else c for i, c in enumerate(row)]
                for row in rows]
    return [
        _GUTTER.join(cell.ljust(w) if i < right else cell.rjust(w)
                     for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]


def _glance(analysis: an.Analysis) -> str:
    head = analysis.headline
    s = analysis.overall.get(head.name)
    lines = ["At a glance"]
    if s is None:
        lines += wrap(f"How fast: no {head.label} measured ({covered(analysis)}).", "  ")
    else:
        lines += wrap(f"How fast: {head.label} p50 {human_seconds(s.p50)}, p90 "
                      f"{human_seconds(s.p90)}, p99 {human_seconds(s.p99)}, max "
                      f"{human_seconds(s.max)} ({covered(analysis)}).", "  ")
    stuck = analysis.stuck
    if stuck:
        causes = "; ".join(f"{n}x {c}" for c, n in stuck_reasons(analysis))
        lines += wrap(f"Stuck: {_pods(len(stuck))} before their sandbox — {causes}.", "  ")
    else:
        lines.append("  Stuck: none before their sandbox.")
    worst = worst_groups(analysis)
    if worst:
        lines += wrap("Worst: " + ", ".join(
            f"{d} {g.key} (p99 {human_seconds(g.stats[head.name].p99)}, "
            f"{g.stats[head.name].count} pods)" for d, g in worst) + ".", "  ")
    if analysis.recreated:
        lines += wrap(f"Re-created sandboxes: {_pods(len(analysis.recreated))}, left out of "
                      "the percentiles (listed below).", "  ")
    return "\n".join(lines)


def _summary(analysis: an.Analysis) -> str:
    n = len(analysis.pods)
    sizes = {d: len(analysis.groups[d]) for d in an.DIMENSIONS}
    lines = [
        f"Pods: {n} ({sizes['namespace']} namespaces, {sizes['node']} nodes, "
        f"{sizes['runtimeClass']} runtime classes)",
        *wrap(f"Sandbox condition: {condition_summary(analysis)}"),
        f"Stuck before their sandbox: {_pods(len(analysis.stuck))}",
    ]
    term = analysis.termination
    if term.terminating:
        ts = term.stats
        measured = "none measured" if ts is None else (
            f"deletion → sandbox not ready p50 {human_seconds(ts.p50)}, p99 "
            f"{human_seconds(ts.p99)} over {_pods(ts.count)}")
        lines += wrap(f"Terminating: {_pods(term.terminating)} ({measured}; "
                      f"{term.still_ready} still with a ready sandbox)")
    for note in analysis.notes:
        lines += wrap(note, "Note: ", "      ")
    return "\n".join(lines)


def _pods(n: int) -> str:
    return "1 pod" if n == 1 else f"{n} pods"


def _stat_cells(s: an.Stats | None) -> list[str]:
    if s is None:
        return ["0", "-", "-", "-", "-"]
    return [str(s.count), *(human_seconds(v) for v in (s.p50, s.p90, s.p99, s.max))]


def _overall_table(analysis: an.Analysis) -> str:
    rows = [["TRANSITION", "PODS", "P50", "P90", "P99", "MAX"]]
    for t in analysis.transitions:
        mark = " (SLI)" if t == an.SANDBOX_READY else ""
        rows.append([t.label + mark, *_stat_cells(analysis.overall.get(t.name))])
    if analysis.termination.terminating:  # KEP-3085's other SLI, over the terminating pods
        rows.append([TERMINATION_LABEL, *_stat_cells(analysis.termination.stats)])
    title = wrap(f"Percentiles ({covered(analysis)}; PODS: those that reached both phases):")
    return "\n".join([*title, *_columns(rows)])


def extra_rows(analysis: an.Analysis) -> list[list[str]]:
    """nodelet.dev conditions: type, pods, not True, then scheduled -> True (also for HTML)."""
    return [[e.type, str(e.pods), str(e.not_ready), *_stat_cells(e.stats)]
            for e in analysis.extra]


def _extra_table(analysis: an.Analysis) -> str:
    if not analysis.extra:
        return ""
    rows = [["CONDITION", "PODS", "NOT READY", "TRUE", "P50", "P90", "P99", "MAX"],
            *extra_rows(analysis)]
    title = wrap("nodelet.dev conditions (alpha gates; TRUE..MAX: scheduled → True, first "
                 "starts):")
    return "\n".join([*title, *_columns(rows)])


def _group_table(analysis: an.Analysis, dimension: str) -> str:
    head, total = analysis.headline, an.END_TO_END
    groups = worst_first(analysis.groups[dimension], head.name)
    if not groups:
        return ""
    header = [dimension.upper(), "PODS", "MEASURED", "P50", "P90", "P99"]
    if head != total:
        header += ["READY N", "READY P50", "READY P99"]
    rows = [header]
    for g in groups[:TABLE_GROUP_ROWS]:
        s = g.stats.get(head.name)
        row = [g.key, str(g.pods), *_stat_cells(s)[:4]]
        if head != total:
            e = g.stats.get(total.name)
            row += [str(e.count if e else 0), human_seconds(e.p50 if e else None),
                    human_seconds(e.p99 if e else None)]
        rows.append(row)
    ready = (" READY: scheduled → ready over the pods that reached ready." if head != total
             else "")
    title = wrap(f"{head.label} by {dimension}, slowest p99 first. PODS: all in the group; "
                 f"MEASURED: those with a latency ({covered(analysis)}).{ready}")
    more = len(groups) - TABLE_GROUP_ROWS
    tail = [f"... and {more} more (-o json or -o html lists all)"] if more > 0 else []
    return "\n".join([*title, *_columns(rows), *tail])


def _slowest_table(analysis: an.Analysis) -> str:
    slow = slowest_pods(analysis, TABLE_SLOWEST_PODS)
    if not slow:
        return ""
    chain = chain_of(analysis)
    short = {ai.SCHEDULED: "SCHED", ai.READY_TO_START: "SANDBOX", ai.INITIALIZED: "INIT",
             ai.CONTAINERS_READY: "CONT-READY", ai.READY: "READY"}
    rows = [["POD", "NODE", *(short[p] for p in chain)]]
    rows += [[f"{p.namespace}/{p.name}", p.node, *phase_offsets(analysis, p)] for p, _ in slow]
    title = wrap(f"Slowest pods by {analysis.headline.label} ({covered(analysis)}); each "
                 "phase as time after scheduled:")
    return "\n".join([*title, *_columns(rows, 2)])


def _recreated_section(analysis: an.Analysis) -> str:
    if not analysis.recreated:
        return ""
    lines = wrap(f"Re-created sandboxes ({_pods(len(analysis.recreated))}, not in the "
                 "percentiles; their condition time is of a later sandbox):")
    for r in analysis.recreated[:TABLE_STUCK_PODS]:
        pod = r.pod
        lines.append(_cut(f"{pod.namespace}/{pod.name}   node {pod.node}", WIDTH))
        lines += wrap(r.reason, "    ", "      ")
    more = len(analysis.recreated) - TABLE_STUCK_PODS
    if more > 0:
        lines.append(f"... and {more} more (-o json or -o html lists all)")
    return "\n".join(lines)


def _stuck_section(analysis: an.Analysis) -> str:
    if not analysis.stuck:
        return ""
    lines = [f"Stuck before their sandbox ({_pods(len(analysis.stuck))}, longest first):"]
    for s in analysis.stuck[:TABLE_STUCK_PODS]:
        pod = s.pod
        lines.append(_cut(f"{pod.namespace}/{pod.name}   node {pod.node}", WIDTH))
        lines += wrap(stuck_condition(pod), "    ", "      ")
        if s.blocked_on:
            lines += wrap(s.blocked_on, "    blocked on ", "      ")
        if pod.sandbox is not None and pod.sandbox.message:
            lines += wrap(pod.sandbox.message, "    message: ", "      ")
        message = pod.sandbox.message if pod.sandbox is not None else ""
        for e in s.events:
            said = "the message above" if e.last_message == message else e.last_message
            lines += wrap(f"{e.reason} x{e.count} (last {e.last_seen or 'unknown'}): {said}",
                          "    ", "      ")
        if analysis.events_given and not s.events:
            lines.append("    no FailedCreatePodSandBox / FailedMount events")
    more = len(analysis.stuck) - TABLE_STUCK_PODS
    if more > 0:
        lines.append(f"... and {more} more (-o json or -o html lists all)")
    return "\n".join(lines)


# --- JSON


def _sec(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _stats_json(s: an.Stats | None) -> dict[str, Any]:
    if s is None:
        return {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}
    return {"count": s.count, "p50": _sec(s.p50), "p90": _sec(s.p90), "p99": _sec(s.p99),
            "max": _sec(s.max)}


def _transitions_json(analysis: an.Analysis, stats: Any) -> dict[str, Any]:
    return {t.name: _stats_json(stats.get(t.name)) for t in analysis.transitions}


def to_json(analysis: an.Analysis, *, source: str, events_source: str | None) -> dict[str, Any]:
    """The `-o json` document (schema nodelet.analyze/v1, see docs/analyze.md)."""
    sizes = {d: len(analysis.groups[d]) for d in an.DIMENSIONS}
    return {
        "schema": SCHEMA,
        "source": {"pods": source, "events": events_source},
        "summary": {
            "pods": len(analysis.pods),
            "namespaces": sizes["namespace"],
            "nodes": sizes["node"],
            "runtimeClasses": sizes["runtimeClass"],
            "sandboxCondition": {**analysis.condition_counts, "fallback": analysis.fallback},
            "stuck": len(analysis.stuck),
            "measured": analysis.measured,
            "recreated": len(analysis.recreated),
            "terminating": analysis.termination.terminating,
        },
        "percentileRule": "clusterloader2: element ceil(n*p/100)-1 of the sorted latencies",
        "phases": [ai.PHASES[p] for p in chain_of(analysis)],
        "transitions": [{"name": t.name, "from": ai.PHASES[t.start], "to": ai.PHASES[t.end],
                         "step": t.step} for t in analysis.transitions],
        "headline": analysis.headline.name,
        "overall": _transitions_json(analysis, analysis.overall),
        **{f"by{d[0].upper()}{d[1:]}": {
            g.key: {"pods": g.pods, "transitions": _transitions_json(analysis, g.stats)}
            for g in analysis.groups[d]} for d in an.DIMENSIONS},
        "stuck": [_stuck_json(s) for s in analysis.stuck],
        "recreated": [{"namespace": r.pod.namespace, "name": r.pod.name, "uid": r.pod.uid,
                       "node": r.pod.node, "runtimeClass": r.pod.runtime_class,
                       "readyToStart": r.pod.raw_times[ai.READY_TO_START],
                       "reason": r.reason} for r in analysis.recreated],
        "termination": {"terminating": analysis.termination.terminating,
                        "stillReady": analysis.termination.still_ready,
                        "deletionToNotReady": _stats_json(analysis.termination.stats)},
        **({"extraConditions": {e.type: {"pods": e.pods, "notReady": e.not_ready,
                                           "scheduledToTrue": _stats_json(e.stats)}
                                 for e in analysis.extra}} if analysis.extra else {}),
        "pods": _pods_json(analysis),
        "notes": list(analysis.notes),
    }


def _stuck_json(s: an.StuckPod) -> dict[str, Any]:
    pod, cond = s.pod, s.pod.sandbox
    return {
        "namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "node": pod.node,
        "runtimeClass": pod.runtime_class, "phase": pod.phase,
        "condition": None if cond is None else {
            "type": cond.type, "status": cond.status, "reason": cond.reason,
            "message": cond.message, "lastTransitionTime": cond.since},
        "events": [{"reason": e.reason, "count": e.count, "lastMessage": e.last_message,
                    "lastSeen": e.last_seen} for e in s.events],
        **({"blockedOn": s.blocked_on} if s.blocked_on else {}),
    }


def _pods_json(analysis: an.Analysis) -> list[dict[str, Any]]:
    chain = chain_of(analysis)
    names = [t.name for t in analysis.transitions]
    columns = [analysis.latencies[n] for n in names]
    recreated = {id(r.pod): r.reason for r in analysis.recreated}
    out = []
    for i, pod in enumerate(analysis.pods):
        raw = pod.raw_times
        out.append({
            "namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "node": pod.node,
            "runtimeClass": pod.runtime_class,
            "sandboxCondition": pod.sandbox.type if pod.sandbox is not None else None,
            "phases": {ai.PHASES[p]: raw[p] for p in chain},
            "latencies": {n: _sec(c[i]) for n, c in zip(names, columns, strict=True)},
            "recreated": recreated.get(id(pod)),
            # Deletion requested -> sandbox condition False (None: not terminating, or not yet).
            "termination": _sec(an.termination_seconds(pod)) if pod.terminating else None,
        })
    return out


def json_text(analysis: an.Analysis, *, source: str, events_source: str | None) -> str:
    # One line: the indenting encoder is pure Python and several times slower on 100 000 pods.
    return json.dumps(to_json(analysis, source=source, events_source=events_source),
                      ensure_ascii=False) + "\n"
