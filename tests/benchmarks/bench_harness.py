"""labkit's own harness, measured: span overhead, and how often compare() gets its verdict right.

Goals: span enter+exit ≤ 1 µs (issue 2). compare() with its default sequential plan (issue 17), 100 times
each: A against itself says "faster" or "slower" at most 5 times (the α = 5 % it promises over all its looks);
A against a 20 %-slower twin says "slower" at least 95 times; and the median wall time per verdict, which
should stay far below a pyperf run of the same pair (reference, issue 17: pyperf's default run took ~29 s on
this machine kind). Prints the figures; exits 1 when a goal is missed.

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_harness.py [--runs 100]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time

import labkit
from labkit.trace import collect, span


def work(n: int = 3000) -> int:
    return sum(range(n))


def twin() -> int:
    return work(3600)  # 20 % more iterations of the same loop


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="comparisons per pair")
    runs = ap.parse_args(argv).runs
    ok = True
    # --- span overhead: enter + exit inside an active trace, beside a bare pair of clock reads
    def with_span() -> None:
        with span("x"):
            pass

    def bare_pair() -> None:
        time.perf_counter_ns()
        time.perf_counter_ns()

    def empty() -> None:
        pass

    with collect() as trace:
        s = labkit.bench(with_span, repeat=20)
        trace._spans.clear()
    b = labkit.bench(bare_pair, repeat=20)
    e = labkit.bench(empty, repeat=20)
    net = s.median_ns - e.median_ns
    print(f"span enter+exit: {s.median_ns:.0f} ns per use ({net:.0f} ns beyond an empty call); "
          f"bare pair of perf_counter_ns(): {b.median_ns:.0f} ns ({b.median_ns - e.median_ns:.0f} ns net); "
          f"span / bare pair = {s.median_ns / b.median_ns:.2f}×   goal ≤ 1000 ns: {'met' if s.median_ns <= 1000 else 'MISSED'}")
    ok &= s.median_ns <= 1000

    # --- compare() against itself and a 20 %-slower twin, `runs` times each, default settings
    labkit.compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])  # import scipy before the clock starts
    for label, cand, want in (("itself", work, None), ("a 20%-slower twin", twin, "slower")):
        verdicts: collections.Counter[str] = collections.Counter()
        looks: collections.Counter[int] = collections.Counter()
        ratios, walls = [], []
        for i in range(runs):
            t0 = time.perf_counter()
            c = labkit.compare(work, cand, seed=i)
            walls.append(time.perf_counter() - t0)
            verdicts[c.verdict] += 1
            looks[c.look] += 1
            ratios.append(c.ratio)
        if want is None:
            wrong = verdicts["faster"] + verdicts["slower"]
            met = wrong <= runs * 0.05
            goal = f"'faster' or 'slower' {wrong}/{runs}   goal ≤ {runs * 0.05:g}"
        else:
            met = verdicts[want] >= runs * 0.95
            goal = f"'{want}' {verdicts[want]}/{runs}   goal ≥ {runs * 0.95:g}"
        ok &= met
        print(f"compare(f, {label}) × {runs}: {dict(verdicts)}; decided at look {dict(sorted(looks.items()))}; "
              f"ratios {min(ratios):.3f}–{max(ratios):.3f}; wall time per verdict: median "
              f"{statistics.median(walls):.2f} s, max {max(walls):.2f} s; {goal}: {'met' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
