"""Locality cases: prepared data plus the calls to time, so ``labkit.compare`` can put them side by side.

Each case builds its data once (untimed) and offers zero-argument calls that do the same work in two or three
ways. It also states its napkin math — bytes moved per element, loads per element — so a lab can predict a
ratio before measuring it.

* :class:`FieldSum` — one 8-byte field of a 40-byte record: a NumPy structured array (array-of-structs in
  contiguous memory) against the same values as a column (struct-of-arrays), and a plain copy of the column
  for the memory's own speed (STREAM's convention: bytes read + bytes written).
* :class:`Scattered` — the same Python objects visited in allocation order and in shuffled order, and fresh
  copies made in the shuffled order (locality restored).
* :class:`Loads` — one random walk over cache lines, as dependent loads (a pointer chase: each address comes
  from the previous load) and as independent loads (a gather over the same addresses, known up front).
* :class:`FalseSharing` — two threads on two CPUs, each writing its own counter, the counters 8 bytes apart
  (one cache line, which the two cores must pass back and forth) or a line apart.

Working sets must be well past the last-level cache for the memory to show; :func:`past_llc` gives a size.
The compiled kernels need numba (a labkit dependency); without it :class:`Loads` raises ProbeUnavailable.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from labkit.errors import BadInputError, ProbeUnavailable
from labkit.inputs import integer
from labkit.latency.memory import LINE, cache_sizes
from labkit.layout.records import DTYPE, FIELDS, SlotLine, make_columns
from labkit.measure.machine import can_pin

__all__ = ["FieldSum", "Scattered", "Loads", "FalseSharing", "total_price", "past_llc", "LINE"]

MiB = 1024 * 1024


def past_llc(factor: int = 8, floor: int = 64 * MiB) -> int:
    """A working-set size in bytes well past the last-level cache: ``factor`` × the largest cache sysfs
    reports (at least ``floor``). On a shared VM the usable share of the LLC is smaller than reported."""
    largest = max(cache_sizes().values(), default=8 * MiB)
    return max(floor, factor * largest)


class FieldSum:
    """Sum ``unit_price`` over ``n`` records, stored as records (structured array) and as a column.

    Attributes:
        records: the structured array (AoS): ``n`` records of :data:`records.PAYLOAD_BYTES` bytes, back to back.
        column: the same ``unit_price`` values in their own contiguous int64 array (SoA).
        n: records.

    Calls to time: :meth:`field_sum` (reads the field out of every record), :meth:`column_sum`, and
    :meth:`copy` (``np.copyto`` of the column into a buffer of the same size, allocated and touched here).
    """

    def __init__(self, n: int, *, seed: int = 0) -> None:
        n = integer(n, "n", high=20_000_000)
        cols = make_columns(n, seed=seed)
        self.records = np.empty(n, dtype=DTYPE)
        for f in FIELDS:
            self.records[f] = cols[f]
        self.column = cols["unit_price"]
        self._dst = np.zeros_like(self.column)  # every page touched now, not in the first timed copy
        self.n = n

    def field_sum(self) -> int:
        """Sum the field inside the records (a strided read: 8 useful bytes every 40)."""
        return int(self.records["unit_price"].sum())

    def column_sum(self) -> int:
        """Sum the column (a contiguous read: every byte useful)."""
        return int(self.column.sum())

    def copy(self) -> None:
        """Copy the column into a same-sized buffer: the memory's speed for a plain streaming read + write."""
        np.copyto(self._dst, self.column)

    @property
    def record_bytes(self) -> int:
        """Bytes per record in the structured array."""
        return int(self.records.dtype.itemsize)

    @property
    def field_bytes(self) -> int:
        """Bytes per value of the field."""
        return int(self.column.dtype.itemsize)

    def bytes_moved(self, line: int = LINE) -> dict[str, float]:
        """Napkin math: bytes the memory must deliver per element for each call.

        Memory moves whole cache lines. The column uses every byte of each line: 8 bytes per element.
        The field sum needs 8 bytes of every record, but records shorter than a line share lines, so every
        line is fetched: a record's whole size per element (capped at one line per element when records are
        longer than a line). The copy reads 8 and writes 8 (STREAM counts 16; the hardware may also read the
        destination line before writing it).
        """
        return {"column_sum": float(self.field_bytes), "field_sum": float(min(self.record_bytes, line)),
                "copy": 2.0 * self.field_bytes}

    def predicted_ratio(self, line: int = LINE) -> float:
        """field_sum time / column_sum time, if both run at the memory's speed: the ratio of bytes moved."""
        moved = self.bytes_moved(line)
        return moved["field_sum"] / moved["column_sum"]

    def gb_per_s(self, call: str, ns_per_call: float) -> float:
        """Bandwidth of one call of ``call`` (``field_sum``/``column_sum``/``copy``) timed at ``ns_per_call``:
        bytes moved (as counted by :meth:`bytes_moved`) per ns = GB/s."""
        moved = self.bytes_moved()
        if call not in moved:
            raise BadInputError(f"call={call!r} is not one of {', '.join(moved)}")
        return moved[call] * self.n / ns_per_call

    @property
    def working_set_bytes(self) -> int:
        """Bytes of the structured array (the biggest of the three working sets)."""
        return int(self.records.nbytes)

    def __repr__(self) -> str:
        return (f"FieldSum(n={self.n:,}: records {self.records.nbytes / MiB:.0f} MiB, "
                f"column {self.column.nbytes / MiB:.0f} MiB)")


