"""Lab 09's service figures in one run: what a metered lock costs, lock wait per request and P99 of each
``stats`` variant at several concurrencies, and the event loop's lag with and without a blocking call.

Run:  flock /tmp/perflab-heavy.lock .venv/bin/python tests/benchmarks/bench_contention.py [--quick]

1. ``labkit.locks.MeteredLock`` beside a bare ``threading.Lock``, uncontended, one thread: an acquire + release
   pair, with no trace collecting and inside one (what the service pays per update) — ns per pair and the ratio.
2. toyshop (pool=40) loaded on ``GET /orders/{id}`` in a closed loop at each concurrency, every ``stats``
   variant in rotated rounds (one variant per run, the same warm process): per variant the lock wait per
   tallied request (``/tally``'s ``lock``, or ``shard_locks`` for sharded), the mean hold, the share of
   acquisitions that waited, the share of the time the lock was held (its utilisation), the service's CPU (cores, from its process's CPU time), throughput and P99; then
   per concurrency the ratios P99 locked ÷ sharded (and ÷ short, ÷ queued) and lock wait locked ÷ sharded
   (medians over the rounds; the spread of the per-round ratio beside it). ``off`` is the no-statistics baseline.
   2b. The same variants in an open loop (Poisson arrivals) at 0.9 × locked's closed-loop throughput at the
   highest concurrency: a rate every variant can serve, where locked's lock runs nearly full — P99 and the ratios.
3. ``GET /recommendations`` at concurrency 8 with ``loop=blocking`` (the recommender's sync call on the event
   loop) and ``loop=thread`` (on a worker thread), rotated rounds: ``/loop``'s worst and P99 lag and the samples
   ≥ 1 ms late, each ratio blocking ÷ thread, and the requests' P99 ratio; the idle loop's lag first.

4. The lab half (lab 09's in-process sections): **the GIL** — a pure-Python loop in threads and in processes,
   NumPy's ``exp`` in threads, one worker per usable core, each speed-up over the same work done one after the
   other as a share of the cores (with the CPU others used meanwhile); **lost updates** — ``counter += 1`` and
   ``d[k] = d.get(k, 0) + 1`` from four threads without a lock, at the default switch interval and at 10 µs;
   **a lock as a server** — a lock held across an emulated 2 ms I/O by Poisson arrivals at ρ = 0.3, 0.6, 0.85,
   the mean wait against Pollaczek–Khinchine from the measured hold; **the exercise's ledger** under the
   grader's stress at 4, 8 and 16 threads — P99 baseline ÷ reference, and the P90 wait per add in median writes.

``--part service`` or ``--part lab`` runs one half. Figures are ratios from this one run; absolute numbers beside
them. The machine's load is printed first.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psutil

import labkit
from labkit.client import Endpoint
from labkit.load import run
from labkit.locks import MeteredLock
from labkit.measure.machine import CpuWatch
from labkit.service import start
from labkit.trace import collect

VARIANTS = ("off", "locked", "short", "sharded", "queued")


def lock_cost(pairs: int) -> None:
    print(f"\n1. An uncontended acquire + release, one thread ({pairs:,} pairs, best of 5)")

    def per_pair(lock) -> float:
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter_ns()
            for _ in range(pairs):
                with lock:
                    pass
            best = min(best, (time.perf_counter_ns() - t0) / pairs)
        return best
    bare = per_pair(threading.Lock())
    metered = per_pair(MeteredLock())
    with collect():
        traced = per_pair(MeteredLock())
    print(f"  threading.Lock {bare:6.0f} ns   MeteredLock {metered:6.0f} ns (×{metered / bare:.1f})   "
          f"MeteredLock with a trace collecting {traced:6.0f} ns (×{traced / bare:.1f})")


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def one_run(svc, proc: psutil.Process, mode: str, concurrency: int | None, run_s: float,
            rate: float | None = None) -> dict:
    """One variant's run: closed loop at ``concurrency``, or open loop (Poisson) at ``rate``."""
    shop = Endpoint(svc.url)
    paths = [f"/orders/{1 + i % 200}?stats={mode}" for i in range(200)]
    load = {"concurrency": concurrency} if rate is None else {"rate": rate, "arrivals": "poisson",
                                                              "connections": 64, "timeout_s": 2.0}
    run(svc.url, duration_s=0.3, paths=paths, progress=False, **load)  # warm, then reset
    shop.get("/tally?reset=1")
    cpu0, t0 = _cpu_s(proc), time.perf_counter()
    r = run(svc.url, duration_s=run_s, paths=paths, progress=False, **load)
    cores = (_cpu_s(proc) - cpu0) / (time.perf_counter() - t0)
    t = shop.get("/tally").json()
    lock = t["shard_locks"] if mode == "sharded" else t["lock"]
    n = max(1, t["total"])
    return {"p99_ms": r.percentiles((99,))[99] / 1e6, "rate": r.achieved_rate, "errors": r.error_count,
            "wait_us": lock["wait_s"] / n * 1e6, "hold_us": lock["hold_s"] / max(1, lock["acquisitions"]) * 1e6,
            "contended": lock["contended"] / max(1, lock["acquisitions"]), "cores": cores,
            "rho": lock["hold_s"] / t["elapsed_s"],
            "exact": mode == "off" or t["total"] == r.ok}


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}" if len(values) > 1 else "one round"


