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

It does not count every allocation ever made (that needs an allocator hook: memray, in the alloc module to
come). tracemalloc slows the call several-fold while it runs: never time code while counting.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["AllocationCount", "count_allocations"]


class AllocationCount(NamedTuple):
    """What one call allocated (see the module docstring for what each number means)."""

    blocks: int
    size_bytes: int
    peak_bytes: int
    gc_collections: tuple[int, int, int]
    result: Any

    def __str__(self) -> str:
        return (
            f"{self.blocks} blocks ({self.size_bytes} B) alive after the call, peak {self.peak_bytes} B "
            f"during it, GC collections {self.gc_collections}"
        )


def count_allocations(fn: Callable[..., Any], /, *args: Any, warmup: int = 1, **kwargs: Any) -> AllocationCount:
    """Call ``fn(*args, **kwargs)`` under tracemalloc and report what the last call allocated.

    The first ``warmup`` calls run traced but uncounted, so one-time costs (imports, caches, reusable
    buffers) do not count, and objects a warm call frees (e.g. values it replaces in a reused buffer) are
    known to tracemalloc. Starts tracemalloc if it is not running (and stops it again after).
    Objects served from CPython's free lists (small dicts, lists, tuples, floats) reuse memory without
    calling the allocator, so they are invisible here: counts are a floor, not a census.
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
    return AllocationCount(blocks, size, max(0, peak - start_bytes), tuple(collections), result)  # type: ignore[arg-type]
