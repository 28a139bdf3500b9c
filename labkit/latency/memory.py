"""CPU caches and memory: the pointer-chase curve, a branch mispredict, sequential read bandwidth.

These rows are a few nanoseconds each, far below what one line of Python costs (see the ``python_*`` rows),
so they run in code compiled by numba. Without numba they are reported as unavailable, never measured
through the interpreter and presented as cache latencies.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from labkit.latency._harness import Samples, method_of, unavailable
from labkit.measure.machine import UNPINNED, pinned, usable_cpus
from labkit.measure.stats import format_bytes

__all__ = ["pointer_chase", "cache_rows", "branch_mispredict", "seq_read_bandwidth", "chase_sizes",
           "cache_sizes", "chase_steps"]

KiB, MiB = 1024, 1024 * 1024
LINE = 64  # bytes per cache line on x86-64 and most ARM cores
NO_NUMBA = ("numba is not importable ({err}), and these rows need compiled code: through the interpreter "
            "every step costs tens of ns and hides the cache. Install it: pip install numba")


# --- kernels (plain Python, compiled on first use; module level so numba can cache them on disk) ---------

def _build_cycle_py(nlines, stride, seed):  # pragma: no cover - runs compiled
    """Sattolo's algorithm: a random permutation that is one single cycle through every cache line."""
    np.random.seed(seed)
    perm = np.arange(nlines)
    for i in range(nlines - 1, 0, -1):
        j = np.random.randint(0, i)
        perm[i], perm[j] = perm[j], perm[i]
    a = np.zeros(nlines * stride, np.uint64)
    for i in range(nlines):
        a[i * stride] = perm[i] * stride
    return a


def _chase_py(a, steps, p):  # pragma: no cover - runs compiled
    # Compiled for unsigned indices only (see _CHASE_SIGNATURE): with a signed index numba must handle a
    # negative one (a[-1]), and that check (shift, and, a two-register address) sits in the dependent chain
    # between two loads, adding cycles to every step. Unsigned, each step is one load, as in C.
    for _ in range(steps):
        p = a[p]
    return p


_CHASE_SIGNATURE = "uint64(uint64[::1], int64, uint64)"


def _filter_py(a, threshold, out):  # pragma: no cover - runs compiled
    # A conditional *store*: compilers keep it a real branch (they cannot turn it into a cmov or SIMD).
    j = 0
    for i in range(a.size):
        if a[i] >= threshold:
            out[j] = i
            j += 1
    return j


def _sum_py(a):  # pragma: no cover - runs compiled
    s = 0.0
    for i in range(a.size):
        s += a[i]
    return s


_KERNELS: dict[str, Any] = {}


def _kernels() -> dict[str, Any]:
    """Compile (or load from numba's on-disk cache) the kernels; raises ImportError without numba."""
    import numba  # imported every call so a test can hide it with sys.modules["numba"] = None

    if not _KERNELS:
        _KERNELS.update(
            build=numba.njit(cache=True)(_build_cycle_py),
            chase=numba.njit(_CHASE_SIGNATURE, cache=True)(_chase_py),
            filter=numba.njit(cache=True)(_filter_py),
            sum=numba.njit(cache=True, fastmath=True)(_sum_py),
        )
    return _KERNELS


