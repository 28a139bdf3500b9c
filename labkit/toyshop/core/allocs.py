"""Count what one call allocates, with tracemalloc: a small tool for the allocation/GC lesson.

CPython frees most temporaries the moment their last reference goes (reference counting), so "objects per
request" has two honest readings here, both reported by :func:`count_allocations`:

* ``blocks`` / ``size_bytes``: memory blocks allocated during the call that are *still alive* when it
  returns (the result and anything it keeps, caches included): what the call leaves behind.
* ``peak_bytes``: the high-water mark of traced memory above the starting level *during* the call:
  temporaries included (per-line dicts, NumPy temporaries), even if they were freed before returning.
* ``gc_collections``: cyclic-GC collections that ran during the call, per generation. The collector is
  triggered by the *net* growth of GC-tracked containers (dicts, lists, objects: 700 by default), so a
  call that holds thousands of dicts at once pays for collections, and one that holds a few does not.

* ``allocations``: every allocator call the call made, freed or not — the seed's "objects per request"
  (the seed's figures: 120 → 18). tracemalloc cannot see freed temporaries, so this one comes from one more run under a
  ``memray.Tracker`` (Python allocators traced), minus the tracker's own few; ``None`` when memray is not
  installed or another memray tracker is already active (``census=False`` skips it: it costs one more traced
run of the call).

Objects served from CPython's free lists (small dicts, lists, tuples, floats) reuse memory without calling
the allocator, so they are invisible to both tools: the counts are a floor, not a census of objects.
Tracing slows the call several-fold while it runs: never time code while counting.
"""

from __future__ import annotations

import functools
import gc
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["AllocationCount", "count_allocations"]


class AllocationCount(NamedTuple):
    """What one call allocated (see the module docstring for what each number means)."""

    blocks: int
    size_bytes: int
    peak_bytes: int
    gc_collections: tuple[int, int, int]
    allocations: int | None
    result: Any

    def __str__(self) -> str:
        total = "" if self.allocations is None else f"{self.allocations} allocations, "
        return (
            f"{total}{self.blocks} blocks ({self.size_bytes} B) alive after the call, peak {self.peak_bytes} B "
            f"during it, GC collections {self.gc_collections}"
        )


def _census(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    """Allocator calls (not frees) made by one ``fn`` call under memray, or None if memray cannot run."""
    try:
        import memray
    except ImportError:
        return None
    frees = {int(t) for t in (memray.AllocatorType.FREE, memray.AllocatorType.PYMALLOC_FREE, memray.AllocatorType.MUNMAP)}
    with tempfile.TemporaryDirectory(prefix="labkit-census-") as tmp:
        path = Path(tmp) / "census.bin"
        tracker = memray.Tracker(str(path), trace_python_allocators=True)
        try:
            tracker.__enter__()
        except RuntimeError:  # another memray tracker is active in this process
            return None
        try:
            fn(*args, **kwargs)
        finally:
            tracker.__exit__(None, None, None)
        records = memray.FileReader(str(path)).get_allocation_records()
        return sum(r.n_allocations for r in records if int(r.allocator) not in frees)


@functools.cache
def _census_overhead() -> int:
    """What the tracker itself allocates around an empty call (subtracted from every census)."""
    return _census(lambda: None, (), {}) or 0


def count_allocations(
    fn: Callable[..., Any], /, *args: Any, warmup: int = 1, census: bool = True, **kwargs: Any
) -> AllocationCount:
    """Call ``fn(*args, **kwargs)`` under tracemalloc and report what the last call allocated.

    The first ``warmup`` calls run traced but uncounted, so one-time costs (imports, caches, reusable
    buffers) do not count, and objects a warm call frees (e.g. values it replaces in a reused buffer) are
    known to tracemalloc. Starts tracemalloc if it is not running (and stops it again after).
    ``census=True`` runs ``fn`` once more under memray to count every allocation (``allocations``).
    """
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(1)
    for _ in range(warmup):
        fn(*args, **kwargs)
    collections = [0, 0, 0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections[info["generation"]] += 1

    try:
        ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
        before = tracemalloc.take_snapshot().filter_traces(ignore)
        tracemalloc.reset_peak()
        start_bytes = tracemalloc.get_traced_memory()[0]
        gc.callbacks.append(on_gc)
        try:
            result = fn(*args, **kwargs)
        finally:
            gc.callbacks.remove(on_gc)
        peak = tracemalloc.get_traced_memory()[1]
        after = tracemalloc.take_snapshot().filter_traces(ignore)
    finally:
        if started:
            tracemalloc.stop()
    diff = after.compare_to(before, "lineno")
    blocks = max(0, sum(s.count_diff for s in diff))  # net: blocks the call freed offset those it made
    size = max(0, sum(s.size_diff for s in diff))
    total = None
    if census:
        total = _census(fn, args, kwargs)
        if total is not None:
            total = max(0, total - _census_overhead())
    return AllocationCount(blocks, size, max(0, peak - start_bytes), tuple(collections), total, result)  # type: ignore[arg-type]
