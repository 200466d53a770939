"""Rendering an `analysis.Analysis` as a human table or as JSON (pure: values in, text out).

The JSON schema (`SCHEMA`, documented in docs/analyze.md) is stable: fields are only ever
added. Latencies are seconds (float, rounded to microseconds); times are the RFC 3339 strings
as they were written in the input. The HTML report lives in `analysis_html`.
"""

from __future__ import annotations

import json
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


# --- shared helpers (also used by analysis_html)


def human_seconds(value: float | None) -> str:
    """0s, 850ms, 2.35s, 3m05s, 1h02m."""
    if value is None:
        return "-"
    if value == 0:
        return "0s"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 60:
        return f"{value:.2f}s"
    whole = round(value)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


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
    """Each phase of the chain as `+1.23s` after scheduled (`-` when not reached)."""
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


# --- table


def table(analysis: an.Analysis) -> str:
    """The terminal report: summary, percentiles, worst groups, slowest and stuck pods."""
    sections = [
        _summary(analysis),
        _overall_table(analysis),
        *(_group_table(analysis, d) for d in an.DIMENSIONS),
        _slowest_table(analysis),
        _stuck_section(analysis),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def _columns(rows: Sequence[Sequence[str]], right: int = 1) -> list[str]:
    """Columns: the first `right`-less ones left-aligned, numbers (from `right`) right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        _GUTTER.join(cell.ljust(w) if i < right else cell.rjust(w)
                     for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]


def _summary(analysis: an.Analysis) -> str:
    n = len(analysis.pods)
    sizes = {d: len(analysis.groups[d]) for d in an.DIMENSIONS}
    lines = [
        f"Pods: {n} ({sizes['namespace']} namespaces, {sizes['node']} nodes, "
        f"{sizes['runtimeClass']} runtime classes)",
        f"Sandbox condition: {condition_summary(analysis)}",
        f"Stuck before their sandbox: {_pods(len(analysis.stuck))}",
    ]
    lines += [f"Note: {note}" for note in analysis.notes]
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
        mark = "  (sandbox-ready SLI)" if t == an.SANDBOX_READY else ""
        rows.append([t.label + mark, *_stat_cells(analysis.overall.get(t.name))])
    return "\n".join(_columns(rows))


def _group_table(analysis: an.Analysis, dimension: str) -> str:
    head, total = analysis.headline, an.END_TO_END
    groups = worst_first(analysis.groups[dimension], head.name)
    header = [dimension.upper(), "PODS", "MEASURED", "P50", "P90", "P99"]
    if head != total:
        header += ["READY P50", "READY P99"]
    rows = [header]
    for g in groups[:TABLE_GROUP_ROWS]:
        s = g.stats.get(head.name)
        row = [g.key, str(g.pods), *_stat_cells(s)[:4]]
        if head != total:
            e = g.stats.get(total.name)
            row += [human_seconds(e.p50 if e else None), human_seconds(e.p99 if e else None)]
        rows.append(row)
    title = f"{head.label} by {dimension}, slowest p99 first:"
    more = len(groups) - TABLE_GROUP_ROWS
    tail = [f"... and {more} more (-o json or -o html lists all)"] if more > 0 else []
    return "\n".join([title, *_columns(rows), *tail])


def _slowest_table(analysis: an.Analysis) -> str:
    slow = slowest_pods(analysis, TABLE_SLOWEST_PODS)
    if not slow:
        return ""
    chain = chain_of(analysis)
    rows = [["POD", "NODE", "RUNTIMECLASS", *(ai.PHASE_LABELS[p].upper() for p in chain)]]
    rows += [[f"{p.namespace}/{p.name}", p.node, p.runtime_class, *phase_offsets(analysis, p)]
             for p, _ in slow]
    return "\n".join([f"Slowest pods by {analysis.headline.label}:", *_columns(rows, 3)])


def _stuck_section(analysis: an.Analysis) -> str:
    if not analysis.stuck:
        return ""
    lines = [f"Stuck before their sandbox ({_pods(len(analysis.stuck))}, longest first):"]
    for s in analysis.stuck[:TABLE_STUCK_PODS]:
        pod = s.pod
        lines.append(f"{pod.namespace}/{pod.name}   node {pod.node}   {stuck_condition(pod)}")
        if pod.sandbox is not None and pod.sandbox.message:
            lines.append(f"    message: {pod.sandbox.message}")
        lines += [f"    {e.reason} x{e.count} (last {e.last_seen or 'unknown'}): "
                  f"{e.last_message}" for e in s.events]
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
    }


def _pods_json(analysis: an.Analysis) -> list[dict[str, Any]]:
    chain = chain_of(analysis)
    names = [t.name for t in analysis.transitions]
    columns = [analysis.latencies[n] for n in names]
    out = []
    for i, pod in enumerate(analysis.pods):
        raw = pod.raw_times
        out.append({
            "namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "node": pod.node,
            "runtimeClass": pod.runtime_class,
            "sandboxCondition": pod.sandbox.type if pod.sandbox is not None else None,
            "phases": {ai.PHASES[p]: raw[p] for p in chain},
            "latencies": {n: _sec(c[i]) for n, c in zip(names, columns, strict=True)},
        })
    return out


def json_text(analysis: an.Analysis, *, source: str, events_source: str | None) -> str:
    # One line: the indenting encoder is pure Python and several times slower on 100 000 pods.
    return json.dumps(to_json(analysis, source=source, events_source=events_source),
                      ensure_ascii=False) + "\n"
