"""What a line-by-line view costs: ``labkit.profile.lines``'s timing pass beside line_profiler's, on one function.

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_profile_lines.py [--rounds 15]

Interleaved rounds (plain call, labkit's tracer, line_profiler's, in turn), each a call of a pure-Python loop of
many short lines — the worst case for a line tracer: one line event per few bytecodes. It prints each tracer's
median time as a multiple of the plain call's, measured side by side in one run. The allocation pass is a second
run under memray and is not part of the timing (counting is never timing). line_profiler is optional
(``pip install line_profiler``): without it, only labkit's ratio is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from labkit.profile import lines


def busy(n: int = 20_000) -> int:
    total = 0
    for i in range(n):
        if i % 3:
            total += i
        else:
            total -= 1
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    try:
        from line_profiler import LineProfiler
    except ImportError:
        LineProfiler = None  # noqa: N806
    sides = {"plain": lambda: busy(), "labkit lines": lambda: lines(busy, allocations=False)}
    if LineProfiler is not None:
        def with_line_profiler() -> None:
            lp = LineProfiler(busy)
            lp.runcall(busy)
        sides["line_profiler"] = with_line_profiler
    times: dict[str, list[int]] = {k: [] for k in sides}
    for _ in range(a.rounds):
        for name, fn in sides.items():
            t0 = time.perf_counter_ns()
            fn()
            times[name].append(time.perf_counter_ns() - t0)
    plain = statistics.median(times["plain"])
    print(f"python {sys.version.split()[0]}, {a.rounds} interleaved rounds of busy(20_000)")
    for name, ts in times.items():
        print(f"  {name:<14} median {statistics.median(ts) / 1e6:8.2f} ms   {statistics.median(ts) / plain:6.1f}x the plain call")
    if LineProfiler is None:
        print("  line_profiler not installed: pip install line_profiler to print its ratio beside")
    return 0


if __name__ == "__main__":
    sys.exit(main())
