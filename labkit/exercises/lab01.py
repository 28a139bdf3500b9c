"""Lab 01's exercise: estimate a toyshop request from the latency table, then let the measurement judge it.

The learner predicts the cost of ``GET /orders/{id}`` from the rows of their own latency table (so many
queries, so many catalog round trips, so many bytes encoded, plus the framework's floor) *before* measuring
it. :func:`check` passes when the estimate lands within a stated factor of the measured median — napkin math
aims at the right order of magnitude, not at the last digit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from labkit.check import CheckResult, Item

__all__ = ["check", "measure_order", "DEFAULT_FACTOR", "TITLE"]

DEFAULT_FACTOR = 3.0
TITLE = "Lab 01 — napkin math for GET /orders/{id}"


def _samples(measured: Any) -> np.ndarray:
    """Finite samples in ns of a measurement: anything with ``samples_ns``, a sequence of ns, or one number."""
    samples = getattr(measured, "samples_ns", measured)
    try:
        arr = np.atleast_1d(np.asarray(samples, dtype=float))
    except (TypeError, ValueError):
        return np.empty(0)
    return arr[np.isfinite(arr)]


def _noise_hint(arr: np.ndarray) -> str:
    if arr.size < 5:
        return ""
    p10, p90 = np.percentile(arr, [10, 90])
    if p10 > 0 and p90 > 3 * p10:
        return (f" Note: this measurement is noisy (P10 {p10 / 1e6:.3g} ms, P90 {p90 / 1e6:.3g} ms), so other "
                "work on the machine may have moved the median: rerun measure_order() when it is quieter.")
    return ""


def measure_order(url: str, order_id: int = 1, rounds: int = 30) -> Any:
    """Measure ``GET /orders/{order_id}`` on a running toyshop (``url``): a :class:`labkit.latency.Samples`
    whose ``extra`` holds the Server-Timing stages and counts."""
    from labkit.latency.network import http_samples

    return http_samples(url, f"/orders/{order_id}", rounds=rounds)[0]


def check(estimate_ms: Any, measured: Any, *, factor: float = DEFAULT_FACTOR) -> CheckResult:
    """Grade an estimate of a request's latency against its measurement.

    Args:
        estimate_ms: your prediction, in milliseconds, made from the latency table before measuring.
        measured: the measurement — :func:`measure_order`'s result (or anything with ``samples_ns``, a
            sequence of per-request ns, or one median in ns).
        factor: how far off an estimate may be, either way (3 = between a third and three times).

    Returns:
        A :class:`labkit.check.CheckResult`: the estimate is a positive number; the measurement has samples;
        the estimate is within ``factor`` of the measured median (with which way it missed, and a hint).
    """
    if not (isinstance(factor, int | float) and factor > 1):
        return CheckResult(TITLE, (Item(False, f"factor must be a number above 1 (e.g. 3), got {factor!r}"),))
    if isinstance(estimate_ms, bool) or not isinstance(estimate_ms, int | float) or not math.isfinite(estimate_ms) \
            or estimate_ms <= 0:
        return CheckResult(TITLE, (Item(False, f"your estimate must be a positive number of milliseconds, got "
                                               f"{estimate_ms!r}: add up the rows your request pays for"),))
    items = [Item(True, f"an estimate was written down: {estimate_ms:.3g} ms")]
    arr = _samples(measured)
    med = float(np.median(arr)) if arr.size else None
    if med is None or med <= 0:
        items.append(Item(False, "the measurement has no samples: run measure_order(svc.url) first"))
        return CheckResult(TITLE, tuple(items))
    measured_ms = med / 1e6
    items.append(Item(True, f"measured median: {measured_ms:.3g} ms"))
    ratio = estimate_ms / measured_ms
    if 1 / factor <= ratio <= factor:
        items.append(Item(True, f"your estimate is {ratio:.2f}× the measurement: within {factor:g}× either way"))
    elif ratio > factor:
        items.append(Item(False, f"your estimate is {ratio:.2f}× the measurement (more than {factor:g}× too high): "
                                 "did you count a query or round trip the endpoint does not make, or use a "
                                 "per-item cost where the code makes one batched call?" + _noise_hint(arr)))
    else:
        items.append(Item(False, f"your estimate is {ratio:.2f}× the measurement (more than {factor:g}× too low): "
                                 "did you leave out the framework's floor (the http_health row), the catalog "
                                 "round trip, or the hand-off to the database thread?" + _noise_hint(arr)))
    return CheckResult(TITLE, tuple(items))
