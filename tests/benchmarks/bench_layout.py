"""Benchmark: data layout (lab 04) — every figure a ratio of two calls timed interleaved in one run.

Run it alone (benchmarks never overlap):

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_layout.py [--rounds 15] [--quick]

1. bandwidth — NumPy column sum (bytes read per second) as a fraction of ``np.copyto`` of the same column
   (bytes read + written per second, STREAM's convention), on a working set well past the last-level cache.
   Goal: ≥ 60 %. Beside it, lab 01's sequential-read row measured now.
2. layouts — time per element of each layout and operation as a multiple of NumPy columns', at 10³ and 10⁶
   records (each a ``labkit.compare`` of columns against that layout).
3. cache line — a structured array's field sum against the column sum, and the ratio the cache-line
   arithmetic predicts (bytes moved per element).
4. locality in Python — the same objects summed in allocation order and shuffled, and re-allocated in the
   shuffled order; in cache and well past it.
5. memory-level parallelism — dependent loads (pointer chase) against independent loads (gather) of the same
   lines; and false sharing: two threads writing counters in one cache line against a line apart.
6. /quote end to end over loopback HTTP — aos against soa at 10, 100 and 1,000 synthetic lines (kernels
   only: the lines are built once per process), and a ladder customer's lines from SQLite (conversion
   included).

"×" is how many times slower the candidate is than the baseline (its median over the baseline's), with the
95 % interval of that ratio and the verdict.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

import numpy as np

from labkit import layout
from labkit.measure.comparison import Comparison, compare
from labkit.measure.stats import format_duration

WARNED: set[str] = set()


def line(label: str, c: Comparison, note: str = "") -> None:
    a, b = np.median(c.baseline_ns), np.median(c.candidate_ns)
    lo, hi = c.ci
    print(f"  {label:<46} {format_duration(a):>9} → {format_duration(b):>9}   ×{c.ratio:7.2f} "
          f"(CI {lo:.2f}–{hi:.2f}) {c.verdict}{note}")
    for w in c.warnings:
        key = w.split(":")[0].split("(")[0]
        if key not in WARNED:
            WARNED.add(key)
            print(f"      warning: {w}")


def bandwidth(rounds: int, n: int) -> None:
    from labkit.latency import memory

    case = layout.FieldSum(n)
    print(f"1. bandwidth — {case!r}, column {case.column.nbytes >> 20} MiB "
          f"(past_llc() = {layout.past_llc() >> 20} MiB)")
    c = compare(case.copy, case.column_sum, rounds=rounds, names=("np.copyto", "column sum"))
    copy_gbs = case.gb_per_s("copy", float(np.median(c.baseline_ns)))
    sum_gbs = case.gb_per_s("column_sum", float(np.median(c.candidate_ns)))
    lo, hi = c.ci
    # fraction = (8 n / t_sum) / (16 n / t_copy) = 1 / (2 · ratio)
    print(f"  np.copyto {copy_gbs:5.1f} GB/s (read + written)   column sum {sum_gbs:5.1f} GB/s (read)   "
          f"sum/copy = {sum_gbs / copy_gbs:.0%} (CI {1 / (2 * hi):.0%}–{1 / (2 * lo):.0%}; goal ≥ 60 %)")
    row = memory.seq_read_bandwidth(quick=True)
    print(f"  lab 01's row now: {row.label}: {row.extra['gb_per_s']:.1f} GB/s "
          f"(numba sum of a {row.extra['buffer_bytes'] >> 20} MiB float64 buffer); column sum / that = "
          f"{sum_gbs / row.extra['gb_per_s']:.0%}")
    del case


def layouts(rounds: int, sizes: tuple[int, ...]) -> None:
    print("2. layouts — time per element, × NumPy columns (each line: columns → layout, interleaved)")
    for n in sizes:
        cols = layout.make_columns(n, seed=n)
        for op in layout.OPERATIONS:
            base = layout.build("columns", cols)
            base_fn = functools.partial(layout.operation("columns", op), base)
            for name in layout.LAYOUTS:
                if name == "columns":
                    continue
                data = layout.build(name, cols)
                fn = functools.partial(layout.operation(name, op), data)
                c = compare(base_fn, fn, rounds=rounds, min_sample_time=0.002,
                            names=("columns", name))
                per = f" ({np.median(c.baseline_ns) / n:.2f} → {np.median(c.candidate_ns) / n:.2f} ns/element)"
                line(f"n={n:,} {op:<10} {name}", c, per)
                del data
    print("   bytes per record (tracemalloc, 10,000 records): " + ", ".join(
        f"{name} {layout.bytes_per_record(name, 10_000):.0f}" for name in layout.LAYOUTS))


def cache_line(rounds: int, n: int) -> None:
    case = layout.FieldSum(n)
    print(f"3. cache line — {case!r}: sum of one 8-byte field of a {case.record_bytes}-byte record")
    c = compare(case.column_sum, case.field_sum, rounds=rounds, names=("column", "field"))
    line("column sum → structured field sum", c)
    t_col, t_field = float(np.median(c.baseline_ns)), float(np.median(c.candidate_ns))
    print(f"  predicted (bytes moved per element {case.bytes_moved()['field_sum']:.0f} / "
          f"{case.bytes_moved()['column_sum']:.0f}): ×{case.predicted_ratio():.2f}; measured ×{c.ratio:.2f}; "
          f"delivered {case.gb_per_s('field_sum', t_field):.1f} vs {case.gb_per_s('column_sum', t_col):.1f} GB/s")
    del case


def locality(rounds: int, sizes: tuple[int, ...]) -> None:
    print("4. locality in Python — sum of unit_price over the same slot objects")
    for n in sizes:
        s = layout.Scattered(n)
        tp = layout.total_price
        c = compare(functools.partial(tp, s.ordered), functools.partial(tp, s.shuffled), rounds=rounds,
                    names=("ordered", "shuffled"))
        line(f"n={n:,} ({n * s.bytes_per_object() >> 20} MiB) ordered → shuffled", c,
             f" ({np.median(c.baseline_ns) / n:.1f} → {np.median(c.candidate_ns) / n:.1f} ns/object)")
        c = compare(functools.partial(tp, s.ordered), functools.partial(tp, s.regathered), rounds=rounds,
                    names=("ordered", "regathered"))
        line(f"n={n:,} ordered → re-allocated in shuffled order", c)
        del s


def loads(rounds: int) -> None:
    nbytes = layout.past_llc()
    m = layout.Loads(nbytes)
    print(f"5. memory-level parallelism — {m!r}")
    c = compare(m.gather, m.chase, rounds=rounds, names=("gather", "chase"))
    line("independent (gather) → dependent (chase)", c,
         f" ({np.median(c.baseline_ns) / m.n:.1f} → {np.median(c.candidate_ns) / m.n:.1f} ns/load)")
    c = compare(m.sequential, m.gather, rounds=rounds, names=("sequential", "gather"))
    line("sequential → gather (same lines, random order)", c,
         f" ({np.median(c.baseline_ns) / m.n:.2f} → {np.median(c.candidate_ns) / m.n:.1f} ns/load)")
    del m
    try:
        fs = layout.FalseSharing()
    except Exception as e:  # ProbeUnavailable: say so, never fake it
        print(f"   false sharing: not measured — {e}")
        return
    print(f"   false sharing — {fs!r}; one thread alone: {fs.alone():.2f} ns/write")
    line("counters a line apart → 8 bytes apart (2 threads)", fs.compare(rounds=max(rounds, 15)))


def quote(rounds: int) -> None:
    from labkit.client import Endpoint
    from labkit.service import start
    from labkit.toyshop.dataset import ITEMS_PER_LADDER_ORDER, LADDER

    print("6. /quote end to end (loopback HTTP, one keep-alive connection), aos → soa")
    with start(size="small") as svc:
        shop = Endpoint(svc.url)
        try:
            for n in (10, 100, 1_000):
                a, b = shop.caller(f"/quote?lines={n}&layout=aos"), shop.caller(f"/quote?lines={n}&layout=soa")
                line(f"lines={n:,} (synthetic, kernels + HTTP)", compare(a, b, rounds=rounds * 2, names=("aos", "soa")))
            for cid in (4, 6, 7, 8):
                lines = LADDER[cid] * ITEMS_PER_LADDER_ORDER
                a, b = (shop.caller(f"/quote?customer_id={cid}&layout={x}") for x in ("aos", "soa"))
                line(f"customer {cid}: {lines} lines from SQLite (+ conversion)",
                     compare(a, b, rounds=rounds * 2, names=("aos", "soa")))
        finally:
            shop.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=15, help="interleaved A/B rounds per comparison")
    p.add_argument("--quick", action="store_true", help="smaller working sets and fewer rounds (a smoke run)")
    args = p.parse_args(argv)
    rounds = 8 if args.quick else args.rounds
    big = 4_000_000 if args.quick else 16_000_000
    print(f"bench_layout — {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}, "
          f"caches {layout.locality.cache_sizes()}")
    bandwidth(rounds, big)
    layouts(rounds, (1_000, 100_000) if args.quick else (1_000, 1_000_000))
    cache_line(rounds, big)
    locality(rounds, (10_000, 300_000) if args.quick else (10_000, 1_000_000))
    loads(rounds)
    quote(rounds)
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
