"""Benchmark: the performance core's variants, each pair measured side by side in one run.

Run it alone (benchmarks never overlap):

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_core.py [--rounds 20] [--quick]

Every line is one ``labkit.compare(baseline, candidate)``: the two callables timed interleaved (A B, B A …)
for ``--rounds`` rounds, each sample a calibrated loop; the ratio is of the medians, with its interval (at the
level the comparison's planned looks allow) and the verdict. "×" is the speed-up of the candidate (baseline median / candidate median).

1. layout: quote pricing aos vs soa (kernels only, both views pre-built) over a range of line counts —
   where the crossover lies — and from SQL-like tuple rows (conversion included) at realistic sizes.
2. buffers: grow vs prealloc, for each layout, small and large.
3. codec: json vs orjson vs msgpack on a 50-product listing (about the size of an export answer), with the
   field selection (as the service does it) and encode() alone.
4. fields: full (32) vs trimmed (8) for each codec.
5. cache: no cache vs local cache for 1,000 config lookups on an 80/20 pattern (in-memory SQLite source).
6. allocations (tracemalloc + a memray census, not timed): per pricing kernel and per encoding variant.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys

from labkit.alloc import count as count_allocations
from labkit.measure.comparison import compare
from labkit.measure.stats import format_duration
from labkit.toyshop.core import (
    QUOTE_KERNELS,
    ConfigCache,
    OrderLines,
    encode_products,
    make_order_lines,
    make_products,
)

WARNINGS: dict[str, int] = {}


def line(label: str, c) -> None:  # c: a labkit Comparison
    import numpy as np

    a, b = np.median(c.baseline_ns), np.median(c.candidate_ns)
    lo, hi = c.ci
    print(
        f"  {label:<44} {format_duration(a):>9} → {format_duration(b):>9}   {c.speedup:6.2f}× "
        f"(ratio {c.ratio:.3f}, CI {lo:.3f}–{hi:.3f}) {c.verdict}"
    )
    for w in c.warnings:
        key = w.split(":")[0].split("(")[0]  # group "busy (load 2.3…)" and "spread (IQR 23 %…)" kinds
        WARNINGS[key] = WARNINGS.get(key, 0) + 1
        if WARNINGS[key] == 1:
            print(f"      warning: {w}")


def run(rounds: int, quick: bool) -> None:
    k = QUOTE_KERNELS
    sizes = (10, 100, 1_000) if quick else (10, 30, 100, 300, 1_000, 10_000, 100_000)
    print("1. layout — quote pricing, aos → soa (kernels only; buffers=grow)")
    for n in sizes:
        lines = make_order_lines(n, seed=n)
        line(f"n={n:,} lines", compare(k["aos", "grow"], k["soa", "grow"], lines, rounds=rounds))
    print("   …from SQL-like tuple rows, conversion included (OrderLines.from_rows + the layout's view + kernel)")
    for n in (100, 1_000) if quick else (30, 100, 1_000, 10_000):
        rows = [tuple(r.values()) for r in make_order_lines(n, seed=n).rows]

        def aos_from_rows(rows=rows):
            return k["aos", "grow"](OrderLines.from_rows(rows))

        def soa_from_rows(rows=rows):
            return k["soa", "grow"](OrderLines.from_rows(rows))

        line(f"n={n:,} rows", compare(aos_from_rows, soa_from_rows, rounds=rounds))

    print("2. buffers — grow → prealloc")
    for layout, ns in (("aos", (100, 10_000)), ("soa", (1_000, 100_000) if not quick else (1_000,))):
        for n in ns:
            lines = make_order_lines(n, seed=n)
            line(f"{layout}, n={n:,} lines", compare(k[layout, "grow"], k[layout, "prealloc"], lines, rounds=rounds))

    products = make_products(50, seed=1)
    print("3. codec — 50 products (encode_products: select fields + encode)")
    for fields in ("full", "trimmed"):
        for codec in ("orjson", "msgpack"):

            def base(fields=fields):
                return encode_products(products, codec="json", fields=fields)

            def cand(codec=codec, fields=fields):
                return encode_products(products, codec=codec, fields=fields)

            size = f"{len(base()) / 1024:.1f} → {len(cand()) / 1024:.1f} KiB"
            line(f"fields={fields}: json → {codec} ({size})", compare(base, cand, rounds=rounds))

    print("   …encode() alone, on a payload built beforehand (the codec's own cost)")
    from labkit.toyshop.core import encode, select_fields

    for fields in ("full", "trimmed"):
        payload = {"items": [select_fields(p, fields) for p in products]}
        for codec in ("orjson", "msgpack"):

            def enc_base(payload=payload):
                return encode(payload, "json")

            def enc_cand(payload=payload, codec=codec):
                return encode(payload, codec)

            line(f"fields={fields}: json → {codec}", compare(enc_base, enc_cand, rounds=rounds))

    print("4. fields — full (32) → trimmed (8)")
    for codec in ("json", "orjson", "msgpack"):

        def full(codec=codec):
            return encode_products(products, codec=codec, fields="full")

        def trimmed(codec=codec):
            return encode_products(products, codec=codec, fields="trimmed")

        size = f"{len(full()) / 1024:.1f} → {len(trimmed()) / 1024:.1f} KiB"
        line(f"codec={codec} ({size})", compare(full, trimmed, rounds=rounds))

    print("5. cache — none → local, 1,000 lookups, 80/20 keys over 20,000 (SQLite :memory: source)")
    from labkit.toyshop.dataset import config_key, skewed_config_keys

    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
    conn.executemany("INSERT INTO config VALUES (?, ?)", ((config_key(i), "v" * 40) for i in range(20_000)))
    keys = skewed_config_keys(1_000, "small")

    def load(key: str) -> str | None:
        row = conn.execute("SELECT value FROM config WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    caches = {mode: ConfigCache(load, mode=mode) for mode in ("none", "local")}

    def lookups(cache: ConfigCache) -> None:
        for key in keys:
            cache.get(key)

    c = compare(lambda: lookups(caches["none"]), lambda: lookups(caches["local"]), rounds=rounds)
    line("none → local (warm)", c)
    s = caches["local"].stats()
    print(f"      local cache: {s.size} keys, hit ratio {s.hit_ratio:.3f} over {s.hits + s.misses:,} lookups")

    print("6. allocations per pricing call (tracemalloc + memray census; not a timing)")
    for n in (100, 10_000):
        lines = make_order_lines(n, seed=n)
        for (layout, buffers), kernel in k.items():
            a = count_allocations(kernel, lines)
            print(
                f"  n={n:<6,} {layout}/{buffers:<8} {a.allocations if a.allocations is not None else '?':>7} "
                f"allocations, alive after {a.blocks:>4} blocks, peak {a.peak_bytes / 1024:>8.1f} KiB, "
                f"GC collections {a.gc_collections}"
            )
    print("   allocations per encode_products call, 50 products")
    for codec in ("json", "orjson", "msgpack"):
        for fields in ("full", "trimmed"):
            a = count_allocations(encode_products, products, codec=codec, fields=fields)
            print(f"  {codec:<8} {fields:<8} {a.allocations if a.allocations is not None else '?':>7} allocations")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=20, help="interleaved A/B rounds per comparison")
    p.add_argument("--quick", action="store_true", help="fewer sizes and rounds (a smoke run)")
    args = p.parse_args(argv)
    rounds = 6 if args.quick else args.rounds
    print(f"bench_core — {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")
    run(rounds, args.quick)
    for key, count in WARNINGS.items():
        if count > 1:
            print(f"({count} comparisons warned: {key.strip()}…)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
