"""Lab 07's figures in one run: the knee and its spread, P99 past it, Little's law, pool sizes, coordinated omission.

Run:  flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_tail.py [--quick]

Everything loads toyshop's ``GET /orders/{id}`` (the lab's endpoint) with the lab's own tools, side by side:

1. The knee: the lab's bounded Poisson sweep (rates from 0.1 to 1.2 × cores / W₁, the knee rule of
   ``labkit.load.Sweep.knee``) run three times on one pool=40 service — the time each sweep took, the knee's rate
   each time and their spread (max / min), and P99 at the knee's step over P99 at the first step.
2. Little's law at three rates below the knee (0.3, 0.55, 0.8 × the last good step): the service's own
   mean in-flight count (exact, from its integral) over λ × W (client's W), and over λ × W inside the app.
3. Coordinated omission: the same stalling mix (a big ``/quote`` about every 0.5 s) in a closed loop at
   concurrency 1 and an open loop at half the knee; P99 from the intended send (corrected) over P99 from the
   actual send (naive) in the open run, and the open run's corrected P99 over the closed loop's.
4. Pool sizes: ``pool_study`` (capacity flat out, P99 at 80 % of pool=40's capacity, every pool at the same
   rate); P99(pool=40) / P99(best pool) from that study, then the same pair in interleaved rounds
   (``tail_rounds`` + ``labkit.compare``: the ratio with its interval).

Figures are ratios from this one run; absolute numbers are printed beside them. The machine's load is printed
first and with each section (``others_cores``: the CPU the rest of the machine used meanwhile).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import labkit
from labkit.client import Endpoint
from labkit.load import Sweep, run, sweep
from labkit.measure.machine import CpuWatch
from labkit.queueing import Services, observe, order_paths, pool_study, tail_rounds

CONNECTIONS = 64


def _p99_ms(r, *, service: bool = False) -> float:
    if service:
        return float(np.percentile(r.service_ns, 99)) / 1e6
    return r.percentiles((99,))[99] / 1e6


def _others(r) -> str:
    cpu = (r.fingerprint or {}).get("cpu") or {}
    return f"others {cpu.get('others_cores', float('nan')):.2f} cores"


def knee_runs(url: str, orders, w1: float, step_s: float, times: int) -> tuple[float, float]:
    """The median knee and the median last good rate of ``times`` sweeps."""
    cores = os.cpu_count() or 1
    ceiling = cores / w1
    rates = sorted({float(f"{f * ceiling:.2g}") for f in np.linspace(0.1, 1.2, 9)})
    common = dict(paths=orders, arrivals="poisson", connections=CONNECTIONS, duration_s=step_s, warmup_s=0.3,
                  pause_s=0.3, max_requests=50_000)
    print(f"\n1. The knee: {times} sweeps over {rates} req/s ({step_s:g} s per step; cores / W1 = {ceiling:,.0f})")
    knees, secs, good = [], [], []
    for k in range(times):
        t0 = time.perf_counter()
        sw = sweep(url, rates, **common)
        if sw.knee() is None or sw.knee().last_good_rate is None:
            more = sweep(url, sw.next_rates(), **common)
            sw = Sweep(tuple(sorted(sw.steps + more.steps, key=lambda r: r.offered_rate)))
        secs.append(time.perf_counter() - t0)
        knee = sw.knee()
        if knee is None:
            print(f"  sweep {k + 1}: no knee up to {max(r.offered_rate for r in sw.steps):,.0f} req/s "
                  f"in {secs[-1]:.1f} s")
            continue
        first, bent = sw.steps[0], sw.steps[knee.index]
        knees.append(knee.rate)
        good.append(knee.last_good_rate or knee.rate)
        print(f"  sweep {k + 1}: {len(sw.steps)} steps in {secs[-1]:.1f} s; knee {knee.rate:,.0f} req/s "
              f"({knee.reason}); P99 at the knee / at {first.offered_rate:,.0f} req/s = "
              f"×{_p99_ms(bent) / _p99_ms(first):.2f} ({_p99_ms(first):.2f} → {_p99_ms(bent):.2f} ms; "
              f"{_others(bent)})")
    if knees:
        print(f"  knee across {len(knees)} sweeps: {', '.join(f'{k:,.0f}' for k in knees)} req/s; spread "
              f"max/min ×{max(knees) / min(knees):.2f}; time to find it median {statistics.median(secs):.1f} s "
              f"(max {max(secs):.1f} s); knee / (cores / W1) = {statistics.median(knees) / ceiling:.2f}")
    if not knees:
        return rates[-1], rates[len(rates) // 2]
    return statistics.median(knees), statistics.median(good)


def little(url: str, orders, good: float, seconds: float) -> None:
    rates = [float(f"{f * good:.2g}") for f in (0.3, 0.55, 0.8)]
    print(f"\n2. Little's law below the knee, at {rates} req/s ({seconds:g} s each)")
    for rate in rates:
        o = observe(url, rate=rate, arrivals="poisson", paths=orders, connections=CONNECTIONS, duration_s=seconds,
                    warmup_s=0.3)
        in_app = o.arrival_rate * o.time_in_app_s
        print(f"  {rate:>7,.0f} req/s: counted / (λ × W client) = ×{o.ratio:.2f}   counted / (λ × W in app) = "
              f"×{o.measured_in_flight / in_app:.2f}   (counted {o.measured_in_flight:.2f}, λW client "
              f"{o.predicted_in_flight:.2f}, λW app {in_app:.2f}; {_others(o.result)})")


def pools(shop: Services, orders, pool_sizes, run_s: float, rounds: int) -> None:
    print(f"\n4. Pool sizes {list(pool_sizes)}: capacity flat out, P99 at 80 % of pool=40's capacity")
    study = pool_study(pool_sizes, paths=orders, reference=40, fractions=(0.8,), capacity_s=max(1.0, run_s / 2),
                       step_s=run_s, warmup_s=0.3, connections=CONNECTIONS, start=shop.start, progress=False)
    for p in study.pools:
        r = study.at(p, 0.8)
        print(f"  pool={p:<3} capacity {study.capacity_of(p):>7,.0f} req/s   P99 at {r.offered_rate:,.0f} req/s "
              f"{_p99_ms(r):>8.2f} ms  ({r.error_count} failed; {_others(r)})")
    best = study.best(0.8)
    p40, pb = _p99_ms(study.at(40, 0.8)), _p99_ms(study.at(best, 0.8))
    print(f"  one run each: P99(pool=40) / P99(best, pool={best}) = ×{p40 / pb:.2f}")
    if best == 40:
        print("  pool=40 was the best of the study: no interleaved rounds needed")
        return
    rate = study.at(40, 0.8).offered_rate
    duel = tail_rounds({"pool=40": shop.get(40).url, f"pool={best}": shop.get(best).url}, rate=rate, paths=orders,
                       rounds=rounds, step_s=run_s, connections=CONNECTIONS, progress=False)
    v = duel.compare(f"pool={best}", "pool=40")
    print(f"  {rounds} interleaved rounds at {rate:,.0f} req/s: median P99(pool=40) / P99(pool={best}) = "
          f"×{v.ratio:.2f} (CI {v.ci[0]:.2f}–{v.ci[1]:.2f}, {v.verdict} for pool=40)")


def omission(url: str, orders, knee: float, w1: float, run_s: float) -> None:
    heavy = "/quote?lines=10000&seed=1"
    every_s = 0.5

    def mix(n):
        return lambda i: heavy if i % n == n - 1 else orders(i)

    stall_ms = Endpoint(url).get(heavy).dur_ms("compute")
    half = float(f"{0.5 * knee:.2g}")
    closed = run(url, concurrency=1, duration_s=run_s, warmup_s=0.3, paths=mix(max(2, round(every_s / w1))),
                 progress=False, name="closed")
    opened = run(url, rate=half, arrivals="poisson", duration_s=run_s, warmup_s=0.3,
                 paths=mix(max(2, round(every_s * half))), connections=CONNECTIONS, timeout_s=2.0, progress=False,
                 name="open")
    corrected, naive = _p99_ms(opened), _p99_ms(opened, service=True)
    print(f"\n3. Coordinated omission: a ~{stall_ms:.0f} ms stall about every {every_s} s, {run_s:g} s per run")
    print(f"  open loop at {half:,.0f} req/s: P99 from intended send / from actual send = ×{corrected / naive:.2f} "
          f"({corrected:.2f} vs {naive:.2f} ms)")
    print(f"  open loop corrected P99 / closed loop P99 = ×{corrected / _p99_ms(closed):.2f} "
          f"({corrected:.2f} vs {_p99_ms(closed):.2f} ms; closed loop achieved {closed.achieved_rate:,.0f} req/s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter steps and runs (a smoke run, not the figures)")
    a = ap.parse_args()
    step_s, little_s, run_s, rounds = (1.0, 1.5, 1.0, 2) if a.quick else (3.0, 4.0, 3.0, 6)
    watch = CpuWatch()
    time.sleep(1.0)
    print(f"labkit {labkit.__version__} · {os.cpu_count()} cores · idle machine before the run: {watch.stop()}")
    t0 = time.perf_counter()
    orders = order_paths()
    with Services() as shop:
        svc = shop.get(pool=40)
        one = run(svc.url, concurrency=1, duration_s=2.0, warmup_s=0.3, paths=orders, progress=False)
        w1 = float(one.service_ns.mean()) / 1e9
        print(f"one request alone (pool=40): W1 = {w1 * 1e3:.2f} ms")
        knee, good = knee_runs(svc.url, orders, w1, step_s, times=3)
        little(svc.url, orders, good, little_s)
        omission(svc.url, orders, knee, w1, 2 * run_s)
        pools(shop, orders, (1, 2, 4, 8, 40), run_s, rounds)
    print(f"\nwhole run {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