def stats_variants(svc, concurrencies, rounds: int, run_s: float) -> float:
    """Section 2; returns locked's median throughput at the highest concurrency."""
    proc = psutil.Process(svc.pid)
    print(f"\n2. stats variants on /orders/{{id}}, closed loop, {rounds} rotated rounds × {run_s:g} s per variant")
    for c in concurrencies:
        runs: dict[str, list[dict]] = {m: [] for m in VARIANTS}
        for k in range(rounds):
            order = VARIANTS[k % len(VARIANTS):] + VARIANTS[:k % len(VARIANTS)]
            for mode in order:
                runs[mode].append(one_run(svc, proc, mode, c, run_s))
        print(f"  concurrency {c}:")
        for mode in VARIANTS:
            rs = runs[mode]

            def med(key: str, rs=rs) -> float:
                return statistics.median(r[key] for r in rs)
            exact = "exact" if all(r["exact"] for r in rs) else "COUNTS DIFFER"
            lock = "" if mode == "off" else (f"lock wait/request {med('wait_us'):9.1f} µs  hold {med('hold_us'):6.1f}"
                                             f" µs  waited {med('contended'):4.0%}  held {med('rho'):4.0%} of the time  {exact}")
            print(f"    {mode:8} P99 {med('p99_ms'):7.2f} ms  {med('rate'):6,.0f} req/s  service CPU "
                  f"{med('cores'):.2f} cores  {lock}")
        for other in ("sharded", "short", "queued"):
            ratios = [a["p99_ms"] / b["p99_ms"] for a, b in zip(runs["locked"], runs[other], strict=True)]
            print(f"    P99 locked ÷ {other:7} ×{statistics.median(ratios):.2f} (per round {_spread(ratios)})")
        locked, sharded = (statistics.median(r["wait_us"] for r in runs[m]) for m in ("locked", "sharded"))
        if sharded > 0:
            print(f"    lock wait per request locked ÷ sharded ×{locked / sharded:,.0f} ({locked:,.1f} vs "
                  f"{sharded:.3f} µs)")
        else:
            print(f"    lock wait per request: locked {locked:,.1f} µs, sharded none (no shard lock ever waited)")
    return statistics.median(r["rate"] for r in runs["locked"])


def open_loop(svc, rate: float, rounds: int, run_s: float) -> None:
    proc = psutil.Process(svc.pid)
    print(f"\n2b. Open loop (Poisson) at {rate:,.0f} req/s — 0.9 × locked's closed-loop throughput above — "
          f"{rounds} rotated rounds × {run_s:g} s")
    runs: dict[str, list[dict]] = {m: [] for m in VARIANTS}
    for k in range(rounds):
        for mode in VARIANTS[k % len(VARIANTS):] + VARIANTS[:k % len(VARIANTS)]:
            runs[mode].append(one_run(svc, proc, mode, None, run_s, rate=rate))
    for mode in VARIANTS:
        rs = runs[mode]
        wait = "" if mode == "off" else f"  lock wait/request {statistics.median(r['wait_us'] for r in rs):9.1f} µs"
        print(f"    {mode:8} P99 {statistics.median(r['p99_ms'] for r in rs):8.2f} ms  "
              f"{statistics.median(r['rate'] for r in rs):6,.0f} req/s  {sum(r['errors'] for r in rs)} failed  "
              f"service CPU {statistics.median(r['cores'] for r in rs):.2f} cores{wait}")
    for other in ("sharded", "short", "queued"):
        ratios = [a["p99_ms"] / b["p99_ms"] for a, b in zip(runs["locked"], runs[other], strict=True)]
        print(f"    P99 locked ÷ {other:7} ×{statistics.median(ratios):.2f} (per round {_spread(ratios)})")


