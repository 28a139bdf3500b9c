"""The order service's per-request statistics, as a per-request switch: ``stats=off|locked|short|sharded|queued``.

Every request that does SQLite work is tallied from the pool thread that ran it (in :meth:`Service.blocking
<labkit.toyshop.state.Service.blocking>`'s job, so many threads update at once): one more request for its
endpoint and its variant, the quantity of every order line it read per product (orders and exports), its
SQLite stage's latency into a histogram (wait for a thread + the work, ms buckets :data:`BOUNDS_MS`) and into a
window of the :data:`WINDOW` most recent latencies, of which a summary (mean, P50, P99) is made. The variants
reach the same totals by different paths — lab 09's fixes, one change at a time:

* ``off`` (the default, so no other lab's measurement moves): nothing is tallied.
* ``locked``: the baseline. One process-wide :class:`labkit.locks.MeteredLock` is held while the update does all
  of its work: reading the order lines, naming the products, finding the bucket, merging, and recomputing the
  running summary (NumPy percentiles of the window) on every update. Under the GIL a lock around Python work
  alone rarely makes anyone wait — the GIL already lets one thread run at a time; this one does, because its
  holder lets go of the GIL while holding it (at a switch interval, and inside NumPy's partition), so the other
  pool threads run on until they reach the lock and queue there, and the holder must win the GIL back before
  it can release it. ``bench_contention.py`` prints the wait per request at several concurrencies.
* ``short``: the same update prepared outside the lock (lines, names, bucket); the lock is held only to merge.
  The summary is made when the totals are read, not on every update.
* ``sharded``: each pool thread merges into a shard of its own (under a lock of its own, which only a reader
  ever contends); a read merges the shards.
* ``queued``: the request puts its update on a queue; a background thread merges what has arrived every
  :data:`DRAIN_S` seconds under the process-wide lock. A read takes the same lock and merges whatever is still
  queued first, so it never misses an answered request.

Every variant keeps exact totals under any number of threads (tests hammer them and count). The lock metric of
``Server-Timing`` (``lock;dur=<wait ms>;count=<acquisitions>``) shows each request's waits; ``queued`` takes no
lock on the request path and shows ``count=0``. ``GET /tally`` answers :meth:`Tally.snapshot`.
"""

from __future__ import annotations

import queue
import threading
import time
from bisect import bisect_left
from typing import Any

import numpy as np

from labkit import trace as _trace
from labkit.locks import LockStats, MeteredLock

__all__ = ["Tally", "MODES", "BOUNDS_MS", "WINDOW", "DRAIN_S", "lines_of"]

MODES = ("off", "locked", "short", "sharded", "queued")
#: the latency histogram's bucket upper bounds (ms); one more bucket holds everything above the last.
BOUNDS_MS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
WINDOW = 4096  #: how many recent latencies the running summary covers
DRAIN_S = 0.05  #: how often ``queued``'s background thread merges what has arrived (seconds)
LOCK = "lock"  #: the locks' name: the Server-Timing metric


def lines_of(result: Any) -> tuple[tuple[int, int], ...]:
    """``(product_id, quantity)`` of every order line in an endpoint's SQLite result: an order (``items``) or an
    export (``orders``); none for anything else."""
    if not isinstance(result, dict):
        return ()
    orders = result.get("orders", (result,) if "items" in result else ())
    return tuple((item["product_id"], item["quantity"]) for order in orders for item in order["items"])


