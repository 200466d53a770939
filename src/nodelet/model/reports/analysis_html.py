"""`nodelet analyze -o html`: a standalone report with inline SVG plots (pure: values in, HTML out).

One file, no scripts, no external assets (styles inline, plots as SVG): a histogram and a CDF of
the headline latency (sandbox-ready, or scheduled → ready in fallback) with p50/p90/p99 marks,
the percentile tables (overall, by namespace, node and runtimeClass), the slowest pods with their
phases and the stuck pods with their condition message and events. Every input string is
escaped. The plots are drawn by `charts`, as the web UI's, styled by presentation attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
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
        _summary(analysis, events_source),
        f"<h2>{escape(head.label)} latency</h2>",
        '<div class="plots">', histogram_svg(analysis.headline_samples, head.label),
        cdf_svg(analysis.headline_samples, head.label), "</div>",
        "<h2>Percentiles</h2>", _overall(analysis),
        *(_groups(analysis, d) for d in an.DIMENSIONS),
        _slowest(analysis), _stuck(analysis),
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


def _stat_cells(s: an.Stats | None) -> list[str]:
    if s is None:
        return ["0", "-", "-", "-", "-"]
    return [str(s.count), *(rep.human_seconds(v) for v in (s.p50, s.p90, s.p99, s.max))]


def _overall(analysis: an.Analysis) -> str:
    rows = [[escape(t.label), *_stat_cells(analysis.overall.get(t.name))]
            for t in analysis.transitions]
    return _table(["transition", "pods", "p50", "p90", "p99", "max"], rows, 1)


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
    return (f"<h2>By {dimension}</h2><p class=\"note\">p50 / p99 of each transition; slowest "
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
            "<p class=\"note\">Each phase as time after scheduled.</p>" + _table(header, rows, 3))


def _stuck(analysis: an.Analysis) -> str:
    stuck = analysis.stuck
    if not stuck:
        return "<h2>Stuck before their sandbox</h2><p>None.</p>"
    rows = []
    for s in stuck[:HTML_STUCK_PODS]:
        pod = s.pod
        message = pod.sandbox.message if pod.sandbox is not None else ""
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


def _x_range(samples: Sequence[float]) -> float:
    """Upper end of the x axis: the max, unless a long tail would squash the body (then 1.5 x
    p99, and the histogram's last bar collects the overflow)."""
    top, p99 = samples[-1], an.percentile(samples, 99)
    hi = top if top <= 2 * p99 or p99 == 0 else 1.5 * p99
    return hi if hi > 0 else 1.0


def _empty(title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT // 3}">'
            f'<text x="16" y="30" font-size="13">{escape(title)}: no samples</text></svg>')


def _marks(samples: Sequence[float], x_hi: float) -> str:
    out = []
    for p in an.PERCENTILES:
        v = an.percentile(samples, p)
        x = LOOK.x(min(v, x_hi) / x_hi)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{LOOK.base}" stroke="#c33" '
                   f'stroke-dasharray="4 3"><title>p{p} {rep.human_seconds(v)}</title></line>'
                   f'<text x="{x + 3:.1f}" y="{TOP + 12}" font-size="11" fill="#c33">p{p}'
                   "</text>")
    return "".join(out)


def _ticks(x_hi: float) -> list[charts.Tick]:
    return charts.value_ticks(x_hi, rep.human_seconds)


def _tip(bucket: hg.Bucket) -> str:
    return (f"{rep.human_seconds(bucket.lower)}\u2013{rep.human_seconds(bucket.upper)}: "
            f"{bucket.count:g} pods")


def histogram_svg(samples: Sequence[float], label: str) -> str:
    """Histogram of sorted `samples` (seconds) in BINS equal bins, with p50/p90/p99 marks."""
    title = f"histogram of {label} ({len(samples)} pods)"
    if not samples:
        return _empty(title)
    x_hi = _x_range(samples)
    h = hg.from_samples(label, samples, x_hi, BINS)
    return charts.histogram(h, LOOK, ticks=_ticks(x_hi), tip=_tip, caption=title,
                            y_label=f"pods (peak {max(h.counts):g})",
                            overlay=_marks(samples, x_hi))


def cdf_svg(samples: Sequence[float], label: str) -> str:
    """Cumulative distribution of sorted `samples` (seconds), at most CDF_POINTS points."""
    title = f"CDF of {label}"
    if not samples:
        return _empty(title)
    x_hi = _x_range(samples)
    h = LOOK.plot_height
    n = len(samples)
    idx = sorted({round(k * (n - 1) / CDF_POINTS) for k in range(CDF_POINTS + 1)})
    points = " ".join(f"{LOOK.x(min(samples[i], x_hi) / x_hi):.1f},"
                      f"{LOOK.base - h * (i + 1) / n:.1f}" for i in idx)
    line = f'<polyline points="{points}" fill="none" stroke="#4a78b5" stroke-width="2"/>'
    return charts.frame(LOOK, ticks=_ticks(x_hi), caption=title,
                        y_label="fraction of pods (0 to 1)", inner=line + _marks(samples, x_hi))