def loop_lag(svc, rounds: int, run_s: float) -> None:
    shop = Endpoint(svc.url)
    print(f"\n3. The event loop: /recommendations at concurrency 8, {rounds} rotated rounds × {run_s:g} s")
    shop.get("/loop?reset=1")
    time.sleep(1.0)
    idle = shop.get("/loop").json()
    print(f"  idle loop: worst lag {idle['worst_ms']:.2f} ms, P99 {idle['p99_ms']:.2f} ms ({idle['samples']} samples)")
    runs: dict[str, list[dict]] = {"blocking": [], "thread": []}
    for k in range(rounds):
        for loop in (("blocking", "thread") if k % 2 == 0 else ("thread", "blocking")):
            paths = [f"/recommendations?customer_id={1 + i % 300}&loop={loop}" for i in range(300)]
            run(svc.url, concurrency=8, duration_s=0.3, paths=paths, progress=False)
            shop.get("/loop?reset=1")
            r = run(svc.url, concurrency=8, duration_s=run_s, paths=paths, progress=False)
            lag = shop.get("/loop").json()
            runs[loop].append({"p99_ms": r.percentiles((99,))[99] / 1e6, "rate": r.achieved_rate,
                               "worst": lag["worst_ms"], "p99_lag": lag["p99_ms"],
                               "over1": lag["over_ms"]["1"] / max(1, lag["samples"])})
    for loop, rs in runs.items():
        print(f"  loop={loop:8} lag worst {statistics.median(r['worst'] for r in rs):6.2f} ms  P99 "
              f"{statistics.median(r['p99_lag'] for r in rs):6.2f} ms  ≥ 1 ms late "
              f"{statistics.median(r['over1'] for r in rs):4.0%} of samples   requests P99 "
              f"{statistics.median(r['p99_ms'] for r in rs):6.2f} ms at {statistics.median(r['rate'] for r in rs):,.0f}"
              " req/s")
    b, t = runs["blocking"], runs["thread"]
    for key, what in (("worst", "worst lag"), ("p99_lag", "P99 lag"), ("p99_ms", "requests' P99"),
                      ("rate", "throughput")):
        ratios = [x[key] / max(y[key], 1e-6) for x, y in zip(b, t, strict=True)]
        print(f"  {what:14} blocking ÷ thread ×{statistics.median(ratios):.2f} (per round {_spread(ratios)})")


# ---- lab half (lab09 branch) ---------------------------------------------------------------------------------

WORK = "def work(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
_ns: dict = {}
exec(WORK, _ns)
work = _ns["work"]


