"""The one SVG histogram: bars per bucket in equal slots, styled by a `Look` (CSS classes for the
web UI, presentation attributes for the analyze report); labels, ticks and escaping."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from nodelet.model.reports import charts
from nodelet.model.reports import histograms as hg

SVG = "{http://www.w3.org/2000/svg}"
PAGE = charts.Look(width=960, height=300, left=50, right=10, top=16, bottom=40,
                   axis='class="axis"', bar='class="hbar"', text='class="tick"',
                   count='class="count"', gap=6, empty_bars=True, peak_labels=True)
REPORT = charts.Look(width=640, height=260, left=56, right=28, top=16, bottom=40,
                     axis='stroke="#444"', bar='fill="#4a78b5"', text='font-size="11"',
                     y_axis=True, tick_marks=True)
H = hg.Histogram("lat", (0.1, 0.5, 1.0, math.inf), (2.0, 0.0, 4.0, 1.0), 3.0)


def tip(b: hg.Bucket) -> str:
    return f"{b.lower:g}..{b.upper:g}: {b.count:g}"


def draw(look: charts.Look, h: hg.Histogram = H, **kwargs: str) -> ET.Element:
    return ET.fromstring(charts.histogram(h, look, ticks=charts.bucket_ticks(h), tip=tip,
                                          **kwargs))


def bars(svg: ET.Element) -> list[ET.Element]:
    return svg.findall(f"{SVG}rect")


def texts(svg: ET.Element, **attrs: str) -> list[str]:
    return [t.text or "" for t in svg.findall(f"{SVG}text")
            if all(t.get(k) == v for k, v in attrs.items())]


@pytest.mark.parametrize(
    ("seconds", "label"),
    [(0.0, "0"), (0.005, "5ms"), (0.25, "250ms"), (1.0, "1s"), (2.5, "2.5s"), (120.0, "120s"),
     (float("inf"), "+Inf")],
)
def test_compact_labels(seconds: float, label: str) -> None:
    assert charts.compact(seconds) == label


@pytest.mark.parametrize(
    ("look", "drawn", "counts_shown"),
    [
        pytest.param(PAGE, ["100ms", "500ms", "1s", "+Inf"], ["2", "4", "1"], id="page"),
        pytest.param(REPORT, ["100ms", "1s", "+Inf"], [], id="report"),
    ],
)
def test_bars_per_bucket(look: charts.Look, drawn: list[str], counts_shown: list[str]) -> None:
    svg = draw(look)
    assert [b.get("data-le") for b in bars(svg)] == drawn
    assert texts(svg, **{"class": "count"}) == counts_shown
    heights = {b.get("data-le"): float(b.get("height", "")) for b in bars(svg)}
    assert heights["1s"] == look.plot_height  # the fullest bucket fills the plot
    assert heights["100ms"] == pytest.approx(look.plot_height / 2)
    assert all(b.get("width") == bars(svg)[0].get("width") for b in bars(svg))


def test_bars_sit_in_equal_slots_with_the_gap_between() -> None:
    xs = [float(b.get("x", "")) for b in bars(draw(PAGE))]
    slot = PAGE.plot_width / 4
    assert xs == pytest.approx([PAGE.left + i * slot + 3 for i in range(4)])
    assert float(bars(draw(PAGE))[0].get("width", "")) == pytest.approx(slot - 6)


@pytest.mark.parametrize(
    ("look", "lines", "peak"),
    [pytest.param(PAGE, 1, ["4", "0"], id="page: x axis, peak labels"),
     pytest.param(REPORT, 2 + 4, [], id="report: both axes, a mark per tick")],
)
def test_axes_and_labels(look: charts.Look, lines: int, peak: list[str]) -> None:
    svg = draw(look)
    assert len(svg.findall(f"{SVG}line")) == lines
    assert texts(svg, **{"text-anchor": "end"}) == peak
    assert texts(svg, **{"text-anchor": "middle"})[:4] == ["≤100ms", "≤500ms", "≤1s", "≤+Inf"]


def test_empty_histogram_draws_flat_bars() -> None:
    empty = hg.Histogram("none", (1.0, math.inf), (0.0, 0.0))
    svg = draw(PAGE, empty)
    assert [b.get("height") for b in bars(svg)] == ["0.0", "0.0"]
    assert texts(svg, **{"text-anchor": "end"}) == ["1", "0"]
    assert bars(draw(REPORT, empty)) == []


def test_caption_y_label_and_attributes() -> None:
    svg = draw(REPORT, caption="histogram of x", y_label="pods (peak 4)")
    assert svg.findtext(f"{SVG}title") == "histogram of x"
    assert texts(svg)[-2:] == ["pods (peak 4)", "histogram of x"]
    assert "rotate(-90" in svg.findall(f"{SVG}text")[-2].get("transform", "")
    page = ET.fromstring(charts.histogram(H, PAGE, ticks=[], tip=tip,
                                          attrs=(("id", "h1"), ("class", "histogram"))))
    assert (page.get("id"), page.get("class")) == ("h1", "histogram")


def test_text_is_escaped() -> None:
    evil = '<script>"x"</script>&'
    html = charts.histogram(H, PAGE, ticks=[(0.5, evil)], tip=lambda b: evil,
                            attrs=(("aria-label", evil),), caption=evil, y_label=evil)
    assert "<script>" not in html
    svg = ET.fromstring(html)  # still well-formed
    assert svg.get("aria-label") == evil and svg.findtext(f"{SVG}title") == evil


@pytest.mark.parametrize(
    ("x_hi", "parts", "ticks"),
    [(2.0, 4, [(0.0, "0"), (0.25, "500ms"), (0.5, "1s"), (0.75, "1.5s"), (1.0, "2s")]),
     (10.0, 1, [(0.0, "0"), (1.0, "10s")])],
)
def test_value_ticks(x_hi: float, parts: int, ticks: list[tuple[float, str]]) -> None:
    assert charts.value_ticks(x_hi, charts.compact, parts) == ticks


def test_bucket_ticks_sit_under_the_middle_of_each_bar() -> None:
    assert charts.bucket_ticks(H) == [(0.125, "≤100ms"), (0.375, "≤500ms"), (0.625, "≤1s"),
                                      (0.875, "≤+Inf")]
