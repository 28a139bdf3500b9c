"""toyshop's ``faults`` metric: the minor page faults a request's work took, in the threads that did it.

    with faults.counted():        # around a stretch of one request's work, in the thread that runs it
        ...

The kernel counts every minor fault per thread (``getrusage(RUSAGE_THREAD).ru_minflt``: a page mapped on first
touch, with no disk read — what fresh memory from ``malloc``/``mmap`` costs; lab 01 prices one). The service
reads that count before and after each stretch and adds the difference to the request's Server-Timing as
``faults;count=<faults>`` (one :func:`labkit.trace.add`, here). Two stretches are counted: the request's
whole time on the event loop (from the pipeline's start to its answer: parsing, the handler's compute,
serialization, an ``hop=inline`` query) and its job on a pool thread (the blocking SQLite work). Each thread's
count is its own, so a pool job's faults are never counted twice; but while a request awaits its pool job the
loop runs other requests' code, and their faults land in its count too — exact per request at concurrency 1,
like the ``gc`` metric.

What counting costs (two ``getrusage`` calls per stretch) is printed by ``tests/benchmarks/bench_prealloc.py``
(part 5: the same requests interleaved against a twin service started with ``PERFLAB_FAULTS=off`` in its
environment, which counts nothing). ``RUSAGE_THREAD`` is Linux's (Python docs, :mod:`resource`); elsewhere, or
with ``PERFLAB_FAULTS=off``, the metric is absent from the header.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from labkit import trace as _trace

try:
    from resource import RUSAGE_THREAD, getrusage
except ImportError:  # not Linux (no RUSAGE_THREAD), or no resource module at all (Windows)
    RUSAGE_THREAD = None
if os.environ.get("PERFLAB_FAULTS") == "off":  # the benchmark's uncounted twin (bench_prealloc.py, part 5)
    RUSAGE_THREAD = None

__all__ = ["counted", "available", "DESC"]

DESC = "minor page faults (this request's work, per thread)"


def available() -> bool:
    """Whether this platform counts faults per thread (Linux's ``RUSAGE_THREAD``)."""
    return RUSAGE_THREAD is not None


@contextmanager
def counted() -> Iterator[None]:
    """Add the minor faults this thread takes inside the block to the request's ``faults`` metric (nothing
    where :func:`available` is false, or when no request trace is collecting)."""
    if RUSAGE_THREAD is None:
        yield
        return
    before = getrusage(RUSAGE_THREAD).ru_minflt
    try:
        yield
    finally:
        _trace.add("faults", count=getrusage(RUSAGE_THREAD).ru_minflt - before, desc=DESC)
