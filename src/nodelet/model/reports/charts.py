"""Histograms as inline SVG (pure: values in, SVG text out): the one implementation behind the
web UI's node page and the `nodelet analyze -o html` report.

A histogram is one bar per bucket, each bucket in an equal slot along the x axis (the UI's
Prometheus buckets grow about exponentially, the report's are of equal width: either way a
slot is a bucket), scaled to the fullest bucket. `frame` draws the axes, ticks and labels
around any plot (the report's CDF uses it too). A `Look` says how a chart is styled: CSS
classes for the web UI, which runs under a strict Content-Security-Policy (no inline styles),
presentation attributes for the report, which is one standalone file. Every text given is
escaped here; attribute text in a `Look` is the caller's own and is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from nodelet.model.reports import histograms as hg

Tick = tuple[float, str]  # (fraction along the x axis, 0 … 1; label)


@dataclass(frozen=True)
class Look:
    """Size and margins (SVG user units) and the attributes that style each part, given as
    attribute text: `class="hbar"` for a page with a stylesheet, `fill="#4a78b5"` for a
    standalone file."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    axis: str  # the axis lines and tick marks
    bar: str  # every bar
    text: str  # tick and axis labels
    count: str | None = None  # the count over each non-empty bar; None: no counts
    gap: float = 1.0  # between neighbouring bars
    empty_bars: bool = False  # draw empty buckets too (zero high: they carry data-le/-count)
    y_axis: bool = False  # a vertical axis line at the left of the plot
    tick_marks: bool = False  # short marks under the x axis at each tick
    peak_labels: bool = False  # the fullest bucket's count and 0 left of the plot

    @property
    def plot_width(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_height(self) -> float:
        return self.height - self.top - self.bottom

    @property
    def base(self) -> float:
        """The y of the x axis."""
        return self.top + self.plot_height

    def x(self, fraction: float) -> float:
        """The x of the point `fraction` (0 … 1) along the x axis."""
        return self.left + self.plot_width * fraction


def compact(seconds: float) -> str:
    """`0`, `250ms`, `2.5s`, `120s`, `+Inf`: short labels for ticks and bucket bounds."""
    if math.isinf(seconds):
        return "+Inf"
    if seconds == 0:
        return "0"
    return f"{seconds * 1000:.4g}ms" if seconds < 1 else f"{seconds:.4g}s"


def text(x: float, y: float, content: str, attrs: str, anchor: str = "start",
         extra: str = "") -> str:
    """A `<text>` element; `content` is escaped, `attrs` and `extra` are attribute text."""
    return (f'<text x="{x:.1f}" y="{y:.1f}" {attrs} text-anchor="{anchor}"{extra}>'
            f"{escape(content)}</text>")


def bucket_ticks(h: hg.Histogram) -> list[Tick]:
    """`≤<bound>` under the middle of each bucket's bar."""
    n = len(h.bounds)
    return [((i + 0.5) / n, "≤" + compact(upper)) for i, upper in enumerate(h.bounds)]


def value_ticks(x_hi: float, label: Callable[[float], str], parts: int = 5) -> list[Tick]:
    """Ticks at 0, x_hi/parts, … x_hi, for an x axis of values from 0 to `x_hi`."""
    return [(k / parts, label(x_hi * k / parts)) for k in range(parts + 1)]


def frame(look: Look, *, ticks: Sequence[Tick], attrs: Sequence[tuple[str, str]] = (),
          caption: str = "", y_label: str = "", inner: str = "") -> str:
    """An `<svg>` with the axes, the x ticks and the labels, around `inner` (SVG text).

    `attrs` are more attributes of the `<svg>` element (values escaped here); `caption` is its
    `<title>` and the text under the x axis; `y_label` is written up the left side.
    """
    shown = "".join(f' {name}="{escape(value)}"' for name, value in attrs)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{look.width}" '
             f'height="{look.height}" viewBox="0 0 {look.width} {look.height}" role="img"'
             f"{shown}>"]
    if caption:
        parts.append(f"<title>{escape(caption)}</title>")
    parts.append(_line(look.axis, look.left, look.base, look.x(1), look.base))
    if look.y_axis:
        parts.append(_line(look.axis, look.left, look.top, look.left, look.base))
    for fraction, label in ticks:
        x = look.x(fraction)
        if look.tick_marks:
            parts.append(_line(look.axis, x, look.base, x, look.base + 4))
        parts.append(text(x, look.base + 17, label, look.text, "middle"))
    if y_label:
        middle = look.top + look.plot_height / 2
        parts.append(text(12, middle, y_label, look.text, "middle",
                          f' transform="rotate(-90 12 {middle:.1f})"'))
    if caption:
        parts.append(text(look.x(0.5), look.height - 4, caption, look.text, "middle"))
    return "\n".join([*parts, inner, "</svg>"])


def histogram(h: hg.Histogram, look: Look, *, ticks: Sequence[Tick],
              tip: Callable[[hg.Bucket], str], attrs: Sequence[tuple[str, str]] = (),
              caption: str = "", y_label: str = "", overlay: str = "") -> str:
    """`h` as bars in a `frame`: each bar carries `data-le` (its bound, `compact`) and
    `data-count`, and `tip(bucket)` as its tooltip; `overlay` (SVG text) is drawn last."""
    buckets = h.buckets()
    peak = max((b.count for b in buckets), default=0.0) or 1.0
    parts = []
    if look.peak_labels:
        parts += [text(look.left - 6, look.top + 4, f"{peak:g}", look.text, "end"),
                  text(look.left - 6, look.base, "0", look.text, "end")]
    slot = look.plot_width / max(len(buckets), 1)
    width = max(slot - look.gap, 1.0)
    for i, b in enumerate(buckets):
        if b.count or look.empty_bars:
            parts += _bar(look, b, look.left + i * slot + (slot - width) / 2, width, peak, tip)
    return frame(look, ticks=ticks, attrs=attrs, caption=caption, y_label=y_label,
                 inner="\n".join([*parts, overlay]))


def _bar(look: Look, b: hg.Bucket, x: float, width: float, peak: float,
         tip: Callable[[hg.Bucket], str]) -> list[str]:
    height = look.plot_height * b.count / peak
    y = look.base - height
    parts = [f'<rect {look.bar} data-le="{compact(b.upper)}" data-count="{b.count:g}" '
             f'x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}">'
             f"<title>{escape(tip(b))}</title></rect>"]
    if look.count is not None and b.count:
        parts.append(text(x + width / 2, y - 4, f"{b.count:g}", look.count, "middle"))
    return parts


def _line(attrs: str, x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line {attrs} x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"/>'
