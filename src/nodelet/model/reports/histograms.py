"""Histograms as values: bucket bounds and counts, from a Prometheus histogram or from samples
(pure, no I/O).

`Histogram` is what the charts draw (`histogram_svg`) and what the web UI summarises (mean,
estimated quantiles). The agent's `services.serving.metrics.Metrics` turns its Prometheus histograms
into these (`from_cumulative`), with the sandbox failure counters, as one `SandboxMetrics`;
`nodelet analyze` bins its latency samples (`from_samples`).

Raises ValueError only for a histogram built with as many counts as bounds, which is a bug of
the caller.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    """Observations in (lower, upper] (upper is `inf` for an open last bucket)."""

    lower: float
    upper: float
    count: float


@dataclass(frozen=True)
class Histogram:
    """Observations counted in buckets: bucket i holds those in (bounds[i-1], bounds[i]], the
    first from 0. The last bound is `inf` when the last bucket is open (Prometheus' `+Inf`).
    `total` is the sum of the observations (Prometheus' `_sum`; 0 when not known)."""

    name: str
    bounds: tuple[float, ...]  # ascending
    counts: tuple[float, ...]  # one per bound
    total: float = 0.0

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.counts):
            raise ValueError(f"histogram {self.name}: {len(self.bounds)} bounds but "
                             f"{len(self.counts)} counts; give one count per bucket")

    @property
    def count(self) -> float:
        return sum(self.counts)

    def buckets(self) -> list[Bucket]:
        lowers = (0.0, *self.bounds[:-1]) if self.bounds else ()
        return [Bucket(lower, upper, count)
                for lower, upper, count in zip(lowers, self.bounds, self.counts, strict=True)]

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """Estimated as PromQL's histogram_quantile does: linear within the bucket; a quantile
        in the open last bucket is the highest finite bound."""
        if not self.count:
            return None
        rank = q * self.count
        for bucket in self.buckets():
            if bucket.count and rank <= bucket.count:
                if math.isinf(bucket.upper):
                    return bucket.lower
                return bucket.lower + (bucket.upper - bucket.lower) * rank / bucket.count
            rank -= bucket.count
        return None


def from_cumulative(name: str, cumulative: Iterable[tuple[float, float]],
                    total: float = 0.0) -> Histogram:
    """A histogram from Prometheus' cumulative buckets: (le, observations <= le) pairs, in any
    order; pairs with the same `le` (series that differ in other labels) are added up."""
    summed: dict[float, float] = {}
    for le, below in cumulative:
        summed[le] = summed.get(le, 0.0) + below
    bounds = tuple(sorted(summed))
    counts, below = [], 0.0
    for le in bounds:
        counts.append(summed[le] - below)
        below = summed[le]
    return Histogram(name, bounds, tuple(counts), total)


def from_samples(name: str, samples: Sequence[float], x_hi: float, bins: int) -> Histogram:
    """`bins` buckets of width x_hi/bins over sorted `samples`. The last bucket also takes the
    samples above `x_hi` (its bound stays `x_hi`, so a chart's axis ends there)."""
    bounds = tuple(x_hi * (k + 1) / bins for k in range(bins))
    cuts = [0, *(bisect.bisect_right(samples, e) for e in bounds[:-1]), len(samples)]
    counts = tuple(float(cuts[k + 1] - cuts[k]) for k in range(bins))
    return Histogram(name, bounds, counts, float(sum(samples)))


@dataclass(frozen=True)
class SandboxMetrics:
    """What the web UI's node page shows of the agent's metrics."""

    ready_latency: Histogram  # PodScheduled → first PodReadyToStartContainers=True
    run_duration: Histogram  # RunPodSandbox, all runtime handlers added up
    failures: tuple[tuple[str, float], ...]  # sandbox failures by error class, sorted by class