def _seconds(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _threads(fn, k: int) -> None:
    ts = [threading.Thread(target=fn) for _ in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _processes(k: int, n: int) -> None:
    ps = [subprocess.Popen([sys.executable, "-c", WORK + f"work({n})"]) for _ in range(k)]
    for p in ps:
        p.wait()


def gil(n: int) -> None:
    """Threads vs processes vs NumPy on CPU-bound work, as a share of the cores."""
    from labkit.measure.machine import CpuWatch, usable_cpus

    k = len(usable_cpus())
    arr = np.random.default_rng(0).random(2_000_000)
    reps = max(2, n // 300_000)

    def numpy_work() -> None:
        out = np.empty_like(arr)
        for _ in range(reps):
            np.exp(arr, out=out)

    watch = CpuWatch()
    start = _seconds(lambda: _processes(k, 0))
    rows = {"pure Python, threads": (_seconds(lambda: [work(n) for _ in range(k)]),
                                     _seconds(lambda: _threads(lambda: work(n), k))),
            "pure Python, processes": (_seconds(lambda: [work(n) for _ in range(k)]),
                                       _seconds(lambda: _processes(k, n)) - start),
            "NumPy exp, threads": (_seconds(lambda: [numpy_work() for _ in range(k)]),
                                   _seconds(lambda: _threads(numpy_work, k)))}
    busy = watch.stop()
    print(f"\nthe GIL — {k} workers on {k} usable cores (process start {start * 1e3:.0f} ms subtracted; "
          f"others used {busy['others_cores']:.2f} cores meanwhile)")
    for name, (serial, parallel) in rows.items():
        print(f"  {name:24s} speed-up {serial / parallel:5.2f}×  = {serial / parallel / k:5.2f} of the cores")


def lost_updates(adds: int) -> None:
    """Increments lost without a lock, at two switch intervals."""
    class Box:
        n = 0

    def run(update, interval):
        box, d = Box(), {}

        def hammer():
            for _ in range(adds):
                update(box, d)
        old = sys.getswitchinterval()
        if interval:
            sys.setswitchinterval(interval)
        try:
            _threads(hammer, 4)
        finally:
            sys.setswitchinterval(old)
        return 4 * adds - box.n - d.get("n", 0)

    def plus(box, d):
        box.n += 1

    def get_set(box, d):
        d["n"] = d.get("n", 0) + 1

    print(f"\nlost updates — 4 threads × {adds:,} increments, no lock")
    for name, fn in (("counter += 1", plus), ("d[k] = d.get(k, 0) + 1", get_set)):
        print(f"  {name:24s} default interval: {run(fn, None):>8,} lost · 10 µs interval: {run(fn, 1e-5):>8,} lost")


def lock_server(n: int) -> None:
    """Mean wait for a lock held across a 2 ms I/O, measured against the M/G/1 model from the measured hold."""
    io = 0.002
    print(f"\na lock as a server — {n} Poisson arrivals per ρ, the lock held across a {io * 1e3:g} ms sleep")
    for i, rho in enumerate((0.3, 0.6, 0.85)):
        lock, waits, holds = threading.Lock(), [], []
        gaps = np.random.default_rng(i).exponential(io / rho, n)

        def request(t_arrive, lock=lock, waits=waits, holds=holds):
            with lock:
                t1 = time.perf_counter()
                time.sleep(io)
                holds.append(time.perf_counter() - t1)
            waits.append(t1 - t_arrive)
        with ThreadPoolExecutor(max_workers=64) as pool:
            t = time.perf_counter()
            for g in gaps:
                t += g
                while (now := time.perf_counter()) < t:
                    time.sleep(min(t - now, 0.001))
                pool.submit(request, t)
        s, lam = np.array(holds), n / gaps.sum()
        r = lam * s.mean()
        model = lam * (s ** 2).mean() / (2 * (1 - r)) if r < 1 else float("inf")
        print(f"  ρ = {r:.2f}: measured mean wait {np.mean(waits) * 1e3:6.2f} ms, model {model * 1e3:6.2f} ms "
              f"(measured / model {np.mean(waits) / model:4.2f})")


def ledger(adds: int) -> None:
    """Lab 09's exercise under the grader's stress: the leaderboard's baseline, the sort moved out of the lock, and
    the reference — each writer's P99 and P90 wait (its time minus the audit write's own) side by side."""
    from labkit.exercises import lab09

    class SortsOutside(lab09.baseline):
        def top(self):
            with self._lock:
                pairs = list(self._balance.items())
            return sorted(pairs, key=lambda kv: (-kv[1], kv[0]))[: lab09.TOP]

    print(f"\nlab 09's leaderboard — the grader's stress, ~{adds} adds per writer, {lab09.READERS} readers every "
          f"{lab09.READ_GAP_MS} ms, ~{lab09.CUSTOMERS:,} customers, {lab09.HOLD_MS} ms audit writes")
    for threads in (4, 8, 16):
        got = {}
        for name, cls in (("baseline", lab09.baseline), ("sort outside", SortsOutside), ("reference", lab09._Reference)):
            rng = random.Random(threads)
            load, opening = lab09._load(rng, threads, adds)
            run = lab09.stress(cls, load, opening, think_ms=lab09.HOLD_MS)
            assert run.error is None and lab09._problem(run, load) is None, run.error
            got[name] = (run.p(99), float(np.percentile(run.wait_ns, 90)) / run.write_ns)
        (bp, bw), (sp, sw), (rp, rw) = got["baseline"], got["sort outside"], got["reference"]
        print(f"  {threads:2d} writers: P99 baseline ÷ reference {bp / rp:6.1f}×, baseline ÷ sort-outside {bp / sp:4.1f}× "
              f"({bp / 1e3:,.0f} / {sp / 1e3:,.0f} / {rp / 1e3:,.0f} µs); P90 wait per add {bw:5.2f} / {sw:5.2f} / "
              f"{rw:5.2f} writes")


def lab_half(quick: bool) -> None:
    """Every lab-half line, in one run."""
    gil(600_000 if quick else 3_000_000)
    lost_updates(50_000 if quick else 200_000)
    lock_server(150 if quick else 800)
    ledger(12 if quick else 40)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round of short runs (a smoke run, not the figures)")
    ap.add_argument("--part", choices=("all", "service", "lab"), default="all", help="run one half only")
    a = ap.parse_args()
    rounds, run_s, pairs = (1, 0.6, 50_000) if a.quick else (3, 2.0, 300_000)
    watch = CpuWatch()
    time.sleep(1.0)
    print(f"labkit {labkit.__version__} · {os.cpu_count()} cores · idle machine before the run: {watch.stop()}")
    t0 = time.perf_counter()
    if a.part in ("all", "service"):
        lock_cost(pairs)
        with start(size="small") as svc:
            locked_rate = stats_variants(svc, (1, 4, 16, 32), rounds, run_s)
            open_loop(svc, float(f"{0.9 * locked_rate:.2g}"), rounds, run_s)
            loop_lag(svc, rounds, run_s)
    if a.part in ("all", "lab"):
        lab_half(a.quick)
    print(f"\nwhole run {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
