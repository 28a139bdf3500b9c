"""What a call allocates, counted over several calls: :func:`count`, :func:`compare`, and their result values.

    a = count(build_report, rows)                  # AllocationCount: medians over 5 calls, per-call values kept
    a.allocations, a.bytes_allocated               # every allocator call, freed or not (memray census)
    a.blocks, a.size_bytes, a.peak_bytes           # what survives the call, and the high-water mark (tracemalloc)
    a.gc_collections                               # cyclic-GC runs during the call, per generation
    a.rss_added_bytes                              # resident memory the call added at its peak, native included
    c = compare(build_report, build_report_fast, rows)   # both counts side by side, and the ratios

What each number can and cannot see:

* ``allocations`` / ``bytes_allocated`` — allocator calls (and the bytes they asked for) made during one
  call, freed or not, in the whole process: the temporaries too. From a :class:`labkit.alloc.Census`
  (memray, Python allocators traced). Objects served from CPython's free lists, or buffers from NumPy's
  small-allocation cache, reuse memory without an allocator call: they are invisible, so this is a floor.
  ``None`` — with the reason in ``census_note`` — when memray is not installed, another memray tracker is
  active, or ``census=False``.
* ``blocks`` / ``size_bytes`` — the *net* growth of memory blocks traced by tracemalloc across the call: what
  the call leaves behind (its result, anything it caches). Temporaries freed before it returns are not in it.
* ``peak_bytes`` — tracemalloc's high-water mark during the call above its starting level: temporaries
  included, even those freed before returning; blind to memory allocated outside Python's allocators.
* ``gc_collections`` — collections of each generation that ran during the call (``gc.callbacks``). The
  collector runs when the *net* number of new GC-tracked containers passes a threshold (``gc.get_threshold``),
  so a call that holds thousands of dicts or lists at once pays for collections, and one that frees as it
  goes does not. Process-wide, like the rest.
* ``rss_added_bytes`` — how far one more call, untraced, raised the process's resident memory at its peak
  (:func:`labkit.alloc.rss_peak` in place: the kernel's ``VmHWM``). The only number here that sees memory
  outside Python's allocators (pyarrow's pools, a C extension's ``mmap``), and the pages the tracers' own
  bookkeeping would add are not in it. A lower bound in a long-lived process (memory a library's pool keeps
  is reused); None, with the reason in ``rss_note``, where it cannot be read in place (not Linux) or
  ``rss=False``.

Counting is never timing: tracemalloc and memray slow the code they watch, so these values hold
no time at all (use :func:`labkit.bench` / :func:`labkit.compare` on the untraced code for that). The first
``warmup`` calls are made and not counted, so one-time costs (imports, caches, buffers a function reuses)
are left out.
"""

from __future__ import annotations

import gc
import inspect
import statistics
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labkit.alloc.census import Census, census_unavailable
from labkit.alloc.rss import _can_reset, _in_place
from labkit.errors import BadInputError, ProbeUnavailable
from labkit.inputs import function, integer
from labkit.measure.machine import fingerprint
from labkit.measure.stats import format_bytes
from labkit.progress import LazySteps
from labkit.results import Saveable, TextRepr

__all__ = ["AllocationCount", "AllocComparison", "count", "compare", "METRICS", "RSS_NOISE_BYTES"]

#: the metrics an AllocationCount summarises, in display order.
METRICS = ("allocations", "bytes_allocated", "blocks", "size_bytes", "peak_bytes", "rss_added_bytes")
#: below this on both sides, resident memory added by a call is a few pages of noise (the kernel counts whole 4 KiB
#: pages, and the allocator keeps or returns arenas as it likes): no ratio is given for it
RSS_NOISE_BYTES = 256 * 1024
_NO_TIME = ("an allocation count holds no times: counting slows the code it watches, so nothing is timed "
            "while counting. Time the untraced code with labkit.bench(fn, ...) or labkit.compare(a, b, ...)")


def _median(values: tuple[int, ...] | None) -> int | None:
    return None if values is None else int(statistics.median_low(values))


