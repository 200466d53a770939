"""Histograms and counters read back from the Prometheus text exposition that `/metrics` serves.

The node page shows what `/metrics` shows, so it reads the same text (no second path into the
registry). Series of one metric that differ only in other labels are summed. Raises no
exceptions of its own; malformed text yields no series.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from prometheus_client import parser, samples


@dataclass(frozen=True)
class Bucket:
    """Observations in (lower, upper] (upper is `inf` for the last bucket)."""

    lower: float
    upper: float
    count: float


@dataclass(frozen=True)
class Histogram:
    name: str
    cumulative: tuple[tuple[float, float], ...]  # (le, observations <= le), ascending, +Inf last
    count: float
    total: float

    def buckets(self) -> list[Bucket]:
        """Per-bucket (non-cumulative) counts."""
        out, lower, below = [], 0.0, 0.0
        for upper, cumulative in self.cumulative:
            out.append(Bucket(lower, upper, cumulative - below))
            lower, below = upper, cumulative
        return out

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """Estimated as PromQL's histogram_quantile does: linear within the bucket; a quantile
        in the +Inf bucket is the highest finite bound."""
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


def _samples(text: str) -> list[samples.Sample]:
    try:
        return [s for family in parser.text_string_to_metric_families(text)
                for s in family.samples]
    except ValueError:
        return []


def histogram(text: str, name: str) -> Histogram | None:
    """The histogram `name` (summed over its other labels), or None when not exposed."""
    cumulative: dict[float, float] = defaultdict(float)
    count = total = 0.0
    found = False
    for s in _samples(text):
        if s.name == f"{name}_bucket" and "le" in s.labels:
            cumulative[float(s.labels["le"])] += s.value
            found = True
        elif s.name == f"{name}_count":
            count += s.value
        elif s.name == f"{name}_sum":
            total += s.value
    if not found:
        return None
    return Histogram(name, tuple(sorted(cumulative.items())), count, total)


def counter_by_label(text: str, name: str, label: str) -> dict[str, float]:
    """The counter `name` per value of `label` (summed over other labels)."""
    out: dict[str, float] = defaultdict(float)
    for s in _samples(text):
        if s.name == name and label in s.labels:
            out[s.labels[label]] += s.value
    return dict(sorted(out.items()))
