"""Lab 08's capstone: toyshop's export from the baseline to every fix, the figures of issue 14's closing note.

Run:  flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_capstone.py [--quick] [--part N]

One warm toyshop (order service + catalog, both pinned to CPU 0, the load generator to CPU 1), the catalog at
an **emulated 0.5 ms round trip** (a sleep per call, labelled as such in its responses). The capstone's two
configurations are per-request presets, so they interleave request by request on the same process:

- ``preset=baseline``: n1=naive, io=serial, codec=json, cache=none, log=sync
- ``preset=all``:      n1=join, io=concurrent, codec=orjson, cache=local (product cache), log=queued,
  hop=inline

Parts (each prints ratios measured side by side in this run, absolute numbers beside them):

1. baseline vs all fixes at a fixed rate, customer 4 (5 orders × 4 items; at a low and a higher rate) and
   customer 1 (50 × 4), one run each, alternating with ``/health``: P50 and P99 ratios (goal: ≥ 20× P50 and
   ≥ 10× P99 on customer 4), the floor at that rate (``/health``: at a low rate every request finds the service
   idle, and waking it costs even a request that does nothing), and the cache's hit ratio over the run;
2. the all-fixes export of customer 4 at concurrency 1 against ``/health`` at concurrency 1, alternating
   (goal: ≤ 1.5×), with the export's Server-Timing stages: what stands between the two;
3. the access log, ``log=sync`` vs ``log=queued`` (and ``off``) on the all-fixes export at a fixed rate: P99;
4. the product cache's hit ratio under the dataset's 80/20 product popularity (non-ladder customers, chosen
   uniformly), from a cold start: the first seconds and the rest;
5. process-level settings, outside the preset: the all-fixes export on two processes, default vs ``gc=tuned``
   + ``pool=4`` — separate processes one after the other, **not interleaved**, labelled so.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from load_common import LOAD_CPU, machine_note, us

import labkit
import labkit.load
import labkit.service
from labkit.client import Endpoint
from labkit.toyshop.dataset import LADDER, SIZES

DELAY_MS = 0.5
BASE, ALL = "preset=baseline", "preset=all"
STAGES = ("parse", "wait", "db", "catalog", "compute", "serialize", "log")


def _pcts(r: labkit.load.LoadResult) -> dict[float, float]:
    return r.percentiles((50, 90, 99))


def _cache(url: str) -> dict:
    return Endpoint(url).get("/cache").json()["products"]


def part1(svc: labkit.service.Service, quick: bool) -> None:
    # one run per row: a slow baseline request of customer 1 would otherwise overlap customer 4's. /health rides
    # along in every run, alternating with the two presets: the floor at that rate (what a request that does
    # nothing takes when it finds the service as idle as the export does), so the best any fix could reach there
    # is baseline ÷ floor
    plan = [(4, 15.0, 20.0 if quick else 90.0), (4, 60.0, 15.0 if quick else 60.0), (1, 4.5, 20.0 if quick else 90.0)]
    print(f"1. baseline vs all fixes, catalog at an emulated {DELAY_MS} ms round trip: open loop, one run per "
          "row, the two presets and /health alternating request by request")
    print(f"   {'customer':<9} {'req/s':>6} {'path':<9} {'n':>5} {'P50':>10} {'P90':>10} {'P99':>10}")
    for cid, rate, duration in plan:
        paths = [f"/customers/{cid}/export?{p}" for p in (BASE, ALL)] + ["/health"]
        before = _cache(svc.url)
        r = labkit.load.run(svc.url, rate=rate, duration_s=duration, warmup_s=3.0, paths=paths, connections=16,
                            timeout_s=10.0, cpus={LOAD_CPU}, progress=False)
        after = _cache(svc.url)
        base, fixed, floor = (r.select(p) for p in paths)
        pb, pf, ph = _pcts(base), _pcts(fixed), _pcts(floor)
        for name, x, p in (("baseline", base, pb), ("all", fixed, pf), ("/health", floor, ph)):
            print(f"   {cid:<9} {rate / 3:>6.1f} {name:<9} {x.responses:>5} {us(p[50]):>10} {us(p[90]):>10} "
                  f"{us(p[99]):>10}")
        c = labkit.compare(base, fixed, names=("baseline", "all fixes"))
        hits, misses = after["hits"] - before["hits"], after["misses"] - before["misses"]
        goal = "  (goal ≥ 20× P50, ≥ 10× P99)" if cid == 4 else ""
        print(f"   → customer {cid}, {rate / 3:g} req/s each for {duration:g} s: baseline / all fixes  P50 "
              f"{pb[50] / pf[50]:.1f}×   P99 {pb[99] / pf[99]:.1f}×{goal}; compare: {c.verdict}, ratio {c.ratio:.4f}")
        print(f"     the floor at this rate: baseline / /health P50 {pb[50] / ph[50]:.1f}× (the most any fix could "
              f"give here); all fixes − /health P50 {us(pf[50] - ph[50])}; cache hit ratio "
              f"{hits / max(1, hits + misses):.3f}; errors {r.errors or 'none'}")
    print()


def part2(svc: labkit.service.Service, quick: bool) -> None:
    duration = 10.0 if quick else 40.0
    export = f"/customers/4/export?{ALL}"
    print(f"2. all-fixes export (customer 4) vs /health, closed loop c=1, alternating, {duration:g} s")
    r = labkit.load.run(svc.url, concurrency=1, duration_s=duration, warmup_s=2.0, paths=[export, "/health"],
                        cpus={LOAD_CPU}, progress=False)
    e, h = r.select(export), r.select("/health")
    pe, ph = _pcts(e), _pcts(h)
    c = labkit.compare(h, e, names=("/health", "export (all fixes)"))
    print(f"   /health      n={h.responses:>6}  P50 {us(ph[50]):>9}  P99 {us(ph[99]):>9}")
    print(f"   export (all) n={e.responses:>6}  P50 {us(pe[50]):>9}  P99 {us(pe[99]):>9}")
    print(f"   → export / health: P50 {pe[50] / ph[50]:.2f}×  P99 {pe[99] / ph[99]:.2f}×  (goal ≤ 1.5× at P50); "
          f"compare: {c.verdict}, ratio {c.ratio:.3f}")
    shop = Endpoint(svc.url)
    stages: dict[str, list[float]] = {s: [] for s in (*STAGES, "total", "client")}
    for _ in range(200 if quick else 1000):
        rep = shop.get(export)
        for s in STAGES + ("total",):
            stages[s].append(rep.dur_ms(s) or 0.0)
        stages["client"].append(rep.elapsed_ns / 1e6)
        hrep = shop.get("/health")
        stages.setdefault("health client", []).append(hrep.elapsed_ns / 1e6)
        stages.setdefault("health total", []).append(hrep.dur_ms("total") or 0.0)
    med = {k: statistics.median(v) * 1e3 for k, v in stages.items()}
    named = sum(med[s] for s in STAGES)
    print("   where the export's time goes (median µs per request, Server-Timing; client = send to last byte):")
    print("   " + "  ".join(f"{s} {med[s]:.0f}" for s in STAGES) + f"  | named {named:.0f}, total {med['total']:.0f}, "
          f"client {med['client']:.0f}")
    print(f"   /health: total {med['health total']:.0f}, client {med['health client']:.0f} → outside the handler "
          f"(framework, HTTP, loopback): export {med['client'] - med['total']:.0f}, health "
          f"{med['health client'] - med['health total']:.0f}\n")


def part3(svc: labkit.service.Service, quick: bool) -> None:
    rate, duration = (150.0, 15.0) if quick else (150.0, 60.0)
    paths = [f"/customers/4/export?{ALL}&log={m}" for m in ("sync", "queued", "off")]
    print(f"3. access log on the all-fixes export (customer 4): open loop {rate:g} req/s for {duration:g} s, "
          "sync / queued / off in turn")
    r = labkit.load.run(svc.url, rate=rate, duration_s=duration, warmup_s=3.0, paths=paths, cpus={LOAD_CPU},
                        progress=False)
    p = {m: _pcts(r.select(path)) for m, path in zip(("sync", "queued", "off"), paths, strict=True)}
    for m in p:
        print(f"   log={m:<7} P50 {us(p[m][50]):>9}  P90 {us(p[m][90]):>9}  P99 {us(p[m][99]):>9}")
    c = labkit.compare(r.select(paths[0]), r.select(paths[1]), names=("sync", "queued"))
    print(f"   → sync / queued: P50 {p['sync'][50] / p['queued'][50]:.2f}×  P99 {p['sync'][99] / p['queued'][99]:.2f}×;"
          f" queued / off P99 {p['queued'][99] / p['off'][99]:.2f}×; compare sync vs queued: {c.verdict}, ratio "
          f"{c.ratio:.3f}; errors {r.errors or 'none'}\n")


def part4(quick: bool) -> None:
    rate, duration = (100.0, 20.0) if quick else (100.0, 60.0)
    customers = [c for c in range(1, SIZES["small"][0] + 1) if c not in LADDER]
    rng = random.Random(8)
    order = [rng.choice(customers) for _ in range(int(rate * (duration + 5)))]
    print(f"4. product-cache hit ratio under the 80/20 popularity: a fresh service, {len(customers)} non-ladder "
          f"customers chosen uniformly, preset=all, {rate:g} req/s for {duration:g} s")
    with labkit.service.start(size="small", catalog_delay_ms=DELAY_MS, cpus={0}) as svc:
        shop = Endpoint(svc.url)
        shop.get(f"/customers/{order[0]}/export?{ALL}")  # starts the cache (its first poll preloads the hot set)
        deadline = time.monotonic() + 10
        while _cache(svc.url)["refreshes"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        start = _cache(svc.url)
        marks = []

        def pick(i: int) -> str:
            if i in (int(rate * 2), int(rate * duration) - 1):
                marks.append(_cache(svc.url))  # a snapshot of the totals after ~2 s and at the end
            return f"/customers/{order[i % len(order)]}/export?{ALL}"

        r = labkit.load.run(svc.url, rate=rate, duration_s=duration, paths=pick, cpus={LOAD_CPU}, progress=False)
        end = _cache(svc.url)
    first = marks[0] if marks else start

    def ratio(a: dict, b: dict) -> str:
        h, m = b["hits"] - a["hits"], b["misses"] - a["misses"]
        return f"{h / max(1, h + m):.3f} ({h:,} hits, {m:,} misses)"

    print(f"   capacity {end['capacity']} of {SIZES['small'][1]:,} products, {len(range(int(SIZES['small'][1] * 0.2)))}"
          f" preloaded; size at the end {end['size']}")
    print(f"   hit ratio: first ~2 s {ratio(start, first)}; the rest {ratio(first, end)}; errors {r.errors or 'none'}\n")


def part5(quick: bool) -> None:
    duration = 10.0 if quick else 30.0
    export = f"/customers/4/export?{ALL}"
    print(f"5. process-level settings (separate processes, one after the other — NOT interleaved): closed loop c=1, "
          f"{duration:g} s each")
    rows = {}
    for label, variants in (("default (gc default, pool 40)", {}), ("gc=tuned, pool=4", {"gc": "tuned", "pool": 4})):
        with labkit.service.start(size="small", catalog_delay_ms=DELAY_MS, cpus={0}, variants=variants) as svc:
            Endpoint(svc.url).get(export)
            time.sleep(1.0)
            r = labkit.load.run(svc.url + export, concurrency=1, duration_s=duration, warmup_s=2.0, cpus={LOAD_CPU},
                                progress=False)
        rows[label] = _pcts(r)
        print(f"   {label:<30} P50 {us(rows[label][50]):>9}  P99 {us(rows[label][99]):>9}")
    a, b = rows.values()
    print(f"   → tuned / default: P50 {b[50] / a[50]:.2f}×  P99 {b[99] / a[99]:.2f}× (different processes and "
          "moments: read as indicative only)\n")


def main() -> int:
    quick = "--quick" in sys.argv
    parts = {int(a.split("=")[1]) for a in sys.argv if a.startswith("--part=")} or {1, 2, 3, 4, 5}
    print(f"capstone: toyshop's export, baseline vs every fix — {machine_note()}\n")
    t0 = time.perf_counter()
    if parts & {1, 2, 3}:
        with labkit.service.start(size="small", catalog_delay_ms=DELAY_MS, cpus={0}) as svc:
            shop = Endpoint(svc.url)
            for p in (BASE, ALL):  # warm both paths: the cache starts, preloads, back-fills customers 4 and 1
                for cid in (4, 1):
                    shop.get(f"/customers/{cid}/export?{p}")
            time.sleep(1.0)
            for n, fn in ((1, part1), (2, part2), (3, part3)):
                if n in parts:
                    fn(svc, quick)
    if 4 in parts:
        part4(quick)
    if 5 in parts:
        part5(quick)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