@dataclass(frozen=True)
class AllocationCount(TextRepr, Saveable):
    """What one call allocates: medians over several calls, every per-call value kept.

    The summary attributes — ``allocations``, ``bytes_allocated``, ``blocks``, ``size_bytes``,
    ``peak_bytes``, ``gc_collections`` — are the (lower) medians of the ``*_per_call`` tuples; what each can
    and cannot see is in :mod:`labkit.alloc.counts`.

    Attributes:
        name: what was counted.
        allocations_per_call, bytes_allocated_per_call: census per counted call, or None (see ``census_note``).
        blocks_per_call, size_bytes_per_call, peak_bytes_per_call: tracemalloc, per counted call.
        gc_collections_per_call: (gen0, gen1, gen2) collections per counted call.
        warmup: calls made before counting, not counted.
        census_note: why ``allocations`` is None, when it is.
        notes: anything else that affects the reading.
        rss_added_bytes: resident memory one more (untraced) call added at its peak; None when not read.
        rss_note: why ``rss_added_bytes`` is None, when it is.
    """

    KIND = "alloc-count"

    name: str
    allocations_per_call: tuple[int, ...] | None
    bytes_allocated_per_call: tuple[int, ...] | None
    blocks_per_call: tuple[int, ...]
    size_bytes_per_call: tuple[int, ...]
    peak_bytes_per_call: tuple[int, ...]
    gc_collections_per_call: tuple[tuple[int, int, int], ...]
    warmup: int = 1
    census_note: str = ""
    notes: tuple[str, ...] = ()
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    rss_added_bytes: int | None = None
    rss_note: str = ""

    @property
    def calls(self) -> int:
        """How many calls were counted."""
        return len(self.blocks_per_call)

    @property
    def allocations(self) -> int | None:
        """Allocator calls per call, freed or not (median); None when no census ran (see ``census_note``)."""
        return _median(self.allocations_per_call)

    @property
    def bytes_allocated(self) -> int | None:
        """Bytes those allocator calls asked for, per call (median); None when no census ran."""
        return _median(self.bytes_allocated_per_call)

    @property
    def blocks(self) -> int:
        """Memory blocks still alive after the call that were not before (median, net, tracemalloc)."""
        return _median(self.blocks_per_call) or 0

    @property
    def size_bytes(self) -> int:
        """Bytes of those surviving blocks (median, net, tracemalloc)."""
        return _median(self.size_bytes_per_call) or 0

    @property
    def peak_bytes(self) -> int:
        """High-water mark of traced memory during the call, above where it started (median)."""
        return _median(self.peak_bytes_per_call) or 0

    @property
    def gc_collections(self) -> tuple[int, int, int]:
        """Cyclic-GC collections during the call, per generation (median of each)."""
        per = self.gc_collections_per_call
        return tuple(int(statistics.median_low(c[g] for c in per)) for g in range(3)) if per else (0, 0, 0)  # type: ignore[return-value]

    @property
    def samples_ns(self) -> Any:
        """Not available: an allocation count holds no times (raises, saying what to use instead)."""
        raise BadInputError(_NO_TIME)

    def to_frame(self) -> Any:
        """One row per counted call: name, call, allocations, bytes_allocated, blocks, size_bytes,
        peak_bytes, gc0, gc1, gc2."""
        import pandas as pd

        rows = []
        for i in range(self.calls):
            census = self.allocations_per_call, self.bytes_allocated_per_call
            rows.append({"name": self.name, "call": i,
                         "allocations": None if census[0] is None else census[0][i],
                         "bytes_allocated": None if census[1] is None else census[1][i],
                         "blocks": self.blocks_per_call[i], "size_bytes": self.size_bytes_per_call[i],
                         "peak_bytes": self.peak_bytes_per_call[i],
                         **{f"gc{g}": self.gc_collections_per_call[i][g] for g in range(3)}})
        return pd.DataFrame(rows)

    def __str__(self) -> str:
        if self.allocations is None:
            head = f"allocations not counted ({self.census_note})"
        else:
            head = f"{self.allocations:,} allocations ({format_bytes(self.bytes_allocated)})"
        rss = (f"resident memory +{format_bytes(self.rss_added_bytes)} at its peak (native included, one "
               "untraced call)" if self.rss_added_bytes is not None else f"resident memory not read ({self.rss_note})")
        text = (f"{self.name}: {head}; {self.blocks:,} blocks ({format_bytes(self.size_bytes)}) alive after the call, "
                f"peak {format_bytes(self.peak_bytes)} during it, GC collections {self.gc_collections}; {rss} — "
                f"medians of {self.calls} calls after {self.warmup} warm-up")
        return "\n".join([text, *(f"  note: {n}" for n in self.notes)])


