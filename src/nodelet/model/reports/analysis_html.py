"""`nodelet analyze -o html`: a standalone report with inline SVG plots (pure: values in, HTML out).

One file, no scripts, no external assets (styles inline, plots as SVG): "at a glance" (how
fast, what is stuck and why, where it is worst), a histogram and a CDF of the headline latency
(sandbox-ready, or scheduled → ready in fallback) with p50/p90/p99 marks — on a log axis when
the samples span decades (`Axis`) — the percentile tables (overall with the termination SLI, by
namespace, node and runtimeClass, each saying which pods it covers), the slowest pods with their
phases, the re-created sandboxes with the reason and the stuck pods with their condition
message and events. Every input string is escaped. The plots are drawn by `charts`, as the web
UI's, styled by presentation attributes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from nodelet.model.reports import analysis as an
from nodelet.model.reports import analysis_input as ai
from nodelet.model.reports import analysis_report as rep
from nodelet.model.reports import charts
from nodelet.model.reports import histograms as hg

HTML_GROUP_ROWS = 500
HTML_STUCK_PODS = 2000
HTML_SLOWEST_PODS = 25
BINS = 40
CDF_POINTS = 300
# Plot geometry (SVG user units): the drawing area sits inside these margins.
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 260, 56, 28, 16, 40

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;text-align:left;
border-bottom:1px solid #eee;vertical-align:top}td.n,th.n{text-align:right;
font-variant-numeric:tabular-nums}.plots{display:flex;flex-wrap:wrap;gap:16px}
svg{background:#fafafa;border:1px solid #ddd}.note{color:#555}.msg{font-family:monospace;
font-size:12px;white-space:pre-wrap}.bad{color:#b00020}
"""


def report(analysis: an.Analysis, *, source: str, events_source: str | None) -> str:
    head = analysis.headline
    body = [
        f"<h1>Pod startup: {escape(source)}</h1>",
        _glance(analysis),
        _summary(analysis, events_source),
        f"<h2>{escape(head.label)} latency</h2>",
        '<div class="plots">', histogram_svg(analysis.headline_samples, head.label),
        cdf_svg(analysis.headline_samples, head.label), "</div>",
        "<h2>Percentiles</h2>", _overall(analysis), _extra(analysis),
        *(_groups(analysis, d) for d in an.DIMENSIONS),
        _slowest(analysis), _recreated(analysis), _stuck(analysis),
    ]
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>nodelet analyze: {escape(source)}</title><style>{_STYLE}</style></head>"
            "<body>\n" + "\n".join(body) + "\n</body></html>\n")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int) -> str:
    """An HTML table; cells are already escaped; columns from `numeric_from` right-aligned."""
    def cells(row: Sequence[str], tag: str) -> str:
        return "".join(f'<{tag} class="n">{c}</{tag}>' if i >= numeric_from
                       else f"<{tag}>{c}</{tag}>" for i, c in enumerate(row))
    lines = [f"<tr>{cells(header, 'th')}</tr>", *(f"<tr>{cells(r, 'td')}</tr>" for r in rows)]
    return "<table>" + "\n".join(lines) + "</table>"


def _summary(analysis: an.Analysis, events_source: str | None) -> str:
    sizes = {d: len(analysis.groups[d]) for d in an.DIMENSIONS}
    items = [
        f"{len(analysis.pods)} pods in {sizes['namespace']} namespaces on {sizes['node']} "
        f"nodes, {sizes['runtimeClass']} runtime classes",
        f"Sandbox condition: {escape(rep.condition_summary(analysis))}",
        f"Stuck before their sandbox: <b>{len(analysis.stuck)}</b> pods",
        f"Events: {escape(events_source) if events_source else 'none given'}",
    ]
    notes = [f'<li class="note">{escape(n)}</li>' for n in analysis.notes]
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "".join(notes) + "</ul>"


