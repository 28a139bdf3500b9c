"""What memory costs: allocation counts per call and per request.

    from labkit import alloc
    a = alloc.count(build_report, rows)          # medians over 5 calls: allocations, bytes_allocated, blocks,
                                                 # size_bytes, peak_bytes, gc_collections (per-call values kept),
                                                 # and rss_added_bytes: the resident peak, native memory included
    c = alloc.compare(build_report, build_report_fast, rows)   # side by side, with candidate/baseline ratios
    with alloc.Census() as census:               # every allocator call in a block (memray), e.g. one request
        handle(request)
    census.allocations
    alloc.rss_peak(read_table, path).added_bytes  # the process's resident memory at its highest (native too)

Counting is never timing: the tracers slow the code they watch, so nothing here holds a time
(time the untraced code with :func:`labkit.bench` or :func:`labkit.compare`). What each number can and
cannot see is in :mod:`labkit.alloc.counts` and :mod:`labkit.alloc.census`. The package is meant to hold
the rest of "what memory costs" beside them (the GC pause recorder lives here too). The charts —
``pauses_chart``, ``pause_histogram_chart``, ``process_rounds_chart``, ``memory_growth_chart`` — are in
:mod:`labkit.alloc.render`.
"""

from typing import Any

from labkit.alloc.census import Census, census_unavailable
from labkit.alloc.counts import METRICS, AllocationCount, AllocComparison, compare, count
from labkit.alloc.gc_facts import InterpreterGC, interpreter_gc
from labkit.alloc.memory import MemoryComparison, Retained, retained
from labkit.alloc.pauses import GCPauses, PauseRecorder
from labkit.alloc.rss import RssPeak, rss_peak
from labkit.alloc.service_gc import (
    LONG_PAUSE_MS,
    ProcessComparison,
    compare_processes,
    during_load,
    overlapping,
    service_pauses,
    tracked_objects,
)

__all__ = ["count", "compare", "AllocationCount", "AllocComparison", "MemoryComparison", "Retained", "retained", "Census", "census_unavailable", "METRICS",
           "PauseRecorder", "GCPauses", "service_pauses", "during_load", "compare_processes", "ProcessComparison",
           "tracked_objects", "overlapping", "LONG_PAUSE_MS", "interpreter_gc", "InterpreterGC", "rss_peak", "RssPeak",
           "pauses_chart", "pause_histogram_chart", "process_rounds_chart",
           "memory_growth_chart"]

_CHARTS = {"pauses_chart", "pause_histogram_chart", "process_rounds_chart", "memory_growth_chart"}


def __getattr__(name: str) -> Any:
    # the chart builders need Altair, slow to import: loaded on first use, not by measuring code
    if name in _CHARTS:
        from labkit.alloc import render

        return getattr(render, name)
    raise AttributeError(f"module 'labkit.alloc' has no attribute {name!r}")