@dataclass(frozen=True)
class AllocComparison(TextRepr, Saveable):
    """Two :class:`AllocationCount` values side by side (from :func:`compare`), with candidate/baseline ratios."""

    KIND = "alloc-comparison"
    NESTED = {"baseline": AllocationCount, "candidate": AllocationCount}

    baseline: AllocationCount
    candidate: AllocationCount

    def ratio(self, metric: str = "allocations") -> float | None:
        """candidate / baseline for one metric of :data:`METRICS`; None when either side is missing or 0."""
        if metric not in METRICS:
            raise BadInputError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
        a, b = getattr(self.baseline, metric), getattr(self.candidate, metric)
        if metric == "rss_added_bytes" and a is not None and b is not None and max(a, b) < RSS_NOISE_BYTES:
            return None  # a few pages either way: the reading's own noise, not a ratio worth printing
        return None if a is None or b is None or a == 0 else b / a

    def verdict(self, metric: str = "allocations") -> Any:
        """A verdict on one metric — less, more, same or inconclusive — with a bootstrap interval over the counted
        calls: a :class:`labkit.alloc.memory.MemoryComparison`, which concludes an experiment as a timing
        comparison does (``exp.conclude(c.verdict("bytes_allocated"))``)."""
        from labkit.alloc.memory import memory_comparison

        return memory_comparison(self, metric)

    @property
    def ratios(self) -> dict[str, float | None]:
        """candidate / baseline for every metric (None where it cannot be computed)."""
        return {m: self.ratio(m) for m in METRICS}

    @property
    def samples_ns(self) -> Any:
        """Not available: allocation counts hold no times (raises, saying what to use instead)."""
        raise BadInputError(_NO_TIME)

    def to_frame(self) -> Any:
        """One row per metric (and GC generation): metric, baseline, candidate, ratio."""
        import pandas as pd

        rows = [{"metric": m, "baseline": getattr(self.baseline, m), "candidate": getattr(self.candidate, m),
                 "ratio": self.ratio(m)} for m in METRICS]
        for g in range(3):
            a, b = self.baseline.gc_collections[g], self.candidate.gc_collections[g]
            rows.append({"metric": f"gc{g} collections", "baseline": a, "candidate": b,
                         "ratio": b / a if a else None})
        return pd.DataFrame(rows)

    def __str__(self) -> str:
        a, b = self.baseline, self.candidate
        lines = [f"{b.name} vs {a.name} (medians of {a.calls} and {b.calls} calls; counts, not times):"]
        for m in METRICS:
            va, vb, r = getattr(a, m), getattr(b, m), self.ratio(m)
            quiet = (m == "rss_added_bytes" and va is not None and vb is not None
                     and max(va, vb) < RSS_NOISE_BYTES)
            lines.append(f"  {m:<16} {_num(va):>12} → {_num(vb):>12}   ×{r:.3g}" if r is not None
                         else f"  {m:<16} {_num(va):>12} → {_num(vb):>12}"
                         + (f"   (both under {RSS_NOISE_BYTES // 1024} KiB: within a resident-memory reading's "
                            "noise, no ratio)" if quiet else ""))
        lines.append(f"  {'gc collections':<16} {a.gc_collections!s:>12} → {b.gc_collections!s:>12}")
        for side in (a, b):
            if side.allocations is None:
                lines.append(f"  note: {side.name}: allocations not counted ({side.census_note})")
        return "\n".join(lines)