def _glance(analysis: an.Analysis) -> str:
    """The three questions first: how fast, what is stuck and why, where it is worst."""
    head = analysis.headline
    s = analysis.overall.get(head.name)
    fast = (f"no {escape(head.label)} measured" if s is None else
            f"{escape(head.label)}: p50 <b>{rep.human_seconds(s.p50)}</b>, p90 "
            f"<b>{rep.human_seconds(s.p90)}</b>, p99 <b>{rep.human_seconds(s.p99)}</b>, max "
            f"{rep.human_seconds(s.max)}")
    causes = "; ".join(f"{n}&times; <span class=\"msg\">{escape(c)}</span>"
                       for c, n in rep.stuck_reasons(analysis))
    stuck = (f"<b>{len(analysis.stuck)}</b> pods before their sandbox: {causes}"
             if analysis.stuck else "none before their sandbox")
    worst = ", ".join(f"{escape(d)} <b>{escape(g.key)}</b> (p99 "
                      f"{rep.human_seconds(g.stats[head.name].p99)})"
                      for d, g in rep.worst_groups(analysis)) or "one group only"
    items = [f"<b>How fast</b>: {fast} <span class=\"note\">({escape(rep.covered(analysis))})"
             "</span>", f"<b>Stuck</b>: {stuck}", f"<b>Worst</b>: {worst}"]
    if analysis.recreated:
        items.append(f"<b>Re-created sandboxes</b>: {len(analysis.recreated)} pods, left out "
                     "of the percentiles (listed below)")
    return '<h2>At a glance</h2><ul class="glance">' + "".join(
        f"<li>{i}</li>" for i in items) + "</ul>"


def _stat_cells(s: an.Stats | None) -> list[str]:
    if s is None:
        return ["0", "-", "-", "-", "-"]
    return [str(s.count), *(rep.human_seconds(v) for v in (s.p50, s.p90, s.p99, s.max))]


def _overall(analysis: an.Analysis) -> str:
    rows = [[escape(t.label), *_stat_cells(analysis.overall.get(t.name))]
            for t in analysis.transitions]
    term = analysis.termination
    if term.terminating:
        rows.append(["deletion requested → sandbox not ready (termination SLI)",
                     *_stat_cells(term.stats)])
    return (f'<p class="note">Over {escape(rep.covered(analysis))}; pods: those that reached '
            "both phases.</p>" + _table(["transition", "pods", "p50", "p90", "p99", "max"],
                                        rows, 1))


def _extra(analysis: an.Analysis) -> str:
    if not analysis.extra:
        return ""
    rows = [[escape(c) for c in row] for row in rep.extra_rows(analysis)]
    return ("<h2>nodelet.dev conditions</h2><p class=\"note\">Alpha gates; true..max: "
            "scheduled → True, first starts.</p>"
            + _table(["condition", "pods", "not ready", "true", "p50", "p90", "p99", "max"],
                     rows, 1))


def _groups(analysis: an.Analysis, dimension: str) -> str:
    groups = rep.worst_first(analysis.groups[dimension], analysis.headline.name)
    rows = []
    for g in groups[:HTML_GROUP_ROWS]:
        row = [escape(g.key), str(g.pods)]
        for t in analysis.transitions:
            s = g.stats.get(t.name)
            row.append("-" if s is None else
                       f"{rep.human_seconds(s.p50)} / {rep.human_seconds(s.p99)}")
        rows.append(row)
    header = [dimension, "pods", *(escape(t.label) for t in analysis.transitions)]
    more = len(groups) - HTML_GROUP_ROWS
    tail = f'<p class="note">... and {more} more (see -o json)</p>' if more > 0 else ""
    return (f"<h2>By {dimension}</h2><p class=\"note\">p50 / p99 of each transition over "
            f"{escape(rep.covered(analysis))}; pods: all in the group; slowest "
            f"{escape(analysis.headline.label)} p99 first.</p>" + _table(header, rows, 1) + tail)


