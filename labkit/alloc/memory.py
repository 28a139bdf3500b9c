"""Memory as evidence: a verdict on an allocation comparison, and the memory a call leaves alive.

    c = alloc.compare(parse_old, parse_new, rows)           # counts per call, both sides
    m = c.verdict("allocations")                            # a MemoryComparison: ratio, interval, less/more/same
    exp = exp.conclude(m)                                   # an experiment concluded on memory, judged as timing is
    kept = alloc.retained(build_cache, 256)                 # what the call leaves alive: a cache's footprint

Which measure answers which question:

* **allocations / bytes allocated per call** (:func:`labkit.alloc.count`, ``compare``) — the allocator's churn: what
  a call costs the allocator and the collector, whatever it frees again;
* **peak** (``peak_bytes``) — the most traced memory held at once during the call: what a burst needs;
* **resident peak** (:func:`labkit.alloc.rss_peak`) — the process's memory at its highest, native allocators
  included, in whole pages: what the operating system sees;
* **retained** (:func:`retained`) — what the call leaves alive when it returns: a cache's or an index's footprint.
  ``count``'s survivors are *net* growth, and a call that clears a cache and fills it again nets about nothing;
  ``retained`` counts every block the call allocated that is still alive, whatever it freed.

A :class:`MemoryComparison`'s interval comes from the calls' own spread (a bootstrap of the ratio of medians);
allocation counts of a deterministic call barely vary, so the interval is often the ratio itself.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from labkit.errors import BadInputError
from labkit.results import Saveable

__all__ = ["MemoryComparison", "Retained", "memory_comparison", "retained"]

#: the ratio's band within which two sides count as the same (as for timing comparisons)
MIN_EFFECT = 0.05


@dataclass(frozen=True)
class MemoryComparison(Saveable):
    """A verdict on one memory metric, candidate against baseline, from the values of every counted call.

    Attributes:
        metric: which measure (``allocations``, ``bytes_allocated``, ``peak_bytes``, ``size_bytes``, ``blocks``).
        baseline_name, candidate_name: the two sides.
        baseline_values, candidate_values: the metric for each counted call.
        ratio: candidate / baseline, of the medians.
        ci: a 95 % bootstrap interval of that ratio.
        verdict: ``less``, ``more``, ``same`` (the interval within ±5 %) or ``inconclusive``.
    """

    KIND: ClassVar[str] = "memory-comparison"

    metric: str
    baseline_name: str
    candidate_name: str
    baseline_values: tuple[float, ...]
    candidate_values: tuple[float, ...]
    ratio: float
    ci: tuple[float, float]
    verdict: str
    min_effect: float = MIN_EFFECT
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def summary(self) -> str:
        """One line: the verdict in words, the ratio and its interval."""
        said = {"less": f"{1 / self.ratio:.2f}× less" if self.ratio > 0 else "none at all",
                "more": f"{self.ratio:.2f}× more", "same": "no difference that matters",
                "inconclusive": "too noisy to tell"}[self.verdict]
        return (f"{self.candidate_name} vs {self.baseline_name}, {self.metric} per call: {said} "
                f"(ratio {self.ratio:.3g}, 95% CI {self.ci[0]:.3g}–{self.ci[1]:.3g}; "
                f"{len(self.baseline_values)} and {len(self.candidate_values)} calls)")

    def __str__(self) -> str:
        return self.summary()


def _verdict(ci: tuple[float, float], min_effect: float) -> str:
    lo, hi = ci
    if 1 - min_effect <= lo and hi <= 1 + min_effect:
        return "same"
    if hi < 1:
        return "less"
    if lo > 1:
        return "more"
    return "inconclusive"


def memory_comparison(comparison: Any, metric: str = "allocations", *, seed: int = 0) -> MemoryComparison:
    """The verdict of an :func:`labkit.alloc.compare` result on one ``metric``, with a bootstrap interval.

    Raises:
        BadInputError: an unknown metric, one not measured on a side (the census unavailable), or a baseline of 0.
    """
    per_call = {"allocations": "allocations_per_call", "bytes_allocated": "bytes_allocated_per_call",
                "blocks": "blocks_per_call", "size_bytes": "size_bytes_per_call", "peak_bytes": "peak_bytes_per_call"}
    if metric not in per_call:
        raise BadInputError(f"metric={metric!r}: a memory verdict takes one of {', '.join(per_call)} (resident memory "
                            "is one reading per side: compare it with alloc.rss_peak, not as a verdict)")
    a = getattr(comparison.baseline, per_call[metric])
    b = getattr(comparison.candidate, per_call[metric])
    if not a or not b:
        side = comparison.baseline if not a else comparison.candidate
        raise BadInputError(f"{metric} was not counted for {side.name} ({side.census_note or 'no calls'}): "
                            "choose a metric tracemalloc measures (peak_bytes, size_bytes, blocks)")
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.median(x) <= 0:
        raise BadInputError(f"the baseline's median {metric} is 0: no ratio can say how much less the candidate uses")
    ratio = float(np.median(y) / np.median(x))
    rng = np.random.default_rng(seed)
    bx = np.median(rng.choice(x, (2000, x.size)), axis=1)
    by = np.median(rng.choice(y, (2000, y.size)), axis=1)
    boots = by[bx > 0] / bx[bx > 0]
    ci = (float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975)))
    from labkit.measure.machine import fingerprint

    return MemoryComparison(metric, comparison.baseline.name, comparison.candidate.name, tuple(a), tuple(b), ratio,
                            ci, _verdict(ci, MIN_EFFECT), fingerprint=fingerprint())


@dataclass(frozen=True)
class Retained(Saveable):
    """What one call left alive: every traced block it allocated that is still held once it returned (its result
    kept), with the lines that allocated most of it.

    Attributes:
        name: the call.
        bytes, blocks: the memory and the number of blocks left alive.
        top: ``(file:line, bytes)`` of the largest allocating lines, largest first.
    """

    KIND: ClassVar[str] = "retained"

    name: str
    bytes: int
    blocks: int
    top: tuple[tuple[str, int], ...] = ()

    def __str__(self) -> str:
        lines = [f"{self.name} left {self.bytes / 1024:,.1f} KiB alive in {self.blocks:,} blocks"]
        lines += [f"  {size / 1024:10,.1f} KiB  {where}" for where, size in self.top]
        return "\n".join(lines)


def retained(fn: Callable[..., Any], *args: Any, warmup: int = 1, top: int = 5, **kwargs: Any) -> Retained:
    """The memory ``fn(*args, **kwargs)`` leaves alive (see the module docstring): its result and whatever it
    stored elsewhere (a module-level cache), counted block by block as tracemalloc traces them.

    ``warmup`` untraced calls come first, so one-time costs (an import, a compiled pattern) are not counted; the
    traced call's own frees of older memory (a cache cleared and filled again) do not hide what it keeps.
    """
    name = getattr(fn, "__name__", repr(fn))
    for _ in range(max(0, int(warmup))):
        fn(*args, **kwargs)
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if was_tracing:
        raise BadInputError("tracemalloc is already tracing in this process: stop it (tracemalloc.stop()) first — "
                            "retained() counts the blocks traced from the start of the call")
    tracemalloc.start(1)
    try:
        kept = fn(*args, **kwargs)
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    stats = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)]).statistics("lineno")
    total = sum(s.size for s in stats)
    blocks = sum(s.count for s in stats)
    shown = tuple((f"{s.traceback[0].filename}:{s.traceback[0].lineno}", s.size) for s in stats[:top])
    del kept
    return Retained(name, total, blocks, shown)