def _num(v: int | None) -> str:
    return "?" if v is None else f"{v:,}"


def _check_fn(fn: Any, what: str) -> None:
    function(fn, what)
    if inspect.iscoroutinefunction(fn):
        raise BadInputError(f"{what} is a coroutine function: count() calls it synchronously, so its body would "
                            f"never run. Count lambda: asyncio.run({getattr(fn, '__name__', 'fn')}(...)) instead")


def _traced_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int, int, tuple[int, int, int]]:
    """One call under tracemalloc (already tracing): net blocks, net bytes, peak above start, GC runs."""
    collections = [0, 0, 0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections[info["generation"]] += 1

    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    before = tracemalloc.take_snapshot().filter_traces(ignore)
    tracemalloc.reset_peak()
    start_bytes = tracemalloc.get_traced_memory()[0]
    gc.callbacks.append(on_gc)
    try:
        result = fn(*args, **kwargs)  # held until the snapshot: what the call returns survives it
    finally:
        gc.callbacks.remove(on_gc)
    peak = tracemalloc.get_traced_memory()[1]
    after = tracemalloc.take_snapshot().filter_traces(ignore)
    del result
    diff = after.compare_to(before, "lineno")
    blocks = max(0, sum(s.count_diff for s in diff))  # net: blocks the call freed offset those it made
    size = max(0, sum(s.size_diff for s in diff))
    return blocks, size, max(0, peak - start_bytes), (collections[0], collections[1], collections[2])


def count(fn: Callable[..., Any], /, *args: Any, calls: int = 5, warmup: int = 1, census: bool = True,
          rss: bool = True, name: str | None = None, progress: bool | None = None, **kwargs: Any) -> AllocationCount:
    """Count what ``fn(*args, **kwargs)`` allocates: ``warmup`` calls, then ``calls`` counted calls.

    Each counted call runs once under tracemalloc (blocks, size_bytes, peak_bytes, gc_collections) and, with
    ``census=True``, once more under a memray census (allocations, bytes_allocated); see
    :mod:`labkit.alloc.counts` for what each number can and cannot see. Nothing is timed.

    Args:
        fn: the function to count; called as ``fn(*args, **kwargs)``. The keywords below are this
            function's own: to pass a keyword of the same name to ``fn``, wrap it (``functools.partial``).
        calls: counted calls (≥ 1); the summaries are their medians.
        warmup: calls made first and not counted (≥ 0): caches, lazy imports and reused buffers settle.
        census: also count every allocator call with memray (a census per counted call, slow to set up:
            ``tests/benchmarks/bench_prealloc.py`` prints its cost); False skips it, and
            ``allocations`` is then None with the reason in ``census_note``.
        rss: also read the resident-memory peak of one more call, untraced (cheap where Linux lets it be read
            in place; skipped, with the reason in ``rss_note``, where it does not: use
            :func:`labkit.alloc.rss_peak` with ``fresh=True`` there).
        name: a label (default: the function's name).
        progress: a bar over the calls (:mod:`labkit.progress`: by default in a notebook, and on the terminal
            of a ``labkit report``). It moves between calls and, during a warm-up call, every 10 s; never during
            a counted call, where drawing it would allocate inside what is being counted.

    Returns:
        An :class:`AllocationCount`. If memray is missing or another memray tracker is active,
        ``allocations``/``bytes_allocated`` are None and ``census_note`` says why; the rest is still counted.

    Raises:
        BadInputError: ``fn`` is not callable (or is a coroutine function), or ``calls``/``warmup`` are not
            counts. An exception raised by ``fn`` itself propagates, with every tracer stopped.
    """
    _check_fn(fn, "fn")
    calls = integer(calls, "calls")
    warmup = integer(warmup, "warmup", low=0)
    label = name or getattr(fn, "__name__", type(fn).__name__)
    note = "census=False" if not census else (census_unavailable() or "")
    steps = LazySteps(progress, warmup + calls * (2 if census and not note else 1) + int(rss), f"counting {label}",
                      "call")
    done = steps.done  # between calls only
    try:
        per, notes = _traced_calls(fn, args, kwargs, calls, warmup, steps)
        rss_added, rss_note = _rss_call(fn, args, kwargs) if rss else (None, "rss=False")
        if rss:
            done("resident peak read")
        allocs: tuple[int, ...] | None = None
        sizes: tuple[int, ...] | None = None
        if census and not note:
            try:
                runs = []
                for i in range(calls):
                    runs.append(_census_call(fn, args, kwargs))
                    done(f"census {i + 1}/{calls}")
                allocs, sizes = tuple(r[0] for r in runs), tuple(r[1] for r in runs)
            except ProbeUnavailable as e:
                note = str(e).removeprefix("cannot count allocator calls: ")
    finally:
        steps.close()
    return AllocationCount(
        label, allocs, sizes,
        tuple(p[0] for p in per), tuple(p[1] for p in per), tuple(p[2] for p in per), tuple(p[3] for p in per),
        warmup, note, tuple(notes), fingerprint=fingerprint(), rss_added_bytes=rss_added, rss_note=rss_note)


def _traced_calls(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], calls: int, warmup: int,
                  steps: LazySteps) -> tuple[list[tuple[int, int, int, tuple[int, int, int]]], list[str]]:
    """The warm-up calls, then the counted calls under tracemalloc (started here unless it already runs)."""
    notes: list[str] = []
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(1)
    else:
        notes.append("tracemalloc was already tracing (started elsewhere): its peak was reset while counting")
    per: list[tuple[int, int, int, tuple[int, int, int]]] = []
    try:
        for i in range(warmup):
            with steps.during(f"warm-up call {i + 1}/{warmup}"):
                fn(*args, **kwargs)  # traced, so tracemalloc knows what a warm call frees
            steps.done(f"warm-up {i + 1}/{warmup}")
        for i in range(calls):
            per.append(_traced_call(fn, args, kwargs))
            steps.done(f"traced {i + 1}/{calls}")
    finally:
        if started:
            tracemalloc.stop()
    return per, notes