def _slowest(analysis: an.Analysis) -> str:
    slow = rep.slowest_pods(analysis, HTML_SLOWEST_PODS)
    if not slow:
        return ""
    chain = rep.chain_of(analysis)
    header = ["pod", "node", "runtimeClass", *(ai.PHASE_LABELS[p] for p in chain)]
    rows = [[escape(f"{p.namespace}/{p.name}"), escape(p.node), escape(p.runtime_class),
             *rep.phase_offsets(analysis, p)] for p, _ in slow]
    return (f"<h2>Slowest pods by {escape(analysis.headline.label)}</h2>"
            f"<p class=\"note\">Of {escape(rep.covered(analysis))}; each phase as time after "
            "scheduled.</p>" + _table(header, rows, 3))


def _recreated(analysis: an.Analysis) -> str:
    if not analysis.recreated:
        return ""
    rows = [[escape(f"{r.pod.namespace}/{r.pod.name}"), escape(r.pod.node),
             escape(r.pod.raw_times[ai.READY_TO_START] or "-"),
             f'<span class="msg">{escape(r.reason)}</span>']
            for r in analysis.recreated[:HTML_STUCK_PODS]]
    return (f"<h2>Re-created sandboxes ({len(analysis.recreated)})</h2><p class=\"note\">Their "
            "condition time is of a later sandbox: left out of the percentiles.</p>"
            + _table(["pod", "node", "sandbox ready", "why re-created"], rows, 99))


def _stuck(analysis: an.Analysis) -> str:
    stuck = analysis.stuck
    if not stuck:
        return "<h2>Stuck before their sandbox</h2><p>None.</p>"
    rows = []
    for s in stuck[:HTML_STUCK_PODS]:
        pod = s.pod
        message = pod.sandbox.message if pod.sandbox is not None else ""
        if s.blocked_on:
            message = f"blocked on {s.blocked_on}" + (f"\n{message}" if message else "")
        events = "<br>".join(
            f"<b>{escape(e.reason)}</b> &times;{e.count} "
            f"(last {escape(e.last_seen or 'unknown')}): {escape(e.last_message)}"
            for e in s.events) or "-"
        rows.append([escape(f"{pod.namespace}/{pod.name}"), escape(pod.node),
                     f'<span class="bad">{escape(rep.stuck_condition(pod))}</span>',
                     f'<span class="msg">{escape(message)}</span>', f'<span class="msg">'
                     f"{events}</span>"])
    more = len(stuck) - HTML_STUCK_PODS
    tail = f'<p class="note">... and {more} more (see -o json)</p>' if more > 0 else ""
    return (f"<h2>Stuck before their sandbox ({len(stuck)})</h2>"
            + _table(["pod", "node", "condition", "message", "events"], rows, 99) + tail)


# --- plots

# Presentation attributes, not a stylesheet's classes: the report is one standalone file.
LOOK = charts.Look(width=WIDTH, height=HEIGHT, left=LEFT, right=RIGHT, top=TOP, bottom=BOTTOM,
                   axis='stroke="#444"', bar='fill="#4a78b5"', text='font-size="11"',
                   y_axis=True, tick_marks=True)
# Ticks of a log axis: readable durations, about one per decade.
_NICE = ((0.001, "1ms"), (0.01, "10ms"), (0.1, "100ms"), (1.0, "1s"), (10.0, "10s"),
         (60.0, "1m"), (600.0, "10m"), (3600.0, "1h"), (86400.0, "1d"), (864000.0, "10d"),
         (8640000.0, "100d"))
# A log axis only pays when the samples span at least this ratio (max / smallest above 0).
LOG_SPAN = 20.0


