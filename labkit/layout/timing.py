"""Time per element and bytes per record of every layout, operation and size: :func:`sweep` → :class:`LayoutSweep`.

    >>> s = sweep(sizes=(1_000, 100_000))
    >>> s.to_frame()                   # one row per (layout, operation, n): median ns per element, spread
    >>> s.relative(1_000)              # ns per element ÷ the columns layout's, per operation
    >>> layout.charts.per_element(s)   # the picture

Each (layout, operation, size) is one :func:`labkit.bench` over data built once in that layout (building is
not timed); a sample is a calibrated loop of calls, and its per-call time divided by ``n`` is the sample's
time per element. ``update`` changes the data on every call (``qty`` grows by one each time), which is
what an in-place update does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labkit.errors import BadInputError
from labkit.layout.records import (
    LAYOUTS,
    OPERATIONS,
    build,
    bytes_per_record,
    check_choice,
    make_columns,
    operation,
)
from labkit.measure.machine import fingerprint
from labkit.measure.microbench import bench
from labkit.progress import new_bar, show_progress
from labkit.results import Saveable, jsonable

__all__ = ["LayoutSweep", "Timing", "sweep", "SIZES", "crossover"]

#: the lab's sizes: from a handful of records (fixed costs dominate) to a million (memory dominates)
SIZES: tuple[int, ...] = (10, 100, 1_000, 10_000, 100_000, 1_000_000)


@dataclass(frozen=True)
class Timing:
    """One (layout, operation, size): the per-element time of every counted sample, in ns."""

    layout: str
    operation: str
    n: int
    ns_per_element: tuple[float, ...]
    loops: int = 1

    @property
    def median(self) -> float:
        """Median ns per element."""
        return float(np.median(self.ns_per_element))


@dataclass(frozen=True)
class LayoutSweep(Saveable):
    """Layouts × operations × sizes, measured: raw samples per cell, and measured bytes per record.

    Attributes:
        timings: one :class:`Timing` per cell measured, in the order measured.
        bytes_per_record: measured bytes per record, by layout (see :func:`records.bytes_per_record`).
        seed: the seed of the generated records.
        complete: False when the sweep was cancelled before every cell was measured.
        fingerprint: the machine and its load when measured.
    """

    KIND = "layout_sweep"

    timings: tuple[Timing, ...]
    bytes_per_record: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    complete: bool = True
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_frame(self) -> Any:
        """One row per cell: layout, operation, n, ns per element (median, p25, p75), samples, loops, and
        the layout's bytes per record."""
        import pandas as pd

        rows = [{"layout": t.layout, "operation": t.operation, "n": t.n, "ns_per_element": t.median,
                 "p25": float(np.percentile(t.ns_per_element, 25)), "p75": float(np.percentile(t.ns_per_element, 75)),
                 "samples": len(t.ns_per_element), "loops": t.loops,
                 "bytes_per_record": self.bytes_per_record.get(t.layout, float("nan"))} for t in self.timings]
        cols = ["layout", "operation", "n", "ns_per_element", "p25", "p75", "samples", "loops", "bytes_per_record"]
        return pd.DataFrame(rows, columns=cols)

    def relative(self, n: int, to: str = "columns") -> Any:
        """Time per element at size ``n`` divided by layout ``to``'s: rows are layouts, columns operations.

        Raises:
            BadInputError: ``n`` or the reference layout was not measured.
        """
        df = self.to_frame()
        at = df[df.n == n]
        if at.empty:
            raise BadInputError(f"n={n} was not measured; sizes in this sweep: {sorted(set(df.n))}")
        table = at.pivot(index="layout", columns="operation", values="ns_per_element")
        if to not in table.index:
            raise BadInputError(f"layout {to!r} was not measured at n={n}; layouts: {list(table.index)}")
        order = [x for x in LAYOUTS if x in table.index]
        ops = [o for o in OPERATIONS if o in table.columns]
        return (table / table.loc[to]).loc[order, ops]

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON-ready dict with ``kind`` and ``version``."""
        return {"kind": self.KIND, "version": self.VERSION, "seed": self.seed, "complete": self.complete,
                "bytes_per_record": dict(self.bytes_per_record), "fingerprint": jsonable(self.fingerprint),
                "timings": [{"layout": t.layout, "operation": t.operation, "n": t.n, "loops": t.loops,
                             "ns_per_element": list(t.ns_per_element)} for t in self.timings]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LayoutSweep:
        """Rebuild from :meth:`to_dict` output (refuses another kind or a newer version)."""
        cls.check_header(data)
        timings = tuple(Timing(t["layout"], t["operation"], int(t["n"]), tuple(map(float, t["ns_per_element"])),
                               int(t.get("loops", 1))) for t in data["timings"])
        return cls(timings, {k: float(v) for k, v in data.get("bytes_per_record", {}).items()},
                   int(data.get("seed", 0)), bool(data.get("complete", True)), dict(data.get("fingerprint") or {}))

    def __str__(self) -> str:
        if not self.timings:
            return "LayoutSweep: nothing measured"
        df = self.to_frame()
        table = df.pivot_table(index=["operation", "layout"], columns="n", values="ns_per_element", sort=False)
        return "ns per element (median)\n" + table.round(2).to_string()


def _sizes(sizes: Any) -> tuple[int, ...]:
    try:
        out = tuple(sizes)
    except TypeError:
        raise BadInputError(f"sizes={sizes!r}: pass a sequence of record counts, e.g. (1_000, 100_000)") from None
    if not out or any(isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= 10_000_000
                      for n in out):
        raise BadInputError(f"sizes={sizes!r}: each size must be an integer 1–10,000,000 records")
    return tuple(int(n) for n in out)


def _progress(progress: Any, total: int) -> tuple[Callable[[int], None], Callable[[], bool], Callable[[], None]]:
    """Adapt ``progress`` (None/True/False, or an object with ``update(done, total)`` and ``cancelled``)."""
    if progress is None or isinstance(progress, bool):
        progress = show_progress(progress)
    if progress is False:
        return (lambda done: None), (lambda: False), (lambda: None)
    if progress is True:
        bar = new_bar(total, "layouts", "cell")  # text on the terminal inside a labkit report run
        return (lambda done: bar.update(done - bar.n)), (lambda: False), bar.close
    if not callable(getattr(progress, "update", None)):
        raise BadInputError("progress must be True, False, None, or an object with update(done, total) "
                            f"(a labkit.widgets progress); got {type(progress).__name__}")
    return ((lambda done: progress.update(done, total)), (lambda: bool(getattr(progress, "cancelled", False))),
            (lambda: None))


def sweep(layouts: Any = LAYOUTS, operations: Any = OPERATIONS, sizes: Any = SIZES, *, seed: int = 0,
          repeat: int = 5, min_sample_time: float = 0.002, measure_bytes: bool = True,
          progress: Any = None) -> LayoutSweep:
    """Measure each operation on each layout at each size.

    Args:
        layouts, operations: which of :data:`LAYOUTS` and :data:`OPERATIONS` (default: all).
        sizes: record counts (default :data:`SIZES`, 10 … 10⁶). A million Python records take hundreds of
            bytes each (:func:`records.bytes_per_record`); only one layout's data is alive at a time.
        seed: seeds the generated records (the same records for every layout).
        repeat: counted samples per cell (each a calibrated loop lasting ``min_sample_time`` or one call).
        measure_bytes: also measure bytes per record of each layout (on 2,000 records, untimed).
        progress: True or False, None (:mod:`labkit.progress`: a bar inside a notebook), or an object with ``update(done, total)`` and a
            ``cancelled`` attribute: when it turns true the sweep stops and returns what it has
            (``complete=False``).

    Raises:
        BadInputError: an unknown layout or operation, or a size that is not an integer 1–10⁷.
    """
    layouts = tuple(check_choice("layouts", x, LAYOUTS) for x in ([layouts] if isinstance(layouts, str) else layouts))
    ops = tuple(check_choice("operations", x, OPERATIONS)
                for x in ([operations] if isinstance(operations, str) else operations))
    sizes = _sizes([sizes] if isinstance(sizes, int) else sizes)
    if not layouts or not ops:
        raise BadInputError("name at least one layout and one operation")
    total = len(layouts) * len(ops) * len(sizes) + (len(layouts) if measure_bytes else 0)
    update, cancelled, close = _progress(progress, total)
    timings: list[Timing] = []
    per_record: dict[str, float] = {}
    done = 0
    try:
        for n in sizes:
            if cancelled():
                break
            cols = make_columns(n, seed=seed)
            for lay in layouts:
                if cancelled():
                    break
                data = build(lay, cols)
                for op in ops:
                    if cancelled():
                        break
                    r = bench(operation(lay, op), data, name=f"{lay}/{op}", repeat=repeat, warmup=1,
                              min_sample_time=min_sample_time)
                    timings.append(Timing(lay, op, n, tuple(v / n for v in r.samples_ns), r.loops))
                    done += 1
                    update(done)
                del data  # freed by reference counting (no cycles): only one layout's data is alive
        if measure_bytes:
            for lay in layouts:
                if cancelled():
                    break
                per_record[lay] = bytes_per_record(lay, 2_000, seed=seed)
                done += 1
                update(done)
    finally:
        close()
    return LayoutSweep(tuple(timings), per_record, seed, done == total, fingerprint())


def crossover(sizes: Any, slow: Any, fast: Any) -> float | None:
    """Where ``fast`` starts to win: the size at which its time falls below ``slow``'s.

    Args:
        sizes: increasing sizes (e.g. lines per quote); ``slow`` and ``fast`` hold a time per size (medians).

    Returns:
        The first size where ``fast < slow`` after a size where it was not, interpolated on log-log axes
        between the two measured sizes; the smallest size if ``fast`` wins everywhere measured; None if it
        never wins.

    Raises:
        BadInputError: the sequences differ in length, or sizes are not positive and increasing.
    """
    x, a, b = (np.asarray(v, dtype=float) for v in (sizes, slow, fast))
    if not (x.ndim == a.ndim == b.ndim == 1 and len(x) == len(a) == len(b) and len(x) > 0):
        raise BadInputError("crossover needs three equal-length sequences: sizes, slow times, fast times")
    if np.any(x <= 0) or np.any(np.diff(x) <= 0) or np.any(a <= 0) or np.any(b <= 0):
        raise BadInputError("crossover needs positive, increasing sizes and positive times")
    d = np.log(b) - np.log(a)  # below 0: fast wins
    wins = np.flatnonzero(d < 0)
    if wins.size == 0:
        return None
    i = int(wins[0])
    if i == 0:
        return float(x[0])
    lx0, lx1 = np.log(x[i - 1]), np.log(x[i])
    t = d[i - 1] / (d[i - 1] - d[i])  # d crosses zero between the two sizes
    return float(np.exp(lx0 + t * (lx1 - lx0)))