def _rss_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int | None, str]:
    """One untraced call's resident-memory peak above its start, read in place; or None and why not."""
    if tracemalloc.is_tracing():
        return None, "tracemalloc was tracing (started elsewhere), and its bookkeeping would be counted"
    if not _can_reset():
        return None, ("the peak of one call cannot be read in place here (Linux's /proc/self/clear_refs); "
                      "alloc.rss_peak(fn, ..., fresh=True) reads it in a new process")
    before, peak, _ = _in_place(lambda: fn(*args, **kwargs), ())
    return max(0, peak - before), ""


def _census_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int]:
    c = Census().start()
    try:
        fn(*args, **kwargs)
    finally:
        c.stop()
    return c.allocations or 0, c.bytes_allocated or 0


def compare(baseline: Callable[..., Any], candidate: Callable[..., Any], /, *args: Any, calls: int = 5,
            warmup: int = 1, census: bool = True, rss: bool = True, names: tuple[str, str] | None = None,
            progress: bool | None = None, **kwargs: Any) -> AllocComparison:
    """Count ``baseline(*args, **kwargs)`` and ``candidate(*args, **kwargs)`` alike; both side by side.

    Same options as :func:`count` (``names`` labels the two sides). Counts are compared, never times:
    ``result.ratio("allocations")`` is candidate / baseline (0.15 = 85 % fewer allocator calls).
    """
    _check_fn(baseline, "baseline")
    _check_fn(candidate, "candidate")
    na, nb = names or (getattr(baseline, "__name__", "baseline"), getattr(candidate, "__name__", "candidate"))
    if na == nb:
        na, nb = f"{na} (baseline)", f"{nb} (candidate)"
    opts = {"calls": calls, "warmup": warmup, "census": census, "rss": rss, "progress": progress}
    return AllocComparison(count(baseline, *args, name=na, **opts, **kwargs),
                           count(candidate, *args, name=nb, **opts, **kwargs))
