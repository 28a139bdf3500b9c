"""Lab 09's benchmark: what contention costs, measured side by side in one run (ratios, not absolute speeds).

    flock /tmp/perflab-heavy.lock .venv/bin/python tests/benchmarks/bench_contention.py [--quick]

The service half (toyshop's ``stats`` variants: lock wait per request and P99 locked ÷ sharded at several
concurrencies; loop lag with and without the blocking call) lives in its own section of this file, from the
``contention`` branch. The lab half, below, prints:

* **the GIL**: a pure-Python loop in threads and in processes, and NumPy's ``exp`` in threads, one worker per
  usable core — each speed-up over doing the same work one after the other, as a share of the cores, with the
  CPU the rest of the machine used meanwhile (a busy machine lowers every share);
* **lost updates**: ``counter += 1`` and ``d[k] = d.get(k, 0) + 1`` from four threads without a lock, at the
  default switch interval and at 10 µs (how many increments were lost);
* **a lock as a server**: a lock held across an emulated 2 ms I/O by Poisson arrivals at ρ = 0.3, 0.6, 0.85 —
  the mean wait measured against Pollaczek–Khinchine from the measured hold;
* **lab 09's exercise component**: the points ledger under the grader's stress at 4, 8 and 16 threads — the
  baseline's P99 of an add ÷ the reference's, and each one's P90 wait per add in median audit writes.

Nothing here asserts a speed; the lab's instructor notes quote these lines with the machine and the date.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

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
    from labkit.machine import CpuWatch, usable_cpus

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
    """Lab 09's points ledger under the grader's stress: baseline vs reference P99, and the wait per add."""
    from labkit.exercises import lab09

    print(f"\nlab 09's ledger — the grader's stress, ~{adds} adds per thread, {lab09.HOLD_MS} ms audit writes")
    for threads in (4, 8, 16):
        got = {}
        for name, cls in (("baseline", lab09.baseline), ("reference", lab09._Reference)):
            rng = random.Random(threads)
            load = lab09._load(rng, threads, adds)
            run = lab09.stress(cls, load)
            assert run.error is None and lab09._problem(run, load) is None, run.error
            got[name] = (run.p(99), float(np.percentile(run.wait_ns, 90)) / run.write_ns)
        (bp, bw), (rp, rw) = got["baseline"], got["reference"]
        print(f"  {threads:2d} threads: P99 baseline ÷ reference {bp / rp:6.1f}× ({bp / 1e3:,.0f} vs {rp / 1e3:,.0f} µs);"
              f" P90 wait per add: {bw:5.2f} vs {rw:5.2f} median writes")


def lab_half(quick: bool) -> None:
    """Every lab-half line, in one run."""
    gil(600_000 if quick else 3_000_000)
    lost_updates(50_000 if quick else 200_000)
    lock_server(150 if quick else 800)
    ledger(12 if quick else 40)


# ---- service half (contention branch): merged here by the lead ------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = ap.parse_args(argv)
    lab_half(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
