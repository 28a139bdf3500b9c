"""Coordinated omission: how much a closed loop under-reports P99 when the service stalls.

Run:  flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_load_coordinated_omission.py [--quick]

The target (a raw ASGI app on uvicorn, pinned to CPU 0) freezes its whole event loop for STALL_MS every
STALL_EVERY_S seconds -- an injected stop-the-world pause. Three runs, back to back, same duration:

- open loop at RATE req/s (latency from each request's intended send time, as a user would see it);
- closed loop at concurrency 16 and at concurrency 1 (latency from the actual send, as a naive tool reports).

During a stall a closed loop simply stops sending: only its 1-16 in-flight requests see the stall, so the
stall hardly reaches its P99. In the open loop every request scheduled during the stall waits for it.
Napkin math for the truth: the service is stalled a fraction f = STALL_MS / (1000 × STALL_EVERY_S) of the
time; a request arriving then waits U(0, STALL_MS), so P(wait > x) = f (1 − x / STALL_MS) and the P99 wait
is STALL_MS × (1 − 0.01 / f) when f > 1 %.
"""

from __future__ import annotations

import sys

from load_common import LOAD_CPU, machine_note, raw_server, us

import labkit.load

STALL_MS = 50.0
STALL_EVERY_S = 2.0
RATE = 2000


def main() -> int:
    duration = 10.0 if "--quick" in sys.argv else 20.0
    f = STALL_MS / (1000 * STALL_EVERY_S)
    expected_p99 = STALL_MS * (1 - 0.01 / f) * 1e6
    print(f"coordinated omission — {machine_note()}")
    print(f"service freezes {STALL_MS:g} ms every {STALL_EVERY_S:g} s (stalled {100 * f:.1f} % of the time); "
          f"{duration:g} s per run; napkin-math P99 for a user: ~{us(expected_p99)} (+ service time)\n")
    runs = {}
    with raw_server(stall_ms=STALL_MS, stall_every_s=STALL_EVERY_S) as url:
        target = url + "/health"
        runs["open"] = labkit.load.run(target, rate=RATE, duration_s=duration, warmup_s=0.5, connections=64,
                                       cpus={LOAD_CPU}, progress=False)
        runs["closed16"] = labkit.load.run(target, concurrency=16, duration_s=duration, warmup_s=0.5,
                                           cpus={LOAD_CPU}, progress=False)
        runs["closed1"] = labkit.load.run(target, concurrency=1, duration_s=duration, warmup_s=0.5,
                                          cpus={LOAD_CPU}, progress=False)
    names = {"open": f"open loop {RATE:,}/s", "closed16": "closed loop c=16", "closed1": "closed loop c=1"}
    print(f"  {'run':<22} {'req/s':>8} {'P50':>9} {'P90':>9} {'P99':>9} {'P99.9':>9} {'max':>9}")
    for key, r in runs.items():
        p = r.percentiles((50, 90, 99, 99.9))
        print(f"  {names[key]:<22} {r.achieved_rate:>8,.0f} {us(p[50]):>9} {us(p[90]):>9} {us(p[99]):>9} "
              f"{us(p[99.9]):>9} {us(float(r.samples_ns.max())):>9}")
    o = runs["open"]
    svc99 = o.percentiles((99,), of="service")[99]
    print(f"  {'open loop, from send':<22} {'':>8} {'':>9} {'':>9} {us(svc99):>9}   (same run, timed the naive way)")
    p99_open = o.percentiles((99,))[99]
    print()
    for key in ("closed16", "closed1"):
        p99 = runs[key].percentiles((99,))[99]
        print(f"  {names[key]} under-reports P99 by {p99_open / p99:.1f}× (open-loop P99 {us(p99_open)} vs {us(p99)})")
    print(f"  the open loop's own requests timed from the actual send under-report P99 by {p99_open / svc99:.1f}× "
          "(≈1 when its 64 connections could send every request due in a stall on time; with fewer connections "
          "the late-sent ones would hide their wait)")
    print(f"  open-loop P99 vs napkin math: {p99_open / expected_p99:.2f}× of ~{us(expected_p99)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
