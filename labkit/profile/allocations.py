"""Allocation profiles with memray: where a function (or a block) asks for memory, by count and by bytes.

    prof = profile.memory(build_report, rows)           # one call, tracked
    with profile.tracking() as t:                       # or a block
        build_report(rows)
    prof = t.profile
    prof.by_count / prof.by_bytes                        # Stacks: every allocation, weighted each way
    prof.top("count"), prof.top("bytes")                 # the two readings, by allocation site
    prof.temporary                                       # allocations freed right after (memray's definition)
    prof.peak_bytes, prof.at_peak                        # the high-water mark, and what was alive at it
    profile.icicle_chart(prof.by_count); profile.memray_html(prof)   # our chart; memray's own page (html=True)

memray records every allocator call made while tracking (with ``python_allocators=True`` also CPython's own
small-object allocator, so each small object counts), with the Python stack that made it. What it can and
cannot see:

* **count** and **bytes** rank sites differently, and both matter: one big buffer tops the bytes, a hundred
  thousand small objects top the count (and the count is what costs allocator time and GC work);
* objects CPython takes from its free lists (recently freed floats, tuples, lists, dicts) make no allocator
  call: they are invisible, so the counts are a floor;
* *temporary* allocations are memray's: freed before any other allocation happened (threshold 1);
* a :func:`tracking` block is process-wide (other threads' allocations land in the profile too), while
  :func:`memory` keeps only what its one call allocated (on the calling thread: work the call hands to other
  threads is left out, as is a background thread's); only one memray tracker can run in a process at a time; it slows the tracked code (``tests/benchmarks/bench_gc_profile.py``
  prints by how much), so time nothing under it.

Bounded: the capture goes to a temporary folder (removed after reading), and at most ``max_records``
records are read (``truncated`` says when there were more: track a smaller call).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, ProbeUnavailable
from labkit.inputs import integer
from labkit.measure.stats import format_bytes
from labkit.profile.stacks import Stacks
from labkit.results import Saveable, TextRepr

__all__ = ["MemoryProfile", "memory", "tracking", "Tracking"]

#: the first memray whose self-contained page (``--no-web``) draws its flame graph (checked in a browser)
_NO_WEB_WORKS = (1, 19, 2)


@dataclass(frozen=True)
class MemoryProfile(TextRepr, Saveable):
    """What a tracked call or block allocated (from :func:`memory` or :func:`tracking`).

    Attributes:
        by_count, by_bytes: every allocation in the window, its stack weighted by calls or by bytes.
        at_peak: the memory alive at the high-water mark, by stack (bytes).
        temporary: allocations freed before the next one (memray's temporaries), by stack (calls).
        allocations, bytes_allocated: totals of the window (frees not counted).
        peak_bytes: the high-water mark of memory allocated while tracking (above what was there before).
        python_allocators: whether CPython's small-object allocator was traced (each small object counted).
        records, truncated: records read, and whether more were left unread (``max_records``).
        seconds: how long the tracked window lasted (tracked, so slowed: not a timing).
        target: what was tracked.
        html: memray's own flame graph page (self-contained, its scripts inlined), when asked for.
        notes: what affects the reading.
    """

    KIND = "memory-profile"
    NESTED = {"by_count": Stacks, "by_bytes": Stacks, "at_peak": Stacks, "temporary": Stacks}

    by_count: Stacks
    by_bytes: Stacks
    at_peak: Stacks
    temporary: Stacks
    allocations: int
    bytes_allocated: int
    peak_bytes: int
    python_allocators: bool
    records: int
    truncated: bool
    seconds: float
    target: str
    html: str | None = field(default=None, repr=False)
    notes: tuple[str, ...] = ()

    def top(self, by: str = "count", n: int = 12) -> Any:
        """The allocation sites (innermost frames) with the most allocations (``by="count"``) or bytes
        (``"bytes"``), with both figures side by side."""
        if by not in ("count", "bytes"):
            raise BadInputError(f"by must be 'count' or 'bytes', got {by!r}")
        counts = self.by_count.by_location(10_000).set_index(["function", "file"])
        sizes = self.by_bytes.by_location(10_000).set_index(["function", "file"])
        df = counts[["package", "allocations"]].join(sizes[["bytes"]], how="outer").fillna(0)
        df["allocations %"] = 100 * df["allocations"] / max(1, self.allocations)
        df["bytes %"] = 100 * df["bytes"] / max(1, self.bytes_allocated)
        df[["allocations", "bytes"]] = df[["allocations", "bytes"]].astype("int64")
        key = "allocations" if by == "count" else "bytes"
        return df.sort_values(key, ascending=False).head(n).reset_index()

    def temporaries(self, n: int = 12) -> Any:
        """Sites of temporary allocations (freed before the next allocation), most first."""
        return self.temporary.by_location(n)

    def to_frame(self) -> Any:
        """One row per allocation site: function, file, package, allocations, bytes and their shares."""
        return self.top("count", n=10_000)

    def __str__(self) -> str:
        mode = "Python allocators traced" if self.python_allocators else "system allocator only"
        text = (f"memory profile of {self.target}: {self.allocations:,} allocations, "
                f"{format_bytes(self.bytes_allocated)} asked for, high-water mark {format_bytes(self.peak_bytes)}, "
                f"{self.temporary.total:,} temporaries ({mode}; {len(self.by_count):,} distinct stacks)")
        if self.truncated:
            text += f"\n  note: only the first {self.records:,} records were read (max_records): track less"
        return "\n".join([text, *(f"  note: {n}" for n in self.notes)])


def _memray() -> Any:
    try:
        import memray
    except ImportError as e:
        raise ProbeUnavailable("memray is not installed: pip install memray (Linux and macOS)") from e
    return memray


def _frames(stack: list[tuple[str, str, int]]) -> tuple[str, ...]:
    # memray lists the innermost frame first; Stacks wants the outermost first, as py-spy writes them
    return tuple(f"{fn} ({_short(file)}:{line})" for fn, file, line in reversed(stack))


@functools.lru_cache(maxsize=4096)
def _short(path: str) -> str:
    """A file as py-spy shows it: from its top-level package down (``labkit/toyshop/export.py``,
    ``json/encoder.py``), or its name alone when it is in no package."""
    folder, name = os.path.split(path)
    parts = [name]
    while folder and os.path.exists(os.path.join(folder, "__init__.py")):
        folder, pkg = os.path.split(folder)
        parts.append(pkg)
    return "/".join(reversed(parts))


def _read(path: Path, *, max_records: int, cut: str | None) -> dict[str, Any]:
    memray = _memray()
    frees = {int(k) for k in (memray.AllocatorType.FREE, memray.AllocatorType.PYMALLOC_FREE,
                              memray.AllocatorType.MUNMAP)}
    reader = memray.FileReader(str(path))
    try:
        counts: Counter[tuple[int, int]] = Counter()
        sizes: Counter[tuple[int, int]] = Counter()
        sample: dict[tuple[int, int], Any] = {}
        n = 0
        truncated = False
        for rec in reader.get_allocation_records():
            n += 1
            if n > max_records:
                truncated = True
                break
            if int(rec.allocator) in frees:
                continue
            key = (rec.stack_id, rec.tid)
            counts[key] += rec.n_allocations
            sizes[key] += rec.size
            if key not in sample:
                sample[key] = rec
        stacks = {k: _cut(_frames(r.stack_trace()), cut) for k, r in sample.items()}
        by_count = Stacks.from_counts(((stacks[k], c) for k, c in counts.items() if stacks[k]), "allocations")
        by_bytes = Stacks.from_counts(((stacks[k], b) for k, b in sizes.items() if stacks[k]), "bytes")
        at_peak = temporary = Stacks((), "bytes")
        if not truncated:  # memray aggregates these in C++: bounded by the same record limit
            peak = ((_cut(_frames(r.stack_trace()), cut), r.size)
                    for r in reader.get_high_watermark_allocation_records(merge_threads=True))
            temp = ((_cut(_frames(r.stack_trace()), cut), r.n_allocations)
                    for r in reader.get_temporary_allocation_records(threshold=1, merge_threads=True))
            at_peak = Stacks.from_counts(((st, w) for st, w in peak if st), "bytes")
            temporary = Stacks.from_counts(((st, w) for st, w in temp if st), "allocations")
        meta = reader.metadata
        return {"by_count": by_count, "by_bytes": by_bytes, "at_peak": at_peak, "temporary": temporary,
                "allocations": by_count.total, "bytes_allocated": by_bytes.total, "peak_bytes": meta.peak_memory,
                "records": min(n, max_records), "truncated": truncated,
                "python_allocators": bool(meta.trace_python_allocators)}
    finally:
        reader.close()


def _cut(frames: tuple[str, ...], cut: str | None) -> tuple[str, ...] | None:
    """The tracked code's part of a stack, or None for labkit's own allocations (the tracker's bookkeeping,
    the call into the tracked function), which are left out: frames above (and including) the one starting
    with ``cut`` (the helper :func:`memory` calls through) are dropped; memray starts its stacks where
    tracking began, so nothing above the tracked code is left otherwise. A stack without the ``cut`` frame
    is another thread's, which allocated beside the tracked call: left out too."""
    if frames and all("profile/memory.py:" in f for f in frames):
        return None
    if cut is not None:
        for i, f in enumerate(frames):
            if f.startswith(cut + " "):
                return frames[i + 1:] or None
        return None
    return frames or ("(no Python frame: C code)",)


def _html(path: Path) -> str:
    """memray's own flame graph, self-contained (``--no-web``: its scripts inlined, nothing fetched)."""
    version = tuple(int(x) for x in _memray().__version__.split(".")[:3] if x.isdigit())
    if version < _NO_WEB_WORKS:
        raise ProbeUnavailable(f"memray {_memray().__version__} writes a broken self-contained flame graph (its "
                               "--no-web page draws nothing; fixed in 1.19.2): pip install -U 'memray>=1.19.2', "
                               "or leave html=False and use labkit.profile.icicle_chart")
    out = path.with_suffix(".html")
    r = subprocess.run([sys.executable, "-m", "memray", "flamegraph", "--no-web", "--force", "-o", str(out),
                        str(path)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not out.exists():
        raise ProbeUnavailable(f"memray could not write its flame graph: {(r.stderr or r.stdout).strip()[-300:]}")
    return out.read_text(encoding="utf-8")


class tracking:  # noqa: N801 - used like a function: ``with tracking() as t:``
    """Track every allocation inside a ``with`` block; ``t.profile`` holds the :class:`MemoryProfile` after it.

    If the block raises, the profile of what ran is still read (and kept on ``t.profile``) before the
    exception goes on. Arguments as in :func:`memory`. (A class, not a generator: memray loses the stack of
    a tracker entered inside a generator frame.)
    """

    def __init__(self, *, python_allocators: bool = True, max_records: int = 2_000_000, html: bool = False,
                 target: str = "a block", _cut_at: str | None = None) -> None:
        integer(max_records, "max_records", low=1000)
        self.python_allocators, self.max_records, self.html = python_allocators, max_records, html
        self.target, self._cut_at = target, _cut_at
        self.profile: MemoryProfile | None = None
        self._tracker: Any = None

    def __enter__(self) -> tracking:
        memray = _memray()
        if self._tracker is not None:
            raise BadInputError("this tracking block is already running: make a new tracking() for another")
        self._cut = self._cut_at
        self._tmp = Path(tempfile.mkdtemp(prefix="labkit-memray-"))
        self._capture = self._tmp / "capture.bin"
        dest = memray.FileDestination(str(self._capture), overwrite=True, compress_on_exit=False)
        tracker = memray.Tracker(destination=dest, trace_python_allocators=self.python_allocators)
        try:
            tracker.__enter__()
        except RuntimeError as e:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise ProbeUnavailable(f"cannot track allocations: another memray tracker is active in this process "
                                   f"({e}); leave it first (its `with` block, an alloc.Census, a "
                                   "%%memray_flamegraph cell)") from e
        self._tracker = tracker
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        tracker, self._tracker = self._tracker, None
        try:
            tracker.__exit__(None, None, None)
            seconds = time.perf_counter() - self._t0
            data = _read(self._capture, max_records=self.max_records, cut=self._cut)
            notes = [] if self.python_allocators else [
                "python_allocators=False: CPython's small-object allocator was not traced, so small objects "
                "are missing (pymalloc's arenas show instead)"]
            page = _html(self._capture) if self.html else None
            self.profile = MemoryProfile(**data, seconds=round(seconds, 4), target=self.target, html=page,
                                         notes=tuple(notes))
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)


Tracking = tracking


def memory(fn: Callable[..., Any], /, *args: Any, python_allocators: bool = True, max_records: int = 2_000_000,
           html: bool = False, **kwargs: Any) -> MemoryProfile:
    """Track every allocation of one call ``fn(*args, **kwargs)`` with memray (its return value is dropped).

    Args:
        fn: the function to track (one call: make it a realistic one — a request, a batch).
        python_allocators: trace CPython's small-object allocator too (each small object counted); False
            sees only the system allocator (larger blocks, pymalloc's arenas) and costs less.
        max_records: read at most this many allocation records (a bound on time and memory).
        html: also render memray's own flame graph page, self-contained (scripts inlined, works offline).

    Raises:
        ProbeUnavailable: memray is missing, or another memray tracker is already active in this process.
        Whatever ``fn`` raises, after the tracker is stopped and its capture removed.
    """
    if not callable(fn):
        raise BadInputError(f"fn must be a function to call, got {type(fn).__name__}: pass the function itself, "
                            "not its result (profile.memory(f, x), not profile.memory(f(x)))")
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
    with tracking(python_allocators=python_allocators, max_records=max_records, html=html,
                  target=f"{name}(...)", _cut_at="_labkit_tracked_call") as t:
        _labkit_tracked_call(fn, args, kwargs)
    assert t.profile is not None
    return t.profile


def _labkit_tracked_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    fn(*args, **kwargs)
