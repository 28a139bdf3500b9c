"""A census of allocator calls: every ``malloc``/``PyObject_Malloc`` made between ``start()`` and ``stop()``.

    with Census() as c:
        build_report(rows)
    c.allocations, c.bytes_allocated      # allocator calls and the bytes they asked for (frees not counted)
    c.peak_bytes                          # the most the window's allocations held at once
    Census(sites=5)                       # also: the 5 lines that allocated most, and those holding the peak

It runs a ``memray.Tracker`` with Python allocators traced, then reads the capture back and counts the
records that allocate (``malloc``, ``calloc``, ``realloc``, ``mmap``, and their pymalloc twins), minus what
the tracker itself allocates around an empty block. What it can and cannot see:

* it **sees** every allocator call, freed or not — the temporaries a call makes and drops at once (which
  ``tracemalloc`` snapshots miss), in every thread of the process, C extensions (NumPy's data buffers)
  included;
* it **cannot see** objects CPython serves from its free lists (floats, small tuples, list and dict shells
  freed a moment ago) or buffers NumPy serves from its small-allocation cache: those reuse memory without
  calling the allocator. The count is a floor, not a census of objects;
* it is **process-wide**: other threads' allocations in the window count too, and only one memray tracker
  can run in a process at a time.

A census is slow to set up (the tracker starts, stops, and its capture is read back: ``tests/benchmarks/
bench_prealloc.py`` prints what it costs here), so it suits counting a call or a request, never timing one:
tracing also slows the code it watches.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import statistics
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from labkit.errors import ProbeUnavailable

__all__ = ["Census", "census_unavailable"]


def census_unavailable() -> str | None:
    """Why a census cannot run in this process (memray missing), or None when it can."""
    try:
        import memray  # noqa: F401
    except ImportError:
        return "memray is not installed (pip install memray; it runs on Linux and macOS)"
    return None


def _free_kinds() -> frozenset[int]:
    import memray

    kinds = memray.AllocatorType
    return frozenset(int(k) for k in (kinds.FREE, kinds.PYMALLOC_FREE, kinds.MUNMAP))


class Census:
    """Count allocator calls between :meth:`start` and :meth:`stop` (or inside a ``with`` block).

    Attributes (filled by :meth:`stop`):
        allocations: allocator calls made in the window, the tracker's own subtracted.
        bytes_allocated: bytes those calls asked for (a ``realloc`` counts its new size).
        peak_bytes: the high-water mark of what the window's allocations held at once (memray's peak; what
            was allocated before the window is not in it).
        allocating_sites, peak_sites: with ``sites=N``, the ``N`` calling lines — the first frame outside
            the standard library, site-packages and labkit's own plumbing — that made the most allocator calls
            (``(line, calls, bytes)``, most bytes first), and those holding the most at the peak
            (``(line, allocations, bytes)``); empty without ``sites``.

    Args:
        path: where memray writes its capture (default: a temporary file, removed at :meth:`stop`); a
            reused path is overwritten.
        subtract_overhead: subtract what the tracker allocates around an empty block (measured once per
            process), so an empty block counts (close to) zero.
        sites: how many calling lines to name in ``allocating_sites`` and ``peak_sites`` (0: none; reading
            every record's stack makes :meth:`stop` slower).

    Raises (from :meth:`start`):
        ProbeUnavailable: memray is not installed, or another memray tracker is already active in this
            process (only one can run at a time) — the message says which, and what to do.
    """

    def __init__(self, path: str | Path | None = None, *, subtract_overhead: bool = True, sites: int = 0) -> None:
        self.path = None if path is None else Path(path)
        self.subtract_overhead = subtract_overhead
        self.sites = sites
        self.allocations: int | None = None
        self.bytes_allocated: int | None = None
        self.peak_bytes: int | None = None
        self.allocating_sites: tuple[tuple[str, int, int], ...] = ()
        self.peak_sites: tuple[tuple[str, int, int], ...] = ()
        self._tracker: Any = None
        self._tmp: str | None = None
        self._file: Path | None = None

    def start(self) -> Census:
        """Start tracking allocator calls (process-wide). Returns ``self``."""
        reason = census_unavailable()
        if reason is not None:
            raise ProbeUnavailable(f"cannot count allocator calls: {reason}")
        if self._tracker is not None:
            raise ProbeUnavailable("this census is already running: stop() it before starting it again")
        if self.subtract_overhead:
            _overhead()  # measured before our own tracker starts (it needs one of its own)
        import memray

        if self.path is None:
            self._tmp = tempfile.mkdtemp(prefix="labkit-census-")
            self._file = Path(self._tmp) / "census.bin"
        else:
            self._file = self.path
        dest = memray.FileDestination(str(self._file), overwrite=True, compress_on_exit=False)
        tracker = memray.Tracker(destination=dest, trace_python_allocators=True)
        try:
            tracker.__enter__()
        except RuntimeError as e:  # memray allows one active tracker per process
            self._cleanup()
            raise ProbeUnavailable(
                f"cannot count allocator calls: another memray tracker is already active in this process "
                f"({e}); stop it (leave its `with memray.Tracker(...)` block, or the %%memray_flamegraph "
                "cell) and count again") from e
        self._tracker = tracker
        return self

    def stop(self) -> Census:
        """Stop tracking and count what was allocated. Returns ``self`` with the counts filled in."""
        if self._tracker is None:
            raise ProbeUnavailable("this census was not started: call start() first (or use `with Census():`)")
        tracker, self._tracker = self._tracker, None
        try:
            tracker.__exit__(None, None, None)
            calls, size = _read(self._file)
            self.peak_bytes, self.allocating_sites, self.peak_sites = _peak_and_sites(self._file, self.sites)
        finally:
            self._cleanup()
        if self.subtract_overhead:
            calls0, size0 = _overhead()
            calls, size = max(0, calls - calls0), max(0, size - size0)
        self.allocations, self.bytes_allocated = calls, size
        return self

    def _cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Census:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._tracker is not None:
            self.stop()

    def __repr__(self) -> str:
        if self.allocations is None:
            return "Census(not counted yet)"
        return f"Census(allocations={self.allocations:,}, bytes_allocated={self.bytes_allocated:,})"


def _read(path: Path | None) -> tuple[int, int]:
    import memray

    frees = _free_kinds()
    calls = size = 0
    reader = memray.FileReader(str(path))
    try:
        for r in reader.get_allocation_records():
            if int(r.allocator) not in frees:
                calls += r.n_allocations
                size += r.size
    finally:
        reader.close()
    return calls, size


_PLUMBING = (__file__, contextlib.__file__)  # the census's own start and stop: its overhead, subtracted already


def _line_of(record: Any) -> str:
    """The first calling line of an allocation outside the standard library, site-packages and labkit's own
    plumbing (the innermost frame when all of them are); "" for the census's own start and stop."""
    from labkit.nplusone.sites import is_library

    frames = [f for f in record.stack_trace() if f[1] not in _PLUMBING]
    if not frames and record.stack_trace():
        return ""
    for _function, filename, lineno in frames:
        if not is_library(filename):
            return f"{filename}:{lineno}"
    return f"{frames[0][1]}:{frames[0][2]}" if frames else "(no Python frame)"


def _top(records: Any, n: int, frees: frozenset[int]) -> tuple[tuple[str, int, int], ...]:
    by_line: dict[str, list[int]] = {}
    for r in records:
        if int(r.allocator) not in frees and (line := _line_of(r)):
            tally = by_line.setdefault(line, [0, 0])
            tally[0] += r.n_allocations
            tally[1] += r.size
    ranked = sorted(by_line.items(), key=lambda kv: kv[1][1], reverse=True)[:n]
    return tuple((line, calls, size) for line, (calls, size) in ranked)


def _peak_and_sites(path: Path | None, n: int) -> tuple[int, tuple[tuple[str, int, int], ...],
                                                       tuple[tuple[str, int, int], ...]]:
    """The capture's peak, and with ``n`` its top allocating lines and the lines holding the peak."""
    import memray

    reader = memray.FileReader(str(path))
    try:
        peak = int(reader.metadata.peak_memory)
        if n <= 0:
            return peak, (), ()
        frees = _free_kinds()
        return (peak, _top(reader.get_allocation_records(), n, frees),
                _top(reader.get_high_watermark_allocation_records(), n, frees))
    finally:
        reader.close()


@functools.cache
def _overhead() -> tuple[int, int]:
    """What the tracker itself allocates around an empty block: the median of three empty censuses."""
    runs = []
    for _ in range(3):
        c = Census(subtract_overhead=False)
        c.start()
        c.stop()
        runs.append((c.allocations or 0, c.bytes_allocated or 0))
    return (int(statistics.median_low(r[0] for r in runs)), int(statistics.median_low(r[1] for r in runs)))
