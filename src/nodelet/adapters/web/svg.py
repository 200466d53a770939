"""Inline SVG charts for the web UI: a pod's start-up timeline and a latency histogram.

Plain SVG with presentation attributes and CSS classes (no inline styles, so the pages can run
under a strict Content-Security-Policy); `<title>` children give native tooltips. Every text
that comes from a pod or an event is escaped here.
"""

from __future__ import annotations

import math
from html import escape

from nodelet.adapters.web import exposition
from nodelet.model import timeline as tl

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


def compact(seconds: float) -> str:
    """`0`, `250ms`, `2.5s`, `120s`, `+Inf`: short labels for ticks and buckets."""
    if math.isinf(seconds):
        return "+Inf"
    if seconds == 0:
        return "0"
    return f"{seconds * 1000:.4g}ms" if seconds < 1 else f"{seconds:.4g}s"


def _axis(t: tl.Timeline, height: int) -> list[str]:
    span = t.span.total_seconds()
    step = _nice_step(span)
    parts = [f'<line x1="{_x(0)}" y1="{_TOP - 6}" x2="{_x(1)}" y2="{_TOP - 6}" class="axis"/>']
    for i in range(int(span / step) + 1 if span > 0 else 1):
        x = _x(i * step / span if span > 0 else 0)
        parts.append(f'<line x1="{x}" y1="{_TOP - 10}" x2="{x}" y2="{height - 4}" class="grid"/>')
        parts.append(_text(x, _TOP - 14, "+" + compact(i * step), "tick", "middle"))
    return parts


def timeline(t: tl.Timeline) -> str:
    """The Gantt-like timeline: one row per start-up condition, then the sandbox attempts."""
    rows = len(t.milestones) + 1
    height = _TOP + rows * _ROW + 8
    parts = [f'<svg id="timeline" class="timeline" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" height="{height}" role="img" '
             f'aria-label="start-up timeline of {escape(t.namespace)}/{escape(t.name)}">']
    parts += _axis(t, height)
    for i, m in enumerate(t.milestones):
        parts += _milestone_row(t, m, _TOP + i * _ROW)
    parts += _attempts_row(t, _TOP + len(t.milestones) * _ROW)
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

_H_WIDTH, _H_HEIGHT = 960, 300
_H_LEFT, _H_BOTTOM, _H_TOP = 50, 40, 16


def histogram(h: exposition.Histogram, element_id: str) -> str:
    """Bars per bucket (observations in (previous le, le]), labelled `<=le`."""
    buckets = h.buckets()
    top = max((b.count for b in buckets), default=0.0) or 1.0
    plot_h = _H_HEIGHT - _H_BOTTOM - _H_TOP
    slot = (_H_WIDTH - _H_LEFT - 10) / max(len(buckets), 1)
    parts = [f'<svg id="{escape(element_id)}" class="histogram" '
             f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_H_WIDTH} {_H_HEIGHT}" '
             f'width="{_H_WIDTH}" height="{_H_HEIGHT}" role="img" aria-label="{escape(h.name)}">',
             f'<line class="axis" x1="{_H_LEFT}" y1="{_H_TOP + plot_h}" x2="{_H_WIDTH - 10}" '
             f'y2="{_H_TOP + plot_h}"/>',
             _text(_H_LEFT - 6, _H_TOP + 4, f"{top:g}", "tick", "end"),
             _text(_H_LEFT - 6, _H_TOP + plot_h, "0", "tick", "end")]
    for i, b in enumerate(buckets):
        x = round(_H_LEFT + i * slot + 3, 1)
        height = round(plot_h * b.count / top, 1)
        y = round(_H_TOP + plot_h - height, 1)
        parts.append(f'<rect class="hbar" data-le="{compact(b.upper)}" data-count="{b.count:g}" '
                     f'x="{x}" y="{y}" width="{round(slot - 6, 1)}" height="{height}">'
                     f"<title>{compact(b.lower)} .. {compact(b.upper)}: {b.count:g}</title></rect>")
        if b.count:
            parts.append(_text(x + (slot - 6) / 2, y - 4, f"{b.count:g}", "count", "middle"))
        parts.append(_text(x + (slot - 6) / 2, _H_TOP + plot_h + 16, "≤" + compact(b.upper),
                           "tick", "middle"))
    parts.append("</svg>")
    return "\n".join(parts)