def total_price(objs: list[Any]) -> int:
    """Sum ``unit_price`` over a list of record objects: the loop :class:`Scattered` times."""
    s = 0
    for o in objs:
        s += o.unit_price
    return s


class Scattered:
    """The same ``n`` objects visited in allocation order and shuffled; and fresh copies in shuffled order.

    Attributes:
        ordered: ``n`` :class:`records.SlotLine` objects (and their int fields), allocated one after another,
            so consecutive list entries sit next to each other in memory.
        shuffled: *the same objects*, in a random order: the loop does identical work, but each step lands
            somewhere else on the heap.
        regathered: copies of ``shuffled``'s objects (and of their price ints) allocated in its order: the
            same visiting order as ``shuffled``, with the memory order of ``ordered``.

    Time :func:`total_price` on each (all three give the same total).
    """

    def __init__(self, n: int, *, seed: int = 0) -> None:
        n = integer(n, "n", high=10_000_000)
        cols = make_columns(n, seed=seed)
        rows = zip(*(cols[f].tolist() for f in FIELDS), strict=True)
        self.ordered = [SlotLine(*t) for t in rows]
        self.shuffled = self.ordered[:]
        random.Random(seed).shuffle(self.shuffled)
        # `+ 0` on a big int makes a new int object: the copy's price lives next to the copy, as it did originally
        self.regathered = [SlotLine(o.product_id, o.qty, o.unit_price + 0, o.discount_bp, o.tax_class)
                           for o in self.shuffled]
        self.n = n

    @staticmethod
    def bytes_per_object() -> int:
        """Bytes one object and its price int occupy (``sys.getsizeof``, plus the GC header of the object)."""
        import sys

        return sys.getsizeof(SlotLine(1, 1, 10**6, 0, 0)) + 16 + sys.getsizeof(10**6)

    def __repr__(self) -> str:
        return f"Scattered(n={self.n:,} objects, ~{self.n * self.bytes_per_object() / MiB:.0f} MiB)"


# --- compiled kernels for Loads (plain Python; compiled on first use, cached on disk by numba) ----------

def _chase_py(nxt, steps, p):  # pragma: no cover - runs compiled
    for _ in range(steps):
        p = nxt[p]
    return p


def _gather_py(nxt, order):  # pragma: no cover - runs compiled
    s = 0
    for i in range(order.size):
        s += nxt[order[i]]
    return s


def _sequential_py(nxt, stride):  # pragma: no cover - runs compiled
    s = 0
    for i in range(0, nxt.size, stride):
        s += nxt[i]
    return s


def _hammer_py(a, slot, again, iters):  # pragma: no cover - runs compiled
    # `again` is `slot` at run time, but the compiler cannot know it: the value must be stored to and loaded
    # from memory on every iteration instead of living in a register
    for _ in range(iters):
        a[slot] = a[again] + 1
    return a[slot]


_KERNELS: dict[str, Any] = {}


def _kernels() -> dict[str, Any]:
    try:
        import numba
    except ImportError as e:
        raise ProbeUnavailable(f"numba is not importable ({e}): loads this short must run compiled, the "
                               "interpreter would hide them. Install it: pip install numba") from e
    if not _KERNELS:
        _KERNELS.update(chase=numba.njit(cache=True)(_chase_py), gather=numba.njit(cache=True)(_gather_py),
                        sequential=numba.njit(cache=True)(_sequential_py),
                        hammer=numba.njit(cache=True, nogil=True)(_hammer_py))
    return _KERNELS


