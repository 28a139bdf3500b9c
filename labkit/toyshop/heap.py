"""toyshop's long-lived heap: a stock snapshot reloaded in the background (process switch ``heap``).

A real service holds data that lives as long as the process and is *refreshed* now and then — a warmed cache,
a price list, a stock table loaded every few seconds. Each reload builds a new copy beside the old one and
swaps it in: a heap's worth of new objects that all survive, which is what makes CPython's collector run
full (oldest-generation) collections, each traversing every tracked object of the process. Seed 000 met the
same thing on the JVM (``docs/references.md``, S000-62: a periodic bulk load into the heap caused
full-GC spikes in the P99; moving that data off-heap removed them).

* ``none``: no snapshot (every other lab's service).
* ``objects``: :data:`ROWS` small lists ``[product_id, stock, price_cents]`` plus the list holding them: every
  one a container the collector tracks (CPython untracks dicts and tuples holding only atoms, not lists).
* ``flat``: the same three columns as NumPy arrays — a handful of objects the collector never traverses:
  the "off-heap" fix in Python terms.

The snapshot is reloaded every :data:`RELOAD_S` seconds, start to start, on a daemon thread. Each reload's own
work is kept small (the rows come from a list display of ints; the flat columns are whole-array operations), so
what a reload costs the service's requests is mostly the collections it triggers, not the rebuild: time both
with ``tests/benchmarks/bench_gc_heap.py``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

__all__ = ["StockHeap", "ROWS", "RELOAD_S", "MODES"]

#: rows in the snapshot (each a tracked list with ``heap=objects``).
ROWS = 300_000
#: seconds between reloads.
RELOAD_S = 1.0
MODES = ("none", "objects", "flat")


def _build(mode: str, rows: int, version: int) -> Any:
    if mode == "objects":
        return [[i, version, 100 + i % 50] for i in range(rows)]
    ids = np.arange(rows, dtype=np.int64)
    return ids, np.full(rows, version, dtype=np.int64), 100 + ids % 50


class StockHeap:
    """The snapshot and its reloader; ``stats()`` says what it holds and how often it was reloaded."""

    def __init__(self, mode: str = "none", rows: int = ROWS, every_s: float = RELOAD_S) -> None:
        if mode not in MODES:
            raise ValueError(f"heap mode {mode!r}: use one of {', '.join(MODES)}")
        self.mode, self.rows, self.every_s = mode, rows, every_s
        self.reloads = 0
        self.last_build_ms = 0.0
        self._data: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StockHeap:
        """Build the first snapshot now and reload it every ``every_s`` seconds (nothing for ``none``)."""
        if self.mode != "none" and self._thread is None:
            self.reload()
            self._thread = threading.Thread(target=self._run, name="heap-reloader", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reloading (the snapshot stays)."""
        self._stop.set()

    def reload(self) -> None:
        """Build a new snapshot beside the old one and swap it in (the old one is freed when swapped out)."""
        t0 = time.perf_counter()
        data = _build(self.mode, self.rows, self.reloads + 1)
        self.last_build_ms = (time.perf_counter() - t0) * 1e3
        self._data = data
        self.reloads += 1

    def _run(self) -> None:
        # a fixed schedule, start to start: a reload begins every ``every_s`` seconds however long the last one
        # took (its collections included), so any window of ``every_s`` holds the start of one; waiting
        # ``every_s`` *after* each build would stretch the period by the build and let such a window miss it
        due = time.monotonic()
        while True:
            due = max(due + self.every_s, time.monotonic())  # an overrun starts the next at once, never a burst
            if self._stop.wait(due - time.monotonic()):
                return
            self.reload()

    def stock(self, product_id: int) -> int:
        """The snapshot's stock of one product row (``KeyError`` with ``heap=none``, or out of range)."""
        if self._data is None or not 0 <= product_id < self.rows:
            raise KeyError(product_id)
        return int(self._data[product_id][1] if self.mode == "objects" else self._data[1][product_id])

    def stats(self) -> dict[str, Any]:
        """mode, rows, reload period, reloads so far and the last build's wall time (ms, collections included)."""
        return {"mode": self.mode, "rows": self.rows if self.mode != "none" else 0, "reload_s": self.every_s,
                "reloads": self.reloads, "last_build_ms": round(self.last_build_ms, 3)}
