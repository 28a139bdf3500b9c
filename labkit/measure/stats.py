"""The statistics behind every verdict: percentiles, units, bootstrap intervals, significance tests.

Kept apart from timing so it can be checked against known values with no clock at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.errors import BadInputError

__all__ = [
    "percentiles",
    "format_duration",
    "duration_unit",
    "format_bytes",
    "as_samples",
    "RatioEstimate",
    "ratio_of_medians",
    "spread",
]

_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def format_duration(ns: float, digits: int = 3) -> str:
    """Format nanoseconds in the unit that keeps the number between 1 and 1000: ``1.23 µs``."""
    if ns is None or not np.isfinite(ns):
        return "n/a"
    mag = abs(ns)
    for scale, unit in _UNITS:
        if mag >= scale or unit == "ns":
            value = ns / scale
            return f"{value:.{digits}g} {unit}" if abs(value) < 10 ** digits else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def duration_unit(ns: Any) -> tuple[float, str]:
    """The unit to show these durations (nanoseconds) in, as ``(nanoseconds per unit, name)``: the one that puts
    their median between 1 and 1000, as :func:`format_duration` does for one value — ``(1e6, "ms")`` for samples
    around 3 ms. A chart's axis is read in it."""
    v = np.abs(np.asarray(ns, dtype=float).ravel())
    v = v[np.isfinite(v) & (v > 0)]
    mag = float(np.median(v)) if v.size else 1.0
    return next(((scale, unit) for scale, unit in _UNITS if mag >= scale), (1.0, "ns"))


_BYTE_UNITS = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def format_bytes(n: float | None) -> str:
    """Format a byte count in binary units with one decimal, a whole number without it: ``1.5 MiB``,
    ``16 KiB``, ``512 B`` (``? B`` when unknown)."""
    if n is None or not np.isfinite(n):
        return "? B"
    for scale, unit in _BYTE_UNITS:
        if abs(n) >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n:.0f} B"


def as_samples(samples: Sequence[float] | np.ndarray, what: str = "samples") -> np.ndarray:
    """Validate and convert samples to a 1-D float array; raise BadInputError saying what is wrong."""
    arr = np.asarray(samples, dtype=float)
    if arr.ndim != 1:
        raise BadInputError(f"{what} must be a flat sequence of numbers, got an array of shape {arr.shape}")
    if arr.size == 0:
        raise BadInputError(f"{what} is empty: measure something first (at least 2 samples)")
    if not np.all(np.isfinite(arr)):
        raise BadInputError(f"{what} holds NaN or infinite values: drop failed measurements before summarising")
    return arr


def percentiles(samples: Sequence[float] | np.ndarray,
                qs: Sequence[float] = (50, 90, 99, 99.9)) -> dict[float, float]:
    """Percentiles of ``samples`` (linear interpolation, as numpy's default), keyed by the percentile."""
    arr = as_samples(samples)
    for q in qs:
        if not 0 <= q <= 100:
            raise BadInputError(f"percentile {q} is outside 0–100 (use 99.9, not 0.999)")
    return {q: float(v) for q, v in zip(qs, np.percentile(arr, qs), strict=True)}


def spread(samples: Sequence[float] | np.ndarray) -> float:
    """Relative spread: the interquartile range divided by the median (0.1 means ±5 % around it)."""
    arr = as_samples(samples)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    return float((q3 - q1) / med) if med else float("inf")


@dataclass(frozen=True)
class RatioEstimate:
    """The ratio of medians (candidate / baseline) with its interval (at the ``confidence`` asked) and a
    two-sided p-value."""

    ratio: float
    ci: tuple[float, float]
    p_value: float
    paired: bool


def ratio_of_medians(baseline: Sequence[float] | np.ndarray, candidate: Sequence[float] | np.ndarray, *,
                     paired: bool = False, confidence: float = 0.95, resamples: int = 2000,
                     seed: int = 0) -> RatioEstimate:
    """Estimate median(candidate) / median(baseline), a bootstrap interval for it, and a p-value.

    Paired samples (A and B measured in alternation, round by round) are resampled by round, which cancels
    slow drift in the machine's speed, and tested with the sign test (in how many rounds was B slower than A?).
    The sign test ignores *how much* slower: an interrupted sample, however long, counts as one round, which
    keeps a busy machine's outliers from deciding the verdict (Wilcoxon's ranks let them).
    Independent samples (two load tests) are resampled separately and tested with Mann–Whitney U.
    The seed makes the interval reproducible.
    """
    from scipy import stats as _sp  # here: slow to import, and most labkit commands never need it

    a = as_samples(baseline, "baseline samples")
    b = as_samples(candidate, "candidate samples")
    if a.size < 2 or b.size < 2:
        raise BadInputError("a comparison needs at least 2 samples on each side; raise rounds/repeat")
    if np.any(a <= 0) or np.any(b <= 0):
        raise BadInputError("durations must be positive to form a ratio; check the samples' units")
    if paired and a.size != b.size:
        raise BadInputError(f"paired samples must have equal length, got {a.size} and {b.size}")
    rng = np.random.default_rng(seed)
    ratio = float(np.median(b) / np.median(a))
    if paired:
        idx = rng.integers(0, a.size, size=(resamples, a.size))
        boots = np.median(b[idx], axis=1) / np.median(a[idx], axis=1)
        logr = np.log(b / a)
        up, down = int(np.sum(logr > 0)), int(np.sum(logr < 0))
        p = 1.0 if up + down == 0 else float(_sp.binomtest(up, up + down, 0.5).pvalue)
    else:
        boots = _bootstrap_medians(a, b, rng, resamples)
        p = float(_sp.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return RatioEstimate(ratio, (float(lo), float(hi)), p, paired)


def _bootstrap_medians(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Bootstrap the ratio of medians of independent samples through their order statistics.

    The median of a resample of n points is the order statistic at rank ~ Binomial(n, 1/2); drawing that
    rank directly gives the bootstrap distribution of the median without resampling n points (fast for big load tests).
    """
    sa, sb = np.sort(a), np.sort(b)
    ra = np.clip(rng.binomial(sa.size, 0.5, resamples), 0, sa.size - 1)
    rb = np.clip(rng.binomial(sb.size, 0.5, resamples), 0, sb.size - 1)
    return sb[rb] / sa[ra]
