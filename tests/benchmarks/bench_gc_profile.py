"""Lab 06's figures in one run: what profiling costs, gc=tuned vs default, objects per request before/after.

Run:  flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_gc_profile.py [--quick]

1. Overhead of tracing one export request (customer 7, in process, the catalog in process too), traced vs bare,
   in alternating rounds of calls: tracemalloc; memray with Python allocators traced, and without.
2. py-spy at its default rate (100 samples/s, blocking): the service's P50 under a fixed open-loop load, with
   py-spy attached vs not, alternating rounds against one warm service.
3. gc=tuned vs gc=default: two service processes, the same fixed load in alternating rounds — the P99 ratio,
   and the largest GC pause each process had (a process-level comparison).
4. Objects per request: allocator calls of one export request with codec=json vs codec=orjson (the lab's
   "fewer temporaries" fix), and the exercise's baseline vs its reference.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import labkit
from labkit import alloc, profile
from labkit.exercises import lab06
from labkit.measure.stats import ratio_of_medians
from labkit.service import start
from labkit.toyshop import catalog as catalog_mod
from labkit.toyshop import db
from labkit.toyshop.export import export_batched
from labkit.toyshop.wiring import encode, trim_export

CUSTOMER = 7
PATH = f"/customers/{CUSTOMER}/export"


def _block_ms(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e3


def _ratio(label: str, bare: list[float], traced: list[float], unit: str = "ms/call") -> None:
    est = ratio_of_medians(bare, traced, paired=True, seed=0)
    print(f"  {label:<44} ×{est.ratio:.2f}  (95% CI {est.ci[0]:.2f}–{est.ci[1]:.2f}; bare "
          f"{statistics.median(bare):.2f} {unit}, traced {statistics.median(traced):.2f} {unit})")


def in_process_overhead(rounds: int, calls: int) -> None:
    import memray

    from labkit.toyshop.dataset import ensure

    dbp = ensure("small", quiet=True)
    conn, fake = db.connect(dbp), catalog_mod.FakeCatalog.from_db(dbp)

    def handle() -> bytes:
        return encode(trim_export(export_batched(conn, fake, CUSTOMER), "full"), "json", schema="export")

    for _ in range(3):
        handle()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gc-"))
    sides: dict[str, list[float]] = {k: [] for k in ("bare", "tracemalloc", "memray+py", "memray")}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for side in order:
            if side == "bare":
                sides[side].append(_block_ms(handle, calls))
            elif side == "tracemalloc":
                tracemalloc.start(1)
                try:
                    sides[side].append(_block_ms(handle, calls))
                finally:
                    tracemalloc.stop()
            else:
                dest = memray.FileDestination(str(tmp / f"{side}-{r}.bin"), overwrite=True, compress_on_exit=False)
                with memray.Tracker(destination=dest, trace_python_allocators=side == "memray+py"):
                    sides[side].append(_block_ms(handle, calls))
                (tmp / f"{side}-{r}.bin").unlink()
    print(f"1. tracing one export request in process (customer {CUSTOMER}; {rounds} rounds × {calls} calls, "
          "alternating; traced ÷ bare time per call):")
    _ratio("tracemalloc (1 frame)", sides["bare"], sides["tracemalloc"])
    _ratio("memray, Python allocators traced", sides["bare"], sides["memray+py"])
    _ratio("memray, system allocator only", sides["bare"], sides["memray"])
    conn.close()


def py_spy_overhead(rounds: int, seconds: float, rate: float) -> None:
    with start(size="small", variants={"n1": "batched"}) as svc:
        labkit.load.run(svc.url + PATH, rate=rate, duration_s=1.0, progress=False)  # warm
        bare, spied = [], []
        for r in range(rounds):
            for side in (("bare", "spied") if r % 2 == 0 else ("spied", "bare")):
                if side == "bare":
                    res = labkit.load.run(svc.url + PATH, rate=rate, duration_s=seconds, warmup_s=0.5, progress=False)
                    bare.append(res.percentiles((50,))[50] / 1e6)
                else:
                    _, res = profile.under_load(svc, PATH, load_rate=rate, duration_s=seconds)
                    spied.append(res.percentiles((50,))[50] / 1e6)
    print(f"\n2. py-spy attached at its default rate (100/s), service P50 at {rate:g} req/s, {rounds} rounds of "
          f"~{seconds:g} s alternating (spied ÷ bare):")
    _ratio("py-spy record (blocking, the default)", bare, spied, unit="ms P50")


def gc_tuned(rounds: int, seconds: float, rate: float) -> None:
    with start(size="small", variants={"n1": "batched"}) as a, \
            start(size="small", variants={"n1": "batched", "gc": "tuned"}) as b:
        for s in (a, b):
            labkit.load.run(s.url + PATH, rate=rate, duration_s=1.0, progress=False)
        cmp = alloc.compare_processes(a, b, PATH, rate=rate, duration_s=seconds, rounds=rounds, progress=False)
    p99 = cmp.p99
    worst = [max(cmp.max_pause_ns[s]) / 1e6 for s in (0, 1)]
    print(f"\n3. gc=tuned vs gc=default, two processes, {PATH} at {rate:g} req/s, {rounds} alternating rounds of "
          f"{seconds:g} s (process-level):")
    print(f"  P99 tuned ÷ default: ×{p99.ratio:.2f} (95% CI {p99.ci[0]:.2f}–{p99.ci[1]:.2f}, {p99.verdict}); "
          f"P50 ×{cmp.p50.ratio:.2f} ({cmp.p50.verdict})")
    print(f"  largest GC pause: default {worst[0]:.2f} ms, tuned {worst[1]:.2f} ms; collections per round "
          f"(median) {statistics.median(cmp.pauses[0]):.0f} vs {statistics.median(cmp.pauses[1]):.0f}; "
          f"gen-2 in all rounds {sum(cmp.gen2[0])} vs {sum(cmp.gen2[1])}")


def objects_per_request(calls: int) -> None:
    from labkit.toyshop.dataset import ensure

    dbp = ensure("small", quiet=True)
    conn, fake = db.connect(dbp), catalog_mod.FakeCatalog.from_db(dbp)

    def handle(codec: str) -> bytes:
        return encode(trim_export(export_batched(conn, fake, CUSTOMER), "full"), codec, schema="export")

    c = alloc.compare(lambda: handle("json"), lambda: handle("orjson"), calls=calls, names=("json", "orjson"))
    orders = lab06.make_orders(11)
    e = alloc.compare(lab06.baseline, lab06.EXERCISE._solution, orders, calls=calls, names=("baseline", "reference"))
    print(f"\n4. objects per request (allocator calls, memray census, medians of {calls} calls):")
    print(f"  export, codec=orjson ÷ codec=json: ×{c.ratio('allocations'):.3f} ({c.baseline.allocations:,} → "
          f"{c.candidate.allocations:,}); bytes ×{c.ratio('bytes_allocated'):.3f}; GC runs per call "
          f"{c.baseline.gc_collections} → {c.candidate.gc_collections}")
    print(f"  exercise, reference ÷ baseline: ×{e.ratio('allocations'):.3f} ({e.baseline.allocations:,} → "
          f"{e.candidate.allocations:,})")
    conn.close()


def main() -> int:
    quick = "--quick" in sys.argv
    import os

    print(f"lab 06 — GC and allocation profiling — {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"Python {sys.version.split()[0]}; nothing pinned (every figure is a ratio of sides measured "
          "alternately)\n")
    t0 = time.perf_counter()
    in_process_overhead(rounds=6 if quick else 12, calls=5 if quick else 10)
    py_spy_overhead(rounds=4 if quick else 8, seconds=3.0 if quick else 6.0, rate=8)
    gc_tuned(rounds=6 if quick else 10, seconds=3.0 if quick else 6.0, rate=8)
    objects_per_request(calls=3 if quick else 5)
    print(f"\n(run took {time.perf_counter() - t0:.0f} s; threads alive at the end: {threading.active_count()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
