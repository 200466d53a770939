"""Histogram values: buckets from Prometheus' cumulative counts or from samples, mean, quantiles."""

from __future__ import annotations

import math

import pytest

from nodelet.model.reports import histograms as hg

INF = math.inf
# lat_seconds as /metrics exposes it: le=0.1: 2, 0.5: 6, 1.0: 8, +Inf: 10; sum 9.5.
LATENCY = hg.from_cumulative("lat_seconds", [(0.1, 2.0), (0.5, 6.0), (1.0, 8.0), (INF, 10.0)], 9.5)


@pytest.mark.parametrize(
    ("cumulative", "buckets"),
    [
        pytest.param([(0.1, 2.0), (0.5, 6.0), (1.0, 8.0), (INF, 10.0)],
                     [(0.0, 0.1, 2.0), (0.1, 0.5, 4.0), (0.5, 1.0, 2.0), (1.0, INF, 2.0)],
                     id="one series"),
        # run_seconds of two runtime handlers: a has 1 <= 1.0 of 1, b 2 <= 1.0 of 3.
        pytest.param([(1.0, 1.0), (INF, 1.0), (1.0, 2.0), (INF, 3.0)],
                     [(0.0, 1.0, 3.0), (1.0, INF, 1.0)], id="series added up"),
        pytest.param([(INF, 4.0), (0.25, 1.0)], [(0.0, 0.25, 1.0), (0.25, INF, 3.0)],
                     id="any order"),
        pytest.param([], [], id="no buckets"),
    ],
)
def test_buckets_from_cumulative_counts(
    cumulative: list[tuple[float, float]], buckets: list[tuple[float, float, float]]
) -> None:
    h = hg.from_cumulative("h", cumulative)
    assert [(b.lower, b.upper, b.count) for b in h.buckets()] == buckets
    assert h.count == sum(b[2] for b in buckets)


def test_count_total_and_mean() -> None:
    assert (LATENCY.count, LATENCY.total, LATENCY.mean) == (10.0, 9.5, 0.95)
    assert hg.from_cumulative("empty", [(1.0, 0.0), (INF, 0.0)]).mean is None


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.1, 0.05),  # rank 1 of 2 in (0, 0.1]
        (0.2, 0.1),
        (0.5, 0.1 + 0.4 * 3 / 4),  # rank 5: the 3rd of 4 in (0.1, 0.5]
        (0.8, 1.0),
        (0.99, 1.0),  # in the +Inf bucket: the highest finite bound
    ],
)
def test_quantiles_are_estimated_as_promql_does(q: float, expected: float) -> None:
    assert LATENCY.quantile(q) == pytest.approx(expected)


def test_no_quantile_without_observations() -> None:
    assert hg.from_cumulative("empty", [(1.0, 0.0), (INF, 0.0)]).quantile(0.5) is None


@pytest.mark.parametrize(
    ("samples", "x_hi", "bins", "counts", "bounds"),
    [
        pytest.param([0.1, 0.2, 0.2, 1.0, 1.9, 50.0], 2.0, 4, [3, 1, 0, 2],
                     (0.5, 1.0, 1.5, 2.0), id="overflow in the last"),
        pytest.param([0.5, 1.0], 1.0, 2, [1, 1], (0.5, 1.0), id="bounds are inclusive"),
        pytest.param([], 1.0, 3, [0, 0, 0], (1 / 3, 2 / 3, 1.0), id="no samples"),
    ],
)
def test_bins_from_samples(samples: list[float], x_hi: float, bins: int, counts: list[int],
                           bounds: tuple[float, ...]) -> None:
    h = hg.from_samples("x", sorted(samples), x_hi, bins)
    assert list(h.counts) == counts and h.count == len(samples)
    assert h.bounds == pytest.approx(bounds)
    assert h.total == pytest.approx(sum(samples))


def test_one_count_per_bound() -> None:
    with pytest.raises(ValueError, match="2 bounds but 1 counts"):
        hg.Histogram("h", (1.0, INF), (1.0,))
