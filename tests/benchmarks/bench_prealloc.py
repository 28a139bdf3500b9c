"""Lab 03's figures: allocator calls per request, growth vs preallocation, bytes building, and what counting costs.

Run it alone (benchmarks never overlap):

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_prealloc.py [--quick]

1. **Per request, baseline vs fixed**, on ``/statement`` (``buffers=grow`` vs ``prealloc``, a synthetic
   statement and ladder customer 8's 800 lines) and on ``/quote`` (``buffers=grow`` vs ``prealloc``): allocator
   calls and bytes per request from a service started with ``alloc=census`` (counts only: that service serves
   one request at a time under a memray tracker), and — in the same run — the end-to-end P50 ratio from
   ``labkit.compare`` interleaving the two variants against an uncounted service.
2. **np.append in a loop vs a preallocated fill** at 10³, 10⁴, 10⁵ elements: the ratio grows with n.
3. **bytes += vs a reused bytearray** (and a fresh bytearray, ``b"".join``) on an export-sized payload.
4. **What counting costs**: a census of an empty block, and the wall time of ``labkit.alloc.count`` of a call
   against the bare call (the ratio).
5. **What the ``faults`` metric costs a request**: the same requests interleaved (``labkit.compare``) against
   the service as it is and a twin started with ``PERFLAB_FAULTS=off`` (no fault counting), with the faults the
   counted one reports — the metric must not move the other labs' numbers.

Every ratio is from one run, side by side; tracing is never timed as if it were the code.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import labkit
from labkit import alloc
from labkit.alloc import Census
from labkit.client import Endpoint
from labkit.service import start
from labkit.toyshop import core
from labkit.toyshop.dataset import ensure
from labkit.toyshop.db import connect
from labkit.toyshop.statement import statement_rows, synthetic_statement


def _per_request(ep: Endpoint, path: str, requests: int) -> tuple[int, int]:
    ep.get(path)  # warm-up: caches and this process's buffers, not counted
    calls, size = [], []
    for _ in range(requests):
        r = ep.get(path)
        calls.append(r.count("alloc"))
        size.append(r.count("alloc_bytes"))
    return int(statistics.median(calls)), int(statistics.median(size))


def per_request(quick: bool, rounds: int) -> None:
    print("1. allocator calls per request (alloc=census service) and the end-to-end P50 ratio (uncounted service)")
    lines = 1_000 if quick else 2_000
    pairs = [(f"/statement?lines={lines}", "buffers"), ("/statement?customer_id=8", "buffers"),
             ("/quote?lines=10000", "buffers"), ("/quote?customer_id=8", "buffers")]
    with start(size="small", variants={"alloc": "census"}) as counting, start(size="small") as plain:
        counter, shop = Endpoint(counting.url), Endpoint(plain.url)
        print(f"  {'endpoint':<28} {'calls grow':>11} {'→ prealloc':>11} {'ratio':>7}   {'bytes grow':>12} "
              f"{'→ prealloc':>12} {'ratio':>7}   {'P50 ratio (95% CI), verdict':<34}")
        for path, switch in pairs:
            sep = "&" if "?" in path else "?"
            g = _per_request(counter, f"{path}{sep}{switch}=grow", 3)
            p = _per_request(counter, f"{path}{sep}{switch}=prealloc", 3)
            c = labkit.compare(shop.caller(f"{path}{sep}{switch}=grow"), shop.caller(f"{path}{sep}{switch}=prealloc"),
                               rounds=rounds, names=("grow", "prealloc"), progress=False)
            print(f"  {path:<28} {g[0]:>11,} {p[0]:>11,} {p[0] / g[0]:>7.3f}   {g[1]:>12,} {p[1]:>12,} "
                  f"{p[1] / g[1]:>7.4f}   {c.ratio:.3f} ({c.ci[0]:.3f}–{c.ci[1]:.3f}), {c.verdict}")
    print("  (reference, seed 000: one request's temporaries 120 → 18, 6.7×, after reusing the output buffer and\n"
          "   avoiding boxing; here each line's str, bytes and ints are allocated whichever way the body is\n"
          "   assembled, so the calls barely move while the bytes collapse)\n")


def _by_append(values: list[float]) -> np.ndarray:
    out = np.empty(0)
    for v in values:
        out = np.append(out, v * 2.0)
    return out


def _by_prealloc(values: list[float]) -> np.ndarray:
    out = np.empty(len(values))
    for i, v in enumerate(values):
        out[i] = v * 2.0
    return out


def appends(quick: bool, rounds: int) -> None:
    print("2. np.append in a loop vs a preallocated fill (ratio = append / prealloc; it should grow with n)")
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    ratios = []
    for n in sizes:
        values = np.arange(n, dtype=float).tolist()
        r = rounds if n <= 10_000 else 6  # 6 pairs: the fewest a sign test can call significant; seconds each
        c = labkit.compare(_by_append, _by_prealloc, values, rounds=r, max_rounds=r, min_sample_time=0.02,
                           warmup=1, names=("np.append", "prealloc"), progress=False)
        a, b = float(np.median(c.baseline_ns)), float(np.median(c.candidate_ns))
        ratios.append(a / b)
        bar = "#" * max(1, round(np.log2(a / b) * 4))
        print(f"  n={n:>7,}: np.append {a / 1e6:>10.2f} ms, prealloc {b / 1e6:>8.3f} ms, ratio {a / b:>8.1f}× "
              f"({c.verdict}) {bar}")
    grows = all(x < y for x, y in zip(ratios, ratios[1:], strict=False))
    print(f"  the ratio {'grows' if grows else 'does NOT grow'} with n: "
          + " → ".join(f"{r:.0f}×" for r in ratios) + "\n")


def bytes_building(rounds: int) -> None:
    print("3. building an export-sized body (customer 8's 800-line statement) — ratio = candidate / bytes +=")
    conn = connect(ensure("small"))
    parts = core.statement_grow(*statement_rows(conn, 8)).splitlines(keepends=True)
    reused = bytearray()

    def concat(parts: list[bytes]) -> bytes:
        body = b""
        for p in parts:
            body += p
        return body

    def fresh_bytearray(parts: list[bytes]) -> bytes:
        body = bytearray()
        for p in parts:
            body += p
        return bytes(body)

    def reused_bytearray(parts: list[bytes]) -> bytes:
        pos = 0
        for p in parts:
            reused[pos:pos + len(p)] = p
            pos += len(p)
        return bytes(memoryview(reused)[:pos])

    def join(parts: list[bytes]) -> bytes:
        return b"".join(parts)

    print(f"  payload: {len(parts)} lines, {sum(map(len, parts)):,} bytes")
    for f in (reused_bytearray, fresh_bytearray, join):
        assert f(parts) == concat(parts)
        c = labkit.compare(concat, f, parts, rounds=rounds, names=("bytes +=", f.__name__), progress=False)
        print(f"  {f.__name__:<17} ratio {c.ratio:.4f} ({c.ci[0]:.4f}–{c.ci[1]:.4f}), {c.speedup:>6.1f}× faster, "
              f"{c.verdict}")
    c = labkit.compare(fresh_bytearray, reused_bytearray, parts, rounds=rounds, names=("fresh", "reused"),
                       progress=False)
    print(f"  reused vs fresh bytearray: ratio {c.ratio:.3f} ({c.ci[0]:.3f}–{c.ci[1]:.3f}), {c.verdict}\n")


def counting_cost(quick: bool) -> None:
    print("4. what counting costs (wall time; counting is never used to time code)")
    empty = []
    for _ in range(5 if quick else 15):
        t0 = time.perf_counter_ns()
        with Census():
            pass
        empty.append(time.perf_counter_ns() - t0)
    print(f"  a census of an empty block (memray tracker start, stop, read back): median "
          f"{statistics.median(empty) / 1e6:.1f} ms over {len(empty)}")
    customer, rows = synthetic_statement(800)
    for name, fn, args in (("statement_prealloc(800 lines)", core.statement_prealloc, (customer, rows)),
                           ("statement_grow(800 lines)", core.statement_grow, (customer, rows))):
        bare = []
        for _ in range(15):
            t0 = time.perf_counter_ns()
            fn(*args)
            bare.append(time.perf_counter_ns() - t0)
        counted = []
        for _ in range(3):
            t0 = time.perf_counter_ns()
            alloc.count(fn, *args, calls=1, warmup=0)
            counted.append(time.perf_counter_ns() - t0)
        b, c = statistics.median(bare), statistics.median(counted)
        print(f"  {name:<30} bare {b / 1e6:>7.2f} ms; alloc.count(calls=1, warmup=0) {c / 1e6:>8.1f} ms — "
              f"{c / b:>6.0f}× the bare call")
    print()


def _uncounted_service():
    os.environ["PERFLAB_FAULTS"] = "off"
    try:
        return start(size="small")
    finally:
        del os.environ["PERFLAB_FAULTS"]


def faults_cost(rounds: int) -> None:
    print("5. what the faults metric costs a request (ratio = counted / uncounted; 1 = nothing)")
    from contextlib import nullcontext

    from labkit.toyshop import faults
    from labkit.trace import collect

    def empty() -> None:  # a request's trace with an empty stretch …
        with collect(), nullcontext():
            pass

    def counted() -> None:  # … and with a counted one (two getrusage calls and the add)
        with collect(), faults.counted():
            pass
    c = labkit.compare(empty, counted, rounds=rounds, names=("empty", "counted"), progress=False)
    per = float(np.median(c.candidate_ns)) - float(np.median(c.baseline_ns))
    print(f"  one counted stretch in process: +{per / 1e3:.2f} µs ({c.verdict}); a pool request has two")
    with _uncounted_service() as off_svc, _uncounted_service() as off2_svc, start(size="small") as on_svc:
        off, off2, on = Endpoint(off_svc.url), Endpoint(off2_svc.url), Endpoint(on_svc.url)
        for path in ("/health", "/orders/1", "/customers/8/export", "/statement?lines=3000&buffers=grow"):
            assert off.get(path).count("faults") is None, "the twin counts faults: PERFLAB_FAULTS=off not seen"
            faults_seen = [on.get(path).count("faults") for _ in range(5)]
            for name, other in (("counted", on), ("A/A: uncounted", off2)):
                c = labkit.compare(off.caller(path), other.caller(path), rounds=rounds, names=("uncounted", name),
                                   progress=False)
                print(f"  {path:<36} {name:<15} P50 {float(np.median(c.baseline_ns)) / 1e3:>9.1f} µs → "
                      f"{float(np.median(c.candidate_ns)) / 1e3:>9.1f} µs, ratio {c.ratio:.3f} "
                      f"({c.ci[0]:.3f}–{c.ci[1]:.3f}), {c.verdict}")
            print(f"  {'':<36} faults per request (counted service): {statistics.median(faults_seen):,.0f}")
    print("  (two processes differ by more than the metric: read a counted row against the A/A row below it)\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=20, help="interleaved A/B rounds per comparison")
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer rounds (a smoke run)")
    a = p.parse_args(argv)
    rounds = 6 if a.quick else a.rounds
    print(f"bench_prealloc — {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}\n")
    per_request(a.quick, rounds)
    appends(a.quick, rounds)
    bytes_building(rounds)
    counting_cost(a.quick)
    faults_cost(rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
