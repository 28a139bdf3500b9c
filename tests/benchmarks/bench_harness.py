"""labkit's own harness, measured: span overhead, and how often compare() gets its verdict right.

Goals (issue 2): span enter+exit ≤ 1 µs; compare(f, f) says "same" ≥ 19/20; compare(f, 1.2×f) says
"slower" ≥ 19/20. Prints the figures; exits 1 when a goal is missed.
"""

from __future__ import annotations

import collections
import sys
import time

import labkit
from labkit.trace import collect, span

RUNS = 20


def work(n: int = 3000) -> int:
    return sum(range(n))


def twin() -> int:
    return work(3600)  # 20 % more iterations of the same loop


def main() -> int:
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

    # --- compare() against itself and a 20 %-slower twin, 20 times each
    for label, cand, want in (("itself", work, "same"), ("a 20%-slower twin", twin, "slower")):
        verdicts, ratios = collections.Counter(), []
        t0 = time.perf_counter()
        for i in range(RUNS):
            c = labkit.compare(work, cand, seed=i)
            verdicts[c.verdict] += 1
            ratios.append(c.ratio)
        hits = verdicts[want]
        wrong = sum(v for k, v in verdicts.items() if k not in (want, "inconclusive"))
        met = hits >= 19 and wrong <= 1
        ok &= met
        print(f"compare(f, {label}) × {RUNS}: {dict(verdicts)}; '{want}' {hits}/{RUNS}; ratios "
              f"{min(ratios):.3f}–{max(ratios):.3f}; {time.perf_counter() - t0:.1f} s   goal ≥ 19/20: "
              f"{'met' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
