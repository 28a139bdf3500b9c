"""Overload: twice the service's capacity for 20 s -- it stays up, memory stays bounded, the excess fails
visibly, and latency recovers.

Run:  flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_toyshop_overload.py [--quick]
      [--pool N] [--queue N]

``--pool N`` starts the service with ``variants={"pool": N}`` (threads for SQLite work; default 40, the
baseline of the pool-sizing lesson); ``--queue N`` with ``queue=N`` (the service answers 503 beyond pool + N
requests in flight, instead of queueing without bound).

Target: toyshop's GET /orders/{id} (SQLite on the thread pool + one catalog call), service pinned to CPU 0,
generator to CPU 1. Steps, back to back against one process:

1. capacity C: closed loop, concurrency 16, 5 s (what the service completes flat out);
2. baseline: open loop at 0.25 C for 10 s (after a 2-s pause and a 2-s warm-up) -> baseline P50;
3. overload: open loop at 2 C for 20 s, 64 connections, timeout_s=1: what the service cannot serve shows up
   as errors, counted -- ``unsent`` (waited 1 s for a free connection), ``timeout`` (sent, no answer in 1 s)
   or 5xx;
4. recovery: open loop at 0.25 C for 10 s straight after; P50 per 1-s window; "back" is the first window
   that starts three windows in a row within 25 % of the baseline P50.

RSS of the service (app + catalog) is read from /proc before step 3, every 2 s during it (to see whether it
plateaus), and after step 4.

"""

from __future__ import annotations

import sys
import threading
import time
import urllib.request

import numpy as np
from load_common import LOAD_CPU, machine_note, us

import labkit.load
import labkit.service

ORDERS = 3819  # orders in the "small" dataset


def path(i: int) -> str:
    """Request i reads order 1 + i % ORDERS."""
    return f"/orders/{1 + i % ORDERS}"


def windows(r: labkit.load.LoadResult, width_s: float = 1.0) -> list[tuple[float, float, int]]:
    """(window start s, P50 ns, responses) per window of intended send time."""
    out = []
    t = r.start_ns / 1e9
    for k in range(int(np.ceil(t.max() / width_s)) if t.size else 0):
        m = (t >= k * width_s) & (t < (k + 1) * width_s)
        if m.any():
            out.append((k * width_s, float(np.percentile(r.samples_ns[m], 50)), int(m.sum())))
    return out


def mib(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in d.items())


def main() -> int:
    quick = "--quick" in sys.argv
    variants = {k: int(sys.argv[sys.argv.index(f"--{k}") + 1]) for k in ("pool", "queue") if f"--{k}" in sys.argv}
    over_s = 10.0 if quick else 20.0
    print(f"overload — {machine_note()}; service variants: {variants or 'defaults (pool 40, queue unbounded)'}")
    common = {"paths": path, "cpus": {LOAD_CPU}, "progress": False}
    with labkit.service.start(cpus={0}, variants=variants or None) as svc:
        cap = labkit.load.run(svc.url, concurrency=16, duration_s=5, warmup_s=1, **common)
        c = cap.achieved_rate
        low, high = round(0.25 * c), round(2 * c)
        print(f"  capacity (closed loop, c=16): {c:,.0f} req/s, P50 {us(cap.percentiles((50,))[50])}")
        time.sleep(2)  # let the closed loop's queue drain
        base = labkit.load.run(svc.url, rate=low, duration_s=10, warmup_s=2, timeout_s=1, **common)
        base50 = base.percentiles((50,))[50]
        print(f"  baseline at {low:,} req/s: P50 {us(base50)}, P99 {us(base.percentiles((99,))[99])}, "
              f"errors {base.error_count}")
        rss0 = svc.rss_bytes()
        trace: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(2.0):
                trace.append(svc.rss_bytes()["app"])

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        over = labkit.load.run(svc.url, rate=high, duration_s=over_s, timeout_s=1, connections=64, **common)
        stop.set()
        sampler.join()
        # the overload run returns once its backlog is sent or shed and its in-flight requests are answered or
        # timed out (<= 2 s after its last scheduled request); the recovery run starts right then
        rec = labkit.load.run(svc.url, rate=low, duration_s=10, timeout_s=1, **common)
        rss1 = svc.rss_bytes()
        health = urllib.request.urlopen(svc.url + "/health", timeout=5).status
        alive = svc.alive
    print(f"\n  overload at {high:,} req/s (2× capacity) for {over_s:g} s:")
    print(f"    offered {over.offered_rate:,.0f} req/s, achieved {over.achieved_rate:,.0f} req/s "
          f"({over.ok_rate:,.0f} 2xx/s); requests due {over.requests:,}, responses {over.responses:,}")
    kinds = ", ".join(f"{k} {v:,}" for k, v in over.errors.items()) or "none"
    print(f"    failed visibly: {over.error_count:,} ({100 * over.error_rate:.1f} %) — {kinds}")
    p = over.percentiles((50, 99))
    q = over.percentiles((50, 99), ok_only=True)
    print(f"    latency of the answered requests: P50 {us(p[50])}, P99 {us(p[99])}; of the 2xx only: P50 {us(q[50])}, "
          f"P99 {us(q[99])} (≤ 2 × timeout_s by construction)")
    print(f"  service alive after: {alive}; /health → {health}")
    print(f"  RSS before overload: {mib(rss0)}; after recovery: {mib(rss1)} "
          f"(app ×{rss1['app'] / rss0['app']:.2f})")
    print(f"  app RSS every 2 s during the overload: {', '.join(f'{v / 2**20:.0f}' for v in trace)} MiB")
    print(f"\n  recovery at {low:,} req/s, started as the overload run returned (≤ 2 s after its last scheduled "
          f"request), P50 per second vs baseline {us(base50)}:")
    rows = windows(rec)
    ok = [p50 <= 1.25 * base50 for _, p50, _ in rows]
    back_at = next((rows[i][0] for i in range(len(rows) - 2) if all(ok[i:i + 3])), None)
    for start, p50, n in rows:
        print(f"    {start:>4.0f}-{start + 1:<3.0f}s P50 {us(p50):>9} ({p50 / base50:.2f}× baseline, n={n})"
              f"{'  ← back (3 windows in a row within 25 %)' if back_at == start else ''}")
    if back_at is None:
        print("  P50 did NOT return to within 25 % of baseline in 10 s")
    else:
        print(f"  P50 back within 25 % of baseline in the window {back_at:.0f}–{back_at + 1:.0f} s after the overload "
              f"run returned, i.e. at most {back_at + 3:.0f} s after its last scheduled request (goal: within 5 s)")
    print(f"  recovery run errors: {rec.error_count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