def cache_sizes() -> dict[int, int]:
    """Data/unified cache size in bytes per level, read from sysfs for CPU 0 ({} when unknown)."""
    out: dict[int, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        return out
    for entry in entries:
        try:
            def read(name: str, entry: str = entry) -> str:
                with open(f"{base}/{entry}/{name}") as f:
                    return f.read().strip()
            if read("type") == "Instruction":
                continue
            size = read("size")
            mult = {"K": KiB, "M": MiB}.get(size[-1], 1)
            out[int(read("level"))] = int(size.rstrip("KM")) * mult
        except (OSError, ValueError):
            continue
    return out


def _row_sizes(max_bytes: int) -> dict[str, int]:
    """Working set chosen for each named row: well inside L1, inside L2, past L2, and the largest (DRAM)."""
    sizes = cache_sizes()
    l1, l2 = sizes.get(1, 32 * KiB), sizes.get(2, 1 * MiB)
    return {"mem_l1": max(4 * KiB, min(16 * KiB, l1 // 2)), "mem_l2": max(l1 * 2, l2 // 4),
            "mem_llc": 2 * l2, "mem_dram": max_bytes}


def chase_sizes(quick: bool = False, max_bytes: int = 256 * MiB) -> list[int]:
    """Working-set sizes of the curve: powers of two from 16 KiB to ``max_bytes`` (fewer when quick)."""
    sizes, s = [], 16 * KiB
    while s <= max_bytes:
        sizes.append(s)
        s *= 4 if quick else 2
    sizes += [v for v in _row_sizes(max_bytes).values() if v <= max_bytes]
    return sorted(set(sizes))


def pointer_chase(sizes: list[int] | None = None, *, quick: bool = False, repeats: int | None = None,
                  sample_ns: float | None = None, seed: int = 1) -> tuple[Samples, ...]:
    """Dependent pointer chase over a random single cycle of cache lines, one row per working-set size.

    Method: for each working set, an array holds one pointer (an unsigned 64-bit index) per 64-byte cache
    line; the pointers form one random cycle (Sattolo's algorithm), so every load depends on the previous one
    and the hardware prefetcher cannot guess the next line. A numba-compiled loop follows the chain for a
    calibrated number of steps (about 0.2–0.3 ms per sample, short so that few samples are cut by the
    scheduler); a sample is the elapsed time divided by the steps. The array is built (every page touched)
    and the chain walked once before timing, and the thread is pinned to one CPU.
    Overhead: one call into compiled code per sample (well under a µs) spread over 10^3–10^5 steps, and the
    loop's own counter, which runs beside the loads, not between them. The index is unsigned so that no
    negative-index check sits in the chain: each step compiles to one load, as a C chase does
    (``tests/benchmarks/bench_latency_chase.py`` holds every row against a C ``-O2`` chase over the same
    array and prints the ratios). Large sets also pay TLB misses, which is part of what a random DRAM access
    costs a real program — how many depends on the page size: with transparent huge pages ``always`` the
    kernel backs most of a big set with 2 MiB pages, with ``madvise`` (many distributions' default) it keeps
    4 KiB pages. Each row records the mode it ran under (``extra["thp"]``).
    """
    method = method_of(pointer_chase)
    sizes = sizes or chase_sizes(quick)
    try:
        k = _kernels()
    except ImportError as e:
        return tuple(unavailable(f"chase_{format_bytes(s).replace(' ', '')}",
                                 f"dependent load, {format_bytes(s)} working set", "cpu",
                                 NO_NUMBA.format(err=e), method, working_set_bytes=s) for s in sizes)
    # Short samples, many of them: a sample the scheduler interrupts is an outlier the median ignores,
    # while one long sample would almost surely be interrupted on a busy machine.
    repeats = repeats or (15 if quick else 41)
    sample_ns = sample_ns or (2e5 if quick else 3e5)
    out = []
    thp = thp_mode()
    with pinned({usable_cpus()[0]}) as on_core:
        for size in sizes:
            a = k["build"](max(2, size // LINE), LINE // 8, seed)
            steps, p = chase_steps(k["chase"], a, sample_ns)
            samples = []
            for _ in range(repeats):
                t0 = time.perf_counter_ns()
                p = k["chase"](a, steps, p)
                samples.append((time.perf_counter_ns() - t0) / steps)
            del a
            out.append(Samples(f"chase_{format_bytes(size).replace(' ', '')}",
                               f"dependent load, {format_bytes(size)} working set", "cpu", tuple(samples),
                               method, None if on_core else UNPINNED,
                               {"working_set_bytes": size, "steps": steps, "thp": thp}))
    return tuple(out)


def thp_mode() -> str | None:
    """The transparent-huge-page mode in force (``always``, ``madvise`` or ``never``), or None if unknown."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as f:
            text = f.read()
    except OSError:
        return None
    chosen = [w.strip("[]") for w in text.split() if w.startswith("[")]
    return chosen[0] if chosen else None


def chase_steps(chase: Any, a: np.ndarray, sample_ns: float) -> tuple[int, int]:
    """Warm a chain (walk it once, every line touched) and find the steps one sample of ``sample_ns`` needs.

    Returns ``(steps, p)``: the step count, and where the walk stands (continue from there).
    """
    p = chase(a, min(len(a) // (LINE // 8), 1 << 20), 0)
    t0 = time.perf_counter_ns()
    p = chase(a, 20_000, p)
    est = max(0.1, (time.perf_counter_ns() - t0) / 20_000)
    return int(min(max(1_000, sample_ns / est), 5_000_000)), p


_ROW_LABELS = {"mem_l1": "L1 cache hit (dependent load)", "mem_l2": "L2 cache hit (dependent load)",
               "mem_llc": "past L2: last-level cache (dependent load)",
               "mem_dram": "main memory (dependent load)"}


def cache_rows(curve: tuple[Samples, ...]) -> tuple[Samples, ...]:
    """Pick the named L1/L2/LLC/DRAM rows out of a pointer-chase curve (nearest working set at or below)."""
    if not curve:
        return ()
    wanted = _row_sizes(max(c.extra.get("working_set_bytes", 0) for c in curve))
    rows = []
    for key, size in wanted.items():
        below = [c for c in curve if c.extra.get("working_set_bytes", 0) <= size] or [curve[0]]
        src = max(below, key=lambda c: c.extra.get("working_set_bytes", 0))
        ws = src.extra.get("working_set_bytes", 0)
        label = f"{_ROW_LABELS[key]}, {format_bytes(ws)}"
        rows.append(Samples(key, label, "cpu", src.samples_ns, src.method, src.note, dict(src.extra)))
    return tuple(rows)


def branch_mispredict(*, quick: bool = False, n: int | None = None, repeats: int | None = None,
                      seed: int = 2) -> Samples:
    """Cost of one branch mispredict: the same filter loop over sorted vs shuffled bytes.

    Method: a numba-compiled loop stores the index of every element >= 128 (a conditional store, which the
    compiler keeps as a real branch). Over sorted data the branch is almost always predicted; over the
    same values shuffled (reshuffled before every sample, so the predictor cannot learn the sequence) it is
    a coin flip, so about half the elements mispredict. A sample is
    (time shuffled − time sorted) / n / 0.5, from back-to-back runs. The loop's own work cancels out in
    the difference; what remains is the mispredict penalty (the pipeline flush and refetch).
    If the two runs cost the same, the compiler removed the branch and the row is marked unavailable.
    """
    method = method_of(branch_mispredict)
    try:
        k = _kernels()
    except ImportError as e:
        return unavailable("branch_mispredict", "branch mispredict", "cpu", NO_NUMBA.format(err=e), method)
    n = n or (1 << 17 if quick else 1 << 18)
    repeats = repeats or (15 if quick else 31)
    rng = np.random.default_rng(seed)
    shuffled = rng.integers(0, 256, n).astype(np.int32)
    ordered = np.sort(shuffled)
    out = np.empty(n, np.int64)
    samples, per_sorted, per_shuffled = [], [], []
    with pinned({usable_cpus()[0]}) as on_core:
        k["filter"](ordered, 128, out)
        k["filter"](shuffled, 128, out)
        for _ in range(repeats):
            shuffled = rng.permutation(shuffled)  # fresh order each time: no predictor can learn it
            t0 = time.perf_counter_ns()
            k["filter"](ordered, 128, out)
            t1 = time.perf_counter_ns()
            k["filter"](shuffled, 128, out)
            t2 = time.perf_counter_ns()
            per_sorted.append((t1 - t0) / n)
            per_shuffled.append((t2 - t1) / n)
            samples.append(((t2 - t1) - (t1 - t0)) / n / 0.5)
    extra = {"sorted_ns_per_element": float(np.median(per_sorted)),
             "shuffled_ns_per_element": float(np.median(per_shuffled)), "elements": n}
    if np.median(samples) < 0.5:
        return unavailable("branch_mispredict", "branch mispredict", "cpu",
                           "sorted and shuffled data cost the same: the compiler made this loop branchless, "
                           "so no mispredict is visible to measure", method, **extra)
    return Samples("branch_mispredict", "branch mispredict", "cpu", tuple(samples), method,
                   None if on_core else UNPINNED, extra)


def seq_read_bandwidth(*, quick: bool = False, nbytes: int | None = None,
                       repeats: int | None = None) -> Samples:
    """Sequential read from memory: time to read 1 MiB, from full passes over a buffer larger than the LLC.

    Method: a float64 buffer (64 MiB quick, 256 MiB full), allocated and filled before timing, is summed
    by a numba loop the compiler vectorises; a sample is one full pass, reported as ns per MiB read (GB/s
    in ``extra``). One thread, so this is what one core can stream, not the machine's total bandwidth.
    Overhead: one call per pass of tens of ms: negligible. Without numba the pass is numpy's ``sum``, which
    reads the same bytes but may be slower than the memory; the row says so in its note.
    """
    method = method_of(seq_read_bandwidth)
    nbytes = nbytes or ((64 if quick else 256) * MiB)
    repeats = repeats or (5 if quick else 9)
    buf = np.ones(nbytes // 8, dtype=np.float64)
    note = None
    try:
        summer = _kernels()["sum"]
    except ImportError as e:
        summer = np.sum
        note = (f"numba is not importable ({e}): measured with numpy's sum instead, which may be "
                "compute-bound below the memory's speed; install numba for the real figure")
    samples, gbs = [], []
    with pinned({usable_cpus()[0]}) as on_core:
        summer(buf)
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            summer(buf)
            dt = time.perf_counter_ns() - t0
            samples.append(dt * MiB / nbytes)
            gbs.append(nbytes / dt)
    del buf
    if not on_core:
        note = f"{note}; {UNPINNED}" if note else UNPINNED
    return Samples("mem_seq_read_1mb", "read 1 MiB sequentially from memory", "cpu", tuple(samples),
                   method, note, {"gb_per_s": float(np.median(gbs)), "buffer_bytes": nbytes})
