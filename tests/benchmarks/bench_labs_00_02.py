"""The ranges behind the instructor notes of labs 00–02: each lab's key measurements, repeated, as min–max.

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_labs_00_02.py [--times 3] [--lab 01]

Every figure a learner reads off the labs' main cells, measured the way the lab measures it (full settings, not
QUICK), ``--times`` times in one run; printed as ranges, ratios first, with ``labkit doctor``'s verdict on the
machine at the start. The instructor notes (notebooks/instructor/0N_*.md) quote these ranges with the machine
and the date.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable

import labkit
from labkit.measure.machine import Neighbour
from labkit.measure.stats import format_duration as fmt


def span(values: list[float], f: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
    return f"{f(min(values))} – {f(max(values))}" if len(values) > 1 else f(values[0])


def lab00(times: int) -> None:
    n = 20_000
    data = list(range(n))
    pieces = [str(i) for i in range(n)]

    def total(xs):
        return sum(x * x for x in xs)

    def total_map(xs):
        import operator
        return sum(map(operator.mul, xs, xs))

    def concat(parts):
        s = ""
        for part in parts:
            s += part
        return s

    ab, scaling, join_vs, clock = [], [], [], []
    noise: dict[tuple[str, str], list[float]] = {}
    for _ in range(times):
        ab.append(labkit.compare(total, total_map, data, rounds=20, progress=False).ratio)
        quarter = pieces[: n // 4]
        scaling.append(labkit.compare(lambda: concat(quarter), lambda: concat(pieces), rounds=20, progress=False).ratio)  # noqa: B023
        join_vs.append(labkit.compare(concat, lambda p: "".join(p), pieces, rounds=20, progress=False).ratio)
        short = labkit.bench(total, data, repeat=5)
        lengths = {"short": short.loops, "long": max(short.loops, round(20e6 / short.median_ns))}
        runs: dict[tuple[str, str], list[float]] = {(n, k): [] for n in lengths for k in ("none", "thread", "processes")}
        for _ in range(6):  # lab 00 section 3: every condition in turn, block by block
            for (length, kind), samples in runs.items():
                with Neighbour(kind):
                    samples += labkit.bench(total, data, repeat=5, loops=lengths[length]).samples_ns
        for (length, kind), samples in runs.items():
            if kind != "none":
                noise.setdefault((length, kind), []).append(statistics.median(samples)
                                                            / statistics.median(runs[length, "none"]))
        clock.append(labkit.bench(time.perf_counter_ns, repeat=30).median_ns)
    print("lab 00")
    print(f"  total_map / total (compare ratio)          {span(ab)}")
    print(f"  += on N / on N/4 pieces (N = {n:,})        {span(scaling)}  → exponent {span([math.log(r, 4) for r in scaling])}")
    print(f"  join / += on N pieces                      {span(join_vs)}")
    for (length, kind), ratios in noise.items():
        print(f"  median beside {kind:<9} / quiet, {length:<5} samples {span(ratios)}")
    print(f"  one perf_counter_ns() read                 {span(clock, fmt)}")


def lab01(times: int) -> None:
    from labkit import latency, service
    from labkit.exercises import lab01 as ex
    from labkit.toyshop import dataset, db, export
    from labkit.toyshop.catalog import FakeCatalog
    from labkit.toyshop.core.encoding import encode

    path = dataset.ensure("small")
    conn, fake = db.connect(path), FakeCatalog.from_db(path)
    kib_export = len(encode(export.export_naive(conn, fake, 1), "json")) / 1024
    kib_order = len(encode(export.order_detail(conn, fake, 1), "json")) / 1024
    rows: dict[str, list[float]] = {}
    stages: dict[str, list[float]] = {}
    with service.start(size="small") as svc:
        for _ in range(times):
            t = latency.table(quick=False, progress=False)
            ms = lambda key, t=t: t.median_ns(key) / 1e6  # noqa: E731
            for label, v in (("Python call / L1 hit", t.median_ns("python_call") / t.median_ns("mem_l1")),
                             ("DRAM / L1 hit", t.median_ns("mem_dram") / t.median_ns("mem_l1")),
                             ("syscall / Python call", t.median_ns("syscall") / t.median_ns("python_call")),
                             ("hand-off across cores / same core",
                              t.median_ns("context_switch_cross") / t.median_ns("context_switch_pinned")),
                             ("json / orjson, 1 KiB", t.median_ns("json_encode_1k") / t.median_ns("orjson_encode_1k")),
                             ("HTTP GET /health (µs)", t.median_ns("http_health") / 1e3),
                             ("SQLite point query (µs)", t.median_ns("sqlite_point_query") / 1e3)):
                rows.setdefault(label, []).append(v)
            naive, batched = latency.http_samples(svc.url, "/customers/1/export", "/customers/1/export?n1=batched",
                                                  rounds=30)
            model_naive = (ms("http_health") * 201 + 2 * ms("context_switch_cross") + 252 * ms("sqlite_point_query")
                           + kib_export * ms("json_encode_1k"))
            model_batched = (ms("http_health") * 5 + 2 * ms("context_switch_cross") + 4 * ms("sqlite_point_query")
                             + kib_export * ms("json_encode_1k"))
            for label, v in (("export naive, end to end (ms)", naive.median_ns / 1e6),
                             ("export batched / naive (measured)", batched.median_ns / naive.median_ns),
                             ("export naive: measured / model napkin", naive.median_ns / 1e6 / model_naive),
                             ("export batched / naive (model napkin)", model_batched / model_naive)):
                rows.setdefault(label, []).append(v)

            def reference(t, kib=kib_order):
                m = lambda key: t.median_ns(key) / 1e6  # noqa: E731
                return {"queries": 2, "catalog_calls": 1, "db_ms": 2 * m("sqlite_point_query"),
                        "catalog_ms": m("http_health"), "serialize_ms": kib * m("json_encode_1k")}
            g = ex.check(reference, t, url=svc.url, order_id=1, rounds=30)
            rows.setdefault("lab01.check on the reference: passed", []).append(float(g.passed))
            if g.items[-1].detail is not None:
                for r in g.items[-1].detail.itertuples():
                    stages.setdefault(r.stage, []).append(r.measured_ms / r.yours_ms)
    print("lab 01")
    for label, v in rows.items():
        print(f"  {label:<42} {span(v)}")
    for stage, v in stages.items():
        print(f"  GET /orders/1 {stage:<9}: measured / careful napkin  {span(v)}")


def lab02(times: int) -> None:
    from labkit.nplusone import Endpoint, watch
    from labkit.service import start
    from labkit.toyshop import catalog as catalog_mod
    from labkit.toyshop import db
    from labkit.toyshop.export import export_batched, export_naive

    rows: dict[str, list[float]] = {}
    with start(size="small") as svc, start(size="small", catalog_delay_ms=0.5) as far:
        conn = db.connect(svc.db_path)
        shop, far_shop = Endpoint(svc.url), Endpoint(far.url)
        for _ in range(times):
            near = labkit.compare(shop.caller("/customers/1/export?n1=naive"),
                                  shop.caller("/customers/1/export?n1=batched"), rounds=20, progress=False)
            away = labkit.compare(far_shop.caller("/customers/1/export?n1=naive"),
                                  far_shop.caller("/customers/1/export?n1=batched"), rounds=20, progress=False)
            rows.setdefault("naive export, customer 1 (ms)", []).append(statistics.median(near.baseline_ns) / 1e6)
            rows.setdefault("batched / naive, loopback", []).append(near.ratio)
            rows.setdefault("batched / naive, +0.5 ms (emulated)", []).append(away.ratio)
            for d in (0, 1, 2):
                with catalog_mod.CatalogClient(svc.catalog_url, delay_ms=d) as cat:
                    a, b = [], []
                    for _ in range(5):
                        t0 = time.perf_counter_ns()
                        export_naive(conn, cat, 5)
                        a.append(time.perf_counter_ns() - t0)
                        t0 = time.perf_counter_ns()
                        export_batched(conn, cat, 5)
                        b.append(time.perf_counter_ns() - t0)
                rows.setdefault(f"sweep, customer 5, {d} ms: saved (ms)", []).append(
                    (statistics.median(a) - statistics.median(b)) / 1e6)
                rows.setdefault(f"sweep, customer 5, {d} ms: naive / batched", []).append(
                    statistics.median(a) / statistics.median(b))

            def forecast(conn, customer_id, months=200_000, seed=0):
                orders = conn.execute("SELECT id FROM orders WHERE customer_id = ?", (customer_id,)).fetchall()
                totals = [conn.execute("SELECT SUM(quantity * unit_price_cents) FROM order_items WHERE order_id = ?",
                                       (oid,)).fetchone()[0] or 0 for (oid,) in orders]
                rng = random.Random(seed)
                return sorted(sum(rng.choices(totals, k=rng.randint(0, 6))) for _ in range(months))[months // 2]
            with watch(conn) as wf:
                forecast(conn, 6)
            sim = wf.report.wall_ns - wf.report.query_ns
            rows.setdefault("forecast: query share, customer 6 (%)", []).append(100 * wf.report.query_share)
            q = 201 * wf.report.suspects[0].mean_ns
            rows.setdefault("forecast: share at 200 orders, SQLite (%)", []).append(100 * q / (q + sim))
            q = 201 * 500_000
            rows.setdefault("forecast: share at 200 orders, 0.5 ms DB (%)", []).append(100 * q / (q + sim))
        shop.close()
        far_shop.close()
    print("lab 02")
    for label, v in rows.items():
        print(f"  {label:<46} {span(v)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", type=int, default=3)
    ap.add_argument("--lab", choices=("00", "01", "02"))
    a = ap.parse_args()
    from labkit.cli import doctor

    print(time.strftime("%Y-%m-%d %H:%M %Z"))
    doctor.main([])
    for name, fn in (("00", lab00), ("01", lab01), ("02", lab02)):
        if a.lab in (None, name):
            t0 = time.perf_counter()
            fn(a.times)
            print(f"  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