class _Totals:
    """The statistics themselves; callers hold the lock that guards them."""

    __slots__ = ("requests", "variants", "units", "histogram", "window", "seen")

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.variants: dict[str, int] = {}
        self.units: dict[str, int] = {}
        self.histogram = [0] * (len(BOUNDS_MS) + 1)
        self.window = np.zeros(WINDOW)  # a ring of the latest latencies (ms)
        self.seen = 0  # latencies ever put in the ring

    @property
    def recent(self) -> np.ndarray:
        """The ring's latencies (in no particular order)."""
        return self.window[:min(self.seen, WINDOW)]

    def merge(self, endpoint: str, variant: str, units: list[tuple[str, int]], bucket: int, ms: float) -> None:
        self.requests[endpoint] = self.requests.get(endpoint, 0) + 1
        self.variants[variant] = self.variants.get(variant, 0) + 1
        mine = self.units
        for key, qty in units:
            mine[key] = mine.get(key, 0) + qty
        self.histogram[bucket] += 1
        self.window[self.seen % WINDOW] = ms
        self.seen += 1

    def add(self, other: _Totals) -> None:
        for mine, theirs in ((self.requests, other.requests), (self.variants, other.variants),
                             (self.units, other.units)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        self.histogram = [a + b for a, b in zip(self.histogram, other.histogram, strict=True)]
        theirs = other.recent
        if len(theirs):  # the merged ring keeps the last WINDOW of the concatenation
            both = np.concatenate([self.recent, theirs])[-WINDOW:]
            self.window[:len(both)] = both
            self.seen = len(both)


def _prepare(lines: tuple[tuple[int, int], ...], elapsed_ns: int) -> tuple[list[tuple[str, int]], int, float]:
    ms = elapsed_ns / 1e6
    return [(str(pid), qty) for pid, qty in lines], bisect_left(BOUNDS_MS, ms), ms


def _summary(recent: np.ndarray) -> dict[str, float | int]:
    n = len(recent)
    if not n:
        return {"window": 0, "mean_ms": 0.0, "p50_ms": 0.0, "p99_ms": 0.0}
    p50, p99 = np.percentile(recent, (50, 99))
    return {"window": n, "mean_ms": float(recent.mean()), "p50_ms": float(p50), "p99_ms": float(p99)}


class _Shard:
    __slots__ = ("totals", "lock", "owner")

    def __init__(self) -> None:
        self.totals, self.lock, self.owner = _Totals(), MeteredLock(LOCK), threading.current_thread()


class Tally:
    """The service's statistics, updated by :meth:`record` in the variant a request picks, read by
    :meth:`snapshot`. Call :meth:`close` at shutdown (it merges what ``queued`` still holds and stops its thread)."""

    def __init__(self) -> None:
        self.lock = MeteredLock(LOCK)  # the process-wide lock of locked, short and queued
        self._totals = _Totals()
        self._running: dict[str, float | int] | None = None  # locked's summary, recomputed on every update
        self._local = threading.local()
        self._shards: list[_Shard] = []
        self._queue: queue.SimpleQueue[tuple[str, tuple[tuple[int, int], ...], int]] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._stopping = threading.Event()
        self._setup = threading.Lock()  # guards the shard list and the worker's start (rare)
        self._since = time.perf_counter()  # the window's start: made or last reset
        self._retired = _summed([])  # the lock stats of shards whose thread has ended

    def record(self, mode: str, endpoint: str, result: Any, elapsed_ns: int) -> None:
        """Tally one request of ``endpoint`` whose SQLite work returned ``result`` after ``elapsed_ns``, the
        ``mode`` way (one of :data:`MODES`; ``off`` does nothing)."""
        if mode == "off":
            return
        if mode == "locked":
            with self.lock:
                units, bucket, ms = _prepare(lines_of(result), elapsed_ns)
                self._totals.merge(endpoint, mode, units, bucket, ms)
                self._running = _summary(self._totals.recent)
        elif mode == "short":
            units, bucket, ms = _prepare(lines_of(result), elapsed_ns)
            with self.lock:
                self._totals.merge(endpoint, mode, units, bucket, ms)
        elif mode == "sharded":
            units, bucket, ms = _prepare(lines_of(result), elapsed_ns)
            shard = getattr(self._local, "shard", None) or self._new_shard()
            with shard.lock:
                shard.totals.merge(endpoint, mode, units, bucket, ms)
        elif mode == "queued":
            if self._worker is None:
                self._start_worker()
            self._queue.put((endpoint, lines_of(result), elapsed_ns))
            _trace.add(LOCK, 0, 0)  # no lock on the request path: the header says so
        else:
            raise ValueError(f"stats mode must be one of {', '.join(MODES)}, got {mode!r}")

    def _new_shard(self) -> _Shard:
        shard = self._local.shard = _Shard()
        with self._setup:
            self._shards.append(shard)
        return shard

    def _start_worker(self) -> None:
        with self._setup:
            if self._worker is None and not self._stopping.is_set():
                self._worker = threading.Thread(target=self._drain_every, name="toyshop-tally", daemon=True)
                self._worker.start()

    def _drain_every(self) -> None:
        while not self._stopping.wait(DRAIN_S):
            with self.lock:
                self._drain()

    def _drain(self) -> None:
        # under self.lock: items leave the queue only here, so none is ever in neither place
        while True:
            try:
                endpoint, lines, elapsed_ns = self._queue.get_nowait()
            except queue.Empty:
                return
            self._totals.merge(endpoint, "queued", *_prepare(lines, elapsed_ns))

    def snapshot(self, reset: bool = False) -> dict[str, Any]:
        """The exact totals so far (``queued``'s still queued updates merged first, the shards merged in), the
        summary of the recent window, the locks' stats and ``elapsed_s``, the seconds they cover (since the tally
        was made or last reset: ``LockStats.utilisation(elapsed_s)``); ``reset`` starts everything again from
        zero."""
        merged = _Totals()
        with self.lock:
            self._drain()
            with self._setup:  # a pool thread that ended (anyio retires idle ones) never writes again:
                shards = [s for s in self._shards if s.owner.is_alive()]  # its shard folds into the totals
                ended, self._shards = [s for s in self._shards if not s.owner.is_alive()], shards
            for shard in ended:
                with shard.lock:
                    self._totals.add(shard.totals)
                self._retired = _summed([self._retired, shard.lock.stats()])
            merged.add(self._totals)
            running = self._running
            for shard in shards:
                with shard.lock:
                    merged.add(shard.totals)
                    if reset:
                        shard.totals = _Totals()
            now = time.perf_counter()
            elapsed, self._since = now - self._since, (now if reset else self._since)
            if reset:
                self._totals, self._running = _Totals(), None
        lock = self.lock.stats()
        shard_stats = [self._retired, *(s.lock.stats() for s in shards)]
        if reset:
            self.lock.reset()
            self._retired = _summed([])
            for s in shards:
                s.lock.reset()
        return {"requests": merged.requests, "units": merged.units, "total": sum(merged.requests.values()),
                "variants": merged.variants,
                "histogram": {"bounds_ms": list(BOUNDS_MS), "counts": merged.histogram},
                "summary": _summary(merged.recent), "running_summary": running,
                "lock": lock.to_dict(), "shard_locks": _summed(shard_stats).to_dict(), "shards": len(shards),
                "elapsed_s": elapsed}

    def close(self) -> None:
        """Stop ``queued``'s thread and merge what is still queued (idempotent)."""
        self._stopping.set()
        worker = self._worker
        if worker is not None:
            worker.join()
        with self.lock:
            self._drain()


def _summed(stats: list[LockStats]) -> LockStats:
    return LockStats("shards", sum(s.acquisitions for s in stats), sum(s.contended for s in stats),
                     sum(s.wait_s for s in stats), sum(s.hold_s for s in stats))
