"""Microbenchmarks that keep warm-up apart, calibrate their loops, and keep every sample.

    >>> r = bench(sorted, list(range(1000)))
    >>> print(r)                       # "sorted: median <m>, IQR <q1>–<q3>, 20 samples × <n> loops"
    >>> r.samples_ns                   # the raw per-call time of every sample

One sample times a loop of ``loops`` calls, long enough (``min_sample_time``) that the clock's own
resolution and the loop's overhead vanish; the per-call time of a sample is its elapsed time / loops.
The default, 1 ms, is a thousand times the clock's resolution yet short enough that on a busy machine
most samples fit between two interruptions by the scheduler, so the median lands on clean samples.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labkit.clock import Clock
from labkit.inputs import function, integer, number
from labkit.measure.machine import fingerprint
from labkit.measure.stats import format_duration, percentiles, spread
from labkit.results import Saveable, TextRepr

__all__ = ["BenchResult", "bench", "Clock"]

WIDE_SPREAD = 0.10  # IQR / median above this earns a warning
MAX_LOOPS = 10**9


@dataclass(frozen=True)
class BenchResult(TextRepr, Saveable):
    """A microbenchmark's outcome: per-call times of every counted sample, and of the warm-up apart.

    Attributes:
        name: what was measured.
        samples_ns: per-call time (ns) of each counted sample.
        loops: calls per sample.
        warmup_ns: per-call time of each warm-up sample (not used in any summary).
        warnings: what looked wrong, each with what to do about it.
        fingerprint: the machine and its load when measured.
    """

    KIND = "bench"

    name: str
    samples_ns: tuple[float, ...]
    loops: int
    warmup_ns: tuple[float, ...] = ()
    warnings: tuple[str, ...] = ()
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def median_ns(self) -> float:
        """Median per-call time (ns): the summary labkit reports, robust to the odd slow sample."""
        return float(np.median(self.samples_ns))

    @property
    def mean_ns(self) -> float:
        """Mean per-call time (ns)."""
        return float(np.mean(self.samples_ns))

    @property
    def spread(self) -> float:
        """Interquartile range / median: 0.02 is steady, above 0.10 is noisy."""
        return spread(self.samples_ns)

    def percentiles(self, qs: tuple[float, ...] = (50, 90, 99)) -> dict[float, float]:
        """Percentiles of the per-call samples (ns)."""
        return percentiles(self.samples_ns, qs)

    def to_frame(self) -> Any:
        """One row per sample: name, phase (warmup/measured), sample index, per-call ns, loops."""
        import pandas as pd

        rows = [(self.name, "warmup", i, v, self.loops) for i, v in enumerate(self.warmup_ns)]
        rows += [(self.name, "measured", i, v, self.loops) for i, v in enumerate(self.samples_ns)]
        return pd.DataFrame(rows, columns=["name", "phase", "sample", "ns", "loops"])

    def __str__(self) -> str:
        q1, q3 = np.percentile(self.samples_ns, [25, 75])
        text = (f"{self.name}: median {format_duration(self.median_ns)}, IQR {format_duration(q1)}–"
                f"{format_duration(q3)}, {len(self.samples_ns)} samples × {self.loops:,} loops")
        return "\n".join([text, *(f"  warning: {w}" for w in self.warnings)])


def time_loop(fn: Callable[..., Any], args: tuple[Any, ...], loops: int, clock: Clock) -> int:
    """Elapsed clock ticks (ns) for ``loops`` calls of ``fn(*args)``."""
    rng = range(loops)
    t0 = clock()
    for _ in rng:
        fn(*args)
    return clock() - t0


def calibrate(fn: Callable[..., Any], args: tuple[Any, ...], min_sample_ns: float, clock: Clock) -> tuple[int, list[float]]:
    """Find a loop count whose sample lasts at least ``min_sample_ns``; return it and the per-call times seen."""
    loops, seen = 1, []
    while True:
        elapsed = time_loop(fn, args, loops, clock)
        seen.append(elapsed / loops)
        if elapsed >= min_sample_ns or loops >= MAX_LOOPS:
            return loops, seen
        factor = 10 if elapsed <= 0 else min(10.0, max(2.0, 1.2 * min_sample_ns / elapsed))
        loops = min(MAX_LOOPS, int(math.ceil(loops * factor)))


def diagnose(samples_ns: list[float] | tuple[float, ...], loops: int, warmup_ns: list[float] | tuple[float, ...],
             clock_resolution_ns: float, load: float | None, cores: int, *, more: str = "repeat=",
             loops_hint: str = "loops= or min_sample_time=", collections: int = 0,
             interleaved: bool = False) -> tuple[str, ...]:
    """The warnings a result deserves, each saying what to do.

    ``more`` and ``loops_hint`` name the caller's parameters that take more samples and lengthen a sample;
    ``collections`` is how many samples a garbage collection landed in (then the collector, not other
    programs, is the first suspect for a wide spread).
    """
    warnings = []
    s = spread(samples_ns)
    if s > WIDE_SPREAD and collections:
        warnings.append(
            f"the samples spread widely (IQR is {s:.0%} of the median), and the garbage collector ran during "
            f"{collections} of {len(samples_ns)} of them: see the collector's warning (choose gc=) before blaming "
            f"other programs; a larger {more} helps only once the cause is gone")
    elif s > WIDE_SPREAD:
        warnings.append(
            f"the samples spread widely (IQR is {s:.0%} of the median): close other programs, check "
            f"`labkit doctor`, and rerun with a larger {more}; trust medians and comparisons, not one run")
    sample_ns = float(np.median(samples_ns)) * loops
    if sample_ns < 1000 * clock_resolution_ns:
        warnings.append(
            f"each sample lasts only {format_duration(sample_ns)}, close to the clock's resolution "
            f"({format_duration(clock_resolution_ns)}): raise {loops_hint} so a sample lasts "
            "at least a millisecond")
    if load is not None and load > 0.8 * cores:
        warnings.append(
            f"the machine was busy (load average {load:.1f} on {cores} cores): numbers will be noisy; "
            + ("the interleaved rounds share that noise between A and B, so the ratio's interval holds it; stop "
               "other work and rerun for a narrower one" if interleaved else
               "stop other work or compare A and B interleaved with labkit.compare"))
    return tuple(warnings)


def bench(fn: Callable[..., Any], *args: Any, name: str | None = None, repeat: int = 20, warmup: int = 2,
          loops: int | None = None, min_sample_time: float = 0.001,
          clock: Clock = time.perf_counter_ns) -> BenchResult:
    """Time ``fn(*args)``: warm up, calibrate the loop count, then take ``repeat`` samples.

    Args:
        fn: the function to time; called as ``fn(*args)``.
        name: a label for reports (default: the function's name).
        repeat: counted samples to take (≥ 2).
        warmup: samples taken and kept apart before counting (≥ 0): caches, allocators and lazy imports settle.
        loops: calls per sample; by default calibrated so one sample lasts ``min_sample_time`` seconds.
        min_sample_time: the shortest sample, in seconds, when calibrating.
        clock: a nanosecond clock; inject a fake one in tests.

    Returns:
        A :class:`BenchResult` with the raw per-call samples, the warm-up apart, and warnings.

    Raises:
        BadInputError: ``fn`` is not callable, or a count is not a positive integer.
    """
    function(fn, "fn")
    repeat = integer(repeat, "repeat", low=2)
    warmup = integer(warmup, "warmup", low=0)
    min_ns = number(min_sample_time, "min_sample_time", unit="seconds") * 1e9
    warm: list[float] = []
    if loops is None:
        loops, warm = calibrate(fn, args, min_ns, clock)
    else:
        loops = integer(loops, "loops")
    warm += [time_loop(fn, args, loops, clock) / loops for _ in range(warmup)]
    samples = [time_loop(fn, args, loops, clock) / loops for _ in range(repeat)]
    return _result(name or getattr(fn, "__name__", repr(fn)), samples, loops, warm)


def _result(name: str, samples: list[float], loops: int, warm: list[float], **hints: Any) -> BenchResult:
    res = time.get_clock_info("perf_counter").resolution * 1e9
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:
        load = None
    warnings = diagnose(samples, loops, warm, res, load, os.cpu_count() or 1, **hints)
    return BenchResult(name, tuple(samples), loops, tuple(warm), warnings, fingerprint())