class Loads:
    """One load per cache line of a ``nbytes`` working set, in one random order, three ways.

    :meth:`chase` follows a single random cycle through the lines: each address is the value just loaded,
    so a load cannot start before the previous one finished — one full memory latency each. :meth:`gather`
    visits *the same lines in the same order*, but the addresses come from an index array, so the core can
    have many loads in flight at once (memory-level parallelism). :meth:`sequential` reads one value per
    line in address order, which the hardware prefetcher streams. Each call makes :attr:`n` loads.
    """

    def __init__(self, nbytes: int, *, seed: int = 0) -> None:
        nbytes = integer(nbytes, "nbytes", low=64 * LINE, high=4 << 30)
        self._k = _kernels()
        n = nbytes // LINE
        stride = LINE // 8
        order = np.random.default_rng(seed).permutation(n).astype(np.int64) * stride
        self._nxt = np.zeros(n * stride, dtype=np.int64)  # every page touched here
        self._nxt[order] = np.roll(order, -1)  # line order[i] points to line order[i + 1]: one cycle
        self._order = order
        self._stride = stride
        self.n = n
        self.nbytes = n * LINE
        tiny, at = np.zeros(64, dtype=np.int64), np.arange(0, 64, 8, dtype=np.int64)
        self._k["chase"](tiny, 1, 0), self._k["gather"](tiny, at), self._k["sequential"](tiny, 8)  # compile now

    def chase(self) -> int:
        """Dependent loads: ``p = next[p]``, ``n`` times."""
        return int(self._k["chase"](self._nxt, self.n, int(self._order[0])))

    def gather(self) -> int:
        """Independent loads of the same lines in the same order: ``s += next[order[i]]``."""
        return int(self._k["gather"](self._nxt, self._order))

    def sequential(self) -> int:
        """One load per line in address order."""
        return int(self._k["sequential"](self._nxt, self._stride))

    def __repr__(self) -> str:
        return f"Loads({self.n:,} cache lines, {self.nbytes / MiB:.0f} MiB)"


class FalseSharing:
    """Two threads, pinned to two CPUs, each incrementing its own int64 counter ``writes`` times.

    The compiled loop releases the GIL, so the threads really run at once. :meth:`same_line` puts the two
    counters 8 bytes apart — different variables, one cache line: each write needs the line exclusively, so
    the line travels between the two cores' caches on (nearly) every write. :meth:`padded` puts them a cache
    line apart: no traffic. :meth:`alone` is one thread on its own, for scale. Each call returns the mean ns
    per write of the two threads, timed inside each thread (thread start-up is not counted).
    :meth:`compare` alternates the two placements and hands their samples to ``labkit.compare``.

    Honest limits: the two threads overlap only while both CPUs are free; on a busy machine they are often
    run one after the other, which *hides* false sharing (the ratio drops toward 1) but never fakes it. Two
    vCPUs of a VM may be hyperthreads of one physical core, which share a cache: then little shows either.

    Raises:
        ProbeUnavailable: fewer than two usable CPUs, or no numba.
    """

    def __init__(self, writes: int = 5_000_000) -> None:
        from labkit.measure.machine import usable_cpus

        self.writes = integer(writes, "writes", low=1_000, high=1_000_000_000)
        cpus = usable_cpus()
        if len(cpus) < 2:
            raise ProbeUnavailable(f"false sharing needs two CPUs to run two threads at once; this process may "
                                   f"use {cpus}. Run it on a machine (or container) with at least two")
        self.cpus = (cpus[0], cpus[1])
        self._k = _kernels()
        self._counters = np.zeros(4 * LINE // 8, dtype=np.int64)  # room for two counters a line apart
        self._k["hammer"](self._counters, 0, 0, 1000)  # compile (or load) outside any timing

    def _together(self, gap: int) -> float:
        import os
        import threading

        slots = (0, gap // 8)
        barrier, out = threading.Barrier(2), [0.0, 0.0]

        pin = can_pin()

        def worker(k: int) -> None:
            if pin:
                os.sched_setaffinity(0, {self.cpus[k]})  # this thread only
            barrier.wait()
            t0 = time.perf_counter_ns()
            self._k["hammer"](self._counters, slots[k], slots[k], self.writes)
            out[k] = (time.perf_counter_ns() - t0) / self.writes

        threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return (out[0] + out[1]) / 2

    def same_line(self) -> float:
        """Both threads at once, counters 8 bytes apart (one cache line): mean ns per write."""
        return self._together(8)

    def padded(self) -> float:
        """Both threads at once, counters a cache line apart: mean ns per write."""
        return self._together(LINE)

    def alone(self) -> float:
        """One thread on its own (the calling thread): ns per write."""
        t0 = time.perf_counter_ns()
        self._k["hammer"](self._counters, 0, 0, self.writes)
        return (time.perf_counter_ns() - t0) / self.writes

    def compare(self, rounds: int = 15) -> Any:
        """``rounds`` of padded and same-line runs, alternated, as a ``labkit.Comparison`` (padded is the
        baseline; a ratio above 1 means the shared line made each write slower). Samples are ns per write."""
        from labkit.measure.comparison import compare

        rounds = integer(rounds, "rounds", low=3, high=1_000)
        pad, same = [], []
        for r in range(rounds):
            for call in ((self.padded, self.same_line) if r % 2 == 0 else (self.same_line, self.padded)):
                (pad if call == self.padded else same).append(call())
        return compare(pad, same, names=("padded (a line apart)", "same line (8 bytes apart)"))

    def __repr__(self) -> str:
        return f"FalseSharing({self.writes:,} writes per thread, CPUs {self.cpus})"
