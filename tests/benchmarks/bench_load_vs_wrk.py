"""labkit.load vs wrk on the same /health endpoint, side by side in one run.

Run:  flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_load_vs_wrk.py [--quick]

1. Concurrency 1 (closed loop, one keep-alive connection): P50 and P99 of labkit and of wrk, interleaved in
   rounds (wrk, labkit, wrk, labkit…) so that the machine's drifting noise hits both alike; the ratio is taken
   per round, and the median of the per-round ratios is reported. Goal: labkit's P50 within 25 % of wrk's.
2. Highest rate: labkit's open loop on a rate ladder (the highest rate it *sustains*: ≥ 97 % of the offered
   rate delivered, no errors, median send lag < 0.5 ms), and the closed-loop maximum throughput of wrk and of
   labkit at 32 connections. Goal: labkit sustains ≥ 5,000 req/s open loop.

Targets: a raw ASGI app on uvicorn (the framework floor: ~30k req/s, so the generator is what limits) and the
toyshop service's /health (Starlette, ~4k req/s: there the service limits both tools). The service is pinned
to CPU 0 and the generator (labkit's thread or wrk) to CPU 1.
"""

from __future__ import annotations

import statistics
import sys
import time

from load_common import LOAD_CPU, machine_note, raw_server, require_wrk, us, wrk

import labkit.load


def c1_rounds(url: str, rounds: int, seconds: float) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"wrk_p50": [], "wrk_p99": [], "lab_p50": [], "lab_p99": []}
    for i in range(rounds):
        order = ("wrk", "lab") if i % 2 == 0 else ("lab", "wrk")  # nobody always goes first
        for who in order:
            if who == "wrk":
                w = wrk(url, connections=1, duration_s=seconds)
                out["wrk_p50"].append(w["p50_us"] * 1e3)
                out["wrk_p99"].append(w["p99_us"] * 1e3)
            else:
                r = labkit.load.run(url, concurrency=1, duration_s=seconds, warmup_s=0.2, cpus={LOAD_CPU},
                                    progress=False)
                p = r.percentiles((50, 99))
                out["lab_p50"].append(p[50])
                out["lab_p99"].append(p[99])
    return out


def report_c1(name: str, d: dict[str, list[float]]) -> float:
    med = {k: statistics.median(v) for k, v in d.items()}
    ratios50 = [a / b for a, b in zip(d["lab_p50"], d["wrk_p50"], strict=True)]
    ratios99 = [a / b for a, b in zip(d["lab_p99"], d["wrk_p99"], strict=True)]
    r50, r99 = statistics.median(ratios50), statistics.median(ratios99)
    print(f"  {name}: P50 wrk {us(med['wrk_p50'])}, labkit {us(med['lab_p50'])} → labkit/wrk {r50:.2f}× "
          f"(rounds: {', '.join(f'{x:.2f}' for x in ratios50)})")
    print(f"  {' ' * len(name)}  P99 wrk {us(med['wrk_p99'])}, labkit {us(med['lab_p99'])} → labkit/wrk {r99:.2f}×")
    return r50


def ladder(url: str, rates: list[int], seconds: float) -> float:
    best = 0.0
    misses = 0
    print(f"    {'offered':>8} {'achieved':>9} {'P50':>9} {'P99':>9} {'lag P50':>9} {'errors':>7}  sustained")
    for rate in rates:
        r = labkit.load.run(url, rate=rate, duration_s=seconds, warmup_s=0.5, cpus={LOAD_CPU}, progress=False,
                            timeout_s=2.0)
        p = r.percentiles((50, 99))
        lag50 = r.percentiles((50,), of="lag")[50]
        ok = r.achieved_rate >= 0.97 * rate and r.error_count == 0 and lag50 < 0.5e6
        print(f"    {rate:>8,} {r.achieved_rate:>9,.0f} {us(p[50]):>9} {us(p[99]):>9} {us(lag50):>9} "
              f"{r.error_count:>7,}  {'yes' if ok else 'no'}")
        if ok:
            best = max(best, rate)
            misses = 0
        else:
            misses += 1
            if misses >= 2:
                break
        time.sleep(0.3)
    return best


def closed_max(url: str, seconds: float) -> tuple[float, float]:
    w = wrk(url, connections=32, duration_s=seconds)
    r = labkit.load.run(url, concurrency=32, duration_s=seconds, warmup_s=0.3, cpus={LOAD_CPU}, progress=False)
    return w["rps"], r.achieved_rate


def main() -> int:
    quick = "--quick" in sys.argv
    require_wrk()
    rounds, c1_s, step_s = (4, 1.0, 2.0) if quick else (8, 2.0, 3.0)
    print(f"labkit.load vs wrk — {machine_note()}")
    summary = {}
    with raw_server() as raw:
        print("\n[1] concurrency 1, closed loop, interleaved rounds (median of rounds)")
        summary["raw_c1"] = report_c1("raw ASGI /health", c1_rounds(raw + "/health", rounds, c1_s))
    import labkit.service

    with labkit.service.start(cpus={0}) as svc:
        summary["toy_c1"] = report_c1("toyshop /health ", c1_rounds(svc.url + "/health", rounds, c1_s))
    with raw_server() as raw:
        print("\n[2] highest rate, raw ASGI /health (the service has ~30k req/s of headroom: the generator limits)")
        best = ladder(raw + "/health", [2000, 4000, 5000, 6000, 8000, 10000, 12000, 14000, 16000, 20000], step_s)
        w_rps, l_rps = closed_max(raw + "/health", step_s)
        summary["best"] = best
        print(f"  labkit open loop sustains {best:,.0f} req/s (goal ≥ 5,000)")
        print(f"  closed loop at 32 connections: wrk {w_rps:,.0f} req/s, labkit {l_rps:,.0f} req/s "
              f"→ labkit/wrk {l_rps / w_rps:.2f}×")
    with labkit.service.start(cpus={0}) as svc:
        print("\n[2b] highest rate, toyshop /health (Starlette: the service limits both tools)")
        best_t = ladder(svc.url + "/health", [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 10000], step_s)
        w_rps, l_rps = closed_max(svc.url + "/health", step_s)
        print(f"  labkit open loop sustains {best_t:,.0f} req/s; closed loop at 32 connections: wrk {w_rps:,.0f}, "
              f"labkit {l_rps:,.0f} req/s → labkit/wrk {l_rps / w_rps:.2f}×")
    print("\nsummary")
    print(f"  c=1 P50 labkit/wrk: raw {summary['raw_c1']:.2f}×, toyshop {summary['toy_c1']:.2f}× (goal ≤ 1.25×)")
    print(f"  labkit sustained open-loop rate: {summary['best']:,.0f} req/s (goal ≥ 5,000)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
