"""Inline SVG charts for the web UI: a pod's start-up timeline and a latency histogram.

Plain SVG with presentation attributes and CSS classes (no inline styles, so the pages can run
under a strict Content-Security-Policy); `<title>` children give native tooltips. Every text
that comes from a pod or an event is escaped here. Histograms are drawn by
`model.reports.charts`, the same code as `nodelet analyze -o html`'s, in the page's classes.
"""

from __future__ import annotations

import math
from html import escape

from nodelet.model.reports import charts
from nodelet.model.reports import histograms as hg
from nodelet.model.reports import timeline as tl

_WIDTH = 960
_LABEL = 220  # the condition names' column
_RIGHT = 150  # room for the duration text after the longest bar
_TOP = 34
_ROW = 34
_BAR = 18
_PLOT = _WIDTH - _LABEL - _RIGHT


def _x(fraction: float) -> float:
    return round(_LABEL + fraction * _PLOT, 1)


def _text(x: float, y: float, text: str, cls: str, anchor: str = "start") -> str:
    return (f'<text x="{x}" y="{y}" class="{cls}" text-anchor="{anchor}">'
            f"{escape(text)}</text>")


def _nice_step(span: float, ticks: int = 8) -> float:
    """A 1-2-5 step that cuts `span` seconds into at most `ticks` parts."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1.0, 2.0, 5.0, 10.0) if m * magnitude >= raw)


def _axis(t: tl.Timeline, height: int) -> list[str]:
    span = t.span.total_seconds()
    step = _nice_step(span)
    parts = [f'<line x1="{_x(0)}" y1="{_TOP - 6}" x2="{_x(1)}" y2="{_TOP - 6}" class="axis"/>']
    for i in range(int(span / step) + 1 if span > 0 else 1):
        x = _x(i * step / span if span > 0 else 0)
        parts.append(f'<line x1="{x}" y1="{_TOP - 10}" x2="{x}" y2="{height - 4}" class="grid"/>')
        parts.append(_text(x, _TOP - 14, "+" + charts.compact(i * step), "tick", "middle"))
    return parts


def timeline(t: tl.Timeline) -> str:
    """The Gantt-like timeline: one row per start-up condition, then the sandbox attempts."""
    rows = len(t.milestones) + 1 + (t.termination is not None)
    height = _TOP + rows * _ROW + 8
    parts = [f'<svg id="timeline" class="timeline" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" height="{height}" role="img" '
             f'aria-label="start-up timeline of {escape(t.namespace)}/{escape(t.name)}">']
    parts += _axis(t, height)
    for i, m in enumerate(t.milestones):
        parts += _milestone_row(t, m, _TOP + i * _ROW)
    parts += _termination_row(t, _TOP + len(t.milestones) * _ROW)
    parts += _attempts_row(t, _TOP + (rows - 1) * _ROW)
    parts.append("</svg>")
    return "\n".join(parts)


def _milestone_row(t: tl.Timeline, m: tl.Milestone, y: int) -> list[str]:
    state = "reached" if m.reached else ("absent" if not m.status else "pending")
    parts = [f'<g class="row {state}" data-condition="{escape(m.type)}" '
             f'data-status="{escape(m.status)}">',
             _text(_LABEL - 10, y + _BAR - 4, m.type, "label", "end")]
    if m.status and t.start is not None:
        begin, end = tl.bar(t, m)
        x0, x1 = _x(begin), _x(end)
        tip = _tooltip(m)
        parts.append(f'<rect class="bar {state}" x="{x0}" y="{y + 2}" '
                     f'width="{max(round(x1 - x0, 1), 2)}" height="{_BAR}" rx="3">'
                     f"<title>{escape(tip)}</title></rect>")
        if m.reached:
            parts.append(f'<line class="mark" x1="{x1}" y1="{y - 1}" x2="{x1}" '
                         f'y2="{y + _BAR + 5}"/>')
        parts.append(_text(max(x1, x0 + 2) + 6, y + _BAR - 3, _bar_label(t, m), "duration"))
    else:
        parts.append(_text(_x(0), y + _BAR - 3, "not reported", "duration muted"))
    parts.append("</g>")
    return parts


def _bar_label(t: tl.Timeline, m: tl.Milestone) -> str:
    if m.reached:
        step = f" (step {tl.format_duration(m.step)})" if m.step else ""  # 0: nothing to add
        return f"+{tl.format_duration(m.since_start)}{step}"
    waited = t.end - m.last_transition if t.end and m.last_transition else None
    return f"{m.status} for {tl.format_duration(waited)}"


def _tooltip(m: tl.Milestone) -> str:
    text = f"{m.type}={m.status} since {tl.format_time(m.last_transition)}"
    if m.reason:
        text += f" ({m.reason})"
    return text + (f": {m.message}" if m.message else "")


def _termination_row(t: tl.Timeline, y: int) -> list[str]:
    """The termination step (a pod being deleted): deletion request → condition False."""
    if t.termination is None:
        return []
    state = "reached" if t.termination.stopped is not None else "pending"
    x0, x1 = (_x(v) for v in tl.termination_bar(t))
    label = tl.termination_label(t)
    tip = f"deletion requested {tl.format_time(t.termination.requested)}: {label}"
    return [f'<g class="row termination {state}" data-step="termination">',
            _text(_LABEL - 10, y + _BAR - 4, "Termination", "label", "end"),
            f'<rect class="bar {state}" x="{x0}" y="{y + 2}" '
            f'width="{max(round(x1 - x0, 1), 2)}" height="{_BAR}" rx="3">'
            f"<title>{escape(tip)}</title></rect>",
            _text(max(x1, x0 + 2) + 6, y + _BAR - 3, label, "duration"), "</g>"]


def _attempts_row(t: tl.Timeline, y: int) -> list[str]:
    label = f"Sandbox attempts ({t.failed_attempts} failed)"
    parts = ['<g class="row attempts">', _text(_LABEL - 10, y + _BAR - 4, label, "label", "end"),
             f'<line class="lane" x1="{_x(0)}" y1="{y + 11}" x2="{_x(1)}" y2="{y + 11}"/>']
    for a in t.attempts:
        x0, x1 = _x(tl.offset(t, a.first)), _x(tl.offset(t, a.last))
        tip = f"{a.reason} x{a.count} {tl.format_time(a.first)} .. {tl.format_time(a.last)}: " \
              f"{a.message}"
        parts.append(f'<g class="attempt {a.kind}" data-count="{a.count}">'
                     f"<title>{escape(tip)}</title>")
        if a.count > 1:
            parts.append(f'<line class="span" x1="{x0}" y1="{y + 11}" x2="{x1}" y2="{y + 11}"/>')
        for x in {x0, x1}:
            parts.append(f'<circle cx="{x}" cy="{y + 11}" r="6"/>')
        parts.append("</g>")
    if not t.attempts:
        parts.append(_text(_x(0) + 6, y + _BAR - 3, "no failed or replaced sandbox",
                           "duration muted"))
    parts.append("</g>")
    return parts


# --- histogram

# Styled by ui.css, as the timeline: the page's Content-Security-Policy allows no inline styles.
_HISTOGRAM = charts.Look(width=960, height=300, left=50, right=10, top=16, bottom=40,
                         axis='class="axis"', bar='class="hbar"', text='class="tick"',
                         count='class="count"', gap=6, empty_bars=True, peak_labels=True)


def histogram(h: hg.Histogram, element_id: str) -> str:
    """Bars per bucket (observations in (previous le, le]), labelled `≤le`."""
    return charts.histogram(h, _HISTOGRAM, ticks=charts.bucket_ticks(h), tip=_bucket_tip,
                            attrs=(("id", element_id), ("class", "histogram"),
                                   ("aria-label", h.name)))


def _bucket_tip(b: hg.Bucket) -> str:
    return f"{charts.compact(b.lower)} .. {charts.compact(b.upper)}: {b.count:g}"