@dataclass(frozen=True)
class Axis:
    """The x axis of both plots: linear from 0, or logarithmic when the samples span decades
    (a long tail on a linear axis puts nearly every pod into the first bar). On the log axis
    the histogram's bins grow geometrically from `low` (the smallest sample above 0; the first
    bin, from 0, also holds the zeros of whole-second stamps) to the max, and every bin's bar
    is as wide as the others."""

    hi: float
    low: float = 0.0  # > 0: logarithmic

    @property
    def log(self) -> bool:
        return self.low > 0

    @property
    def ratio(self) -> float:
        return float((self.hi / self.low) ** (1 / (BINS - 1)))

    def fraction(self, value: float) -> float:
        if not self.log:
            return min(value, self.hi) / self.hi
        if value <= self.low:
            return value / self.low / BINS
        return min(1.0, (math.log(value / self.low) / math.log(self.ratio) + 1) / BINS)

    def bounds(self) -> tuple[float, ...]:
        if not self.log:
            return tuple(self.hi * (k + 1) / BINS for k in range(BINS))
        return tuple(self.low * self.ratio ** k for k in range(BINS))

    def ticks(self) -> list[charts.Tick]:
        if not self.log:
            return charts.value_ticks(self.hi, rep.human_seconds)
        ticks = [(self.fraction(v), label) for v, label in _NICE if self.low <= v <= self.hi]
        if not ticks or ticks[0][0] > 0.06:  # "0" only where it does not overlap the next
            ticks.insert(0, (0.0, "0"))
        return ticks


def axis_for(samples: Sequence[float]) -> Axis:
    """Log axis when the sorted `samples` span LOG_SPAN or more, else linear up to the max."""
    top = samples[-1]
    low = next((v for v in samples if v > 0), 0.0)
    if low > 0 and top / low >= LOG_SPAN:
        return Axis(top, low)
    return Axis(top if top > 0 else 1.0)


def _empty(title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT // 3}">'
            f'<text x="16" y="30" font-size="13">{escape(title)}: no samples</text></svg>')


def _marks(samples: Sequence[float], axis: Axis) -> str:
    out = []
    for k, p in enumerate(an.PERCENTILES):
        v = an.percentile(samples, p)
        x = LOOK.x(axis.fraction(v))
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{LOOK.base}" stroke="#c33" '
                   f'stroke-dasharray="4 3"><title>p{p} {rep.human_seconds(v)}</title></line>'
                   f'<text x="{x + 3:.1f}" y="{TOP + 12 + 12 * k}" font-size="11" '
                   f'fill="#c33">p{p}'
                   "</text>")
    return "".join(out)


def _tip(bucket: hg.Bucket) -> str:
    return (f"{rep.human_seconds(bucket.lower)}\u2013{rep.human_seconds(bucket.upper)}: "
            f"{bucket.count:g} pods")


def _scale(axis: Axis) -> str:
    return "log scale" if axis.log else "linear scale"


def histogram_svg(samples: Sequence[float], label: str) -> str:
    """Histogram of sorted `samples` (seconds) in BINS bins on `axis_for(samples)`, with
    p50/p90/p99 marks."""
    title = f"histogram of {label} ({len(samples)} pods)"
    if not samples:
        return _empty(title)
    axis = axis_for(samples)
    bounds = axis.bounds()
    cuts = [0, *(bisect.bisect_right(samples, b) for b in bounds[:-1]), len(samples)]
    h = hg.Histogram(label, bounds, tuple(float(cuts[k + 1] - cuts[k]) for k in range(BINS)),
                     float(sum(samples)))
    return charts.histogram(h, LOOK, ticks=axis.ticks(), tip=_tip,
                            caption=f"{title}, {_scale(axis)}",
                            y_label=f"pods (peak {max(h.counts):g})",
                            overlay=_marks(samples, axis))


def cdf_svg(samples: Sequence[float], label: str) -> str:
    """Cumulative distribution of sorted `samples` (seconds), at most CDF_POINTS points."""
    title = f"CDF of {label}"
    if not samples:
        return _empty(title)
    axis = axis_for(samples)
    h = LOOK.plot_height
    n = len(samples)
    idx = sorted({round(k * (n - 1) / CDF_POINTS) for k in range(CDF_POINTS + 1)})
    points = " ".join(f"{LOOK.x(axis.fraction(samples[i])):.1f},"
                      f"{LOOK.base - h * (i + 1) / n:.1f}" for i in idx)
    line = f'<polyline points="{points}" fill="none" stroke="#4a78b5" stroke-width="2"/>'
    return charts.frame(LOOK, ticks=axis.ticks(), caption=f"{title}, {_scale(axis)}",
                        y_label="fraction of pods (0 to 1)",
                        inner=line + _marks(samples, axis))
